"""The paper's closed-form update (Hoover et al. 2023, eq. 17): a checked alternative
to `jax.grad` of the energy, used as an independent reference in the tests."""

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._attention import attention_logits_mask
from ._model import EnergyTransformer, _conditions


def closed_form_update(
    model: EnergyTransformer, x: Float[Array, "N D"], args=None
) -> Float[Array, "N D"]:
    """`-dE/dg` written out by hand.

    Attention, with `S[h, C, B] = softmax_B(beta Q_C . K_B)` over allowed keys:
    `-dE_ATT/dg_A = sum_h [ sum_C S[h,C,A] Wk_h^T Q_{h,C} + sum_B S[h,A,B] Wq_h^T K_{h,B} ]`.
    Hopfield: `sum_mu f(xi_mu . g_A) xi_mu` with `f = relu`, `softmax` or `relu^(n-1)`.
    External field: `lambda c_A`.
    """
    cond = _conditions(args)
    g = model.norm(x)
    att = model.attention
    q = jnp.einsum("hyd,nd->hny", att.Wq, g)
    k = jnp.einsum("hyd,nd->hny", att.Wk, g)
    allowed = attention_logits_mask(g.shape[0], cond.key_mask, att.self_attention)
    logits = jnp.where(allowed, att.beta * jnp.einsum("hcy,hby->hcb", q, k), -jnp.inf)
    has_key = jnp.any(allowed, axis=-1)
    weights = jax.nn.softmax(jnp.where(has_key[:, None], logits, 0.0), axis=-1)
    weights = jnp.where(allowed & has_key[:, None], weights, 0.0)  # [H, C(query), B(key)]
    from_keys = jnp.einsum("hca,hcy,hyd->ad", weights, q, att.Wk)
    from_queries = jnp.einsum("hab,hby,hyd->ad", weights, k, att.Wq)
    update = from_keys + from_queries

    hop = model.hopfield
    hidden = g @ hop.xi.T
    if hop.activation == "relu":
        act = jnp.maximum(hidden, 0.0)
    elif hop.activation == "softmax":
        act = jax.nn.softmax(hop.softmax_beta * hidden, axis=-1)
    else:
        act = jnp.maximum(hidden, 0.0) ** (hop.power - 1)
    update = update + act @ hop.xi
    if cond.field is not None:
        update = update + cond.field_strength * cond.field
    return update
