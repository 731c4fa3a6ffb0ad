"""The typed results of `continuation` and `switch_branch`: a `Branch` of steady states
and its special points (`Fold`, `BranchPoint`, `HopfPoint`, each a `Bifurcation`).

A special point carries what produced it (the system and its conditions, in memory
only), so that the next call takes it alone: `switch_branch(branch.branch_points[0],
p_span=...)`, `fold_continuation(branch.folds[0], q0, second=..., q_span=...)`. Read
back from JSON (`Branch.from_json`) it has none, and those calls take the system again.
Every record is also a read-only mapping of its keys (`branch["p"] is branch.p`).
"""

import dataclasses
from typing import Any, ClassVar, cast

import numpy as np

from .._results import Result, build, context, optional


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
    ended within `STALL_FACTOR` of `tol` and could not go lower: a kink of a
    piecewise-smooth field, or `tol` at the field's rounding floor: loosen `tol`); else
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
    """Refused steps by cause, Newton's that ended within `STALL_FACTOR` of `tol` as
    `"newton_near_tol"` (many of those, and a `RuntimeWarning` says so, mean `tol` is at
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
