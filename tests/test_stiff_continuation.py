"""Matrix-free continuation of stiff fields: a user's preconditioner in every GMRES solve
and the eigenvalues nearest zero by shift-and-invert (`preconditioner=`,
`spectrum="nearest_zero"`), against answers computed here without them: the discrete
Laplacian's eigenvalues (the branch points of the Chafee-Infante problem
`u_t = u_xx + p (u - u^3)` on its trivial branch, and that branch's spectrum), the
pitchfork's amplitude from its normal form, the Bratu fold from scipy's root finder on
the extended system (`test_continuation._bratu_fold_reference`), numpy's eigenvalues and
residuals. The grids are fine enough to be stiff (`|df/dx| = 4 / h^2 = 1.6e5`), where
plain GMRES and Arnoldi on `df/dx` crawl."""

import pathlib
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_continuation import _bratu_fold_reference, bratu

from conftest import run_page_example
from et_ode import analysis
from et_ode.analysis.landscape import _branch as branch_module
from et_ode.analysis.landscape import _branch_kernels as kernels
from et_ode.analysis.landscape import _eigen as eigen

PAGE = pathlib.Path(__file__).parents[1] / "docs" / "how-to" / "landscape.md"
N = 199  # interior grid points: h = 1/200
SMALL_N = 99  # where a dense reference runs beside (|df/dx| = 4e4: still stiff)
H = 1.0 / (N + 1)
MU = 4.0 / H**2 * np.sin(np.arange(1, 5) * np.pi * H / 2) ** 2  # -L's eigenvalues


def spacing(size: int) -> float:
    """The grid step of `size` interior points on (0, 1)."""
    return 1.0 / (size + 1)


def laplacian(u):
    padded = jnp.concatenate([jnp.zeros(1, u.dtype), u, jnp.zeros(1, u.dtype)])
    return (padded[:-2] - 2 * u + padded[2:]) / spacing(u.size) ** 2


def chafee_infante(u, p, args):
    return laplacian(u) + p * (u - u**3)


def inverse_laplacian(v, x, p, args):
    """`L^-1 v` (a tridiagonal solve): the stiff part of both fields' Jacobians."""
    h = spacing(v.size)
    off = jnp.full(v.shape, 1.0 / h**2, v.dtype)
    return jax.lax.linalg.tridiagonal_solve(
        off.at[0].set(0.0), jnp.full(v.shape, -2.0 / h**2, v.dtype), off.at[-1].set(0.0), v[:, None]
    )[:, 0]


def numpy_laplacian(u):
    pad = np.pad(u, [(0, 0)] * (u.ndim - 1) + [(1, 1)])
    return (pad[..., :-2] - 2 * u + pad[..., 2:]) / spacing(u.shape[-1]) ** 2


def test_a_preconditioned_solve_meets_its_tolerance_on_the_true_residual():
    """Right preconditioning keeps GMRES's test on the true residual: recomputed here
    with numpy's matrices, the bordered solve of the stiff field is within `rtol` of
    the right-hand side, from zero and from a guess."""
    rng = np.random.default_rng(0)
    F = kernels.FlatField(chafee_infante, (N,), inverse_laplacian)
    y = jnp.asarray(np.concatenate([0.3 * rng.normal(size=N), [12.0]]))
    border = jnp.asarray(rng.normal(size=N + 1))
    rhs = jnp.asarray(rng.normal(size=N + 1))
    x, p = np.asarray(y[:-1]), float(y[-1])
    laplace = numpy_laplacian(np.eye(N))
    df_dx = laplace + p * np.diag(1 - 3 * x**2)
    matrix = np.vstack([np.column_stack([df_dx, x - x**3]), np.asarray(border)[None]])
    for guess in (None, jnp.asarray(rng.normal(size=N + 1))):
        dy = kernels.bordered_solve(F, y, border, None, rhs, dense=False, guess=guess, rtol=1e-10)
        residual = np.linalg.norm(matrix @ np.asarray(dy) - np.asarray(rhs))
        assert residual <= 1.01e-10 * np.linalg.norm(rhs)


