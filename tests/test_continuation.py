"""`analysis.continuation`, `switch_branch` and `steady_states` against answers computed
here without them: the normal forms of the fold (`x' = p + x^2`), the pitchfork
(`x' = p x - x^3`, the example of docs/how-to/landscape.md, run as written) and the Hopf
bifurcation (planar), whose steady states, eigenvalues
and bifurcation points are analytic; and the fold of the discretised Bratu problem
`u'' + lambda exp(u) = 0`, `u(0) = u(1) = 0`, against scipy's root finder on the
fold's extended system (`f = 0`, `df/du phi = 0`, `|phi| = 1`), started from the
continuous problem's analytic fold, whose value the discrete one approaches as h^2; and
the branch points of the discretised Chafee-Infante problem `u_t = u_xx + p (u - u^3)`,
the discrete Laplacian's eigenvalues."""

import pathlib
import re
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

import et_ode
from conftest import DIM, run_page_example
from et_ode import analysis, solvers
from et_ode.analysis.landscape import _branch as branch_module

LAMBDA_STAR = 3.513830719125162  # continuous Bratu fold (Bratu 1914; e.g. Boyd 1986)
THETA_STAR = 4.798714560451168  # theta at that fold: theta = sqrt(2 lambda) cosh(theta/4)


def fold_form(x, p, args):
    return p + x**2


def hopf_form(x, p, args):
    r2 = x[0] ** 2 + x[1] ** 2
    return jnp.stack([p * x[0] - x[1] - x[0] * r2, x[0] + p * x[1] - x[1] * r2])


def bratu(u, lam, h):
    padded = jnp.concatenate([jnp.zeros(1, u.dtype), u, jnp.zeros(1, u.dtype)])
    return (padded[:-2] - 2 * u + padded[2:]) / h**2 + lam * jnp.exp(u)


def test_fold_normal_form(monkeypatch):
    # count the corrector runs that locate the fold (Illinois' false position on the
    # tangent's p component): bisection from the step's bracket (0.2 at most) to 1e-10
    # would take 31 of them; measured 4
    located = {"runs": 0, "locating": False}
    along, bisect = branch_module._Branch.along, branch_module._bisect

    def counted_along(self, *args, **kwargs):
        located["runs"] += located["locating"]
        return along(self, *args, **kwargs)

    def counted_bisect(*args, **kwargs):
        located["locating"] = True
        try:
            return bisect(*args, **kwargs)
        finally:
            located["locating"] = False

    monkeypatch.setattr(branch_module._Branch, "along", counted_along)
    monkeypatch.setattr(branch_module, "_bisect", counted_bisect)
    branch = analysis.continuation(
        fold_form,
        jnp.array([-1.0]),
        -1.0,
        p_span=(-2.0, 1.0),
        settings=analysis.ContinuationSettings(ds=0.05, ds_max=0.2),
    )
    (fold,) = branch["bifurcations"]
    assert fold["kind"] == "fold" and fold["located"] and fold["s_bracket"] <= 1e-10
    assert abs(fold["p"]) < 1e-6 and abs(fold["x"][0]) < 1e-4
    assert 1 <= located["runs"] <= 10
    x, p = branch["x"][:, 0], branch["p"]
    assert branch["stop_reason"] == "p_span" and x[-1] > 1.0  # round the fold and back
    np.testing.assert_allclose(p, -(x**2), atol=2e-10)  # every point a steady state
    np.testing.assert_allclose(branch["eigenvalues"][:, 0].real, 2 * x, atol=1e-9)
    away = np.abs(x) > 1e-3
    assert np.array_equal(branch["stable"][away], x[away] < 0)


def circle(x, p, args):
    """Steady states on the unit circle `x^2 + p^2 = 1`: one closed branch."""
    return 1.0 - x**2 - p**2


def hairpin(x, p, args):
    """Steady states `p = 1 - (x / 0.01)^2`: a fold at `p = 1` whose two sides lie
    `0.02 sqrt(1 - p)` apart in `x`, far closer than a step."""
    return p - 1.0 + (x / 0.01) ** 2


def test_a_closed_branch_stops_where_it_began_and_a_hairpin_does_not():
    loop = analysis.continuation(
        circle,
        jnp.array([-1.0]),
        0.0,
        p_span=(-2.0, 2.0),
        settings=analysis.ContinuationSettings(ds=0.05),
    )
    assert loop["stop_reason"] == "closed"
    folds = sorted(b["p"] for b in loop["bifurcations"] if b["kind"] == "fold")
    np.testing.assert_allclose(folds, [-1.0, 1.0], atol=1e-6)
    np.testing.assert_allclose(loop["x"][:, 0] ** 2 + loop["p"] ** 2, 1.0, atol=1e-9)
    # round once: the arclength travelled is the circle's 2 pi, to within a step
    assert abs(loop["s"][-1] - 2 * np.pi) <= 0.3
    # the hairpin's far side passes the start within half a step, going the other way:
    # not closed, it goes on to the end of p_span
    pin = analysis.continuation(
        hairpin,
        jnp.array([-0.01]),
        0.0,
        p_span=(-1.0, 2.0),
        settings=analysis.ContinuationSettings(ds=0.05, ds_max=0.2),
    )
    assert pin["stop_reason"] == "p_span" and pin["p"][-1] < -1.0
    # (the premise: a point of the far side within half a step of the start, where
    # "near in the metric" alone would have stopped the branch)
    far = np.flatnonzero(pin["x"][:, 0] > 0)
    near = np.hypot(pin["x"][far, 0] - pin["x"][0, 0], pin["p"][far] - pin["p"][0])
    steps = np.diff(pin["s"])[far - 1]
    assert np.any(near[far > 3] < 0.5 * steps[far > 3]), near
    ((fold,),) = [[b for b in pin["bifurcations"] if b["kind"] == "fold"]]
    assert abs(fold["p"] - 1.0) < 1e-6
    assert np.all(pin["x"][pin["p"] < 0.99][-3:, 0] > 0)  # on the far side
    assert loop["stall"] is None and pin["stall"] is None


