"""The normal form of a Hopf point (`analysis._hopf`): the first Lyapunov coefficient
and `c1`, checked against what was derived or computed here independently of the code:
the planar formula with Taylor coefficients by an FFT, a centre-manifold reduction done
by hand, the characteristic polynomial of Lorenz's equilibria, and the cycle a scipy
integration settles on."""

import json
import pathlib

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate

from conftest import run_page_example
from et_ode import analysis


def _hopf(branch):
    (point,) = [b for b in branch["bifurcations"] if b["kind"] == "hopf"]
    assert "normal_form_error" not in point, point.get("normal_form_error")
    return point


def planar(u, p, args):
    """`x' = p x - omega y + f`, `y' = omega x + p y + g`: a Hopf point at p = 0 with
    frequency `omega`; `f`, `g` quadratic and cubic with coefficients `args`."""
    omega, quadratic, cubic = args
    x, y = u
    monomials2 = jnp.stack([x * x, x * y, y * y])
    monomials3 = jnp.stack([x**3, x * x * y, x * y * y, y**3])
    return (
        jnp.stack([p * x - omega * y, omega * x + p * y])
        + quadratic @ monomials2
        + cubic @ monomials3
    )


def _planar_formula(omega, quadratic, cubic):
    """`c1` by Kuznetsov's planar formula, `(i / 2 omega)(g20 g11 - 2|g11|^2 - |g02|^2 / 3)
    + g21 / 2`, for `z = x + i y` (so `x = z q + conj(z q)` with `q = (1, -i) / 2`), with
    the Taylor coefficients `g_kl` of `g(z, conj z) = f + i g` read off the Fourier modes
    of a sample on the unit circle."""
    theta = 2 * np.pi * np.arange(16) / 16
    x, y = np.cos(theta), np.sin(theta)
    nonlinear = quadratic @ np.stack([x * x, x * y, y * y]) + cubic @ np.stack(
        [x**3, x * x * y, x * y * y, y**3]
    )
    modes = np.fft.fft(nonlinear[0] + 1j * nonlinear[1]) / theta.size  # mode m at [m]
    g11, g20, g02, g21 = modes[0], 2 * modes[2], 2 * modes[-2], 2 * modes[1]
    return 1j / (2 * omega) * (g20 * g11 - 2 * abs(g11) ** 2 - abs(g02) ** 2 / 3) + g21 / 2


def test_quadratic_and_cubic_terms_against_the_planar_formula():
    rng = np.random.default_rng(3)
    omega = 1.7
    for _ in range(2):
        quadratic, cubic = rng.standard_normal((2, 3)), rng.standard_normal((2, 4))
        branch = analysis.continuation(
            planar,
            jnp.zeros(2),
            -0.3,
            p_span=(-0.3, 0.3),
            args=(omega, jnp.asarray(quadratic), jnp.asarray(cubic)),
            ds=0.1,
            ds_max=0.2,
        )
        point = _hopf(branch)
        form = point["normal_form"]
        # the code's q is a unit vector, twice as long squared as (1, -i) / 2: c1 doubles
        want = 2 * _planar_formula(omega, quadratic, cubic)
        assert abs(form["c1"] - want) < 1e-8 * max(1.0, abs(want))
        assert abs(form["a"] - 1.0) < 1e-8 and abs(form["frequency"] - omega) < 1e-8
        assert point["lyapunov_coefficient"] == pytest.approx(want.real / omega, rel=1e-8)
        assert point["criticality"] == ("supercritical" if want.real < 0 else "subcritical")
    # no nonlinear term: a centre, whose sign the cubic normal form cannot give
    linear = analysis.continuation(
        planar,
        jnp.zeros(2),
        -0.3,
        p_span=(-0.3, 0.3),
        args=(omega, jnp.zeros((2, 3)), jnp.zeros((2, 4))),
        ds=0.1,
        ds_max=0.2,
    )
    point = _hopf(linear)
    assert point["criticality"] == "degenerate" and point["lyapunov_coefficient"] == 0.0
    with pytest.raises(ValueError, match="degenerate"):
        analysis.hopf_cycle(point, 0.1)


