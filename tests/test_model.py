"""The energy model against independent references: the paper's closed-form update
(eq. 17), the LayerNorm Lagrangian, and the closed form of dE/dt."""

from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import et_ode
from conftest import DIM, N_TOKENS, make_model, make_state
from et_ode import analysis


def _rel(a, b):
    return float(jnp.linalg.norm(a - b) / jnp.linalg.norm(b))


KEY_MASK = jax.random.bernoulli(jax.random.key(7), 0.6, (N_TOKENS, N_TOKENS)).at[2].set(False)
# Edges as (query, key) pairs: a self-loop (0, 0), token 4 with no edge as a query
EDGES = (jnp.array([0, 0, 1, 1, 2, 3, 5, 5, 5]), jnp.array([0, 1, 0, 3, 5, 2, 1, 4, 5]))


def _minus_grad_of_energy(model, x, args):
    """`-dE/dg` by `jax.grad` of the energy as a function of `g`."""
    return -jax.grad(model.energy_of_g)(model.norm(x), args)


@pytest.mark.parametrize("self_attention", [False, True])
@pytest.mark.parametrize("hopfield", ["relu", "softmax", "power"])
@pytest.mark.parametrize("conditions", ["none", "key mask", "edges"])
def test_paper_closed_form_equals_the_gradient_of_the_energy(self_attention, hopfield, conditions):
    """Eq. 17, written with none of the model's helpers, against `jax.grad` of the
    energy (and the flow): every activation, self-attention on and off, all pairs, a key
    mask with a query that sees no key, and an edge list with a self-loop and a query
    without edges; two heads with distinct learned betas."""
    model = make_model(hopfield=hopfield, self_attention=self_attention)
    assert model.attention.Wq.shape == (2, 8, DIM)  # several heads
    x = make_state(seed=3)
    args = {
        "none": None,
        "key mask": et_ode.Conditions(key_mask=KEY_MASK),
        "edges": et_ode.Conditions(edges=EDGES),
    }[conditions]
    closed = et_ode.closed_form_update(model, x, args)
    assert _rel(_minus_grad_of_energy(model, x, args), closed) < 1e-12
    assert _rel(model.vector_field(0.0, x, args), closed) < 1e-12  # tau = 1
    learned = et_ode.EnergyTransformer(
        DIM, 2, 8, 24, key=jax.random.key(0), learn_beta=True, hopfield=hopfield,
        self_attention=self_attention, init_std=0.3, dtype=jnp.float64,
    )  # fmt: skip
    learned = eqx.tree_at(lambda m: m.attention.log_beta, learned, jnp.log(jnp.array([0.4, 2.5])))
    closed = et_ode.closed_form_update(learned, x, args)
    assert _rel(_minus_grad_of_energy(learned, x, args), closed) < 1e-12


def test_the_closed_form_uses_none_of_the_models_helpers():
    """Its module imports only the two types it is handed (`EnergyTransformer`,
    `Conditions`) from et_ode, and calls no method of the model: its LayerNorm, mask,
    softmax and edge sums are its own."""
    import ast

    path = Path(et_ode.__file__).parent / "core" / "_closed_form.py"
    tree = ast.parse(path.read_text())
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level > 0
        for alias in node.names
    }
    assert imported == {"EnergyTransformer", "Conditions"}
    calls = {
        node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }
    helpers = {name for name in dir(et_ode.EnergyTransformer) if not name.startswith("__")}
    helpers |= {name for name in dir(et_ode.EnergyAttention) if not name.startswith("__")}
    helpers |= {name for name in dir(et_ode.EnergyLayerNorm) if not name.startswith("__")}
    assert not calls & helpers, calls & helpers


def test_the_closed_form_with_a_field_and_a_pinned_pattern():
    model = make_model()
    x = make_state(seed=3)
    args = et_ode.Conditions(field=make_state(seed=4), field_strength=0.7, key_mask=KEY_MASK)
    closed = et_ode.closed_form_update(model, x, args)
    assert _rel(_minus_grad_of_energy(model, x, args), closed) < 1e-12
    hidden = model.norm(x) @ model.hopfield.xi.T
    pattern = jax.random.bernoulli(jax.random.key(9), 0.5, hidden.shape)  # not sign(h)
    pinned = eqx.tree_at(lambda m: m.hopfield, model, model.hopfield.with_pattern(pattern))
    closed = et_ode.closed_form_update(pinned, x, args)
    assert _rel(_minus_grad_of_energy(pinned, x, args), closed) < 1e-12
    assert _rel(et_ode.closed_form_update(model, x, args), closed) > 1e-3  # the pattern counts


def test_key_mask_with_a_query_that_sees_no_key():
    model = make_model()
    mask = jnp.ones((N_TOKENS, N_TOKENS), bool).at[2].set(False)
    x = make_state(seed=3)
    args = et_ode.Conditions(key_mask=mask)
    assert np.isfinite(float(model.energy(x, args)))
    assert _rel(model.vector_field(0.0, x, args), et_ode.closed_form_update(model, x, args)) < 1e-10


def test_external_field_update():
    model = make_model()
    x = make_state(seed=3)
    field = make_state(seed=4)
    args = et_ode.Conditions(field=field, field_strength=0.7)
    diff = model.vector_field(0.0, x, args) - model.vector_field(0.0, x)
    np.testing.assert_allclose(diff, 0.7 * field, rtol=1e-12, atol=1e-12)