@pytest.mark.parametrize("floor, near", [(5.0, True), (1e6, False)])
def test_a_branch_that_stalls_says_why(monkeypatch, floor, near):
    """Where every corrector after the start ends at `floor` times `tol` (a stand-in
    for Newton stuck at a kink, or at a rounding floor, whose exact place moves with the
    CPU's rounding), the step halves below `ds_min` and `stall` says where, why, and
    whether Newton got near `tol` (`near_tol`: within `STALL_FACTOR`)."""
    correct = branch_module._Branch.correct
    tol = 1e-10

    def stuck(self, y_pred, direction):
        y, it, res = correct(self, y_pred, direction)
        return (y, it, res) if float(direction[-1]) == 1.0 else (y, it, floor * tol)

    monkeypatch.setattr(branch_module._Branch, "correct", stuck)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        branch = analysis.continuation(
            fold_form,
            jnp.array([-1.0]),
            -1.0,
            p_span=(-2.0, 1.0),
            settings=analysis.ContinuationSettings(
                ds=0.05, newton=analysis.NewtonSettings(newton_tol=tol)
            ),
        )
    assert branch["stop_reason"] == "ds_min" and len(branch["p"]) == 1
    # every step refused (0.05 halved to below ds_min = 1e-8: 23 times), all near tol
    # or none: said, with the fix, where they were
    cause = "newton_near_tol" if near else "newton"
    assert branch["refused_steps"] == {cause: 23}
    floor_warnings = [w for w in caught if "rounding floor" in str(w.message)]
    assert len(floor_warnings) == near and (
        not near or "looser newton_tol" in str(floor_warnings[0].message)
    )
    stall = branch["stall"]
    assert stall["cause"] == "newton" and stall["near_tol"] is near
    assert stall["residual_rms"] == pytest.approx(floor * tol) and stall["step"] < 2e-8
    assert abs(stall["p"] + 1.0) < 1e-7  # one tiny step past the start


PAGE = pathlib.Path(__file__).resolve().parents[1] / "docs" / "how-to" / "landscape.md"


def test_the_page_runs_the_pitchfork_branch_point_switch_and_deflation():
    """docs/how-to/landscape.md's example, run as written: its printed lines, then its
    numbers against the analytic pitchfork."""
    namespace, out, _ = run_page_example(PAGE, "def pitchfork(")
    lines = out.splitlines()
    assert re.fullmatch(r"branch_point at p = \S+ \(eigenvalue \S+\)", lines[0])
    assert lines[1] == "stable where p < 0: True"
    assert re.fullmatch(
        r"other branch: \d+ points on p = x\^2 \(largest error \S+\), "
        r"stable: True",
        lines[2],
    )
    assert lines[3:] == ["steady states at p = 1: [-1.  0.  1.]", "stable: [ True False  True]"]

    trivial, found, pitchfork = (namespace[k] for k in ("trivial", "found", "pitchfork"))
    (point,) = trivial["bifurcations"]
    assert point["kind"] == "branch_point" and abs(point["p"]) < 1e-6
    np.testing.assert_allclose(trivial["eigenvalues"][:, 0].real, trivial["p"], atol=1e-12)
    for direction in (1, -1):
        other = analysis.switch_branch(
            pitchfork,
            point,
            p_span=(-1.0, 1.0),
            settings=analysis.ContinuationSettings(direction=direction, ds=0.05, ds_max=0.2),
        )
        x, p = other["x"][1:, 0], other["p"][1:]
        assert np.all(np.sign(x) == direction) and other["stop_reason"] == "p_span"
        # the parabola p = x^2, to Newton's tolerance: |f| = |x| |p - x^2| <= 1e-10
        np.testing.assert_allclose(np.abs(x) * (p - x**2), 0.0, atol=2e-10)
        np.testing.assert_allclose(other["eigenvalues"][1:, 0].real, -2 * p, atol=1e-9)
        assert other["stable"][1:].all() and not other["bifurcations"]
    np.testing.assert_allclose(np.sort(found["states"][:, 0]), [-1.0, 0.0, 1.0], atol=1e-10)
    stable = dict(zip(np.round(found["states"][:, 0]).astype(int), found["stable"]))
    assert stable == {-1: True, 0: False, 1: True}


def test_a_hopf_point_is_located_and_reported():
    """The Hopf normal form `z' = (p + i) z - |z|^2 z`: its point at `p = 0` (1e-6) with
    frequency 1, the pair crossing to the right (`unstable_change = 2`); its normal form
    is not computed (retired with the periodic orbits: no energy system has one)."""
    branch = analysis.continuation(
        hopf_form,
        jnp.zeros(2),
        -1.0,
        p_span=(-1.0, 1.0),
        settings=analysis.ContinuationSettings(ds=0.1, ds_max=0.25),
    )
    (hopf,) = branch["bifurcations"]
    assert hopf["kind"] == "hopf" and abs(hopf["p"]) < 1e-6 and hopf["located"]
    assert abs(hopf["frequency"] - 1.0) < 1e-6 and hopf["unstable_change"] == 2
    assert not hopf["eigenvalue_jump"]
    assert not {"lyapunov_coefficient", "criticality", "normal_form"} & set(hopf)
    values = branch["eigenvalues"]
    np.testing.assert_allclose(values[:, 0], branch["p"] + 1j, atol=1e-12)
    np.testing.assert_allclose(values[:, 1], branch["p"] - 1j, atol=1e-12)


def _bratu_fold_reference(n):
    """The discrete fold by scipy's `root` on the extended system, from the continuous
    fold's analytic solution."""
    h = 1.0 / (n + 1)
    grid = h * np.arange(1, n + 1)
    guess_u = -2 * np.log(np.cosh((grid - 0.5) * THETA_STAR / 2) / np.cosh(THETA_STAR / 4))
    laplacian = (
        np.diag(-2 * np.ones(n)) + np.diag(np.ones(n - 1), 1) + np.diag(np.ones(n - 1), -1)
    ) / h**2

    def system(z):
        u, phi, lam = z[:n], z[n : 2 * n], z[-1]
        jac = laplacian + lam * np.diag(np.exp(u))
        return np.concatenate([laplacian @ u + lam * np.exp(u), jac @ phi, [phi @ phi - 1]])

    phi = np.sin(np.pi * grid)
    start = np.concatenate([guess_u, phi / np.linalg.norm(phi), [LAMBDA_STAR]])
    done = scipy.optimize.root(system, start, method="hybr", tol=1e-13)
    assert np.max(np.abs(system(done.x))) < 1e-8  # f itself is O(1 / h^2)
    return done.x[-1]


