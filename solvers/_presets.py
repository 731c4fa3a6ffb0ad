"""Solvers by name, and how many vector-field evaluations a step of each costs."""

import dataclasses

import diffrax

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
}
SOLVER_NAMES = tuple(_SOLVERS)


@dataclasses.dataclass(frozen=True)
class SolverPreset:
    """A named diffrax solver with its cost model.

    `stages`: vector-field evaluations per attempted step (one fewer when `fsal`, plus
    one at the start). `adaptive`: it carries an error estimate, so PID step control
    applies. `implicit`: Newton iterations make the true count vary; the count given is
    then a lower bound (one evaluation per stage, Jacobians not counted).
    """

    name: str
    stages: int
    fsal: bool
    adaptive: bool
    implicit: bool
    order: int

    def make(self) -> diffrax.AbstractSolver:
        return _SOLVERS[self.name]()

    def nfe(self, num_steps):
        """Vector-field evaluations for `num_steps` attempted steps (array or int)."""
        if self.fsal:
            return (self.stages - 1) * num_steps + 1
        return self.stages * num_steps


def _preset(name: str) -> SolverPreset:
    solver = _SOLVERS[name]()
    tableau = getattr(solver, "tableau", None)
    if tableau is None:  # Euler has no tableau
        stages, fsal = 1, False
    else:
        stages, fsal = tableau.num_stages, bool(tableau.fsal)
    adaptive = name not in ("euler",) and hasattr(tableau, "b_error")
    implicit = isinstance(solver, diffrax.AbstractImplicitSolver)
    return SolverPreset(name, stages, fsal, adaptive, implicit, solver.order(None))


PRESETS = {name: _preset(name) for name in _SOLVERS}


def get_preset(name: str) -> SolverPreset:
    if name not in PRESETS:
        raise ValueError(f"Unknown solver {name!r}; choose one of {', '.join(SOLVER_NAMES)}.")
    return PRESETS[name]
