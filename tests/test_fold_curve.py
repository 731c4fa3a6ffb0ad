"""Folds followed in a second parameter (`analysis.fold_continuation`), checked on
fields whose fold curves and cusps are known in closed form (two Hopfield memories, the
mean-field magnet; fields through a Bogdanov-Takens and a zero-Hopf point, which are not
reported) and on the Bratu-Gelfand problem against scipy's root finder on the extended
system."""

import json
import pathlib

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import fsolve

from conftest import run_page_example
from et_ode import analysis

PAGE = pathlib.Path(__file__).parents[1] / "docs" / "how-to" / "landscape.md"


def test_the_pages_two_memories_fold_where_beta_exceeds_one():
    """The landscape page's example run as written (its printed lines are the page's):
    every point of the curve on `h = m - tanh(beta m)`, `beta (1 - tanh^2(beta m)) = 1`
    (1e-9); the cusp at `beta = 1`, `h = 0`, `x = 0` (1e-9) with `c = -1/3` (the cubic
    term of `tanh`) and the eigenvalues `0, -1, -1`; the cusp test function changing
    sign there and nowhere else; the fold's `h` at `beta = 2` against the closed form."""
    namespace, out, printed = run_page_example(PAGE, "analysis.fold_continuation(")
    assert out == printed
    curve, branch, xi = namespace["curve"], namespace["branch"], namespace["xi"]
    m_fold = np.arctanh(np.sqrt(0.5)) / 2.0
    h_fold = np.tanh(2 * m_fold) - m_fold
    assert sorted(b["p"] for b in branch["bifurcations"]) == pytest.approx(
        [-h_fold, h_fold], abs=1e-9
    )
    beta, m, h = curve["q"], curve["x"] @ xi, curve["p"]
    np.testing.assert_allclose(h, m - np.tanh(beta * m), atol=1e-9)
    np.testing.assert_allclose(beta * (1 - np.tanh(beta * m) ** 2), 1.0, atol=1e-9)
    # the state stays on the memories' line
    np.testing.assert_allclose(curve["x"], m[:, None] * xi[None, :], atol=1e-9)
    (cusp,) = curve["codim2"]
    assert cusp["located"] and cusp["kind"] == "cusp"
    assert (cusp["q"], cusp["p"]) == pytest.approx((1.0, 0.0), abs=1e-9)
    np.testing.assert_allclose(cusp["x"], 0.0, atol=1e-9)
    assert cusp["c"] == pytest.approx(-1 / 3, abs=1e-8)
    np.testing.assert_allclose(np.sort(cusp["eigenvalues"].real), [-1, -1, 0], atol=1e-9)
    changes = np.flatnonzero(np.diff(np.sign(curve["tests"][:, 0])))
    assert changes.tolist() == [cusp["index"]]
    assert curve["tests"].shape == (len(curve["q"]), 1)
    np.testing.assert_allclose(np.min(np.abs(curve["eigenvalues"]), axis=1), 0.0, atol=1e-8)


def bogdanov_takens(u, p, args):
    """`x' = y, y' = p + a x + x^2 + x y`: folds on `p = a^2 / 4` at `x = -a / 2`, a
    Bogdanov-Takens point at `a = p = 0` with normal form `a = b = 1`."""
    x, y = u
    return jnp.stack([y, p + args["a"] * x + x**2 + x * y])