def _bautin_cubic(omega, quadratic, cubic, re_c1):
    """`cubic` with its `x^3` coefficient in `f` set so that the planar formula's
    `Re(c1)` is `re_c1` (it is affine in that coefficient)."""
    at = []
    for value in (0.0, 1.0):
        trial = cubic.copy()
        trial[0, 0] = value
        at.append(_planar_formula(omega, quadratic, trial).real)
    tuned = cubic.copy()
    tuned[0, 0] = (re_c1 - at[0]) / (at[1] - at[0])
    return tuned


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
def test_a_bautin_point_is_degenerate_and_a_near_one_is_resolved(dtype):
    # quadratic and cubic terms whose contributions to Re(c1) cancel: no sign to give
    rng = np.random.default_rng(7)
    omega, quadratic = 1.3, rng.standard_normal((2, 3))
    cubic = rng.standard_normal((2, 4))
    scale = abs(_planar_formula(omega, quadratic, cubic))
    # Re(c1) exactly zero, then a thousandth of c1's size (float64) or a tenth (float32)
    small = (1e-3 if dtype == jnp.float64 else 1e-1) * scale
    for re_c1, want in ((0.0, "degenerate"), (small, "subcritical"), (-small, "supercritical")):
        args = (omega, quadratic, _bautin_cubic(omega, quadratic, cubic, re_c1))
        branch = analysis.continuation(
            planar,
            jnp.zeros(2, dtype),
            -0.3,
            p_span=(-0.3, 0.3),
            args=tuple(jnp.asarray(a, dtype) for a in args),
            ds=0.1,
            ds_max=0.2,
        )
        point = _hopf(branch)
        assert point["criticality"] == want, (re_c1, point["normal_form"])
        error = point["normal_form"]["c1_error"]
        assert abs(point["normal_form"]["c1"].real - 2 * re_c1) <= max(error, 1e-12)


def near_bogdanov_takens(u, p, omega):
    """`x' = y`, `y' = -omega^2 x + p y + x^2 - x y`: a Hopf point at p = 0 with frequency
    `omega`, a Bogdanov-Takens point as `omega -> 0`."""
    x, y = u
    return jnp.stack([y, -(omega**2) * x + p * y + x * x - x * y])


def test_near_a_bogdanov_takens_point_c1_is_taken_at_the_crossing():
    # At either end of the located bracket, Re(lambda) = alpha != 0 puts c1 off by about
    # alpha / omega^2 (8.5e-6 relative at omega = 1e-3); interpolated to alpha = 0 it is
    # exact to rounding. The reference: with X = x, Y = -y / omega the field is
    # X' = -omega Y, Y' = omega X - X^2 / omega - X Y, the planar formula's form, and
    # (x, y) = 2 Re(z q) with q = (1, i omega) / 2: c1 grows by 4 / (1 + omega^2).
    omega = 1e-3
    branch = analysis.continuation(
        near_bogdanov_takens,
        jnp.zeros(2),
        -0.3 * omega,
        p_span=(-0.3 * omega, 0.3 * omega),
        args=omega,
        ds=0.1 * omega,
        ds_max=0.2 * omega,
    )
    point = _hopf(branch)
    quadratic = np.array([[0.0, 0.0, 0.0], [-1 / omega, -1.0, 0.0]])
    want = 4 * _planar_formula(omega, quadratic, np.zeros((2, 4))) / (1 + omega**2)
    assert abs(point["normal_form"]["c1"] - want) < 1e-8 * abs(want)
    assert point["criticality"] == "supercritical"


def kinked(u, p, args):
    """`planar`'s linear part with `sign(p)` for `p`: the pair jumps from `-1 +- i` to
    `1 +- i` at p = 0, as where a ReLU memory switches."""
    x, y = u
    r2 = x * x + y * y
    return jnp.stack([jnp.sign(p) * x - y - x * r2, x + jnp.sign(p) * y - y * r2])


