"""`analysis.basins`, `grid_starts` and `basin_entropy` on answers known without them: the
flat double well of test_verdicts.py, `E = (a^2 - 1)^2 + (OMEGA / 2) b^2` (gradient flow:
every start with `a < 0` flows to the minimum `(-1, 0)`, every start with `a > 0` to
`(1, 0)`, both at energy 0 with Hessian `diag(8, OMEGA)`), two coupled tokens whose
energy does not see their order (its mixed-sign minima are each other's token
permutation), and basin entropies of label grids whose boxes hold known mixtures."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_verdicts import OMEGA, DoubleWell, EnergyOnly

from et_ode import analysis


def test_double_well_basins_split_at_the_saddle():
    # a = -1.5 ... 1.5 down the rows (8 values, none 0), b across
    starts, a, b = analysis.grid_starts(
        np.zeros((1, 2)), np.array([[1.5, 0.0]]), np.array([[0.0, 1.0]]), resolution=8
    )
    np.testing.assert_allclose(starts[3 * 8 + 5, 0], [a[3] * 1.5, b[5]])  # row-major
    result = analysis.basins(DoubleWell(), starts, flow="native", grid_shape=(8, 8), box=3)
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
    result = analysis.basins(TwoTokens(), starts, flow="native")
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
