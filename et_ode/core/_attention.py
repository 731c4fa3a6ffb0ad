"""Energy attention: the attention term of the Energy Transformer's energy."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, PRNGKeyArray


def attention_logits_mask(
    n_tokens: int, key_mask: Bool[Array, "N N"] | None, self_attention: bool
) -> Bool[Array, "N N"]:
    """Which keys `B` each query `C` may use, as `allowed[C, B]`."""
    allowed = jnp.ones((n_tokens, n_tokens), bool)
    if not self_attention:
        allowed = allowed & ~jnp.eye(n_tokens, dtype=bool)
    if key_mask is not None:
        allowed = allowed & key_mask
    return allowed


class EnergyAttention(eqx.Module):
    """`E_ATT = -(1/beta) sum_h sum_C log sum_{B} exp(beta K[h,:,B] . Q[h,:,C])`.

    `K = Wk g`, `Q = Wq g` per head; there is no value matrix and no bias. The sum over
    keys `B` excludes `B = C` unless `self_attention` (the paper's main text excludes
    it, its appendix and public code include it), and is restricted further by an
    optional key mask `allowed[C, B]`. A query with no allowed key contributes zero.

    **Arguments:**

    - `dim`: token dimension `D`.
    - `n_heads`: number of heads `H`.
    - `head_dim`: inner dimension `Y` of each head.
    - `key`: PRNG key for the weights (normal, std 0.02 as in the paper's code).
    - `beta`: inverse temperature; default `1/sqrt(Y)`.
    - `self_attention`: include `B = C` in the sum over keys.
    """

    Wq: Float[Array, "H Y D"]
    Wk: Float[Array, "H Y D"]
    beta: float = eqx.field(static=True)
    self_attention: bool = eqx.field(static=True)

    def __init__(
        self,
        dim: int,
        n_heads: int,
        head_dim: int,
        *,
        key: PRNGKeyArray,
        beta: float | None = None,
        self_attention: bool = False,
        init_std: float = 0.02,
        dtype=None,
    ):
        dtype = dtype or jnp.float32
        kq, kk = jax.random.split(key)
        shape = (n_heads, head_dim, dim)
        self.Wq = init_std * jax.random.normal(kq, shape, dtype)
        self.Wk = init_std * jax.random.normal(kk, shape, dtype)
        self.beta = float(1.0 / math.sqrt(head_dim) if beta is None else beta)
        self.self_attention = bool(self_attention)

    def __check_init__(self):
        if not (math.isfinite(self.beta) and self.beta > 0):
            raise ValueError(f"beta must be positive and finite (got {self.beta}).")
        if self.Wq.ndim != 3 or self.Wq.shape != self.Wk.shape:
            raise ValueError(f"Wq and Wk must both be [H, Y, D] (got {self.Wq.shape} and "
                             f"{self.Wk.shape}).")

    def scores(self, g: Float[Array, "N D"]) -> Float[Array, "H N N"]:
        """`A[h, C, B] = Q[h,:,C] . K[h,:,B]` (query first)."""
        q = jnp.einsum("hyd,nd->hny", self.Wq, g)
        k = jnp.einsum("hyd,nd->hny", self.Wk, g)
        return jnp.einsum("hcy,hby->hcb", q, k)

    def __call__(
        self, g: Float[Array, "N D"], key_mask: Bool[Array, "N N"] | None = None
    ) -> Float[Array, ""]:
        allowed = attention_logits_mask(g.shape[0], key_mask, self.self_attention)
        has_key = jnp.any(allowed, axis=-1)
        logits = jnp.where(allowed, self.beta * self.scores(g), -jnp.inf)
        # Queries without any key would give log(0); keep them out of the graph entirely.
        logits = jnp.where(has_key[:, None], logits, 0.0)
        lse = jax.nn.logsumexp(logits, axis=-1)
        return -jnp.sum(jnp.where(has_key, lse, 0.0)) / self.beta
