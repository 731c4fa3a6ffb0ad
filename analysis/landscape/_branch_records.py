"""The typed results of `continuation` and `switch_branch`: a `Branch` of steady states
and its special points (`Fold`, `BranchPoint`, `HopfPoint`, each a `Bifurcation`); and
of `fold_continuation`: a `FoldCurve` in two parameters and its `Cusp` points.

A special point carries what produced it (the system and its conditions, in memory
only), so that the next call takes it alone: `switch_branch(branch.branch_points[0],
p_span=...)`, `fold_continuation(branch.folds[0], q0, second=..., q_span=...)`,
`fold_continuation(curve.cusps[0], curve.cusps[0].q, second=..., q_span=...)`. Read
back from JSON (`Branch.from_json`) it has none, and those calls take the system again.
Every record is also a read-only mapping of its keys (`branch["p"] is branch.p`).

How a branch is followed (steps, caps, eigenvalues, Newton) is one
`ContinuationSettings`, which `continuation`, `switch_branch` and `fold_continuation`
take.
"""

import dataclasses
from typing import Any, ClassVar, Literal, cast

import numpy as np

from .._common import is_count
from .._results import Result, build, context, optional
from .._settings import NewtonSettings, Settings, positive
from ._branch_kernels import SPECTRA


@dataclasses.dataclass(frozen=True)
class ContinuationSettings(Settings):
    """How `continuation` (and `switch_branch`, `fold_continuation`) follows a branch:
    the pseudo-arclength steps, the caps, the eigenvalues kept and the Newton corrector
    (as BifurcationKit's `ContinuationPar`).

    - `ds`, `ds_min`, `ds_max`: the first, smallest and largest arclength step (`0 <
      ds_min <= ds <= ds_max`; defaults 0.01, 1e-8, 0.1). The branch stops where the
      step falls below `ds_min`.
    - `direction`: `+1` (default) starts towards larger `p`, `-1` smaller
      (`switch_branch`: along the other branch's tangent, or against it).
    - `max_points`: the most points kept (an integer >= 2; default 1000).
    - `max_turn`: the largest angle (radians, default 0.5) between consecutive tangents
      before a step is refused as a possible jump to another branch.
    - `locate_tol`: the arclength bracket to which a bifurcation is located (`None`:
      1e-10 in float64, 1e-5 in float32, where the corrector resolves steps only to a
      few units of round-off of the state).
    - `state_weight`: the arclength's metric, `ds^2 = state_weight RMS(dx)^2 + dp^2`
      (> 0, default 1: RMS over the state's `n` entries, so that a large state does not
      crowd out `p`).
    - `k`: eigenvalues kept per point (an integer >= 1, default 6; at most the state's
      `n` entries dense, `n - 2` matrix-free: `metadata["k"]` says how many).
    - `spectrum`: which `k` eigenvalues each point keeps: `"rightmost"` (default, the
      largest real parts) or `"nearest_zero"` (shift-and-invert, for stiff fields:
      `continuation`'s docstring says what it then cannot see).
    - `newton`: the corrector (`NewtonSettings`): `newton_tol`, the RMS of `f` at which
      it has converged (`None`: 1e-10 in float64, 1e-5 in float32); `max_newton`
      iterations per corrector (default 10); `matrix_free` (`None`: dense up to
      `DENSE_MAX` unknowns, matrix-free above or with a `preconditioner`); and the
      `preconditioner` of a field's `df/dx` in every GMRES solve (matrix-free only; for
      branch switching with `spectrum="nearest_zero"` transposable by
      `jax.linear_transpose`).

    ```python
    settings = analysis.ContinuationSettings(ds=0.05, ds_max=0.2, k=2)
    branch = analysis.continuation(field, x0, p0, p_span=(0.0, 1.0), settings=settings)
    ```
    """

    ds: float = 0.01
    ds_min: float = 1e-8
    ds_max: float = 0.1
    direction: Literal[1, -1] = 1
    max_points: int = 1000
    max_turn: float = 0.5
    locate_tol: float | None = None
    state_weight: float = 1.0
    k: int = 6
    spectrum: Literal["rightmost", "nearest_zero"] = "rightmost"
    newton: NewtonSettings = NewtonSettings()

    def check(self) -> None:
        for name in ("ds", "ds_min", "ds_max", "max_turn", "state_weight"):
            positive(self, name)
        positive(self, "locate_tol", allow_none=True)
        if not self.ds_min <= self.ds <= self.ds_max:
            raise ValueError(
                "ContinuationSettings: steps must satisfy 0 < ds_min <= ds <= ds_max (got "
                f"ds={self.ds}, ds_min={self.ds_min}, ds_max={self.ds_max})."
            )
        if self.direction not in (1, -1) or isinstance(self.direction, bool):
            raise ValueError(
                f"ContinuationSettings.direction must be +1 or -1 (got {self.direction!r})."
            )
        for name, least in (("max_points", 2), ("k", 1)):
            if not is_count(getattr(self, name), least):
                raise ValueError(
                    f"ContinuationSettings.{name} must be an integer >= {least} (got "
                    f"{getattr(self, name)!r})."
                )
        if self.spectrum not in SPECTRA:
            raise ValueError(
                f"ContinuationSettings.spectrum must be one of {SPECTRA} (got {self.spectrum!r})."
            )
        if not isinstance(self.newton, NewtonSettings):
            raise TypeError(
                "ContinuationSettings.newton must be an analysis.NewtonSettings (got "
                f"{type(self.newton).__name__}): NewtonSettings(newton_tol=..., ...)."
            )


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Bifurcation(Result):
    """A special point found between two points of a branch, located by bisection in
    arclength (`Fold`, `BranchPoint` or `HopfPoint` by `kind`)."""

    kind: str
    """`"fold"`, `"branch_point"` or `"hopf"`."""
    p: float
    """The parameter there."""
    x: np.ndarray
    """The steady state there (the system's state shape; the model's own coordinates for
    an energy model)."""
    s: float
    """Its arclength along the branch (the points' `s` bracket it)."""
    index: int
    """The branch point just before it."""
    s_bracket: float
    """The final location bracket in arclength."""
    located: bool
    """Whether `s_bracket` reached `locate_tol`."""
    eigenvalues: np.ndarray
    """`[k]`: the kept eigenvalues there (complex, largest real part first)."""
    residual_rms: float
    """RMS of the field there (Newton's residual)."""
    unstable_change: int
    """The change in the number of eigenvalues with a positive real part across it, in
    the branch's direction: +-1, +-2 for a Hopf pair."""
    eigenvalue: complex | None = optional()
    """The eigenvalue crossing zero (or the imaginary axis)."""
    eigenvalue_jump: bool | None = optional()
    """Branch and Hopf points: the crossing eigenvalue jumped across zero (as at a kink of
    a piecewise-smooth field) instead of passing through it."""
    y: np.ndarray | None = optional()
    """Energy models: the manifold coordinates that were followed."""
    fixed_point_residual_rms: float | None = optional()
    """Energy models: the model's RMS residual there."""
    system: Any = context()
    """The field or energy model of the branch (in memory only)."""
    args: Any = context()
    """Its conditions (in memory only)."""
    parameter: Any = context()
    """An energy model's parameter (a lens name or function; in memory only)."""

    KINDS: ClassVar[dict[str, type[Result]]] = {}


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Fold(Bifurcation):
    """A fold: `p` turns back along the branch (a real eigenvalue passes through 0);
    `fold_continuation` follows it in a second parameter."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class BranchPoint(Bifurcation):
    """A branch point: a real eigenvalue passes through 0 and another branch crosses this
    one; `switch_branch` follows the other branch."""

    switch_tangent: np.ndarray | None = optional()
    """`[n + 1]`: the other branch's tangent there (the state's entries, then `p`)."""
    switch_error: str | None = optional()
    """Why no switch tangent was found (its left null vector), where none was."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class HopfPoint(Bifurcation):
    """A Hopf point of a general field: a complex pair crosses the imaginary axis (no
    energy system has one; its normal form and cycles are not computed)."""

    frequency: float | None = optional()
    """`|Im|` of the crossing pair."""