def test_layernorm_is_gradient_of_lagrangian_and_gamma_positive():
    norm = et_ode.EnergyLayerNorm(DIM, gamma=0.8)
    norm = eqx.tree_at(lambda n: n.delta, norm, jnp.linspace(-1, 1, DIM))
    x = make_state(seed=5)
    grads = jax.vmap(jax.grad(norm.lagrangian))(x)
    np.testing.assert_allclose(grads, norm(x), rtol=1e-12, atol=1e-12)
    assert float(norm.gamma) == pytest.approx(0.8)
    # Any real log_gamma gives a positive gamma.
    assert float(eqx.tree_at(lambda n: n.log_gamma, norm, jnp.asarray(-50.0)).gamma) > 0
    with pytest.raises(ValueError, match="gamma must be positive"):
        et_ode.EnergyLayerNorm(DIM, gamma=-1.0)


def test_layernorm_jacobian_closed_form():
    """`M = dg/dx` per token from the closed form equals jax.jacfwd, and is PSD."""
    norm = et_ode.EnergyLayerNorm(DIM, gamma=1.3)
    x = make_state(seed=6)
    w = make_state(seed=7)
    jac = jax.vmap(jax.jacfwd(lambda xa: norm(xa[None])[0]))(x)  # [N, D, D]
    expected = jnp.einsum("nd,nde,ne->n", w, jac, w)
    np.testing.assert_allclose(norm.jacobian_quadratic_form(x, w), expected, rtol=1e-10)
    np.testing.assert_allclose(jac, jnp.swapaxes(jac, 1, 2), atol=1e-12)
    assert float(jnp.linalg.eigvalsh(jac).min()) > -1e-12


@pytest.mark.parametrize("flow", ["native", "projected"])
def test_dEdt_formula_equals_chain_rule(model, x0, flow):
    v = model.vector_field(0.0, x0, None, flow)
    chain = jax.jvp(model.energy, (x0,), (v,))[1]
    assert float(model.dEdt(x0, flow=flow)) == pytest.approx(float(chain), rel=1e-10)
    assert float(model.dEdt(x0, flow=flow)) < 0


def test_energy_parts_and_update_parts_add_up(model, x0):
    field = make_state(seed=9)
    args = et_ode.Conditions(field=field)
    parts = model.energy_parts(x0, args)
    assert float(sum(parts.values())) == pytest.approx(float(model.energy(x0, args)), rel=1e-12)
    update = sum(model.update_parts(x0, args).values())
    np.testing.assert_allclose(update, model.vector_field(0.0, x0, args), rtol=1e-12, atol=1e-12)


def test_residual_is_tangent_and_projected_flow_keeps_scale(model, x0):
    g_res = model.residual(x0)
    g = model.norm(x0) - model.norm.delta
    np.testing.assert_allclose(jnp.mean(g_res, axis=-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(jnp.sum(g_res * g, axis=-1), 0.0, atol=1e-10)
    v = model.vector_field(0.0, x0, None, "projected")
    ds = jax.jvp(model.norm.scale, (x0,), (v,))[1]
    np.testing.assert_allclose(ds, 0.0, atol=1e-12)
    dmean = jnp.mean(v, axis=-1)
    np.testing.assert_allclose(dmean, 0.0, atol=1e-12)


def test_manifold_round_trip_and_clamping(model, x0):
    clamped = jnp.arange(N_TOKENS) < 2
    args = et_ode.Conditions(clamped=clamped)
    v = model.to_manifold(x0, args)
    np.testing.assert_allclose(jnp.linalg.norm(v, axis=-1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(model.from_manifold(v, x0, args), x0, rtol=1e-12, atol=1e-12)
    vf = model.vector_field(0.0, x0, args)
    assert float(jnp.abs(vf[:2]).max()) == 0.0
    assert float(jnp.abs(vf[2:]).max()) > 0.0
    assert float(jnp.abs(model.residual(x0, args)[:2]).max()) == 0.0


def test_float32_by_default_and_exact_in_float64():
    model32 = et_ode.EnergyTransformer(DIM, 2, 8, 24, key=jax.random.key(0))
    assert model32.attention.Wq.dtype == jnp.float32  # even with x64 enabled
    model64 = make_model()
    assert model64.hopfield.xi.dtype == jnp.float64
    assert model64.energy(make_state()).dtype == jnp.float64
    # the same weights in float64: float32 arithmetic is within its rounding, and not
    # exact (it really ran in float32); float64 equals the independent eq. 17 (1e-12)
    wide = analysis.cast(model32, jnp.float64)
    x = make_state()
    e32, e64 = float(model32.energy(x.astype(jnp.float32))), float(wide.energy(x))
    assert 1e-12 < abs(e32 - e64) / abs(e64) < 1e-5
    closed = et_ode.closed_form_update(wide, x)
    assert _rel(-jax.grad(wide.energy_of_g)(wide.norm(x)), closed) < 1e-12


def test_constructor_rejects_bad_sizes():
    with pytest.raises(ValueError, match="n_heads must be a positive integer"):
        et_ode.EnergyTransformer(DIM, 0, 8, 24, key=jax.random.key(0))
    with pytest.raises(ValueError, match="tau must be positive"):
        et_ode.EnergyTransformer(DIM, 2, 8, 24, key=jax.random.key(0), tau=0.0)


def test_constructor_rejects_unknown_activation(no_runtime_types):
    # no_runtime_types: "tanh" is not an `Activation`, which the suite's run-time type
    # checks would refuse before the constructor's own message, the one users get.
    with pytest.raises(ValueError, match="Hopfield activation must be one of"):
        et_ode.EnergyTransformer(DIM, 2, 8, 24, key=jax.random.key(0), hopfield="tanh")