def test_a_fold_curve_through_a_bogdanov_takens_point_reports_no_point():
    """From a fold at `a = 1` read back from JSON: every point on `p = a^2 / 4`,
    `x = (-a / 2, 0)` (1e-9), through the Bogdanov-Takens point at the origin (a double
    zero eigenvalue with a Jordan block, which no energy system has: not looked for), so
    no codimension-two point is reported; no cusp."""
    args = {"a": 1.0}
    branch = analysis.continuation(
        bogdanov_takens,
        jnp.array([-0.8, 0.0]),
        0.16,
        p_span=(-1.0, 1.0),
        args=args,
        settings=analysis.ContinuationSettings(ds=0.05),
    )
    (fold,) = branch["bifurcations"]
    assert fold["kind"] == "fold" and fold["p"] == pytest.approx(0.25, abs=1e-9)
    record = json.loads(json.dumps(analysis.to_json(fold)))
    curve = analysis.fold_continuation(
        bogdanov_takens,
        record,
        1.0,
        second=lambda a, q: {**a, "a": q},
        q_span=(-1.0, 1.5),
        args=args,
        settings=analysis.ContinuationSettings(direction=-1, ds=0.1),
    )
    assert curve["stop_reason"] == "p_span" and curve["q"][-1] < -1.0
    a = curve["q"]
    np.testing.assert_allclose(curve["p"], a**2 / 4, atol=1e-9)
    np.testing.assert_allclose(curve["x"], np.stack([-a / 2, 0 * a], axis=1), atol=1e-9)
    # passed through the double zero: the eigenvalues near the origin both near zero
    at = int(np.argmin(np.abs(a)))
    assert abs(a[at]) < 0.1 and np.all(np.abs(curve["eigenvalues"][at]) < 0.35)
    assert curve["codim2"] == []


N = 20
H = 1.0 / (N + 1)


def bratu(u, lam, args):
    """`u'' + lam exp(u / (1 + eps u)) = 0`, `u(0) = u(1) = 0`, on `N` interior points."""
    pad = jnp.concatenate([jnp.zeros(1), u, jnp.zeros(1)])
    return (pad[2:] - 2 * u + pad[:-2]) / H**2 + lam * jnp.exp(u / (1 + args["eps"] * u))


def _bratu_numpy(u, lam, eps):
    """The field, `df/du` (tridiagonal) and `f''(u)` of the source, in numpy."""
    source = np.exp(u / (1 + eps * u))
    lap = (np.diag(np.ones(N - 1), 1) - 2 * np.eye(N) + np.diag(np.ones(N - 1), -1)) / H**2
    first = source / (1 + eps * u) ** 2
    second = source * (1 / (1 + eps * u) ** 4 - 2 * eps / (1 + eps * u) ** 3)
    return lap @ u + lam * source, lap + lam * np.diag(first), second


def _fold_reference(u, lam, eps, v):
    """scipy's root of `f = 0, J v = 0, |v| = 1` in `(u, v, lambda)` at fixed `eps`."""

    def equations(z):
        u_, v_, lam_ = z[:N], z[N:-1], z[-1]
        f, jac, _ = _bratu_numpy(u_, lam_, eps)
        return np.concatenate([f, jac @ v_, [v_ @ v_ - 1]])

    z = fsolve(equations, np.concatenate([u, v, [lam]]), xtol=1e-12)
    assert np.max(np.abs(equations(z))) < 1e-8
    return z[:N], z[-1]


def _cusp_reference(u, lam, eps, v):
    """scipy's root of `f = 0, J v = 0, |v| = 1, sum f''(u) v^3 = 0` (the fold's
    quadratic coefficient; `J` is symmetric, so `v` is also the left null vector) in
    `(u, v, lambda, eps)`."""

    def equations(z):
        u_, v_, lam_, eps_ = z[:N], z[N : 2 * N], z[-2], z[-1]
        f, jac, second = _bratu_numpy(u_, lam_, eps_)
        return np.concatenate([f, jac @ v_, [v_ @ v_ - 1, np.sum(second * v_**3)]])

    z = fsolve(equations, np.concatenate([u, v, [lam, eps]]), xtol=1e-12)
    assert np.max(np.abs(equations(z))) < 1e-8
    return z[-2], z[-1]


