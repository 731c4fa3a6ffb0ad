"""Periodic orbits by shooting and their Floquet multipliers (`analysis.periodic_orbit`),
checked against answers that are analytic (normal forms: radius, period and multipliers
in closed form), published (Lorenz's shortest periodic orbit, Viswanath 2003; the Van der
Pol cycle's period) or computed here by scipy (the Van der Pol multiplier by Liouville's
formula along scipy's orbit), and against the Hopf point's normal form it starts from."""

import math
import pathlib

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate

from conftest import run_page_example
from et_ode import analysis

OMEGA, TWIST, RATE = 2.0, 0.5, 1.5


def stuart_landau(x, p, args):
    """`z' = (p + i omega) z - (1 + i twist) |z|^2 z` in `(x[0], x[1])`, with a stable
    direction `x[2]` (rate `RATE`) driven by the cycle: the cycle `|z| = sqrt(p)` with
    period `2 pi / (omega - twist p)` and multipliers `1, exp(-2 p T), exp(-RATE T)`."""
    r2 = x[0] ** 2 + x[1] ** 2
    return jnp.stack(
        [
            p * x[0] - OMEGA * x[1] - (x[0] - TWIST * x[1]) * r2,
            OMEGA * x[0] + p * x[1] - (x[1] + TWIST * x[0]) * r2,
            -RATE * x[2] + x[0] * x[1],
        ]
    )


def test_a_normal_forms_cycle_its_period_and_multipliers():
    """Radius, period and all three multipliers against their closed forms, from a guess
    20 % off in radius and 10 % in period; a guess near six times the period finds the
    same orbit with its minimal period, saying so."""
    p = 0.3
    period = 2 * math.pi / (OMEGA - TWIST * p)
    guess = np.array([1.2 * math.sqrt(p), 0.1, 0.05])
    orbit = analysis.periodic_orbit(stuart_landau, guess, 1.1 * period, p)
    assert orbit["period"] == pytest.approx(period, abs=1e-9)
    radius = np.hypot(orbit["x"][:, 0], orbit["x"][:, 1])
    np.testing.assert_allclose(radius, math.sqrt(p), atol=1e-9)
    assert orbit["x"].shape == (64, 3)
    assert orbit["t"][1] * 64 == pytest.approx(orbit["period"]) and orbit["t"][0] == 0
    # the start lies on the section through the guess, normal to the flow there
    normal = np.asarray(stuart_landau(jnp.asarray(guess), p, None))
    assert abs(normal @ (orbit["x0"] - guess)) < 1e-9 * np.linalg.norm(normal)
    want = np.array([1.0, math.exp(-2 * p * period), math.exp(-RATE * period)])
    np.testing.assert_allclose(orbit["multipliers"], want, atol=1e-9)
    assert orbit["trivial_index"] == 0 and orbit["trivial_error"] < 1e-9
    np.testing.assert_allclose(orbit["floquet_exponents"].real, [0.0, -2 * p, -RATE], atol=1e-8)
    assert orbit["stable"] is True and orbit["unstable"] == 0
    assert orbit["residual_rms"] < 1e-8 and orbit["dense"]

    # six times round: closes after 1/2, 1/3 and 1/6 of the period Newton reached
    with pytest.warns(RuntimeWarning, match="first closes after 1/6 of the period"):
        six = analysis.periodic_orbit(stuart_landau, guess, 6.03 * period, p)
    assert six["period"] == pytest.approx(period, abs=1e-9)
    np.testing.assert_allclose(six["multipliers"], want, atol=1e-9)


def bautin(x, p, args):
    """`z' = (p + i omega) z + |z|^2 z - |z|^4 z`: for `-1/4 < p < 0` two cycles,
    `|z|^2 = (1 -+ sqrt(1 + 4 p)) / 2`, the inner one unstable, with the radial
    multiplier `exp(2 r^2 (1 - 2 r^2) T)` and period `2 pi / omega`."""
    r2 = x[0] ** 2 + x[1] ** 2
    growth = p + r2 - r2**2
    return jnp.stack([growth * x[0] - OMEGA * x[1], OMEGA * x[0] + growth * x[1]])