@pytest.mark.parametrize("matrix_free", [False, True])
def test_bratu_fold(matrix_free):
    n = 24
    h = 1.0 / (n + 1)
    reference = _bratu_fold_reference(n)
    # the discrete fold approaches the continuous one as h^2
    finer = _bratu_fold_reference(2 * n + 1)
    assert 3.5 < abs(reference - LAMBDA_STAR) / abs(finer - LAMBDA_STAR) < 4.5
    branch = analysis.continuation(
        bratu,
        jnp.zeros(n),
        0.0,
        args=h,
        p_span=(0.0, 4.0),
        settings=analysis.ContinuationSettings(
            ds=0.2,
            ds_max=1.0,
            max_points=40,
            k=4,
            newton=analysis.NewtonSettings(matrix_free=matrix_free),
        ),
    )
    folds = [b for b in branch["bifurcations"] if b["kind"] == "fold"]
    assert len(folds) == 1 and abs(folds[0]["p"] - reference) < 1e-6
    assert branch["dense"] is not matrix_free
    # below the fold the small solution is stable, past it the large one is not
    before = np.arange(len(branch["p"])) <= folds[0]["index"]
    assert branch["stable"][before].all() and not branch["stable"][~before].any()
    assert np.all(branch["residual_rms"] <= 1e-10)


def test_bad_settings_are_refused(no_runtime_types):
    x0 = jnp.array([-1.0])
    with pytest.raises(ValueError, match="p_span must be"):
        analysis.continuation(fold_form, x0, -1.0, p_span=(1.0, -2.0))
    with pytest.raises(ValueError, match="outside p_span"):
        analysis.continuation(fold_form, x0, 3.0, p_span=(-2.0, 1.0))
    with pytest.raises(ValueError, match="not near a steady state"):
        analysis.continuation(
            fold_form,
            jnp.array([5.0]),
            1.0,
            p_span=(-2.0, 2.0),
            settings=analysis.ContinuationSettings(newton=analysis.NewtonSettings(max_newton=3)),
        )
    with pytest.raises(ValueError, match="ds_min <= ds <= ds_max"):
        analysis.continuation(
            fold_form,
            x0,
            -1.0,
            p_span=(-2.0, 1.0),
            settings=analysis.ContinuationSettings(ds=1.0, ds_max=0.1),
        )
    with pytest.raises(TypeError, match="callable field"):
        analysis.continuation("f", x0, -1.0, p_span=(-2.0, 1.0))
    with pytest.raises(ValueError, match="needs a branch point"):
        analysis.switch_branch(fold_form, {"kind": "fold"}, p_span=(-2.0, 1.0))
    with pytest.raises(ValueError, match=r"p_span must be a pair \(low, high\) \(got 1.0\)"):
        analysis.continuation(fold_form, x0, -1.0, p_span=1.0)
    with pytest.raises(ValueError, match=r"ContinuationSettings.k must be an integer >= 1"):
        analysis.continuation(
            fold_form, x0, -1.0, p_span=(-2.0, 1.0), settings=analysis.ContinuationSettings(k=1.5)
        )
    # a field that fails when called as field(x, p, args): the call and the order named
    with pytest.raises(ValueError, match=r"calling field\(x, p, args\).*IndexError.*time first"):
        analysis.continuation(lambda t, x, args: x[0] - t, x0, -1.0, p_span=(-2.0, 1.0))
    point = {"kind": "branch_point", "switch_tangent": np.ones(2), "x": x0, "p": 0.0}
    with pytest.raises(ValueError, match=r"the branch point's\) lies outside p_span"):
        analysis.switch_branch(fold_form, point, p_span=(0.5, 1.0))
    # a field undefined past p = 0 (x = sqrt(p)): the branch ends there, saying why
    ended = analysis.continuation(
        lambda x, p, args: jnp.sqrt(p) - x,
        jnp.array([1.0]),
        1.0,
        p_span=(-1.0, 2.0),
        settings=analysis.ContinuationSettings(direction=-1),
    )
    assert ended["stop_reason"] == "ds_min" and ended["stall"]["cause"] == "nonfinite"
    assert abs(ended["stall"]["p"]) < 1e-6 and ended["p"].min() >= 0.0
    # NumPy's integers are integers
    branch = analysis.continuation(
        fold_form,
        x0,
        -1.0,
        p_span=(-2.0, -0.5),
        settings=analysis.ContinuationSettings(k=np.int64(1)),
    )
    assert branch["p"][-1] == pytest.approx(-0.5, abs=0.1)


def lorenz_steady(u, rho, args):
    sigma, beta = 10.0, 8.0 / 3.0
    x, y, z = u
    return jnp.stack([sigma * (y - x), x * (rho - z) - y, x * y - beta * z])


def test_steady_states_in_float32_and_what_they_say_when_short():
    # Lorenz at rho = 2: C+- = (+-sqrt(beta (rho - 1)), same, rho - 1) and the origin;
    # float32's default tol (1e-5) lets Newton accept them
    found = analysis.steady_states(lorenz_steady, np.array([[1.0, 1.0, 1.0]], np.float32), 2.0)
    c = np.sqrt(8.0 / 3.0)
    expected = np.array([[-c, -c, 1.0], [0.0, 0.0, 0.0], [c, c, 1.0]])
    assert found["metadata"]["tol"] == 1e-5 and not found["capped"]
    # each state found is one of the three, and C+- both are (one start need not reach
    # the origin as well)
    distance = np.abs(found["states"][:, None, :] - expected[None]).max(axis=2)
    assert np.all(distance.min(axis=1) < 1e-5) and np.all(distance[:, [0, 2]].min(axis=0) < 1e-5)
    # a cap reached is said; so is nothing found, with why
    with pytest.warns(RuntimeWarning, match="max_states = 1 states found.*raise max_states"):
        capped = analysis.steady_states(
            lorenz_steady, np.ones((1, 3)), 2.0, settings=analysis.SteadyStateSettings(max_states=1)
        )
    assert capped["capped"] and len(capped["states"]) == 1
    nowhere = lambda u, p, args: jnp.sqrt(u - 10.0)  # noqa: E731  NaN at every start below 10
    with pytest.warns(RuntimeWarning, match="no steady state found.*not finite"):
        none = analysis.steady_states(nowhere, np.ones((1, 2)), 0.0)
    assert none["states"].shape == (0, 2)


