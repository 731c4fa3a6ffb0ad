"""The paper's closed-form update (Hoover et al. 2023, eq. 17): `-dE/dg` written out by
hand, an independent reference for `jax.grad` of the energy.

Independent means written from the paper's formulas with none of the model's own
helpers: its own LayerNorm, mask, softmax and edge sums; it reads only the model's
parameters (`tests/test_model.py` checks that it imports no helper of the model's modules
and that it equals `jax.grad` of the energy with masks, self-attention on and off, edges,
each activation and per-head betas).
"""

import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from ._conditions import Conditions
from ._model import EnergyTransformer


def closed_form_update(
    model: EnergyTransformer, x: Float[Array, "N D"], args: Conditions | None = None
) -> Float[Array, "N D"]:
    """`-dE/dg` at the tokens `x` (`[N, D]`, one sample), by eq. 17.

    With `g = gamma (x - mean) / sqrt(var + eps) + delta` per token, `Q_{h,C} = Wq_h g_C`,
    `K_{h,B} = Wk_h g_B` and, over the keys `B` that query `C` may use,
    `S[h, C, B] = exp(beta_h Q_C . K_B) / sum_B' exp(beta_h Q_C . K_B')`:

    - attention: `sum_h [ sum_C S[h,C,A] Wk_h^T Q_{h,C} + sum_B S[h,A,B] Wq_h^T K_{h,B} ]`
      (a query with no key contributes nothing);
    - Hopfield: `sum_mu f(xi_mu . g_A) xi_mu` with `f = relu`, the softmax over `mu` at
      `softmax_beta`, or `relu^(n-1)` (with a pinned ReLU pattern, `h` where it is on);
    - external field: `lambda c_A`.

    The keys a query may use: every other token (itself too with `self_attention`),
    restricted to `Conditions.key_mask[C, B]`; or, with `Conditions.edges`, the listed
    pairs (a self-loop only with `self_attention`). The paper's update is unweighted:
    `Conditions.pair_weights` are refused. Clamping (`Conditions.clamped`) is the flow's,
    not the gradient's, and is not applied.
    """
    if args is None:
        args = Conditions()
    if args.pair_weights is not None:
        raise ValueError(
            "closed_form_update is the paper's unweighted update (eq. 17): it takes no "
            "Conditions.pair_weights; use model.vector_field for weighted attention."
        )
    g = _layer_norm(x, jnp.exp(model.norm.log_gamma), model.norm.delta, model.norm.eps)
    update = jnp.zeros_like(g)
    if "attention" in model.terms:
        att = model.attention
        betas = _betas(att)
        if args.edges is not None:
            update = update + _attention_on_edges(
                g, att.Wq, att.Wk, betas, *args.edges, att.self_attention
            )
        else:
            allowed = _allowed(g.shape[0], args.key_mask, att.self_attention)
            update = update + _attention_dense(g, att.Wq, att.Wk, betas, allowed)
    if "hopfield" in model.terms:
        hop = model.hopfield
        update = update + _hopfield(
            g, hop.xi, hop.activation, hop.softmax_beta, hop.power, hop.pattern
        )
    if args.field is not None:
        update = update + args.field_strength * args.field
    return update


def _layer_norm(x, gamma, delta, eps):
    """Per token: `gamma (x - mean) / sqrt(var + eps) + delta`, the population variance."""
    d = x.shape[-1]
    centred = x - jnp.sum(x, axis=-1, keepdims=True) / d
    variance = jnp.sum(centred**2, axis=-1, keepdims=True) / d
    return gamma * centred / jnp.sqrt(variance + eps) + delta


def _betas(att) -> Float[Array, " H"]:
    """Each head's inverse temperature, from the attention's fields: a value set by
    `with_beta`, else the learned `exp(log_beta)`, else the constructed `beta`."""
    heads = att.Wq.shape[0]
    if att.traced_beta is not None:
        value = att.traced_beta
    elif att.log_beta is not None:
        value = jnp.exp(att.log_beta)
    else:
        value = att.beta
    return jnp.broadcast_to(jnp.asarray(value, att.Wq.dtype), (heads,))


