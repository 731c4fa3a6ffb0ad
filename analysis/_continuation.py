"""Steady states followed in a parameter: pseudo-arclength continuation, the leading
eigenvalues at every point, and the bifurcations between points located to a tolerance.

The system is any field `f(x, p, args) -> dx/dt` of a state `x` (any shape) and a scalar
parameter `p`; its steady states are the zeros of `f`. The branch is a curve
`y(s) = (x(s), p(s))` in `n + 1` unknowns, parametrised by arclength `s`, so that it can
be followed through a fold, where `p` turns back (Keller, 1977; Allgower and Georg,
*Introduction to Numerical Continuation Methods*, 1990). Each step:

1. **predict** along the unit tangent `t`: `y_pred = y + ds t` (unit in the
   arclength's metric `ds^2 = state_weight RMS(dx)^2 + dp^2`);
2. **correct** by Newton on `f(y) = 0, t . (y - y_pred) = 0` (the bordered Jacobian
   `[df/dy; t^T]`: formed up to `DENSE_MAX` unknowns, else GMRES on JVPs);
3. accept if Newton converged (RMS f at most `tol`) and the new tangent turned by less
   than `max_turn` radians, or turned more but Newton moved the point by at most half
   the step (a kink of a piecewise-smooth field, where the tangent jumps, rather than a
   jump to another branch); else halve `ds` (the branch stops below `ds_min`). A
   corrector that needed few iterations lengthens the next step (up to `ds_max`).

At every accepted point the `k` eigenvalues of `df/dx` with the largest real parts are
kept (dense `eig`, or Krylov-Schur Arnoldi on JVPs, `_krylov_schur`), or with
`spectrum="nearest_zero"` the `k` nearest zero (shift-and-invert, for stiff fields, with
a `preconditioner` of `df/dx` in every GMRES solve). Between two points:

- a **fold** where the tangent's `p` component changes sign (`p` turns; an eigenvalue
  passes through 0); located on that component by the Illinois false position (a
  smooth function of `s` with a simple zero there), with bisection as its safeguard;
  a branch point instead where no real eigenvalue crossed zero there, but one touched
  it (`_branch_point_at_turn`: the branch that turns meets another, as the pitchfork's
  parabola at its vertex);
- a **branch point** where a real eigenvalue passes through 0 and `p` does not turn (the
  number of eigenvalues with a positive real part changes by one); located by bisection
  on the number of real ones. Its record carries the tangent of the other branch, from
  the algebraic bifurcation equation in the null space of `df/dy`
  (`_branch_kernels.switch_tangent`): `switch_branch` follows it;
- a **Hopf point** where a complex pair crosses the imaginary axis (that number changes
  by two, the real ones' not at all); located by bisection on the number of complex ones
  (gradient flows such as the ET's have none: their Jacobians are symmetric in the right
  metric). A complex pair that splits into two real eigenvalues changes neither total
  and is not reported.

Each location runs the corrector from the earlier point with a shorter step until the
bracket in `s` is below `locate_tol` (a trial point on the singular point itself, where
there is no tangent, is moved beside it); near a fold `p` varies quadratically in `s`,
so its `p` is located far more precisely still. Where one step holds more than one
branch or Hopf point, the stretches on either side of the first one located are
searched again (`_crossings`).

The branch stops (`stop_reason`, one of `STOP_REASONS`) at its first point outside
`p_span`, after `max_points` points, where the step falls below `ds_min`, or `closed`:
back within half a step of its start and going the same way (a loop; the other side of
a fold passing near the start, going the other way, does not count).
"""

import collections
import math
import warnings
from collections.abc import Callable
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import DTypeLike
from jaxtyping import Array, ArrayLike, Real

from et_ode import solvers

from . import _krylov_schur as krylov_schur
from ._branch_kernels import (
    DENSE_MAX,
    EXACT_TANGENT_BELOW,
    SPECTRA,
    TANGENT_RTOL,
    FlatField,
    correct,
    leading_eigen,
    real_eigenvalues,
    rounding_rtol,
    switch_tangent,
    tangent,
    unstable_counts,
)
from ._common import float64_available, is_count
from ._records import metadata
from ._system_branch import state_and_residual, system_field
from ._xla_fallback import rescued_kernels

STOP_REASONS = ("p_span", "max_points", "ds_min", "closed")
# A start whose RMS correction by Newton (at fixed p0) exceeds this fraction of the
# state's RMS (and the first step) is warned of: Newton from far may reach another
# steady state than meant.
START_MOVED = 0.1
# Where `p` turns, the eigenvalue counts are compared this fraction of the step either
# side of the turn (`_detect`): far enough that the crossing eigenvalue is clear of its
# round-off, near enough that no other crossing is likely between.
TURN_SIDE = 1e-3
# A corrector that ends within this factor of `tol` stalled near a steady state (`_stall`).
STALL_FACTOR = 100.0