def test_the_bratu_gelfand_cusp_against_scipy():
    """The S-shaped branch's upper fold at `eps = 0.2` followed in `eps` to where it
    meets the lower fold: at the first and last points `lambda` equals scipy's fold at
    that `eps` (1e-8), and the cusp `(lambda, eps)` equals scipy's root of the cusp's
    extended system started from the point before it (1e-8)."""
    args = {"eps": 0.2}
    branch = analysis.continuation(
        bratu,
        jnp.zeros(N),
        0.0,
        p_span=(0.0, 6.0),
        args=args,
        settings=analysis.ContinuationSettings(ds=0.2, ds_max=1.0),
    )
    folds = [b for b in branch["bifurcations"] if b["kind"] == "fold"]
    assert len(folds) == 2
    curve = analysis.fold_continuation(
        bratu,
        folds[0],
        0.2,
        second=lambda a, eps: {**a, "eps": eps},
        q_span=(0.15, 0.3),
        args=args,
        settings=analysis.ContinuationSettings(ds=0.05, ds_max=0.5, max_points=12),
    )
    for i in (0, -1):
        u, eps = curve["x"][i], curve["q"][i]
        _, jac, _ = _bratu_numpy(u, curve["p"][i], eps)
        v = np.linalg.svd(jac)[2][-1]
        u_ref, lam_ref = _fold_reference(u, curve["p"][i], eps, v)
        assert curve["p"][i] == pytest.approx(lam_ref, abs=1e-8)
        np.testing.assert_allclose(u, u_ref, atol=1e-8)
    (cusp,) = curve["codim2"]
    assert cusp["kind"] == "cusp" and cusp["located"]
    before = cusp["index"]
    u, lam, eps = curve["x"][before], curve["p"][before], curve["q"][before]
    v = np.linalg.svd(_bratu_numpy(u, lam, eps)[1])[2][-1]
    lam_ref, eps_ref = _cusp_reference(u, lam, eps, v)
    assert (cusp["p"], cusp["q"]) == pytest.approx((lam_ref, eps_ref), abs=1e-8)
    assert 0.2 < cusp["q"] < 0.3 and cusp["c"] < 0


def _two_memories(x, h, args):
    return -x + args["xi"] * (jnp.tanh(args["beta"] * jnp.dot(args["xi"], x)) + h)


def test_what_is_no_fold_of_this_field_is_refused(no_runtime_types):
    xi = np.array([0.6, 0.0, 0.8])
    args = {"xi": jnp.asarray(xi), "beta": 2.0}
    m = np.arctanh(np.sqrt(0.5)) / 2.0
    fold = dict(kind="fold", p=np.tanh(2 * m) - m, x=-m * xi)  # the fold at h > 0
    second = lambda a, q: {**a, "beta": q}  # noqa: E731
    call = dict(second=second, q_span=(0.5, 3.0), args=args)
    dense_only = analysis.ContinuationSettings(newton=analysis.NewtonSettings(matrix_free=True))
    for record, q0, kwargs, error, match in (
        (dict(fold, kind="hopf"), 2.0, {}, ValueError, "starts from a 'fold' record"),
        ({k: v for k, v in fold.items() if k != "x"}, 2.0, {}, ValueError, "has no 'x'"),
        (fold, 2.5, {}, ValueError, "is not a steady state of this field at q0 = 2.5"),
        (dict(fold, p=-0.5, x=-1.49 * xi), 2.0, {}, ValueError, "not a steady state"),
        (fold, 2.0, dict(second=2.0), TypeError, "second must be a function"),
        (dict(fold, x=np.zeros(401)), 2.0, {}, ValueError, "FOLD_DENSE_MAX = 400"),
        (fold, 2.0, dict(settings=dense_only), ValueError, "forms df/dx densely"),
        (fold, 2.0, dict(settings={"ds": 0.1}), TypeError, "an analysis.ContinuationSettings"),
    ):
        with pytest.raises(error, match=match):
            analysis.fold_continuation(_two_memories, record, q0, **(call | kwargs))
    # the settings' own checks, when they are made
    for make, match in (
        (lambda: analysis.NewtonSettings(newton_tol=-1.0), "newton_tol must be a finite number"),
        (lambda: analysis.NewtonSettings(max_newton=0), "max_newton must be an integer >= 1"),
        (lambda: analysis.ContinuationSettings(max_points=1), "max_points must be an integer >= 2"),
    ):
        with pytest.raises(ValueError, match=match):
            make()
    with pytest.raises(ValueError, match="it must return dx/dt, the state's shape"):
        analysis.fold_continuation(lambda x, p, a: x[:2], fold, 2.0, **call)
    # a steady state that is no fold: df/dx regular there
    m_start = fsolve(lambda z: -z + np.tanh(2 * z) - 0.5, -1.5)[0]
    regular = dict(fold, p=-0.5, x=m_start * xi)
    with pytest.raises(ValueError, match="is not singular"):
        analysis.fold_continuation(_two_memories, regular, 2.0, **call)
    with pytest.raises(TypeError, match="second must be a function"):
        analysis.fold_continuation(_two_memories, fold, 2.0, **(call | dict(second="beta")))
    with pytest.raises(ValueError, match="parameter= is for energy models"):
        analysis.fold_continuation(_two_memories, fold, 2.0, parameter="beta", **call)
    with pytest.raises(ValueError, match="that holds q0 = 2"):
        analysis.fold_continuation(_two_memories, fold, 2.0, **(call | dict(q_span=(3.0, 4.0))))
    with pytest.raises(ValueError, match="max_points must be an integer >= 2"):
        analysis.fold_continuation(
            _two_memories, fold, 2.0, **call, settings=analysis.ContinuationSettings(max_points=1)
        )
    with pytest.raises(ValueError, match="NaN or inf"):
        analysis.fold_continuation(_two_memories, dict(fold, p=np.nan), 2.0, **call)


