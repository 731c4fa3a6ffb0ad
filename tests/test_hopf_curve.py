"""Hopf points followed in a second parameter (`analysis.hopf_continuation`), checked on
fields whose Hopf curves and codimension-two points are known in closed form: the
Bogdanov-Takens normal form (its Hopf curve, first Lyapunov coefficient by Kuznetsov's
planar formula worked by hand, and the point where it meets the fold curve), the Bautin
normal form seen through a nonlinear change of coordinates (`l1` and `l2` scale with
the linear part only), a fold beside a rotating plane (zero-Hopf) and two rotating
planes in skewed coordinates (double Hopf)."""

import json
import pathlib

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import run_page_example
from et_ode import analysis

PAGE = pathlib.Path(__file__).parents[1] / "docs" / "how-to" / "landscape.md"


def _set_q(args, q):
    return {**args, "q": q}


def test_the_pages_bogdanov_takens_normal_form():
    """The landscape page's example run as written (its printed lines are the page's):
    `x' = y, y' = p + a x + x^2 + x y` has its Hopf curve at `p = 0`, `x = 0` for
    `a < 0` with `omega^2 = -a`, and there (Kuznetsov's planar formula in the
    coordinates `(x, -y / omega)`, unit eigenvector) `l1 = 1 / (2 omega^3 (1 + omega^2))`
    (1e-7 relative); the curve meets the fold curve `p = a^2 / 4` at the
    Bogdanov-Takens point `a = p = 0` (1e-9) with `a = b = 1`, and goes on as a neutral
    saddle (`kappa = -a < 0`, no frequency, no `l1`). A Hopf curve started at the fold
    curve's Bogdanov-Takens point retraces the Hopf side, and a fold curve started at
    the Hopf curve's the fold curve."""
    namespace, out, printed = run_page_example(PAGE, "analysis.hopf_continuation(")
    assert out == printed
    curve = namespace["hopf_curve"]
    a, kappa = curve["q"], curve["kappa"]
    np.testing.assert_allclose(curve["p"], 0.0, atol=1e-9)
    np.testing.assert_allclose(curve["x"], 0.0, atol=1e-9)
    np.testing.assert_allclose(kappa, -a, atol=1e-9)
    hopf = a < -1e-6
    omega = np.sqrt(-a[hopf])
    np.testing.assert_allclose(curve["frequency"][hopf], omega, rtol=1e-9)
    # (1e-7: near the Bogdanov-Takens point l1 grows as omega^-3, and an error of tol
    # in kappa moves it by about 2e-9 relative at omega = 0.15)
    np.testing.assert_allclose(
        curve["first_lyapunov"][hopf], 1 / (2 * omega**3 * (1 + omega**2)), rtol=1e-7
    )
    saddle = a > 1e-6
    assert saddle.sum() >= 3 and curve["q"][-1] == pytest.approx(0.5, abs=0.06)
    assert np.all(np.isnan(curve["frequency"][saddle]))
    assert np.all(np.isnan(curve["first_lyapunov"][saddle]))
    for found in (curve, namespace["fold_curve"]):
        (point,) = found["codim2"]
        assert point["kind"] == "bogdanov_takens" and point["located"]
        assert (point["q"], point["p"]) == pytest.approx((0.0, 0.0), abs=1e-9)
        assert (point["a"], point["b"]) == pytest.approx((1.0, 1.0), abs=1e-8)
        np.testing.assert_allclose(point["eigenvalues"], 0.0, atol=1e-6)
    # from the fold curve's Bogdanov-Takens point (kappa = 0) back along the Hopf side
    back = analysis.hopf_continuation(
        namespace["bogdanov_takens"],
        namespace["fold_curve"]["codim2"][0],
        0.0,
        second=namespace["set_a"],
        q_span=(-0.5, 0.0),
        args=0.0,
        ds=0.05,
        direction=-1,
    )
    assert back["stop_reason"] == "p_span" and back["codim2"] == []
    np.testing.assert_allclose(back["p"], 0.0, atol=1e-9)
    np.testing.assert_allclose(back["kappa"], -back["q"], atol=1e-9)
    assert back["kappa"][0] == pytest.approx(0.0, abs=1e-9) and np.all(back["kappa"][1:] > 0)
    # and from the Hopf curve's Bogdanov-Takens point, the fold curve p = a^2 / 4
    fold = analysis.fold_continuation(
        namespace["bogdanov_takens"],
        curve["codim2"][0],
        0.0,
        second=namespace["set_a"],
        q_span=(0.0, 0.4),
        args=0.0,
        ds=0.05,
    )
    assert fold["stop_reason"] == "p_span" and fold["codim2"] == []
    np.testing.assert_allclose(fold["p"], fold["q"] ** 2 / 4, atol=1e-9)