# A field `f(x, p, args) -> dx/dt`: `x` a state of any shape, `p` the (traced) scalar
# parameter, `args` its conditions; returns an array of the state's shape.
Field = Callable[[Array, Array, Any], Array]
# What `p` is for an energy model: the name of one of its `lenses`, or a function
# (model, args, p) -> (model, args).
Parameter = str | Callable[..., tuple[Any, Any]]
# A preconditioner of a field's Jacobian `df/dx`: `preconditioner(v, x, p, args)`, `v` and
# `x` of the state's shape, returns an approximation of `(df/dx)^-1 v` at `(x, p)`, linear
# in `v` (a fast solve with the stiff part of `df/dx`, such as a discrete Laplacian's).
Preconditioner = Callable[[Array, Array, Array, Any], Array]


def _check(field, x0, p0, p_span, ds, ds_min, ds_max, k, tol, max_points):
    if not (callable(field) or callable(getattr(field, "vector_field", None))):
        raise TypeError(
            "continuation takes a solvers.EnergySystem or a callable "
            f"field(x, p, args) -> dx/dt (got {type(field).__name__})."
        )
    if np.shape(p_span) != (2,):
        raise ValueError(f"p_span must be a pair (low, high) (got {p_span!r}).")
    lo, hi = (float(v) for v in p_span)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"p_span must be (low, high) with low < high (got {p_span}).")
    if not lo <= float(p0) <= hi:
        raise ValueError(
            f"p0 = {float(p0):g} (the start's p: for switch_branch, the branch point's) "
            f"lies outside p_span = ({lo:g}, {hi:g}): give a p_span that holds it."
        )
    if not 0 < ds_min <= ds <= ds_max:
        raise ValueError(
            "steps must satisfy 0 < ds_min <= ds <= ds_max (got "
            f"ds={ds}, ds_min={ds_min}, ds_max={ds_max})."
        )
    if not (is_count(k, 1) and is_count(max_points, 2) and (tol is None or tol > 0)):
        raise ValueError(
            "k >= 1 and max_points >= 2 (integers) and tol > 0 are needed "
            f"(got k={k!r}, max_points={max_points!r}, tol={tol!r})."
        )
    if not np.all(np.isfinite(np.asarray(x0))):
        raise ValueError("x0 holds NaN or inf: start from a finite state.")
    return lo, hi


def default_tol(dtype) -> float:
    """Newton's default RMS of `f`: 1e-10 in float64, 1e-5 in float32 (whose round-off
    stops Newton above 1e-10)."""
    return 1e-10 if dtype == jnp.float64 else 1e-5


def dtype_of(x0, dtype):
    """The branch's dtype: `dtype`, else `x0`'s (a floating one); float64 only with
    `jax_enable_x64`, refused in one line without it."""
    dtype = jnp.asarray(x0).dtype if dtype is None else jnp.dtype(dtype)
    if not jnp.issubdtype(dtype, jnp.floating):
        dtype = jnp.float64 if float64_available() else jnp.float32
    if dtype == jnp.float64 and not float64_available():
        raise ValueError(
            "float64 needs jax_enable_x64: call "
            "jax.config.update('jax_enable_x64', True) first, or pass "
            "dtype=jnp.float32."
        )
    return dtype


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
        except krylov_schur.EigenNotConvergedError as error:
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


def _warn_if_moved(x0, y, ds: float, state_weight: float) -> float:
    """The RMS of the start's correction from `x0` (flat) to the steady state `y`
    (`[n + 1]`), with a `RuntimeWarning` where it exceeds both `START_MOVED` of the
    state's RMS and the first step `ds` (in the arclength's metric: a correction
    within one step of the branch is no other start)."""
    x0, x = np.asarray(x0, np.float64), np.asarray(y[:-1], np.float64)
    moved = float(np.sqrt(np.mean(np.square(x - x0))))
    scale = max(float(np.sqrt(np.mean(np.square(x0)))), float(np.sqrt(np.mean(np.square(x)))))
    if moved > START_MOVED * scale and math.sqrt(state_weight) * moved > ds:
        warnings.warn(
            f"continuation: x0 is not a steady state at p0 = {float(y[-1]):g}: Newton moved "
            f"it by RMS {moved:.3g} ({moved / scale:.0%} of the state's RMS {scale:.3g}), to "
            "the steady state the branch starts from (result['x'][0]); from far, Newton may "
            "reach another one than meant: start from the end of a solve to be sure.",
            RuntimeWarning,
            stacklevel=3,
        )
    return moved


