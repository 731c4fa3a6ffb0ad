"""Periodic orbits of a field, found by single shooting, with their Floquet multipliers.

A periodic orbit of `dx/dt = f(x, p)` with period `T` through a point `x0` is a zero of
the shooting residual in the `n + 1` unknowns `(x0, T)`:

    r(x0, T) = ( phi(x0, T) - x0 ,  nu . (x0 - x_ref) )

`phi(x0, T)` is the flow for time `T`, integrated in rescaled time `s` in `[0, 1]`
(`dx/ds = T f(x, p)`), so that `T` is a parameter of one solve of fixed length; the
second equation, the phase condition, fixes where on the orbit `x0` sits: on the
hyperplane through the guess `x_ref` normal to the flow there, `nu = f(x_ref) /
|f(x_ref)|` (a Poincare section; without it every point of the orbit would be a
solution). Newton (optimistix) solves it, each Jacobian-vector product a tangent solve
through the flow (diffrax's `ForwardMode`): the linear solves are LU of the formed
`(n + 1)`-square Jacobian up to `DENSE_MAX` unknowns, GMRES above.

The Floquet multipliers are the eigenvalues of the monodromy matrix `M = dphi/dx0` at
the orbit: dense, numpy's `eig` of the formed `M`; matrix-free, the `k` largest in
modulus by Krylov-Schur on its products (one tangent solve each). One of them is 1
exactly, `M f(x0) = f(x0)` (a shift along the orbit comes back as itself): it is
identified by its eigenvector, parallel to `f(x0)`, and its distance from 1 measures
the solve's error. The orbit is (orbitally, asymptotically) stable where all the others
lie inside the unit circle. A Hopf point's record gives a start close to the orbit born
there (`analysis.hopf_cycle`), as does a long simulation's near return.
"""

import functools
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
from jax.typing import DTypeLike
from jaxtyping import ArrayLike, Real

from et_ode import solvers

from . import _krylov_schur as krylov_schur
from ._branch_kernels import DENSE_MAX
from ._common import is_count
from ._continuation import Field, check_field_shape, dtype_of, is_float
from ._records import metadata

SOLVERS = {"tsit5": diffrax.Tsit5, "dopri5": diffrax.Dopri5, "dopri8": diffrax.Dopri8}
# Defaults by dtype: the solve's rtol and atol, and the RMS shooting residual at which
# Newton has converged (above the solve's own error, which is its floor).
DEFAULTS = {
    "float64": dict(rtol=1e-11, atol=1e-13, tol=1e-8),
    "float32": dict(rtol=1e-6, atol=1e-8, tol=1e-3),
}
# A multiplier is called inside or outside the unit circle only where it is farther
# from it than this many times the trivial multiplier's distance from 1 (the error of
# the multipliers), and than `MARGIN_FLOOR`; nearer, `stable` is None.
MARGIN_FACTOR = 10.0
MARGIN_FLOOR = {"float64": 1e-8, "float32": 1e-3}
# An orbit that returns to its start after `T / m` (within this many times `tol`) is
# travelled `m` times: its period is `T / m`.
RETURN_FACTOR = 100.0
# Krylov vectors of the matrix-free multipliers' Krylov-Schur iteration.
KRYLOV_VECTORS = 40
# The trivial multiplier's eigenvector is parallel to the flow to within this cosine;
# where no kept one is (matrix-free, more than `k` multipliers outside the unit
# circle), `trivial_index` is None.
TRIVIAL_COSINE = 0.99
# ... or where the monodromy matrix maps the flow to itself within this relative error.
TRIVIAL_RETURN = 1e-6
# Newton's GMRES (matrix-free): each linear solve's relative and absolute (as a fraction
# of `tol`) tolerance per entry (lineax's test: below both is converged), and its restart.
GMRES_RTOL = 1e-8
GMRES_ATOL = 1e-2
GMRES_RESTART = 100


# The `m` for which the orbit found is checked for an earlier return to its start after
# `1/m` of its period (a guess near `m` times the period); checked again after a
# reduction, so that larger multiples with a divisor among them are found too.
FRACTIONS = tuple(range(2, 13))
# Where a solve stops short, the field is also tried this fraction of the period ahead
# of the state reached (a field undefined just beyond it has every step rejected).
AHEAD = 1e-6


