"""Solvers by name or as diffrax objects, and how many vector-field evaluations a step of
each costs."""

import dataclasses
import typing

import diffrax
import jax
import numpy as np
from jaxtyping import ArrayLike, Int

from ._auto import EXPLICIT_EVALS, AutoSwitch
from ._sde import DRIFT_EVALS, SDE_BASES, SDE_SOLVER_NAMES, SDE_SOLVERS

_SOLVERS = {
    "euler": diffrax.Euler,
    "heun": diffrax.Heun,
    "midpoint": diffrax.Midpoint,
    "ralston": diffrax.Ralston,
    "bosh3": diffrax.Bosh3,
    "tsit5": diffrax.Tsit5,
    "dopri5": diffrax.Dopri5,
    "dopri8": diffrax.Dopri8,
    "kvaerno5": diffrax.Kvaerno5,
    "auto": AutoSwitch,
}
SOLVER_NAMES = tuple(_SOLVERS)


def _is_number(value) -> bool:
    return isinstance(value, (int, float, np.ndarray, np.generic, jax.Array))


@dataclasses.dataclass(frozen=True)
class SolverPreset:
    """A diffrax solver (by name, or described from an instance) with its cost model.

    `name`: the solver's name (`"tsit5"`) or, for an instance, its class name
    (`"Kvaerno3"`). `stages`: vector-field evaluations per attempted step (one fewer
    when `fsal`, plus one at the start). `adaptive`: it carries an error estimate, so
    adaptive step control applies. `implicit`: Newton iterations make the true count
    vary; the count given is then a lower bound (one evaluation per stage, Jacobians
    not counted). `nfe_exact`: whether `nfe` is the true count (explicit Runge-Kutta
    methods with a tableau, and Euler); otherwise it is an estimate, see `nfe_note`.
    `instance`: the solver object a preset was described from (`None` for names).
    """

    name: str
    stages: int
    fsal: bool
    adaptive: bool
    implicit: bool
    order: int | None
    nfe_exact: bool = True
    self_counting: bool = False
    instance: diffrax.AbstractSolver | None = dataclasses.field(
        default=None, compare=False, repr=False
    )

    def make(self) -> diffrax.AbstractSolver:
        return self.instance if self.instance is not None else _SOLVERS[self.name]()

    def nfe(self, num_steps: Int[ArrayLike, "*B"]) -> Int[ArrayLike, "*B"]:
        """Vector-field evaluations for `num_steps` attempted steps (array or int).
        For a `self_counting` solver ("auto") this is only the count of its explicit
        mode; `solvers.solve` reports the solver's own counts instead."""
        if self.fsal:
            return (self.stages - 1) * num_steps + 1
        return self.stages * num_steps

    @property
    def nfe_note(self) -> str:
        if self.self_counting:
            return (
                "exact count kept by the solver: evaluations plus JVPs (jvp_evals) of "
                f"the accepted steps; rejected steps added at {EXPLICIT_EVALS} each, exact "
                "for explicit ones (an estimate when a step was rejected after a switch "
                "to the implicit mode: see nfe_is_estimate)"
            )
        if self.implicit:
            return (
                "lower bound: one evaluation per stage and step; Newton iterations and "
                "Jacobians not counted"
            )
        if not self.nfe_exact:
            return (
                f"estimate: one evaluation per attempted step; the count of {self.name} "
                "cannot be derived from a Butcher tableau"
            )
        return f"exact: {self.stages} stages per attempted step" + (
            " (first same as last), plus one at the start" if self.fsal else ""
        )

    @property
    def needs_controller_tolerances(self) -> bool:
        """An implicit solver whose root finder takes its tolerances from the step-size
        controller (diffrax's default), so that constant steps leave them unset."""
        root_finder = getattr(self.make(), "root_finder", None)
        # diffrax marks borrowed tolerances with a sentinel object, not a number.
        return (
            self.implicit
            and root_finder is not None
            and any(not _is_number(getattr(root_finder, attr, 0.0)) for attr in ("rtol", "atol"))
        )


def _label(solver) -> str:
    return repr(solver) if isinstance(solver, str) else type(solver).__name__


def _fits_one_ode_term(solver) -> bool:
    structure = solver.term_structure
    origin = typing.get_origin(structure) or structure
    return isinstance(origin, type) and issubclass(diffrax.ODETerm, origin)


def _refuse_term_structure(solver):
    name = type(solver).__name__
    tableau = getattr(solver, "tableau", None)
    structure = solver.term_structure
    if isinstance(solver, diffrax.AbstractImplicitSolver) or isinstance(
        tableau, diffrax.MultiButcherTableau
    ):
        raise ValueError(
            f"solver {name} is an IMEX solver: it needs a diffrax.MultiTerm of an explicit "
            "and an implicit term, but solvers.solve integrates one vector field (one "
            "ODETerm). For an implicit solve use an implicit ODE solver such as "
            "diffrax.Kvaerno3(), diffrax.Kvaerno4() or solver='kvaerno5' (with rtol and atol)."
        )
    sde = (
        diffrax.AbstractItoSolver,
        diffrax.AbstractStratonovichSolver,
        diffrax.AbstractSRK,
        diffrax.AbstractFosterLangevinSRK,
    )
    if isinstance(solver, sde) or any(
        word in str(structure) for word in ("Brownian", "LevyArea", "Langevin", "ControlTerm")
    ):
        raise ValueError(
            f"solver {name} is a stochastic (SDE) solver: it needs a diffrax.MultiTerm of a "
            "drift and a diffusion term driven by a Brownian motion, but solvers.solve "
            "integrates an ODE (one ODETerm). Choose an ODE solver: a name ("
            f"{', '.join(SOLVER_NAMES)}) or an instance such as diffrax.Tsit5()."
        )
    raise ValueError(
        f"solver {name} needs the terms {structure}, but solvers.solve integrates one "
        "vector field (one diffrax.ODETerm); choose a solver whose term_structure accepts "
        "an ODETerm, such as diffrax.Tsit5()."
    )


