"""`analysis.basin_continuation` on landscapes whose attractors and basins are known in
closed form or by scipy's root finders, never by et_ode:

- modern Hopfield networks `E = -(1/beta) log sum_mu exp(beta xi_mu . x) + |x|^2 / 2`
  (Ramsauer et al. 2021) of unit patterns in the plane. Two patterns `+-e`: the
  Curie-Weiss pitchfork, fixed points `x = m e` with `m = tanh(beta m)`, one attractor
  (the origin) below `beta = 1` and two above. Three patterns at 120 degrees: the origin
  is stable while `beta < 2` (Hessian `(1 - beta / 2) I`), the pattern minima are born in
  a saddle-node at `beta_sn = 1.8304...` (found here with scipy on the symmetric
  reduction), so between the two the origin coexists with three pattern minima, a
  first-order transition that a branch followed from the origin cannot see;
- a tilted double well `E = x^4/4 - x^2/2 - h x + y^2/2`: its basins split at the middle
  root of `x^3 - x - h` and one well vanishes at `|h| = 2 / (3 sqrt 3)`.
"""

import pathlib

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import brentq, fsolve

from conftest import run_page_example
from et_ode import analysis, solvers
from et_ode.solvers._plumbing import solve_core

NATIVE = analysis.BASIN_OPTIONS.replace(flow="native")
BASINS = analysis.BasinSettings(k=2)
OPTIONS = dict(options=NATIVE, settings=analysis.BasinContinuationSettings(basins=BASINS))
PAGE = pathlib.Path(__file__).parents[1] / "docs" / "how-to" / "landscape.md"


class Hopfield(eqx.Module):
    """A modern Hopfield network on a state `[1, D]`, patterns `[M, D]`."""

    patterns: jax.Array
    beta: jax.Array

    def energy(self, x, args=None):
        overlaps = self.beta * (self.patterns @ x[0])
        return -jax.nn.logsumexp(overlaps) / self.beta + 0.5 * jnp.sum(x**2)

    def residual(self, x, args=None):
        return jax.grad(self.energy)(x, args)

    def vector_field(self, t, x, args=None, flow="native"):
        return -self.residual(x, args)


def set_beta(model, args, beta):
    return eqx.tree_at(lambda m: m.beta, model, beta), args


def plane(resolution=6, extent=1.5):
    """Starts on `[-extent, extent]^2`, none on an axis (an even resolution)."""
    starts, _, _ = analysis.grid_starts(
        np.zeros((1, 2)),
        np.array([[extent, 0.0]]),
        np.array([[0.0, extent]]),
        resolution=resolution,
    )
    return starts


def by_track(result):
    """`{track id: {p: (x [2], entry index)}}`."""
    return {
        track["id"]: {p: np.asarray(x)[0] for p, x in zip(track["p"], track["x"])}
        for track in result["tracks"]
    }


@pytest.fixture(scope="module")
def curie_weiss():
    patterns = jnp.array([[1.0, 0.0], [-1.0, 0.0]])
    return Hopfield(patterns, jnp.asarray(1.0))


def test_the_curie_weiss_pitchfork_one_attractor_then_two(curie_weiss):
    betas = [0.5, 0.9, 1.1, 1.5, 2.5]
    starts = plane()
    before = solve_core._cached._cache_size()
    result = analysis.basin_continuation(curie_weiss, starts, betas, parameter=set_beta, **OPTIONS)
    # one compiled solve for every beta (beta is an array leaf of the model)
    assert solve_core._cached._cache_size() - before <= 1
    np.testing.assert_array_equal(result["counts"], [1, 1, 2, 2, 2])
    np.testing.assert_allclose(result["entropy"], [0, 0, np.log(2), np.log(2), np.log(2)])
    (appears,) = result["events"]
    assert appears["kind"] == "appears" and appears["between"] == [0.9, 1.1]
    assert len(result["tracks"]) == 2
    for track in result["tracks"]:
        for beta, x, stable, index in zip(
            track["p"], track["x"], track["stable"], track["morse_index"]
        ):
            m = brentq(lambda m: np.tanh(beta * m) - m, 1e-3, 1.5) if beta > 1 else 0.0
            x = np.asarray(x)[0]
            np.testing.assert_allclose(np.abs(x), [m, 0.0], atol=1e-9)
            assert stable and index == 0
    # the two wells share the plane by the sign of the first coordinate (rows: a)
    labels = result["labels"][-1].reshape(6, 6)
    assert len(set(labels[:3].ravel())) == 1 and len(set(labels[3:].ravel())) == 1
    assert labels[0, 0] != labels[-1, 0]
    np.testing.assert_allclose(result["fractions"][:2], [[1.0, 0.0], [1.0, 0.0]])
    np.testing.assert_allclose(result["fractions"][2:], 0.5)
    # the track that was the origin goes on as one of the two wells, a jump of m / sqrt(2)
    origin = result["tracks"][0]
    m = brentq(lambda m: np.tanh(1.1 * m) - m, 1e-3, 1.5)
    assert origin["jump"][2] == pytest.approx(m / np.sqrt(2), rel=1e-8)
    assert np.isnan(result["tracks"][1]["jump"][0])
    # a distance_tol below that jump: the origin vanishes and two new wells appear
    strict = analysis.basin_continuation(
        curie_weiss,
        starts,
        betas[1:3],
        parameter=set_beta,
        options=NATIVE,
        settings=analysis.BasinContinuationSettings(distance_tol=0.1, basins=BASINS),
    )
    kinds = sorted(event["kind"] for event in strict["events"])
    assert kinds == ["appears", "appears", "vanishes"] and len(strict["tracks"]) == 3


