"""Conditions that an Energy Transformer solve carries in `args`."""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float, Int

from ._attention import EXCLUSIVE


class Conditions(eqx.Module):
    """What the energy and the flow are conditioned on, passed as `args`.

    Every field is optional; `None` means absent.

    - `key_mask`: `[N, N]` bool (`[B, N, N]` for a batch, and likewise below), `key_mask[C, B]`
      allows query token `C` to attend to
      key token `B`.
    - `clamped`: `[N]` bool, tokens that do not move (their `dx/dt = 0`); their values
      are those of the initial state. This makes a fixed point depend on them.
    - `field`: `[N, D]` external field `c`, adding `E_ext = -lambda sum_A c_A . g_A`,
      the Hopfield input current. This makes a fixed point depend on `c`.
    - `field_strength`: `lambda` (scalar, default 1).
    - `edges`: `(queries, keys)`, two integer arrays `[E]` (`[B, E]` for a batch):
      query token `queries[e]` may attend to key token `keys[e]`. The sparse
      alternative to `key_mask` (memory `O(E H)` instead of `O(N^2)`); the two are
      mutually exclusive. Self-loops follow the model's `self_attention`, as the
      diagonal of a key mask does. An edge list is a set of pairs, as a key mask is:
      duplicate pairs are refused when the edges are concrete (checked here, at
      construction, per sample of a batch); edges traced inside a transformation
      cannot be checked and must be duplicate-free (see `EnergyAttention`). Queries
      without an edge contribute no attention energy.
    - `pair_weights`: a real weight per allowed pair and head inside the attention's
      exponent (the paper's graph classifier, `A_hat`; see `EnergyAttention`): `[H, N, N]`
      query first (`pair_weights[h, C, B]`, beside a `key_mask` or for all pairs), or
      `[E, H]` beside `edges` (one per edge). A weight of zero is an allowed pair with
      logit zero; the mask or the edges alone say which pairs are allowed.
    """

    # `*batch`: conditions of a batch (`solvers.solve(..., args_batched=True)`) carry the
    # batch axis first; inside the solve each sample sees its own.
    key_mask: Bool[Array, "*batch N N"] | None = None
    clamped: Bool[Array, "*batch N"] | None = None
    field: Float[Array, "*batch N D"] | None = None
    # An array, never a Python float: jit would treat a float as static (a recompile per
    # value, and no gradient).
    field_strength: Float[Array, ""] = eqx.field(default=1.0, converter=jnp.asarray)
    edges: tuple[Int[Array, "*batch E"], Int[Array, "*batch E"]] | None = eqx.field(
        default=None, converter=lambda value: _edge_pair(value)
    )
    pair_weights: Float[Array, "*batch H N N"] | Float[Array, "*batch E H"] | None = None

    def __check_init__(self):
        if self.key_mask is not None and self.edges is not None:
            raise ValueError(EXCLUSIVE)
        if self.edges is not None:
            _refuse_duplicates(*self.edges)

    def check(self, n_tokens: int, dim: int, batch: tuple[int, ...] = ()) -> None:
        """Raise `ValueError` unless every present field has its expected shape."""
        expected = {
            "key_mask": batch + (n_tokens, n_tokens),
            "clamped": batch + (n_tokens,),
            "field": batch + (n_tokens, dim),
        }
        for name, shape in expected.items():
            value = getattr(self, name)
            if value is not None and tuple(jnp.shape(value)) != shape:
                raise ValueError(
                    f"Conditions.{name} has shape {tuple(jnp.shape(value))}, expected "
                    f"{shape} for x of {n_tokens} tokens of dimension {dim}"
                    + (" with batched args" if batch else "")
                    + "."
                )
        for name in ("key_mask", "clamped"):
            value = getattr(self, name)
            if value is not None and jnp.asarray(value).dtype != jnp.bool_:
                raise ValueError(f"Conditions.{name} must be a boolean array.")
        field = self.field
        if field is not None and _is_concrete(field) and not np.all(np.isfinite(np.asarray(field))):
            raise ValueError("Conditions.field contains NaN or inf values.")
        if self.edges is not None:
            self._check_edges(self.edges, n_tokens, batch)
        if self.pair_weights is not None:
            self._check_pair_weights(self.pair_weights, n_tokens, batch)

    def _check_pair_weights(
        self, weights: ArrayLike, n_tokens: int, batch: tuple[int, ...]
    ) -> None:
        shape = tuple(jnp.shape(weights))
        if self.edges is not None:
            n_edges = tuple(jnp.shape(self.edges[0]))[-1]
            expected = batch + (n_edges,)
            form = f"{_dims(batch + (n_edges, 'H'))} (edges, heads)"
            good = len(shape) == len(batch) + 2 and shape[:-1] == expected
        else:
            expected = batch + (n_tokens, n_tokens)
            form = f"{_dims(batch + ('H', n_tokens, n_tokens))} (heads, queries, keys)"
            good = (
                len(shape) == len(batch) + 3 and shape[:-3] == batch and shape[-2:] == expected[-2:]
            )
        if not good:
            raise ValueError(
                f"Conditions.pair_weights has shape {_dims(shape)}, expected {form}"
                + (" with batched args" if batch else "")
                + "."
            )
        if not jnp.issubdtype(jnp.asarray(weights).dtype, jnp.floating):
            raise ValueError("Conditions.pair_weights must be a floating-point array.")
        if _is_concrete(weights) and not np.all(np.isfinite(np.asarray(weights))):
            raise ValueError("Conditions.pair_weights contains NaN or inf values.")

    def _check_edges(
        self, edges: tuple[ArrayLike, ArrayLike], n_tokens: int, batch: tuple[int, ...]
    ) -> None:
        if self.key_mask is not None:
            raise ValueError(EXCLUSIVE)
        shapes = []
        for name, value in zip(("queries", "keys"), edges):
            shape = tuple(jnp.shape(value))
            if len(shape) != len(batch) + 1 or shape[:-1] != batch:
                raise ValueError(
                    f"Conditions.edges {name} has shape {shape}, expected "
                    + (f"{batch + ('E',)} with batched args" if batch else "a 1-D [E]")
                    + "."
                )
            if not jnp.issubdtype(jnp.asarray(value).dtype, jnp.integer):
                raise ValueError(
                    f"Conditions.edges {name} must be an integer array (got "
                    f"{jnp.asarray(value).dtype})."
                )
            shapes.append(shape)
        if shapes[0] != shapes[1]:
            raise ValueError(
                f"Conditions.edges queries and keys must have the same length (got "
                f"shapes {shapes[0]} and {shapes[1]})."
            )
        for name, value in zip(("queries", "keys"), edges):
            if _is_concrete(value) and np.size(value):
                concrete = np.asarray(value)
                low, high = int(concrete.min()), int(concrete.max())
                if low < 0 or high >= n_tokens:
                    raise ValueError(
                        f"Conditions.edges {name} must lie in [0, {n_tokens}) for x of "
                        f"{n_tokens} tokens (got values from {low} to {high})."
                    )


