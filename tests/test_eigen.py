"""`analysis.landscape._krylov_schur`, the matrix-free eigen-solver of continuation and deflation,
against numpy's dense `eig` (LAPACK) on matrices whose leading eigenvalues are hard for a
Krylov method: complex pairs, a repeated leading eigenvalue (one Krylov space holds one
copy), an invariant subspace met early, a tiny state."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from et_ode.analysis.landscape import _eigen as eigen

N = 60


@jax.jit
def _steps(matrix, basis, projected, first):
    return eigen.arnoldi_steps(lambda v: matrix @ v, basis, projected, first)


def leading(matrix, k, krylov=20, dtype=jnp.float64):
    matrix = jnp.asarray(matrix, dtype)
    start = 1.0 + np.random.default_rng(0).random(matrix.shape[0])
    return eigen.leading_eigenpairs(
        lambda basis, projected, first: _steps(matrix, basis, projected, first),
        jnp.asarray(start, matrix.dtype),
        k,
        krylov=krylov,
        tol=1e-10 if dtype == jnp.float64 else 1e-5,
    )


def reference(matrix, k):
    """The `k` eigenvalues with the largest real parts."""
    values = np.linalg.eigvals(matrix)
    return values[np.argsort(-values.real)][:k]


def as_pairs(values):
    """Real parts and sizes of the imaginary parts (a conjugate pair cut by `k` may
    contribute either member), in order."""
    order = np.lexsort((np.abs(values.imag), -values.real))
    return np.stack([values.real[order], np.abs(values.imag[order])], axis=1)


def check(matrix, k, krylov=20):
    values, vectors, products = leading(matrix, k, krylov)
    scale = np.linalg.norm(matrix, 2)
    tol = 1e-8 * scale
    np.testing.assert_allclose(as_pairs(values), as_pairs(reference(matrix, k)), atol=tol)
    # each a unit eigenvector of its eigenvalue
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=0), 1.0, atol=1e-6)
    residuals = np.linalg.norm(matrix @ vectors - vectors * values, axis=0)
    assert np.all(residuals <= 10 * tol), residuals
    return products


def test_nonsymmetric_with_complex_pairs():
    rng = np.random.default_rng(1)
    matrix = rng.normal(size=(N, N)) / np.sqrt(N) - 0.5 * np.eye(N)
    assert np.iscomplexobj(reference(matrix, 4)) and np.any(reference(matrix, 4).imag != 0)
    check(matrix, 4)


def test_stiff_spectrum_with_the_leading_eigenvalue_near_zero():
    """Rates from 1e-3 to 30 and a cluster at -1000 (as the ET's manifold coordinates
    pin the directions off the manifold), not quite normal: the leading eigenvalue sits
    at 1e-3 of the operator's scale, yet the residual test is relative to the operator."""
    rng = np.random.default_rng(2)
    rates = -np.logspace(-3, 1.5, N)
    rates[-10:] = -1000.0
    q, _ = np.linalg.qr(rng.normal(size=(N, N)))
    matrix = q @ np.diag(rates) @ q.T + 1e-3 * rng.normal(size=(N, N))
    check(matrix, 3)


def test_a_repeated_leading_eigenvalue_is_found_twice():
    """A diagonal operator with a double leading eigenvalue: its Krylov space from one
    start vector is invariant after three products and holds one copy of 0.3; the random
    vector that continues the decomposition after that breakdown finds the second."""
    matrix = np.diag(np.r_[0.3, 0.3, -0.5, -np.ones(N - 3)])
    check(matrix, 3)


def test_a_state_smaller_than_the_krylov_space():
    rng = np.random.default_rng(3)
    check(rng.normal(size=(6, 6)), 2)
    # transcritical beside three stable directions at p = -1: eigenvalues -1, -1, -2, -3.
    # With 3 Krylov vectors the breakdown falls on the last step, so the decomposition
    # looks converged with one copy of -1: only the restart that explores the fresh
    # direction finds the second.
    check(np.diag([-1.0, -1.0, -2.0, -3.0]), 2)
    # a complex pair where the restart would cut (eigenvalues 1, -1 +- 2i, -4; three
    # Krylov vectors): the restart keeps fewer vectors than wanted rather than split it
    q, _ = np.linalg.qr(rng.normal(size=(4, 4)))
    block = np.array([[1.0, 0, 0, 0], [0, -1.0, 2.0, 0], [0, -2.0, -1.0, 0], [0, 0, 0, -4.0]])
    check(q @ block @ q.T, 2)


def test_float32():
    """In float32 (tolerance 1e-5 of the operator's norm, as continuation uses there)
    the same eigenvalues to float32's accuracy."""
    rng = np.random.default_rng(4)
    matrix = rng.normal(size=(N, N)) / np.sqrt(N) - 0.5 * np.eye(N)
    values, vectors, _ = leading(matrix, 3, dtype=jnp.float32)
    scale = np.linalg.norm(matrix, 2)
    np.testing.assert_allclose(as_pairs(values), as_pairs(reference(matrix, 3)), atol=1e-4 * scale)
    residuals = np.linalg.norm(matrix @ vectors - vectors * values, axis=0)
    assert np.all(residuals <= 1e-3 * scale), residuals


def test_a_zero_operator_and_bad_k_are_refused():
    with pytest.raises(eigen.EigenNotConvergedError, match="operator is zero"):
        leading(np.zeros((N, N)), 2)
    with pytest.raises(ValueError, match="k must be between 1 and 19"):
        leading(np.eye(N), 20)
    with pytest.raises(ValueError, match="start must be a finite vector"):
        eigen.leading_eigenpairs(lambda *a: a[:2], jnp.zeros(N), 2)
