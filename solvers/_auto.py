"""`AutoSwitch` (`solver="auto"`): Tsit5 while the flow is not stiff, a matrix-free
linearly implicit (Rosenbrock-W) method while it is, with stiffness detection and
hysteresis in both directions.

Explicit mode: one Tsit5 step (diffrax's tableau, first same as last: 6 evaluations per
step) and the stiffness estimate of Hairer and Wanner (Solving ODEs II, IV.2):
`h rho = ||f(Y7) - f(Y6)|| / ||Y7 - Y6|| * h` from the last two stages (both at `c = 1`;
`Y7 = y1`). Tsit5's stability interval on the negative real axis ends near 3.5: a step
with `h rho > STIFF_H_RHO` (3.0) counts as stiff, provided (when the tolerances are
known) the step moved the solution by less than `SLOW_STEP` (5) tolerances (RMS of
`(y1 - y0) / (atol + rtol |y|)`): in the fast transient Tsit5 also sits near its
stability limit, but there the order-2 implicit method needs even shorter steps (and the
Jacobian has positive eigenvalues that make `I - gamma h J` nearly singular); measured on
the shipped core, switching there failed (steps below float32's resolution of t).
After `STIFF_STEPS` (15) accepted steps counted stiff (reset by `CALM_RESET` (6) calm
ones in a row, as in DOPRI5) the solver switches to the implicit mode.

Implicit mode: ROS2 (Verwer, Spee, Blom, Hundsdorfer 1999), a 2-stage Rosenbrock-W
method, order 2 for any Jacobian approximation, L-stable, `gamma = 1 + 1/sqrt(2)`:

    (I - gamma h J) k1 = f(y0)
    (I - gamma h J) k2 = f(y0 + h k1) - 2 k1
    y1 = y0 + h (3/2 k1 + 1/2 k2),   error = h (k1 + k2) / 2   (against linearly
    implicit Euler, order 1)

`J` is applied by JVPs of the vector field (`jax.linearize` at `y0`), and each system is
solved by GMRES (Arnoldi, at most `krylov_dim` iterations, stopped at a relative
residual `krylov_rtol`; the right-hand side is normalised, so tiny float32 right-hand
sides near convergence are no problem): the `(N D)^2` Jacobian is never built. The
Arnoldi matrix gives the stiffness estimate for free: `rho = max_j ||(A - I) v_j|| /
(gamma h)` over the Krylov basis (a lower bound of `||J||`). After `CALM_STEPS` (5)
accepted implicit steps with `h rho < CALM_H_RHO` (1.0: an explicit step of that size
would be well inside Tsit5's stability region) it switches back.

The error estimate of the implicit mode is of order 2 but the controller is told order
5 (one static value for both modes): when the solver knows the tolerances (`rtol`,
`atol`, set by `solvers.solve` for the rtol/atol shortcut) it rescales the implicit
error so that the PID controller's step factor is the order-2 one and its accept/reject
decision unchanged (scaled error `r` returned as `r^(5/2)`).

Both branches run under a "maybe" loop (a `lax.while_loop` of at most one iteration)
rather than `lax.cond`, so that under `jax.vmap` (batched solves) a branch no sample
needs costs nothing. Consequently the solver is forward-only: reverse-mode gradients
through it are not supported (use `adjoint="implicit"` at a fixed point).

Dense output is linear between step ends (`diffrax.LocalLinearInterpolation`) in both
modes: `save` as an array of times interpolates linearly.

Counting. The solver state carries exact counts of vector-field evaluations and JVPs
(Jacobian-vector products; the linearisation at `y0` counts as one evaluation) of the
accepted steps, and the number of mode switches. diffrax discards the solver state of a
rejected step, so rejected attempts are not in these counts: `solvers.solve` adds them
at the explicit cost (6 each: exact before the first switch) and labels `nfe` an
estimate when a step was rejected and the solver switched (an implicit attempt costs 3
evaluations plus its JVPs, and is lost from the count).
"""

import math
from typing import ClassVar

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax

STIFF_H_RHO = 3.0
STIFF_STEPS = 15
CALM_RESET = 6
CALM_H_RHO = 1.0
CALM_STEPS = 5
SLOW_STEP = 5.0
EXPLICIT_EVALS = 6  # Tsit5 with first-same-as-last
GAMMA = 1.0 + 1.0 / math.sqrt(2.0)

_TSIT5 = diffrax.Tsit5.tableau
# The tableau as Python floats (weakly typed): NumPy float64 coefficients would promote a
# float32 state to float64 whenever x64 is enabled, and change its steps.
_A_LOWER = tuple(tuple(float(a) for a in row) for row in _TSIT5.a_lower)
_C = tuple(float(c) for c in _TSIT5.c)
_B_ERROR = tuple(float(b) for b in _TSIT5.b_error)