def _warn_if_singular_start(point) -> None:
    """A `RuntimeWarning` where the start sits on a bifurcation: among the `k` leading
    eigenvalues of `df/dx` there (as every point keeps), a real one is zero to rounding
    (within `1e3 eps` of the largest in size) and apart from the others (within
    `sqrt(eps)` of the next nearest zero: a stiff spectrum's smallest eigenvalue is
    small beside its largest, not beside its neighbours). There the direction the
    branch leaves in is not defined, and the bifurcation at `s = 0` may go unreported
    (or be reported going one way only)."""
    values = np.asarray(point["eigenvalues"]).astype(complex)
    nearest = _nearest_zero(values, real=True)
    if nearest is None:
        return
    eps = float(jnp.finfo(point["y"].dtype).eps)
    size = abs(values[nearest].real)
    others = np.abs(np.delete(values, nearest))
    if size <= 1e3 * eps * np.max(np.abs(values)) and (
        not others.size or size <= math.sqrt(eps) * others.min()
    ):
        warnings.warn(
            f"continuation: the start (p0 = {float(point['y'][-1]):g}) is on a bifurcation: "
            f"df/dx has the eigenvalue {values[nearest].real:.3g}, zero to rounding; the "
            "branch's direction there is not defined, and a bifurcation at the start may "
            "go unreported or be reported one way only: start a little to one side of it, "
            "or from a located branch point with switch_branch.",
            RuntimeWarning,
            stacklevel=3,
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
        except krylov_schur.EigenNotConvergedError as error:  # the left null vector's
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


def continuation(
    system: solvers.EnergySystem | Field,
    x0: Real[ArrayLike, "..."],
    p0: float,
    *,
    p_span: tuple[float, float],
    args: Any = None,
    parameter: Parameter | None = None,
    ds: float = 0.01,
    ds_min: float = 1e-8,
    ds_max: float = 0.1,
    direction: Literal[1, -1] = 1,
    max_points: int = 1000,
    k: int = 6,
    tol: float | None = None,
    max_newton: int = 10,
    max_turn: float = 0.5,
    locate_tol: float | None = None,
    tangent_start: Real[ArrayLike, " n_plus_1"] | None = None,
    matrix_free: bool | None = None,
    preconditioner: Preconditioner | None = None,
    spectrum: Literal["rightmost", "nearest_zero"] = "rightmost",
    state_weight: float = 1.0,
    dtype: DTypeLike | None = None,
) -> dict:
    """Follow the branch of steady states of `system` through `(x0, p0)` in `p`, with
    the `k` leading eigenvalues at every point and the bifurcations located (module
    docstring).

    **Arguments:**

    - `system`: a field `f(x, p, args) -> dx/dt`, `x` of any shape, `p` a scalar
      (traced: one compilation serves the branch and every later call with the same
      `field`); or an energy model (`solvers.EnergySystem`: `energy`, `vector_field`,
      `residual`), whose fixed points of the projected flow are followed in its
      manifold coordinates (`analysis._system_branch`) with `parameter`.
    - `parameter`: for an energy model, what `p` is: `"memory_scale"` (the Hopfield
      memories scaled by `p`), `"field_strength"` (the external field's strength), or
      a function `(model, args, p) -> (model, args)` of the model's arrays.
    - `x0`: a state at or near a steady state at `p0`; it is first corrected at fixed
      `p0` (Newton), and refused, naming the residual, if that fails; a
      `RuntimeWarning` where the correction exceeds `START_MOVED` of the state's RMS
      and the first step (Newton from far may reach another steady state than meant),
      and where the corrected start has a real eigenvalue that is zero to rounding (a
      start on a bifurcation: start beside it; `_warn_if_singular_start`).
    - `p_span`: `(low, high)`: the branch stops at its first point outside.
    - `args`: the field's conditions (a pytree).
    - `ds`, `ds_min`, `ds_max`: the first, smallest and largest arclength step;
      `direction`: `+1` starts towards larger `p`, `-1` smaller.
    - `state_weight`: the arclength's metric, `ds^2 = state_weight RMS(dx)^2 + dp^2`
      (RMS over the state's `n` entries, so that a large state does not crowd out `p`:
      with the plain Euclidean length, a step of the ET's 4,096 entries would hardly
      move `p`).
    - `max_points`: the most points kept; `k`: eigenvalues kept per point (at most
      the state's `n` entries dense, `n - 2` matrix-free; `metadata["k"]` says how many).
    - `tol`: RMS of `f` at which Newton has converged (the field's units; default 1e-10
      in float64, 1e-5 in float32, whose round-off stops Newton above 1e-10); `max_newton`:
      iterations per corrector; `max_turn`: largest angle (radians) between consecutive
      tangents before a step is refused as a possible jump to another branch.
    - `locate_tol`: arclength bracket to which a bifurcation is located (default 1e-10
      in float64, 1e-5 in float32, where the corrector resolves steps only to a few
      units of round-off of the state).
    - `tangent_start`: the first tangent (`[n + 1]`: the state's entries, then `p`)
      instead of the branch's own; `switch_branch` passes the other branch's here.
    - `matrix_free`: force GMRES and Arnoldi (`True`) or dense Jacobians (`False`);
      default: dense up to `DENSE_MAX` unknowns, matrix-free above or with a
      `preconditioner`.
    - `preconditioner`: for a field (not an energy model), matrix-free only:
      `preconditioner(v, x, p, args) -> ~(df/dx)^-1 v` (`v`, `x` of the state's shape;
      linear in `v`, and for branch switching with `spectrum="nearest_zero"`
      transposable by `jax.linear_transpose`). Every GMRES solve is preconditioned on
      the right with it (the residual tested stays the true one), and so are the solves
      of `spectrum="nearest_zero"`. A stiff field (a discretised PDE: `|df/dx| ~ 4/h^2`)
      needs one matrix-free: unpreconditioned, GMRES stalls there. Pass the same
      function on every call: it is part of the compiled programs' key.
    - `spectrum`: which `k` eigenvalues each point keeps: `"rightmost"` (the largest
      real parts; Arnoldi on `df/dx`) or `"nearest_zero"` (shift-and-invert: Arnoldi on
      `(df/dx)^-1`, each product a GMRES solve; dense, the `k` nearest zero of all). On
      a stiff spectrum Arnoldi finds the rightmost eigenvalues, clustered beside far
      larger ones, only after thousands of products; the nearest zero come in a few
      restarts, and hold every eigenvalue that crosses zero at a fold or branch point.
      Matrix-free, `unstable` and `stable` then count the `k` kept only: an unstable
      eigenvalue farther from zero than the `k`-th nearest is not seen (nor a Hopf pair
      crossing at a frequency beyond them). What matters is how far from zero it is,
      not how many there are: where one leaves the kept ones along the branch a
      `RuntimeWarning` says so (`unstable_left_kept`); one that is never among them
      goes unseen. Bifurcations are found from the kept ones (`_crossings`).
    - `dtype`: the arithmetic (default: `x0`'s; float64 needs `jax_enable_x64`).

    **Returns:** a dict: `p [m]`, `x [m, *x0.shape]`, `s [m]` (arclength),
    `eigenvalues [m, k]` (complex, largest real part first), `unstable [m]` (eigenvalues
    with a positive real part: all of them when dense, among the `k` when matrix-free),
    `spectrum`, `unstable_left_kept` (`spectrum="nearest_zero"`, matrix-free: the `p`
    where an eigenvalue with a positive real part left the `k` kept without crossing
    zero, after which `unstable` and `stable` miss it; a `RuntimeWarning` says so),
    `stable [m]`, `tangent_p [m]`, `newton_iterations [m]`, `residual_rms [m]`;
    `bifurcations`: a list of dicts with `kind` (`"fold"`, `"branch_point"`, `"hopf"`),
    `p`, `x`, `s`, `index` (the point before it), `unstable_change` (the change in
    the number of eigenvalues with a positive real part across it, in the branch's
    direction: +-1, +-2 for a Hopf pair), `s_bracket` (the final location
    bracket), `located` (whether that bracket reached `locate_tol`), `eigenvalue` (the
    one crossing), `eigenvalue_jump` (branch and Hopf points: it jumped across zero, as
    at a kink of a piecewise-smooth field; see `_trust`), `residual_rms`, and
    `switch_tangent` (branch points; `switch_error` instead where the left null vector
    was not found) or, at Hopf points, `frequency` (the crossing pair's `|Im|`);
    `stop_reason` (one of
    `STOP_REASONS`); `stall` (with `stop_reason="ds_min"`, the last refused step: `p`
    where it ended, `residual_rms`, `newton_iterations`, `step`, `cause` (`"newton"`:
    not converged; `"nonfinite"`: the field was NaN or inf where Newton went;
    `"turn"`: the tangent turned past `max_turn` with a large correction;
    `"singular"`: no tangent; `"eigenvalues"`: the eigen-solver failed, with its
    `message`) and `near_tol` (Newton ended within `STALL_FACTOR` of `tol` and could not
    go lower: a kink of a piecewise-smooth field, or `tol` at the field's rounding
    floor: loosen `tol`); else None), `refused_steps` (refused steps by cause, Newton's
    that ended within `STALL_FACTOR` of `tol` as `"newton_near_tol"`: many of those, and
    a `RuntimeWarning` says so, mean `tol` is at the field's rounding floor), `dense`,
    `metadata`. For an energy model `x`
    holds its own states (`[m, N, D]`), `y` the manifold coordinates that were followed, and
    `fixed_point_residual_rms [m]` the model's RMS residual at each point (each
    bifurcation has its `y` and `fixed_point_residual_rms` too); the eigenvalues are the
    linearised projected flow's on the manifold (rates in 1/time: on the ET minus the
    `coordinates="x"` Hessian eigenvalues over `tau`). `start_correction_rms`: the RMS
    by which Newton moved `x0` onto the branch (in the followed coordinates).
    """
    lo, hi = _check(system, x0, p0, p_span, ds, ds_min, ds_max, k, tol, max_points)
    if direction not in (1, -1):
        raise ValueError(f"direction must be +1 or -1 (got {direction!r}).")
    check_linear_algebra(system, spectrum, preconditioner, matrix_free)
    dtype = dtype_of(x0, dtype)
    if tol is None:
        tol = default_tol(dtype)
    if locate_tol is None:  # the same floors as Newton's: steps resolved to a few ulps
        locate_tol = default_tol(dtype)
    x0 = jnp.asarray(x0, dtype)
    energy_model = callable(getattr(system, "vector_field", None))
    if energy_model:
        system, args = jax.tree.map(
            lambda v: jnp.asarray(v, dtype) if is_float(v) else v, (system, args)
        )
        field, y_start, args = system_field(system, x0, p0, args, parameter)
        x0 = jnp.asarray(y_start)  # the manifold coordinates that are followed
    else:
        if parameter is not None:
            raise ValueError("parameter= is for energy models; a field takes p itself.")
        field = system
    n = x0.size
    dense = is_dense(n, matrix_free, preconditioner)
    k = kept_eigenvalues(k, n, dense)
    F = FlatField(field, tuple(x0.shape), preconditioner)
    if not energy_model:
        args = jax.tree.map(lambda v: jnp.asarray(v, dtype) if is_float(v) else v, args)
        check_field_shape(field, x0, p0, args)
        check_preconditioner(preconditioner, x0, p0, args)
    if not (math.isfinite(state_weight) and state_weight > 0):
        raise ValueError(f"state_weight must be positive (got {state_weight!r}).")
    weights = jnp.full(n + 1, state_weight / n, dtype).at[-1].set(1.0)
    branch = _Branch(F, args, tol, max_newton, k, dense, dtype, weights, spectrum)

    y0 = jnp.concatenate([jnp.ravel(x0), jnp.asarray([p0], dtype)])
    e_p = jnp.zeros(n + 1, dtype).at[-1].set(1.0)
    y, it, res = branch.correct(y0, e_p)
    if not res <= tol:
        raise ValueError(
            f"x0 is not near a steady state at p0 = {float(p0):g}: Newton at "
            f"fixed p ended at RMS f = {res:.3g} after {it} iterations "
            f"(tol {tol:g}); start closer, e.g. from the end of a solve."
        )
    if tangent_start is None:
        t = branch.tangent(y, e_p)
        if not bool(jnp.all(jnp.isfinite(t))):
            raise ValueError(
                f"df/dx is singular at the start (p0 = {float(p0):g}): start "
                "next to the bifurcation, or pass tangent_start."
            )
    else:
        t = jnp.asarray(tangent_start, dtype).ravel()
        if t.size != n + 1 or not (
            bool(jnp.all(jnp.isfinite(t))) and float(jnp.linalg.norm(t)) > 0
        ):
            raise ValueError(
                f"tangent_start needs {n + 1} finite entries (the state's, "
                f"then p), not all zero; got {t.size} entries."
            )
        t = t / jnp.sqrt(branch.inner(t, t))
    if (direction * float(t[-1]) < 0) if tangent_start is None else direction < 0:
        t = -t
    start = dict(y=y, t=t, iterations=it, residual=res, s=0.0, displacement=0.0)
    points = [branch.finish(start)]
    if points[0] is None and tangent_start is not None:
        # switch_branch starts on its branch point, where df/dx is singular and
        # shift-and-invert cannot start: a thousandth of the first step along instead
        points = [branch.along(start, 1e-3 * ds)]
    if points[0] is None:
        raise ValueError(
            "the eigen-solver failed at the start ("
            + (branch.failure or {}).get("message", "?")
            + "); if the start is on a bifurcation (df/dx singular), start next to it, "
            "or pass tangent_start; else keep other eigenvalues (k=, spectrum=), or "
            "for a small system solve densely (matrix_free=False)."
        )
    start_correction = _warn_if_moved(jnp.ravel(x0), y, ds, state_weight)
    if tangent_start is None:  # switch_branch starts on its branch point by design
        _warn_if_singular_start(points[0])
    bifurcations, stop_reason, step = [], "max_points", float(ds)
    skip_first = tangent_start is not None  # started on a bifurcation: nothing to find
    while len(points) < max_points:
        a = points[-1]
        b = branch.along(a, step, spectrum=False)
        # A turn beyond max_turn with a large Newton correction is a jump to another
        # branch; with a small one (at most half the step) it is the branch's own kink:
        # where the field is only piecewise smooth (ReLU memories) the tangent jumps.
        turned = b is not None and branch.inner(a["t"], b["t"]) < math.cos(max_turn)
        if b is not None and (not turned or b["displacement"] <= 0.5 * step):
            b = branch.finish(b)
        elif b is not None:
            branch.refuse("turn", b["y"], b["residual"], b["iterations"], step=step)
            b = None
        if b is None:
            failure = branch.failure or {}
            cause = "newton_near_tol" if _near_tol(failure, tol) else failure.get("cause", "?")
            branch.refused[cause] += 1
            step *= 0.5
            if step < ds_min:
                stop_reason = "ds_min"
                break
            continue
        if not skip_first:
            found = _detect(branch, a, b, len(points) - 1, locate_tol)
            bifurcations += [_trust(record, locate_tol) for record in found]
            branch.check_unseen(a, b, found)
        skip_first = False
        points.append(b)
        if b["iterations"] <= 3:
            step = min(1.5 * step, ds_max)
        elif b["iterations"] >= max(6, max_newton - 2):
            step = max(0.5 * step, ds_min)
        p = float(b["y"][-1])
        if not lo <= p <= hi:
            stop_reason = "p_span"
            break
        # Closed: back at the start, going the same way (tangents in the same half-space).
        # Near in the metric alone is not enough: past a fold the other side of a
        # hairpin can pass within half a step of the start, going the other way (the
        # shipped core's beta branch does).
        back = b["y"] - points[0]["y"]
        if (
            len(points) > 3
            and math.sqrt(branch.inner(back, back)) < 0.5 * step
            and branch.inner(b["t"], points[0]["t"]) > 0
        ):
            stop_reason = "closed"
            break
    result = _result(
        points,
        bifurcations,
        stop_reason,
        _stall(branch.failure, tol) if stop_reason == "ds_min" else None,
        F,
        dense,
        dtype,
        dict(
            p_span=(lo, hi),
            ds=ds,
            ds_min=ds_min,
            ds_max=ds_max,
            k=k,
            tol=tol,
            max_newton=max_newton,
            max_turn=max_turn,
            locate_tol=locate_tol,
            state_weight=state_weight,
            spectrum=spectrum,
            preconditioner=None
            if preconditioner is None
            else getattr(preconditioner, "__name__", type(preconditioner).__name__),
            parameter=None
            if not energy_model
            else (
                parameter
                if isinstance(parameter, str)
                else getattr(parameter, "__name__", "function")
            ),
        ),
    )
    result["start_correction_rms"] = start_correction
    result["spectrum"] = spectrum
    result["refused_steps"] = dict(branch.refused)
    _warn_if_at_rounding_floor(branch.refused, len(points), tol)
    result["unstable_left_kept"] = branch.unseen
    if branch.unseen:
        warnings.warn(
            f"continuation: an unstable eigenvalue left the k = {k} eigenvalues nearest "
            f"zero that each point keeps, at p = {', '.join(f'{q:.6g}' for q in branch.unseen)}"
            " (without crossing zero): after it, 'unstable' and 'stable' do not count it. "
            "Raise k, or check stability with spectrum='rightmost'.",
            RuntimeWarning,
            stacklevel=2,
        )
    if energy_model:
        _to_model_coordinates(result, args)
    return result


def _to_model_coordinates(result, packed):
    """An energy model's branch in its own coordinates: `x` (and each bifurcation's)
    from the manifold coordinates, which move to `y`; `fixed_point_residual_rms [m]`,
    the model's RMS residual at each point."""
    dtype = np.asarray(result["x"]).dtype
    pairs = [
        state_and_residual(jnp.asarray(y), jnp.asarray(p, dtype), packed)
        for y, p in zip(result["x"], result["p"])
    ]
    result["y"], result["x"] = result["x"], np.stack([np.asarray(x) for x, _ in pairs])
    result["fixed_point_residual_rms"] = np.array([float(r) for _, r in pairs])
    for b in result["bifurcations"]:
        x, res = state_and_residual(jnp.asarray(b["x"]), jnp.asarray(b["p"], dtype), packed)
        b["y"], b["x"], b["fixed_point_residual_rms"] = b["x"], np.asarray(x), float(res)


def check_linear_algebra(system, spectrum, preconditioner, matrix_free) -> None:
    """Refuse an unknown `spectrum`, a `preconditioner` that is not callable, given with
    `matrix_free=False` (a dense solve has no use for it) or for an energy model (its
    manifold coordinates are internal)."""
    if spectrum not in SPECTRA:
        raise ValueError(f"spectrum must be one of {SPECTRA} (got {spectrum!r}).")
    if preconditioner is None:
        return
    if not callable(preconditioner):
        raise TypeError(
            "preconditioner must be a function (v, x, p, args) -> ~(df/dx)^-1 v; got "
            f"{type(preconditioner).__name__}."
        )
    if matrix_free is False:
        raise ValueError(
            "preconditioner is for matrix-free solves; with matrix_free=False every "
            "solve is a dense LU: drop one of the two."
        )
    if callable(getattr(system, "vector_field", None)):
        raise ValueError(
            "preconditioner is for a field f(x, p, args); an energy model's branch is "
            "followed in internal manifold coordinates, where none can be given."
        )


def is_dense(n: int, matrix_free: bool | None, preconditioner) -> bool:
    """Whether `n` unknowns are solved with formed Jacobians: up to `DENSE_MAX` unless
    `matrix_free` says otherwise or a `preconditioner` is given (matrix-free)."""
    if matrix_free is None:
        dense = n + 1 <= DENSE_MAX and preconditioner is None
    else:
        dense = not matrix_free
    if not dense and n < 4:
        raise ValueError(
            f"a state of {n} entries is solved dense: matrix-free (Arnoldi) needs at least "
            "4; drop matrix_free=True and the preconditioner."
        )
    return dense


def kept_eigenvalues(k: int, n: int, dense: bool) -> int:
    """The eigenvalues each point keeps: `k`, at most `n` dense (all of them) and
    `n - 2` matrix-free (Arnoldi's limit)."""
    return min(k, n if dense else n - 2)


def check_preconditioner(preconditioner, x0, p0, args) -> None:
    """Refuse a `preconditioner` that fails on a state-shaped `v`, returns another
    shape, is not linear and transposable in `v` (JAX's GMRES transposes its operator
    when it is traced, and the left null vector needs the transpose), or returns NaN or
    inf at `(x0, p0)`: each would fail deep inside JAX or pass NaN on."""
    if preconditioner is None:
        return
    x = jnp.asarray(x0)
    p = jnp.asarray(p0, x.dtype)

    def apply(v):
        return preconditioner(v, x, p, args)

    name = getattr(preconditioner, "__name__", type(preconditioner).__name__)
    try:
        out = jax.eval_shape(apply, x)
    except Exception as error:  # noqa: BLE001 (the user's function: any error)
        raise ValueError(
            f"preconditioner {name}(v, x, p, args) failed on v of the state's shape "
            f"{tuple(x.shape)}: {type(error).__name__}: {str(error).splitlines()[0]}"
        ) from None
    if getattr(out, "shape", None) != x.shape:
        raise ValueError(
            f"preconditioner {name} returned shape {getattr(out, 'shape', type(out))}; it "
            f"must return an array of v's shape {tuple(x.shape)}."
        )
    try:
        jax.eval_shape(lambda v: jax.linear_transpose(apply, x)(v), x)
    except Exception as error:  # noqa: BLE001
        raise ValueError(
            f"preconditioner {name} must be linear in v and transposable by "
            "jax.linear_transpose (GMRES transposes it; so does the left null vector's "
            "solve): no nonlinear operation on v, no jax.pure_callback (write the solve "
            "in jax.numpy / jax.lax.linalg). JAX said: "
            f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        ) from None
    probe = 1.0 + jnp.arange(x.size, dtype=x.dtype).reshape(x.shape) / x.size
    if not bool(jnp.all(jnp.isfinite(apply(probe)))):
        raise ValueError(
            f"preconditioner {name} returned NaN or inf at the start (x0, p0); it must "
            "return a finite approximation of (df/dx)^-1 v."
        )


def check_field_shape(field, x0, p, args) -> None:
    """Refuse a field whose output does not have the state's shape, before any solve."""
    try:
        out = jax.eval_shape(lambda x: field(x, jnp.asarray(p, x.dtype), args), x0)
    except Exception as error:  # the user's function, called as continuation will
        raise ValueError(
            f"calling field(x, p, args) with x of shape {x0.shape} failed with "
            f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''} "
            "(the state comes first: a field(t, x, args) of lyapunov_spectrum takes time "
            "first; args is None unless given)."
        ) from error
    if getattr(out, "shape", None) != x0.shape:
        raise ValueError(
            f"field(x, p, args) returned shape {getattr(out, 'shape', None)} for a state of "
            f"shape {x0.shape}: it must return dx/dt, the state's shape."
        )