def rescaled_flow(field, solver, x, period, p, args, tolerances, saveat=None):
    """One solve of `dx/ds = period f(x, p, args)` from `s = 0` to 1, the flow over one
    period in rescaled time (`tolerances`: `(rtol, atol, max_steps)`; diffrax's
    `ForwardMode`, so that Jacobian-vector products through it are tangent solves;
    `throw=False`: the caller reads `result`)."""
    rtol, atol, max_steps = tolerances
    term = diffrax.ODETerm(lambda s, y, a: period * field(y, p, a))
    dtype = jnp.result_type(x)
    return diffrax.diffeqsolve(
        term,
        solver,
        jnp.zeros((), dtype),  # times of the state's dtype: float32 stays float32
        jnp.ones((), dtype),
        None,
        x,
        args,
        saveat=saveat or diffrax.SaveAt(t1=True),
        stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
        adjoint=diffrax.ForwardMode(),
        max_steps=max_steps,
        throw=False,
    )


class _Setting(eqx.Module):
    """The field, its parameter and conditions, and the solve's settings: what every
    compiled kernel below takes (one compilation per field, solver and shapes)."""

    field: Any = eqx.field(static=True)
    solver: Any = eqx.field(static=True)
    p: Any
    args: Any
    rtol: Any
    atol: Any
    max_steps: int = eqx.field(static=True)

    def flow(self, x, period, saveat=None):
        """One solve over the period from `x` (`rescaled_flow`)."""
        return rescaled_flow(
            self.field,
            self.solver,
            x,
            period,
            self.p,
            self.args,
            (self.rtol, self.atol, self.max_steps),
            saveat,
        )

    def end(self, x_flat, period, shape):
        """`phi(x, period)`, flat."""
        return self.flow(x_flat.reshape(shape), period).ys[-1].ravel()

    def residual(self, z, x_ref, normal, shape):
        """The shooting residual `[n + 1]` of `z = (x0 flat, T)`; NaN where the solve
        failed."""
        sol = self.flow(z[:-1].reshape(shape), z[-1])
        r = jnp.concatenate([sol.ys[-1].ravel() - z[:-1], jnp.sum(normal * (z[:-1] - x_ref))[None]])
        return jnp.where(sol.result == diffrax.RESULTS.successful, r, jnp.nan)


@eqx.filter_jit
def _orbit(setting, z0, x_ref, tol, max_newton: int, dense: bool, points: int):
    """Newton on the shooting residual from `z0 = (x flat, T)`, its section through
    `x_ref` (state-shaped) normal to the flow there; then, from where it ended, one solve
    over the period saving the orbit at `points` equal times (the end excluded) and at
    `1/m` of the period for `m` in `FRACTIONS`, and (`dense`) the monodromy matrix
    `dphi/dx0` (`[n, n]`, one tangent solve per column, batched). One program per field:
    compiling dominates a small orbit's cost. Returns `(z, iterations, optimistix result,
    RMS of phi(x, T) - x (NaN where that solve failed), orbit [points, *shape], returns
    [len(FRACTIONS), n], monodromy or None)`."""
    velocity = setting.field(x_ref, setting.p, setting.args).ravel()
    normal = velocity / jnp.linalg.norm(velocity)
    linear: lx.AbstractLinearSolver = (
        lx.LU()
        if dense
        else lx.GMRES(
            rtol=GMRES_RTOL,
            atol=GMRES_ATOL * tol,
            restart=min(GMRES_RESTART, z0.size - 1),
            stagnation_iters=GMRES_RESTART,
            max_steps=10 * z0.size,
        )
    )
    newton: optx.Newton = optx.Newton(rtol=tol, atol=tol, norm=optx.rms_norm, linear_solver=linear)
    solution: optx.Solution = optx.root_find(
        lambda z, _: setting.residual(z, x_ref.ravel(), normal, x_ref.shape),
        newton,
        z0,
        max_steps=max_newton,
        throw=False,
    )
    z = solution.value
    x, period = z[:-1].reshape(x_ref.shape), z[-1]
    grid = jnp.arange(points, dtype=z.dtype) / points
    # 1/m increasing (diffrax saves at increasing times), then back to FRACTIONS' order
    fractions = jnp.asarray([1.0 / m for m in reversed(FRACTIONS)], z.dtype)
    saveat = diffrax.SaveAt(
        subs=[
            diffrax.SubSaveAt(t1=True),
            diffrax.SubSaveAt(ts=grid),
            diffrax.SubSaveAt(ts=fractions),
        ]
    )
    sol = setting.flow(x, period, saveat)
    ok = sol.result == diffrax.RESULTS.successful
    residual = jnp.where(ok, jnp.sqrt(jnp.mean((sol.ys[0][-1] - x) ** 2)), jnp.nan)
    returns = sol.ys[2][::-1].reshape(len(FRACTIONS), -1)
    monodromy = jax.jacfwd(lambda v: setting.end(v, period, x.shape))(x.ravel()) if dense else None
    return z, solution.stats["num_steps"], solution.result, residual, sol.ys[1], returns, monodromy