# The Bautin normal form `z' = (p + i omega(q)) z + q z |z|^2 + S z |z|^4` (`z = x + i
# y`) beside a stable direction `w' = -0.7 w`, seen through the nonlinear coordinates
# `X = M T2(T1(x, y, w))` (`T1`, `T2` quadratic, identity linear part): its Hopf curve is
# `p = 0`, `X = 0`; with the unit eigenvector `q = M (1, -i, 0) / (sqrt 2 sigma)`,
# `sigma = |M (1, -i, 0)| / sqrt 2`, the normal form's `c1 = 2 q`, `c2 = 4 S` (in `z /
# sqrt 2`) scale to `c1 / sigma^2`, `c2 / sigma^4`.
SKEW = np.array([[1.0, 0.4, -0.3], [0.2, 0.9, 0.5], [-0.1, 0.3, 1.2]])
SKEW_INVERSE = np.linalg.inv(SKEW)  # a constant: derivatives through a solve compile slowly
FIFTH = 0.8


def _bautin_map(u):
    x, y, w = u
    w = w + 0.7 * x**2 - 0.4 * x * y + 0.3 * y**2
    x, y = x + 0.5 * w**2, y - 0.8 * w**2 + 0.3 * x * w
    return jnp.asarray(SKEW) @ jnp.stack([x, y, w])


def _bautin_inverse(X):
    x, y, w = jnp.asarray(SKEW_INVERSE) @ X
    x = x - 0.5 * w**2
    y = y + 0.8 * w**2 - 0.3 * x * w
    return jnp.stack([x, y, w - (0.7 * x**2 - 0.4 * x * y + 0.3 * y**2)])


def bautin(X, p, args):
    """The normal form (real and imaginary parts of `z'`) seen through the map."""
    u = _bautin_inverse(X)
    x, y, w = u
    q, r2 = args["q"], x**2 + y**2
    omega, radial = 1 + q / 2, p + q * r2 + FIFTH * r2**2
    du = jnp.stack([radial * x - omega * y, omega * x + radial * y, -0.7 * w])
    return jax.jvp(_bautin_map, (u,), (du,))[1]


def test_a_bautin_point_in_nonlinear_coordinates():
    """Through the coordinates above (the map's inverse checked to 1e-15): the curve
    `p = 0`, `X = 0` (1e-12), `omega = 1 + q / 2`, `l1 = 2 q / (sigma^2 omega)` along it
    (1e-9), the Bautin point at `q = 0` (1e-9) with `l2 = 4 S / sigma^4` (1e-8: the
    fifth derivatives of the field, through both nonlinear maps); the curve's start from
    a Hopf record written by hand in JSON."""
    u = jnp.array([0.1, -0.2, 0.3])
    np.testing.assert_allclose(_bautin_inverse(_bautin_map(u)), u, atol=1e-15)
    hopf = json.loads('{"kind": "hopf", "x": [0.0, 0.0, 0.0], "p": 0.0}')  # written by hand
    curve = analysis.hopf_continuation(
        bautin, hopf, -0.4, second=_set_q, q_span=(-0.4, 0.3), args={"q": -0.4}, ds=0.1
    )
    assert curve["stop_reason"] == "p_span"
    sigma = np.linalg.norm(SKEW @ np.array([1, -1j, 0])) / np.sqrt(2)
    q, omega = curve["q"], 1 + curve["q"] / 2
    np.testing.assert_allclose(curve["p"], 0.0, atol=1e-12)
    np.testing.assert_allclose(curve["x"], 0.0, atol=1e-12)
    np.testing.assert_allclose(curve["frequency"], omega, atol=1e-12)
    np.testing.assert_allclose(curve["first_lyapunov"], 2 * q / (sigma**2 * omega), atol=1e-9)
    (point,) = curve["codim2"]
    assert point["kind"] == "bautin" and point["located"]
    assert (point["q"], point["p"]) == pytest.approx((0.0, 0.0), abs=1e-9)
    assert point["frequency"] == pytest.approx(1.0, abs=1e-9)
    assert point["second_lyapunov_coefficient"] == pytest.approx(4 * FIFTH / sigma**4, rel=1e-8)
    assert abs(point["normal_form"]["l1"]) < 1e-9