def shifted_pitchfork(x, p, args):
    """A pitchfork at `p = 0.1 + 0.2` in `x[0]` beside a stable `x[1]`: at `p0 = 0.3`
    rounding leaves `df/dx[0]` at -5.6e-17, not exactly 0."""
    return jnp.stack([(p - (0.1 + 0.2)) * x[0] - x[0] ** 3, -x[1]])


def test_a_start_far_from_or_on_a_bifurcation_is_warned_of():
    # Newton at p = 1.3 from (0.5, 0) overshoots past 0 to (-1, 0): told, and by how much
    with pytest.warns(RuntimeWarning, match=r"x0 is not a steady state .* RMS 1.06"):
        branch = analysis.continuation(
            shifted_pitchfork,
            jnp.array([0.5, 0.0]),
            1.3,
            p_span=(1.0, 1.5),
            settings=analysis.ContinuationSettings(max_points=3),
        )
    np.testing.assert_allclose(branch["x"][0], [-1.0, 0.0], atol=1e-12)
    assert branch["start_correction_rms"] == pytest.approx(1.5 / np.sqrt(2), rel=1e-10)
    # the start on the bifurcation (df/dx = diag(-5.6e-17, -1)): told
    with pytest.warns(RuntimeWarning, match=r"the start \(p0 = 0.3\) is on a bifurcation"):
        analysis.continuation(
            shifted_pitchfork,
            jnp.zeros(2),
            0.3,
            p_span=(0.0, 1.0),
            settings=analysis.ContinuationSettings(max_points=3),
        )
    # beside it, and from a steady state: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        branch = analysis.continuation(
            shifted_pitchfork,
            jnp.array([1e-9, 0.0]),
            0.25,
            p_span=(0.0, 1.0),
            settings=analysis.ContinuationSettings(max_points=3),
        )
    assert branch["start_correction_rms"] < 1e-9


def pitchfork(x, p, args):
    return p * x - x**3


def test_a_bisection_midpoint_on_the_branch_point_steps_beside_it():
    # points at p = -0.25 and 0.25 (ds 0.3, growing 1.5x): the first midpoint is the
    # branch point p = 0 itself, where there is no tangent
    branch = analysis.continuation(
        pitchfork,
        jnp.zeros(1),
        -1.0,
        p_span=(-1.0, 1.0),
        settings=analysis.ContinuationSettings(ds=0.3, ds_max=0.5),
    )
    (point,) = branch["bifurcations"]
    assert point["kind"] == "branch_point" and point["located"]
    assert abs(point["p"]) < 1e-9
    # an unlocated branch point: switching from it is warned of
    with pytest.warns(RuntimeWarning, match="was not located"):
        analysis.switch_branch(
            pitchfork,
            dict(point, located=False, s_bracket=0.5),
            p_span=(-1.0, 1.0),
            settings=analysis.ContinuationSettings(max_points=3),
        )


def pitchfork_beside_decay(u, p, args):
    """The pitchfork in `u[0]` beside three decaying entries (Arnoldi needs 4)."""
    return jnp.concatenate([pitchfork(u[:1], p, args), -u[1:]])


@pytest.mark.parametrize("matrix_free", [False, True])
def test_the_parabolas_vertex_is_a_branch_point_not_a_fold(matrix_free):
    # along p = u0^2 from (1, 1) to smaller p: p turns at the vertex, where the trivial
    # branch u0 = 0 crosses (df/dp = u0 = 0 there: in the range of df/dx)
    branch = analysis.continuation(
        pitchfork_beside_decay,
        jnp.array([1.0, 0.0, 0.0, 0.0]),
        1.0,
        p_span=(-0.5, 1.5),
        settings=analysis.ContinuationSettings(
            direction=-1,
            ds=0.1,
            ds_max=0.2,
            k=2,
            max_points=40,
            newton=analysis.NewtonSettings(matrix_free=matrix_free),
        ),
    )
    (vertex,) = branch["bifurcations"]
    # where df/dy is singular in two directions, Newton leaves an error of about
    # sqrt(tol) (tol 1e-10): the vertex is located to 1e-4 in p, not to rounding
    assert vertex["kind"] == "branch_point" and abs(vertex["p"]) < 1e-4


def stiff_fold(u, lam, args):
    """`u'' + lam (1 + u)^2 = 0`, `u(0) = u(1) = 0`, on 150 interior points: a regular
    fold of a Jacobian of norm 4/h^2 = 9e4."""
    h = 1.0 / (u.size + 1)
    padded = jnp.pad(u, 1)
    return (padded[:-2] - 2 * u + padded[2:]) / h**2 + lam * (1 + u) ** 2


def test_a_fold_of_a_stiff_jacobian_is_a_fold():
    n = 150
    branch = analysis.continuation(
        stiff_fold,
        jnp.zeros(n),
        0.0,
        p_span=(0.0, 20.0),
        settings=analysis.ContinuationSettings(
            ds=0.1,
            ds_max=0.5,
            k=2,
            max_points=12,
            newton=analysis.NewtonSettings(matrix_free=False),
        ),
    )
    fold = branch["bifurcations"][0]
    assert fold["kind"] == "fold"
    # the reference: scipy's root of the fold's extended system, f = 0, (df/du) phi = 0,
    # sum(phi) = 1, from the located point
    h = 1.0 / (n + 1)
    laplacian = (np.diag(-2.0 * np.ones(n)) + np.eye(n, k=1) + np.eye(n, k=-1)) / h**2
    jac = lambda u, lam: laplacian + 2 * lam * np.diag(1 + u)  # noqa: E731

    def extended(z):
        u, phi, lam = z[:n], z[n:-1], z[-1]
        return np.concatenate(
            [laplacian @ u + lam * (1 + u) ** 2, jac(u, lam) @ phi, [phi.sum() - 1]]
        )

    phi0 = np.linalg.eigh(jac(fold["x"], fold["p"]))[1][:, -1]
    z = scipy.optimize.fsolve(
        extended, np.concatenate([fold["x"], phi0 / phi0.sum(), [fold["p"]]]), xtol=1e-13
    )
    assert abs(fold["p"] - z[-1]) < 1e-9