@eqx.filter_jit
def _diagnose(setting, x, period):
    """Where the flow from `x` over `period` fails: whether it succeeded, its steps, the
    fraction of the period it reached, whether the state and the field are finite where
    it stopped and a little ahead of it (`AHEAD` of the period along the field), and the
    RMS of the state and of the field at `x` and where it stopped."""
    sol = setting.flow(x, period, diffrax.SaveAt(t1=True))
    end = sol.ys[-1]
    velocity = setting.field(end, setting.p, setting.args)
    finite = jnp.all(jnp.isfinite(end)) & jnp.all(jnp.isfinite(velocity))
    ahead = setting.field(end + AHEAD * period * velocity, setting.p, setting.args)
    ok = sol.result == diffrax.RESULTS.successful
    start_speed = solvers.rms(setting.field(x, setting.p, setting.args))
    sizes = (solvers.rms(x), solvers.rms(end), start_speed, solvers.rms(velocity))
    reached = sol.ts[-1]
    return ok, sol.stats["num_steps"], reached, finite, jnp.all(jnp.isfinite(ahead)), sizes


@eqx.filter_jit
def _monodromy_steps(setting, x, period, basis, projected, first):
    """Arnoldi steps (`_krylov_schur.arnoldi_steps`) on the monodromy matrix's
    products, one tangent solve each."""

    def product(v):
        return jax.jvp(lambda u: setting.end(u, period, x.shape), (x.ravel(),), (v,))[1]

    return krylov_schur.arnoldi_steps(product, basis, projected, first)


def _multipliers(setting, x, period, monodromy, k: int):
    """The Floquet multipliers (descending modulus) and their unit eigenvectors
    (`[n, j]`): all `n` of the formed `monodromy` matrix, or where it is None the `k`
    largest in modulus (Krylov-Schur)."""
    if monodromy is not None:
        values, vectors = np.linalg.eig(np.asarray(monodromy, np.float64))
    else:
        steps = functools.partial(_monodromy_steps, setting, x, period)
        start = jnp.asarray(1.0 + np.random.default_rng(0).random(x.size), x.dtype)
        tol = 1e-10 if x.dtype == jnp.float64 else 1e-5
        values, vectors, _ = krylov_schur.leading_eigenpairs(
            steps, start, k, krylov=KRYLOV_VECTORS, which="magnitude", tol=tol
        )
        values, vectors = np.asarray(values), np.asarray(vectors)
    order = np.argsort(-np.abs(values), kind="stable")
    return values[order].astype(complex), vectors[:, order].astype(complex)


