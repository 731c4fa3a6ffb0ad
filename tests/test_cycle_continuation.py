"""Periodic orbits followed in a parameter (`analysis.cycle_continuation`), checked on
fields whose cycles, periods, Floquet multipliers and bifurcations of cycles are known in
closed form: the Hopf normal form (from its Hopf point), the Bautin normal form's fold of
cycles, a period doubling built on a Moebius band (and the doubled cycles born there), a
Neimark-Sacker point built on a torus and branch points of cycles (and the other branch
through one)."""

import json
import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import run_page_example
from et_ode import analysis

OMEGA, TWIST = 2.0, 0.5


def hopf_form(x, p, args):
    """`z' = (p + i omega) z - (1 + i twist) |z|^2 z`: cycles `|z| = sqrt(p)` for
    `p > 0`, period `2 pi / (omega - twist p)`, multiplier `exp(-2 p T)`."""
    r2 = x[0] ** 2 + x[1] ** 2
    return jnp.stack(
        [
            p * x[0] - OMEGA * x[1] - (x[0] - TWIST * x[1]) * r2,
            OMEGA * x[0] + p * x[1] - (x[1] + TWIST * x[0]) * r2,
        ]
    )


def other_multiplier(result):
    """The non-trivial multiplier of each point of a branch of a planar field."""
    return np.array([m[1 - i] for m, i in zip(result["multipliers"], result["trivial_index"])])


def test_the_branch_from_a_hopf_point_is_the_normal_forms():
    """From `continuation`'s Hopf point: every cycle's radius, period and multiplier in
    closed form along the branch, all stable, no bifurcation."""
    steady = analysis.continuation(hopf_form, jnp.zeros(2), -0.5, p_span=(-0.5, 0.5), ds=0.1)
    (hopf,) = steady["bifurcations"]
    cycles = analysis.cycle_continuation(hopf_form, hopf, p_span=(-0.5, 1.0), ds=0.05, ds_max=0.2)
    p = cycles["p"]
    assert cycles["stop_reason"] == "p_span" and p[0] > 0 and p[-1] > 1.0 and len(p) > 5
    period = 2 * np.pi / (OMEGA - TWIST * p)
    np.testing.assert_allclose(cycles["period"], period, atol=1e-9)
    np.testing.assert_allclose(np.hypot(*cycles["x0"].T), np.sqrt(p), atol=1e-9)
    np.testing.assert_allclose(other_multiplier(cycles), np.exp(-2 * p * period), atol=1e-9)
    assert cycles["stable"].all() and cycles["bifurcations"] == []
    # the start's phase condition: the entry that varies most at an extremum
    j = cycles["phase_entry"]
    velocity = np.stack([np.asarray(hopf_form(x, q, None)) for x, q in zip(cycles["x0"], p)])
    np.testing.assert_allclose(velocity[:, j], 0.0, atol=1e-9)
    assert cycles["orbits"].shape == (len(p), 32, 2)
    # a Hopf record read back from JSON starts the same branch
    record = json.loads(json.dumps(analysis.to_json(hopf)))
    again = analysis.cycle_continuation(hopf_form, record, p_span=(-0.5, 0.3), ds=0.05)
    assert again["p"][0] == pytest.approx(p[0], abs=1e-12)


PAGE = pathlib.Path(__file__).parents[1] / "docs" / "how-to" / "landscape.md"