def double_hopf(u, p, args):
    """Two oscillators (frequencies 1 and 1.5) losing stability at the same p = 0."""
    r2 = u[0] ** 2 + u[1] ** 2 + u[2] ** 2 + u[3] ** 2
    return jnp.stack(
        [
            p * u[0] - u[1] - u[0] * r2,
            u[0] + p * u[1] - u[1] * r2,
            p * u[2] - 1.5 * u[3] + u[2] * r2,
            1.5 * u[2] + p * u[3] + u[3] * r2,
        ]
    )


@pytest.mark.parametrize(
    "field, n, why",
    [(kinked, 2, "kink"), (double_hopf, 4, "double Hopf")],
)
def test_no_normal_form_at_a_kink_or_a_double_hopf_point(field, n, why):
    branch = analysis.continuation(
        field, jnp.zeros(n), -0.5, p_span=(-0.5, 0.5), ds=0.1, ds_max=0.2
    )
    (point,) = [b for b in branch["bifurcations"] if b["kind"] == "hopf"]
    assert abs(point["p"]) < 1e-8
    assert why in point["normal_form_error"] and "criticality" not in point
    with pytest.raises(ValueError, match=why):
        analysis.hopf_cycle(point, 0.1)


def centre_manifold(x, p, args):
    """`u' = p u - v - u sum(w)`, `v' = u + p v`, `w_j' = -rate_j w_j + c_j (u^2 + v^2) +
    d_j (u^2 - v^2)`, seen in the coordinates `x = M (u, v, w)` (`_centre_manifold_c1`)."""
    skew, unskew, rates, weights, twists = args
    z = unskew @ x
    u, v, w = z[0], z[1], z[2:]
    head = jnp.stack([p * u - v - u * jnp.sum(w), u + p * v])
    tail = -rates * w + weights * (u * u + v * v) + twists * (u * u - v * v)
    return skew @ jnp.concatenate([head, tail])


def _centre_manifold_c1(rates, weights, twists):
    """`c1` of `centre_manifold` for `z = u + i v` (`q = (1, -i, 0) / 2`), by hand. At p = 0,
    `z' = i z`, so `w_j = c_j |z|^2 / rate_j + alpha_j Re(z^2) + beta_j Im(z^2)` is the
    centre manifold to second order where `-rate_j w_j + c_j |z|^2 + d_j Re(z^2)` equals
    `w_j`'s derivative along the rotation (`Re(z^2)' = -2 Im(z^2)`, `Im(z^2)' = 2 Re(z^2)`):
    `alpha_j = rate_j d_j / (4 + rate_j^2)`, `beta_j = 2 d_j / (4 + rate_j^2)`. Then
    `z' = i z - Re(z) sum(w)` has no quadratic term, and `c1` is its coefficient of
    `z^2 conj(z)`: `-c_j / (2 rate_j) - (alpha_j - i beta_j) / 4` summed."""
    alpha = rates * twists / (4 + rates**2)
    beta = 2 * twists / (4 + rates**2)
    return np.sum(-weights / (2 * rates) - (alpha - 1j * beta) / 4)


def _centre_manifold_system(n):
    rng = np.random.default_rng(5)
    skew = np.eye(n) + 0.3 * rng.standard_normal((n, n)) / np.sqrt(n)
    rates = 2.0 + 3.0 * rng.random(n - 2)
    weights, twists = rng.standard_normal((2, n - 2))
    q = np.zeros(n, complex)
    q[:2] = [0.5, -0.5j]
    # rescaled to the code's unit q: x = z (M q) + c.c., so c1 grows by 1 / |M q|^2
    want = _centre_manifold_c1(rates, weights, twists) / np.linalg.norm(skew @ q) ** 2
    args = tuple(jnp.asarray(a) for a in (skew, np.linalg.inv(skew), rates, weights, twists))

    def preconditioner(v, x, p, args):
        # the Jacobian at the steady state x = 0 (p = 0), inverted: linear in v
        skew, unskew, rates, _, _ = args
        z = unskew @ v
        return skew @ jnp.concatenate([jnp.stack([z[1], -z[0]]), -z[2:] / rates])

    return args, want, preconditioner


