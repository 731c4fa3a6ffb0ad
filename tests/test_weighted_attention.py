"""Weighted attention (issue 51, item 1): a real weight per allowed pair and head inside
the attention's exponent, `E_ATT = -(1/beta) sum_h sum_C log sum_B exp(beta w[h,C,B]
K_B . Q_C)` (the paper's graph classifier, appendix B.2), as `Conditions.pair_weights`:
against a NumPy float64 reference written here from that formula (not the model's
masking), dense equal to sparse, a weight of one equal to no weight bit for bit, a
weight of zero an allowed pair with logit zero (never a dropped one), and the energy
still an energy along a solve (it descends; its gradient in the weights matches finite
differences). The sharded edge energy with weights: `test_sparse_attention.py`. Per-head
learned inverse temperatures (item 2, `learn_beta`): equal heads are the scalar model,
distinct ones match the formula with `beta_h`, their gradient matches finite
differences, one compiled program serves every value, and the lenses set all heads or
one."""

import re
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import et_ode
from conftest import DIM, make_model, runtime_types_off
from et_ode import solvers

N = 9
HEADS = 2  # conftest's make_model


def _reference(model, x, allowed, weights, betas=None):
    """The weighted attention energy in NumPy float64 from the formula: `allowed[C, B]`,
    `weights[h, C, B]`, `betas[h]` (default the model's scalar `beta` for every head);
    a query without an allowed key contributes nothing."""
    att = model.attention
    g = np.asarray(model.norm(x), np.float64)
    q = np.einsum("hyd,nd->hny", np.asarray(att.Wq), g)
    k = np.einsum("hyd,nd->hny", np.asarray(att.Wk), g)
    total = 0.0
    for h in range(q.shape[0]):
        beta = float(att.beta) if betas is None else float(betas[h])
        for c in range(g.shape[0]):
            keys = [b for b in range(g.shape[0]) if allowed[c, b]]
            if not keys:
                continue
            logits = np.array([beta * weights[h, c, b] * (k[h, b] @ q[h, c]) for b in keys])
            top = logits.max()
            total += (top + np.log(np.sum(np.exp(logits - top)))) / beta
    return -total


def _problem(seed=0):
    """A state, a random mask without self-pairs (query 4 has no key, query 6 one key),
    and weights of both signs with some exact zeros."""
    rng = np.random.default_rng(seed)
    allowed = rng.random((N, N)) < 0.5
    np.fill_diagonal(allowed, False)
    allowed[4] = False
    allowed[6] = False
    allowed[6, 2] = True
    weights = rng.normal(size=(HEADS, N, N))
    weights[:, 1, :] = 0.0  # query 1: every allowed pair at logit zero
    weights[0, 3, allowed[3]] = 0.0
    x = jax.random.normal(jax.random.key(seed + 1), (N, DIM), jnp.float64)
    return x, allowed, weights


def _edges(allowed, weights):
    queries, keys = np.nonzero(allowed)
    order = np.random.default_rng(3).permutation(len(queries))  # no order to rely on
    queries, keys = queries[order].astype(np.int32), keys[order].astype(np.int32)
    return (queries, keys), jnp.asarray(weights[:, queries, keys].T)


def test_weighted_energy_against_the_formula_dense_and_sparse():
    model = make_model()
    x, allowed, weights = _problem()
    dense = et_ode.Conditions(key_mask=jnp.asarray(allowed), pair_weights=jnp.asarray(weights))
    edges, edge_weights = _edges(allowed, weights)
    sparse = et_ode.Conditions(edges=edges, pair_weights=edge_weights)
    expected = _reference(model, x, allowed, weights)
    for conditions in (dense, sparse):
        got = float(model.energy_parts(x, conditions)["attention"])
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(
        model.vector_field(0.0, x, sparse), model.vector_field(0.0, x, dense), rtol=0, atol=1e-12
    )
    # zero weights are allowed pairs at logit zero: query 1 gives log(its key count)
    only_one = np.zeros_like(allowed)
    only_one[1] = allowed[1]
    alone = et_ode.Conditions(key_mask=jnp.asarray(only_one), pair_weights=jnp.asarray(weights))
    count = int(allowed[1].sum())
    assert count > 1
    beta = float(model.attention.beta)
    assert float(model.energy_parts(x, alone)["attention"]) == pytest.approx(
        -HEADS * np.log(count) / beta, rel=1e-13
    )
    # the weights move the field, and the paper's unweighted closed form refuses them
    with pytest.raises(ValueError, match="unweighted"):
        et_ode.closed_form_update(model, x, dense)
    assert not np.allclose(
        model.vector_field(0.0, x, dense),
        model.vector_field(0.0, x, et_ode.Conditions(key_mask=jnp.asarray(allowed))),
    )


