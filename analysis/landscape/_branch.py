"""A branch of steady states being followed (`_Branch`: its field, settings and the
corrector's points) and the bifurcations between two of its points located: folds on the
tangent's `p` component, branch and Hopf points from the counts of eigenvalues with a
positive real part (`_detect`, `_crossings`), each record trusted as far as its
location (`_trust`). `continuation` (`_continuation`) drives it."""

import collections
import math

import jax.numpy as jnp
import numpy as np

from . import _eigen as eigen
from ._branch_kernels import (
    EXACT_TANGENT_BELOW,
    TANGENT_RTOL,
    correct,
    leading_eigen,
    real_eigenvalues,
    rounding_rtol,
    switch_tangent,
    tangent,
    unstable_counts,
)

# Where `p` turns, the eigenvalue counts are compared this fraction of the step either
# side of the turn (`_detect`): far enough that the crossing eigenvalue is clear of its
# round-off, near enough that no other crossing is likely between.
TURN_SIDE = 1e-3


class _Branch:
    """The compiled pieces bound to one field, its conditions and settings."""

    def __init__(self, F, args, tol, max_newton, k, dense, dtype, weights, spectrum):
        self.F, self.args, self.k, self.dense = F, args, k, dense
        self.spectrum = spectrum  # `_branch_kernels.SPECTRA`: which eigenvalues are kept
        self.tol = jnp.asarray(tol, dtype)
        self.max_newton = int(max_newton)
        self.weights = weights  # [n + 1]: the arclength's metric
        self.failure = None  # why the last step was refused (`stall` in the result)
        self.refused: collections.Counter[str] = collections.Counter()  # steps, by cause
        # (the main loop's refused steps; `refuse` records each failure, locating too)
        self.vectors = None  # the last eigenvectors found: the next eigen-solve's start
        # where an unstable eigenvalue left the `k` kept (`spectrum="nearest_zero"`): p
        self.unseen: list[float] = []

    def inner(self, a, b) -> float:
        """`a . b` in the arclength's metric."""
        return float(jnp.sum(self.weights * a * b))

    def correct(self, y_pred, direction):
        y, it, res = correct(
            self.F,
            y_pred,
            direction,
            self.weights,
            self.args,
            self.tol,
            self.max_newton,
            self.dense,
        )
        return y, int(it), float(res)

    def tangent(self, y, previous, exact=True):
        """The unit tangent at `y`, oriented along `previous`; solved to rounding if
        `exact`, else to `TANGENT_RTOL`."""
        # an array, not a float: a float is static to the compiled solve (two programs)
        rtol = rounding_rtol(y.dtype) if exact else max(TANGENT_RTOL, rounding_rtol(y.dtype))
        return tangent(
            self.F,
            y,
            self.weights * previous,
            self.weights,
            self.args,
            self.dense,
            guess=previous,
            rtol=jnp.asarray(rtol, y.dtype),
        )

    def along(self, a, step, spectrum=True, exact_tangent=False):
        """The corrected point at arclength `step` past point `a` (its tangent as the
        border), or None where Newton fails there; with `spectrum`, its eigenvalues
        (else `point`'s entries without them: `finish` adds them); its tangent solved to
        rounding if `exact_tangent` (where a fold is located from it) or where its `p`
        component is below `EXACT_TANGENT_BELOW`, else to `TANGENT_RTOL`. The point
        records how far Newton moved it from the prediction (`displacement`, in the
        metric)."""
        y_pred = a["y"] + step * a["t"]
        y, it, res = self.correct(y_pred, a["t"])
        if not (res <= float(self.tol)):
            self.refuse("newton" if np.isfinite(float(res)) else "nonfinite", y, res, it, step=step)
            return None
        t = self.tangent(y, a["t"], exact=exact_tangent)
        if not exact_tangent and abs(float(t[-1])) < EXACT_TANGENT_BELOW:
            t = self.tangent(y, t, exact=True)  # near a fold: its sign must be right
        if not bool(jnp.all(jnp.isfinite(t))):  # landed on a singular point: step again
            self.refuse("singular", y, res, it, step=step)
            return None
        moved = y - y_pred
        point = dict(
            y=y,
            t=t,
            iterations=it,
            residual=res,
            s=a["s"] + step,
            displacement=math.sqrt(self.inner(moved, moved)),
        )
        return self.finish(point) if spectrum else point

    def finish(self, point):
        """`point` with its eigenvalues, or None where the eigen-solver fails there (e.g. `df/dx`
        exactly zero)."""
        try:
            values, vectors, unstable = leading_eigen(
                self.F,
                point["y"],
                self.args,
                self.k,
                self.dense,
                previous=self.vectors,
                spectrum=self.spectrum,
            )
        except eigen.EigenNotConvergedError as error:
            self.refuse(
                "eigenvalues",
                point["y"],
                point["residual"],
                point["iterations"],
                message=str(error),
            )
            return None
        self.vectors = vectors
        return dict(point, eigenvalues=values, vectors=vectors, unstable=unstable)

    def radius(self, a, b) -> float:
        """The eigenvalues whose counts are compared between points `a` and `b`: those
        nearer zero than this. Where each point keeps the `k` nearest zero of many
        (matrix-free, `spectrum="nearest_zero"`), only those nearer zero than the
        farthest kept at both ends are seen at both: else an unstable eigenvalue
        leaving the `k` kept would count as a crossing. Elsewhere every kept one
        counts (the rightmost `k` hold every positive one, up to `k`)."""
        if self.dense or self.spectrum != "nearest_zero":
            return math.inf
        return min(float(np.max(np.abs(q["eigenvalues"]))) for q in (a, b))

    @staticmethod
    def counts(point, radius: float) -> tuple[int, int]:
        """The numbers of real and of complex eigenvalues with a positive real part
        among those of `point` nearer zero than `radius` (all of them where it is inf)."""
        if radius == math.inf:
            return point["unstable"]
        values = np.asarray(point["eigenvalues"]).astype(complex)
        return unstable_counts(values[np.abs(values) < radius])

    def check_unseen(self, a, b, records) -> None:
        """Record `p` at `b` where, from `a` to `b`, the number of kept eigenvalues with
        a positive real part fell below what the bifurcations `records` between them
        account for (their `unstable_change`): an unstable eigenvalue left the `k`
        kept without crossing zero, and `unstable`/`stable` no longer see it (only
        where each point keeps the `k` nearest zero, matrix-free)."""
        if self.dense or self.spectrum != "nearest_zero":
            return
        expected = sum(r.get("unstable_change", 0) for r in records)
        if sum(b["unstable"]) - sum(a["unstable"]) < expected:
            self.unseen.append(float(b["y"][-1]))

    def refuse(self, cause, y, residual, iterations, **details):
        """Record why a step was refused (`stall` in the result): `cause`, where Newton
        ended (`p`), its residual and iterations, and `details`."""
        self.failure = dict(
            p=float(y[-1]),
            residual_rms=float(residual),
            newton_iterations=int(iterations),
            cause=cause,
            **details,
        )


