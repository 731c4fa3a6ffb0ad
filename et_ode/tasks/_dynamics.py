"""How an Energy Transformer core is run inside a task model: `Dynamics`, the frozen
dataclass that configs and checkpoint headers hold (images and graphs alike)."""

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from .. import solvers
from ..vocab import Adjoint, Flow
from ._schema import config_section

# The solver names `solvers.solve` accepts (a Literal: the JSON Schema and the docs list them).
# Built from the names at run time, which a type checker cannot evaluate: for it, a str.
if TYPE_CHECKING:
    SolverName = str
else:
    SolverName = Literal[solvers.SOLVER_NAMES]


@config_section
class Dynamics:
    """How the core is run: a `solvers.solve` configuration plus the conditions (the
    `[dynamics]` section of a config). The paper's: euler, dt0 0.1, t1 1.2, native flow,
    checkpoint adjoint. The combination is checked as `solvers.solve` checks it."""

    solver: Annotated[
        SolverName,
        Field(description=(f"a solver name of solvers.solve: {', '.join(solvers.SOLVER_NAMES)}")),
    ] = "euler"
    dt0: Annotated[
        float | None,
        Field(
            gt=0,
            description=(
                "the step (tau units): constant steps without rtol/atol, the first step with "
                f"them; constant steps to t1 number at most {solvers.MAX_STEPS_LIMIT} "
                "(diffrax's int32 step counter)"
            ),
        ),
    ] = 0.1
    t1: Annotated[
        float, Field(gt=0, description=("the end time (tau units); with fixed_point_atol, the cap"))
    ] = 1.2
    rtol: Annotated[
        float | None,
        Field(gt=0, description=("relative tolerance of adaptive steps (none: constant steps)")),
    ] = None
    atol: Annotated[
        float | None, Field(gt=0, description=("absolute tolerance of adaptive steps"))
    ] = None
    flow: Annotated[
        Flow,
        Field(
            description=(
                "native (the paper's tau dx/dt = -dE/dg) or projected (each token's LayerNorm "
                "scale kept fixed)"
            )
        ),
    ] = "native"
    adjoint: Annotated[
        Adjoint,
        Field(
            description=(
                "how gradients go through the solve: checkpoint (exact, of the discrete "
                "solve), backsolve or implicit (at a fixed point)"
            )
        ),
    ] = "checkpoint"
    max_steps: Annotated[
        int | None,
        Field(
            ge=1,
            le=solvers.MAX_STEPS_LIMIT,
            description=(
                "step cap (none: solve's own, exact for constant steps to a fixed t1, with "
                f"every step checkpointed for short solves); at most {solvers.MAX_STEPS_LIMIT} "
                "= 2**31 - 1, diffrax's int32 step counter"
            ),
        ),
    ] = None
    fixed_point_atol: Annotated[
        float | None, Field(gt=0, description=("stop at RMS(G) below this (then t1 is the cap)"))
    ] = None
    clamp_visible: Annotated[
        bool,
        Field(
            description=(
                "image models: tokens that show image content (not replaced by MASK) do not move"
            )
        ),
    ] = False
    external_field: Annotated[
        bool,
        Field(
            description=(
                "image models: add E_ext = -lambda sum_A c_A . g_A, c the encoded tokens, "
                "lambda learnable"
            )
        ),
    ] = False

    def __post_init__(self):
        solvers.check_options(**self.solve_options())

    @property
    def options(self) -> solvers.SolveOptions:
        """How these dynamics solve (solver, step, tolerances, cap, flow) as the
        `solvers.SolveOptions` that `solve` and every study take; the horizon `t1`, the
        fixed-point stop and the adjoint stay here."""
        return solvers.SolveOptions(
            solver=self.solver,
            dt0=self.dt0,
            rtol=self.rtol,
            atol=self.atol,
            max_steps=self.max_steps,
            flow=self.flow,
        )

    @classmethod
    def from_options(cls, options: solvers.SolveOptions, **fields: Any) -> "Dynamics":
        """Dynamics that solve as `options` do, with the other `fields` (`t1`,
        `adjoint`, `fixed_point_atol`, `clamp_visible`, `external_field`) given or left
        at their defaults. A config holds names and numbers only: a diffrax solver object,
        a step-size controller or a `dtmin` is refused, naming the field."""
        if not isinstance(options, solvers.SolveOptions):
            raise TypeError(
                f"options must be a solvers.SolveOptions (got {type(options).__name__})."
            )
        if not isinstance(options.solver, str):
            raise ValueError(
                "Dynamics name their solver (a config holds names): pass one of "
                f"{', '.join(solvers.SOLVER_NAMES)} (got {type(options.solver).__name__})."
            )
        for name in ("stepsize_controller", "dtmin"):
            if getattr(options, name) is not None:
                raise ValueError(
                    f"Dynamics have no {name} (a config holds solver, dt0, rtol, atol, "
                    f"max_steps and flow): leave options.{name} None."
                )
        own = dict(options.keywords())
        del own["stepsize_controller"], own["dtmin"]
        clash = sorted(set(own) & set(fields))
        if clash:
            raise ValueError(
                f"{', '.join(clash)} given both in options and beside them: give each once."
            )
        return cls(**own, **fields)

    def solve_options(self) -> dict:
        """The keyword arguments of `solvers.solve` for these dynamics: `options`'
        fields, `t1`, `adjoint` and the fixed-point stop."""
        options: dict[str, Any] = dict(
            solver=self.solver,
            dt0=self.dt0,
            t1=self.t1,
            rtol=self.rtol,
            atol=self.atol,
            flow=self.flow,
            adjoint=self.adjoint,
            max_steps=self.max_steps,
        )
        if self.fixed_point_atol is not None:
            options["stop"] = solvers.FixedPointStop(atol=self.fixed_point_atol)
        return options


def solve_keywords(
    dynamics: Dynamics, options: solvers.SolveOptions | None, overrides: dict
) -> dict:
    """`solvers.solve`'s keywords for a task model's solve: the dynamics' own
    (`Dynamics.solve_options`), with `options` (a `solvers.SolveOptions`, or None)
    replacing their solver, step, tolerances, cap and flow, then `overrides` (any keyword
    of `solve`: `t1`, `stop`, `adjoint`, `save`, `throw`, ...). A field of `options`
    given among the overrides too is refused (the same choice in two places)."""
    keywords = dynamics.solve_options()
    if options is not None:
        if not isinstance(options, solvers.SolveOptions):
            raise TypeError(
                f"options must be a solvers.SolveOptions (got {type(options).__name__}); "
                "build one with solvers.SolveOptions(solver=..., dt0=..., rtol=..., atol=...) "
                "or start from model.dynamics.options."
            )
        given = options.keywords()
        both = sorted(set(overrides) & set(given))
        if both:
            raise ValueError(
                f"{', '.join(f'{name}=' for name in both)} given both in options and as a "
                f"keyword: give each choice once, e.g. options.replace({both[0]}=...)."
            )
        keywords.update(given)
    return keywords | overrides