Bifurcation.KINDS.update(fold=Fold, branch_point=BranchPoint, hopf=HopfPoint)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Branch(Result):
    """A branch of steady states followed in a parameter (`continuation`,
    `switch_branch`): `m` points in arclength order, the eigenvalues kept at each, and
    the special points between them."""

    p: np.ndarray
    """`[m]`: the parameter at each point."""
    x: np.ndarray
    """`[m, *shape]`: the steady states (an energy model's own coordinates)."""
    s: np.ndarray
    """`[m]`: arclength."""
    eigenvalues: np.ndarray
    """`[m, k]`: the kept eigenvalues (complex, largest real part first): of `df/dx`, or
    of an energy model's linearised projected flow on its manifold (rates in 1/time)."""
    unstable: np.ndarray
    """`[m]`: eigenvalues with a positive real part (all of them dense, among the `k`
    matrix-free)."""
    stable: np.ndarray
    """`[m]`: every kept eigenvalue's real part negative."""
    tangent_p: np.ndarray
    """`[m]`: the unit tangent's `p` component."""
    newton_iterations: np.ndarray
    """`[m]`: the corrector's iterations at each point."""
    residual_rms: np.ndarray
    """`[m]`: RMS of the field at each point."""
    bifurcations: list[Bifurcation]
    """Every special point found, in arclength order."""
    stop_reason: str
    """Why the branch stopped: `"p_span"`, `"max_points"`, `"ds_min"` or `"closed"`."""
    stall: dict | None
    """With `stop_reason="ds_min"`, the last refused step: `p` where it ended,
    `residual_rms`, `newton_iterations`, `step`, `cause` (`"newton"`: not converged;
    `"nonfinite"`: the field was NaN or inf where Newton went; `"turn"`: the tangent
    turned past `max_turn` with a large correction; `"singular"`: no tangent;
    `"eigenvalues"`: the eigen-solver failed, with its `message`) and `near_tol` (Newton
    ended within `STALL_FACTOR` of `newton_tol` and could not go lower: a kink of a
    piecewise-smooth field, or `newton_tol` at the field's rounding floor: loosen it); else
    None."""
    dense: bool
    """Whether the Jacobians were formed (else GMRES and Arnoldi on JVPs)."""
    metadata: dict
    """What produced it (study, dtype, settings, versions)."""
    start_correction_rms: float
    """RMS by which Newton moved the start onto the branch (followed coordinates)."""
    spectrum: str
    """`"rightmost"` or `"nearest_zero"`: which eigenvalues each point kept."""
    refused_steps: dict
    """Refused steps by cause, Newton's that ended within `STALL_FACTOR` of `newton_tol` as
    `"newton_near_tol"` (many of those, and a `RuntimeWarning` says so, mean it is at
    the field's rounding floor)."""
    unstable_left_kept: list
    """Matrix-free `"nearest_zero"`: the `p` where an unstable eigenvalue left the kept
    ones without crossing zero."""
    y: np.ndarray | None = optional()
    """Energy models: `[m, ...]`, the manifold coordinates that were followed."""
    fixed_point_residual_rms: np.ndarray | None = optional()
    """Energy models: `[m]`, the model's RMS residual at each point."""

    @property
    def folds(self) -> list[Fold]:
        """The folds among `bifurcations`."""
        return [b for b in self.bifurcations if isinstance(b, Fold)]

    @property
    def branch_points(self) -> list[BranchPoint]:
        """The branch points among `bifurcations`."""
        return [b for b in self.bifurcations if isinstance(b, BranchPoint)]

    @property
    def hopf_points(self) -> list[HopfPoint]:
        """The Hopf points among `bifurcations`."""
        return [b for b in self.bifurcations if isinstance(b, HopfPoint)]


def bifurcation_record(record: dict, **produced_by: Any) -> Bifurcation:
    """A special point's typed record from the dict that continuation built
    (`produced_by`: its `system`, `args` and `parameter`)."""
    kind = cast(type[Bifurcation], Bifurcation.KINDS[record["kind"]])
    return build(kind, record, **produced_by)


def branch_record(result: dict, **produced_by: Any) -> Branch:
    """The typed `Branch` from the dict that continuation built."""
    points = [bifurcation_record(record, **produced_by) for record in result["bifurcations"]]
    return Branch(**dict(result, bifurcations=points))


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