def _bisect(branch, a, b, side, locate_tol, spectrum=True, value=None):
    """Locate in arclength, between points `a` and `b` (`b` one step past `a`), where
    `side(point)` changes from its value at `a`, by bisection (`spectrum`: `side` needs
    the points' eigenvalues; else only the last point gets them). Returns the last point
    computed, the final bracket, and the points at its ends (`a` or `b` where no point
    inside was computed on that side; with `spectrum`, their eigenvalues computed).

    With `value` (a smooth function of the point whose sign is `side`, such as the
    tangent's `p` component at a fold) the next point is the Illinois variant of the
    false position instead of the midpoint (the stale end's value halved each time the
    same end is kept, so both ends converge; a midpoint wherever the bracket did not
    halve in two steps): superlinear where bisection is linear (corrector runs
    measured in docs/benchmarks.md, "The landscape")."""
    lo, hi, at_a, best = 0.0, b["s"] - a["s"], side(a), b
    lo_point, hi_point = a, b
    f_lo, f_hi = (value(a), value(b)) if value is not None else (None, None)
    kept, widths = 0, [hi - lo]
    for _ in range(200):
        if hi - lo <= locate_tol:
            break
        mid = 0.5 * (lo + hi)
        stalled = len(widths) > 2 and widths[-1] > 0.5 * widths[-3]
        if value is not None and not stalled and f_hi != f_lo:
            mid = hi - f_hi * (hi - lo) / (f_hi - f_lo)
            if not lo < mid < hi:
                mid = 0.5 * (lo + hi)
        point = branch.along(a, mid, spectrum=spectrum, exact_tangent=True)
        # a midpoint on the singular point itself (no tangent there): beside it
        for beside in (mid + 0.01 * (hi - lo), mid - 0.01 * (hi - lo)):
            if point is None and lo < beside < hi:
                mid, point = beside, branch.along(a, beside, spectrum=spectrum, exact_tangent=True)
        if point is None:
            break
        best = point
        if side(point) == at_a:
            lo, lo_point = mid, point
            if value is not None:
                f_lo = value(point)
                f_hi, kept = (0.5 * f_hi if kept == -1 else f_hi), -1
        else:
            hi, hi_point = mid, point
            if value is not None:
                f_hi = value(point)
                f_lo, kept = (0.5 * f_lo if kept == 1 else f_lo), 1
        widths.append(hi - lo)
    if not spectrum and best is not b:
        best = branch.finish(best) or b
    return best, hi - lo, lo_point, hi_point


