"""Energy attention: the attention term of the Energy Transformer's energy."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.sharding import Mesh, PartitionSpec
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

EDGE_AXIS = "edges"
EXCLUSIVE = (
    "key_mask and edges are mutually exclusive: give the allowed pairs either "
    "as a dense key_mask or as an edge list, not both."
)


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


# Edges per chunk of the score computation: the gathered `[chunk, H, Y]` rows are the
# only per-edge arrays with a `Y` axis, so memory stays O(E H + chunk H Y).
EDGE_CHUNK = 1 << 16


def _gathered_dot(
    q: Float[Array, "N H Y"],
    k: Float[Array, "N H Y"],
    queries: Int[Array, " E"],
    keys: Int[Array, " E"],
    chunk: int | None = None,
) -> Float[Array, "E H"]:
    """`out[e, h] = q[queries[e], h] . k[keys[e], h]`, chunk by chunk.

    Written plainly (`sum(q[queries] * k[keys], -1)`), XLA on CPU materialises both
    gathers, `[E, H, Y]` each, and autodiff keeps them as residuals and builds an
    `[E, H, Y]` scatter update. Here a `lax.map` over chunks of edges with a
    rematerialised body keeps one chunk of gathered rows at a time: reverse mode
    recomputes the chunk's rows and scatter-adds its cotangents into `[N, H, Y]`
    accumulators, up to second derivatives (the gradient of a loss through the vector
    field). Plain JAX (no custom rule), so forward mode works as usual."""
    chunk = EDGE_CHUNK if chunk is None else chunk
    n_edges = queries.shape[0]
    n_chunks = max(1, -(-n_edges // chunk))
    if n_chunks == 1:
        return jnp.sum(q[queries] * k[keys], axis=-1)
    size = -(-n_edges // n_chunks)
    pad = n_chunks * size - n_edges  # fewer than n_chunks; index 0, sliced off below
    queries, keys = (jnp.pad(i, (0, pad)).reshape(n_chunks, size) for i in (queries, keys))

    def one(chunk_indices):
        rows, cols = chunk_indices
        return jnp.sum(q[rows] * k[cols], axis=-1)

    # Twice: differentiating hoists the known (forward) part of a rematerialised body
    # out of its `checkpoint`; the second keeps that part rematerialised too, so a
    # gradient of the vector field (a second derivative) stores no `[E, H, Y]` either.
    out = jax.lax.map(jax.checkpoint(jax.checkpoint(one)), (queries, keys))
    return out.reshape(n_chunks * size, -1)[:n_edges]


def _edge_lse(
    scores: Float[Array, "E H"],
    queries: Int[Array, " E"],
    valid: Bool[Array, " E"],
    n_tokens: int,
    combine_max=lambda m: m,
    combine_sum=lambda z: z,
) -> Float[Array, "N H"]:
    """`lse[C, h] = log sum_{valid e: queries[e] = C} exp(scores[e, h])` by segment
    reductions; zero for a query without a valid edge. `combine_max`/`combine_sum`
    combine partial per-query reductions over edge shards (`pmax`/`psum`) when the
    edges are split over devices; the identity on one device."""
    scores = jnp.where(valid[:, None], scores, -jnp.inf)
    # The log-sum-exp does not depend on the shift: no gradient through it (none
    # through the max, whose derivative at ties is arbitrary, nor through `pmax`,
    # which has no differentiation rule).
    peak = combine_max(
        jax.ops.segment_max(jax.lax.stop_gradient(scores), queries, num_segments=n_tokens)
    )
    has_edge = jnp.isfinite(peak)  # segment_max of no (valid) edge is -inf
    peak = jnp.where(has_edge, peak, 0.0)
    total = combine_sum(
        jax.ops.segment_sum(jnp.exp(scores - peak[queries]), queries, num_segments=n_tokens)
    )
    return jnp.where(has_edge, jnp.log(jnp.where(has_edge, total, 1.0)) + peak, 0.0)


def _summed(lse, beta) -> Float[Array, ""]:
    """`-sum_h (1/beta_h) sum_C lse`: `beta` a scalar (divided once, after the sum, as
    always) or one per head, broadcast against `lse`."""
    return -jnp.sum(lse) / beta if jnp.ndim(beta) == 0 else -jnp.sum(lse / beta)


class EnergyAttention(eqx.Module):
    """`E_ATT = -(1/beta) sum_h sum_C log sum_{B} exp(beta K[h,:,B] . Q[h,:,C])`.

    `K = Wk g`, `Q = Wq g` per head; there is no value matrix and no bias. The sum over
    keys `B` excludes `B = C` unless `self_attention` (the paper's main text excludes
    it, its appendix and public code include it), and is restricted further by an
    optional key mask `allowed[C, B]`, or given instead by an edge list. A query with
    no allowed key contributes zero.

    **Pair weights** (graph classification, the paper's appendix B.2: `A_hat`): a real
    weight `w[h, C, B]` per allowed pair and head multiplies the score inside the
    exponent, `E_ATT = -(1/beta) sum_h sum_C log sum_B exp(beta w[h,C,B] K_B . Q_C)`
    (query first, as the key mask: the paper's `A_hat[h, B, C]` transposed); with an
    edge list one weight per edge and head, `[E, H]`. A weight of zero is an allowed pair
    whose logit is zero, never a dropped one: the key mask (or the edge list) alone says
    which pairs are allowed. The weights are conditions, fixed along a flow, so `E`
    stays an energy.

    **Edge lists** (`edges = (queries, keys)`, two integer arrays `[E]`: query
    `queries[e]` may attend to key `keys[e]`): the same energy by segment reductions
    over the edges, in memory `O(E H)` (no `[N, N]` array, gradients included):
    per edge `s_e = beta K[h,:,B_e] . Q[h,:,C_e]`, per query
    `lse_C = log sum_{e: C_e = C} exp(s_e)`, `E_ATT = -(1/beta) sum_h sum_C lse_C`.
    The rules, chosen so that an edge list and the key mask built from the same pairs
    give the same energy:

    - self-loops `(C, C)` follow `self_attention`, as the diagonal of a key mask does:
      they count with `self_attention=True` and are ignored with `False`;
    - an edge list is a set of pairs, as a key mask is: no pair may be listed twice.
      `Conditions` refuses duplicates in concrete edges (with the fix:
      `np.unique(np.stack([queries, keys], 1), axis=0)`). Edges traced inside `jit`
      or `vmap` cannot be checked (deduplication has no static shape there): they
      must be duplicate-free, as every loader of `et_ode.tasks` returns them. A pair
      that slipped through `m` times would weigh its key by `m` (add `log m` to its
      logit), which no key mask expresses.

    **Arguments:**

    - `dim`: token dimension `D`.
    - `n_heads`: number of heads `H`.
    - `head_dim`: inner dimension `Y` of each head.
    - `key`: PRNG key for the weights (normal, std 0.02 as in the paper's code).
    - `beta`: inverse temperature; default `1/sqrt(Y)`. A static field (part of the
      compiled program): `with_beta` gives a copy whose inverse temperature is an array
      instead, so that one compiled program serves every value (what
      `analysis.continuation(..., parameter="beta")` follows).
    - `self_attention`: include `B = C` in the sum over keys.
    - `learn_beta`: one inverse temperature per head, a parameter (the paper's appendix
      B.1 lists it among the learned weights), stored as `log_beta` (`[H]`, so that
      `beta_h = exp(log_beta_h)` is positive by construction) and started at `beta`.
      Each head's energy is then `-(1/beta_h) sum_C lse_C`: with every `beta_h` equal to
      `beta` it is the scalar model's.
    """

    Wq: Float[Array, "H Y D"]
    Wk: Float[Array, "H Y D"]
    beta: float = eqx.field(static=True)
    self_attention: bool = eqx.field(static=True)
    # Set only by `with_beta`; None adds no leaf, so checkpoints keep their format.
    traced_beta: Float[Array, ""] | Float[Array, " H"] | None = None
    # Per-head learned inverse temperatures (`learn_beta`); None: the static `beta`.
    log_beta: Float[Array, " H"] | None = None

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
        learn_beta: bool = False,
    ):
        dtype = dtype or jnp.float32
        kq, kk = jax.random.split(key)
        shape = (n_heads, head_dim, dim)
        self.Wq = init_std * jax.random.normal(kq, shape, dtype)
        self.Wk = init_std * jax.random.normal(kk, shape, dtype)
        self.beta = float(1.0 / math.sqrt(head_dim) if beta is None else beta)
        self.self_attention = bool(self_attention)
        self.traced_beta = None
        self.log_beta = jnp.full((n_heads,), math.log(self.beta), dtype) if learn_beta else None

    @property
    def inverse_temperature(self) -> Float[Array, ""] | Float[Array, " H"] | float:
        """The inverse temperature the energy uses: `with_beta`'s value where one was
        given, else the learned per-head `exp(log_beta)` (`[H]`), else `beta`."""
        if self.traced_beta is not None:
            return self.traced_beta
        if self.log_beta is not None:
            return jnp.exp(self.log_beta)
        return self.beta

    @property
    def head_betas(self) -> Float[Array, " H"]:
        """Each head's inverse temperature (`[H]`)."""
        return jnp.broadcast_to(jnp.asarray(self.inverse_temperature), (self.Wq.shape[0],))

    def with_beta(self, beta) -> "EnergyAttention":
        """A copy whose inverse temperature is the array `beta` (it may be traced), the
        weights shared: a scalar for every head together (where the heads have learned
        betas, each scaled by `beta / self.beta`, so that `beta = self.beta` is the model
        as it is), or `[H]`, one per head. `beta` (the static field) keeps the
        constructed value. A copy with a traced value is for computing, not for saving:
        its extra leaf changes the serialised format."""
        value = jnp.asarray(beta, self.Wq.dtype)
        heads = self.Wq.shape[0]
        if value.ndim == 0 and self.log_beta is not None:
            value = jnp.exp(self.log_beta) * (value / self.beta)
        elif value.shape not in ((), (heads,)):
            raise ValueError(
                f"with_beta needs a scalar or one value per head [{heads}] (got shape "
                f"{value.shape})."
            )
        return eqx.tree_at(lambda m: m.traced_beta, self, value, is_leaf=lambda leaf: leaf is None)

    def __check_init__(self):
        if not (math.isfinite(self.beta) and self.beta > 0):
            raise ValueError(f"beta must be positive and finite (got {self.beta}).")
        if self.Wq.ndim != 3 or self.Wq.shape != self.Wk.shape:
            raise ValueError(
                f"Wq and Wk must both be [H, Y, D] (got {self.Wq.shape} and {self.Wk.shape})."
            )
        if self.log_beta is not None and self.log_beta.shape != self.Wq.shape[:1]:
            raise ValueError(
                f"log_beta must hold one value per head, [{self.Wq.shape[0]}] (got shape "
                f"{self.log_beta.shape})."
            )

    def scores(self, g: Float[Array, "N D"]) -> Float[Array, "H N N"]:
        """`A[h, C, B] = Q[h,:,C] . K[h,:,B]` (query first)."""
        q = jnp.einsum("hyd,nd->hny", self.Wq, g)
        k = jnp.einsum("hyd,nd->hny", self.Wk, g)
        return jnp.einsum("hcy,hby->hcb", q, k)

    def edge_scores(
        self, g: Float[Array, "N D"], queries: Int[Array, " E"], keys: Int[Array, " E"]
    ) -> Float[Array, "E H"]:
        """`s[e, h] = beta_h Q[h,:,queries[e]] . K[h,:,keys[e]]`, one score per edge."""
        q = jnp.einsum("hyd,nd->nhy", self.Wq, g)
        k = jnp.einsum("hyd,nd->nhy", self.Wk, g)
        return self.inverse_temperature * _gathered_dot(q, k, queries, keys)  # beta_h: [H]

    def edge_energy(
        self,
        g: Float[Array, "N D"],
        queries: Int[Array, " E"],
        keys: Int[Array, " E"],
        *,
        weights: Float[Array, "E H"] | None = None,
        mesh: Mesh | None = None,
        axis_name: str = EDGE_AXIS,
    ) -> Float[Array, ""]:
        """The attention energy from an edge list (see the class docstring), each edge's
        scores multiplied by its `weights` (`[E, H]`, one per head) where given.

        With `mesh`, the edges are split over the mesh axis `axis_name` (padded to a
        multiple of its size with ignored edges): each device reduces its own edges
        per query, and the partial maxima and sums are combined over devices
        (`pmax`, `psum`) with `jax.shard_map`; `g` and the weights are replicated. The
        result equals the one-device energy up to the order of the sums, and so does
        its gradient.
        """
        n_tokens = g.shape[0]
        if weights is None:
            weights = jnp.ones((queries.shape[0], 1), g.dtype)
        if mesh is None:
            valid = self._valid_edges(queries, keys)
            scores = weights * self.edge_scores(g, queries, keys)
            lse = _edge_lse(scores, queries, valid, n_tokens)
            return _summed(lse, self.inverse_temperature)
        n_shards = mesh.shape[axis_name]
        pad = -queries.shape[0] % n_shards
        present = jnp.arange(queries.shape[0] + pad) < queries.shape[0]
        queries, keys = (jnp.pad(i, (0, pad)) for i in (queries, keys))
        weights = jnp.pad(weights, ((0, pad), (0, 0)))

        def local(module, g_, queries_, keys_, present_, weights_):
            valid = present_ & module._valid_edges(queries_, keys_)
            lse = _edge_lse(
                weights_ * module.edge_scores(g_, queries_, keys_),
                queries_,
                valid,
                n_tokens,
                lambda m: jax.lax.pmax(m, axis_name),
                lambda z: jax.lax.psum(z, axis_name),
            )
            return _summed(lse, module.inverse_temperature)

        edge, replicated = PartitionSpec(axis_name), PartitionSpec()
        sharded = jax.shard_map(
            local,
            mesh=mesh,
            in_specs=(replicated, replicated, edge, edge, edge, edge),
            out_specs=replicated,
        )
        return sharded(self, g, queries, keys, present, weights)

    def _valid_edges(self, queries, keys) -> Bool[Array, " E"]:
        if self.self_attention:
            return jnp.ones(queries.shape, bool)
        return queries != keys

    def __call__(
        self,
        g: Float[Array, "N D"],
        key_mask: Bool[Array, "N N"] | None = None,
        edges: tuple[Int[Array, " E"], Int[Array, " E"]] | None = None,
        weights: Float[Array, "H N N"] | Float[Array, "E H"] | None = None,
    ) -> Float[Array, ""]:
        """The energy at normalised tokens `g`: dense (all pairs, or `key_mask`'s) with
        `weights` `[H, N, N]`, or from `edges` with `weights` `[E, H]` (class docstring)."""
        if edges is not None:
            if key_mask is not None:
                raise ValueError(EXCLUSIVE)
            return self.edge_energy(g, *edges, weights=weights)
        allowed = attention_logits_mask(g.shape[0], key_mask, self.self_attention)
        has_key = jnp.any(allowed, axis=-1)
        scores = self.scores(g) if weights is None else weights * self.scores(g)
        beta = self._per_head(3)  # [H, 1, 1] or a scalar
        logits = jnp.where(allowed, beta * scores, -jnp.inf)
        # Queries without any key would give log(0); keep them out of the graph entirely.
        logits = jnp.where(has_key[:, None], logits, 0.0)
        lse = jnp.where(has_key, jax.nn.logsumexp(logits, axis=-1), 0.0)  # [H, N]
        return _summed(lse, self._per_head(2))

    def _per_head(self, ndim: int):
        """The inverse temperature shaped to broadcast over an `ndim`-axis array whose
        first axis is the head (a scalar stays a scalar)."""
        beta = self.inverse_temperature
        if isinstance(beta, float) or jnp.ndim(beta) == 0:
            return beta  # a Python float stays weakly typed: the model's dtype rules
        return beta.reshape(beta.shape + (1,) * (ndim - 1))