def test_a_weight_of_one_is_no_weight_bit_for_bit():
    """Weights of one beside a key mask, beside edges and for every pair: the fields of
    both flows and the energy equal the unweighted ones exactly."""
    model = make_model()
    x, allowed, _ = _problem(1)
    ones = np.ones((HEADS, N, N))
    edges, edge_ones = _edges(allowed, ones)
    pairs = [
        (et_ode.Conditions(key_mask=jnp.asarray(allowed)), dict(pair_weights=jnp.asarray(ones))),
        (et_ode.Conditions(edges=edges), dict(pair_weights=edge_ones)),
        (et_ode.Conditions(), dict(pair_weights=jnp.asarray(ones))),  # every pair
    ]
    for plain, weighted in pairs:
        with_weights = et_ode.Conditions(**{**vars_of(plain), **weighted})
        for flow in ("native", "projected"):
            np.testing.assert_array_equal(
                model.vector_field(0.0, x, with_weights, flow),
                model.vector_field(0.0, x, plain, flow),
            )
        assert float(model.energy(x, with_weights)) == float(model.energy(x, plain))


def vars_of(conditions):
    return dict(key_mask=conditions.key_mask, edges=conditions.edges)


def test_a_weighted_flow_descends_and_its_weights_get_finite_difference_gradients():
    """The projected flow with weighted edges to t = 20 (tsit5): E falls at every saved
    time; the gradient of the end state's energy in the weights (checkpoint adjoint)
    equals central differences to 1e-6 relative."""
    model = make_model(hopfield="softmax")
    x, allowed, weights = _problem(2)
    edges, edge_weights = _edges(allowed, weights)

    def end_energy(w):
        conditions = et_ode.Conditions(edges=edges, pair_weights=w)
        sol = solvers.solve(
            model, x, args=conditions, t1=2.0, solver="tsit5", rtol=1e-10, atol=1e-12
        )
        return model.energy(sol.x_final, conditions)

    sol = solvers.solve(
        model,
        x,
        args=et_ode.Conditions(edges=edges, pair_weights=edge_weights),
        t1=20.0,
        flow="projected",
        solver="tsit5",
        rtol=1e-8,
        atol=1e-10,
        save=jnp.linspace(0.0, 20.0, 21),
        save_energy=True,
    )
    assert np.all(np.diff(np.asarray(sol.energies)) < 0)
    gradient = np.asarray(jax.grad(end_energy)(edge_weights))
    rng = np.random.default_rng(4)
    for e, h in zip(rng.integers(0, len(edges[0]), 3), rng.integers(0, HEADS, 3)):
        step = np.zeros(edge_weights.shape)
        step[e, h] = 1e-5
        difference = (end_energy(edge_weights + step) - end_energy(edge_weights - step)) / 2e-5
        assert float(difference) == pytest.approx(gradient[e, h], rel=1e-6, abs=1e-9)


@pytest.mark.parametrize(
    "fields, words",
    [
        (
            dict(pair_weights=np.ones((HEADS, N, N - 1))),
            "expected [H, 9, 9] (heads, queries, keys)",
        ),
        (dict(pair_weights=np.ones((3, N, N))), "has 3 heads"),
        (dict(pair_weights=np.full((HEADS, N, N), np.nan)), "NaN or inf"),
        (dict(pair_weights=np.ones((HEADS, N, N), int)), "floating-point"),
        (
            dict(edges=(np.array([0, 1]), np.array([1, 2])), pair_weights=np.ones((3, HEADS))),
            "expected [2, H] (edges, heads)",
        ),
    ],
)
def test_refusals(fields, words, no_runtime_types):
    model = make_model()
    x = jax.random.normal(jax.random.key(0), (N, DIM), jnp.float64)
    with (
        runtime_types_off(),
        pytest.raises(ValueError, match=re.escape(words)),
    ):
        solvers.solve(model, x, args=et_ode.Conditions(**fields), t1=0.1)


# ------------------------------------------------------ per-head, learned inverse temperatures
def _learned(log_betas=None):
    model = et_ode.EnergyTransformer(
        DIM, HEADS, 8, 24, key=jax.random.key(0), init_std=0.3, dtype=jnp.float64, learn_beta=True
    )
    if log_betas is not None:
        model = eqx.tree_at(lambda m: m.attention.log_beta, model, jnp.asarray(log_betas))
    return model