def _trivial(values, vectors, velocity, returned) -> int | None:
    """The index of the trivial multiplier: the one whose eigenvector is most nearly
    parallel to the flow `velocity` (flat) at the orbit's start, within
    `TRIVIAL_COSINE`; else, where `returned` (`M velocity`, flat) is `velocity` to within
    `TRIVIAL_RETURN` (the flow is an eigenvector for 1, whatever the eigen-solver's
    vectors, which are ill-conditioned where `M` is far from normal), the multiplier
    nearest 1; else None."""
    direction = velocity / np.linalg.norm(velocity)
    cosines = np.abs(vectors.conj().T @ direction) / np.linalg.norm(vectors, axis=0)
    best = int(np.argmax(cosines))
    if cosines[best] >= TRIVIAL_COSINE:
        return best
    if returned is not None:
        error = np.linalg.norm(returned - velocity) / np.linalg.norm(velocity)
        if error <= TRIVIAL_RETURN:
            return int(np.argmin(np.abs(values - 1.0)))
    return None


def _solve_note(setting, x, period) -> str:
    """Why the flow from `x` over `period` fails, or "" where it does not."""
    ok, steps, reached, finite, finite_ahead, sizes = _diagnose(setting, x, period)
    if bool(ok):
        return ""
    when = float(reached) * float(period)
    where = f"at t = {when:.6g} of T = {float(period):.6g}, after {int(steps)} steps"
    if not bool(finite):
        return (
            f"the flow failed {where}: the state or the field there is NaN or inf (a field "
            "undefined there, or a flow that blows up)"
        )
    if not bool(finite_ahead):
        return (
            f"the flow stopped {where}: the field is NaN or inf just ahead of the state "
            "reached (a field undefined there: its steps were all rejected)"
        )
    rms_start, rms_end, speed_start, speed_end = (float(v) for v in sizes)
    note = solvers.growth_note(rms_start, rms_end, speed_start, speed_end, when, when)
    if note:
        return f"the flow failed {where}.{note.rstrip('.')}"
    return (
        f"the flow stopped {where} (max_steps={setting.max_steps}): raise max_steps or "
        "loosen rtol/atol"
    )


def _converge(
    setting, x_guess, period: float, tol: float, max_newton: int, dense: bool, points: int
):
    """Newton from the guess `(x_guess, period)` (`_orbit`): a dict with the orbit's
    start `x` (state-shaped), its `period`, `iterations`, `residual`, the `orbit`
    (`[points, *shape]`), its `returns` at `1/m` of the period and the formed
    `monodromy` (None matrix-free); a `ValueError` saying why where it fails."""
    dtype = x_guess.dtype
    velocity = setting.field(x_guess, setting.p, setting.args)
    speed = float(jnp.linalg.norm(velocity))
    if not (speed > 0 and math.isfinite(speed)):
        raise ValueError(
            f"periodic_orbit: the field at x0 is {'zero' if speed == 0 else 'not finite'}: "
            "x0 is a steady state (or outside the field's domain), with no flow to define "
            "a section across the cycle; start on or near the orbit (beside a Hopf point, "
            "analysis.hopf_cycle gives a start)."
        )
    z0 = jnp.concatenate([x_guess.ravel(), jnp.asarray([period], dtype)])
    z, iterations, result, residual, orbit, returns, monodromy = _orbit(
        setting, z0, x_guess, jnp.asarray(tol, dtype), int(max_newton), dense, int(points)
    )
    x, found = z[:-1].reshape(x_guess.shape), z[-1]
    residual = float(residual)
    if residual <= tol and float(found) > 0:
        return dict(
            x=x,
            period=found,
            iterations=int(iterations),
            residual=residual,
            orbit=orbit,
            returns=np.asarray(returns),
            monodromy=monodromy,
        )
    where = f"after {int(iterations)} Newton iterations from the guess T = {period:.6g}"
    if not math.isfinite(residual) or not bool(jnp.all(jnp.isfinite(z))):
        note = _solve_note(setting, x_guess, jnp.asarray(period, dtype))
        if note:
            raise ValueError(f"periodic_orbit did not converge {where}: at the guess, {note}.")
        if bool(jnp.all(jnp.isfinite(z))):
            note = _solve_note(setting, x, found)
            raise ValueError(
                f"periodic_orbit did not converge {where}: at its last iterate "
                f"(T = {float(found):.6g}), {note or 'the flow failed'}; start nearer the orbit."
            )
        raise ValueError(
            f"periodic_orbit did not converge {where}: Newton diverged (an iterate became "
            "NaN or inf): the guess is too far from a cycle, there is none at p = "
            f"{float(setting.p):g}, or the shooting Jacobian is singular (no isolated "
            "cycle: a centre's family of orbits); beside a Hopf point, analysis.hopf_cycle "
            "gives a start."
        )
    if float(found) <= 0:
        raise ValueError(
            f"periodic_orbit did not converge {where}: Newton went to a period of "
            f"{float(found):.3g}: start nearer the orbit."
        )
    if bool(result == optx.RESULTS.singular):
        cause = (
            "the shooting Jacobian is singular (no isolated cycle there: a family of "
            "orbits, as around a centre or in a conservative system)"
        )
    elif not bool(
        (result == optx.RESULTS.successful) | (result == optx.RESULTS.nonlinear_max_steps_reached)
    ):
        # an optimistix result prints as "...RESULTS<its message>"
        message = str(result).partition("<")[2].rstrip(">")
        cause = (
            f"a linear solve of Newton's failed ({message}); matrix_free=False solves it "
            "directly up to a few thousand unknowns"
        )
    elif residual <= RETURN_FACTOR * tol:
        cause = (
            "the residual stalled near tol, at the solve's own error: loosen tol or tighten "
            "rtol/atol"
        )
    else:
        cause = (
            f"start nearer the orbit (if there is one at p = {float(setting.p):g}) or raise "
            "max_newton"
        )
    raise ValueError(
        f"periodic_orbit did not converge {where}: the RMS shooting residual is "
        f"{residual:.3g} (tol {tol:g}) at T = {float(found):.6g}; {cause}."
    )


