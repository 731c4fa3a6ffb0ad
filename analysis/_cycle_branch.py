"""Periodic orbits followed in a parameter: pseudo-arclength continuation of the shooting
problem, the Floquet multipliers at every point, and the bifurcations of cycles between
points located to a tolerance.

A cycle of `dx/dt = f(x, p)` is a zero of `H(x0, T, p) = (phi(x0, T; p) - x0,
f_j(x0, p))` in the `n + 2` unknowns `y = (x0, T, p)`: the flow over one period returns
to its start, which sits where the state's entry `j` (`phase_entry`, by default the one
that varies most over the first orbit) is at an extremum (a phase condition that needs
no reference orbit, so that the system is the same at every point). The branch is a
curve `y(s)` in arclength, `ds^2 = RMS(dx0)^2 + (dT / T)^2 + dp^2` (the period enters
as `log T`, so that a step changes it by a bounded factor: near a homoclinic orbit,
where `T` grows without bound, the steps still reach it), followed as
`continuation` follows steady states: predict along the unit tangent, correct by Newton
(optimistix, LU) on `H = 0` and `t . (y - y_pred) = 0`, accept where Newton converged and
the tangent turned by less than `max_turn`, else halve the step.

The Jacobian `dH/dy` (`n + 2` tangent solves through the flow, one compiled program) gives
both the tangent (its null vector) and the monodromy matrix: its first `n` columns are
`M - I`, `M = dphi/dx0`, whose eigenvalues are the Floquet multipliers. One of them is 1
(the shift along the orbit; identified by its eigenvector along the flow). Between two
points, with the trivial multiplier set aside:

- a **fold** of cycles (`"fold"`) where the tangent's `p` component changes sign (a real
  multiplier passes through +1 as the branch turns: two cycles, one stable, meet and
  vanish);
- a **period doubling** (`"period_doubling"`) where the number of real multipliers below
  -1 changes: a cycle of about twice the period branches off;
- a **Neimark-Sacker** point (`"neimark_sacker"`) where the number of complex multipliers
  outside the unit circle changes (by two): an invariant torus branches off;
- a **branch point** of cycles (`"branch_point"`) where the number of real multipliers
  above +1 changes and `p` does not turn.

Each is located by bisection in arclength (a fold on the sign of the tangent's `p`
component) until the bracket is below `locate_tol`; the stretch past a located crossing
is searched again, so that two in one step are both found (beside a fold, on either side
of its bracket). The branch stops outside `p_span`, after `max_points`, where the step
falls below `ds_min`, where the period exceeds `max_period` (as where the cycles approach
a homoclinic orbit, whose period is infinite), at a Hopf point (`"hopf"`), where the
cycles shrink onto a steady state (an orbit's amplitude below `COLLAPSE` times the
largest on the branch), or, on a branch of doubled cycles, at the period doubling it was
born at (`"period_doubling"`: the branch turns where its orbit is the parent cycle
travelled twice, and would come back along itself shifted by half a period; recorded as
a `period_doubling`, whose multiplier there is +1, the square of the parent's -1).

Started from a located period doubling or branch point of cycles, the branch is the one
born there (`_switch`): the doubled cycles, or the other branch through the branch point.
"""

import math
import warnings
from typing import Any, Literal

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
import optimistix as optx

from ._branch_kernels import DENSE_MAX, real_eigenvalues
from ._continuation import Field, check_field_shape, dtype_of, is_float
from ._hopf import _from_json, hopf_cycle
from ._periodic_orbit import DEFAULTS, SOLVERS, _trivial, periodic_orbit, rescaled_flow
from ._records import metadata

STOP_REASONS = ("p_span", "max_points", "ds_min", "max_period", "hopf", "period_doubling")
# The cycles have shrunk onto a steady state (a Hopf point) where an orbit's amplitude
# falls below this fraction of the largest on the branch.
COLLAPSE = 1e-3
KINDS = ("fold", "period_doubling", "neimark_sacker", "branch_point")
# The arclength bracket of a located bifurcation, by default: in float32 a narrower one
# is below the rounding of a state of order 1.
LOCATE_TOL = {"float64": 1e-7, "float32": 1e-5}
# The bifurcations a branch of cycles is born at (`_switch`), and what their records hold
# for it.
SWITCHES = ("period_doubling", "branch_point")
SWITCH_KEYS = ("x0", "period", "p", "tangent", "phase_entry")
# At a simple period doubling or branch point the shooting Jacobian's second smallest
# singular value is below this fraction of the third: its kernel is two-dimensional.
KERNEL_GAP = 1e-2
# A corrected point farther than this fraction of the step from its prediction is
# refused (the step halved): Newton may have gone to another branch.
MAX_MISS = 0.5
# A corrector that needed at most this many Newton iterations lengthens the next step.
FAST_NEWTON = 3
STEP_GROWTH = 1.5