def test_equal_learned_betas_are_the_scalar_model_and_distinct_ones_the_formula():
    scalar, learned = make_model(), _learned()
    np.testing.assert_allclose(learned.attention.head_betas, [scalar.attention.beta] * HEADS)
    x, allowed, weights = _problem(5)
    edges, edge_weights = _edges(allowed, weights)
    for conditions in (
        et_ode.Conditions(),
        et_ode.Conditions(key_mask=jnp.asarray(allowed)),
        et_ode.Conditions(edges=edges, pair_weights=edge_weights),
    ):
        assert float(learned.energy(x, conditions)) == pytest.approx(
            float(scalar.energy(x, conditions)), rel=1e-14
        )
        np.testing.assert_allclose(
            learned.vector_field(0.0, x, conditions),
            scalar.vector_field(0.0, x, conditions),
            rtol=0,
            atol=1e-13,
        )
    betas = np.array([0.2, 0.9])  # the pair measured on the authors' classifier
    distinct = _learned(np.log(betas))
    expected = _reference(distinct, x, allowed, weights, betas)
    dense = et_ode.Conditions(key_mask=jnp.asarray(allowed), pair_weights=jnp.asarray(weights))
    sparse = et_ode.Conditions(edges=edges, pair_weights=edge_weights)
    for conditions in (dense, sparse):
        got = float(distinct.energy_parts(x, conditions)["attention"])
        assert got == pytest.approx(expected, rel=1e-12)
    np.testing.assert_allclose(  # the paper's closed form knows per-head betas too
        et_ode.closed_form_update(distinct, x, et_ode.Conditions(key_mask=jnp.asarray(allowed))),
        distinct.vector_field(0.0, x, et_ode.Conditions(key_mask=jnp.asarray(allowed))),
        rtol=0,
        atol=1e-12,
    )


def test_learned_betas_get_gradients_one_program_serves_every_value_and_lenses_set_them():
    x, allowed, _ = _problem(6)
    conditions = et_ode.Conditions(key_mask=jnp.asarray(allowed))
    log_betas = np.log([0.3, 0.6])

    def energy(values):
        return _learned(values).energy(x, conditions)

    gradient = np.asarray(jax.grad(energy)(jnp.asarray(log_betas)))
    for h in range(HEADS):
        step = np.zeros(HEADS)
        step[h] = 1e-6
        difference = (energy(log_betas + step) - energy(log_betas - step)) / 2e-6
        assert float(difference) == pytest.approx(gradient[h], rel=1e-6)
    assert np.all(gradient != 0)
    model = _learned(log_betas)
    at = jax.jit(lambda b: model.attention.with_beta(b)(model.norm(x), conditions.key_mask))
    first, second = at(jnp.array([0.3, 0.6])), at(jnp.array([0.5, 0.5]))
    assert at._cache_size() == 1 and float(first) != float(second)
    assert float(first) == pytest.approx(float(model.energy_parts(x, conditions)["attention"]))
    # "beta" scales every head (its constructed value: the model as it is); "beta_1" one
    same = model.lenses["beta"](model, conditions, model.attention.beta)[0]
    np.testing.assert_allclose(same.attention.head_betas, [0.3, 0.6], rtol=1e-14)
    doubled = model.lenses["beta"](model, conditions, 2 * model.attention.beta)[0]
    np.testing.assert_allclose(doubled.attention.head_betas, [0.6, 1.2], rtol=1e-14)
    one = model.lenses["beta_1"](model, conditions, 0.9)[0]
    np.testing.assert_allclose(one.attention.head_betas, [0.3, 0.9], rtol=1e-14)
    with runtime_types_off(), pytest.raises(ValueError, match="one value per head"):
        model.attention.with_beta(jnp.ones(3))
    # a float64 value sets a float32 model's head in float32 (no promotion, no warning)
    narrow = et_ode.EnergyTransformer(
        DIM, HEADS, 8, 24, key=jax.random.key(0), dtype=jnp.float32, learn_beta=True
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        set_one = narrow.lenses["beta_0"](narrow, None, jnp.float64(0.9))[0]
    assert set_one.attention.head_betas.dtype == jnp.float32
    # as "beta", a head's beta refuses a model whose energy has no attention term
    hopfield_only = et_ode.EnergyTransformer(
        DIM, HEADS, 8, 24, key=jax.random.key(0), learn_beta=True, terms=("hopfield",)
    )
    with pytest.raises(ValueError, match="beta_1 changes nothing"):
        hopfield_only.lenses["beta_1"](hopfield_only, None, 0.5)
