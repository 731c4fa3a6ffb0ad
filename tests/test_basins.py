"""`analysis.basins`, `grid_starts` and `basin_entropy` on answers known without them: the
flat double well of test_verdicts.py, `E = (a^2 - 1)^2 + (OMEGA / 2) b^2` (gradient flow:
every start with `a < 0` flows to the minimum `(-1, 0)`, every start with `a > 0` to
`(1, 0)`, both at energy 0 with Hessian `diag(8, OMEGA)`), two coupled tokens whose
energy does not see their order (its mixed-sign minima are each other's token
permutation), a damped Duffing oscillator (no gradient flow: its stable foci have
analytic eigenvalues, which its residual's symmetric part contradicts), and basin
entropies of label grids whose boxes hold known mixtures."""

import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_verdicts import DAMPING, OMEGA, DampedDuffing, DoubleWell, EnergyOnly

from et_ode import analysis, solvers


def test_double_well_basins_split_at_the_saddle():
    # a = -1.5 ... 1.5 down the rows (8 values, none 0), b across
    starts, a, b = analysis.grid_starts(
        np.zeros((1, 2)), np.array([[1.5, 0.0]]), np.array([[0.0, 1.0]]), resolution=8
    )
    np.testing.assert_allclose(starts[3 * 8 + 5, 0], [a[3] * 1.5, b[5]])  # row-major
    result = analysis.basins(
        DoubleWell(),
        starts,
        grid_shape=(8, 8),
        options=analysis.BASIN_OPTIONS.replace(flow="native"),
        settings=analysis.BasinSettings(box=3),
    )
    labels = result["labels_grid"]
    assert result["not_converged"] == 0 and len(result["attractors"]) == 2
    # one basin per sign of a, whatever the label numbers
    assert len(set(labels[:4].ravel())) == 1 and len(set(labels[4:].ravel())) == 1
    assert labels[0, 0] != labels[-1, 0]
    ends = sorted(float(att["x"][0, 0]) for att in result["attractors"])
    np.testing.assert_allclose(ends, [-1.0, 1.0], atol=1e-10)  # polished by Newton
    for att in result["attractors"]:
        assert att["fraction"] == 0.5 and att["count"] == 32
        assert att["polished"] and att["residual_rms"] < 1e-10
        assert abs(att["energy"]) < 1e-15 and att["morse_index"] == 0 and att["stable"]
        np.testing.assert_allclose(att["smallest_eigenvalues"][:2], sorted([OMEGA, 8.0]), rtol=1e-6)
    assert result["entropy"] == pytest.approx(np.log(2))
    # the batched program runs as long as its slowest start, not their sum
    assert 1 <= result["batched_iterations"] < result["one_by_one_iterations"]
    # 3 x 3 boxes: rows 0-2 hold one basin; rows 3-5 hold a < 0 in row 3, a > 0 in 4-5
    mixed = -(1 / 3 * np.log(1 / 3) + 2 / 3 * np.log(2 / 3))
    entropy = result["basin_entropy"]
    assert (entropy["boxes"], entropy["boundary_boxes"]) == (4, 2)
    assert entropy["S_b"] == pytest.approx(mixed / 2) and entropy["S_bb"] == pytest.approx(mixed)


class TwoTokens(eqx.Module):
    """Two tokens of one coordinate, each in a double well, coupled by `x0 x1 / 2`: an
    energy that does not see token order. Its four minima are one per quadrant; those
    with opposite signs, `(b, -b)` and `(-b, b)`, are each other's token permutation."""

    def energy(self, x, args=None):
        return jnp.sum((x**2 - 1.0) ** 2) + 0.5 * x[0, 0] * x[1, 0]

    def residual(self, x, args=None):
        return jax.grad(self.energy)(x, args)

    def vector_field(self, t, x, args=None, flow="native"):
        return -self.residual(x, args)


def test_token_permutations_of_an_order_blind_energy():
    starts, _, _ = analysis.grid_starts(
        np.zeros((2, 1)), np.array([[1.5], [0.0]]), np.array([[0.0], [1.5]]), resolution=6
    )
    result = analysis.basins(
        TwoTokens(), starts, options=analysis.BASIN_OPTIONS.replace(flow="native")
    )
    attractors = result["attractors"]
    assert len(attractors) == 4 and all(att["polished"] for att in attractors)
    structure = result["token_structure"]
    # same-sign minima (a, a), (-a, -a) and mixed ones (b, -b), (-b, b): four states
    assert structure["token_states"] == 4 and structure["tokens"] == 8
    (pair,) = structure["permutations"]
    first, second = (np.asarray(attractors[i]["x"])[:, 0] for i in pair)
    np.testing.assert_allclose(first, second[::-1], atol=1e-10)
    assert first[0] * first[1] < 0  # the mixed-sign pair
    assert attractors[pair[0]]["energy"] == pytest.approx(attractors[pair[1]]["energy"])


