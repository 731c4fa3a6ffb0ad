"""Settings objects: what a study or a tool is asked to do beyond its subject and its
question, in one frozen, documented object per job (as BifurcationKit's `ContinuationPar`),
so that no public function of `et_ode.analysis` takes more than ten parameters.

How a trajectory is solved is `solvers.SolveOptions` (solver, step, tolerances, caps,
flow), taken by every study as `options`. What is here:

- `Settings`, the base: a frozen dataclass with `replace(**changes)` (checked again) and
  `to_json()` for a study's metadata; each subclass checks its fields in `check()`.
- `NewtonSettings`, how a Newton corrector solves `f = 0`: the tolerance, the iteration
  cap and the linear algebra (dense or GMRES, a preconditioner). Continuation, fold
  curves, deflation and the polish of fixed points all take one.

The tolerances have one name per kind across the package (docs: study outputs, conventions):
`rtol`/`atol` for step control, `fixed_point_atol` for the RMS of G at which a state
counts as a fixed point, `newton_tol` for a Newton corrector's RMS residual,
`distance_tol` for two states being the same one, `locate_tol` for locating a special
point, `eigen_tol` for an iterative eigen-solver's residual.
"""

import dataclasses
import math
import numbers
from collections.abc import Callable
from typing import Any, TypeVar

from ._records import to_json

_S = TypeVar("_S", bound="Settings")


@dataclasses.dataclass(frozen=True)
class Settings:
    """Base of the settings objects: frozen, checked when made (`check`), `replace` for a
    variant, `to_json` for metadata (functions by name)."""

    def __post_init__(self):
        self.check()

    def check(self) -> None:
        """Raise `ValueError` naming the field and the fix for a value out of range."""

    def replace(self: _S, **changes: Any) -> _S:
        """A copy with `changes` applied (field names; an unknown one is refused)."""
        names = {field.name for field in dataclasses.fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise TypeError(
                f"{type(self).__name__} has no field {', '.join(unknown)}; its fields are "
                f"{', '.join(sorted(names))}."
            )
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict:
        """The fields as JSON values (a function by its name, nested settings as dicts)."""
        values = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, Settings):
                value = value.to_json()
            elif callable(value):
                value = getattr(value, "__name__", type(value).__name__)
            values[field.name] = to_json(value)
        return values


def positive(settings: Settings, name: str, *, allow_none: bool = False) -> None:
    """Refuse `settings.<name>` unless it is a finite number > 0 (or None if allowed)."""
    value = getattr(settings, name)
    if value is None and allow_none:
        return
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not (ok and math.isfinite(value) and value > 0):
        raise ValueError(
            f"{type(settings).__name__}.{name} must be a finite number > 0 (got {value!r})."
        )


def at_least(settings: Settings, name: str, low: int) -> None:
    """Refuse `settings.<name>` unless it is an integer >= `low`."""
    value = getattr(settings, name)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(
            f"{type(settings).__name__}.{name} must be an integer >= {low} (got {value!r})."
        )


@dataclasses.dataclass(frozen=True)
class NewtonSettings(Settings):
    """How a Newton corrector solves `f = 0`.

    - `newton_tol`: the RMS of `f` at which Newton has converged (the field's units;
      `None`: 1e-10 in float64, 1e-5 in float32, whose round-off stops Newton above
      1e-10). For an energy system's fixed points `f` is G: this is then the RMS of G
      that a polished point reaches.
    - `max_newton`: iterations per solve.
    - `matrix_free`: `True` GMRES on Jacobian-vector products, `False` dense Jacobians,
      `None` dense up to the tool's stated size and matrix-free above it (or with a
      `preconditioner`).
    - `preconditioner`: for a field (not an energy model), matrix-free only:
      `preconditioner(v, x, p, args) -> ~(df/dx)^-1 v` (`v`, `x` of the state's shape,
      linear in `v`), applied on the right of every GMRES solve (the residual tested
      stays the true one). Pass the same function on every call: it is part of the
      compiled programs' key.
    """

    newton_tol: float | None = None
    max_newton: int = 10
    matrix_free: bool | None = None
    preconditioner: Callable[..., Any] | None = None

    def check(self) -> None:
        positive(self, "newton_tol", allow_none=True)
        at_least(self, "max_newton", 1)
        if self.matrix_free not in (None, True, False):
            raise ValueError(
                f"NewtonSettings.matrix_free must be True, False or None (got "
                f"{self.matrix_free!r})."
            )
        if self.preconditioner is not None and not callable(self.preconditioner):
            raise ValueError(
                "NewtonSettings.preconditioner must be a function (v, x, p, args) -> "
                f"~(df/dx)^-1 v (got {type(self.preconditioner).__name__})."
            )


def polish_or_none(settings: Settings, name: str = "polish") -> None:
    """Refuse `settings.<name>` unless it is a `NewtonSettings` without a preconditioner
    (the polish of an energy system's fixed point takes none) or None (no polish)."""
    value = getattr(settings, name)
    where = f"{type(settings).__name__}.{name}"
    if value is None:
        return
    if not isinstance(value, NewtonSettings):
        raise ValueError(
            f"{where} must be an analysis.NewtonSettings or None (no polish) (got "
            f"{type(value).__name__})."
        )
    if value.preconditioner is not None:
        raise ValueError(
            f"{where}.preconditioner is not used: the polish of an energy system's fixed "
            "point takes none (leave it None)."
        )