class _Cycles(eqx.Module):
    """The field, its conditions and the solve's settings, with the shooting residual of
    `y = (x0 flat, T, p)`: what each compiled kernel below takes."""

    field: Any = eqx.field(static=True)
    solver: Any = eqx.field(static=True)
    shape: tuple[int, ...] = eqx.field(static=True)
    # traced, not static: a branch with another phase entry (the doubled cycles', a
    # restart's) runs the same compiled kernels
    phase_entry: Any
    args: Any
    rtol: Any
    atol: Any
    max_steps: int = eqx.field(static=True)

    def flow(self, x, period, p, saveat=None):
        """One solve over the period from `x` at `p` (`rescaled_flow`)."""
        return rescaled_flow(
            self.field,
            self.solver,
            x,
            period,
            p,
            self.args,
            (self.rtol, self.atol, self.max_steps),
            saveat,
        )

    def residual(self, y):
        """`H(y)` (`[n + 1]`) of `y = (x0 flat, log T, p)`: the return `phi(x0, T; p) -
        x0` and the phase condition `f_j(x0, p)`; NaN where the solve failed."""
        x = y[:-2].reshape(self.shape)
        sol = self.flow(x, jnp.exp(y[-2]), y[-1])
        velocity = self.field(x, y[-1], self.args).ravel()
        r = jnp.concatenate([sol.ys[-1].ravel() - y[:-2], velocity[self.phase_entry][None]])
        return jnp.where(sol.result == diffrax.RESULTS.successful, r, jnp.nan)


@eqx.filter_jit
def _correct(cycles, y_pred, border, weights, tol, max_newton: int):
    """Newton on `H(y) = 0`, `border . (weights * (y - y_pred)) = 0` from `y_pred`:
    `(y, iterations, RMS of H there)`."""
    newton: optx.Newton = optx.Newton(rtol=tol, atol=tol, norm=optx.rms_norm, linear_solver=lx.LU())

    def bordered(y, _):
        return jnp.concatenate([cycles.residual(y), jnp.sum(border * weights * (y - y_pred))[None]])

    solution: optx.Solution = optx.root_find(
        bordered, newton, y_pred, max_steps=max_newton, throw=False
    )
    y = solution.value
    return y, solution.stats["num_steps"], jnp.sqrt(jnp.mean(cycles.residual(y) ** 2))


@eqx.filter_jit
def _linearise(cycles, y, previous, weights, points: int):
    """At a point `y` of the branch: the unit tangent (in the arclength's metric,
    oriented along `previous`), the monodromy matrix (`[n, n]`), the field at `x0`
    (flat), the orbit at `points` equal times (`[points, *shape]`), the Jacobian
    `dH/dy` (`[n + 1, n + 2]`; at a branch point, where the tangent is not defined,
    what `_switch` uses) and `H(y)`."""
    jac, residual = jax.jacfwd(lambda z: (cycles.residual(z),) * 2, has_aux=True)(y)
    n = y.size - 2
    bordered = jnp.concatenate([jac, (weights * previous)[None]])
    t = jnp.linalg.solve(bordered, jnp.zeros(n + 2, y.dtype).at[-1].set(1.0))
    t = t / jnp.sqrt(jnp.sum(weights * t * t))
    t = t * jnp.sign(jnp.sum(weights * t * previous))
    monodromy = jac[:n, :n] + jnp.eye(n, dtype=y.dtype)
    x = y[:-2].reshape(cycles.shape)
    velocity = cycles.field(x, y[-1], cycles.args).ravel()
    grid = jnp.arange(points, dtype=y.dtype) / points
    orbit = cycles.flow(x, jnp.exp(y[-2]), y[-1], diffrax.SaveAt(ts=grid)).ys
    return t, monodromy, velocity, orbit, jac, residual


@eqx.filter_jit
def _curvature(cycles, y, u, v):
    """`d^2 H(y)[u, v]` (`[n + 1]`), by a JVP of a JVP through the flow."""
    once = lambda z: jax.jvp(cycles.residual, (z,), (u,))[1]  # noqa: E731
    return jax.jvp(once, (y,), (v,))[1]


def _classify(values, trivial):
    """The counts that change at a bifurcation of cycles, the trivial multiplier set
    aside: real multipliers below -1, complex ones outside the unit circle, real ones
    above +1."""
    others = np.delete(values, trivial) if trivial is not None else values
    real = real_eigenvalues(others)
    return (
        int(np.sum(real & (others.real < -1.0))),
        int(np.sum(~real & (np.abs(others) > 1.0))),
        int(np.sum(real & (others.real > 1.0))),
    )


class _Branch:
    """The compiled pieces bound to one field and its settings, and the points found."""

    def __init__(self, cycles, weights, tol, max_newton, max_turn, points):
        self.cycles, self.weights = cycles, weights
        self.tol, self.max_newton, self.max_turn = tol, int(max_newton), float(max_turn)
        self.points = int(points)
        self.failure: dict | None = None

    def point(self, y, previous, s, iterations=0, residual=0.0):
        """The branch's record of the corrected `y`: tangent, multipliers (descending
        modulus), trivial index, counts, stability and orbit."""
        t, monodromy, velocity, orbit, _, _ = _linearise(
            self.cycles, y, previous, self.weights, self.points
        )
        if not bool(jnp.all(jnp.isfinite(t))):
            return None
        values, vectors = np.linalg.eig(np.asarray(monodromy, np.float64))
        order = np.argsort(-np.abs(values), kind="stable")
        values, vectors = values[order].astype(complex), vectors[:, order]
        velocity = np.asarray(velocity, np.float64)
        trivial = _trivial(values, vectors, velocity, np.asarray(monodromy, np.float64) @ velocity)
        counts = _classify(values, trivial)
        others = np.abs(np.delete(values, trivial) if trivial is not None else values)
        flat = np.asarray(orbit).reshape(self.points, -1)
        return dict(
            y=y,
            t=t,
            s=float(s),
            multipliers=values,
            trivial=trivial,
            counts=counts,
            unstable=int(np.sum(others > 1.0)),
            orbit=np.asarray(orbit),
            amplitude=float(np.max(np.ptp(flat, axis=0))),
            iterations=int(iterations),
            residual=float(residual),
        )

    def along(self, a, step):
        """The corrected point at arclength `step` past point `a` (its tangent as the
        border), or None where Newton fails, the corrected point lies farther than
        `MAX_MISS` times the step from its prediction, or the tangent turned past
        `max_turn`."""
        y_pred = a["y"] + step * a["t"]
        y, iterations, residual = _correct(
            self.cycles, y_pred, a["t"], self.weights, self.tol, self.max_newton
        )
        residual = float(residual)
        if not (residual <= float(self.tol)):
            cause = "newton" if math.isfinite(residual) else "nonfinite"
            self.failure = dict(p=float(y[-1]), residual_rms=residual, cause=cause, step=step)
            return None
        # a corrector that went far from its prediction may have reached another branch
        miss = float(jnp.sqrt(jnp.sum(self.weights * (y - y_pred) ** 2)))
        if miss > MAX_MISS * step:
            self.failure = dict(p=float(y[-1]), residual_rms=residual, cause="jump", step=step)
            return None
        point = self.point(y, a["t"], a["s"] + step, iterations, residual)
        if point is None:
            self.failure = dict(p=float(y[-1]), residual_rms=residual, cause="singular", step=step)
            return None
        turn = math.acos(min(1.0, abs(float(jnp.sum(self.weights * point["t"] * a["t"])))))
        if turn > self.max_turn:
            self.failure = dict(p=float(y[-1]), residual_rms=residual, cause="turn", step=step)
            return None
        return point


