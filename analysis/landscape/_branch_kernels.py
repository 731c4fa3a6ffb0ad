"""The compiled pieces of continuation and deflation: Newton correctors, tangents and
Jacobian products of a field `f(x, p, args)`, written once for the dense and the
matrix-free case.

The state is flattened: `y = (x.ravel(), p)`, a vector of `n + 1` entries, and
`F(y, args) = f(x, p, args).ravel()` (`n` entries). Up to `DENSE_MAX` unknowns the
Jacobian `dF/dy` is formed (`n + 1` JVPs, `jax.jacfwd`) and factorised; above, every
linear solve is GMRES (`jax.scipy`'s) on Jacobian-vector products, and no `[n, n]` array is
formed; where the user gives a preconditioner of `df/dx`, GMRES is preconditioned with
it on the right. The eigenvalues are the rightmost (Arnoldi on `df/dx`) or those nearest
zero (shift-and-invert: Arnoldi on `(df/dx)^-1`, each product a GMRES solve).
`FlatField` is an equinox module whose static fields are the user's function, the
state's shape and the preconditioner, so two calls with the same field share one
compilation, and a new value of `p` or of the arrays in `args` never recompiles.
"""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from et_ode import solvers

from . import _eigen as eigen
from ._xla_fallback import compiled

# Unknowns (`n + 1`) up to which the Jacobian is formed; above, JVPs and GMRES only: the
# one dense limit of every method chosen by size (`solvers.DENSE_MAX`).
DENSE_MAX = solvers.DENSE_MAX
# GMRES's Krylov space between restarts, and its cap on matrix-vector products. The ET's
# bordered Jacobians are stiff (rates from 0.005 to 32 on the shipped core): restarted
# every 30 vectors GMRES stagnates near the fold (a 20-point branch's correctors took
# 3.3x as long as with 100), and an uncapped run costs minutes per Newton step; a Newton
# step that GMRES cannot solve within the cap fails, and the step halves.
GMRES_RESTART = 100
GMRES_MAX_STEPS = 1000
# Krylov vectors the eigen-solver keeps (half of them kept at each restart); ARPACK with
# 40 took half the products of scipy's default 20 near a fold of the shipped core.
KRYLOV_VECTORS = 40
# How much of the fixed start vector a warm start from the previous eigenvectors keeps.
WARM_START_MIX = 1e-3
# Inexact Newton (`correct`): each step's GMRES aims at `FORCING tol` for the next
# residual, its relative tolerance never looser than `FORCING_MAX`, and the first step's
# never tighter than `FIRST_FORCING` (a 20-point branch of the shipped core: correctors
# 10.5 s with no floor, 9.6 s at 1e-4, 8.8 s at 1e-2, the same points).
FORCING = 0.5
FORCING_MAX = 0.1
FIRST_FORCING = 1e-2
# The relative residual of a tangent solve between the points of a branch (never below
# rounding): a tangent steers the next prediction and gives the sign of its `p`
# component. Where a fold is being located, from that component's value, tangents are
# solved to rounding.
TANGENT_RTOL = 1e-6
# Where such a tangent's `p` component is below this in size, the tangent is solved
# again to rounding: its sign decides whether a fold lies between two points, and
# GMRES's error in it can reach `TANGENT_RTOL` over the bordered system's smallest
# singular value (about 2e-4 on the shipped core, whose slowest rate is 0.005).
EXACT_TANGENT_BELOW = 1e-2


class FlatField(eqx.Module):
    """`F(y, args) = f(x, p, args).ravel()` with `y = (x.ravel(), p)`, and the user's
    preconditioner of `df/dx`, if any (`preconditioner(v, x, p, args)`, `v` and `x` in
    the state's shape: an approximation of `(df/dx)^-1 v` at `(x, p)`, linear in `v`)."""

    field: Callable = eqx.field(static=True)
    shape: tuple = eqx.field(static=True)
    preconditioner: Callable | None = eqx.field(static=True, default=None)

    def __call__(self, y, args):
        return self.split(y[:-1], y[-1], args)

    def split(self, x, p, args):
        """`F` of `x` (flat, `[n]`) and `p` (a scalar) given apart."""
        return jnp.ravel(self.field(x.reshape(self.shape), p, args)).astype(x.dtype)

    def state(self, y):
        """The state `x` of `y`, in its own shape."""
        return y[:-1].reshape(self.shape)

    def precondition_at(self, y, args):
        """The preconditioner at `y` as a function of flat vectors `[n] -> [n]`, or None
        where there is none."""
        if self.preconditioner is None:
            return None
        x, p = self.state(y), y[-1]

        def apply(v):
            out = self.preconditioner(v.reshape(self.shape), x, p, args)
            return jnp.ravel(out).astype(v.dtype)

        return apply


