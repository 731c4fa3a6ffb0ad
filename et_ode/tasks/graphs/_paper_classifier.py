"""The paper's graph classifier (Hoover et al. 2023, appendix B.2), as a model of its
own beside `GraphClassifierET`.

What it adds to that model, as the paper defines it and the authors' code
(Lemon-cmd/energy-transformer-graph) computes it:

- **A weighted adjacency.** From the initial tokens `X` (`[T, D]`: the CLS token and the
  encoded nodes, each plus its mapped Laplacian position), the correlation `X X^T`
  (the outer product `X (x) X` contracted over the features, as the authors' code forms
  it) is convolved by `H` filters ('SAME', stride 1, no bias): `A_hat[h, B, C]`, a real
  weight per pair and head inside the attention's exponent
  (`Conditions.pair_weights`, query first). The pairs allowed are the CLS-padded
  adjacency's (`GraphBatch.key_mask`) and no others: the authors' adjacency layer adds a
  bias that makes every non-edge nonzero once trained (the model then attends to every
  pair), and their mask `M == 0` on the weighted logits drops an allowed pair whose
  logit is exactly zero; neither is copied.
- **Learned per-head inverse temperatures** in every block (`learn_beta`).
- **S stacked blocks**, each an `EnergyTransformer` with its own LayerNorm and weights,
  each a flow (the model's `Dynamics`: horizon, solver, adjoint as for any model): the end
  of one is the start of the next; the weights `A_hat` are computed once, from the
  initial tokens, and are the conditions of every block.
- **Noise** at a temperature (`GraphModelConfig.noise_temperature`) in every block,
  through `solvers.solve(..., temperature=, key=)`: the paper's std 0.02 per step of 0.1
  is `tasks.authors_temperature()`.
- The readout: an MLP of the last block's CLS token `g(T)`.
"""

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, PRNGKeyArray

from ... import solvers
from ...core import Conditions, EnergyTransformer
from ...vocab import ENERGY_TERMS
from .._dynamics import Dynamics, solve_keywords
from ._models import GraphBatch, GraphClassifierET, _head
from ._spec import ET_TERMS, PAPER_CLASSIFIER, GraphModelConfig


def _block(config: GraphModelConfig, key) -> EnergyTransformer:
    return EnergyTransformer(
        config.dim,
        config.n_heads,
        config.head_dim,
        config.n_memories,
        key=key,
        beta=config.beta,
        self_attention=config.self_attention,
        hopfield=config.hopfield,
        tau=config.tau,
        init_std=config.init_std,
        dtype=jnp.float32,
        terms=ENERGY_TERMS,
        learn_beta=True,
    )