def _record(kind, point, bracket, index, F, eigenvalue=None):
    y = np.asarray(point["y"])
    record = dict(
        kind=kind,
        p=float(y[-1]),
        x=np.asarray(F.state(point["y"])),
        s=float(point["s"]),
        index=int(index),
        s_bracket=float(bracket),
        eigenvalues=point["eigenvalues"],
        residual_rms=float(point["residual"]),
    )
    if eigenvalue is not None:
        record["eigenvalue"] = complex(eigenvalue)
    return record


def _nearest_zero(values, real: bool):
    """Index of the real (or complex) eigenvalue with the smallest real part in size."""
    pick = np.flatnonzero(real_eigenvalues(values) == real)
    return int(pick[np.argmin(np.abs(values.real[pick]))]) if pick.size else None


def _branch_point_at_turn(branch, a, b) -> bool:
    """Whether the turn of `p` between points `a` and `b` (either side of it) is a
    branch point rather than a fold: at a simple fold an eigenvalue of
    `df/dx` crosses zero (the number of real ones with a positive real part changes by
    one), at a branch point where the branch turns (the pitchfork's parabola at its
    vertex, `df/dx = -2 u^2`) it touches zero and the number is unchanged.
    Matrix-free the count is among the `k` leading eigenvalues: where all of them are
    positive at either end the crossing may lie further down, and the turn is taken
    for a fold."""
    radius = branch.radius(a, b)
    if radius == math.inf and not branch.dense:
        if any(np.all(np.asarray(q["eigenvalues"]).real > 0) for q in (a, b)):
            return False
    return (branch.counts(b, radius)[0] - branch.counts(a, radius)[0]) % 2 == 0


def _branch_point(branch, point, bracket, index):
    values = point["eigenvalues"]
    e = _nearest_zero(values, real=True)
    record = _record(
        "branch_point", point, bracket, index, branch.F, None if e is None else values[e]
    )
    if e is not None:
        try:
            record["switch_tangent"] = switch_tangent(
                branch.F,
                point["y"],
                point["t"],
                point["vectors"][:, e],
                values[e],
                branch.args,
                branch.dense,
                k=branch.k if branch.spectrum == "nearest_zero" else e + 1,
                spectrum=branch.spectrum,
            )
        except eigen.EigenNotConvergedError as error:  # the left null vector's
            record["switch_error"] = str(error)
    return record