def is_float(leaf) -> bool:
    """Whether a leaf is a floating array or a Python float (cast to the branch's
    dtype: a Python float would be a static, recompiling argument)."""
    if isinstance(leaf, float):
        return True
    return hasattr(leaf, "dtype") and jnp.issubdtype(leaf.dtype, jnp.floating)


def _warn_if_at_rounding_floor(refused, points: int, tol: float) -> None:
    """A `RuntimeWarning` where at least `max(3, points / 4)` steps were refused with
    Newton ending within `STALL_FACTOR` of `tol` (steps shrink there): `tol` at the
    field's rounding floor (about `eps |df/dx| |x|`: a fine grid's Laplacian has a large
    `|df/dx|`), or a piecewise-smooth field's kinks (ReLU memories) under Newton's
    iterates."""
    near = refused.get("newton_near_tol", 0)
    if near >= max(3, points / 4):
        warnings.warn(
            f"continuation: {near} steps were refused with Newton ending within "
            f"{STALL_FACTOR:g}x of tol = {tol:g} and no lower ({points} points kept): tol "
            "is near the field's rounding floor (a large Jacobian, such as a fine grid's "
            "Laplacian, rounds f at about eps |df/dx| |x|: a looser tol goes on), or "
            "Newton meets kinks of a piecewise-smooth field (ReLU memories); "
            "result['refused_steps'] counts the refusals by cause.",
            RuntimeWarning,
            stacklevel=3,
        )


