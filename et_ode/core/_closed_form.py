"""The paper's closed-form update (Hoover et al. 2023, eq. 17): a checked alternative
to `jax.grad` of the energy, used as an independent reference in the tests."""

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._attention import _edge_lse, attention_logits_mask
from ._model import EnergyTransformer, _conditions


def closed_form_update(
    model: EnergyTransformer, x: Float[Array, "N D"], args=None
) -> Float[Array, "N D"]:
    """`-dE/dg` written out by hand.

    Attention, with `S[h, C, B] = softmax_B(beta Q_C . K_B)` over allowed keys:
    `-dE_ATT/dg_A = sum_h [ sum_C S[h,C,A] Wk_h^T Q_{h,C} + sum_B S[h,A,B] Wq_h^T K_{h,B} ]`.
    Hopfield: `sum_mu f(xi_mu . g_A) xi_mu` with `f = relu`, `softmax` or `relu^(n-1)`.
    External field: `lambda c_A`. With an edge list (`Conditions.edges`) the softmax
    runs over each query's edges and the sums over `B` and `C` over the edges. The
    paper's update is unweighted: `Conditions.pair_weights` are refused.
    """
    cond = _conditions(args)
    if cond.pair_weights is not None:
        raise ValueError(
            "closed_form_update is the paper's unweighted update (eq. 17): it takes no "
            "Conditions.pair_weights; use model.vector_field for weighted attention."
        )
    g = model.norm(x)
    att = model.attention
    if "attention" not in model.terms:
        update = jnp.zeros_like(g)
    elif cond.edges is not None:
        update = _closed_form_edges(att, g, *cond.edges)
    else:
        q = jnp.einsum("hyd,nd->hny", att.Wq, g)
        k = jnp.einsum("hyd,nd->hny", att.Wk, g)
        allowed = attention_logits_mask(g.shape[0], cond.key_mask, att.self_attention)
        logits = jnp.where(
            allowed, att.head_betas[:, None, None] * jnp.einsum("hcy,hby->hcb", q, k), -jnp.inf
        )
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
    if "hopfield" in model.terms:
        update = update + act @ hop.xi
    if cond.field is not None:
        update = update + cond.field_strength * cond.field
    return update


def _closed_form_edges(att, g, queries, keys):
    """The attention part of eq. 17 restricted to the edges: `S_e` the softmax of the
    edge scores over each query's edges; `-dE/dg_A = sum_h [ sum_{e: B_e = A} S_e
    Wk_h^T Q_{h,C_e} + sum_{e: C_e = A} S_e Wq_h^T K_{h,B_e} ]`."""
    n = g.shape[0]
    q = jnp.einsum("hyd,nd->nhy", att.Wq, g)
    k = jnp.einsum("hyd,nd->nhy", att.Wk, g)
    valid = att._valid_edges(queries, keys)  # self-loops follow self_attention
    scores = att.inverse_temperature * jnp.sum(q[queries] * k[keys], axis=-1)  # [E, H]
    lse = _edge_lse(scores, queries, valid, n)
    weights = jnp.where(valid[:, None], jnp.exp(scores - lse[queries]), 0.0)
    from_keys = jax.ops.segment_sum(weights[..., None] * q[queries], keys, num_segments=n)
    from_queries = jax.ops.segment_sum(weights[..., None] * k[keys], queries, num_segments=n)
    return jnp.einsum("nhy,hyd->nd", from_keys, att.Wk) + jnp.einsum(
        "nhy,hyd->nd", from_queries, att.Wq
    )