def branch_and_hopf(u, p, args):
    """A branch point at p = 0 (`x`) and a Hopf point at p = 0.01 (`a`, `b`, frequency 1)."""
    x, a, b = u
    return jnp.stack([p * x - x**3, (p - 0.01) * a - b, a + (p - 0.01) * b])


def two_hopf_points(u, p, args):
    """Two oscillators (frequencies 1 and 1.5) losing stability at p = 0 and p = 0.01."""
    return jnp.stack(
        [
            p * u[0] - u[1],
            u[0] + p * u[1],
            (p - 0.01) * u[2] - 1.5 * u[3],
            1.5 * u[2] + (p - 0.01) * u[3],
        ]
    )


def two_branch_points(u, p, args):
    return jnp.stack([p * u[0] - u[0] ** 3, (p - 0.01) * u[1] - u[1] ** 3])


@pytest.mark.parametrize(
    "field, x0, expected",
    [
        (branch_and_hopf, jnp.zeros(3), [("branch_point", 0.0), ("hopf", 0.01)]),
        (two_branch_points, jnp.zeros(2), [("branch_point", 0.0), ("branch_point", 0.01)]),
        (two_hopf_points, jnp.zeros(4), [("hopf", 0.0), ("hopf", 0.01)]),
    ],
)
def test_two_bifurcations_in_one_step_are_both_found(field, x0, expected):
    # steps of 0.1 hold both: the stretch past the first one located is searched again
    branch = analysis.continuation(
        field,
        x0,
        -0.5,
        p_span=(-0.5, 0.5),
        settings=analysis.ContinuationSettings(ds=0.1, ds_max=0.1),
    )
    found = [(b["kind"], b["p"]) for b in branch["bifurcations"]]
    assert [kind for kind, _ in found] == [kind for kind, _ in expected]
    np.testing.assert_allclose([p for _, p in found], [p for _, p in expected], atol=1e-8)
    if field is branch_and_hopf:
        assert branch["bifurcations"][1]["frequency"] == pytest.approx(1.0, abs=1e-8)
    if field is two_hopf_points:
        frequencies = [b["frequency"] for b in branch["bifurcations"]]
        np.testing.assert_allclose(frequencies, [1.0, 1.5], atol=1e-8)
        assert [b["unstable_change"] for b in branch["bifurcations"]] == [2, 2]


def fold_beside_pitchfork(u, p, args):
    """A fold at p = 0 (`x' = p + x^2`) beside a pitchfork whose trivial branch loses
    stability at p = -0.01 (`y' = (p + 0.01) y - y^3`)."""
    return jnp.stack([p + u[0] ** 2, (p + 0.01) * u[1] - u[1] ** 3])


def test_a_fold_and_branch_points_in_one_step_are_all_found():
    # up the lower half of the parabola, round the fold, down the upper half: y's
    # eigenvalue p + 0.01 crosses zero at p = -0.01 on either side of the fold, all
    # three within one step of 0.1 or two
    branch = analysis.continuation(
        fold_beside_pitchfork,
        jnp.array([-1.0, 0.0]),
        -1.0,
        p_span=(-2.0, 1.0),
        settings=analysis.ContinuationSettings(ds=0.1, ds_max=0.1),
    )
    found = [(b["kind"], b["p"]) for b in branch["bifurcations"]]
    assert [kind for kind, _ in found] == ["branch_point", "fold", "branch_point"], found
    np.testing.assert_allclose([p for _, p in found], [-0.01, 0.0, -0.01], atol=1e-8)


def transcritical(x, p, args):
    return p * x - x**2


def test_transcritical_switch_follows_the_oblique_branch():
    """At a transcritical point the other branch (x = p) is not perpendicular to the
    trivial one: its tangent comes from the algebraic bifurcation equation."""
    trivial = analysis.continuation(
        transcritical,
        jnp.array([0.0]),
        -1.0,
        p_span=(-1.0, 1.0),
        settings=analysis.ContinuationSettings(ds=0.05, ds_max=0.2),
    )
    (point,) = trivial["bifurcations"]
    assert point["kind"] == "branch_point" and abs(point["p"]) < 1e-6
    assert point["located"] and not point["eigenvalue_jump"]  # a smooth crossing
    np.testing.assert_allclose(point["switch_tangent"], [2**-0.5, 2**-0.5], atol=1e-6)
    for direction in (1, -1):
        other = analysis.switch_branch(
            transcritical,
            point,
            p_span=(-1.0, 1.0),
            settings=analysis.ContinuationSettings(direction=direction, ds=0.05, ds_max=0.2),
        )
        x, p = other["x"][1:, 0], other["p"][1:]
        assert other["stop_reason"] == "p_span" and np.all(np.sign(x) == direction)
        np.testing.assert_allclose(np.abs(x) * (x - p), 0.0, atol=2e-10)  # on x = p
        np.testing.assert_array_equal(other["stable"][1:], p > 0)  # eigenvalue -p


CHAFEE_N = 12  # interior points of the Chafee-Infante grid


def chafee_infante(u, p, args):
    """`u_t = u_xx + p (u - u^3)` on (0, 1), `u(0) = u(1) = 0`, by central differences."""
    h = 1.0 / (CHAFEE_N + 1)
    padded = jnp.concatenate([jnp.zeros(1, u.dtype), u, jnp.zeros(1, u.dtype)])
    return (padded[:-2] - 2 * u + padded[2:]) / h**2 + p * (u - u**3)