def _bisect(branch, a, b, side, locate_tol):
    """Bisect in arclength between points `a` and `b`, on which `side(point)` differs,
    until the bracket is below `locate_tol` (or a trial fails): the bracket's two ends
    `(lo, hi)`, `lo` on `a`'s side."""
    lo, hi = a, b
    target = side(a)
    while hi["s"] - lo["s"] > locate_tol:
        middle = branch.along(lo, 0.5 * (hi["s"] - lo["s"]))
        if middle is None:
            break
        if side(middle) == target:
            lo = middle
        else:
            hi = middle
    return lo, hi


def _crossing_multiplier(point, kind):
    """The multiplier that crosses the unit circle at a bifurcation of `kind`."""
    values = point["multipliers"]
    keep = np.ones(values.size, bool)
    if point["trivial"] is not None:
        keep[point["trivial"]] = False
    candidates = values[keep]
    target = {"fold": 1.0, "branch_point": 1.0, "period_doubling": -1.0}.get(kind)
    if target is None:  # a complex pair: the one with a positive imaginary part
        candidates = candidates[candidates.imag > 0] if np.any(candidates.imag > 0) else candidates
        return complex(candidates[np.argmin(np.abs(np.abs(candidates) - 1.0))])
    return complex(candidates[np.argmin(np.abs(candidates - target))])


def _record(kind, lo, hi, locate_tol, cycles):
    """A bifurcation located between `lo` and `hi`, recorded at `lo`."""
    bracket = hi["s"] - lo["s"]
    return dict(
        kind=kind,
        p=float(lo["y"][-1]),
        period=math.exp(float(lo["y"][-2])),
        x0=np.asarray(lo["y"][:-2]).reshape(cycles.shape),
        s=lo["s"],
        tangent=np.asarray(lo["t"]),
        phase_entry=int(cycles.phase_entry),
        multiplier=_crossing_multiplier(lo, kind),
        multipliers=lo["multipliers"],
        amplitude=lo["amplitude"],
        s_bracket=float(bracket),
        located=bool(bracket <= locate_tol),
    )


# The kinds located on a count of multipliers (`_classify`'s order).
COUNTED = ("period_doubling", "neimark_sacker", "branch_point")
# A branch point of cycles within this fraction of the step from a fold is the fold's own
# multiplier through +1 (it crosses at the turn, located to rounding apart from it).
FOLD_SIDE = 1e-3
# Stretches searched again for further crossings past a located one, at most.
MAX_SEARCHES = 8


def _counted(branch, a, b, locate_tol, searches=0):
    """The period doublings, Neimark-Sacker and branch points between points `a` and `b`:
    the first change of any count located by bisection (every kind whose count changed
    across its bracket recorded), then the stretch past it searched again, so that two
    crossings in one step are both found."""
    if a["counts"] == b["counts"]:
        return []
    lo, hi = _bisect(branch, a, b, lambda q: q["counts"], locate_tol)
    found = [
        _record(kind, lo, hi, locate_tol, branch.cycles)
        for index, kind in enumerate(COUNTED)
        if lo["counts"][index] != hi["counts"][index]
    ]
    if hi is not b and searches < MAX_SEARCHES:
        found += _counted(branch, hi, b, locate_tol, searches + 1)
    return found


def _detect(branch, a, b, locate_tol):
    """The bifurcations of cycles between consecutive points `a` and `b` (module
    docstring): a fold where the tangent's `p` component changes sign, located on it,
    the stretches on either side of its bracket searched for the counted kinds (across
    the bracket itself a multiplier passes through +1: the fold's own); else the counted
    kinds over the whole step."""
    if np.sign(float(a["t"][-1])) * np.sign(float(b["t"][-1])) >= 0:
        return _counted(branch, a, b, locate_tol)
    lo, hi = _bisect(branch, a, b, lambda q: np.sign(float(q["t"][-1])), locate_tol)
    fold = _record("fold", lo, hi, locate_tol, branch.cycles)
    fold["doubled"] = _closes_halfway(lo)
    before = _counted(branch, a, lo, locate_tol) if lo is not a else []
    after = _counted(branch, hi, b, locate_tol) if hi is not b else []
    # the fold's own multiplier through +1, located a rounding error off its turn
    near = FOLD_SIDE * (b["s"] - a["s"])
    own = {
        id(r)
        for r in before + after
        if r["kind"] == "branch_point" and abs(r["s"] - lo["s"]) <= near
    }
    return [r for r in before if id(r) not in own] + [fold] + [r for r in after if id(r) not in own]