@pytest.mark.parametrize("sign", [-1, 1])
def test_unstable_and_stable_cycles_side_by_side(sign):
    """The inner cycle of the Bautin normal form is unstable (its multiplier outside
    the unit circle), the outer one stable: both multipliers in closed form."""
    p = -0.1
    r2 = (1 + sign * math.sqrt(1 + 4 * p)) / 2
    period = 2 * math.pi / OMEGA
    orbit = analysis.periodic_orbit(bautin, np.array([1.05 * math.sqrt(r2), 0.0]), 0.95 * period, p)
    assert orbit["period"] == pytest.approx(period, abs=1e-9)
    np.testing.assert_allclose(np.hypot(*orbit["x"].T), math.sqrt(r2), atol=1e-9)
    radial = math.exp(2 * r2 * (1 - 2 * r2) * period)
    other = orbit["multipliers"][1 - orbit["trivial_index"]]
    assert other == pytest.approx(radial, rel=1e-8)
    assert orbit["stable"] is (sign > 0) and orbit["unstable"] == (sign < 0)


def beside_a_neutral_direction(x, p, args):
    """`stuart_landau`'s cycle (without its third entry) beside an unstable direction
    (rate 0.5) and a nearly neutral one (rate 1e-10): multipliers `exp(0.5 T)` and
    `1 + 2e-10 pi`, this one too near 1 to call."""
    planar = stuart_landau(jnp.concatenate([x[:2], jnp.zeros(1)]), p, None)[:2]
    return jnp.concatenate([planar, jnp.stack([0.5 * x[2], 1e-10 * x[3]])])


def test_one_multiplier_clearly_outside_decides_beside_one_too_near_to_call():
    """`stable` is False where a multiplier lies clearly outside the unit circle, even
    beside one within the margin of it, and `unstable` counts only the clear ones."""
    p = 0.3
    period = 2 * math.pi / (OMEGA - TWIST * p)
    orbit = analysis.periodic_orbit(
        beside_a_neutral_direction, np.array([0.55, 0.0, 0.0, 0.0]), period, p
    )
    np.testing.assert_allclose(
        np.abs(orbit["multipliers"][:2]), [math.exp(0.5 * period), 1.0], rtol=1e-9
    )
    assert orbit["stable"] is False and orbit["unstable"] == 1


def van_der_pol(u, mu, args):
    x, y = u
    return jnp.stack([y, mu * (1 - x**2) * y - x])


def test_van_der_pol_against_scipy_and_liouville():
    """The Van der Pol cycle at `mu = 1`: its period (6.6632868593231..., as published
    and as scipy's integration measures it between two crossings of `y = 0`), and its
    one non-trivial multiplier, which by Liouville's formula is
    `exp(integral of the divergence mu (1 - x^2) over one period)`, integrated here along
    scipy's orbit."""
    orbit = analysis.periodic_orbit(van_der_pol, np.array([2.0, 0.0]), 6.6, 1.0)
    assert orbit["period"] == pytest.approx(6.6632868593231, abs=1e-9)

    def rhs(t, u):
        return [u[1], (1 - u[0] ** 2) * u[1] - u[0]]

    def crossing(t, v):
        return v[1]

    crossing.direction = -1.0  # y turns negative where x is at its maximum
    # the divergence integrated alongside
    solution = scipy.integrate.solve_ivp(
        lambda t, v: [*rhs(t, v[:2]), 1 - v[0] ** 2],
        (0.0, 60.0),
        [2.0, 0.0, 0.0],
        method="DOP853",
        rtol=1e-12,
        atol=1e-12,
        events=crossing,
        dense_output=True,
    )
    times = solution.t_events[0][-3:]
    assert np.diff(times) == pytest.approx([orbit["period"]] * 2, abs=1e-8)
    divergence = np.diff(solution.sol(times[-2:])[2])[0]
    other = orbit["multipliers"][1 - orbit["trivial_index"]]
    assert other.real == pytest.approx(math.exp(divergence), rel=1e-6)
    assert orbit["stable"] is True
    # the start sits where the cycle crosses the guess's section, here y = 0
    assert orbit["x0"][1] == pytest.approx(0.0, abs=1e-10)
    assert abs(orbit["x0"][0]) == pytest.approx(solution.y_events[0][-1][0], abs=1e-8)