def _is_plain(solver, base) -> bool:
    """`solver` is a `base` whose `step` (where evaluations happen) is `base`'s own."""
    return isinstance(solver, base) and type(solver).step is base.step


def _describe(solver: diffrax.AbstractSolver, name: str | None = None) -> SolverPreset:
    if isinstance(solver, AutoSwitch):  # counts its own evaluations (solver state)
        return SolverPreset(
            name or type(solver).__name__,
            EXPLICIT_EVALS + 1,
            True,
            True,
            False,
            5,
            nfe_exact=True,
            self_counting=True,
            instance=None if name else solver,
        )
    if not _fits_one_ode_term(solver):
        _refuse_term_structure(solver)
    tableau = getattr(solver, "tableau", None)
    implicit = isinstance(solver, diffrax.AbstractImplicitSolver)
    if _is_plain(solver, diffrax.AbstractRungeKutta) and isinstance(
        tableau, diffrax.ButcherTableau
    ):
        stages, fsal, exact = tableau.num_stages, bool(tableau.fsal), not implicit
    elif _is_plain(solver, diffrax.Euler):
        stages, fsal, exact = 1, False, True
    else:  # ReversibleHeun, HalfSolver, LeapfrogMidpoint, a custom step: not derivable
        stages, fsal, exact = 1, False, False
    adaptive = isinstance(solver, diffrax.AbstractAdaptiveSolver)
    try:
        order = solver.order(diffrax.ODETerm(lambda t, y, args: y))
    except Exception:  # noqa: BLE001  a custom solver may not say
        order = None
    return SolverPreset(
        name or type(solver).__name__,
        stages,
        fsal,
        adaptive,
        implicit,
        order,
        nfe_exact=exact,
        instance=None if name else solver,
    )


PRESETS = {name: _describe(cls(), name) for name, cls in _SOLVERS.items()}


def _describe_sde(solver: diffrax.AbstractSolver, name: str | None = None) -> SolverPreset:
    """An SDE solver: `stages` counts its drift evaluations per step (the diffusion's
    are not counted); exact for the named ones."""
    known = {cls: key for key, cls in SDE_SOLVERS.items()}
    key = name or known.get(type(solver))
    return SolverPreset(
        name or type(solver).__name__,
        DRIFT_EVALS.get(key, 1) if key else 1,
        False,
        isinstance(solver, diffrax.AbstractAdaptiveSolver),
        False,
        None,
        nfe_exact=key is not None,
        instance=solver,
    )


def _sde_preset(solver) -> SolverPreset:
    if isinstance(solver, str):
        if solver not in SDE_SOLVERS:
            ode = " (an ODE solver)" if solver in PRESETS else ""
            raise ValueError(
                f"solver {solver!r}{ode} cannot solve at a temperature; choose one of "
                f"{', '.join(SDE_SOLVER_NAMES)} (euler is Euler-Maruyama)."
            )
        return _describe_sde(SDE_SOLVERS[solver](), solver)
    if isinstance(solver, diffrax.AbstractSolver) and isinstance(solver, SDE_BASES):
        return _describe_sde(solver)
    raise ValueError(
        f"solver {_label(solver)} cannot solve an SDE: at a temperature pass a name "
        f"({', '.join(SDE_SOLVER_NAMES)}) or a diffrax SDE solver such as diffrax.Heun()."
    )


def get_preset(solver: str | diffrax.AbstractSolver, sde: bool = False) -> SolverPreset:
    """The `SolverPreset` of a solver name or of a `diffrax.AbstractSolver` instance.
    Raises `ValueError` for unknown names and for solvers that cannot integrate one ODE
    term (IMEX solvers needing a `MultiTerm`, SDE-only solvers). With `sde` (a solve at a
    temperature): the SDE solvers (`SDE_SOLVER_NAMES` or a diffrax SDE solver)."""
    if sde:
        return _sde_preset(solver)
    if isinstance(solver, str):
        if solver in SDE_SOLVER_NAMES and solver not in PRESETS:
            raise ValueError(
                f"solver {solver!r} is an SDE solver: it solves at a temperature "
                "(temperature=T, key=key); without one choose one of "
                f"{', '.join(SOLVER_NAMES)}."
            )
        if solver not in PRESETS:
            raise ValueError(f"Unknown solver {solver!r}; choose one of {', '.join(SOLVER_NAMES)}.")
        return PRESETS[solver]
    if isinstance(solver, type) and issubclass(solver, diffrax.AbstractSolver):
        raise ValueError(
            f"solver=diffrax.{solver.__name__} is a class; pass an instance: "
            f"solver=diffrax.{solver.__name__}()."
        )
    if not isinstance(solver, diffrax.AbstractSolver):
        raise ValueError(
            f"solver must be a name ({', '.join(SOLVER_NAMES)}) or a diffrax.AbstractSolver "
            f"instance such as diffrax.Tsit5() (got {solver!r})."
        )
    return _describe(solver)