def test_the_pages_fold_of_cycles_and_the_branch_ending_at_the_hopf_point():
    """docs/how-to/landscape.md's Bautin example, run as written (its printed lines are
    the page's): `z' = (p + i omega) z + |z|^2 z - |z|^4 z`, whose cycles lie on
    `p = r^4 - r^2`, from its subcritical Hopf point: the fold of cycles at `p = -1/4`
    (1e-8) with `r^2 = 1/2` and a multiplier through +1, unstable cycles before it and
    stable ones after, every cycle's multiplier `exp(2 r^2 (1 - 2 r^2) T)` (`T = 2 pi /
    omega`); and, followed the other way from an inner cycle, the branch stops where the
    cycles shrink onto the Hopf point."""
    namespace, out, printed = run_page_example(PAGE, "bautin")
    assert out == printed
    bautin, cycles, fold = namespace["bautin"], namespace["cycles"], namespace["fold"]
    assert fold["kind"] == "fold" and fold["located"]
    assert fold["p"] == pytest.approx(-0.25, abs=1e-8)
    assert float(np.sum(fold["x0"] ** 2)) == pytest.approx(0.5, abs=1e-4)
    assert abs(fold["multiplier"] - 1.0) < 1e-4
    r2 = np.sum(cycles["x0"] ** 2, axis=1)
    period = 2 * math.pi / 2.0
    np.testing.assert_allclose(cycles["p"], r2**2 - r2, atol=1e-9)
    np.testing.assert_allclose(cycles["period"], period, atol=1e-9)
    np.testing.assert_allclose(
        other_multiplier(cycles), np.exp(2 * r2 * (1 - 2 * r2) * period), atol=1e-9
    )
    np.testing.assert_array_equal(cycles["stable"], r2 > 0.5)

    p0 = -0.1
    inner = (1 - math.sqrt(1 + 4 * p0)) / 2
    start = analysis.periodic_orbit(bautin, np.array([math.sqrt(inner), 0.0]), 3.0, p0, args=2.0)
    assert start["unstable"] == 1
    shrinking = analysis.cycle_continuation(
        bautin, start, p_span=(-0.5, 0.5), args=2.0, direction=1, ds=0.02
    )
    assert shrinking["stop_reason"] == "hopf" and -0.02 < shrinking["p"][-1] < 0


def scipy_monodromy(field, x0, period, c):
    """The flow's return error from `x0` over `period` and the monodromy matrix, by
    scipy's DOP853 on the variational equations (the Jacobian by jax, the integration
    independent of et-ode)."""
    from scipy.integrate import solve_ivp

    jacobian = jax.jit(jax.jacfwd(lambda x: field(x, c, None)))
    rhs = jax.jit(lambda x: field(x, c, None))

    def variational(t, u):
        x, m = u[:3], u[3:].reshape(3, 3)
        return np.concatenate([np.asarray(rhs(x)), (np.asarray(jacobian(x)) @ m).ravel()])

    u0 = np.concatenate([np.asarray(x0, float), np.eye(3).ravel()])
    sol = solve_ivp(variational, (0.0, period), u0, method="DOP853", rtol=1e-12, atol=1e-12)
    end = sol.y[:, -1]
    return np.max(np.abs(end[:3] - x0)), end[3:].reshape(3, 3)


def test_the_pages_rossler_period_doublings():
    """docs/how-to/landscape.md's Rossler example, run as written: its first period
    doubling at c = 2.83 and, on the doubled branch switched onto there, its second at
    c = 3.84 (published: 2.83 and 3.84 for a = b = 0.2); at each located point scipy's
    integration of the variational equations closes the orbit and finds a multiplier -1."""
    namespace, out, printed = run_page_example(PAGE, "rossler")
    assert out == printed
    first, second = namespace["first"], namespace["second"]
    assert (round(first["p"], 2), round(second["p"], 2)) == (2.83, 3.84)
    assert second["period"] == pytest.approx(2 * first["period"], rel=0.01)
    for doubling in (first, second):
        assert doubling["kind"] == "period_doubling" and doubling["located"]
        error, monodromy = scipy_monodromy(
            namespace["rossler"], doubling["x0"], doubling["period"], doubling["p"]
        )
        assert error < 1e-7
        assert np.min(np.abs(np.linalg.eigvals(monodromy) + 1.0)) < 1e-5


W = 1.0


def moebius(u, mu, args):
    """The unit circle `(cos wt, sin wt, 0)` with its transverse plane `(r - 1, z)`
    turning half a turn per period: in the turning frame `s' = mu s - s^3`, `q' = -q`.
    The circle's multipliers are `-exp(mu T)` and `-exp(-T)` (`T = 2 pi / w`): a period
    doubling at `mu = 0`, where the orbit `s = sqrt(mu)` (in the frame) of period `2 T`
    is born, with multipliers `exp(-4 mu T)` and `exp(-2 T)`. The half-turn frame's
    `e e^T` is `P`, single-valued on the circle."""
    x, y, z = u
    r = jnp.sqrt(x * x + y * y)
    c, s = x / r, y / r
    v = jnp.stack([r - 1.0, z])
    P = 0.5 * jnp.array([[1 + c, s], [s, 1 - c]])
    turn = 0.5 * W * jnp.array([-v[1], v[0]])
    dv = turn + mu * (P @ v) - (v - P @ v) - (P @ v) * (v @ P @ v)
    return jnp.stack([dv[0] * c - W * y, dv[0] * s + W * x, dv[1]])