def test_the_eigenvalues_nearest_zero_are_numpys():
    """Shift-and-invert Arnoldi on a nonsymmetric operator with complex eigenvalues
    (matrix-free) and the dense path keep numpy's `k` eigenvalues nearest zero, with
    the counts of unstable ones among them (matrix-free) or among all (dense)."""
    n, k = 60, 6
    rng = np.random.default_rng(1)
    a = rng.normal(size=(n, n)) / np.sqrt(n) - 0.2 * np.eye(n)
    want = np.linalg.eigvals(a)
    want = want[np.argsort(np.abs(want))[:k]]
    want = want[np.argsort(-want.real, kind="stable")]
    assert np.any(np.abs(want.imag) > 0.1)  # complex pairs among them
    F = kernels.FlatField(lambda x, p, args: args @ x + p, (n,))
    y = jnp.zeros(n + 1)
    for dense in (False, True):
        values, vectors, unstable = kernels.leading_eigen(
            F, y, jnp.asarray(a), k, dense, spectrum="nearest_zero"
        )
        np.testing.assert_allclose(np.sort_complex(values), np.sort_complex(want), atol=1e-9)
        residual = a @ vectors - vectors * values
        assert np.max(np.abs(residual)) < 1e-8
        seen = want if not dense else np.linalg.eigvals(a)
        assert sum(unstable) == int(np.sum(seen.real > 0))


def test_the_pages_stiff_example_branch_points_and_pitchfork_are_the_laplacians():
    """docs/how-to/landscape.md's stiff example, run as written (199 unknowns,
    preconditioned, the eigenvalues nearest zero): its printed lines are the page's,
    and its numbers are the analytic ones. On the trivial branch `u = 0` the Jacobian
    is `L + p I`: its eigenvalues nearest zero are `p - mu_k`, and branch points lie at
    `p = mu_1, mu_2`. The branch switched onto at `mu_1` is the supercritical
    pitchfork, whose amplitude `a` (`u ~ a sin(pi x)`) obeys `a^2 = (4/3)(p - mu_1)/p`
    to first order (the discrete sums of `sin^2` and `sin^4` over the grid are exactly
    `(N + 1)/2` and `3(N + 1)/8`)."""
    namespace, out, printed = run_page_example(PAGE, "preconditioner=")
    assert out == printed
    trivial, pitchfork = namespace["trivial"], namespace["pitchfork"]
    assert namespace["n"] == N

    assert not trivial["dense"] and trivial["spectrum"] == "nearest_zero"
    expected = trivial["p"][:, None] - MU[None]
    np.testing.assert_allclose(trivial["eigenvalues"].real, expected, atol=1e-7)
    points = trivial["bifurcations"]
    assert [b["kind"] for b in points] == ["branch_point", "branch_point"]
    assert all(b["located"] and not b["eigenvalue_jump"] for b in points)
    assert [b["unstable_change"] for b in points] == [1, 1]
    np.testing.assert_allclose([b["p"] for b in points], MU[:2], atol=1e-8)
    assert trivial["metadata"]["preconditioner"] == "inverse_laplacian"
    assert trivial["unstable_left_kept"] == []

    states, ps = pitchfork["x"][1:], pitchfork["p"][1:]
    residual = numpy_laplacian(states) + ps[:, None] * (states - states**3)
    assert np.max(np.abs(residual)) < 1e-7  # zeros of the field, computed in numpy
    grid = H * np.arange(1, N + 1)
    amplitude = states @ np.sin(np.pi * grid) / np.sum(np.sin(np.pi * grid) ** 2)
    relative = (ps - MU[0]) / MU[0]
    assert np.all(relative > 0) and np.all(relative < 0.01)
    # the first-order law's error is of the order of `p - mu_1` relative (measured:
    # 0.04 times it, from 2.5e-5 at the first point)
    error = np.abs(amplitude**2 / (4 / 3 * (ps - MU[0]) / ps) - 1.0)
    assert np.all(error < 0.1 * relative)
    assert np.all(pitchfork["stable"][1:])