def _allowed(n: int, key_mask: Bool[Array, "N N"] | None, self_attention: bool):
    """`allowed[C, B]`: query `C` may use key `B`."""
    index = jnp.arange(n)
    allowed = jnp.ones((n, n), bool) if self_attention else index[:, None] != index[None, :]
    return allowed if key_mask is None else allowed & key_mask


def _attention_dense(g, wq, wk, betas, allowed) -> Float[Array, "N D"]:
    q = jnp.einsum("hyd,nd->hny", wq, g)  # [H, N, Y]
    k = jnp.einsum("hyd,nd->hny", wk, g)
    logits = betas[:, None, None] * jnp.einsum("hcy,hby->hcb", q, k)  # [H, C, B]
    peak = jnp.max(jnp.where(allowed, logits, -jnp.inf), axis=-1, keepdims=True)
    peak = jnp.where(jnp.isfinite(peak), peak, 0.0)  # a query with no key: all weights 0
    exps = jnp.where(allowed, jnp.exp(logits - peak), 0.0)
    total = jnp.sum(exps, axis=-1, keepdims=True)
    s = exps / jnp.where(total > 0, total, 1.0)  # S[h, C, B]
    from_keys = jnp.einsum("hca,hcy,hyd->ad", s, q, wk)  # A as a key of each query C
    from_queries = jnp.einsum("hab,hby,hyd->ad", s, k, wq)  # A as the query
    return from_keys + from_queries


def _attention_on_edges(
    g, wq, wk, betas, queries: Int[Array, " E"], keys: Int[Array, " E"], self_attention: bool
) -> Float[Array, "N D"]:
    """The attention part over an edge list: the softmax over each query's edges, the
    sums by scatter-adds over the edges."""
    n, heads = g.shape[0], wq.shape[0]
    q = jnp.einsum("hyd,nd->nhy", wq, g)  # [N, H, Y]
    k = jnp.einsum("hyd,nd->nhy", wk, g)
    used = jnp.ones(queries.shape, bool) if self_attention else queries != keys
    scores = betas * jnp.einsum("ehy,ehy->eh", q[queries], k[keys])  # [E, H]
    scores = jnp.where(used[:, None], scores, -jnp.inf)
    peak = jnp.full((n, heads), -jnp.inf, scores.dtype).at[queries].max(scores)
    peak = jnp.where(jnp.isfinite(peak), peak, 0.0)
    exps = jnp.where(used[:, None], jnp.exp(scores - peak[queries]), 0.0)
    total = jnp.zeros((n, heads), scores.dtype).at[queries].add(exps)
    s = exps / jnp.where(total > 0, total, 1.0)[queries]  # S_e per head
    from_keys = jnp.zeros_like(q).at[keys].add(s[..., None] * q[queries])
    from_queries = jnp.zeros_like(k).at[queries].add(s[..., None] * k[keys])
    return jnp.einsum("nhy,hyd->nd", from_keys, wk) + jnp.einsum("nhy,hyd->nd", from_queries, wq)


def _hopfield(g, xi, activation: str, softmax_beta, power, pattern) -> Float[Array, "N D"]:
    """`sum_mu f(h_mu) xi_mu`, `h = xi . g`; with a pinned `pattern` (`[N, K]`) of a
    kinked activation, `f = h` where it is on and 0 where off (`E = -1/2 sum pattern h^2`)."""
    hidden = g @ xi.T  # [N, K]
    if pattern is not None:
        f = jnp.where(pattern, hidden, 0.0)
    elif activation == "relu":
        f = jnp.maximum(hidden, 0.0)
    elif activation == "softmax":
        z = softmax_beta * hidden
        exps = jnp.exp(z - jnp.max(z, axis=-1, keepdims=True))
        f = exps / jnp.sum(exps, axis=-1, keepdims=True)
    else:
        f = jnp.maximum(hidden, 0.0) ** (power - 1)
    return f @ xi