def test_chafee_infante_branch_points_are_the_laplacians_eigenvalues():
    """On the trivial branch `u = 0` the Jacobian is `L + p I` (`L` the discrete
    Laplacian): an eigenvalue crosses zero, with no fold, exactly where `p` equals one
    of `-L`'s eigenvalues `mu_k = (4 / h^2) sin^2(k pi h / 2)`. The branch that
    bifurcates at `mu_1` is `L`'s first mode grown by the cubic: its states are zeros
    of the field, of one sign and symmetric about the middle, and stable (the
    supercritical pitchfork takes over the trivial branch's stability)."""
    h = 1.0 / (CHAFEE_N + 1)
    mu = 4.0 / h**2 * np.sin(np.arange(1, 3) * np.pi * h / 2) ** 2  # 9.82, 38.6
    trivial = analysis.continuation(
        chafee_infante,
        jnp.zeros(CHAFEE_N),
        1.0,
        p_span=(0.0, 45.0),
        settings=analysis.ContinuationSettings(ds=0.5, ds_max=5.0, k=4),
    )
    points = trivial["bifurcations"]
    assert [b["kind"] for b in points] == ["branch_point", "branch_point"]
    np.testing.assert_allclose([b["p"] for b in points], mu, atol=1e-6)
    np.testing.assert_array_equal(trivial["stable"], trivial["p"] < mu[0])
    other = analysis.switch_branch(
        chafee_infante,
        points[0],
        p_span=(0.0, 45.0),
        settings=analysis.ContinuationSettings(ds=0.2, ds_max=2.0, k=4),
    )
    states, ps = other["x"][1:], other["p"][1:]
    assert other["stop_reason"] == "p_span" and np.all(ps > mu[0])
    pad = np.pad(states, ((0, 0), (1, 1)))
    residual = (pad[:, :-2] - 2 * states + pad[:, 2:]) / h**2 + ps[:, None] * (states - states**3)
    assert np.max(np.abs(residual)) < 1e-8  # zeros of the field, computed here in NumPy
    np.testing.assert_allclose(states, states[:, ::-1], atol=1e-9)
    signs = np.sign(states)
    assert np.all(signs == signs[:, :1]) and np.max(np.abs(states[-1])) > 0.5
    assert np.all(other["stable"][1:])


def transcritical_among_stable(x, p, args):
    """The transcritical form in `x[0]` beside three stable directions (rates -1, -2, -3)."""
    return jnp.concatenate([p * x[:1] - x[:1] ** 2, -jnp.arange(1.0, 4.0) * x[1:]])


def test_matrix_free_branch_point_and_switch():
    """The matrix-free path (Krylov-Schur eigenvalues and left null vector, GMRES for
    Newton and tangents) locates the transcritical point and the other branch's tangent, as the
    dense path does in one dimension: `(x0, p) = (1, 1) / sqrt(2)`, zero elsewhere."""
    trivial = analysis.continuation(
        transcritical_among_stable,
        jnp.zeros(4),
        -1.0,
        p_span=(-1.0, 1.0),
        settings=analysis.ContinuationSettings(
            ds=0.05, ds_max=0.2, k=2, newton=analysis.NewtonSettings(matrix_free=True)
        ),
    )
    assert not trivial["dense"]
    (point,) = trivial["bifurcations"]
    assert point["kind"] == "branch_point" and abs(point["p"]) < 1e-6
    np.testing.assert_allclose(point["switch_tangent"], [2**-0.5, 0, 0, 0, 2**-0.5], atol=1e-6)
    # the trivial branch's two leading eigenvalues: p (from x0) and -1 (from x1), in order
    p = trivial["p"]
    want = np.stack([np.maximum(p, -1.0), np.minimum(p, -1.0)], axis=1)
    np.testing.assert_allclose(trivial["eigenvalues"], want, atol=1e-8)


def test_an_eigenvalue_that_jumps_across_zero_is_flagged():
    """`x' = sign(p) x - x^3` in two dimensions: on the branch x = 0 both eigenvalues
    jump from -1 to +1 at p = 0 (a kink of the field, as where a ReLU memory switches):
    the change of stability (by two at once) is located there, and flagged as a jump,
    not a smooth crossing."""

    def jump(x, p, args):
        return jnp.where(p < 0.0, -1.0, 1.0) * x - x**3

    branch = analysis.continuation(
        jump,
        jnp.array([0.0, 0.0]),
        -1.0,
        p_span=(-1.0, 1.0),
        settings=analysis.ContinuationSettings(ds=0.05, ds_max=0.2),
    )
    assert list(branch["unstable"][[0, -1]]) == [0, 2]
    (point,) = branch["bifurcations"]
    assert point["kind"] == "branch_point" and abs(point["p"]) < 1e-6
    assert point["located"] and point["eigenvalue_jump"]
    assert abs(point["eigenvalue"].real) == pytest.approx(1.0)


def test_the_ets_fixed_point_in_the_memory_scale(smooth_model, x0):
    """The tiny float64 ET (smooth memories): every continued point is a fixed point of
    the model at its memory scale, and the branch's eigenvalues are the linearised
    projected flow's: minus the tangent Hessian's (`coordinates="x"`) over tau, from a
    dense computation at the same points."""
    start = solvers.solve(
        smooth_model,
        x0,
        solver="tsit5",
        rtol=1e-8,
        atol=1e-10,
        dt0=None,
        flow="projected",
        t1=2000.0,
        max_steps=20000,
        stop=solvers.FixedPointStop(atol=1e-6),
    ).x_final
    fixed = solvers.find_fixed_point(smooth_model, start, method="newton")
    branch = analysis.continuation(
        smooth_model,
        fixed.x,
        1.0,
        p_span=(0.5, 2.0),
        parameter="memory_scale",
        settings=analysis.ContinuationSettings(ds=0.2, ds_max=0.5, k=4, max_points=6),
    )
    assert branch["x"].shape == (len(branch["p"]),) + x0.shape
    assert np.all(branch["fixed_point_residual_rms"] < 1e-9) and branch["p"][-1] > 1.5
    assert branch["stable"].all() and not branch["bifurcations"]
    for i in (0, len(branch["p"]) - 1):
        scaled = eqx.tree_at(
            lambda m: m.hopfield.xi, smooth_model, branch["p"][i] * smooth_model.hopfield.xi
        )
        hessian = analysis.hessian_eigenvalues(
            scaled, jnp.asarray(branch["x"][i]), coordinates="x", k=4
        )
        np.testing.assert_allclose(
            branch["eigenvalues"][i].real,
            -np.asarray(hessian["smallest"]) / smooth_model.tau,
            rtol=1e-7,
        )
    # The attention's beta, traced: each point is a fixed point of a model built with
    # that beta as its (static) constructor value, with that model's dense Hessian.
    beta0 = smooth_model.attention.beta
    in_beta = analysis.continuation(
        smooth_model,
        fixed.x,
        beta0,
        p_span=(0.5 * beta0, 3.0 * beta0),
        parameter="beta",
        settings=analysis.ContinuationSettings(ds=0.2, ds_max=0.5, k=4, max_points=4),
    )
    assert in_beta["p"][-1] > 1.5 * beta0 and in_beta["stable"].all()
    for i in (1, len(in_beta["p"]) - 1):
        rebuilt = et_ode.EnergyTransformer(
            DIM,
            2,
            8,
            24,
            key=jax.random.key(0),
            hopfield="softmax",
            init_std=0.3,
            dtype=jnp.float64,
            beta=float(in_beta["p"][i]),
        )
        x = jnp.asarray(in_beta["x"][i])
        assert float(solvers.rms(rebuilt.residual(x, None))) < 1e-9
        hessian = analysis.hessian_eigenvalues(rebuilt, x, coordinates="x", k=4)
        np.testing.assert_allclose(
            in_beta["eigenvalues"][i].real,
            -np.asarray(hessian["smallest"]) / rebuilt.tau,
            rtol=1e-7,
        )
    with pytest.raises(ValueError, match="attention term"):
        analysis.continuation(
            et_ode.EnergyTransformer(DIM, 2, 8, 24, key=jax.random.key(0), terms=("hopfield",)),
            fixed.x,
            1.0,
            p_span=(0.5, 2.0),
            parameter="beta",
        )
    with pytest.raises(ValueError, match="needs parameter="):
        analysis.continuation(smooth_model, fixed.x, 1.0, p_span=(0.5, 2.0))