def test_a_period_doubling_located_and_the_doubled_orbit_found():
    """The Moebius circle's period doubling at `mu = 0` located (1e-8) with a multiplier
    -1; the multiplier `-exp(mu T)` along the branch; and the orbit born there, of twice
    the period, found by `periodic_orbit` as itself (not the circle travelled twice)."""
    period = 2 * math.pi / W
    start = analysis.periodic_orbit(moebius, np.array([1.0, 0.0, 0.0]), 6.0, -0.2)
    cycles = analysis.cycle_continuation(moebius, start, p_span=(-0.2, 0.2), ds=0.05)
    (doubling,) = cycles["bifurcations"]
    assert doubling["kind"] == "period_doubling" and doubling["located"]
    assert doubling["p"] == pytest.approx(0.0, abs=1e-8)
    assert abs(doubling["multiplier"] + 1.0) < 1e-6
    np.testing.assert_allclose(cycles["period"], period, atol=1e-9)
    crossing = [
        m[np.argmin(np.abs(m + np.exp(mu * period)))]
        for m, mu in zip(cycles["multipliers"], cycles["p"])
    ]
    np.testing.assert_allclose(crossing, -np.exp(cycles["p"] * period), atol=1e-9)
    np.testing.assert_array_equal(cycles["stable"], cycles["p"] < 0)

    mu = 0.1
    doubled = analysis.periodic_orbit(
        moebius, np.array([1.0 + math.sqrt(mu), 0.0, 0.0]), 2 * period * 1.01, mu
    )
    assert doubled["period"] == pytest.approx(2 * period, abs=1e-9)
    want = [1.0, math.exp(-4 * mu * period), math.exp(-2 * period)]
    np.testing.assert_allclose(doubled["multipliers"], want, atol=1e-9)
    assert doubled["stable"] is True
    # followed back, the doubled cycles end where they were born: the circle travelled
    # twice at mu = 0
    back = analysis.cycle_continuation(moebius, doubled, p_span=(-0.2, 0.2), direction=-1, ds=0.02)
    assert back["stop_reason"] == "period_doubling"
    (birth,) = back["bifurcations"]
    assert birth["kind"] == "period_doubling" and birth["p"] == pytest.approx(0.0, abs=1e-7)
    assert birth["period"] == pytest.approx(2 * period, abs=1e-7)

    # switched onto at the period doubling itself: the doubled cycles, at distance
    # sqrt(mu) from the circle in its transverse plane, stable, for mu > 0 only
    born = analysis.cycle_continuation(moebius, doubling, p_span=(-0.2, 0.2), ds=0.02)
    assert born["switched_from"]["kind"] == "period_doubling"
    assert born["stop_reason"] == "p_span" and born["bifurcations"] == []
    mu = born["p"]
    # the first point is ds off the doubling in RMS over the 3 entries, all of it in
    # the transverse deviation sqrt(mu): mu = 3 ds^2
    assert np.all(mu > 0) and mu[0] == pytest.approx(3 * 0.02**2, rel=1e-6)
    np.testing.assert_allclose(born["period"], 2 * period, atol=1e-9)
    orbits = born["orbits"]
    transverse = np.hypot(np.hypot(orbits[..., 0], orbits[..., 1]) - 1.0, orbits[..., 2])
    np.testing.assert_allclose(
        transverse, np.sqrt(mu)[:, None] * np.ones(orbits.shape[1]), atol=1e-8
    )
    for values, m in zip(born["multipliers"], mu):
        want = [1.0, math.exp(-4 * m * period), math.exp(-2 * period)]
        np.testing.assert_allclose(values, want, atol=1e-9)
    assert born["stable"].all()
    # a record moved off its period doubling is no branch point of the doubled problem;
    # one with another period is no cycle; the doubling that ends the doubled branch
    # (multiplier +1) is not where cycles double
    with pytest.raises(ValueError, match="kernel is not two-dimensional"):
        analysis.cycle_continuation(moebius, doubling | dict(p=0.05), p_span=(-0.2, 0.2))
    with pytest.raises(ValueError, match="is not a cycle of this field"):
        analysis.cycle_continuation(moebius, doubling | dict(period=7.0), p_span=(-0.2, 0.2))
    with pytest.raises(ValueError, match="ends a branch of doubled cycles"):
        analysis.cycle_continuation(moebius, birth, p_span=(-0.2, 0.2))
    with pytest.warns(RuntimeWarning, match="was not located"):
        unlocated = doubling | dict(located=False, s_bracket=1e-3)
        analysis.cycle_continuation(moebius, unlocated, p_span=(-0.2, 0.2), max_points=2)