def test_a_stiff_bratu_fold_matrix_free():
    n = SMALL_N
    reference = _bratu_fold_reference(n)
    branch = analysis.continuation(
        bratu,
        jnp.zeros(n),
        0.0,
        args=spacing(n),
        p_span=(0.0, 4.0),
        settings=analysis.ContinuationSettings(
            ds=0.2,
            ds_max=1.0,
            max_points=14,
            k=4,
            spectrum="nearest_zero",
            newton=analysis.NewtonSettings(preconditioner=inverse_laplacian),
        ),
    )
    folds = [b for b in branch["bifurcations"] if b["kind"] == "fold"]
    assert len(folds) == 1 and folds[0]["located"]
    assert abs(folds[0]["p"] - reference) < 1e-8
    before = np.arange(len(branch["p"])) <= folds[0]["index"]
    assert branch["stable"][before].all() and not branch["stable"][~before].any()


def rates(x, p, args):
    """Independent directions `x_i' = (a_i p + b_i) x_i + q_i x_i^2 - c_i x_i^3`; `args`
    holds `(a, b, q, c)` (arrays: the cases below share one compilation)."""
    a, b, q, c = args
    return (a * p + b) * x + q * x**2 - c * x**3


# `x0`'s rate `p` stays positive and grows past the other rates (from among the
# eigenvalues nearest zero to outside them); `x1`'s rate `3 - p` crosses zero at `p = 3`
# (a transcritical point); the rest are stable.
LEAVING_AND_CROSSING = tuple(
    jnp.asarray(v)
    for v in (
        [1.0, -1.0, 0, 0, 0, 0, 0, 0],
        [0.0, 3.0, -1, -2, -3, -4, -5, -6],
        [0.0, 1.0, 0, 0, 0, 0, 0, 0],
        np.zeros(8),
    )
)
# Rates `p - d_i`, each direction its own pitchfork: with steps of 1 from `p = 0` the
# rate `p - 0.5` crosses zero in the step in which the rate `p + 1.5` leaves the three
# eigenvalues nearest zero (the counts kept are unchanged).
SHIFTED_PITCHFORKS = tuple(
    jnp.asarray(v)
    for v in (
        np.ones(8),
        -np.array([0.5, -1.5, 2.6, 3.0, 5.0, 6.0, 7.0, 8.0]),
        np.zeros(8),
        np.ones(8),
    )
)


def test_an_eigenvalue_leaving_the_kept_ones_is_no_bifurcation():
    """With the three eigenvalues nearest zero kept: `x0`'s rate `p` leaves them while
    positive (near `p = 2.5`), and the nearest zero passes from the rate -1 to `3 - p`
    at `p = 2`, each staying on its side of zero: neither is a bifurcation, the
    first is warned of. `3 - p` crosses zero at `p = 3`: one branch point, one
    unstable eigenvalue fewer past it."""
    with pytest.warns(RuntimeWarning, match="an unstable eigenvalue left the k = 3"):
        branch = analysis.continuation(
            rates,
            jnp.zeros(8),
            0.5,
            args=LEAVING_AND_CROSSING,
            p_span=(0.5, 10.0),
            settings=analysis.ContinuationSettings(
                ds=0.5,
                ds_max=2.0,
                k=3,
                spectrum="nearest_zero",
                newton=analysis.NewtonSettings(matrix_free=True),
            ),
        )
    assert branch["stop_reason"] == "p_span"
    # the unstable rate p is among the three kept at first, not at the end
    assert np.isclose(branch["eigenvalues"][0].real.max(), 0.5)
    assert branch["eigenvalues"][-1].real.max() < 10.0
    (point,) = branch["bifurcations"]
    assert point["kind"] == "branch_point" and abs(point["p"] - 3.0) < 1e-8
    assert point["unstable_change"] == -1
    (left,) = branch["unstable_left_kept"]
    assert 2.0 < left < 3.0  # the first point past 2 at which p is no longer kept