@pytest.mark.parametrize("rtol, guess", [(1e-4, False), (1e-10, False), (1e-10, True)])
def test_matrix_free_solve_meets_its_tolerance_on_the_true_residual(rtol, guess):
    """The bordered solve's GMRES stops on the true residual, not on an estimate: on a
    stiff nonsymmetric system (rates 0.005 to 32, as on the shipped core) the residual
    recomputed here in numpy is within `rtol` of the right-hand side, from zero or from
    a guess. Inexact Newton relies on it (jax.scipy's "incremental" GMRES stopped ~10x
    above what it was asked). The field is nonlinear in `x` and `p` (its rates only
    faster for it), so `df/dx` and `df/dp` are those at `y`."""
    from et_ode.analysis.landscape import _branch_kernels as kernels

    n = 200
    rng = np.random.default_rng(0)
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    skew = rng.normal(size=(n, n)) / np.sqrt(n)
    a = q @ np.diag(-np.geomspace(0.005, 32.0, n)) @ q.T + 0.01 * (skew - skew.T)
    b, c = rng.normal(size=(2, n))

    def field(x, p, args):
        return args[0] @ x + p * args[1] + p**2 * args[2] - 0.01 * x**3

    F = kernels.FlatField(field, (n,))
    y = jnp.asarray(rng.normal(size=n + 1))
    border = jnp.asarray(rng.normal(size=n + 1))
    rhs = jnp.asarray(rng.normal(size=n + 1))
    start = jnp.asarray(rng.normal(size=n + 1)) if guess else None
    dy = kernels.bordered_solve(
        F, y, border, tuple(map(jnp.asarray, (a, b, c))), rhs, dense=False, guess=start, rtol=rtol
    )
    x, p = np.asarray(y[:-1]), float(y[-1])
    df_dx = a - np.diag(0.03 * x**2)
    df_dp = b + 2 * p * c
    matrix = np.vstack([np.column_stack([df_dx, df_dp]), np.asarray(border)[None]])
    residual = np.linalg.norm(matrix @ np.asarray(dy) - np.asarray(rhs))
    assert residual <= 1.01 * rtol * np.linalg.norm(rhs)


def nonsymmetric_transcritical(x, p, args):
    """A transcritical point at `p = 0` whose Jacobian is not symmetric and whose crossing
    eigenvalue is not the leading one: `x0' = p x0 - x0^2`; three stable directions and
    one unstable (rate 0.5, above the crossing) fed by `x0` and `x1`, with quadratic terms
    of their own. On `x = 0` the eigenvalues are `0.5, p, -1, -2, -3`. At `p = 0` the null
    vector is `phi = (1, 1, 1/4, 1/10, -2)` and the left one `psi = e0`, so only `x0'`'s
    quadratic term enters the bifurcation equation: the other branch leaves with
    `p = x0`, along `(phi, 1)`."""
    x0, x1, x2, x3, x4 = x
    return jnp.stack(
        [
            p * x0 - x0**2,
            x0 - x1 + x0**2,
            0.5 * x0 - 2.0 * x2 + x0 * x1,
            0.3 * x1 - 3.0 * x3 + x1**2,
            x0 + 0.5 * x4 + x4**2,
        ]
    )


def _nonsymmetric_branch(matrix_free):
    return analysis.continuation(
        nonsymmetric_transcritical,
        jnp.zeros(5),
        -0.9,  # not -1, where p meets the -1 of x1 in a Jordan block
        p_span=(-1.0, 1.0),
        settings=analysis.ContinuationSettings(
            ds=0.05, ds_max=0.2, k=2, newton=analysis.NewtonSettings(matrix_free=matrix_free)
        ),
    )


@pytest.mark.parametrize("matrix_free", [False, True])
def test_switch_tangent_uses_the_left_null_vector(matrix_free):
    branch = _nonsymmetric_branch(matrix_free)
    assert branch["dense"] is not matrix_free
    assert branch["metadata"]["xla_passes_off"] == {}
    (point,) = branch["bifurcations"]
    assert point["kind"] == "branch_point" and abs(point["p"]) < 1e-6
    # `phi` is signed so that its largest entry (-2 here) is positive
    want = -np.array([1.0, 1.0, 0.25, 0.1, -2.0, 1.0])
    np.testing.assert_allclose(point["switch_tangent"], want / np.linalg.norm(want), atol=1e-6)
    # the two leading eigenvalues, warm-started point to point when matrix-free
    p = branch["p"]
    want_values = np.stack([np.maximum(p, 0.5), np.minimum(p, 0.5)], axis=1)
    np.testing.assert_allclose(branch["eigenvalues"], want_values, atol=1e-8)


def test_a_branch_point_without_a_left_null_vector_says_so(monkeypatch):
    from et_ode.analysis.landscape import _branch_kernels as kernels
    from et_ode.analysis.landscape import _eigen as eigen

    def fails(*args, **kwargs):
        raise eigen.EigenNotConvergedError("no convergence (test)")

    monkeypatch.setattr(kernels, "left_null_vector", fails)
    (point,) = _nonsymmetric_branch(True)["bifurcations"]
    assert "switch_tangent" not in point and "no convergence (test)" in point["switch_error"]
    with pytest.raises(ValueError, match="left null vector was not found"):
        analysis.switch_branch(nonsymmetric_transcritical, point, p_span=(-1.0, 1.0))