def test_three_patterns_coexist_with_the_mixture_before_it_loses_stability():
    angles = 2 * np.pi * np.arange(3) / 3
    patterns = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    model = Hopfield(jnp.asarray(patterns), jnp.asarray(1.0))

    def along_pattern(m, beta):  # xi_1 . grad E at x = m xi_1, the symmetric reduction
        a, c = np.exp(beta * m), np.exp(-beta * m / 2)
        return m - (a - c) / (a + 2 * c)

    m_sn, beta_sn = fsolve(
        lambda z: [
            along_pattern(z[0], z[1]),
            (along_pattern(z[0] + 1e-6, z[1]) - along_pattern(z[0] - 1e-6, z[1])) / 2e-6,
        ],
        [0.5, 1.8],
    )
    assert 1.8 < beta_sn < 1.86  # the saddle-node, below beta = 2
    betas = [1.5, 1.84, 2.5]
    starts = plane(resolution=8, extent=1.0)  # some starts within the mixture's basin
    result = analysis.basin_continuation(model, starts, betas, parameter=set_beta, **OPTIONS)
    np.testing.assert_array_equal(result["counts"], [1, 4, 3])
    events = [(e["kind"], e["between"]) for e in result["events"]]
    assert events.count(("appears", [1.5, 1.84])) == 3
    assert events.count(("vanishes", [1.84, 2.5])) == 1 and len(events) == 4
    tracks = by_track(result)
    origin = next(t for t in result["tracks"] if 1.5 in t["p"])
    assert origin["p"] == [1.5, 1.84]  # the mixture, until it loses stability at beta = 2
    for beta, x, values in zip(origin["p"], origin["x"], origin["smallest_eigenvalues"]):
        np.testing.assert_allclose(np.asarray(x), 0.0, atol=1e-10)
        np.testing.assert_allclose(values, [1 - beta / 2] * 2, atol=1e-8)
    for track_id, points in tracks.items():
        if track_id == origin["id"]:
            continue
        assert sorted(points) == [1.84, 2.5]  # born in between, then followed
        for beta, x in points.items():
            m = brentq(lambda m: along_pattern(m, beta), m_sn, 1.5)
            k = int(np.argmax(patterns @ x))
            np.testing.assert_allclose(x, m * patterns[k], atol=1e-9)
    # each pattern's basin lies in its sector (the mirror lines are invariant): a start
    # reaches the pattern of largest overlap, or (below beta = 2) the mixture
    for row, beta in zip(result["labels"], betas):
        for start, track_id in zip(starts[:, 0], row):
            x = tracks[track_id][beta]
            if np.linalg.norm(x) > 1e-6:
                assert np.argmax(patterns @ x) == np.argmax(patterns @ start)
    np.testing.assert_allclose(result["fractions"].sum(axis=1), 1.0)
    assert result["fractions"][0, origin["id"]] == 1.0
    assert result["metadata"]["study"] == "basin_continuation"
    assert result["metadata"]["parameter"] == "function"
    # following the inputs instead: the mixture's basin (every start at beta = 1.5)
    # goes on as the pattern whose basin shares most of it, and the mixture at 1.84,
    # reached by the starts near the origin, is a track of its own
    inputs = analysis.basin_continuation(
        model,
        starts,
        betas,
        parameter=set_beta,
        options=NATIVE,
        settings=analysis.BasinContinuationSettings(match="overlap", basins=BASINS),
    )
    first = inputs["tracks"][0]
    assert first["p"] == betas and np.linalg.norm(first["x"][1]) > 0.4
    (mixture,) = [t for t in inputs["tracks"] if t["p"] == [1.84]]
    assert np.linalg.norm(mixture["x"][0]) < 1e-10  # the same basins, other tracks:
    assert mixture["fraction"] == [result["fractions"][1, origin["id"]]]
    largest = np.delete(inputs["fractions"][1], mixture["id"]).max()
    assert first["fraction"][1] == largest
    assert inputs["metadata"]["match"] == "overlap"


