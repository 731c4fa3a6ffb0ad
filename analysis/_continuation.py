"""Steady states followed in a parameter: pseudo-arclength continuation, the leading
eigenvalues at every point, and the bifurcations between points located by bisection.

The system is any field `f(x, p, args) -> dx/dt` of a state `x` (any shape) and a scalar
parameter `p`; its steady states are the zeros of `f`. The branch is a curve
`y(s) = (x(s), p(s))` in `n + 1` unknowns, parametrised by arclength `s`, so that it can
be followed through a fold, where `p` turns back (Keller, 1977; Allgower and Georg,
*Introduction to Numerical Continuation Methods*, 1990). Each step:

1. **predict** along the unit tangent `t`: `y_pred = y + ds t`;
2. **correct** by Newton on `f(y) = 0, t . (y - y_pred) = 0` (the bordered Jacobian
   `[df/dy; t^T]`: formed up to `DENSE_MAX` unknowns, else GMRES on JVPs);
3. accept if Newton converged (RMS f at most `tol`) and the new tangent turned by less
   than `max_turn` radians; else halve `ds` (the branch stops below `ds_min`). A
   corrector that needed few iterations lengthens the next step (up to `ds_max`).

At every accepted point the `k` eigenvalues of `df/dx` with the largest real parts are
kept (dense `eig`, or ARPACK's Arnoldi on JVPs). Between two points:

- a **fold** where the tangent's `p` component changes sign (`p` turns; an eigenvalue
  passes through 0); located by bisection on that component;
- a **branch point** where a real eigenvalue passes through 0 and `p` does not turn;
  located by bisection on that eigenvalue. Its record carries the tangent of the other
  branch, `(phi, 0)` made orthogonal to the branch's tangent, `phi` the eigenvector of the
  zero eigenvalue: `switch_branch` follows it;
- a **Hopf point** where a complex pair crosses the imaginary axis; located by bisection
  on their real part (gradient flows such as the ET's have none: their Jacobians are
  symmetric in the right metric).

Bisection runs the corrector from the earlier point with a shorter step until the
bracket in `s` is below `locate_tol`; near a fold `p` varies quadratically in `s`, so its
`p` is located far more precisely still.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np

from ._branch_kernels import DENSE_MAX, FlatField, correct, leading_eigen, tangent
from ._records import metadata

STOP_REASONS = ("p_span", "max_points", "ds_min", "closed")


def _check(field, x0, p0, p_span, ds, ds_min, ds_max, k, tol, max_points):
    if not callable(field):
        raise TypeError("continuation takes a callable field(x, p, args) -> dx/dt "
                        f"(got {type(field).__name__}).")
    lo, hi = (float(v) for v in p_span)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"p_span must be (low, high) with low < high (got {p_span}).")
    if not lo <= float(p0) <= hi:
        raise ValueError(f"p0 = {float(p0):g} lies outside p_span = ({lo:g}, {hi:g}).")
    if not 0 < ds_min <= ds <= ds_max:
        raise ValueError("steps must satisfy 0 < ds_min <= ds <= ds_max (got "
                         f"ds={ds}, ds_min={ds_min}, ds_max={ds_max}).")
    if not (k >= 1 and tol > 0 and max_points >= 2):
        raise ValueError(f"k >= 1, tol > 0 and max_points >= 2 are needed (got k={k}, "
                         f"tol={tol}, max_points={max_points}).")
    if not np.all(np.isfinite(np.asarray(x0))):
        raise ValueError("x0 holds NaN or inf: start from a finite state.")
    return lo, hi


def dtype_of(x0, dtype):
    dtype = jnp.asarray(x0).dtype if dtype is None else jnp.dtype(dtype)
    if not jnp.issubdtype(dtype, jnp.floating):
        dtype = jnp.float64 if jax.config.jax_enable_x64 else jnp.float32
    if dtype == jnp.float64 and not jax.config.jax_enable_x64:
        raise ValueError("float64 needs jax_enable_x64: call "
                         "jax.config.update('jax_enable_x64', True) first, or pass "
                         "dtype=jnp.float32.")
    return dtype


class _Branch:
    """The compiled pieces bound to one field, its conditions and settings."""

    def __init__(self, F, args, tol, max_newton, k, dense, dtype):
        self.F, self.args, self.k, self.dense = F, args, k, dense
        self.tol = jnp.asarray(tol, dtype)
        self.max_newton = int(max_newton)

    def correct(self, y_pred, direction):
        y, it, res = correct(self.F, y_pred, direction, self.args, self.tol,
                             self.max_newton, self.dense)
        return y, int(it), float(res)

    def tangent(self, y, border):
        return tangent(self.F, y, border, self.args, self.tol, self.dense)

    def point(self, y, t, iterations, residual, s):
        values, vectors, unstable = leading_eigen(self.F, y, self.args, self.k, self.dense)
        return dict(y=y, t=t, iterations=iterations, residual=residual, s=s,
                    eigenvalues=values, vectors=vectors, unstable=unstable)

    def along(self, a, step):
        """The corrected point at arclength `step` past point `a` (its tangent as the
        border), or None where Newton fails there."""
        y, it, res = self.correct(a["y"] + step * a["t"], a["t"])
        if not (res <= float(self.tol)):
            return None
        return self.point(y, self.tangent(y, a["t"]), it, res, a["s"] + step)


def _crossing(values, real: bool):
    """Signed test value of the eigenvalue nearest the imaginary axis among the real
    (`real`) or the complex ones; None if there is none."""
    scale = 1e-7 * max(1.0, float(np.max(np.abs(values))) if values.size else 1.0)
    pick = np.abs(values.imag) <= scale if real else values.imag > scale
    if not np.any(pick):
        return None
    chosen = values[pick]
    return float(chosen.real[np.argmin(np.abs(chosen.real))])


def _bisect(branch, a, b, test, locate_tol):
    """Bisection in arclength between points `a` and `b` (`b` one step past `a`) on
    `test(point)`, whose sign differs at the two. Returns the last point and the bracket."""
    lo, hi = 0.0, b["s"] - a["s"]
    f_lo, best = test(a), b
    for _ in range(200):
        if hi - lo <= locate_tol:
            break
        mid = 0.5 * (lo + hi)
        point = branch.along(a, mid)
        value = None if point is None else test(point)
        if value is None:
            break
        best = point
        if np.sign(value) == np.sign(f_lo):
            lo, f_lo = mid, value
        else:
            hi = mid
    return best, hi - lo


def _record(kind, point, bracket, index, F, eigenvalue=None):
    y = np.asarray(point["y"])
    record = dict(kind=kind, p=float(y[-1]), x=np.asarray(F.state(point["y"])),
                  s=float(point["s"]), index=int(index), s_bracket=float(bracket),
                  eigenvalues=point["eigenvalues"],
                  residual_rms=float(point["residual"]))
    if eigenvalue is not None:
        record["eigenvalue"] = complex(eigenvalue)
    return record


def _detect(branch, a, b, index, locate_tol):
    """The bifurcations between consecutive points `a` and `b`."""
    found = []
    if np.sign(float(a["t"][-1])) * np.sign(float(b["t"][-1])) < 0:
        point, bracket = _bisect(branch, a, b, lambda q: float(q["t"][-1]), locate_tol)
        nearest = point["eigenvalues"][np.argmin(np.abs(point["eigenvalues"]))]
        found.append(_record("fold", point, bracket, index, branch.F, nearest))
        return found
    if a["unstable"] == b["unstable"]:
        return found
    for kind, real in (("branch_point", True), ("hopf", False)):
        ends = _crossing(a["eigenvalues"], real), _crossing(b["eigenvalues"], real)
        if None in ends or np.sign(ends[0]) == np.sign(ends[1]):
            continue
        point, bracket = _bisect(branch, a, b, lambda q: _crossing(q["eigenvalues"], real),
                                 locate_tol)
        values = point["eigenvalues"]
        pick = np.abs(values.real) == np.min(np.abs(values.real))
        index_e = int(np.flatnonzero(pick)[0])
        record = _record(kind, point, bracket, index, branch.F, values[index_e])
        if kind == "branch_point":
            phi = np.real(point["vectors"][:, index_e])
            other = np.concatenate([phi, [0.0]])
            t = np.asarray(point["t"])
            other = other - (other @ t) * t
            record["switch_tangent"] = other / np.linalg.norm(other)
        else:
            record["frequency"] = abs(float(values[index_e].imag))
        found.append(record)
    return found


def continuation(field, x0, p0, *, p_span, args=None, ds=0.01, ds_min=1e-8, ds_max=0.1,
                 direction=1, max_points=1000, k=6, tol=1e-10, max_newton=10,
                 max_turn=0.5, locate_tol=1e-10, tangent_start=None, matrix_free=None,
                 dtype=None) -> dict:
    """Follow the branch of steady states of `field` through `(x0, p0)` in `p`, with
    the `k` leading eigenvalues at every point and the bifurcations located (module
    docstring).

    **Arguments:**

    - `field`: `f(x, p, args) -> dx/dt`, `x` of any shape, `p` a scalar (traced: one
      compilation serves the branch and every later call with the same `field`).
    - `x0`: a state at or near a steady state at `p0`; it is first corrected at fixed
      `p0` (Newton), and refused, naming the residual, if that fails.
    - `p_span`: `(low, high)`: the branch stops at its first point outside.
    - `args`: the field's conditions (a pytree).
    - `ds`, `ds_min`, `ds_max`: the first, smallest and largest arclength step (in the
      units of `(x, p)`); `direction`: `+1` starts towards larger `p`, `-1` smaller.
    - `max_points`: the most points kept; `k`: eigenvalues kept per point.
    - `tol`: RMS of `f` at which Newton has converged (the field's units); `max_newton`:
      iterations per corrector; `max_turn`: largest angle (radians) between consecutive
      tangents before a step is refused as a possible jump to another branch.
    - `locate_tol`: arclength bracket to which a bifurcation is located.
    - `tangent_start`: the first tangent (`[n + 1]`: the state's entries, then `p`)
      instead of the branch's own; `switch_branch` passes the other branch's here.
    - `matrix_free`: force GMRES and Arnoldi (`True`) or dense Jacobians (`False`);
      default: dense up to `DENSE_MAX` unknowns.
    - `dtype`: the arithmetic (default: `x0`'s; float64 needs `jax_enable_x64`).

    **Returns:** a dict: `p [m]`, `x [m, *x0.shape]`, `s [m]` (arclength),
    `eigenvalues [m, k]` (complex, largest real part first), `unstable [m]` (eigenvalues
    with a positive real part: all of them when dense, among the `k` when matrix-free),
    `stable [m]`, `tangent_p [m]`, `newton_iterations [m]`, `residual_rms [m]`;
    `bifurcations`: a list of dicts with `kind` (`"fold"`, `"branch_point"`, `"hopf"`),
    `p`, `x`, `s`, `index` (the point before it), `s_bracket` (the final bisection
    bracket), `eigenvalue` (the one crossing), `residual_rms`, and `switch_tangent`
    (branch points) or `frequency` (Hopf points); `stop_reason` (one of
    `STOP_REASONS`), `dense`, `metadata`.
    """
    lo, hi = _check(field, x0, p0, p_span, ds, ds_min, ds_max, k, tol, max_points)
    dtype = dtype_of(x0, dtype)
    x0 = jnp.asarray(x0, dtype)
    n = x0.size
    dense = (n + 1 <= DENSE_MAX) if matrix_free is None else not matrix_free
    if not dense and n < 4:
        raise ValueError("matrix_free needs a state of at least 4 entries (ARPACK).")
    F = FlatField(field, tuple(x0.shape))
    args = jax.tree.map(lambda v: jnp.asarray(v, dtype) if is_float(v) else v, args)
    branch = _Branch(F, args, tol, max_newton, k, dense, dtype)

    y0 = jnp.concatenate([jnp.ravel(x0), jnp.asarray([p0], dtype)])
    e_p = jnp.zeros(n + 1, dtype).at[-1].set(1.0)
    y, it, res = branch.correct(y0, e_p)
    if not res <= tol:
        raise ValueError(f"x0 is not near a steady state at p0 = {float(p0):g}: Newton at "
                         f"fixed p ended at RMS f = {res:.3g} after {it} iterations "
                         f"(tol {tol:g}); start closer, e.g. from the end of a solve.")
    if tangent_start is None:
        t = branch.tangent(y, e_p)
        if not bool(jnp.all(jnp.isfinite(t))):
            raise ValueError(f"df/dx is singular at the start (p0 = {float(p0):g}): start "
                             "next to the bifurcation, or pass tangent_start.")
    else:
        t = jnp.asarray(tangent_start, dtype).ravel()
        if t.size != n + 1:
            raise ValueError(f"tangent_start needs {n + 1} entries (the state's, then p); "
                             f"got {t.size}.")
        t = t / jnp.linalg.norm(t)
    if (direction * float(t[-1]) < 0) if tangent_start is None else direction < 0:
        t = -t
    points = [branch.point(y, t, it, res, 0.0)]
    bifurcations, stop_reason, step = [], "max_points", float(ds)
    skip_first = tangent_start is not None  # started on a bifurcation: nothing to find
    while len(points) < max_points:
        a = points[-1]
        b = branch.along(a, step)
        if b is None or float(jnp.dot(a["t"], b["t"])) < math.cos(max_turn):
            step *= 0.5
            if step < ds_min:
                stop_reason = "ds_min"
                break
            continue
        if not skip_first:
            bifurcations += _detect(branch, a, b, len(points) - 1, locate_tol)
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
        if len(points) > 3 and float(jnp.linalg.norm(b["y"] - points[0]["y"])) < 0.5 * step:
            stop_reason = "closed"
            break
    return _result(points, bifurcations, stop_reason, F, dense, dtype, dict(
        p_span=(lo, hi), ds=ds, ds_min=ds_min, ds_max=ds_max, k=k, tol=tol,
        max_newton=max_newton, max_turn=max_turn, locate_tol=locate_tol))


def is_float(leaf) -> bool:
    """Whether a conditions leaf is a floating array (cast to the branch's dtype)."""
    return hasattr(leaf, "dtype") and jnp.issubdtype(leaf.dtype, jnp.floating)


def _result(points, bifurcations, stop_reason, F, dense, dtype, settings):
    ys = np.stack([np.asarray(q["y"]) for q in points])
    values = np.stack([np.asarray(q["eigenvalues"]) for q in points])
    unstable = np.array([q["unstable"] for q in points])
    return dict(
        p=ys[:, -1], x=ys[:, :-1].reshape((len(points),) + F.shape),
        s=np.array([q["s"] for q in points]), eigenvalues=values, unstable=unstable,
        stable=np.max(values.real, axis=1) < 0,
        tangent_p=np.array([float(q["t"][-1]) for q in points]),
        newton_iterations=np.array([q["iterations"] for q in points]),
        residual_rms=np.array([q["residual"] for q in points]),
        bifurcations=bifurcations, stop_reason=stop_reason, dense=dense,
        metadata=metadata(study="continuation", dtype=dtype, dense_max=DENSE_MAX,
                          **settings))


def switch_branch(field, bifurcation: dict, *, p_span, args=None, direction=1, ds=0.01,
                  **options) -> dict:
    """Follow the other branch through a branch point found by `continuation`
    (`bifurcation["kind"] == "branch_point"`): `continuation` from that point along its
    `switch_tangent`, towards `direction` (`+1` or `-1`) along it. `options`: as for
    `continuation`."""
    if bifurcation.get("kind") != "branch_point" or "switch_tangent" not in bifurcation:
        raise ValueError("switch_branch needs a branch point of continuation's "
                         "bifurcations (kind 'branch_point'); got kind "
                         f"{bifurcation.get('kind')!r}.")
    return continuation(field, bifurcation["x"], bifurcation["p"], p_span=p_span, args=args,
                        ds=ds, direction=direction,
                        tangent_start=bifurcation["switch_tangent"], **options)