def _refuses(*args, **kwargs):
    raise jax.errors.JaxRuntimeError(
        "INVALID_ARGUMENT: Reshape input and output shapes must be the same, got  -> 64"
    )


def test_a_kernel_xla_refuses_on_an_accelerator_is_compiled_with_passes_off(monkeypatch):
    """Where XLA refuses the corrector and the tangent on an accelerator (simulated: the
    default programs raise XLA's refusal, the arguments are said to live on a GPU), each
    is compiled again with the first set of `RESCUES` off, with a warning, once per
    static signature, and the matrix-free branch through the nonsymmetric branch point
    is the analytic one. (On the CPU no pass has that name: this checks the road, not
    what the option does to a GPU's program; tests/test_gpu_compile.py does that.)"""
    from et_ode.analysis.landscape import _branch_kernels as kernels
    from et_ode.analysis.landscape import _xla_fallback

    monkeypatch.setattr(_xla_fallback, "_platform", lambda leaves: "gpu")
    for kernel in (kernels.correct, kernels.tangent):
        monkeypatch.setattr(kernel, "default", _refuses)
        monkeypatch.setattr(kernel, "rescue", None)  # restored after the test
        monkeypatch.setattr(kernel, "traces", 0)
    with pytest.warns(RuntimeWarning, match="compiled it with triton-softmax-rewriter off"):
        branch = _nonsymmetric_branch(True)
    assert kernels.correct.rescue == 0 and kernels.tangent.rescue == 0
    assert kernels.correct.traces == 1 and kernels.tangent.traces == 1  # then cached
    off = list(_xla_fallback.RESCUES[0])
    assert branch["metadata"]["xla_passes_off"] == {"correct": off, "tangent": off}
    (point,) = branch["bifurcations"]
    assert point["kind"] == "branch_point" and abs(point["p"]) < 1e-6
    want = -np.array([1.0, 1.0, 0.25, 0.1, -2.0, 1.0])
    np.testing.assert_allclose(point["switch_tangent"], want / np.linalg.norm(want), atol=1e-6)


def _counted(calls, name, function):
    def counted(*args, **kwargs):
        calls.append(name)
        return function(*args, **kwargs)

    return counted


def test_a_rescued_kernel_goes_on_where_its_passes_are_refused_and_not_on_the_cpu(monkeypatch):
    """A kernel rescued with the first set of passes off starts its later calls on an
    accelerator there, and goes on to the second set (kept from then on) where a call is
    refused with the first; on the CPU it compiles as it is whatever was kept."""
    from et_ode.analysis.landscape import _branch_kernels as kernels
    from et_ode.analysis.landscape import _xla_fallback

    platform = ["gpu"]
    monkeypatch.setattr(_xla_fallback, "_platform", lambda leaves: platform[0])
    calls = []
    as_it_is, (_, second) = kernels.correct.default, kernels.correct._rescues
    monkeypatch.setattr(kernels.correct, "rescue", 0)
    monkeypatch.setattr(kernels.correct, "default", _counted(calls, "as it is", _refuses))
    monkeypatch.setattr(
        kernels.correct,
        "_rescues",
        [_counted(calls, "first", _refuses), _counted(calls, "second", second)],
    )
    run = lambda: analysis.continuation(  # noqa: E731
        fold_form,
        jnp.ones(1),
        -1.0,
        p_span=(-2.0, 1.0),
        settings=analysis.ContinuationSettings(max_points=3),
    )
    with pytest.warns(RuntimeWarning, match="triton-softmax-rewriter off .* -> 64.*algsimp off"):
        branch = run()
    assert calls[:3] == ["first", "second", "second"] and "as it is" not in calls
    assert kernels.correct.rescue == 1
    assert branch["metadata"]["xla_passes_off"] == {"correct": list(_xla_fallback.RESCUES[1])}
    calls.clear()
    platform[0] = "cpu"
    monkeypatch.setattr(kernels.correct, "default", _counted(calls, "as it is", as_it_is))
    run()
    assert set(calls) == {"as it is"}


@pytest.mark.parametrize(
    "case", ["refused every time", "on the cpu", "another error", "another error when rescued"]
)
def test_what_is_not_rescued_says_so(monkeypatch, case):
    """Refused as it is and with each set of passes off: an error that says what was
    tried and names `JAX_PLATFORMS=cpu`, raised from the last refusal. On the CPU (where
    these programs compile) or for any other error, as it is or with passes off, XLA's
    own error, untouched and with no further attempt."""
    from et_ode.analysis.landscape import _branch_kernels as kernels
    from et_ode.analysis.landscape import _xla_fallback

    def fails(*args, **kwargs):
        raise jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: out of memory (test)")

    monkeypatch.setattr(kernels.correct, "rescue", None)
    monkeypatch.setattr(kernels.correct, "default", fails if case == "another error" else _refuses)
    rescue = fails if case == "another error when rescued" else _refuses
    monkeypatch.setattr(kernels.correct, "with_passes_off", rescue)
    if case != "on the cpu":
        monkeypatch.setattr(_xla_fallback, "_platform", lambda leaves: "gpu")
    start = lambda: analysis.continuation(fold_form, jnp.ones(1), -1.0, p_span=(-2.0, 1.0))  # noqa: E731
    if case == "refused every time":
        with pytest.raises(_xla_fallback.XlaRefusedError) as caught:
            start()
        said = str(caught.value)
        assert "correct" in said and "as it is" in said
        assert said.count("-> 64") == 1 + len(_xla_fallback.RESCUES)
        assert "triton-softmax-rewriter and algsimp off" in said
        assert "JAX_PLATFORMS=cpu" in said and kernels.correct.rescue is None
        assert type(caught.value.__cause__) is jax.errors.JaxRuntimeError
        return
    with pytest.raises(jax.errors.JaxRuntimeError) as caught:
        start()
    assert type(caught.value) is jax.errors.JaxRuntimeError
    assert ("RESOURCE_EXHAUSTED" in str(caught.value)) is (case != "on the cpu")
    assert kernels.correct.rescue is None