SIGMA, BETA = 10.0, 8.0 / 3.0


def lorenz(u, rho, args):
    x, y, z = u
    return jnp.stack([SIGMA * (y - x), x * (rho - z) - y, x * y - BETA * z])


def test_lorenz_shortest_periodic_orbit():
    """Lorenz's shortest periodic orbit (symbol sequence AB) at rho = 28: period
    1.5586522107162 (D. Viswanath, Nonlinearity 16, 2003: 14 digits), a saddle with one
    multiplier outside the unit circle; the multipliers' product is
    `exp(-(sigma + 1 + beta) T)` (the divergence is constant), which the smallest,
    about 1e-10, checks."""
    orbit = analysis.periodic_orbit(lorenz, np.array([-13.76, -19.58, 27.0]), 1.56, 28.0)
    assert orbit["period"] == pytest.approx(1.5586522107162, abs=1e-9)
    assert orbit["unstable"] == 1 and orbit["stable"] is False
    assert orbit["trivial_error"] < 1e-8
    log_product = np.sum(np.log(np.abs(orbit["multipliers"])))
    assert log_product == pytest.approx(-(SIGMA + 1 + BETA) * orbit["period"], abs=1e-3)


RATES = np.linspace(0.5, 5.0, 20)


def embedded(x, p, args):
    """`stuart_landau`'s cycle beside 20 stable directions driven by it (rates
    `RATES`): multipliers `1, exp(-2 p T)` and `exp(-rate T)`."""
    planar = stuart_landau(jnp.concatenate([x[:2], jnp.zeros(1)]), p, None)[:2]
    return jnp.concatenate([planar, -jnp.asarray(RATES) * x[2:] + x[0] * x[1]])


def test_matrix_free_agrees_with_the_closed_form():
    """GMRES for Newton and Krylov-Schur for the multipliers (JVPs through the solve):
    the same orbit and the four largest multipliers as in closed form."""
    p = 0.3
    period = 2 * math.pi / (OMEGA - TWIST * p)
    guess = np.full(22, 0.01)
    guess[:2] = 1.2 * math.sqrt(p), 0.1
    orbit = analysis.periodic_orbit(embedded, guess, 1.1 * period, p, matrix_free=True, k=4)
    assert not orbit["dense"] and orbit["multipliers"].shape == (4,)
    assert orbit["period"] == pytest.approx(period, abs=1e-9)
    all_of_them = np.concatenate([[1.0, math.exp(-2 * p * period)], np.exp(-RATES * period)])
    np.testing.assert_allclose(orbit["multipliers"], np.sort(all_of_them)[::-1][:4], atol=1e-9)
    assert orbit["stable"] is True


PAGE = pathlib.Path(__file__).parents[1] / "docs" / "how-to" / "landscape.md"


def test_the_pages_brusselator_orbit_from_its_hopf_point():
    """docs/how-to/landscape.md's periodic-orbit example, run as written after the Hopf
    example it goes on from (its printed lines are the page's): the exact cycle at
    `b = 2.01` against the normal form's (period within `delta^2`, the cycle's points
    within `4 delta` of its radius, as the normal form's own test measured against scipy)
    and its non-trivial multiplier against the normal form's radial rate, `exp(-2 Re(a)
    delta T)` (`Re(a) = 1/2`)."""
    namespace, _, _ = run_page_example(PAGE, "analysis.hopf_cycle(")
    namespace, out, printed = run_page_example(PAGE, "analysis.periodic_orbit(", namespace)
    assert out == printed
    cycle, orbit, delta = namespace["cycle"], namespace["orbit"], 0.01
    assert orbit["period"] == pytest.approx(cycle["period"], abs=delta**2)
    # point by point at equal times: the orbit starts where it crosses the section through
    # the normal form's first point, normal to the flow there
    assert orbit["x"].shape == cycle["x"].shape
    distance = np.linalg.norm(orbit["x"] - cycle["x"], axis=1)
    assert np.max(distance) < 4 * delta * cycle["radius"]
    other = orbit["multipliers"][1 - orbit["trivial_index"]]
    assert other.real == pytest.approx(math.exp(-delta * orbit["period"]), rel=0.02)
    assert orbit["stable"] is cycle["stable"] is True