def _stall(failure, tol):
    """The last refused step before the step fell below `ds_min`, with `near_tol`:
    Newton ended within `STALL_FACTOR` of `tol` and could not lower its residual
    further (a kink of a piecewise-smooth field, such as ReLU memories make, where the
    Jacobian jumps under Newton's iterates, or `tol` at the field's rounding floor)
    rather than far from any steady state."""
    if failure is None:
        return None
    return dict(failure, near_tol=_near_tol(failure, tol))


def _near_tol(failure, tol) -> bool:
    """Whether a refused step's Newton ended within `STALL_FACTOR` of `tol`."""
    return failure.get("cause") == "newton" and failure["residual_rms"] <= STALL_FACTOR * tol


def _result(points, bifurcations, stop_reason, stall, F, dense, dtype, settings):
    ys = np.stack([np.asarray(q["y"]) for q in points])
    values = np.stack([np.asarray(q["eigenvalues"]) for q in points])
    unstable = np.array([sum(q["unstable"]) for q in points])
    return dict(
        p=ys[:, -1],
        x=ys[:, :-1].reshape((len(points),) + F.shape),
        s=np.array([q["s"] for q in points]),
        eigenvalues=values,
        unstable=unstable,
        stable=np.max(values.real, axis=1) < 0,
        tangent_p=np.array([float(q["t"][-1]) for q in points]),
        newton_iterations=np.array([q["iterations"] for q in points]),
        residual_rms=np.array([q["residual"] for q in points]),
        bifurcations=bifurcations,
        stop_reason=stop_reason,
        stall=stall,
        dense=dense,
        metadata=metadata(
            study="continuation",
            dtype=dtype,
            dense_max=DENSE_MAX,
            xla_passes_off=rescued_kernels(),
            **settings,
        ),
    )