def _detect(branch, a, b, index, locate_tol):
    """The bifurcations between consecutive points `a` and `b`: a fold where the
    tangent's `p` component changes sign (a branch point instead where no eigenvalue
    crossed zero between points `TURN_SIDE` of the step either side of the turn:
    `_branch_point_at_turn`), the stretches outside those searched by `_crossings`;
    else `_crossings` alone: branch and Hopf points from the counts of eigenvalues with
    a positive real part."""
    if np.sign(float(a["t"][-1])) * np.sign(float(b["t"][-1])) >= 0:
        return _crossings(branch, a, b, index, locate_tol)
    point, bracket, _, _ = _bisect(
        branch,
        a,
        b,
        lambda q: np.sign(float(q["t"][-1])),
        locate_tol,
        spectrum=False,
        value=lambda q: float(q["t"][-1]),
    )
    # points a little way either side of the turn (TURN_SIDE of the step): the counts
    # across the turn alone, clear of the eigenvalues' round-off there and of any other
    # crossing in the step (searched for outside them)
    turn, side = float(point["s"] - a["s"]), TURN_SIDE * float(b["s"] - a["s"])
    lo = branch.along(a, turn - side) if turn - side > 0 else None
    hi = branch.along(a, turn + side) if turn + side < float(b["s"] - a["s"]) else None
    lo, hi = lo or a, hi or b
    if _branch_point_at_turn(branch, lo, hi):
        record = _branch_point(branch, point, bracket, index)
    else:
        values = point["eigenvalues"]
        record = _record("fold", point, bracket, index, branch.F, values[np.argmin(np.abs(values))])
    record["unstable_change"] = hi["unstable"][0] - lo["unstable"][0]
    before = _crossings(branch, a, lo, index, locate_tol) if lo is not a else []
    after = _crossings(branch, hi, b, index, locate_tol) if hi is not b else []
    return before + [record] + after


def _crossings(branch, a, b, index, locate_tol, radius=None):
    """The branch and Hopf points between `a` and `b` from the counts of eigenvalues with
    a positive real part (`_detect`). A real crossing is located first (bisection finds
    the first change of the real count), else a complex one; the stretches before and
    after its bracket are then searched again, so that a second branch point or Hopf
    point in the same step is found too. Two real eigenvalues crossing at once, as where
    a kinked field's Jacobian jumps, are one branch point (its `_trust` says
    `eigenvalue_jump`).

    Where each point keeps the eigenvalues nearest zero (`_Branch.radius`), the counts
    are among those nearer zero than `radius` (the outermost search's, kept for the
    stretches searched again), and a step is searched too where the sign of the real
    eigenvalue nearest zero changes (an eigenvalue can cross zero in the step in which
    an unstable one leaves the radius: the count is then unchanged). A change located
    where no eigenvalue crossed zero (`_crosses_zero`: an eigenvalue passing the radius,
    or the nearest zero passing from one eigenvalue to another) is no bifurcation; where
    an unstable eigenvalue left the kept ones, the main loop notes it
    (`_Branch.check_unseen`)."""
    if radius is None:
        radius = branch.radius(a, b)
    nearest_zero = radius < math.inf
    (real_a, complex_a), (real_b, complex_b) = branch.counts(a, radius), branch.counts(b, radius)
    real, pairs = real_b - real_a, complex_b - complex_a

    def around(lo_point, hi_point):
        before, after = [], []
        if lo_point is not a:
            before = _crossings(branch, a, lo_point, index, locate_tol, radius)
        if hi_point is not b:
            after = _crossings(branch, hi_point, b, index, locate_tol, radius)
        return before, after

    def real_side(q):
        count = branch.counts(q, radius)[0]
        return (count, _nearest_sign(q, real=True)) if nearest_zero else count

    # a real eigenvalue crossed (not a complex pair splitting into two real ones, which
    # changes neither total)
    if (real and real + pairs) or (nearest_zero and real_side(a)[1] != real_side(b)[1]):
        point, bracket, lo_point, hi_point = _bisect(branch, a, b, real_side, locate_tol)
        before, after = around(lo_point, hi_point)
        if nearest_zero and not _crosses_zero(lo_point, hi_point, real=True):
            return before + after
        record = _branch_point(branch, point, bracket, index)
        record["unstable_change"] = hi_point["unstable"][0] - lo_point["unstable"][0]
        return before + [record] + after
    if pairs and not real:  # a complex pair crossed
        point, bracket, lo_point, hi_point = _bisect(
            branch, a, b, lambda q: branch.counts(q, radius)[1], locate_tol
        )
        before, after = around(lo_point, hi_point)
        if nearest_zero and not _crosses_zero(lo_point, hi_point, real=False):
            return before + after
        values = point["eigenvalues"]
        e = _nearest_zero(values, real=False)
        record = _record("hopf", point, bracket, index, branch.F, None if e is None else values[e])
        record["frequency"] = None if e is None else abs(float(values[e].imag))
        record["unstable_change"] = hi_point["unstable"][1] - lo_point["unstable"][1]
        return before + [record] + after
    return []