def _maybe(pred, fn, default):
    """`fn()` if `pred` else `default` (same structure): a while loop of at most one
    iteration, so that under vmap the work is skipped when no lane needs it."""

    def body(carry):
        _, _ = carry
        return jnp.asarray(False), fn()

    _, out = lax.while_loop(lambda c: c[0], body, (jnp.asarray(pred), default))
    return out


def _norm(x):
    return jnp.sqrt(jnp.sum(x * x))


def _gmres(apply, b, max_dim, rtol):
    """Solve `A x = b` by GMRES (Arnoldi with classical Gram-Schmidt twice, no restart),
    stopping at relative residual `rtol` or `max_dim` iterations. Returns
    `(x, iterations, rho)` with `rho = max_j ||A v_j - v_j||` over the basis."""
    shape, dtype = b.shape, b.dtype
    flat_b = b.reshape(-1)
    beta = _norm(flat_b)
    safe_beta = jnp.where(beta > 0, beta, 1.0)
    n = flat_b.size
    m = max_dim
    basis = jnp.zeros((m + 1, n), dtype).at[0].set(flat_b / safe_beta)
    hess = jnp.zeros((m + 1, m), dtype)
    e1 = jnp.zeros((m + 1,), dtype).at[0].set(1.0)

    def residual(hess):
        y = jnp.linalg.lstsq(hess, e1)[0]
        return _norm(e1 - hess @ y), y

    def cond(carry):
        j, _, _, res, _, _ = carry
        return (j < m) & (res > rtol)

    def body(carry):
        j, basis, hess, _, rho, _ = carry
        v = basis[j]
        w = apply(v.reshape(shape)).reshape(-1)
        mask = (jnp.arange(m + 1) <= j).astype(dtype)
        h1 = (basis @ w) * mask
        w = w - h1 @ basis
        h2 = (basis @ w) * mask
        w = w - h2 @ basis
        h = h1 + h2
        w_norm = _norm(w)
        h = h.at[j + 1].set(w_norm)
        hess = hess.at[:, j].set(h)
        basis = basis.at[j + 1].set(w / jnp.where(w_norm > 0, w_norm, 1.0))
        rho = jnp.maximum(rho, _norm(h - jnp.zeros_like(h).at[j].set(1.0)))
        res, _ = residual(hess)
        res = jnp.where(w_norm > 0, res, 0.0)  # happy breakdown: exact
        return j + 1, basis, hess, res, rho, w_norm

    init = (
        jnp.asarray(0),
        basis,
        hess,
        jnp.where(beta > 0, 1.0, 0.0).astype(dtype),
        jnp.zeros((), dtype),
        jnp.zeros((), dtype),
    )
    j, basis, hess, _, rho, _ = lax.while_loop(cond, body, init)
    _, y = residual(hess)
    x = (beta * (y @ basis[:m])).reshape(shape)
    return x, j, rho


class _State(eqx.Module):
    f0: jax.Array  # f(y0): first same as last in both modes
    implicit: jax.Array  # bool
    stiff_count: jax.Array
    calm_count: jax.Array
    h_rho: jax.Array  # last stiffness estimate |lambda h|
    f_evals: jax.Array
    jvp_evals: jax.Array
    num_switches: jax.Array
    implicit_steps: jax.Array