class TiltedWell(eqx.Module):
    """`E = x^4/4 - x^2/2 - h x + y^2/2` on a state `[1, 2]`."""

    h: jax.Array

    def energy(self, x, args=None):
        a, b = x[0, 0], x[0, 1]
        return a**4 / 4 - a**2 / 2 - self.h * a + b**2 / 2

    def residual(self, x, args=None):
        return jax.grad(self.energy)(x, args)

    def vector_field(self, t, x, args=None, flow="native"):
        return -self.residual(x, args)


@pytest.mark.parametrize("match", ["distance", "overlap"])
def test_a_tilted_double_well_fractions_follow_the_saddle_until_a_well_vanishes(match):
    """Both rules give the same tracks here: each well keeps most of its basin."""
    tilts = [-0.5, -0.25, 0.1, 0.25, 0.5]
    h_fold = 2 / (3 * np.sqrt(3))
    xs = np.linspace(-1.7, 1.7, 11) + 0.13  # none within 0.05 of a saddle below
    starts = np.stack([xs, np.full_like(xs, 0.4)], axis=1)[:, None, :]

    def tilt(model, args, h):
        return TiltedWell(h), args

    result = analysis.basin_continuation(
        TiltedWell(jnp.asarray(0.0)),
        starts,
        tilts,
        parameter=tilt,
        options=NATIVE,
        settings=analysis.BasinContinuationSettings(match=match, basins=BASINS),
    )
    np.testing.assert_array_equal(result["counts"], [1, 2, 2, 2, 1])
    left, right = result["tracks"]  # the left well exists at h = -0.5, the right not
    assert left["p"] == tilts[:4] and right["p"] == tilts[1:]
    assert [(e["kind"], e["track"], e["between"]) for e in result["events"]] == [
        ("appears", right["id"], [-0.5, -0.25]),
        ("vanishes", left["id"], [0.25, 0.5]),
    ]
    for h, row, fractions in zip(tilts, result["labels"], result["fractions"]):
        roots = np.sort(np.roots([1.0, 0.0, -1.0, -h]).real[np.isreal(np.roots([1, 0, -1, -h]))])
        if abs(h) < h_fold:
            saddle = roots[1]
            assert np.min(np.abs(xs - saddle)) > 0.05
            expected_right = np.mean(xs > saddle)
            assert fractions[right["id"]] == pytest.approx(expected_right)
            assert fractions[left["id"]] == pytest.approx(1 - expected_right)
            np.testing.assert_array_equal(row == right["id"], xs > saddle)
    for track, pick in ((left, 0), (right, -1)):
        for h, x, energy in zip(track["p"], track["x"], track["energy"]):
            roots = np.roots([1.0, 0.0, -1.0, -h])
            well = np.sort(roots[np.isreal(roots)].real)[pick]
            np.testing.assert_allclose(np.asarray(x)[0], [well, 0.0], atol=1e-10)
            assert energy == pytest.approx(well**4 / 4 - well**2 / 2 - h * well, abs=1e-12)


def test_refusals_before_any_solve(curie_weiss, no_runtime_types):
    starts = plane(resolution=2)
    call = analysis.basin_continuation
    for ps in ([1.0], [1.0, 2.0, 1.5], [1.0, np.nan], [[1.0, 2.0]], "12", ["a", "b"], {1, 2}):
        with pytest.raises(ValueError, match="strictly increasing or decreasing"):
            call(curie_weiss, starts, ps, parameter=set_beta)
    settings = analysis.BasinContinuationSettings
    with pytest.raises(TypeError, match=r"settings must be an analysis.BasinContinuationSettings"):
        call(curie_weiss, starts, [1.0, 2.0], parameter=set_beta, settings=BASINS)
    with pytest.raises(TypeError, match=r"options must be a solvers.SolveOptions"):
        call(curie_weiss, starts, [1.0, 2.0], parameter=set_beta, options=dict(flow="native"))
    with pytest.raises(ValueError, match='match must be "distance" or "overlap"'):
        call(curie_weiss, starts, [1.0, 2.0], parameter=set_beta, settings=settings(match="x"))
    with pytest.raises(ValueError, match=r"min_overlap must be a fraction in \[0, 1\]"):
        call(
            curie_weiss, starts, [1.0, 2.0], parameter=set_beta, settings=settings(min_overlap=1.5)
        )
    with pytest.raises(ValueError, match="distance_tol must be a distance > 0"):
        call(
            curie_weiss,
            starts,
            [1.0, 2.0],
            parameter=set_beta,
            settings=settings(distance_tol=-1.0),
        )
    # a name is looked up in the model's own lenses (the ET names beta and two more)
    for name in ("temperature", "beta"):
        with pytest.raises(ValueError, match=f"parameter='{name}' is not a lens of this model"):
            call(curie_weiss, starts, [1.0, 2.0], parameter=name)

    with pytest.raises(ValueError, match='distance_tol is a distance for match="distance"'):
        settings(match="overlap", distance_tol=0.1)
    with pytest.raises(ValueError, match='min_overlap is for match="overlap"'):
        settings(min_overlap=0.5)
    for bad in (True, "0.1", np.array([0.1, 0.2])):
        with pytest.raises(ValueError, match="distance_tol must be a distance > 0"):
            settings(distance_tol=bad)
    with pytest.raises(ValueError, match=r"starts must be \[B, N, D\]"):
        call(curie_weiss, np.zeros(3), [1.0, 2.0], parameter=set_beta)
    for returned in (lambda m, a, p: m, lambda m, a, p: (m,), lambda m, a, p: None):
        with pytest.raises(ValueError, match=r"\(model, args, p\) -> \(model, args\): a pair"):
            call(curie_weiss, starts, [1.0, 2.0], parameter=returned)

    class EnergyOnly(eqx.Module):
        def energy(self, x, args=None):
            return jnp.sum(x**2)

    with pytest.raises(ValueError, match="basin_continuation needs model.residual"):
        call(EnergyOnly(), starts, [1.0, 2.0], parameter=set_beta)


