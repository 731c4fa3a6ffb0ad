"""One eigen-solver for every spectrum of the generic room: dense below a stated size
(`solvers.DENSE_MAX` state entries), Krylov-Schur above, behind one call, `eigenpairs`.

Dense: LAPACK through numpy (`eigh` for a symmetric operator, `eig` otherwise) on the
formed matrix. Matrix-free: the Krylov-Schur method (G. W. Stewart, "A Krylov-Schur
algorithm for large eigenproblems", SIAM J. Matrix Anal. Appl. 23, 2001) for a real
operator, symmetric or not; on a symmetric one it is the thick-restart Lanczos method
(with full reorthogonalisation), its Ritz values real. The callers: continuation's
eigenvalues of `df/dx` (rightmost, or nearest zero by shift-and-invert), the tangent
Hessian's extremes (`hessian_eigenvalues`), and the left null vectors of branch
switching.

The Arnoldi steps (one operator product and two passes of classical Gram-Schmidt each)
run inside one compiled loop, so on an accelerator no vector leaves the device between
two products; only the small projected matrix (`[m + 1, m]`) and the basis' restart
combination are handled on the host, once per restart. That is what ARPACK called from
Python cannot do: it asks for each product through the host.

A Krylov decomposition of order `m` is `A V_m = V_m B + v_{m+1} b^T`, `V` orthonormal
(`[n, m + 1]`, stored as rows), `H = [B; b^T]` (`[m + 1, m]`). A restart takes the real Schur form
`B = Z T Z^T`, ordered so that the `p` wanted Ritz values come first,
and keeps `V_m Z_p`, `T_pp` and `b^T Z_p`: a decomposition of order `p` from which the
Arnoldi steps continue. A Ritz pair `(lambda, V_m y)` (`B y = lambda y`, `|y| = 1`) has the
residual `|b^T y|`; it is accepted when that is at most `tol` times the projected
matrix's norm (a tolerance relative to the operator, so it does not shrink with an
eigenvalue passing through zero, as at a fold).
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg

# The eigenvalues wanted, by what they are largest in: the real part (the rightmost: the
# operator's own leading ones), minus the real part (the leftmost: a symmetric operator's
# smallest), or the magnitude (the largest of an inverse: those of the operator nearest
# zero, as in a shift-and-invert).
WANTED: dict[str, Callable] = {
    "real": lambda re, im: re,
    "leftmost": lambda re, im: -re,
    "magnitude": np.hypot,
}


class EigenNotConvergedError(RuntimeError):
    """The Krylov-Schur iteration did not converge within its restarts, or the operator
    is zero (or, for a left null vector, no eigenvalue found matches the crossing
    one)."""


def arnoldi_steps(linear: Callable, basis, projected, first):
    """Arnoldi steps `first .. m - 1` of a Krylov decomposition (traceable).

    `linear(v)`: the operator's product (`[n] -> [n]`); `basis`: `[m + 1, n]`, the
    Krylov vectors as rows (contiguous: on the CPU twice as fast as columns), its first
    `first + 1` rows orthonormal; `projected`: `[m + 1, m]`, its first `first` columns
    set. Where a step breaks down (the next vector lies in the span of the basis: an
    invariant subspace was found) a random vector orthogonal to the basis continues it,
    with a zero subdiagonal entry (the decomposition stays exact up to the dropped
    remainder, below `10 eps |A v|`). Returns `(basis, projected)` with all `m` columns
    set."""
    rows, size = basis.shape
    dtype = basis.dtype
    # well below any acceptance tolerance (1e-5 in float32): what is dropped at a
    # breakdown stays below the residuals the caller accepts
    breakdown = 10 * jnp.finfo(dtype).eps
    index = jnp.arange(rows)

    def step(j, state):
        basis, projected = state
        mask = (index <= j).astype(dtype)
        w = linear(basis[j])
        scale = jnp.linalg.norm(w)
        # two passes of classical Gram-Schmidt: orthogonal to rounding
        h = (basis @ w) * mask
        w = w - h @ basis
        h2 = (basis @ w) * mask
        w = w - h2 @ basis
        h = h + h2
        beta = jnp.linalg.norm(w)
        broke = beta <= breakdown * scale

        def random_direction(_):
            r = jax.random.normal(jax.random.fold_in(jax.random.key(0), j), (size,), dtype)
            for _ in range(2):
                r = r - ((basis @ r) * mask) @ basis
            return r / jnp.linalg.norm(r)

        fresh = jax.lax.cond(broke, random_direction, lambda _: w / beta, None)
        h = h.at[j + 1].set(jnp.where(broke, 0.0, beta))
        return basis.at[j + 1].set(fresh), projected.at[:, j].set(h)

    return jax.lax.fori_loop(first, rows - 1, step, (basis, projected))


def _ordered_schur(matrix, values, keep: int, which: str = "real"):
    """The real Schur form `(T, Z, kept)` of `matrix` (`[m, m]`) with its `kept`
    eigenvalues (of `values`) largest in `which` (`WANTED`) first, `kept` as close to
    `keep` as the spectrum allows, between 1 and `m - 1` (a complex pair or a tie on the
    edge is kept whole: the cut lies halfway to the next lower value; where
    reordering's rounding moves an eigenvalue across a cut, the next cut is tried).
    Fewer than the wanted eigenvalues may be kept: a Krylov-Schur restart stays valid,
    it only keeps less of what it has found."""
    key = WANTED[which]
    ranked = np.sort(key(values.real, values.imag))[::-1]
    size = ranked.size
    for edge in [*range(keep, size), *range(keep - 1, 0, -1)]:
        threshold = 0.5 * (ranked[edge - 1] + ranked[edge])
        if ranked[edge] == ranked[edge - 1]:
            continue
        try:
            schur, z, kept = scipy.linalg.schur(
                matrix, output="real", sort=lambda re, im: key(re, im) > threshold
            )
        except np.linalg.LinAlgError:  # "leading eigenvalues do not satisfy sort condition"
            continue
        if 1 <= kept <= size - 1:  # (scipy re-tests the sort on its own eigenvalues)
            return schur, z, kept
    return None


def leading_eigenpairs(
    steps: Callable,
    start,
    k: int,
    *,
    krylov: int = 40,
    tol: float = 1e-10,
    max_restarts: int = 1000,
    which: str = "real",
):
    """The `k` eigenvalues largest in `which` (`WANTED`: `"real"`, the real part;
    `"leftmost"`, minus it; `"magnitude"`) of the operator behind `steps`, and their unit
    eigenvectors, by Krylov-Schur (module docstring).

    - `steps(basis, projected, first)`: `arnoldi_steps` with the operator bound (usually
      a compiled function, so one compilation serves every restart and every operator
      of the same shapes).
    - `start`: `[n]`, the first Krylov vector (not zero).
    - `krylov`: the Krylov vectors kept between restarts, `m` (at most `n - 1`); half
      of them are kept at a restart.
    - `tol`: a Ritz pair is accepted at a residual of `tol` times the norm of the
      projected matrix.

    Returns `(values [k] complex, descending in `which`; vectors [n, k] complex;
    products)`; raises `EigenNotConvergedError` with the residuals where `max_restarts`
    restarts do not converge."""
    start = jnp.asarray(start)
    n = start.size
    m = min(krylov, n - 1)
    if not 1 <= k < m:
        raise ValueError(f"k must be between 1 and {m - 1} (Krylov vectors {m}); got {k}.")
    if which not in WANTED:
        raise ValueError(f"which must be one of {sorted(WANTED)} (got {which!r}).")
    if max_restarts < 1:
        raise ValueError(f"max_restarts must be at least 1 (got {max_restarts}).")
    if not float(jnp.linalg.norm(start)) > 0:
        raise ValueError("start must be a finite vector, not zero.")
    dtype = start.dtype
    basis = jnp.zeros((m + 1, n), dtype).at[0].set(start / jnp.linalg.norm(start))
    projected = jnp.zeros((m + 1, m), dtype)
    first, products = 0, 0
    keep = min(max(k + 2, m // 2), m - 1)
    previous = None  # the wanted Ritz values of the last restart after a breakdown
    for _ in range(max_restarts):
        basis, projected = steps(basis, projected, jnp.asarray(first))
        h = np.asarray(projected, np.float64)
        # an exactly zero subdiagonal entry: an invariant subspace was found there
        broke = bool(np.any(h[np.arange(first + 1, m + 1), np.arange(first, m)] == 0.0))
        products += m - first
        b_matrix, b_row = h[:m], h[m]
        scale = np.linalg.norm(h, 2) if np.all(np.isfinite(h)) else np.inf
        if not np.isfinite(scale) or scale == 0.0:
            raise EigenNotConvergedError(
                f"the operator is {'zero' if scale == 0.0 else 'not finite'} on its "
                f"Krylov space (after {products} products)."
            )
        values, vectors = np.linalg.eig(b_matrix)
        order = np.argsort(-WANTED[which](values.real, values.imag), kind="stable")
        values, vectors = values[order], vectors[:, order]
        residuals = np.abs(b_row @ vectors[:, :k])
        converged = bool(np.all(residuals <= tol * scale))
        # A Krylov space from one start vector holds one copy of a repeated eigenvalue,
        # so a cycle with a breakdown is not accepted on its own: the next cycle
        # explores the fresh random direction and is accepted on convergence if it has
        # no breakdown, or if it reproduces these wanted values where it breaks down
        # again (the space is exhausted); else a double eigenvalue could hide.
        settled = not broke or (
            previous is not None and np.allclose(values[:k], previous, rtol=0, atol=tol * scale)
        )
        previous = values[:k] if broke else None
        if converged and settled:
            ritz = np.asarray(basis[:m], np.float64).T @ vectors[:, :k]
            ritz = ritz / np.linalg.norm(ritz, axis=0)
            return values[:k], ritz, products
        ordered = _ordered_schur(b_matrix, values, keep, which)
        if ordered is None:
            raise EigenNotConvergedError(
                f"no restart: the Ritz values ({which}) tie across every cut between "
                f"1 and {m - 1} kept (after {products} products)."
            )
        schur, z, kept = ordered
        # fixed shapes (the dropped columns zero), so the device's products compile once
        combination = np.zeros((m + 1, m + 1))
        combination[:m, :kept] = z[:, :kept]
        combination[m, kept] = 1.0
        basis = jnp.asarray(combination.T, dtype) @ basis
        new_projected = np.zeros((m + 1, m))
        new_projected[:kept, :kept] = schur[:kept, :kept]
        new_projected[kept, :kept] = b_row @ z[:, :kept]
        projected = jnp.asarray(new_projected, dtype)
        first = kept
    raise EigenNotConvergedError(
        f"Krylov-Schur did not converge in {max_restarts} restarts ({products} "
        f"products): Ritz residuals {np.array2string(residuals, precision=2)} against "
        f"{tol * scale:.2g}."
    )


def dense_eigenpairs(matrix, k: int | None = None, *, which: str = "real", symmetric: bool = False):
    """The `k` eigenpairs (all with `None`) of the formed `matrix` (`[n, n]`) largest in
    `which` (`WANTED`), in that order: `eigh` of its symmetric part where `symmetric`
    (real values and vectors), else `eig`. Returns `(values [k], vectors [n, k])`."""
    if which not in WANTED:
        raise ValueError(f"which must be one of {sorted(WANTED)} (got {which!r}).")
    matrix = np.asarray(matrix)
    if symmetric:
        values, vectors = np.linalg.eigh(0.5 * (matrix + matrix.T))
    else:
        values, vectors = np.linalg.eig(matrix)
    order = np.argsort(-WANTED[which](values.real, values.imag), kind="stable")
    order = order if k is None else order[:k]
    return values[order], vectors[:, order]


def eigenpairs(
    k: int | None,
    *,
    which: str = "real",
    symmetric: bool = False,
    matrix=None,
    steps: Callable | None = None,
    start=None,
    krylov: int = 40,
    tol: float = 1e-10,
):
    """The one interface: the `k` eigenpairs largest in `which` (`WANTED`) of a real
    operator given either formed (`matrix`, `[n, n]`: `dense_eigenpairs`; `k=None`,
    all) or by its Arnoldi steps (`steps` and a `start` vector: `leading_eigenpairs`
    with `krylov` vectors and `tol`). Where `symmetric`, the values are real. The caller
    chooses which by the state's size against `solvers.DENSE_MAX`. Returns `(values
    [k], vectors [n, k])`; `EigenNotConvergedError` where the Krylov iteration fails."""
    if (matrix is None) == (steps is None):
        raise ValueError("give the operator either formed (matrix=) or by its steps (steps=).")
    if matrix is not None:
        return dense_eigenpairs(matrix, k, which=which, symmetric=symmetric)
    if k is None or steps is None:
        raise ValueError("a Krylov method finds k eigenpairs, not all: give k.")
    values, vectors, _ = leading_eigenpairs(steps, start, k, krylov=krylov, tol=tol, which=which)
    if symmetric:
        values, vectors = values.real, vectors.real
    return values, vectors