class TwoMemories(eqx.Module):
    """The two memories as an energy model (flat: no manifold), with its inverse
    temperature and field as array fields."""

    xi: jax.Array
    beta: jax.Array
    h: jax.Array

    def energy(self, x, args=None):
        m = jnp.dot(self.xi, x)
        return 0.5 * jnp.sum(x**2) - jnp.log(2 * jnp.cosh(self.beta * m)) / self.beta - self.h * m

    def residual(self, x, args=None):
        return jax.grad(self.energy)(x, args)

    def vector_field(self, t, x, args=None, flow="native"):
        return -self.residual(x, args)


def _field_h(model, args, h):
    return eqx.tree_at(lambda m: m.h, model, h), args


def _inverse_temperature(model, args, beta):
    return eqx.tree_at(lambda m: m.beta, model, beta), args


def test_an_energy_models_fold_in_two_of_its_parameters():
    """The two memories as an energy model, `p` and `q` given as functions of the model:
    the same curve and cusp as the field's (closed form, 1e-9), the states in the model's
    coordinates with its residual at each point (below 1e-9)."""
    xi = jnp.array([0.6, 0.0, 0.8])
    model = TwoMemories(xi, jnp.asarray(2.0), jnp.asarray(-0.5))
    branch = analysis.continuation(
        model,
        -1.494 * xi,
        -0.5,
        p_span=(-0.5, 0.5),
        parameter=_field_h,
        settings=analysis.ContinuationSettings(ds=0.05),
    )
    fold = branch["bifurcations"][0]
    with pytest.raises(ValueError, match="needs parameter="):
        analysis.fold_continuation(model, fold, 2.0, second=_inverse_temperature, q_span=(0.5, 3))
    curve = analysis.fold_continuation(
        model,
        fold,
        2.0,
        second=_inverse_temperature,
        parameter=_field_h,
        q_span=(0.5, 3.0),
        settings=analysis.ContinuationSettings(direction=-1, ds=0.05),
    )
    beta, m = curve["q"], curve["x"] @ np.asarray(xi)
    np.testing.assert_allclose(curve["p"], m - np.tanh(beta * m), atol=1e-9)
    np.testing.assert_allclose(beta * (1 - np.tanh(beta * m) ** 2), 1.0, atol=1e-9)
    assert np.all(curve["fixed_point_residual_rms"] < 1e-9)
    np.testing.assert_array_equal(curve["y"], curve["x"])  # flat: no manifold
    (cusp,) = curve["codim2"]
    assert (cusp["q"], cusp["p"], cusp["c"]) == pytest.approx((1.0, 0.0, -1 / 3), abs=1e-8)
    assert cusp["fixed_point_residual_rms"] < 1e-9


K = 2.0