def test_a_crossing_in_the_step_an_unstable_eigenvalue_leaves_is_found():
    with pytest.warns(RuntimeWarning, match="left the k = 3 eigenvalues nearest zero"):
        branch = analysis.continuation(
            rates,
            jnp.zeros(8),
            0.0,
            args=SHIFTED_PITCHFORKS,
            p_span=(-1.0, 1.0),
            settings=analysis.ContinuationSettings(
                ds=1.0,
                ds_max=1.0,
                k=3,
                spectrum="nearest_zero",
                newton=analysis.NewtonSettings(matrix_free=True),
            ),
        )
    (point,) = branch["bifurcations"]
    assert point["kind"] == "branch_point" and abs(point["p"] - 0.5) < 1e-8
    assert point["unstable_change"] == 1 and branch["unstable_left_kept"] == [1.0]


C = 4.0  # advection speed: the Jacobian is not symmetric (left null vector ~ exp(-C x) phi)


def advected_transcritical(u, p, args):
    """`u'' + C u' + p u + u^2` (Dirichlet 0): on `u = 0` the Jacobian is the
    tridiagonal Toeplitz `T + p I` (`T`: `1/h^2 -+ C/2h` off the diagonal, `-2/h^2` on
    it), not symmetric; its left and right null vectors differ, and the quadratic term
    makes the other branch's tangent depend on the left one."""
    padded = jnp.concatenate([jnp.zeros(1, u.dtype), u, jnp.zeros(1, u.dtype)])
    h = spacing(u.size)
    diffusion = (padded[:-2] - 2 * u + padded[2:]) / h**2
    return diffusion + C * (padded[2:] - padded[:-2]) / (2 * h) + p * u + u**2


def inverse_advection_diffusion(v, u, p, args):
    """`T^-1 v`: a tridiagonal solve, not symmetric."""
    h = spacing(v.size)
    lower = jnp.full(v.shape, 1 / h**2 - C / (2 * h), v.dtype).at[0].set(0.0)
    upper = jnp.full(v.shape, 1 / h**2 + C / (2 * h), v.dtype).at[-1].set(0.0)
    diagonal = jnp.full(v.shape, -2 / h**2, v.dtype)
    return jax.lax.linalg.tridiagonal_solve(lower, diagonal, upper, v[:, None])[:, 0]


def test_a_nonsymmetric_branch_point_switches_along_the_bifurcation_equations_root():
    """The transcritical point of `advected_transcritical` lies at minus `T`'s first
    eigenvalue, `2/h^2 - 2 sqrt(1/h^4 - C^2/4h^2) cos(pi h)` (a Toeplitz matrix's
    eigenvalues). On `u = 0` the branch's tangent is `e_p`, `d^2F[e_p, (phi, 0)] = phi`
    and `d^2F[(phi, 0), (phi, 0)] = 2 phi^2`: the other branch leaves along
    `(phi, -(psi . phi^2) / (psi . phi))`, `phi` and `psi` the right and left null
    vectors of `T + p I`, computed here by numpy's SVD. The switch tangent (the left
    null vector by shift-and-invert on the transpose, the preconditioner transposed by
    JAX) is that direction."""
    n, h = SMALL_N, spacing(SMALL_N)
    exact = 2 / h**2 - 2 * np.sqrt(1 / h**4 - C**2 / (4 * h**2)) * np.cos(np.pi * h)
    branch = analysis.continuation(
        advected_transcritical,
        jnp.zeros(n),
        exact - 4.0,
        p_span=(exact - 5.0, exact + 5.0),
        settings=analysis.ContinuationSettings(
            ds=2.0,
            ds_max=4.0,
            k=4,
            max_points=4,
            spectrum="nearest_zero",
            newton=analysis.NewtonSettings(preconditioner=inverse_advection_diffusion),
        ),
    )
    (point,) = branch["bifurcations"]
    assert point["kind"] == "branch_point" and abs(point["p"] - exact) < 1e-8

    off = np.ones(n - 1)
    toeplitz = (
        np.diag(np.full(n, -2.0 / h**2))
        + np.diag((1 / h**2 + C / (2 * h)) * off, 1)
        + np.diag((1 / h**2 - C / (2 * h)) * off, -1)
    )
    u, _, vt = np.linalg.svd(toeplitz + exact * np.eye(n))
    phi, psi = vt[-1], u[:, -1]
    phi = phi * np.sign(phi[np.argmax(np.abs(phi))])
    want = np.concatenate([phi, [-(psi @ phi**2) / (psi @ phi)]])
    want = want / np.linalg.norm(want)
    # the left vector matters: with psi = phi the p component would be another
    assert abs(want[-1] - (-(phi @ phi**2) / (phi @ phi)) / np.linalg.norm(want)) > 1e-3
    np.testing.assert_allclose(point["switch_tangent"], want, atol=1e-6)