def switch_branch(
    field: solvers.EnergySystem | Field,
    bifurcation: dict,
    *,
    p_span: tuple[float, float],
    args: Any = None,
    direction: Literal[1, -1] = 1,
    ds: float = 0.01,
    **options: Any,
) -> dict:
    """Follow the other branch through a branch point found by `continuation`
    (`bifurcation["kind"] == "branch_point"`): `continuation` from that point along its
    `switch_tangent`, towards `direction` (`+1` or `-1`) along it. `options`: as for
    `continuation`."""
    if "switch_error" in bifurcation:
        raise ValueError(
            "this branch point has no switch tangent: its left null vector was not "
            f"found ({bifurcation['switch_error']})."
        )
    if bifurcation.get("kind") != "branch_point" or "switch_tangent" not in bifurcation:
        raise ValueError(
            "switch_branch needs a branch point of continuation's "
            "bifurcations (kind 'branch_point'); got kind "
            f"{bifurcation.get('kind')!r}."
        )
    if not bifurcation.get("located", True):
        warnings.warn(
            f"switch_branch: this branch point (p = {bifurcation['p']:g}) was not located "
            f"(its bracket in s is {bifurcation.get('s_bracket', float('nan')):.3g}): the "
            "switch starts away from it and may follow the same branch again; continue "
            "with a smaller ds or locate_tol to locate it first.",
            RuntimeWarning,
            stacklevel=2,
        )
    return continuation(
        field,
        bifurcation["x"],
        bifurcation["p"],
        p_span=p_span,
        args=args,
        ds=ds,
        direction=direction,
        tangent_start=bifurcation["switch_tangent"],
        **options,
    )