def _dims(shape) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _edge_pair(value):
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) != 2:
        raise ValueError("Conditions.edges must be a pair (queries, keys) of integer arrays [E].")
    return tuple(jnp.asarray(v) for v in value)


DEDUPLICATE = (
    "pairs = np.unique(np.stack([queries, keys], 1), axis=0); "
    "queries, keys = pairs[:, 0], pairs[:, 1]"
)


def _refuse_duplicates(queries, keys) -> None:
    """Raise `ValueError` if concrete edges list a pair `(query, key)` more than once
    (in any sample of a batch `[B, E]`). O(E log E); traced edges pass unchecked."""
    if not (_is_concrete(queries) and _is_concrete(keys)):
        return
    q, k = np.asarray(queries), np.asarray(keys)
    if (
        q.shape != k.shape
        or q.ndim == 0
        or q.shape[-1] < 2
        or not (np.issubdtype(q.dtype, np.integer) and np.issubdtype(k.dtype, np.integer))
    ):
        return  # malformed: `check` names the problem
    if q.size == 0:
        return
    q = q.reshape(-1, q.shape[-1]).astype(np.int64)
    k = k.reshape(-1, k.shape[-1]).astype(np.int64)
    # one code per pair, within each sample (ids may be anything here: shifted to 0)
    span = int(k.max()) - int(k.min()) + 1
    if span * (int(q.max()) - int(q.min()) + 1) >= 2**62:
        return  # ids out of any real range: `check` names the problem
    codes = np.sort((q - q.min()) * span + (k - k.min()), axis=-1)
    repeats = np.count_nonzero(codes[:, 1:] == codes[:, :-1], axis=-1)
    if repeats.any():
        where = (
            ""
            if len(repeats) == 1
            else (f" (in {np.count_nonzero(repeats)} of the {len(repeats)} samples of the batch)")
        )
        raise ValueError(
            f"Conditions.edges lists {int(repeats.sum())} duplicate edge(s){where}: a pair "
            f"(query, key) given more than once. An edge list is a set of allowed pairs, "
            f"as a key mask is; remove the repeats: {DEDUPLICATE}."
        )


def _is_concrete(array) -> bool:
    try:
        np.asarray(array)
    except Exception:  # a tracer
        return False
    return True