@pytest.mark.parametrize(
    "options",
    [
        dict(matrix_free=False),
        dict(matrix_free=True),
        dict(spectrum="nearest_zero", preconditioner=True),
    ],
    ids=["dense", "matrix-free", "nearest-zero-preconditioned"],
)
def test_centre_manifold_in_skewed_coordinates(options):
    n = 12
    args, want, preconditioner = _centre_manifold_system(n)
    if options.get("preconditioner"):
        options = dict(options, preconditioner=preconditioner)
    branch = analysis.continuation(
        centre_manifold,
        jnp.zeros(n),
        -0.4,
        p_span=(-0.4, 0.4),
        args=args,
        ds=0.1,
        ds_max=0.2,
        **options,
    )
    point = _hopf(branch)
    form = point["normal_form"]
    assert abs(point["p"]) < 1e-8
    assert abs(form["c1"] - want) < 1e-8 * abs(want)
    assert abs(form["a"] - 1.0) < 1e-8
    assert point["criticality"] == ("supercritical" if want.real < 0 else "subcritical")
    assert np.linalg.norm(form["q"]) == pytest.approx(1.0)
    np.testing.assert_allclose(form["dx_dp"], 0.0, atol=1e-10)  # x = 0 for every p


PAGE = pathlib.Path(__file__).parents[1] / "docs" / "how-to" / "landscape.md"


def test_the_pages_brusselator_cycle_against_scipy():
    """docs/how-to/landscape.md's Hopf example, run as written (its printed lines are
    the page's): the Brusselator's Hopf point at `b = 1 + a^2` (frequency `a`), where
    the trace of its 2 x 2 Jacobian, `b - 1 - a^2`, gives `Re(a) = 1/2`; its cycle (stable:
    supercritical) against the one scipy's integration settles on."""
    namespace, out, printed = run_page_example(PAGE, "analysis.hopf_cycle(")
    assert out == printed
    point, a = namespace["hopf"], 1.0
    assert "normal_form_error" not in point
    assert point["p"] == pytest.approx(1 + a**2, abs=1e-8)
    assert point["frequency"] == pytest.approx(a, abs=1e-8)
    assert point["criticality"] == "supercritical"
    # and with det = a^2 fixed the eigenvalue's imaginary part is stationary there
    assert abs(point["normal_form"]["a"] - 0.5) < 1e-8
    # the steady state (a, b / a): dx/db = (0, 1 / a)
    np.testing.assert_allclose(point["normal_form"]["dx_dp"], [0.0, 1 / a], atol=1e-8)
    with pytest.raises(ValueError, match=r"cycles at p > p\*"):
        analysis.hopf_cycle(point, 1.99)
    for delta in (0.01, 0.02):
        b = 1 + a**2 + delta
        cycle = analysis.hopf_cycle(point, b, points=64)

        def rhs(t, u, b=b):
            x, y = u
            return [a - (b + 1) * x + x * x * y, b * x - x * x * y]

        end = 12 / delta  # the cycle attracts at the rate 2 Re(a) delta = delta
        solution = scipy.integrate.solve_ivp(
            rhs,
            (0, end),
            cycle["x"][0],
            method="DOP853",
            rtol=1e-11,
            atol=1e-12,
            dense_output=True,
        )
        # the orbit, point by point from the one nearest cycle["x"][0] on: to O(delta)
        # relative to its size (to O(delta^1/2) without the second-order terms h20 and
        # h11, and not at all run backwards: conj(q) draws the same curve)
        times = np.linspace(end - 2 * cycle["period"], end - cycle["period"], 20001)
        nearest = np.argmin(np.linalg.norm(solution.sol(times).T - cycle["x"][0], axis=1))
        orbit = solution.sol(times[nearest] + cycle["t"]).T
        error = np.max(np.linalg.norm(orbit - cycle["x"], axis=1)) / cycle["radius"]
        assert error < 4 * delta  # measured 2.7 delta at delta = 0.01
        times = np.linspace(end - 5 * cycle["period"], end, 4001)
        orbit = solution.sol(times).T - [a, b / a]
        # the period from the upward crossings of x = a: to O(delta^2) (Im c1 alone
        # shifts it by 5.6e-4 relative at delta = 0.01)
        x = orbit[:, 0]
        up = np.flatnonzero((x[:-1] < 0) & (x[1:] >= 0))
        crossings = times[up] - x[up] * (times[up + 1] - times[up]) / (x[up + 1] - x[up])
        assert np.mean(np.diff(crossings)) == pytest.approx(cycle["period"], rel=0.5 * delta**2)