def fold_and_rotation(u, p, args):
    """`x' = p - x^2 + (y^2 + z^2) / 2` beside a plane turning at `1.5 + 0.4 x` and
    growing at `q + x`: steady states `x = +-sqrt(p)`, a Hopf curve `q = -x`, i.e. `p =
    q^2`, which crosses the fold curve `p = 0` at a zero-Hopf point at `q = 0`. In `w0 =
    -x` (signed so that `G200 > 0`) and `w1 = (y + i z) / sqrt 2` (the unit eigenvector
    `(0, 1, -i) / sqrt 2`) its normal form has `G200 = 2`, `G011 = -1` and `G110 = -(1
    + 0.4 i)`: `s = -1`, `theta = -1`."""
    x, y, z = u
    growth, omega, r2 = args["q"] + x, 1.5 + 0.4 * x, y**2 + z**2
    return jnp.stack(
        [
            p - x**2 + 0.5 * r2,
            growth * y - omega * z - y * r2,
            omega * y + growth * z - z * r2,
        ]
    )


def test_a_zero_hopf_point_where_the_hopf_curve_crosses_a_fold():
    """The curve `p = q^2` with `x = (-q, 0, 0)` and frequency `1.5 - 0.4 q` (1e-9) from
    `q = -1` to `0.6`, through the zero-Hopf point at `q = 0` (1e-9) with frequency 1.5,
    eigenvalues `0, +-1.5 i` and the normal form above (1e-9); from the zero-Hopf point
    the curve is followed back. Before it, a Bautin point where the plane's coupling to
    `x` turns the Hopf point subcritical: on the curve `x* = -q`, and `x` slaved to
    `r^2 = y^2 + z^2` on the centre manifold, `x = x* + a1 r^2 + a2 r^4` with `a1 = 1 /
    (4 x*)`, `a2 = -(3 a1^2 - 2 a1) / (2 x*)` (its invariance, worked by hand), so `r' =
    r ((a1 - 1) r^2 + a2 r^4)`: `l1 = 2 (a1 - 1) / omega` along the curve (1e-9; `r^2 =
    2 |w1|^2`), zero at `x* = 1/4` (`q = -1/4`, `p = 1/16`, 1e-9), where `a2 = -2` gives
    `c2 = -8`, `l2 = -8 / 1.6 = -5` (1e-8); no Bautin point where `l1` passes through
    infinity at the zero-Hopf point."""
    args = {"q": -1.0}
    branch = analysis.continuation(
        fold_and_rotation,
        jnp.array([1.2, 0.0, 0.0]),
        1.44,
        p_span=(0.5, 1.44),
        args=args,
        ds=0.1,
        direction=-1,
    )
    (hopf,) = [b for b in branch["bifurcations"] if b["kind"] == "hopf"]
    curve = analysis.hopf_continuation(
        fold_and_rotation, hopf, -1.0, second=_set_q, q_span=(-1.0, 0.6), args=args, ds=0.1
    )
    q = curve["q"]
    np.testing.assert_allclose(curve["p"], q**2, atol=1e-9)
    np.testing.assert_allclose(curve["x"][:, 0], -q, atol=1e-9)
    np.testing.assert_allclose(curve["frequency"], 1.5 - 0.4 * q, atol=1e-9)
    away = np.abs(q) > 0.05  # l1 passes through infinity at the zero-Hopf point
    x_star = -q[away]
    np.testing.assert_allclose(
        curve["first_lyapunov"][away], 2 * (1 / (4 * x_star) - 1) / (1.5 + 0.4 * x_star), rtol=1e-9
    )
    bautin, point = curve["codim2"]
    assert bautin["kind"] == "bautin" and bautin["located"]
    assert (bautin["q"], bautin["p"]) == pytest.approx((-0.25, 0.0625), abs=1e-9)
    assert bautin["second_lyapunov_coefficient"] == pytest.approx(-5.0, rel=1e-8)
    assert point["kind"] == "zero_hopf" and point["located"]
    assert (point["q"], point["p"]) == pytest.approx((0.0, 0.0), abs=1e-9)
    assert point["frequency"] == pytest.approx(1.5, abs=1e-9)
    values = point["eigenvalues"][np.argsort(point["eigenvalues"].imag)]  # not by rounding
    np.testing.assert_allclose(values, [-1.5j, 0.0, 1.5j], atol=1e-8)
    normal_form = point["normal_form"]
    assert normal_form["G200"] == pytest.approx(2.0, abs=1e-9)
    assert normal_form["G011"] == pytest.approx(-1.0, abs=1e-9)
    assert normal_form["G110"] == pytest.approx(-1 - 0.4j, abs=1e-9)
    assert (normal_form["s"], normal_form["theta"]) == pytest.approx((-1.0, -1.0), abs=1e-9)
    # the zero-Hopf point (kind as a fold curve's) starts the curve again, down in q
    back = analysis.hopf_continuation(
        fold_and_rotation,
        point,
        0.0,
        second=_set_q,
        q_span=(-0.5, 0.0),
        args=args,
        ds=0.1,
        direction=-1,
    )
    (again,) = back["codim2"]  # the Bautin point, met from the other side
    assert back["stop_reason"] == "p_span" and again["kind"] == "bautin"
    assert again["q"] == pytest.approx(-0.25, abs=1e-9)
    np.testing.assert_allclose(back["p"], back["q"] ** 2, atol=1e-9)