def test_the_tiny_et_in_beta_every_track_point_a_fixed_point_of_its_model():
    """On the ET, `parameter="beta"`: tracks are matched in `g`, each point is a fixed
    point of a model built with that `beta` (its static constructor value), and the
    Hessian there has the Morse index reported."""
    import et_ode
    from conftest import DIM, make_state

    betas = [0.2, 0.35, 0.6]
    model = et_ode.EnergyTransformer(
        DIM, 2, 8, 24, key=jax.random.key(0), init_std=0.3, dtype=jnp.float64
    )
    starts = make_state(seed=5, batch=(3,))
    result = analysis.basin_continuation(
        model,
        starts,
        betas,
        parameter="beta",
        settings=analysis.BasinContinuationSettings(basins=BASINS),
    )
    assert result["metadata"]["parameter"] == "beta" and result["metadata"]["flow"] == "projected"
    assert (result["labels"] >= 0).all() and set(result["counts"]) <= {1, 2, 3}
    for track in result["tracks"]:
        for beta, x, index in zip(track["p"], track["x"], track["morse_index"]):
            rebuilt = et_ode.EnergyTransformer(
                DIM,
                2,
                8,
                24,
                key=jax.random.key(0),
                init_std=0.3,
                dtype=jnp.float64,
                beta=beta,
            )
            x = jnp.asarray(x)
            assert float(solvers.rms(rebuilt.residual(x, None))) < 1e-9
            hessian = analysis.hessian_eigenvalues(rebuilt, x, k=2)
            assert int(hessian["morse_index"]) == index


def test_the_landscape_pages_example():
    """The page's three-pattern network, run as written, prints what the page says; its
    patterns appear in the interval that holds the saddle-node computed above (1.8304)
    and the mixture's track ends before `beta = 2`, where it loses its stability."""
    namespace, out, printed = run_page_example(PAGE, "analysis.basin_continuation(")
    assert out == printed
    result = namespace["result"]
    appears = [e["between"] for e in result["events"] if e["kind"] == "appears"]
    assert len(appears) == 3 and all(lo < 1.8304 < hi for lo, hi in appears)
    (vanishes,) = [e for e in result["events"] if e["kind"] == "vanishes"]
    assert vanishes["between"][1] <= 2.0
    plotted = analysis.plot_basin_continuation(result, parameter_label="beta")
    assert not analysis.layout_problems(plotted)


def test_a_value_where_some_starts_fail_is_named_and_one_where_all_fail_ends_the_run(
    curie_weiss,
):
    """At `beta = 0.5` the origin attracts at the rate 0.5 along `e`: by t = 19.5 the starts
    at `|a| = 0.3` have RMS G below 1e-5 (from t = 18.5) and those further out not (from
    20.7 on); at `beta = 0.7` (rate 0.3) none has (from t = 29)."""
    starts = plane()
    # strict numeric types of NumPy are settings too (a float32 tolerance)
    settings = analysis.BasinContinuationSettings(
        distance_tol=np.float32(1.0), basins=BASINS.replace(t1=19.5)
    )
    with pytest.warns(RuntimeWarning, match=r"basin_continuation at p = 0.5: basins: 24 of 36"):
        with pytest.raises(solvers.SolveError, match="basin_continuation at p = 0.7: basins"):
            analysis.basin_continuation(
                curie_weiss,
                starts,
                [0.5, 0.7],
                parameter=set_beta,
                options=NATIVE,
                settings=settings,
            )