class AutoSwitch(diffrax.AbstractAdaptiveSolver):
    """Tsit5 with automatic switching to a matrix-free Rosenbrock-W (ROS2 + GMRES)
    method while the problem is stiff; see the module docstring. `rtol`, `atol`: the
    step-size controller's tolerances (set by `solvers.solve`; `None` leaves the
    implicit error unrescaled). `krylov_dim`: most GMRES iterations per linear solve;
    `krylov_rtol`: its relative residual tolerance."""

    rtol: jax.Array | float | None = None
    atol: jax.Array | float | None = None
    krylov_dim: int = eqx.field(static=True, default=15)
    krylov_rtol: float = 1e-2

    term_structure: ClassVar = diffrax.AbstractTerm
    interpolation_cls: ClassVar = diffrax.LocalLinearInterpolation

    def order(self, terms):
        return 5

    def error_order(self, terms):
        return 5

    def init(self, terms, t0, t1, y0, args):
        f0 = terms.vf(t0, y0, args)
        zero = jnp.zeros((), jnp.int32)
        return _State(
            f0=f0,
            implicit=jnp.asarray(False),
            stiff_count=zero,
            calm_count=zero,
            h_rho=jnp.zeros((), y0.dtype),
            f_evals=jnp.ones((), jnp.int32),
            jvp_evals=zero,
            num_switches=zero,
            implicit_steps=zero,
        )

    def func(self, terms, t0, y0, args):
        return terms.vf(t0, y0, args)

    def _explicit(self, terms, t0, t1, y0, args, f0):
        h = t1 - t0
        ks = [f0]
        stages = []
        for a_row, c in zip(_A_LOWER, _C):
            y_stage = y0 + h * sum(a * k for a, k in zip(a_row, ks))
            stages.append(y_stage)
            ks.append(terms.vf(t0 + c * h, y_stage, args))
        y1 = stages[-1]  # first same as last: the last stage is the solution
        y_error = h * sum(b * k for b, k in zip(_B_ERROR, ks))
        y6 = stages[-2]
        dy = _norm(y1 - y6)
        h_rho = jnp.where(dy > 0, h * _norm(ks[-1] - ks[-2]) / jnp.where(dy > 0, dy, 1.0), 0.0)
        h_rho = jnp.abs(h_rho)
        if self.rtol is not None and self.atol is not None:
            # A step counts as stiff only while the solution moves by less than the
            # tolerance per step (stability-limited, not accuracy-limited: an implicit
            # method of order 2 could take longer steps only then).
            scale = self.atol + self.rtol * jnp.maximum(jnp.abs(y0), jnp.abs(y1))
            moved = jnp.sqrt(jnp.mean(((y1 - y0) / scale) ** 2))
            h_rho = jnp.where(moved < SLOW_STEP, h_rho, jnp.minimum(h_rho, STIFF_H_RHO))
        return y1, y_error, ks[-1], h_rho.astype(y0.dtype), EXPLICIT_EVALS, 0

    def _implicit(self, terms, t0, t1, y0, args, f0):
        h = t1 - t0
        f_at = lambda y: terms.vf(t0, y, args)  # noqa: E731  autonomous in practice
        _, jvp = jax.linearize(f_at, y0)
        gh = GAMMA * h
        apply = lambda v: v - gh * jvp(v)  # noqa: E731
        k1, it1, rho1 = _gmres(apply, f0, self.krylov_dim, self.krylov_rtol)
        f1 = terms.vf(t0 + h, y0 + h * k1, args)
        k2, it2, rho2 = _gmres(apply, f1 - 2.0 * k1, self.krylov_dim, self.krylov_rtol)
        y1 = y0 + h * (1.5 * k1 + 0.5 * k2)
        y_error = 0.5 * h * (k1 + k2)
        if self.rtol is not None and self.atol is not None:
            scale = self.atol + self.rtol * jnp.maximum(jnp.abs(y0), jnp.abs(y1))
            r = jnp.sqrt(jnp.mean((y_error / scale) ** 2))
            y_error = y_error * jnp.where(r > 0, r, 1.0) ** 1.5
        f_new = terms.vf(t1, y1, args)
        h_rho = jnp.maximum(rho1, rho2) / GAMMA  # ||(A - I) v|| / (gamma h) * h
        return y1, y_error, f_new, h_rho.astype(y0.dtype), 3, it1 + it2

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        del made_jump  # the vector field is continuous in t here
        st = solver_state
        zeros = (
            jnp.zeros_like(y0),
            jnp.zeros_like(y0),
            jnp.zeros_like(y0),
            jnp.zeros((), y0.dtype),
            jnp.zeros((), jnp.int32),
            jnp.zeros((), jnp.int32),
        )

        def run(fn):
            def call():
                out = fn(terms, t0, t1, y0, args, st.f0)
                return tuple(jnp.asarray(o, z.dtype) for o, z in zip(out, zeros))

            return call

        ex = _maybe(~st.implicit, run(self._explicit), zeros)
        im = _maybe(st.implicit, run(self._implicit), zeros)
        pick = lambda a, b: jnp.where(st.implicit, b, a)  # noqa: E731
        y1, y_error, f_new, h_rho, n_f, n_jvp = jax.tree.map(pick, ex, im)

        # Hysteresis (updated on accepted steps only: diffrax drops a rejected state).
        stiff = h_rho > STIFF_H_RHO
        calm = h_rho < CALM_H_RHO
        ex_stiff = jnp.where(stiff, st.stiff_count + 1, st.stiff_count)
        ex_calm = jnp.where(stiff, 0, st.calm_count + 1)
        ex_stiff = jnp.where(ex_calm >= CALM_RESET, 0, ex_stiff)
        to_implicit = ~st.implicit & (ex_stiff >= STIFF_STEPS)
        im_calm = jnp.where(calm, st.calm_count + 1, 0)
        to_explicit = st.implicit & (im_calm >= CALM_STEPS)
        switch = to_implicit | to_explicit
        new_implicit = st.implicit ^ switch
        stiff_count = jnp.where(switch | st.implicit, 0, ex_stiff)
        calm_count = jnp.where(switch, 0, jnp.where(st.implicit, im_calm, ex_calm))
        new_state = _State(
            f0=f_new,
            implicit=new_implicit,
            stiff_count=stiff_count,
            calm_count=calm_count,
            h_rho=h_rho,
            f_evals=st.f_evals + n_f,
            jvp_evals=st.jvp_evals + n_jvp,
            num_switches=st.num_switches + switch.astype(jnp.int32),
            implicit_steps=st.implicit_steps + st.implicit.astype(jnp.int32),
        )
        dense_info = dict(y0=y0, y1=y1)
        return y1, y_error, dense_info, new_state, diffrax.RESULTS.successful