SKEW4 = np.array(
    [[1.0, 0.3, -0.2, 0.1], [0.1, 1.1, 0.4, 0.0], [0.0, -0.3, 0.9, 0.2], [0.2, 0.1, 0.0, 1.0]]
)


SKEW4_INVERSE = np.linalg.inv(SKEW4)


def two_planes(X, p, args):
    """Two planes turning at 1 and 2.3, growing at `p` and `q + p / 2`, with cubic
    terms and a quadratic coupling, in the skewed coordinates `X = SKEW4 u`: the first
    plane's Hopf curve is `p = 0`, on which the second pair crosses at `q = 0`."""
    a, b, c, d = jnp.asarray(SKEW4_INVERSE) @ X
    r1, r2, m2 = a * a + b * b, c * c + d * d, args["q"] + 0.5 * p
    du = jnp.stack(
        [
            p * a - b - a * r1 + 0.3 * a * r2,
            a + p * b - b * r1,
            m2 * c - 2.3 * d - c * r2 + a * b,
            2.3 * c + m2 * d - d * r2,
        ]
    )
    return jnp.asarray(SKEW4) @ du


def test_a_double_hopf_point_in_skewed_coordinates():
    """The curve `p = 0`, `X = 0` (1e-12) and the double-Hopf point at `q = 0` (1e-9)
    with frequencies 1 and 2.3 (1e-9); from it, the other pair's curve `q = -p / 2`."""
    args = {"q": -0.4}
    hopf = {"kind": "hopf", "x": np.zeros(4), "p": 0.0}
    curve = analysis.hopf_continuation(
        two_planes, hopf, -0.4, second=_set_q, q_span=(-0.4, 0.3), args=args, ds=0.1
    )
    np.testing.assert_allclose(curve["p"], 0.0, atol=1e-12)
    np.testing.assert_allclose(curve["x"], 0.0, atol=1e-12)
    (point,) = curve["codim2"]
    assert point["kind"] == "double_hopf" and point["located"]
    assert (point["q"], point["p"]) == pytest.approx((0.0, 0.0), abs=1e-9)
    assert point["frequencies"] == pytest.approx((1.0, 2.3), abs=1e-9)
    # the other pair's Hopf curve through the point: q = -p / 2
    other = analysis.hopf_continuation(
        two_planes, point, 0.0, second=_set_q, q_span=(-0.2, 0.2), args=args, ds=0.1
    )
    np.testing.assert_allclose(other["q"], -other["p"] / 2, atol=1e-9)
    np.testing.assert_allclose(other["frequency"], 2.3, atol=1e-9)
    assert len(other["q"]) >= 3 and other["codim2"] == []