def test_a_field_that_is_no_gradient_gets_its_flows_stability_not_a_morse_index():
    starts = np.array([[[2.0, 0.0]], [[-2.0, 0.5]], [[0.0, 0.0]]])  # the last: the saddle
    result = analysis.basins(
        DampedDuffing(),
        starts,
        grid_shape=(1, 3),
        options=analysis.BASIN_OPTIONS.replace(flow="native"),
        settings=analysis.BasinSettings(k=2, box=1),
    )
    wells = {round(float(att["x"][0, 0])): att for att in result["attractors"]}
    assert sorted(wells) == [-1, 0, 1] and result["not_converged"] == 0
    foci = np.roots([1.0, DAMPING, 2.0])  # -0.15 +- 1.406i
    for a in (-1, 1):
        well = wells[a]
        assert well["polished"] and not well["gradient"] and well["asymmetry"] > 0.1
        assert well["morse_index"] is None and well["stable"] is True
        np.testing.assert_allclose(
            np.sort_complex(well["flow_eigenvalues"]), np.sort_complex(foci), atol=1e-10
        )
    # at the saddle the residual's Jacobian [[0, -1], [-1, DAMPING]] is symmetric: the
    # tangent Hessian's answer, one negative eigenvalue, is the flow's (one unstable rate)
    saddle = wells[0]
    assert saddle["gradient"] and saddle["asymmetry"] < 1e-12 and saddle["morse_index"] == 1
    assert saddle["stable"] is False
    # the map's legend says so: no Morse index for the wells, stable
    legend = [t.get_text() for t in analysis.plot_basins(result).legends[0].get_texts()]
    assert sorted(text.rsplit(", ", 1)[1] for text in legend) == ["index 1", "stable", "stable"]


def test_the_residual_operators_asymmetry_is_estimated_matrix_free():
    """`hessian_eigenvalues`' asymmetry `|A - A^T|_F / |A|_F`: with Lanczos it is
    estimated from random pairs; against the dense method's exact value on a linear
    field whose Jacobian is known."""

    class Linear(eqx.Module):
        matrix: jax.Array

        def energy(self, x, args=None):
            return 0.5 * jnp.sum(x * x)

        def vector_field(self, t, x, args=None, flow="native"):
            return -self.residual(x, args)

        def residual(self, x, args=None):
            return (self.matrix @ x.ravel()).reshape(x.shape)

    rng = np.random.default_rng(3)
    base = rng.standard_normal((12, 12))
    symmetric = base @ base.T + 12 * np.eye(12)
    for tilt, expected in ((0.0, 0.0), (0.3, None)):
        matrix = symmetric + tilt * (base - base.T) * 4
        exact = np.linalg.norm(matrix - matrix.T) / np.linalg.norm(matrix)
        x = jnp.zeros((3, 4))
        dense = analysis.hessian_eigenvalues(Linear(jnp.asarray(matrix)), x, method="dense")
        lanczos = analysis.hessian_eigenvalues(
            Linear(jnp.asarray(matrix)), x, k=2, method="lanczos"
        )
        assert dense["asymmetry"] == pytest.approx(exact, abs=1e-14)
        if expected == 0.0:
            assert lanczos["asymmetry"] < 1e-14
        else:  # three pairs: within a factor of 3 of the exact value
            assert exact / 3 < lanczos["asymmetry"] < 3 * exact


def test_basin_entropy_of_known_grids():
    checker = np.indices((6, 6)).sum(axis=0) % 2  # every 2 x 2 box half and half
    assert analysis.basin_entropy(checker, box=2)["S_b"] == pytest.approx(np.log(2))
    three = np.tile(np.arange(3), (3, 2))  # each 3 x 3 box: three basins in thirds
    out = analysis.basin_entropy(three, box=3)
    assert out["S_b"] == out["S_bb"] == pytest.approx(np.log(3))
    flat = analysis.basin_entropy(np.zeros((5, 5), int), box=5)
    assert flat["S_b"] == 0.0 and flat["S_bb"] == 0.0 and flat["boundary_boxes"] == 0


def test_refusals(no_runtime_types):
    with pytest.raises(ValueError, match=r"needs model\.residual"):
        analysis.basins(EnergyOnly(), np.zeros((2, 1, 2)))
    with pytest.raises(ValueError, match=r"starts must be \[B, N, D\]"):
        analysis.basins(DoubleWell(), np.zeros((1, 2)))
    with pytest.raises(ValueError, match="does not hold"):
        analysis.basins(DoubleWell(), np.zeros((4, 1, 2)), grid_shape=(3, 3))
    with pytest.raises(ValueError, match="2-D grid of labels"):
        analysis.basin_entropy(np.zeros(9), box=3)
    # a grid the boxes cannot cover: refused before any start is solved
    with pytest.raises(ValueError, match=r"at least 5 x 5 \(got shape \(2, 2\)\)"):
        analysis.basins(DoubleWell(), np.zeros((4, 1, 2)), grid_shape=(2, 2))
    # the settings and options: checked when made, and their types when given
    with pytest.raises(ValueError, match=r"BasinSettings.distance_tol must be a finite number"):
        analysis.BasinSettings(distance_tol=0.0)
    with pytest.raises(ValueError, match=r"BasinSettings.polish takes no preconditioner"):
        analysis.BasinSettings(polish=analysis.NewtonSettings(preconditioner=lambda v, *a: v))
    with pytest.raises(TypeError, match=r"options must be a solvers.SolveOptions"):
        analysis.basins(DoubleWell(), np.zeros((4, 1, 2)), options=dict(rtol=1e-6))
    with pytest.raises(TypeError, match=r"settings must be an analysis.BasinSettings"):
        analysis.basins(DoubleWell(), np.zeros((4, 1, 2)), settings=dict(k=2))


