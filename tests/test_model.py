"""The energy model against independent references: the paper's closed-form update
(eq. 17), the LayerNorm Lagrangian, and the closed form of dE/dt."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import et_ode
from conftest import DIM, N_TOKENS, make_model, make_state


def _rel(a, b):
    return float(jnp.linalg.norm(a - b) / jnp.linalg.norm(b))


KEY_MASK = jax.random.bernoulli(jax.random.key(7), 0.6, (N_TOKENS, N_TOKENS))


@pytest.mark.parametrize("self_attention", [False, True])
@pytest.mark.parametrize("hopfield", ["relu", "softmax", "power"])
@pytest.mark.parametrize("masked", [False, True])
def test_autodiff_update_equals_paper_closed_form(self_attention, hopfield, masked):
    model = make_model(hopfield=hopfield, self_attention=self_attention)
    assert model.attention.Wq.shape == (2, 8, DIM)  # several heads
    x = make_state(seed=3)
    args = et_ode.Conditions(key_mask=KEY_MASK) if masked else None
    autodiff = model.vector_field(0.0, x, args)  # = -dE/dg with tau = 1
    closed = et_ode.closed_form_update(model, x, args)
    assert _rel(autodiff, closed) < 1e-10


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