CENTRE, BLOW_UP, UNDEFINED_AHEAD = 0.0, 1.0, 2.0


def without_orbits(x, p, args):
    """Three planar fields in one (one compilation), `p` picking: `CENTRE` the harmonic
    oscillator (a centre: orbits of period 2 pi, none isolated); `BLOW_UP` `x0' = x0^2`
    (from 1: infinite at t = 1); `UNDEFINED_AHEAD` a field that is NaN where `x[0] <
    1/2`, where the flow from `(1, 0)` goes."""
    centre = jnp.stack([x[1], -x[0]])
    blow_up = jnp.stack([x[0] ** 2, x[1] + 1.0])
    undefined = jnp.stack([-x[1] + jnp.sqrt(x[0] - 0.5), x[0]])
    return jnp.select([p == CENTRE, p == BLOW_UP], [centre, blow_up], undefined)


class _EnergyModel:
    def vector_field(self, t, x, args):
        return -x


def test_what_has_no_periodic_orbit_says_why(no_runtime_types):
    """A steady state, a field with no cycle, a centre's family of orbits, a flow that
    blows up (x' = x^2 from 1: at t = 1), a field undefined ahead of the flow, an energy
    model and bad settings: each refused, naming the cause."""
    with pytest.raises(ValueError, match="the field at x0 is zero: x0 is a steady state"):
        analysis.periodic_orbit(stuart_landau, [0.0, 0.0, 0.0], 3.0, 0.3)
    with pytest.raises(ValueError, match=r"did not converge after 3 Newton .* p = -0\.2"):
        analysis.periodic_orbit(stuart_landau, [0.3, 0.0, 0.0], 3.0, -0.2, max_newton=3)
    # the centre's orbits all have the period 2 pi, none isolated: Newton meets the
    # singular Jacobian, or the steady state on the section (rounding decides which)
    plane = np.array([1.0, 0.0])
    with pytest.raises(ValueError, match="singular|did not converge|onto a steady state"):
        analysis.periodic_orbit(without_orbits, plane, 6.0, CENTRE, max_steps=4000)
    with pytest.raises(
        ValueError, match=r"at the guess, the flow failed at t = (0\.99\d*|1) of .* blows up"
    ):
        analysis.periodic_orbit(without_orbits, plane, 2.0, BLOW_UP, max_steps=4000)
    with pytest.raises(ValueError, match="stopped at t = 1.77.* NaN or inf just ahead"):
        analysis.periodic_orbit(without_orbits, plane, 6.3, UNDEFINED_AHEAD, max_steps=4000)
    with pytest.raises(ValueError, match="not an energy model"):
        analysis.periodic_orbit(_EnergyModel(), [1.0, 0.0], 2.0, 0.0)
    for bad, match in (
        (dict(period=-1.0), "period must be a positive"),
        (dict(period=math.inf), "period must be a positive"),
        (dict(x0=[1.0]), "at least two entries"),
        (dict(x0=[math.nan, 0.0, 0.0]), "finite state"),
        (dict(points=1), "points must be an integer of at least 2"),
        (dict(solver="euler"), "solver must be one of"),
        (dict(matrix_free=True, k=2), "matrix-free, k must be below 2"),
    ):
        settings = dict(x0=[0.5, 0.0, 0.0], period=3.0) | bad
        with pytest.raises(ValueError, match=match):
            analysis.periodic_orbit(
                stuart_landau, settings.pop("x0"), settings.pop("period"), 0.3, **settings
            )


def test_float32():
    """In float32 (solve at rtol 1e-6) the cycle and its period to about 1e-5."""
    p = 0.3
    period = 2 * math.pi / (OMEGA - TWIST * p)
    orbit = analysis.periodic_orbit(
        stuart_landau, np.array([0.6, 0.1, 0.05], np.float32), 3.6, p, dtype=jnp.float32
    )
    assert orbit["x0"].dtype == np.float32
    assert orbit["period"] == pytest.approx(period, rel=1e-5)
    np.testing.assert_allclose(np.hypot(*orbit["x"][:, :2].T), math.sqrt(p), atol=1e-4)
    assert orbit["stable"] is True