def _is_number(value) -> bool:
    """A real scalar: a Python or NumPy number, or a 0-d real array (JAX's too)."""
    if isinstance(value, bool):
        return False
    shape = getattr(value, "shape", ())
    kind = np.asarray(value).dtype.kind if shape == () else ""
    return shape == () and kind in "iuf"


def _check(field, x0, period, p, args, k, points, max_newton, max_steps, solver) -> None:
    """Refuse what cannot be a periodic orbit's problem, naming it, before any solve."""
    if callable(getattr(field, "vector_field", None)):
        raise ValueError(
            "periodic_orbit takes a field f(x, p, args) -> dx/dt, not an energy model: an "
            "energy model's flow descends its energy, so it has no periodic orbits."
        )
    if not callable(field):
        raise TypeError(f"field must be a callable f(x, p, args) (got {type(field).__name__}).")
    if not (_is_number(period) and 0 < float(period) < math.inf):
        raise ValueError(f"period must be a positive, finite number (got {period!r}).")
    if not (_is_number(p) and math.isfinite(float(p))):
        raise ValueError(f"p must be a finite number (got {p!r}).")
    if np.asarray(x0).size < 2 or not bool(np.all(np.isfinite(np.asarray(x0)))):
        raise ValueError(
            "x0 must be a finite state of at least two entries (a periodic orbit needs "
            f"two dimensions; got shape {np.shape(x0)})."
        )
    for name, value, least in (
        ("k", k, 1),
        ("points", points, 2),
        ("max_newton", max_newton, 1),
        ("max_steps", max_steps, 1),
    ):
        if not is_count(value, least):
            raise ValueError(f"{name} must be an integer of at least {least} (got {value!r}).")
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {sorted(SOLVERS)} (got {solver!r}).")
    check_field_shape(field, jnp.asarray(x0), p, args)