B = 0.7


def torus(u, mu, args):
    """The unit circle with its transverse plane `(r - 1, z)` carrying a Hopf normal form
    `w' = (mu + i b) w - |w|^2 w`: multipliers `exp((mu +- i b) T)`, a Neimark-Sacker
    point at `mu = 0` at the angle `b T`."""
    x, y, z = u
    r = jnp.sqrt(x * x + y * y)
    c, s = x / r, y / r
    rho = r - 1.0
    size = rho**2 + z**2
    drho = mu * rho - B * z - size * rho
    dz = B * rho + mu * z - size * z
    return jnp.stack([drho * c - W * y, drho * s + W * x, dz])


def test_a_neimark_sacker_point_located():
    """The torus field's Neimark-Sacker point at `mu = 0` located (1e-8), its multiplier
    `exp(i b T)` on the unit circle; the pair `exp((mu +- i b) T)` along the branch."""
    period = 2 * math.pi / W
    start = analysis.periodic_orbit(torus, np.array([1.0, 0.0, 0.0]), 6.0, -0.2)
    cycles = analysis.cycle_continuation(torus, start, p_span=(-0.2, 0.2), ds=0.05)
    (point,) = cycles["bifurcations"]
    assert point["kind"] == "neimark_sacker" and point["located"]
    assert point["p"] == pytest.approx(0.0, abs=1e-8)
    # the pair's member with a positive imaginary part
    want = np.exp(1j * B * period)
    assert point["multiplier"] == pytest.approx(want if want.imag > 0 else want.conj(), abs=1e-6)
    pair = np.exp((cycles["p"] + 1j * B) * period)
    for values, want in zip(cycles["multipliers"], pair):
        assert np.min(np.abs(values - want)) < 1e-9 and np.min(np.abs(values - want.conj())) < 1e-9
    assert cycles["unstable"].tolist() == [0 if p < 0 else 2 for p in cycles["p"]]


# the coordinates the branch-point field is seen in: a fixed, skewed linear map
SKEW = np.array(
    [[1.0, 0.3, 0.5, 0.2], [-0.2, 1.1, 0.4, 0.0], [0.3, -0.5, 0.9, 0.1], [0.1, 0.2, -0.3, 1.0]]
)


def two_branch_points(x, p, args):
    """A cycle beside two directions, seen through `SKEW`: in `z = SKEW^-1 x`, `(a, b)`
    turning at `omega + 0.4 u` with `r' = r (p + 0.5 u - r^2)`, `u' = (p - 0.3) u - u^2`
    and `v' = (p - 0.35) v - v^3`. Branch points of cycles at `p = 0.3` (transcritical:
    the cycles with `u = p - 0.3`, `r^2 = p + 0.5 u`, period `2 pi / (omega + 0.4 u)`
    cross those with `u = 0`) and `p = 0.35` (a pitchfork), where the multipliers
    `exp((p - c) T)` pass through +1."""
    a, b, u, v = jnp.linalg.solve(jnp.asarray(SKEW), x)
    growth, turning = p + 0.5 * u - (a * a + b * b), OMEGA + 0.4 * u
    z = jnp.stack(
        [
            growth * a - turning * b,
            turning * a + growth * b,
            (p - 0.3) * u - u**2,
            (p - 0.35) * v - v**3,
        ]
    )
    return jnp.asarray(SKEW) @ z