def _closes_halfway(point) -> bool:
    """Whether the orbit of `point` comes back to its start after half its period: the
    orbit is a cycle of half the period travelled twice (where a branch of doubled
    cycles meets the cycle it doubled from)."""
    orbit = point["orbit"].reshape(len(point["orbit"]), -1)
    if len(orbit) % 2:
        return False
    return bool(np.max(np.abs(orbit[len(orbit) // 2] - orbit[0])) <= COLLAPSE * point["amplitude"])


def _switch(branch, record, ds, ds_min, direction):
    """The first point of the branch of cycles born at `record`, a period doubling or a
    branch point of `cycle_continuation`, and the step that reached it (the branch's
    next step).

    At a simple branch point the Jacobian `dH/dy` has a two-dimensional kernel; the
    branches through it leave along the two real roots `d` of the algebraic bifurcation
    equation `psi . d^2H[d, d] = 0` on that kernel (`psi` the left null vector; Kuznetsov,
    *Elements of Applied Bifurcation Theory*, section 10.2): the parent's (the root
    nearer the record's tangent) and the new one. A period doubling is a branch point of
    the shooting problem for twice the period, where the parent is the cycle travelled
    twice (its multiplier -1 squares to +1): the same equation there gives the doubled
    cycles' direction (`d` and `-d` give one orbit, shifted by the parent's period).
    `direction` orients `d`: towards larger `p` where the new branch crosses `p = const`
    at an angle, else by the sign of its largest state entry. The predictor `y + ds d`
    is corrected on `d . (y - y_pred) = 0`; a first point far from the prediction,
    nearer the parent's root than the new one, or whose tangent turned past `max_turn`
    from `d` halves `ds` (down to `ds_min`)."""
    cycles, weights = branch.cycles, np.asarray(branch.weights, np.float64)
    dtype = branch.weights.dtype
    doubling = record["kind"] == "period_doubling"
    where = f"the {record['kind']} at p = {float(record['p']):.6g}"
    y = np.concatenate([np.ravel(record["x0"]), [math.log(float(record["period"])), record["p"]]])
    jac, residual = _linearise(
        cycles,
        jnp.asarray(y, dtype),
        jnp.asarray(record["tangent"], dtype),
        branch.weights,
        branch.points,
    )[-2:]
    residual = float(jnp.sqrt(jnp.mean(residual**2)))
    if not residual <= RECORD_RESIDUAL * float(branch.tol):
        raise ValueError(
            f"cycle_continuation: {where} is not a cycle of this field (its shooting "
            f"residual's RMS is {residual:.3g}, tol {float(branch.tol):.3g}): pass a "
            "bifurcation record of cycle_continuation on this field, with its args."
        )
    if doubling:  # the doubled problem's branch point: the parent travelled twice
        y[-2] += math.log(2.0)
        jac = _linearise(
            cycles,
            jnp.asarray(y, dtype),
            jnp.asarray(record["tangent"], dtype),
            branch.weights,
            branch.points,
        )[-2]
    y = jnp.asarray(y, dtype)
    u, sigma, vt = np.linalg.svd(np.asarray(jac, np.float64))
    n = y.size - 2
    if sigma[n] > KERNEL_GAP * sigma[n - 1]:
        raise ValueError(
            f"cycle_continuation: at {where} the shooting Jacobian's kernel is not "
            f"two-dimensional (its smallest singular values {sigma[n - 1]:.3g}, "
            f"{sigma[n]:.3g}): not a simple {record['kind']}, or not located (locate it "
            "with a smaller locate_tol)."
        )
    parent, new = _branch_directions(cycles, y, vt[-2:].T, u[:, -1], record, weights, where)
    if abs(new[-1]) > ORIENT_BY_P:
        new = new * np.sign(new[-1])
    else:
        new = new * np.sign(new[np.argmax(np.abs(new[:n]))])
    d = jnp.asarray(direction * new, dtype)
    step = float(ds)
    while True:
        first, refusal = _switch_step(branch, y, d, jnp.asarray(parent, dtype), step)
        if first is not None:
            return first, step
        step *= 0.5
        if step < ds_min:
            raise ValueError(
                f"cycle_continuation: no step off {where} down to ds_min={ds_min:g} "
                f"reached the branch born there ({refusal})."
            )


# The record of a bifurcation is a cycle: its shooting residual's RMS is below `tol`
# (the corrector's), within this factor.
RECORD_RESIDUAL = 10.0
# The new branch's direction is oriented by its `p` component where that exceeds this
# (in the arclength's metric, of a unit tangent), else by its largest state entry.
ORIENT_BY_P = 1e-2


def _branch_directions(cycles, y, kernel, psi, record, weights, where):
    """The two branch directions through the branch point `y` (unit in the arclength's
    metric): the real roots of `psi . d^2H[d, d] = 0` for `d` in the span of `kernel`'s
    two columns; the one nearer the record's tangent first (the parent's)."""
    dtype = y.dtype
    k = [jnp.asarray(kernel[:, i], dtype) for i in range(2)]
    psi = jnp.asarray(psi, dtype)
    form = np.empty((2, 2))
    for i, j in ((0, 0), (0, 1), (1, 1)):
        form[i, j] = form[j, i] = float(psi @ _curvature(cycles, y, k[i], k[j]))
    values, vectors = np.linalg.eigh(form)
    scale = np.max(np.abs(values))
    if not (values[0] < -SIMPLE_CROSSING * scale and values[1] > SIMPLE_CROSSING * scale):
        raise ValueError(
            f"cycle_continuation: at {where} the branches do not cross transversally (the "
            f"bifurcation equation's form has eigenvalues {values[0]:.3g}, {values[1]:.3g}): "
            "no second branch to switch onto."
        )
    roots = [
        kernel @ (vectors @ np.array([math.sqrt(values[1]), sign * math.sqrt(-values[0])]))
        for sign in (1.0, -1.0)
    ]
    roots = [r / np.sqrt(np.sum(weights * r * r)) for r in roots]
    tangent = np.asarray(record["tangent"], np.float64)
    along = [abs(float(np.sum(weights * r * tangent))) for r in roots]
    return (roots[0], roots[1]) if along[0] >= along[1] else (roots[1], roots[0])


# The bifurcation equation's form has eigenvalues of both signs, each above this
# fraction of the larger in modulus: two branches crossing at an angle.
SIMPLE_CROSSING = 1e-6


def _switch_step(branch, y, d, parent, step):
    """One try at the switch's first point, `step` along `d` from the branch point `y`:
    `(point, None)`, or `(None, why)` where Newton failed, the point has no tangent, lies
    far from its prediction or nearer the parent's direction than `d`, or its tangent
    turned from `d` by more than `max_turn` (as the main loop refuses a step)."""
    weights = branch.weights
    y_pred = y + step * d
    y_new, iterations, residual = _correct(
        branch.cycles, y_pred, d, weights, branch.tol, branch.max_newton
    )
    if not float(residual) <= float(branch.tol):
        return None, f"Newton: RMS residual {float(residual):.3g}"
    miss = float(jnp.sqrt(jnp.sum(weights * (y_new - y_pred) ** 2)))
    if miss > MAX_MISS * step:
        return None, f"the corrected point lay {miss:.3g} from its prediction"
    offset = y_new - y
    cosines = [abs(float(jnp.sum(weights * offset * v))) for v in (d, parent)]
    if cosines[1] >= cosines[0]:
        return None, "the corrected point lay on the parent branch"
    first = branch.point(y_new, d, 0.0, iterations, residual)
    if first is None:
        return None, "no tangent at the corrected point"
    turn = math.acos(min(1.0, abs(float(jnp.sum(weights * first["t"] * d)))))
    if turn > branch.max_turn:
        return None, f"the branch's tangent there turned {turn:.3g} rad from the way out"
    return first, None


def _check_switch_record(record):
    """Refuse a period doubling or branch point record `_switch` cannot start from,
    naming what is wrong with it."""
    kind = record["kind"]
    missing = [key for key in SWITCH_KEYS if key not in record]
    if missing:
        raise ValueError(
            f"start is a {kind} record without {', '.join(missing)}: pass a record from "
            "the bifurcations of cycle_continuation itself."
        )
    if np.ndim(record["period"]) != 0 or np.ndim(record["p"]) != 0:
        raise ValueError(f"the {kind} record's period and p must be numbers.")
    tangent = np.asarray(record["tangent"])
    size = np.size(record["x0"]) + 2
    if tangent.shape != (size,) or not np.all(np.isfinite(tangent)) or not np.any(tangent):
        raise ValueError(
            f"the {kind} record's tangent must be a finite, non-zero vector of {size} "
            f"entries, (x0 flat, log T, p) (got shape {tangent.shape})."
        )
    multiplier = complex(record.get("multiplier", -1.0))
    if kind == "period_doubling" and multiplier.real > 0:
        raise ValueError(
            "start is the period doubling that ends a branch of doubled cycles (where it "
            f"meets its parent: multiplier {multiplier.real:.4g}, the square of the "
            "parent's -1): switch from the parent branch's record, whose multiplier is -1."
        )


def _start(field, start, args, direction, hopf_radius, options):
    """`(orbit, direction, switch)`: the first orbit, a `periodic_orbit` result (`start`
    itself, or from a Hopf record of `continuation`: its normal form's cycle of radius
    `hopf_radius`, polished by `periodic_orbit`) and the direction in `p` the branch
    starts in; or, where `start` is a period doubling or branch point of
    `cycle_continuation`, `(None, direction, start)`: `_switch` starts there."""
    if not isinstance(start, dict):
        raise TypeError(
            "start must be a periodic_orbit result or a Hopf record of continuation "
            f"(got {type(start).__name__})."
        )
    if start.get("kind") in SWITCHES:
        record = {key: _from_json(value) for key, value in start.items()}  # also from JSON
        _check_switch_record(record)
        return None, direction, record
    if start.get("kind") in KINDS:
        raise ValueError(
            f"start is a {start['kind']} record of cycle_continuation, where no other "
            "branch of cycles is born ("
            + (
                "at a fold the branch turns: continue through it"
                if start["kind"] == "fold"
                else "a torus branches off a Neimark-Sacker point, not a cycle"
            )
            + "): start from periodic_orbit instead."
        )
    if "bifurcations" in start and "stop_reason" in start:
        raise ValueError(
            "start is a whole branch: start from one orbit, periodic_orbit(field, "
            "branch['x0'][i], branch['period'][i], branch['p'][i]) for its point i."
        )
    if start.get("kind") == "hopf":
        if "normal_form" not in start or start.get("criticality") == "degenerate":
            raise ValueError(
                "this Hopf point has no usable normal form "
                f"({start.get('normal_form_error', 'criticality degenerate')}): start from "
                "a periodic_orbit found beside it instead."
            )
        form = {key: _from_json(value) for key, value in start["normal_form"].items()}
        c1, a = complex(form["c1"]), complex(form["a"])
        # hopf_cycle's radius is |z| with |z|^2 = -Re(a) dp / Re(c1)
        dp = -c1.real * hopf_radius**2 / a.real
        p = float(start["p"]) + dp
        cycle = hopf_cycle(start, p)
        try:
            orbit = periodic_orbit(field, cycle["x"][0], cycle["period"], p, args, **options)
        except ValueError as error:
            raise ValueError(
                f"cycle_continuation: the normal form's cycle of radius {hopf_radius:g} at "
                f"p = {p:.6g} did not lead to an orbit ({error}); a smaller hopf_radius "
                "starts nearer the Hopf point, where the normal form holds."
            ) from error
        return orbit, int(np.sign(dp)), None
    needed = ("x0", "period", "p", "multipliers", "x")
    if any(key not in start for key in needed) or np.ndim(start["period"]) != 0:
        raise ValueError(
            "start must be a periodic_orbit result (with x0, period, p, x) or a Hopf "
            f"record of continuation (kind 'hopf'); got keys {sorted(start)[:8]}."
        )
    return start, direction, None


def cycle_continuation(
    field: Field,
    start: dict,
    *,
    p_span: tuple[float, float],
    args: Any = None,
    direction: Literal[1, -1] = 1,
    ds: float = 0.01,
    ds_min: float = 1e-7,
    ds_max: float = 0.1,
    max_points: int = 200,
    tol: float | None = None,
    max_newton: int = 8,
    max_turn: float = 0.5,
    locate_tol: float | None = None,
    max_period: float | None = None,
    phase_entry: int | None = None,
    hopf_radius: float = 0.02,
    solver: Literal["tsit5", "dopri5", "dopri8"] = "dopri8",
    rtol: float | None = None,
    atol: float | None = None,
    max_steps: int = 100_000,
    points: int = 32,
    dtype: Any = None,
) -> dict[str, Any]:
    """Follow the branch of periodic orbits of `dx/dt = field(x, p, args)` through
    `start` in `p`, with the Floquet multipliers at every point and the bifurcations of
    cycles located (module docstring).

    **Arguments:**

    - `field`: `f(x, p, args) -> dx/dt`, `x` of any shape (as `continuation` takes it).
    - `start`: a `periodic_orbit` result, or a Hopf record of `continuation` (kind
      `"hopf"`, with its normal form; also read back from JSON): the branch then starts
      from the cycle of radius `hopf_radius` that the normal form predicts
      (`hopf_cycle`'s `radius`, `|z|` in state units: the orbit's distance from the
      steady state is about `sqrt(2)` times it), polished by `periodic_orbit`, and moves
      away from the Hopf point (`direction` is ignored). Or a `"period_doubling"` or
      `"branch_point"` record from the `bifurcations` of `cycle_continuation`: the
      branch born there, the cycles of twice the period or the other branch of cycles
      (`_switch`: its first point is `ds` off the bifurcation along the new branch's
      tangent, `direction` picking which way; a period doubling's two ways are one
      orbit); its `phase_entry` is the record's. Refused: a fold or Neimark-Sacker
      record (no branch of cycles is born there), a whole result of
      `cycle_continuation`, a start outside `p_span`.
    - `p_span`: `(low, high)`: the branch stops at its first point outside.
    - `direction`: `+1` starts towards larger `p`, `-1` smaller (from a `periodic_orbit`
      start).
    - `ds`, `ds_min`, `ds_max`: the first, smallest and largest step in arclength,
      `ds^2 = RMS(dx0)^2 + (d log T)^2 + dp^2`.
    - `max_points`; `tol` (RMS of the shooting residual at which Newton has converged;
      default as `periodic_orbit`'s); `max_newton`; `max_turn` (radians between
      consecutive tangents before a step is refused); `locate_tol` (arclength bracket of
      a located bifurcation: default 1e-7 in float64, 1e-5 in float32, where a
      narrower bracket is below the state's rounding); `max_period` (stop where the
      period exceeds it: default 20 times the first).
    - `phase_entry`: the flat index `j` of the state's entry whose extremum fixes the
      orbit's start (`f_j(x0) = 0`); default the entry that varies most over the first
      orbit.
    - `solver`, `rtol`, `atol`, `max_steps`: the solve of one period (as
      `periodic_orbit`'s). `points`: orbit samples kept per point. `dtype`: the
      arithmetic (default the start's).

    **Returns:** a dict: `p [m]`, `period [m]`, `x0 [m, *shape]`, `orbits [m, points,
    *shape]`, `amplitude [m]` (largest peak-to-peak range of an entry over each orbit's
    `points` samples: a little below the true range),
    `multipliers [m, n]` (complex, descending modulus), `trivial_index [m]` (-1 where not
    identified), `unstable [m]` (multipliers outside the unit circle, the trivial one
    aside), `stable [m]`, `s [m]`, `tangent_p [m]`, `newton_iterations [m]`,
    `residual_rms [m]`; `bifurcations` (dicts with `kind` in `KINDS`, `p`, `period`,
    `x0`, `s`, `multiplier` (the one crossing: near +1 at a fold or branch point, -1 at a
    period doubling, on the unit circle at a Neimark-Sacker point), `multipliers`,
    `s_bracket`, `located`); `stop_reason` (one of `STOP_REASONS`: module docstring),
    `stall` (with `ds_min`: where the last refused step ended and why: `"newton"`,
    `"nonfinite"`, `"singular"`, `"turn"`, `"jump"` (the corrected point far from its
    prediction: another branch near); else None), `phase_entry`, `switched_from` (the
    `kind`, `p` and `period` of the bifurcation the branch was started from; None from
    an orbit or a Hopf point), `metadata`. A bifurcation record also holds `tangent` (the branch's
    unit tangent there, `[n + 2]` in `(x0 flat, log T, p)`) and `phase_entry`: what a
    switch onto the branch born there needs.
    """
    if callable(getattr(field, "vector_field", None)):
        raise ValueError(
            "cycle_continuation takes a field f(x, p, args) -> dx/dt, not an energy "
            "model: an energy model's flow descends its energy, so it has no cycles."
        )
    lo, hi = (float(v) for v in p_span)
    if not lo < hi:
        raise ValueError(f"p_span must be (low, high) with low < high (got {p_span!r}).")
    if direction not in (1, -1):
        raise ValueError(f"direction must be +1 or -1 (got {direction!r}).")
    if not 0 < ds_min <= ds <= ds_max:
        raise ValueError(
            f"the steps must satisfy 0 < ds_min <= ds <= ds_max (got {ds_min}, {ds}, {ds_max})."
        )
    if not hopf_radius > 0:
        raise ValueError(f"hopf_radius must be positive (got {hopf_radius}).")
    options = dict(solver=solver, rtol=rtol, atol=atol, max_steps=max_steps, dtype=dtype)
    orbit, direction, switch = _start(field, start, args, direction, hopf_radius, options)
    origin = orbit if switch is None else switch
    if not lo <= float(origin["p"]) <= hi:
        raise ValueError(
            f"the start's p = {float(origin['p']):.6g} lies outside p_span {p_span!r}."
        )
    x0 = np.asarray(origin["x0"])
    dtype = dtype_of(x0, dtype)
    name = jnp.dtype(dtype).name
    defaults = DEFAULTS.get(name, DEFAULTS["float32"])
    tol = defaults["tol"] if tol is None else float(tol)
    rtol = defaults["rtol"] if rtol is None else float(rtol)
    atol = defaults["atol"] if atol is None else float(atol)
    locate_tol = LOCATE_TOL.get(name, LOCATE_TOL["float32"]) if locate_tol is None else locate_tol
    n = x0.size
    if n + 2 > DENSE_MAX:
        raise ValueError(
            f"cycle_continuation forms the {n + 1} x {n + 2} shooting Jacobian at every "
            f"point, up to {DENSE_MAX - 2} state entries (got {n}); periodic_orbit finds "
            "single orbits of larger states matrix-free."
        )
    check_field_shape(field, jnp.asarray(x0, dtype), float(origin["p"]), args)
    args = jax.tree.map(lambda v: jnp.asarray(v, dtype) if is_float(v) else v, args)
    if switch is not None:  # the record's x0 satisfies its branch's phase condition
        if phase_entry is not None and phase_entry != switch["phase_entry"]:
            raise ValueError(
                f"phase_entry={phase_entry!r}: a switch keeps the record's phase condition "
                f"(entry {switch['phase_entry']}); leave phase_entry out."
            )
        phase_entry = switch["phase_entry"]
    else:
        samples = np.asarray(orbit["x"]).reshape(len(orbit["x"]), -1)
    if phase_entry is None:
        phase_entry = int(np.argmax(np.ptp(samples, axis=0)))
    elif isinstance(phase_entry, bool) or not (
        isinstance(phase_entry, (int, np.integer)) and 0 <= phase_entry < n
    ):
        raise ValueError(f"phase_entry must be a flat index below {n} (got {phase_entry!r}).")
    cycles = _Cycles(
        field=field,
        solver=SOLVERS[solver](),
        shape=x0.shape,
        phase_entry=jnp.asarray(phase_entry, jnp.int32),
        args=args,
        rtol=jnp.asarray(rtol, dtype),
        atol=jnp.asarray(atol, dtype),
        max_steps=int(max_steps),
    )
    period0 = float(origin["period"]) * (2.0 if _doubles(switch) else 1.0)
    weights = jnp.asarray(np.concatenate([np.full(n, 1.0 / n), [1.0, 1.0]]), dtype)
    max_period = 20.0 * period0 if max_period is None else float(max_period)
    branch = _Branch(cycles, weights, jnp.asarray(tol, dtype), max_newton, max_turn, points)

    if switch is not None:
        _check_located(switch)
        first, step = _switch(branch, switch, float(ds), float(ds_min), direction)
    else:
        first = _first_point(branch, samples, period0, float(orbit["p"]), direction)
        step = float(ds)
    points_found, bifurcations = [first], []
    stop_reason = "max_points"
    while len(points_found) < max_points:
        a = points_found[-1]
        b = branch.along(a, step)
        if b is None:
            step *= 0.5
            if step < ds_min:
                stop_reason = "ds_min"
                break
            continue
        largest = max(q["amplitude"] for q in points_found)
        found = _detect(branch, a, b, locate_tol)
        # a turn where the orbit has shrunk to a point is the Hopf point the cycles
        # end at (past it the shooting problem follows the steady state), not a fold
        if b["amplitude"] < COLLAPSE * largest or any(
            r["amplitude"] < COLLAPSE * largest for r in found
        ):
            stop_reason = "hopf"
            break
        # a turn where the orbit is a cycle of half the period travelled twice is the
        # period doubling a branch of doubled cycles was born at: past it the branch
        # comes back along itself, shifted by half a period
        ends = [i for i, r in enumerate(found) if r.pop("doubled", False)]
        if ends:
            found[ends[0]]["kind"] = "period_doubling"
            bifurcations += found[: ends[0] + 1]
            stop_reason = "period_doubling"
            break
        bifurcations += found
        points_found.append(b)
        p_b = float(b["y"][-1])
        if not lo <= p_b <= hi:
            stop_reason = "p_span"
            break
        if math.exp(float(b["y"][-2])) > max_period:
            stop_reason = "max_period"
            break
        if b["iterations"] <= FAST_NEWTON:
            step = min(step * STEP_GROWTH, ds_max)
    if stop_reason == "ds_min":
        failure = branch.failure or {}
        last = points_found[-1]
        shrinking = last["amplitude"] < 0.1 * max(q["amplitude"] for q in points_found)
        hint = {
            "newton": "Newton did not converge on the shortest step (loosen tol, or tighten "
            "rtol/atol where tol is at the solve's error)",
            "nonfinite": "the flow failed where Newton went",
            "singular": "the branch has no tangent there (a bifurcation of cycles that is "
            "not simple)",
            "turn": f"the tangent turned past max_turn={max_turn:g} on the shortest step",
            "jump": "the corrected point lay far from its prediction on the shortest step "
            "(another branch near)",
        }.get(str(failure.get("cause")), "")
        if shrinking:
            hint += "; the cycles are shrinking: near a Hopf point the shooting problem is singular"
        warnings.warn(
            f"cycle_continuation stopped at p = {float(last['y'][-1]):.6g}: the step fell "
            f"below ds_min={ds_min:g} ({hint}; the last refused step: {failure}).",
            RuntimeWarning,
            stacklevel=2,
        )
    settings = dict(
        solver=solver, rtol=rtol, atol=atol, tol=tol, locate_tol=locate_tol, ds=ds, ds_max=ds_max
    )
    switched_from = None
    if switch is not None:
        switched_from = dict(
            kind=switch["kind"], p=float(switch["p"]), period=float(switch["period"])
        )
    result = _result(points_found, bifurcations, stop_reason, branch, cycles, dtype, settings)
    return result | dict(switched_from=switched_from)


def _doubles(switch) -> bool:
    return switch is not None and switch["kind"] == "period_doubling"


def _check_located(record):
    if not record.get("located", True):
        warnings.warn(
            f"cycle_continuation: this {record['kind']} (p = {float(record['p']):.6g}) was "
            f"not located (its bracket in s is {record.get('s_bracket', float('nan')):.3g}): "
            "the switch may fail or follow the parent branch; continue with a smaller "
            "locate_tol to locate it first.",
            RuntimeWarning,
            stacklevel=3,
        )


def _first_point(branch, samples, period, p, direction):
    """The start's orbit (`samples`, `[points, n]`, of period `period` at `p`) moved onto
    the phase condition from its sample where entry `j` peaks, corrected at fixed `p`:
    the branch's first point, its tangent oriented towards `direction` in `p`."""
    cycles, weights = branch.cycles, branch.weights
    dtype, n = weights.dtype, samples.shape[1]
    top = int(np.argmax(samples[:, int(cycles.phase_entry)]))
    y_guess = jnp.asarray(np.concatenate([samples[top], [math.log(period), p]]), dtype)
    pin_p = jnp.zeros(n + 2, dtype).at[-1].set(1.0)
    y, iterations, residual = _correct(
        cycles, y_guess, pin_p / weights, weights, branch.tol, branch.max_newton
    )
    if not float(residual) <= float(branch.tol):
        raise ValueError(
            f"cycle_continuation: the start could not be put on the phase condition (entry "
            f"{int(cycles.phase_entry)} at its extremum): RMS residual {float(residual):.3g} after "
            f"{int(iterations)} Newton iterations; pass another phase_entry."
        )
    previous = jnp.zeros(n + 2, dtype).at[-1].set(float(direction)) / weights[-1]
    first = branch.point(y, previous, 0.0, iterations, residual)
    if first is None:
        raise ValueError(
            "cycle_continuation: the branch has no tangent at the start (a bifurcation of "
            "cycles there): start beside it."
        )
    return first


def _result(points_found, bifurcations, stop_reason, branch, cycles, dtype, settings):
    stack = lambda key: np.asarray([q[key] for q in points_found])  # noqa: E731
    ys = np.asarray([np.asarray(q["y"]) for q in points_found])
    unstable = stack("unstable")
    return dict(
        p=ys[:, -1],
        period=np.exp(ys[:, -2]),
        x0=ys[:, :-2].reshape((len(ys), *cycles.shape)),
        orbits=np.asarray([q["orbit"] for q in points_found]),
        amplitude=stack("amplitude"),
        multipliers=np.asarray([q["multipliers"] for q in points_found]),
        trivial_index=np.asarray(
            [-1 if q["trivial"] is None else q["trivial"] for q in points_found]
        ),
        unstable=unstable,
        stable=unstable == 0,
        s=stack("s"),
        tangent_p=np.asarray([float(q["t"][-1]) for q in points_found]),
        newton_iterations=stack("iterations"),
        residual_rms=stack("residual"),
        bifurcations=bifurcations,
        stop_reason=stop_reason,
        stall=branch.failure if stop_reason == "ds_min" else None,
        phase_entry=int(cycles.phase_entry),
        metadata=metadata(
            study="cycle_continuation",
            dtype=dtype,
            solver=settings["solver"],
            rtol=settings["rtol"],
            atol=settings["atol"],
            tol=settings["tol"],
            locate_tol=settings["locate_tol"],
            ds=settings["ds"],
            ds_max=settings["ds_max"],
        ),
    )
