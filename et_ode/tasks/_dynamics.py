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

    def solve_options(self) -> dict:
        """The keyword arguments of `solvers.solve` for these dynamics."""
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