def test_two_branch_points_in_one_step_are_both_found_and_the_other_branch_followed():
    """A step over both branch points finds both (the stretch past the first located one
    is searched again), each at its `c` (1e-7) with a multiplier through +1. Started from
    the transcritical one, the other branch `u = p - 0.3` on both sides: every cycle's
    `u`, radius, period and multipliers (`exp(-(p - 0.3) T)` along `u`) in closed form,
    on it the pitchfork at 0.35 found again, and the Hopf point at 0.1 its cycles shrink
    onto. In these skewed coordinates the parent's tangent at the located branch point
    is ill-determined: the switch must not rely on it (it picks the parent among the
    bifurcation equation's two roots)."""
    guess = SKEW @ np.array([math.sqrt(0.2), 0.0, 0.0, 0.0])
    start = analysis.periodic_orbit(two_branch_points, guess, 3.1, 0.2)
    cycles = analysis.cycle_continuation(
        two_branch_points, start, p_span=(0.1, 0.6), ds=0.3, ds_max=0.3
    )
    points = [b for b in cycles["bifurcations"] if b["kind"] == "branch_point"]
    assert [b["p"] for b in points] == pytest.approx([0.3, 0.35], abs=1e-7)
    assert all(abs(b["multiplier"] - 1.0) < 1e-5 and b["located"] for b in points)
    assert cycles["unstable"][-1] == 2

    # the record's tangent as rounding can leave it where the kernel is two-dimensional:
    # turned a third of the way towards the other branch (u grows along it)
    record = dict(points[0])
    towards = np.concatenate([SKEW @ np.array([0.0, 0.0, 1.0, 0.0]), [0.0, 1.0]])
    record["tangent"] = record["tangent"] + 0.5 * towards / np.linalg.norm(towards)
    for direction in (1, -1):
        other = analysis.cycle_continuation(
            two_branch_points, record, p_span=(0.1, 0.6), direction=direction, ds=0.05
        )
        assert other["switched_from"]["kind"] == "branch_point"
        p = other["p"]
        # towards smaller p the cycles shrink (r^2 = 1.5 p - 0.15) onto a Hopf point at 0.1
        assert other["stop_reason"] == ("p_span" if direction == 1 else "hopf")
        assert len(p) >= 4 and (direction == 1 or 0.1 < p[-1] < 0.11)
        a, b, u, v = np.linalg.solve(SKEW, other["x0"].T)
        period = 2 * math.pi / (OMEGA + 0.4 * (p - 0.3))
        radius2 = p + 0.5 * (p - 0.3)
        assert np.all(direction * (p - 0.3) > 0)
        np.testing.assert_allclose(u, p - 0.3, atol=1e-9)
        np.testing.assert_allclose(v, 0.0, atol=1e-9)
        np.testing.assert_allclose(a * a + b * b, radius2, atol=1e-9)
        np.testing.assert_allclose(other["period"], period, rtol=1e-9)
        for values, mu, t, r2 in zip(other["multipliers"], p, period, radius2):
            want = [1.0, np.exp(-2 * r2 * t), np.exp(-(mu - 0.3) * t), np.exp((mu - 0.35) * t)]
            np.testing.assert_allclose(np.sort(values.real), np.sort(want), atol=1e-8)
        kinds = [(b["kind"], round(b["p"], 6)) for b in other["bifurcations"]]
        assert kinds == ([("branch_point", 0.35)] if direction == 1 else [])


class _EnergyModel:
    def vector_field(self, t, x, args):
        return -x


def test_bad_starts_and_settings_are_refused(no_runtime_types):
    circle = 0.5 * np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])
    start = dict(x0=circle[0], period=math.pi, p=0.25, multipliers=np.ones(2), x=circle)
    for kwargs, match in (
        (dict(field=_EnergyModel()), "not an energy model"),
        (dict(p_span=(1.0, -1.0)), "low < high"),
        (dict(ds=1.0, ds_max=0.1), "ds_min <= ds <= ds_max"),
        (dict(start=[1.0, 2.0]), "start must be a periodic_orbit result"),
        (dict(start=dict(kind="hopf_cycle", p=0.0)), "start must be a periodic_orbit result"),
        (dict(start=dict(kind="fold", p=0.0)), "fold record of cycle_continuation"),
        (
            dict(start=dict(kind="hopf", p=0.0, normal_form_error="a kink")),
            "no usable normal form .*a kink",
        ),
        (dict(direction=0), "direction must be"),
        (dict(p_span=(0.5, 1.0)), "outside p_span"),
        (dict(start=dict(kind="period_doubling", p=0.0)), "period_doubling record without x0"),
        (dict(start=dict(kind="neimark_sacker", p=0.0)), "a torus branches off"),
        (dict(start=dict(bifurcations=[], stop_reason="p_span")), "a whole branch"),
        (dict(phase_entry=True), "phase_entry must be a flat index"),
    ):
        settings = dict(field=hopf_form, start=start, p_span=(-1.0, 1.0)) | kwargs
        with pytest.raises((ValueError, TypeError), match=match):
            analysis.cycle_continuation(settings.pop("field"), settings.pop("start"), **settings)