class PaperGraphClassifierET(eqx.Module):
    """The paper's graph classifier (module docstring).

    **Arguments:** `config` (`positions` `"laplacian"` or `"none"`; `blocks` S,
    `kernel_size`, `noise_temperature`), `dynamics` (each block's flow), `n_features`
    (`F`), `n_classes`, `key`.
    """

    encoder: eqx.nn.Linear
    position_map: eqx.nn.Linear | None
    cls_token: Float[Array, " D"]
    correlation: eqx.nn.Conv2d
    blocks: tuple[EnergyTransformer, ...]
    head: eqx.nn.MLP
    config: GraphModelConfig = eqx.field(static=True)
    dynamics: Dynamics = eqx.field(static=True)

    def __init__(
        self,
        config: GraphModelConfig,
        dynamics: Dynamics = Dynamics(),
        *,
        n_features: int,
        n_classes: int,
        key: PRNGKeyArray,
    ):
        if config.positions == "learned":
            raise ValueError(
                "PaperGraphClassifierET takes positions 'laplacian' or 'none' "
                "(graphs differ: a node has no identity to learn)."
            )
        k_enc, k_pos, k_cls, k_conv, k_blocks, k_head = jax.random.split(key, 6)
        dim = config.dim
        self.encoder = eqx.nn.Linear(n_features, dim, key=k_enc, dtype=jnp.float32)
        self.position_map = (
            eqx.nn.Linear(config.n_eigenvectors, dim, key=k_pos, dtype=jnp.float32)
            if config.positions == "laplacian"
            else None
        )
        self.cls_token = config.init_std * jax.random.normal(k_cls, (dim,), jnp.float32)
        self.correlation = eqx.nn.Conv2d(
            1,
            config.n_heads,
            config.kernel_size,
            padding="SAME",
            use_bias=False,
            key=k_conv,
            dtype=jnp.float32,
        )
        self.blocks = tuple(_block(config, k) for k in jax.random.split(k_blocks, config.blocks))
        self.head = _head(dim, n_classes, config, k_head)
        self.config = config
        self.dynamics = dynamics

    def encode(self, features: Float[Array, "M F"], eigenvectors: Float[Array, "T k"]):
        """Initial tokens `[M + 1, D]`: the CLS token, then the encoded nodes, each plus
        its mapped Laplacian position."""
        tokens = jnp.concatenate([self.cls_token[None], jax.vmap(self.encoder)(features)])
        if self.position_map is not None:
            tokens = tokens + jax.vmap(self.position_map)(eigenvectors)
        return tokens

    def pair_weights(
        self, x0: Float[Array, "T D"], valid: Bool[Array, " T"] | None = None
    ) -> Float[Array, "H T T"]:
        """`A_hat` of one graph, query first (`pair_weights[h, C, B]`): the `H` filters
        over the tokens' correlation `x0 x0^T`. Symmetric in `B, C` where the filters
        are; the key mask decides which pairs count.

        `valid` (`[T]`, the CLS token and the real nodes; default all) zeroes the
        padding tokens' rows and columns of the correlation first: padding encodes to
        the layers' biases, not to zero, and the filters would carry it into the
        weights of real pairs beside it, so a graph's `A_hat` would depend on how far
        its batch pads it. Zeroed, padding is the filters' own 'SAME' border, as for a
        graph of the batch's largest size."""
        tokens = x0 if valid is None else jnp.where(valid[:, None], x0, 0.0)
        return self.correlation((tokens @ tokens.T)[None])

    def conditions(self, x0: Float[Array, "B T D"], batch: GraphBatch) -> Conditions:
        """The blocks' conditions of a batch: its key masks and `A_hat` (a token is
        real where its key-mask row allows a pair: every real node has the CLS token,
        padding has nothing)."""
        valid = batch.key_mask.any(axis=-1)
        weights = jax.vmap(self.pair_weights)(x0, valid)
        return Conditions(key_mask=batch.key_mask, pair_weights=weights)

    def states(
        self,
        batch: GraphBatch,
        *,
        key: PRNGKeyArray | None = None,
        options: solvers.SolveOptions | None = None,
        **overrides,
    ) -> list[Float[Array, "B T D"]]:
        """The tokens at the start and at the end of each block (`S + 1` states): block
        `s` flows from the end of block `s - 1`. With a `noise_temperature`, `key` draws
        the noise (block `s` with `fold_in(key, s)`); `options` and `overrides` as in
        `GraphClassifierET.logits`."""
        temperature = float(self.config.noise_temperature)
        if temperature > 0 and key is None:
            raise ValueError(
                f"this classifier runs at a temperature ({temperature:g}): pass key= (a "
                "jax.random.key) for its noise, or set noise_temperature = 0."
            )
        x0 = jax.vmap(self.encode)(batch.features, batch.eigenvectors)
        conditions = self.conditions(x0, batch)
        keywords = solve_keywords(self.dynamics, options, overrides)
        states = [x0]
        for index, block in enumerate(self.blocks):
            noise: dict[str, Any] = {}
            if temperature > 0 and key is not None:
                noise = dict(temperature=temperature, key=jax.random.fold_in(key, index))
            sol = solvers.solve(
                block, states[-1], args=conditions, args_batched=True, **noise, **keywords
            )
            states.append(sol.x_final)
        return states

    def logits(
        self,
        batch: GraphBatch,
        *,
        key: PRNGKeyArray | None = None,
        options: solvers.SolveOptions | None = None,
        **overrides,
    ) -> Float[Array, "B C"]:
        """Class logits per graph from the last block's CLS token `g(T)` (`states`)."""
        last = self.states(batch, key=key, options=options, **overrides)[-1]
        cls = jax.vmap(self.blocks[-1].norm)(last)[:, 0]
        return jax.vmap(self.head)(cls)


# The key of the noise when a noisy classifier is evaluated (the paper's noise runs at
# evaluation too; one key, so that an evaluation is reproducible).
EVALUATION_NOISE = 0


def new_classifier(kind: str, config, dynamics, *, n_features: int, n_classes: int, key):
    """A fresh graph classifier of `kind`: `"et_paper"` (`PaperGraphClassifierET`) or
    one of `ET_TERMS` (`GraphClassifierET` with those terms)."""
    if kind == PAPER_CLASSIFIER:
        return PaperGraphClassifierET(
            config, dynamics, n_features=n_features, n_classes=n_classes, key=key
        )
    if kind not in ET_TERMS:
        raise ValueError(
            f"a graph classifier is one of {', '.join(ET_TERMS)}, {PAPER_CLASSIFIER} "
            f"(got {kind!r})."
        )
    return GraphClassifierET(
        config, dynamics, n_features=n_features, n_classes=n_classes, terms=ET_TERMS[kind], key=key
    )


def classifier_logits(model, batch: GraphBatch, key) -> Float[Array, "B C"]:
    """`model.logits(batch)`, with `key` for the noise of a noisy paper classifier."""
    if isinstance(model, PaperGraphClassifierET) and model.config.noise_temperature > 0:
        return model.logits(batch, key=key)
    return model.logits(batch)