def _nearest_sign(point, real: bool) -> int:
    """The sign of the real part of `point`'s real (or complex) eigenvalue nearest zero
    (0 where it has none)."""
    values = np.asarray(point["eigenvalues"])
    e = _nearest_zero(values, real)
    return 0 if e is None else int(np.sign(values[e].real))


# Two eigenvalues either side of a located bracket are "the same" within this fraction
# of their distance apart (`_crosses_zero`).
SAME_EIGENVALUE = 1e-3


def _crosses_zero(lo_point, hi_point, real: bool) -> bool:
    """Whether an eigenvalue crossed zero between `lo_point` and `hi_point` (the two
    ends of a located bracket): the real part of the real (or complex) eigenvalue
    nearest zero changes sign, and neither end's nearest is still among the other end's
    eigenvalues (where it is, the nearest zero passed from one eigenvalue to another,
    each staying on its own side of zero). Complex eigenvalues are compared by their
    representatives with a positive imaginary part."""
    picked = []
    for q in (lo_point, hi_point):
        values = np.asarray(q["eigenvalues"]).astype(complex)
        values = values.real + 1j * np.abs(values.imag)
        e = _nearest_zero(values, real)
        if e is None:
            return False
        picked.append((values, values[e]))
    (lo_values, lo_value), (hi_values, hi_value) = picked
    if np.sign(lo_value.real) == np.sign(hi_value.real):
        return False
    near = SAME_EIGENVALUE * abs(lo_value - hi_value)
    for values, own, other in ((hi_values, hi_value, lo_value), (lo_values, lo_value, hi_value)):
        rest = values[np.abs(values - own) > near]
        if np.any(np.abs(rest - other) <= near):
            return False
    return True


def _trust(record, locate_tol):
    """Say how far a bifurcation can be trusted: `located` when the bisection reached
    `locate_tol` (it stops early where the corrector fails inside the bracket), and for
    a branch or Hopf point `eigenvalue_jump` when, located, the crossing eigenvalue's
    real part is still above `sqrt(locate_tol)` times the spectrum's scale: it jumped
    across zero instead of passing through it, as at a kink of a piecewise-smooth field
    (ReLU memories), where the Jacobian is discontinuous and no smooth bifurcation
    theory applies."""
    record["located"] = bool(record["s_bracket"] <= locate_tol)
    eigenvalue = record.get("eigenvalue")
    if record["kind"] != "fold" and eigenvalue is not None:
        scale = max(1.0, float(np.max(np.abs(np.asarray(record["eigenvalues"]).real))))
        record["eigenvalue_jump"] = bool(
            record["located"] and abs(eigenvalue.real) > np.sqrt(locate_tol) * scale
        )
    return record