def rounding_rtol(dtype) -> float:
    """The relative residual of a linear solve "to rounding" in `dtype`."""
    return 1e-10 if dtype == jnp.float64 else 1e-5


def _gmres_limits(size: int, max_products: int = GMRES_MAX_STEPS, method: str = "batched") -> dict:
    """`jax.scipy.sparse.linalg.gmres`'s restart length and cap (in restart cycles: at
    most `max_products` products) for a system of `size` unknowns, and its "batched"
    method, which tests the true residual at the end of each restart cycle. The
    "incremental" method tests the Givens-rotated estimate after every product, but on
    the shipped core's bordered systems that estimate ran ~12x below the true residual
    (asked 1e-10, got 1.5e-9 in 196 products, where "batched" with 100 vectors got 1e-13
    in 153): an inexact Newton step stopped on it does not lower `F` as planned."""
    restart = min(GMRES_RESTART, size)
    cycles = max(1, min(max_products, 10 * size) // restart)
    return dict(restart=restart, maxiter=cycles, solve_method=method)


def _gmres(
    operator,
    rhs,
    guess,
    rtol,
    size: int,
    precondition=None,
    max_products=GMRES_MAX_STEPS,
    method="batched",
):
    """Solve `operator(u) = rhs` (`u`, `rhs`: pytrees of vectors) to a true residual
    of at most `rtol |rhs|` by `jax.scipy`'s restarted GMRES (`_gmres_limits`, at most
    `max_products` products), from `guess` (else zero).

    With `precondition` (a pytree function approximating the operator's inverse) the
    preconditioning is on the right: GMRES solves `operator(precondition(z)) = rhs -
    operator(guess)` and `u = guess + precondition(z)`, so the residual it tests is the
    true one (`jax.scipy`'s own `M` preconditions on the left, and tests `M`'s residual:
    an inexact Newton step needs the true one)."""
    limits = _gmres_limits(size, max_products, method)
    if precondition is None:
        u, _ = jax.scipy.sparse.linalg.gmres(operator, rhs, x0=guess, tol=rtol, **limits)
        return u
    residual = rhs if guess is None else jax.tree.map(jnp.subtract, rhs, operator(guess))
    norm = jnp.sqrt(sum(jnp.sum(leaf * leaf) for leaf in jax.tree.leaves(rhs)))
    z, _ = jax.scipy.sparse.linalg.gmres(
        lambda d: operator(precondition(d)), residual, tol=0.0, atol=rtol * norm, **limits
    )
    step = precondition(z)
    return step if guess is None else jax.tree.map(jnp.add, guess, step)


def bordered_solve(F, y, border, args, rhs, dense: bool, guess=None, rtol=None):
    """Solve `[dF/dy; border^T] dy = rhs` (`n + 1` equations) at `y`.

    Matrix-free: restarted GMRES (`_gmres`) on JVPs of one linearisation, from `guess`
    (else zero), to a residual `rtol |rhs|` (default `rounding_rtol`: to rounding),
    preconditioned on the right by `diag(P, 1)` where the field has a preconditioner `P`
    of `df/dx` (`FlatField`). Dense: an LU solve, exact whatever `rtol`."""
    if dense:
        matrix = jnp.concatenate([jax.jacfwd(lambda z: F(z, args))(y), border[None]], axis=0)
        return jnp.linalg.solve(matrix, rhs)
    # GMRES's unknowns are the pair `(dx [n], dp [])`, and `df/dp` is one vector formed
    # before it starts: its operator linearises in `x` alone and slices, concatenates or
    # carries a tangent of `p` through nothing. (This was written when XLA refused a
    # concatenated `[df/dy; border]` operator on a GPU; the refusal proved to be its
    # Triton code generator's, which refuses this corrector too: `_xla_fallback`.) On
    # the CPU each product costs the same either way.
    x, p = y[:-1], y[-1]
    _, linear = jax.linearize(lambda u: F.split(u, p, args), x)
    _, df_dp = jax.jvp(lambda q: F.split(x, q, args), (p,), (jnp.ones_like(p),))
    border_x, border_p = border[:-1], border[-1]

    def operator(d):
        dx, dp = d
        return linear(dx) + df_dp * dp, border_x @ dx + border_p * dp

    inverse = F.precondition_at(y, args)
    precondition = None if inverse is None else (lambda d: (inverse(d[0]), d[1]))
    pair = lambda v: None if v is None else (v[:-1], v[-1])  # noqa: E731
    dx, dp = _gmres(
        operator,
        pair(rhs),
        pair(guess),
        rounding_rtol(y.dtype) if rtol is None else rtol,
        y.size,
        precondition,
    )
    return jnp.concatenate([dx, dp[None]])


def newton(residual, step, y0, tol, max_newton: int, monotone: bool = False):
    """The generic room's Newton iteration (traceable), behind continuation's corrector,
    deflation and the cusp's location: `y <- y + step(y, iteration, rms residual(y))`
    from `y0` until `rms residual(y) <= tol`, `max_newton` steps, a non-finite residual,
    or, where `monotone`, a step that did not lower it. `step` solves the linearisation
    (`bordered_solve`: dense LU or GMRES on JVPs) and may scale its step. Returns
    `(y, iterations, rms residual(y))`."""

    def cond(state):
        _, it, res, previous = state
        go = (res > tol) & (it < max_newton) & jnp.isfinite(res)
        return go & (res < previous) if monotone else go

    def body(state):
        y, it, res, _ = state
        y = y + step(y, it, res)
        return y, it + 1, solvers.rms(residual(y)), res

    start = solvers.rms(residual(y0))
    y, it, res, _ = jax.lax.while_loop(cond, body, (y0, jnp.asarray(0), start, 2 * start))
    return y, it, res


@compiled
def correct(F, y_pred, t, weights, args, tol, max_newton: int, dense: bool):
    """Newton on `F(y) = 0, (weights t) . (y - y_pred) = 0` from `y_pred` (the
    pseudo-arclength corrector along the unit tangent `t`; with `t = e_p` it solves at
    fixed `p`). Returns `(y, iterations, rms F(y))`: converged where that RMS is at most
    `tol`.

    Matrix-free, each Newton step is solved inexactly (Eisenstat & Walker 1996): GMRES
    stops at the relative residual `FORCING tol / rms F` (between `rounding_rtol` and
    `FORCING_MAX`), the linear error that would leave `rms F` at `FORCING tol` if
    Newton's own error were nil, rather than at rounding every time; the first step at
    no less than `FIRST_FORCING`, since Newton's own error after it is rarely smaller
    (and a prediction that fails costs less). GMRES ("batched") tests its residual once
    per restart cycle (`GMRES_RESTART` products), so a looser tolerance saves whole
    cycles: at least one cycle is paid per step.

    A fixed fraction of `|F|` at every step (1e-3) lost the discretised Bratu branch, whose
    rows are `O(1/h^2)`: GMRES's error along the branch (the null direction of `dF/dy`,
    which only the arclength row sees) grew with `|F|` and slid the point along the
    branch. Here that error is at most `FIRST_FORCING |rhs|` after the first step (a
    small part of the prediction's miss) and `FORCING tol sqrt(n + 1)` after later ones:
    a point slid that little is still a steady state of the branch, its arclength off by
    as much."""
    border = weights * t

    def step(y, it, res):
        rhs = -jnp.concatenate([F(y, args), (border @ (y - y_pred))[None]])
        target = FORCING * tol / res
        target = jnp.where(it == 0, jnp.maximum(target, FIRST_FORCING), target)
        rtol = jnp.clip(target, rounding_rtol(y.dtype), FORCING_MAX)
        return bordered_solve(F, y, border, args, rhs, dense, rtol=rtol)

    # A step that did not lower the residual: outside Newton's region of convergence (the
    # caller shortens the arclength step) rather than more iterations.
    return newton(lambda y: F(y, args), step, y_pred, tol, max_newton, monotone=True)


@compiled
def tangent(F, y, border, weights, args, dense: bool, guess=None, rtol=None):
    """The tangent `t` of the branch at `y` (`dF/dy t = 0`), of unit length in the norm
    `sqrt(sum(weights t^2))`, oriented so that `border . t > 0`; `guess` (the previous
    point's tangent) starts GMRES, which stops at `rtol` (default: rounding)."""
    rhs = jnp.zeros_like(y).at[-1].set(1.0)
    t = bordered_solve(F, y, border, args, rhs, dense, guess=guess, rtol=rtol)
    return t / jnp.sqrt(jnp.sum(weights * t * t))


@compiled
def jacobian(F, y, args):
    """`dF/dy`, `[n, n + 1]` (dense case only): `[:, :-1]` is `df/dx`, `[:, -1]` is
    `df/dp`."""
    return jax.jacfwd(lambda z: F(z, args))(y)


@compiled
def deflated_newton(F, y0, roots, active, args, tol, max_newton: int, power, shift, dense: bool):
    """Newton on `f(x, p) = 0` at fixed `p` from `y0`, deflated at the `active` rows of
    `roots` (`[m, n]`): the step is the plain Newton step scaled by
    `1 / (1 - grad(log M) . dx)`, `M(x) = prod_i (|x - r_i|^-power + shift)` (Farrell,
    Birkisson and Funke, SIAM J. Sci. Comput. 37, 2015), so Newton cannot converge to a
    root already found. Returns `(y, iterations, rms f)`."""
    n = y0.size - 1

    def step_scale(x, dx):
        diff = x[None] - roots
        dist2 = jnp.sum(diff * diff, axis=1)
        inv = dist2 ** (-power / 2)
        # d/dx log(|x - r|^-q + s) . dx = -q |x - r|^(-q-2) (x - r) . dx / (|x - r|^-q + s)
        slope = -power * inv / dist2 * (diff @ dx) / (inv + shift)
        return 1.0 / (1.0 - jnp.sum(jnp.where(active, slope, 0.0)))

    def step(y, it, res):
        fixed_p = jnp.zeros_like(y).at[-1].set(1.0)
        rhs = -jnp.concatenate([F(y, args), jnp.zeros((1,), y.dtype)])
        dy = bordered_solve(F, y, fixed_p, args, rhs, dense)
        return step_scale(y[:n], dy[:n]) * dy

    return newton(lambda y: F(y, args), step, y0, tol, max_newton)


def real_eigenvalues(values) -> np.ndarray:
    """Which eigenvalues are real (imaginary part within round-off of their scale)."""
    scale = max(1.0, float(np.max(np.abs(values)))) if values.size else 1.0
    return np.abs(values.imag) <= 1e-7 * scale


@compiled
def arnoldi_steps(F, y, args, basis, projected, first):
    """`_eigen.arnoldi_steps` on `df/dx` at `y`: one linearisation, then the
    products of the Arnoldi steps in one compiled loop."""
    _, linear = jax.linearize(lambda u: F.split(u, y[-1], args), y[:-1])
    return eigen.arnoldi_steps(linear, basis, projected, first)


def inverse_rtol(dtype) -> float:
    """The relative residual to which a shift-and-invert product `(df/dx)^-1 v` is
    solved: a hundredth of the Ritz pairs' acceptance (`_leading_pairs`), so that the
    inverse's solving errors stay below what is accepted."""
    return 1e-12 if dtype == jnp.float64 else 1e-7


# A shift-and-invert product's GMRES stops after this many products: near a singular
# point its target is below rounding (below), and the full `GMRES_MAX_STEPS` on each of
# the eigen-solver's products would cost minutes per point.
INVERSE_MAX_STEPS = 300
# A shift-and-invert product `u = (df/dx)^-1 v` is accepted where its true residual is at
# most `INVERSE_SLACK` times `inverse_rtol |v|` plus the residual's rounding floor,
# `INVERSE_SLACK eps |df/dx| |u|` (near a bifurcation `u` is large, and so is that floor:
# the error it leaves lies along the near-null eigenvector, the one sought); else the
# product is NaN and the eigen-solver stops at once (`EigenNotConvergedError`) rather than
# restart on a wrong operator. `|df/dx|` is estimated by `NORM_ITERATIONS` power steps.
INVERSE_SLACK = 100.0
NORM_ITERATIONS = 10


def _norm_estimate(linear, size: int, dtype):
    """`|linear|` (2-norm) estimated from below by power steps from a fixed random
    vector (not a smooth one: a discrete Laplacian's largest eigenvalues are its
    roughest modes): within a small factor of it, enough to scale a rounding floor."""

    def step(_, w):
        w = linear(w)
        return w / jnp.linalg.norm(w)

    w = jax.random.normal(jax.random.key(0), (size,), dtype)
    w = jax.lax.fori_loop(0, NORM_ITERATIONS, step, w / jnp.linalg.norm(w))
    return jnp.linalg.norm(linear(w))


def _inverse(linear, precondition, size: int, dtype):
    """`v -> linear^-1 v` by `_gmres` to `inverse_rtol` (at most `INVERSE_MAX_STEPS`
    products), NaN where its residual is above what `INVERSE_SLACK` allows."""
    rtol = inverse_rtol(dtype)
    floor = INVERSE_SLACK * jnp.finfo(dtype).eps * _norm_estimate(linear, size, dtype)

    def solve(v):
        u = _gmres(linear, v, None, rtol, size, precondition, INVERSE_MAX_STEPS, "incremental")
        allowed = INVERSE_SLACK * rtol * jnp.linalg.norm(v) + floor * jnp.linalg.norm(u)
        return jnp.where(jnp.linalg.norm(linear(u) - v) > allowed, jnp.nan, u)

    return solve


@compiled
def inverse_arnoldi_steps(F, y, args, basis, projected, first):
    """`arnoldi_steps` on `(df/dx)^-1` at `y`: each product a `_gmres` solve on JVPs,
    preconditioned where the field has a preconditioner (`_inverse`)."""
    _, linear = jax.linearize(lambda u: F.split(u, y[-1], args), y[:-1])
    solve = _inverse(linear, F.precondition_at(y, args), y.size - 1, y.dtype)
    return eigen.arnoldi_steps(solve, basis, projected, first)


@compiled
def transposed_inverse_arnoldi_steps(F, y, args, basis, projected, first):
    """`arnoldi_steps` on `(df/dx)^-T` at `y`: solves on vector-Jacobian products,
    preconditioned by the transpose of the field's preconditioner (which must then be
    transposable by `jax.linear_transpose`: linear in `v`)."""
    _, pullback = jax.vjp(lambda u: F.split(u, y[-1], args), y[:-1])
    inverse = F.precondition_at(y, args)
    transposed = None
    if inverse is not None:
        transpose = jax.linear_transpose(inverse, y[:-1])
        transposed = lambda w: transpose(w)[0]  # noqa: E731
    solve = _inverse(lambda w: pullback(w)[0], transposed, y.size - 1, y.dtype)
    return eigen.arnoldi_steps(solve, basis, projected, first)


# What `leading_eigen` keeps: the eigenvalues with the largest real parts (Arnoldi on
# `df/dx`), or those nearest zero (Arnoldi on its inverse: shift-and-invert at 0).
SPECTRA = ("rightmost", "nearest_zero")


def _leading_pairs(steps, F, y, args, start, k: int, which: str = "real"):
    """`_eigen.leading_eigenpairs` of the operator whose Arnoldi steps at `y` are
    `steps(F, y, args, ...)`: `KRYLOV_VECTORS` Krylov vectors (at least `2 k + 1`), the
    `k` pairs largest in `which` accepted at `1e-10` (float64; 1e-5 in float32) of the
    operator's norm."""
    n = y.size - 1
    return eigen.eigenpairs(
        min(k, n - 2),
        which=which,
        steps=lambda basis, projected, first: steps(F, y, args, basis, projected, first),
        start=start,
        krylov=min(n - 1, max(2 * k + 1, KRYLOV_VECTORS)),
        tol=1e-10 if y.dtype == jnp.float64 else 1e-5,
    )


def _inverted_pairs(steps, F, y, args, start, k: int):
    """The `k` eigenpairs of `df/dx` nearest zero, from Arnoldi on its inverse
    (`steps`: `inverse_arnoldi_steps` or its transpose): eigenvalues `1 / mu`."""
    try:
        values, vectors = _leading_pairs(steps, F, y, args, start, k, which="magnitude")
    except eigen.EigenNotConvergedError as error:
        raise eigen.EigenNotConvergedError(
            f"shift-and-invert: {error} The inverse's GMRES solves did not reach their "
            "tolerance: give a preconditioner of df/dx (preconditioner=), or use "
            "spectrum='rightmost' or matrix_free=False (or the field rounds more "
            "coarsely than its dtype, as with float32 or TF32 matrix products in a "
            "float64 field: compute it in its dtype)."
        ) from None
    return 1.0 / values, vectors


def leading_eigen(F, y, args, k: int, dense: bool, previous=None, spectrum: str = "rightmost"):
    """The `k` eigenvalues of `df/dx` at `y` with the largest real parts, or with
    `spectrum="nearest_zero"` those nearest zero (either way returned by descending real
    part), their eigenvectors (`[n, k]`), and the numbers of real and of complex
    eigenvalues with a positive real part (all eigenvalues in the dense case; among the
    `k` otherwise).

    Dense: numpy's `eig` of the formed Jacobian. Matrix-free: Krylov-Schur
    (`_eigen.leading_eigenpairs`, `KRYLOV_VECTORS` Krylov vectors, a fixed start
    vector or `previous`, below) on JVPs of one linearisation, or on `(df/dx)^-1` for
    the nearest zero (each product a GMRES solve to `inverse_rtol`, preconditioned
    where the field has a preconditioner: a stiff spectrum's rightmost eigenvalues,
    clustered beside its far-left ones, take Arnoldi on `df/dx` thousands of products),
    each Ritz pair accepted at a residual below `1e-10` (float64) times the operator's
    norm on its Krylov space: a tolerance relative
    to the operator, not to the eigenvalue (which nears 0 at a fold or branch point,
    where a relative test takes ever more restarts); `EigenNotConvergedError` where it
    fails. `previous` (`[n, j]`, the eigenvectors at a nearby point) starts the Krylov
    space from their sum, with a little of the fixed start so that no direction is
    missing from it."""
    n = y.size - 1
    if dense:
        values, vectors = eigen.eigenpairs(None, matrix=np.asarray(jacobian(F, y, args))[:, :-1])
        unstable = unstable_counts(values)
        if spectrum == "nearest_zero":
            near = np.argsort(np.abs(values), kind="stable")[:k]
            values, vectors = values[near], vectors[:, near]
    else:
        start = 1.0 + np.random.default_rng(0).random(n)
        if previous is not None:
            previous = np.asarray(previous)
            near = np.sum(previous.real + previous.imag, axis=1)
            size = np.linalg.norm(near)
            if np.isfinite(size) and size > 0:
                start = near / size + WARM_START_MIX * start / np.linalg.norm(start)
        start = jnp.asarray(start, y.dtype)
        if spectrum == "nearest_zero":
            values, vectors = _inverted_pairs(inverse_arnoldi_steps, F, y, args, start, k)
        else:
            values, vectors = _leading_pairs(arnoldi_steps, F, y, args, start, k)
        unstable = unstable_counts(values)
    order = np.argsort(-values.real, kind="stable")
    values, vectors = values[order].astype(complex), vectors[:, order]
    return values[:k], vectors[:, :k], unstable


def unstable_counts(values) -> tuple[int, int]:
    """The numbers of real and of complex eigenvalues with a positive real part among
    `values` (a real operator's), a complex one counted with its conjugate where that
    is not among them: the `k` kept can cut a pair, whose members are equally far
    right and equally near zero."""
    real = real_eigenvalues(values)
    unstable_complex = values[~real & (values.real > 0)]
    upper = unstable_complex[unstable_complex.imag > 0]
    lower = unstable_complex[unstable_complex.imag < 0]
    scale = max(1.0, float(np.max(np.abs(values)))) if values.size else 1.0
    alone = [v for v in lower if not np.any(np.abs(upper - np.conj(v)) <= 1e-7 * scale)]
    return int(np.sum(values.real[real] > 0)), 2 * (len(upper) + len(alone))


@compiled
def second_derivative(F, y, args, u, v):
    """`d^2 F(y)[u, v]` (`[n]`), by a JVP of a JVP."""
    f = lambda z: F(z, args)  # noqa: E731
    return jax.jvp(lambda z: jax.jvp(f, (z,), (u,))[1], (y,), (v,))[1]


@compiled
def transposed_arnoldi_steps(F, y, args, basis, projected, first):
    """`arnoldi_steps` on `(df/dx)^T` at `y` (vector-Jacobian products)."""
    _, pullback = jax.vjp(lambda u: F.split(u, y[-1], args), y[:-1])
    return eigen.arnoldi_steps(lambda w: pullback(w)[0], basis, projected, first)


def left_null_vector(F, y, args, value, guess, k: int, spectrum: str = "rightmost"):
    """The left eigenvector of `df/dx` at `y` for its real eigenvalue `value` (the one
    through zero at a branch point), matrix-free: Krylov-Schur on `(df/dx)^T`, whose `k`
    leading eigenvalues are those of `df/dx` (with `spectrum="nearest_zero"`, on
    `(df/dx)^-T`: the `k` nearest zero), started from `guess` (the right
    eigenvector: the left one where `df/dx` is symmetric), the eigenvalue nearest
    `value` picked. Returns a real unit vector `[n]`."""
    n = y.size - 1
    start = np.asarray(np.real(guess), np.float64)
    start = start / np.linalg.norm(start)
    start = start + WARM_START_MIX * (1.0 + np.random.default_rng(0).random(n)) / np.sqrt(n)
    first = jnp.asarray(start, y.dtype)
    if spectrum == "nearest_zero":
        values, vectors = _inverted_pairs(transposed_inverse_arnoldi_steps, F, y, args, first, k)
    else:
        values, vectors = _leading_pairs(transposed_arnoldi_steps, F, y, args, first, k)
    distance = np.abs(values - value)
    pick = int(np.argmin(distance))
    others = np.delete(distance, pick)
    if not real_eigenvalues(values)[pick] or (others.size and others.min() <= 2 * distance[pick]):
        raise eigen.EigenNotConvergedError(
            f"the transposed Jacobian's eigenvalues {np.round(values, 8)} hold no real one "
            f"clearly nearest {complex(value):.8g}: no left null vector."
        )
    psi = np.asarray(vectors[:, pick])
    psi = psi * np.exp(-1j * np.angle(psi[np.argmax(np.abs(psi))]))  # real up to a phase
    return np.real(psi) / np.linalg.norm(np.real(psi))


def switch_tangent(F, y, t, phi, value, args, dense: bool, k: int, spectrum: str = "rightmost"):
    """The tangent of the other branch through a simple branch point at `y`, where the
    branch has tangent `t` and `df/dx` the null vector `phi` (eigenvalue `value`, near
    zero; the `k`-th largest in real part, or with `spectrum="nearest_zero"` among the
    `k` nearest zero: the left one is found among as many of the transposed Jacobian's).

    The null space of `df/dy` is spanned by `t` and `w = (phi, 0)` less its Euclidean
    projection on `t` (any second direction of that space serves); a branch's tangent `c1 t + c2 w`
    solves the algebraic bifurcation equation
    `psi . d^2F[d, d] = 0` (`psi` the left null vector): with `a_ij = psi . d^2F[., .]`
    on `(t, w)` and `a_tt = 0` (`t` is a branch), the other root is
    `c1 / c2 = -a_ww / (2 a_tw)` (Kuznetsov, Elements of Applied Bifurcation Theory,
    section 10.2). Oriented so that its `phi` component is positive, `phi` signed so
    that its largest entry is positive. Returns `[n + 1]`."""
    phi = np.asarray(np.real(phi), np.float64)
    phi = phi * np.sign(phi[np.argmax(np.abs(phi))])
    t = np.asarray(t, np.float64)
    w = np.concatenate([phi, [0.0]])
    w = w - (w @ t) / (t @ t) * t
    w = w / np.linalg.norm(w)
    if dense:
        u, _, _ = np.linalg.svd(np.asarray(jacobian(F, y, args))[:, :-1])
        psi = u[:, -1]
    else:
        psi = left_null_vector(F, y, args, value, phi, k, spectrum)
    a_tw = float(
        psi
        @ np.asarray(
            second_derivative(F, y, args, jnp.asarray(t, y.dtype), jnp.asarray(w, y.dtype))
        )
    )
    a_ww = float(
        psi
        @ np.asarray(
            second_derivative(F, y, args, jnp.asarray(w, y.dtype), jnp.asarray(w, y.dtype))
        )
    )
    d = w if a_tw == 0.0 else w - a_ww / (2.0 * a_tw) * t
    d = d / np.linalg.norm(d)
    return d * (1.0 if d[:-1] @ phi >= 0 else -1.0)