def circle(u, p, args):
    """A plane turning at `1 + 0.3 q` and growing at `1 - p^2 - q^2`: its Hopf curve is
    the unit circle in `(p, q)`, a closed curve."""
    x, y = u
    growth, omega, r2 = 1 - p**2 - args["q"] ** 2, 1 + 0.3 * args["q"], x * x + y * y
    return jnp.stack([growth * x - omega * y - x * r2, omega * x + growth * y - y * r2])


def test_a_closed_hopf_curve_is_followed_once_round():
    """The unit circle from `(p, q) = (1, 0)`, through both turns in `q`, stops
    `"closed"` after one lap (here the last step passes the start, or with other steps
    continuation's own rule stops short of it and the start closes the loop): every
    point on it (1e-9), its angles covering the circle once, `omega = 1 + 0.3 q`, and
    `l1 = -2 / omega` (the planar formula: `c1 = -2` for the cubic `-z |z|^2` with the
    unit eigenvector)."""
    hopf = {"kind": "hopf", "x": np.zeros(2), "p": 1.0}
    for ds_max in (0.3, 0.2):
        curve = analysis.hopf_continuation(
            circle,
            hopf,
            0.0,
            second=_set_q,
            q_span=(-2.0, 2.0),
            args={"q": 0.0},
            ds=0.2,
            ds_max=ds_max,
        )
        assert curve["stop_reason"] == "closed" and curve["codim2"] == []
        p, q = curve["p"], curve["q"]
        np.testing.assert_allclose(p**2 + q**2, 1.0, atol=1e-9)
        turned = np.unwrap(np.arctan2(q, p))
        assert 2 * np.pi - 1e-9 <= abs(turned[-1] - turned[0]) < 2 * np.pi + 0.3
        np.testing.assert_allclose(curve["frequency"], 1 + 0.3 * q, atol=1e-9)
        np.testing.assert_allclose(curve["first_lyapunov"], -2 / (1 + 0.3 * q), rtol=1e-9)


def test_refusals():
    """What is not a Hopf point of this field at `q0`, or cannot be followed, is refused
    with what to change."""
    args = {"q": -0.4}
    hopf = {"kind": "hopf", "x": np.zeros(4), "p": 0.0}
    follow = lambda record, q0=-0.4, **kw: analysis.hopf_continuation(  # noqa: E731
        kw.pop("field", two_planes),
        record,
        q0,
        second=kw.pop("second", _set_q),
        q_span=kw.pop("q_span", (-0.4, 0.3)),
        args=args,
        **kw,
    )
    with pytest.raises(ValueError, match="'hopf' record"):
        follow({**hopf, "kind": "fold"})
    with pytest.raises(ValueError, match="no 'x'"):
        follow({"kind": "hopf", "p": 0.0})
    with pytest.raises(ValueError, match="NaN or inf"):
        follow({**hopf, "p": float("nan")})
    with pytest.raises(ValueError, match="holds q0"):
        follow(hopf, q_span=(0.0, 0.3))
    with pytest.raises(ValueError, match="max_points"):
        follow(hopf, max_points=1)
    with pytest.raises(TypeError, match="second"):
        follow(hopf, second="q")
    with pytest.raises(ValueError, match="not a steady state"):
        follow({**hopf, "x": np.ones(4)})
    with pytest.raises(ValueError, match="no pair of eigenvalues on the imaginary axis"):
        follow({**hopf, "p": 0.1, "x": np.zeros(4)})
    with pytest.raises(ValueError, match="no double zero eigenvalue"):
        follow({**hopf, "kind": "bogdanov_takens"})
    with pytest.raises(ValueError, match=r"returned shape \(3,\) for a state of shape \(4,\)"):
        follow(hopf, field=lambda x, p, args: x[:3])
    with pytest.raises(ValueError, match="tol must be positive"):
        follow(hopf, tol=-1.0)
    with pytest.raises(ValueError, match="max_newton must be an integer >= 1"):
        follow(hopf, max_newton=0)
    with pytest.raises(ValueError, match="energy model"):
        follow(hopf, field=Quadratic())


class Quadratic(eqx.Module):
    """The energy `|x|^2 / 2` as an energy model: its flow has no Hopf point."""

    def energy(self, x, args=None):
        return 0.5 * jnp.sum(x**2)

    def residual(self, x, args=None):
        return x

    def vector_field(self, t, x, args=None, flow="native"):
        return -x