def turning(u, p, args):
    """`-grad E`, `E = -p y - q y^2 / 2 + y^4 / 4 + (z - K y^2)^2 / 2`: a gradient field
    (`df/dx` symmetric, so the start's borders are equal) whose folds lie on `q = 3 y^2`,
    `p = -2 y^3`, `z = K y^2`, with a cusp at 0 (`c = -1`); the null vector `(1, 2 K y)`
    turns by almost a right angle between `y = -1 / sqrt(3)` and `y = 0.8`."""
    y, z = u
    return jnp.stack([p + args["q"] * y - y**3 + 2 * K * y * (z - K * y**2), K * y**2 - z])


def test_a_null_vector_that_turns_past_the_borders():
    """With the start's borders kept, the bordered matrix of a gradient field turns
    singular where the null vector is at a right angle to them (the curve stalled
    there, and a bordered solution passing through infinity faked a Bogdanov-Takens
    point): the borders are re-seeded, the curve runs to `q_span` on its closed form
    (1e-9), the cusp is the only point found (`c = -1`)."""
    y0 = -1 / np.sqrt(3)
    fold = dict(kind="fold", p=-2 * y0**3, x=np.array([y0, K * y0**2]))
    curve = analysis.fold_continuation(
        turning,
        fold,
        1.0,
        second=lambda a, q: {**a, "q": q},
        q_span=(-0.5, 2.0),
        args={"q": 1.0},
        settings=analysis.ContinuationSettings(direction=-1, ds=0.05),
    )
    assert curve["stop_reason"] == "p_span" and curve["q"][-1] > 2.0
    y, z = curve["x"].T
    np.testing.assert_allclose(curve["q"], 3 * y**2, atol=1e-9)
    np.testing.assert_allclose(curve["p"], -2 * y**3, atol=1e-9)
    np.testing.assert_allclose(z, K * y**2, atol=1e-9)
    assert np.min(np.abs(curve["border_cosines"])) < 0.3  # re-seeded on the way
    (cusp,) = curve["codim2"]
    assert cusp["kind"] == "cusp" and cusp["located"]
    assert (cusp["p"], cusp["q"], cusp["c"]) == pytest.approx((0.0, 0.0, -1.0), abs=1e-9)


W = 1.5


def fold_beside_a_rotation(u, p, args):
    """`x' = p - x^2` beside the plane `(y, z)` turning at `W` and growing at `q + x`:
    folds on `p = 0`, `x = 0` for every `q`, where the other eigenvalues are
    `q +- i W`: a zero-Hopf point at `q = 0`."""
    x, y, z = u
    growth = args["q"] + x
    return jnp.stack([p - x**2, growth * y - W * z, W * y + growth * z])


def test_a_pair_crossing_on_the_fold_curve_is_no_codimension_two_point():
    """The fold curve `p = 0`, `x = 0` (1e-10), straight in `q`, across `q = 0` where the
    pair `q +- i W` crosses the imaginary axis (a zero-Hopf point, which no energy system
    has: not looked for): the eigenvalues there `0, +-i W` (1e-9), nothing reported."""
    args = {"q": -0.5}
    branch = analysis.continuation(
        fold_beside_a_rotation,
        jnp.array([-0.5, 0.0, 0.0]),
        0.25,
        p_span=(-0.5, 0.5),
        args=args,
        settings=analysis.ContinuationSettings(ds=0.05, direction=-1),
    )
    fold = next(b for b in branch["bifurcations"] if b["kind"] == "fold")
    curve = analysis.fold_continuation(
        fold_beside_a_rotation,
        fold,
        -0.5,
        second=lambda a, q: {**a, "q": q},
        q_span=(-0.5, 0.5),
        args=args,
        settings=analysis.ContinuationSettings(ds=0.1),
    )
    assert curve["stop_reason"] == "p_span" and curve["q"][-1] > 0.5
    np.testing.assert_allclose(curve["p"], 0.0, atol=1e-10)
    np.testing.assert_allclose(curve["x"], 0.0, atol=1e-10)
    np.testing.assert_allclose(
        np.sort(curve["eigenvalues"].imag, axis=1),
        np.tile([-W, 0.0, W], (len(curve["q"]), 1)),
        atol=1e-9,
    )
    crossing = np.flatnonzero(np.diff(np.sign(curve["q"])))
    assert crossing.size == 1 and curve["codim2"] == []