class NaNBeyondTwo(eqx.Module):
    """`x' = -x` (the double well's minimum at 0 for `x < 2`), its field NaN at `x > 2`."""

    def energy(self, x, args=None):
        return 0.5 * jnp.sum(x**2)

    def residual(self, x, args=None):
        return x

    def vector_field(self, t, x, args=None, flow="native"):
        return jnp.where(x > 2.0, jnp.nan, -x)


def test_starts_that_fail_are_counted_and_a_run_where_all_fail_is_refused():
    with pytest.warns(RuntimeWarning, match=r"1 of 2 starts did not reach .*dt_underflow: 1"):
        result = analysis.basins(
            NaNBeyondTwo(),
            np.array([[[1.0]], [[3.0]]]),
            options=analysis.BASIN_OPTIONS.replace(flow="native"),
        )
    assert list(result["labels"]) == [0, -1] and result["not_converged"] == 1
    with pytest.raises(solvers.SolveError, match="2 of 2 starts did not reach"):
        analysis.basins(
            NaNBeyondTwo(),
            np.array([[[3.0]], [[4.0]]]),
            options=analysis.BASIN_OPTIONS.replace(flow="native"),
        )


class BlowsUpBeyondOne(eqx.Module):
    """`x' = x^2 - x`: 0 attracts the starts below 1, those above blow up at
    `t = ln(x0 / (x0 - 1))`."""

    def energy(self, x, args=None):
        return jnp.sum(x**2 / 2 - x**3 / 3)

    def residual(self, x, args=None):
        return x - x**2

    def vector_field(self, t, x, args=None, flow="native"):
        return x**2 - x


def test_a_start_that_blows_up_is_named_with_when():
    with pytest.warns(RuntimeWarning, match=r"1 of 2 starts did not reach") as caught:
        result = analysis.basins(
            BlowsUpBeyondOne(),
            np.array([[[0.5]], [[1.5]]]),
            options=analysis.BASIN_OPTIONS.replace(flow="native"),
        )
    assert list(result["labels"]) == [0, -1]
    found = re.search(
        r"RMS grew from 1.5 to \S+ by t = ([0-9.]+), ever faster", str(caught[0].message)
    )
    assert found, str(caught[0].message)
    assert abs(float(found[1]) - np.log(3.0)) < 1e-3


def test_morse_index_by_lanczos_above_the_dense_size():
    """A quadratic energy of 2,048 entries (above the Hessian's dense size): Lanczos to
    `MORSE_LANCZOS_TOL` (of the operator's norm) gives the analytic smallest eigenvalues, a
    near-degenerate pair among them, and the index of a saddle reached from its stable
    manifold."""
    from et_ode.analysis.landscape._basins import MORSE_LANCZOS_TOL

    n = 2048
    rates = np.linspace(0.5, 3.0, n)
    rates[:2] = [0.3, 0.3 + 1e-7]

    class Quadratic(eqx.Module):
        rates: jax.Array

        def energy(self, x, args=None):
            return 0.5 * jnp.sum(self.rates * x[0] ** 2)

        def residual(self, x, args=None):
            return jax.grad(self.energy)(x, args)

        def vector_field(self, t, x, args=None, flow="native"):
            return -self.residual(x, args)

    starts = np.zeros((2, 1, n))
    starts[:, 0, 2:] = 0.1
    starts[1, 0, 1] = 0.2
    well = analysis.basins(
        Quadratic(jnp.asarray(rates)),
        starts,
        options=analysis.BASIN_OPTIONS.replace(flow="native"),
        settings=analysis.BasinSettings(k=3),
    )
    (minimum,) = well["attractors"]
    assert minimum["polished"] and minimum["morse_index"] == 0 and minimum["stable"]
    np.testing.assert_allclose(
        minimum["smallest_eigenvalues"], sorted(rates)[:3], rtol=10 * MORSE_LANCZOS_TOL
    )
    saddle_rates = rates.copy()
    saddle_rates[0] = -0.3  # starts with x_0 = 0 stay on the stable manifold
    saddle = analysis.basins(
        Quadratic(jnp.asarray(saddle_rates)),
        starts,
        options=analysis.BASIN_OPTIONS.replace(flow="native"),
        settings=analysis.BasinSettings(k=3),
    )
    (point,) = saddle["attractors"]
    assert point["morse_index"] == 1 and point["stable"] is False
    np.testing.assert_allclose(
        point["smallest_eigenvalues"], sorted(saddle_rates)[:3], rtol=10 * MORSE_LANCZOS_TOL
    )