def test_steady_states_of_a_stiff_field():
    """Between `mu_1` and `mu_2` the Chafee-Infante problem has three steady states: 0
    and the pitchfork's pair `+-u`; deflated Newton, preconditioned, finds all three."""
    grid = H * np.arange(1, N + 1)
    starts = np.stack([0.8 * np.sin(np.pi * grid), np.zeros(N)])
    found = analysis.steady_states(
        chafee_infante,
        starts,
        15.0,
        settings=analysis.SteadyStateSettings(
            max_states=4,
            k=4,
            spectrum="nearest_zero",
            newton=analysis.NewtonSettings(preconditioner=inverse_laplacian, max_newton=50),
        ),
    )
    states = found["states"]
    assert not found["dense"] and len(states) == 3
    residual = numpy_laplacian(states) + 15.0 * (states - states**3)
    assert np.max(np.abs(residual)) < 1e-8
    order = np.argsort(states[:, N // 2])
    low, zero, high = states[order]
    assert np.max(np.abs(zero)) < 1e-10 and high[N // 2] > 0.5
    np.testing.assert_allclose(low, -high, atol=1e-9)
    assert sorted(found["unstable"]) == [0, 0, 1]  # the pair stable, 0 unstable


def test_the_nearest_zero_without_a_preconditioner_on_a_stiff_field_says_what_to_do():
    """Unpreconditioned, the shift-and-invert solves of the stiff field miss their
    tolerance: the eigen-solver stops at once and the error names the fix."""
    with pytest.raises(ValueError, match=r"did not reach their tolerance: give a precondit"):
        analysis.continuation(
            chafee_infante,
            jnp.zeros(N),
            5.0,
            p_span=(5.0, 6.0),
            settings=analysis.ContinuationSettings(
                spectrum="nearest_zero", k=4, newton=analysis.NewtonSettings(matrix_free=True)
            ),
        )


def test_a_preconditioner_that_would_fail_inside_jax_is_refused_first(no_runtime_types):
    """Not linear, not transposable (a callback), the wrong shape, NaN: each refused
    before any solve, naming the requirement."""
    x0 = jnp.zeros(N)
    callback = lambda v, x, p, a: jax.pure_callback(  # noqa: E731
        np.asarray, jax.ShapeDtypeStruct(v.shape, v.dtype), v
    )
    cases = [
        (lambda v, x, p, a: jnp.sin(v), "must be linear in v and transposable"),
        (callback, "must be linear in v and transposable"),
        (lambda v, x, p, a: v[:-1], r"returned shape \(198,\)"),
        (lambda v, x, p, a: v * jnp.nan, "returned NaN or inf at the start"),
    ]
    for preconditioner, message in cases:
        with pytest.raises(ValueError, match=message):
            analysis.continuation(
                chafee_infante,
                x0,
                5.0,
                p_span=(5.0, 6.0),
                settings=analysis.ContinuationSettings(
                    newton=analysis.NewtonSettings(preconditioner=preconditioner)
                ),
            )
    with pytest.raises(ValueError, match="returned NaN or inf"):
        analysis.steady_states(
            chafee_infante,
            x0[None],
            5.0,
            settings=analysis.SteadyStateSettings(
                newton=analysis.NewtonSettings(preconditioner=cases[3][0], max_newton=50)
            ),
        )


def test_a_complex_pair_cut_by_the_kept_ones_counts_twice():
    """The `k` kept can cut a conjugate pair (both members equally near zero, equally
    far right): its kept member counts for both."""
    counts = kernels.unstable_counts
    assert counts(np.array([1 + 2j, -1.0, -2.0])) == (0, 2)
    assert counts(np.array([1 - 2j, -1.0])) == (0, 2)
    assert counts(np.array([1 + 2j, 1 - 2j, 0.5, -1.0])) == (1, 2)
    assert counts(np.array([-1 + 2j, -1 - 2j, 3.0])) == (1, 0)


def test_a_switch_whose_branch_point_defeats_the_eigen_solver_starts_beside_it(monkeypatch):
    """On the branch point itself `df/dx` is singular (shift-and-invert can fail there,
    as on a Brusselator's Turing point): `switch_branch` then starts a thousandth of
    its first step along the other branch."""
    with pytest.warns(RuntimeWarning, match="left the k = 3"):  # p + 1.5, near p = 1
        trivial = analysis.continuation(
            rates,
            jnp.zeros(8),
            0.0,
            args=SHIFTED_PITCHFORKS,
            p_span=(-1.0, 1.0),
            settings=analysis.ContinuationSettings(
                ds=0.1,
                k=3,
                spectrum="nearest_zero",
                newton=analysis.NewtonSettings(matrix_free=True),
            ),
        )
    point = trivial["bifurcations"][0]
    assert abs(point["p"] - 0.5) < 1e-8
    leading_eigen, calls = branch_module.leading_eigen, []

    def fails_first(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise eigen.EigenNotConvergedError("singular")
        return leading_eigen(*args, **kwargs)

    monkeypatch.setattr(branch_module, "leading_eigen", fails_first)
    other = analysis.switch_branch(
        rates,
        point,
        args=SHIFTED_PITCHFORKS,
        p_span=(-1.0, 1.0),
        settings=analysis.ContinuationSettings(
            ds=0.05,
            max_points=3,
            k=3,
            spectrum="nearest_zero",
            newton=analysis.NewtonSettings(matrix_free=True),
        ),
    )
    np.testing.assert_allclose(other["s"][0], 5e-5)  # a thousandth of ds along
    x0, p = other["x"][:, 0], other["p"]
    assert 0 < abs(x0[0]) < 1e-3  # off the trivial branch, on the other
    # the pitchfork x0^2 = p - 0.5, to Newton's tolerance |x0 (p - 0.5 - x0^2)| <= 1e-10
    np.testing.assert_allclose(x0[1:] ** 2, p[1:] - 0.5, atol=1e-8)


def test_what_cannot_go_together_is_refused(no_runtime_types):
    x0 = jnp.zeros(N)
    with pytest.raises(ValueError, match="spectrum must be one of"):
        analysis.continuation(
            chafee_infante,
            x0,
            5.0,
            p_span=(5.0, 6.0),
            settings=analysis.ContinuationSettings(spectrum="leftmost"),
        )
    with pytest.raises(ValueError, match="preconditioner must be a function"):
        analysis.continuation(
            chafee_infante,
            x0,
            5.0,
            p_span=(5.0, 6.0),
            settings=analysis.ContinuationSettings(
                newton=analysis.NewtonSettings(preconditioner=2.0)
            ),
        )
    with pytest.raises(ValueError, match="drop one of the two"):
        analysis.continuation(
            chafee_infante,
            x0,
            5.0,
            p_span=(5.0, 6.0),
            settings=analysis.ContinuationSettings(
                newton=analysis.NewtonSettings(preconditioner=inverse_laplacian, matrix_free=False)
            ),
        )
    model = types.SimpleNamespace(vector_field=lambda *a: None)
    with pytest.raises(ValueError, match="internal manifold coordinates"):
        analysis.continuation(
            model,
            x0,
            5.0,
            p_span=(5.0, 6.0),
            settings=analysis.ContinuationSettings(
                newton=analysis.NewtonSettings(preconditioner=inverse_laplacian)
            ),
        )
    with pytest.raises(ValueError, match="drop one of the two"):
        analysis.steady_states(
            chafee_infante,
            x0[None],
            5.0,
            settings=analysis.SteadyStateSettings(
                newton=analysis.NewtonSettings(
                    preconditioner=inverse_laplacian, matrix_free=False, max_newton=50
                )
            ),
        )
