"""The typed result of `fold_continuation`: a `FoldCurve` in two parameters and its
`Cusp` points. A cusp carries what produced it (in memory only), so that
`fold_continuation(curve.cusps[0], curve.cusps[0].q, second=..., q_span=...)` takes it
alone; every record is also a read-only mapping of its keys."""

import dataclasses
from typing import Any

import numpy as np

from .._results import Result, context, optional


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Cusp(Result):
    """A cusp on a fold curve: the fold's quadratic coefficient passes through zero, two
    folds of the one-parameter branches meet and vanish (normal form
    `y' = b1 + b2 y + c y^3`)."""

    kind: str
    """`"cusp"`."""
    p: float
    """The first parameter there."""
    q: float
    """The second parameter there."""
    x: np.ndarray
    """The steady state there (an energy model's own coordinates)."""
    index: int
    """The curve's point just before it."""
    located: bool
    """Newton on the extended system converged, no farther than the bracketing step
    from where it started (else `p`, `q`, `x` are the interpolated guess)."""
    residual_rms: float
    """RMS of the extended system there."""
    s: float
    """Its arclength along the curve (interpolated)."""
    eigenvalues: np.ndarray | None = optional()
    """`[n]`: the eigenvalues of `df/dx` there (located points)."""
    c: float | None = optional()
    """The normal form's cubic coefficient (located points; `c < 0`: the three steady
    states on the bistable side are stable, unstable, stable)."""
    y: np.ndarray | None = optional()
    """Energy models: the manifold coordinates followed."""
    fixed_point_residual_rms: float | None = optional()
    """Energy models: the model's RMS residual there."""
    system: Any = context()
    """The field or energy model of the curve (in memory only)."""
    args: Any = context()
    """Its conditions as the curve started (in memory only)."""
    parameter: Any = context()
    """An energy model's first parameter (in memory only)."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class FoldCurve(Result):
    """A fold followed in a second parameter `q` (`fold_continuation`): `m` points of the
    curve in `(p, q)` where the steady state is a fold, in arclength order."""

    p: np.ndarray
    """`[m]`: the first parameter."""
    q: np.ndarray
    """`[m]`: the second parameter."""
    x: np.ndarray
    """`[m, *shape]`: the fold's steady state (an energy model's own coordinates)."""
    tests: np.ndarray
    """`[m, 1]`: the cusp test function (signs aligned from point to point)."""
    s: np.ndarray
    """`[m]`: arclength."""
    eigenvalues: np.ndarray
    """`[m, n]`: of `df/dx` (complex, largest real part first): one of them zero."""
    border_cosines: np.ndarray
    """`[m, 2]`: `c . v / |v|` and `b . w / |w|` with the borders in use (re-seeded
    below `RESEED_COSINE`)."""
    residual_rms: np.ndarray
    """`[m]`: RMS of the augmented system."""
    newton_iterations: np.ndarray
    """`[m]`: the corrector's iterations."""
    codim2: list[Cusp]
    """The cusps found, in arclength order."""
    stop_reason: str
    """As `continuation`'s; `"closed"` once round a closed curve."""
    stall: dict | None
    """With `stop_reason="ds_min"`, the last refused step; else None."""
    metadata: dict
    """What produced it."""
    y: np.ndarray | None = optional()
    """Energy models: `[m, ...]`, the manifold coordinates followed."""
    fixed_point_residual_rms: np.ndarray | None = optional()
    """Energy models: `[m]`, the model's RMS residual at each point."""

    @property
    def cusps(self) -> list[Cusp]:
        """The located and unlocated cusps (`codim2`)."""
        return [point for point in self.codim2 if point.kind == "cusp"]


def fold_curve_record(result: dict, **produced_by: Any) -> FoldCurve:
    """The typed `FoldCurve` from the dict that `fold_continuation` built."""
    return FoldCurve(**dict(result, codim2=[Cusp(**c, **produced_by) for c in result["codim2"]]))