def periodic_orbit(
    field: Field,
    x0: Real[ArrayLike, "..."],
    period: Real[ArrayLike, ""],
    p: Real[ArrayLike, ""],
    args: Any = None,
    *,
    tol: float | None = None,
    max_newton: int = 20,
    solver: Literal["tsit5", "dopri5", "dopri8"] = "dopri8",
    rtol: float | None = None,
    atol: float | None = None,
    max_steps: int = 100_000,
    matrix_free: bool | None = None,
    k: int = 6,
    points: int = 64,
    dtype: DTypeLike | None = None,
) -> dict[str, Any]:
    """The periodic orbit of `dx/dt = field(x, p, args)` near the guess `(x0, period)`,
    by single shooting, with its Floquet multipliers (module docstring).

    **Arguments:**

    - `field`: `f(x, p, args) -> dx/dt`, `x` of any shape (as `continuation` takes it;
      `p` is held fixed).
    - `x0`: a state on or near the orbit; `period`: its guessed period (time units of
      the field). `analysis.hopf_cycle(record, p)` gives both beside a Hopf point
      (`cycle["x"][0]`, `cycle["period"]`).
    - `p`, `args`: the field's parameter and conditions.
    - `tol`: RMS of the shooting residual at which Newton has converged (state units;
      default 1e-8 in float64, 1e-3 in float32): above the solve's error (`rtol`,
      `atol`), which is its floor. `max_newton`: Newton iterations.
    - `solver`, `rtol`, `atol`, `max_steps`: the diffrax solve of one period (an
      explicit Runge-Kutta pair, `"dopri8"` by default; `rtol`, `atol` default 1e-11,
      1e-13 in float64 and 1e-6, 1e-8 in float32).
    - `matrix_free`: GMRES for Newton and Krylov-Schur for the multipliers (`True`), or
      the formed `(n + 1)`-square Jacobian and monodromy matrix (`False`); default:
      formed up to `DENSE_MAX` unknowns.
    - `k`: matrix-free, how many multipliers (the largest in modulus; with the trivial
      one among them where it is among the `k` largest).
    - `points`: how many states of the orbit are returned (`t` from 0 to `T`).
    - `dtype`: the arithmetic (default `x0`'s; float64 needs `jax_enable_x64`).

    **Returns:** a dict: `x0` (the orbit's start, on the section through the guess),
    `period`, `p`, `multipliers [j]` (complex, descending modulus: all `n` dense, `k`
    matrix-free), `trivial_index` (the one equal to 1 in theory, identified by its
    eigenvector along the flow, or where the formed monodromy matrix maps the flow to
    itself, as the multiplier nearest 1; None where neither) and `trivial_error` (`|mu -
    1|` there: the error of the solve and of the multipliers near 1; where the monodromy
    matrix is far from normal, the other multipliers can be less accurate, matrix-free
    most), `floquet_exponents [j]` (`log(mu) / T`, complex, 1/time), `unstable` (how
    many multipliers other than the trivial one lie outside the unit circle by more than
    the margin: `MARGIN_FACTOR` times `trivial_error`, at least `MARGIN_FLOOR`, 1e-8 in
    float64 and 1e-3 in float32), `stable` (False where one does; else None where one
    lies within the margin of the circle, undecided; else True), `t [points]` and `x
    [points, *shape]` (the orbit at equal times over one period from `x0`, the end
    excluded, as `hopf_cycle` samples it), `amplitude` (the largest peak-to-peak range
    of an entry over the orbit), `residual_rms` (of `phi(x0, T) - x0`),
    `newton_iterations`, `dense`, `metadata`. `plot_periodic_orbit` draws the orbit and
    its multipliers.

    **Raises** `ValueError` naming the cause where Newton does not converge (the
    solve's failure at the guess or at Newton's last iterate, with a blow-up or a field
    undefined just ahead named as such; Newton diverging; a linear solve failing; the
    residual reached), where the guess is a steady state, or where Newton converged onto
    a steady state rather than a cycle (as it may at a centre, whose orbits are not
    isolated). Where the orbit closes after a fraction `1/m` of the period Newton
    reached (`m` up to 12, checked again after each reduction: a guess near a multiple
    of the period), the orbit is returned with its minimal period and a
    `RuntimeWarning` says so.
    """
    _check(field, x0, period, p, args, k, points, max_newton, max_steps, solver)
    dtype = dtype_of(x0, dtype)
    name = jnp.dtype(dtype).name
    if name not in DEFAULTS:
        raise ValueError(f"dtype must be float32 or float64 (got {name}).")
    defaults = DEFAULTS[name]
    period, p = float(np.asarray(period)), float(np.asarray(p))
    tol = defaults["tol"] if tol is None else float(tol)
    rtol = defaults["rtol"] if rtol is None else float(rtol)
    atol = defaults["atol"] if atol is None else float(atol)
    x0 = jnp.asarray(x0, dtype)
    args = jax.tree.map(lambda v: jnp.asarray(v, dtype) if is_float(v) else v, args)
    n = x0.size
    dense = (n + 1 <= DENSE_MAX) if matrix_free is None else not matrix_free
    if not dense and not k < min(KRYLOV_VECTORS, n - 1):
        raise ValueError(
            f"matrix-free, k must be below {min(KRYLOV_VECTORS, n - 1)} for a state of {n} "
            f"entries (got {k}); matrix_free=False finds all {n} multipliers."
        )
    setting = _Setting(
        field=field,
        solver=SOLVERS[solver](),
        p=jnp.asarray(p, dtype),
        args=args,
        rtol=jnp.asarray(rtol, dtype),
        atol=jnp.asarray(atol, dtype),
        max_steps=int(max_steps),
    )
    found = _converge(setting, x0, float(period), tol, max_newton, dense, points)
    amplitude = float(jnp.max(jnp.ptp(found["orbit"].reshape(points, -1), axis=0)))
    if amplitude <= RETURN_FACTOR * tol:
        raise ValueError(
            f"Newton converged onto a steady state, not a cycle (the orbit's largest range "
            f"is {amplitude:.3g}, at tol={tol:g}): start nearer the cycle, or check that "
            f"one exists at p = {p:g}."
        )
    guessed = float(found["period"])
    while True:  # travelled m times: the orbit with its minimal period
        start = np.asarray(found["x"]).ravel()
        distance = np.sqrt(np.mean((found["returns"] - start) ** 2, axis=1))
        closes = [m for m, d in zip(FRACTIONS, distance) if d <= RETURN_FACTOR * tol]
        if not closes:
            break
        iterations = found["iterations"]
        minimal = float(found["period"]) / max(closes)
        found = _converge(setting, found["x"], minimal, tol, max_newton, dense, points)
        found["iterations"] += iterations
    if float(found["period"]) < guessed * (1 - 1e-6):
        warnings.warn(
            f"periodic_orbit: the orbit found first closes after 1/"
            f"{round(guessed / float(found['period']))} of the period {guessed:.6g} that "
            f"Newton reached from the guess {float(period):.6g}: it is returned with its "
            f"minimal period {float(found['period']):.6g}.",
            RuntimeWarning,
            stacklevel=2,
        )
    x, period_found = found["x"], found["period"]
    values, vectors = _multipliers(setting, x, period_found, found["monodromy"], k)
    velocity = np.asarray(field(x, setting.p, args), np.float64).ravel()
    monodromy = found["monodromy"]
    returned = None if monodromy is None else np.asarray(monodromy, np.float64) @ velocity
    trivial = _trivial(values, vectors, velocity, returned)
    trivial_error = None if trivial is None else float(abs(values[trivial] - 1.0))
    others = np.abs(values if trivial is None else np.delete(values, trivial))
    margin = max(
        MARGIN_FACTOR * (trivial_error or 0.0), MARGIN_FLOOR.get(name, MARGIN_FLOOR["float32"])
    )
    unstable = int(np.sum(others > 1.0 + margin))
    undecided = not unstable and bool(np.any(np.abs(others - 1.0) <= margin))
    period_found = float(period_found)
    with np.errstate(divide="ignore"):  # a multiplier of 0: exponent -inf
        exponents = np.log(values) / period_found
    return dict(
        x0=np.asarray(x),
        period=period_found,
        p=float(p),
        multipliers=values,
        trivial_index=trivial,
        trivial_error=trivial_error,
        floquet_exponents=exponents,
        unstable=unstable,
        stable=None if undecided else not unstable,
        t=period_found * np.arange(points) / points,
        x=np.asarray(found["orbit"]),
        amplitude=amplitude,
        residual_rms=found["residual"],
        newton_iterations=found["iterations"],
        dense=dense,
        metadata=metadata(
            study="periodic_orbit",
            dtype=dtype,
            solver=solver,
            rtol=rtol,
            atol=atol,
            tol=tol,
            max_steps=int(max_steps),
            max_newton=int(max_newton),
            k=None if dense else int(k),
        ),
    )