def lorenz(u, rho, args):
    sigma, beta = 10.0, 8.0 / 3.0
    x, y, z = u
    return jnp.stack([sigma * (y - x), x * (rho - z) - y, x * y - beta * z])


def test_lorenz_hopf_is_subcritical():
    sigma, beta, rho0 = 10.0, 8.0 / 3.0, 20.0
    c = np.sqrt(beta * (rho0 - 1))
    branch = analysis.continuation(
        lorenz, jnp.array([c, c, rho0 - 1]), rho0, p_span=(rho0, 30.0), ds=0.5, ds_max=1.0
    )
    point = _hopf(branch)
    # the equilibria C+- lose stability at rho_H = sigma (sigma + beta + 3) / (sigma - beta
    # - 1) with frequency sqrt(beta (sigma + rho_H)), subcritically (Sparrow, The Lorenz
    # Equations, 1982): the unstable cycles shrink onto C+- as rho rises to rho_H
    rho_h = sigma * (sigma + beta + 3) / (sigma - beta - 1)
    omega = np.sqrt(beta * (sigma + rho_h))
    assert point["p"] == pytest.approx(rho_h, abs=1e-8)
    assert point["frequency"] == pytest.approx(omega, abs=1e-8)
    assert point["criticality"] == "subcritical" and point["lyapunov_coefficient"] > 0
    # a = d lambda / d rho of a root of lambda^3 + (sigma + beta + 1) lambda^2 + beta (sigma
    # + rho) lambda + 2 beta sigma (rho - 1): -(dP/drho) / (dP/dlambda) at lambda = i omega
    lam = 1j * omega
    want = -(beta * lam + 2 * beta * sigma) / (
        3 * lam**2 + 2 * (sigma + beta + 1) * lam + beta * (sigma + rho_h)
    )
    assert abs(point["normal_form"]["a"] - want) < 1e-8 * abs(want)
    with pytest.raises(ValueError, match=r"cycles at p < p\*"):
        analysis.hopf_cycle(point, rho_h + 0.1)
    cycle = analysis.hopf_cycle(point, rho_h - 0.1)
    assert not cycle["stable"] and cycle["x"].shape == (64, 3)
    # the record as save_json writes it serves as well
    saved = json.loads(json.dumps(analysis.to_json(point)))
    again = analysis.hopf_cycle(saved, rho_h - 0.1, points=np.int64(64))
    np.testing.assert_allclose(again["x"], cycle["x"], rtol=1e-15, atol=1e-15)
    assert again["period"] == cycle["period"]
    with pytest.raises(ValueError, match="points must be an integer of at least 2"):
        analysis.hopf_cycle(point, rho_h - 0.1, points=1)


def test_hopf_cycle_needs_a_hopf_record_with_its_normal_form():
    with pytest.raises(ValueError, match="not a Hopf point"):
        analysis.hopf_cycle({"kind": "fold", "p": 0.0}, 0.1)
    with pytest.raises(ValueError, match="no left eigenvector"):
        analysis.hopf_cycle({"kind": "hopf", "normal_form_error": "no left eigenvector"}, 0.1)
