"""Graph models: the Energy Transformer on a graph's nodes (node anomaly detection,
graph classification) and the baselines it is compared with.

Node anomaly detection (the paper's appendix B): node features `[N, F]` -> a linear
map -> plus a learnable position per node; the core runs with attention restricted to
each node's neighbours (`Conditions(edges=...)`, sparse: memory O(E H)); the node's
representation `g(0) || g(T)` -> an MLP -> one logit (sigmoid: the anomaly
probability). The baselines have the same width and the same readout on a
representation `h(0) || h(last)`: an MLP of the node features alone, and a two-layer
GCN (Kipf and Welling 2017).

Graph classification (appendix F): a CLS token joined to every node; positions from
the eigenvectors of the normalised Laplacian of the CLS-padded adjacency, mapped by a
linear layer; attention restricted to the adjacency (a dense key mask per graph: the
graphs are small and padded to one size); readout from the CLS token.
"""

import abc

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from ... import solvers
from ...core import Conditions, EnergyTransformer
from ...vocab import ENERGY_TERMS
from .._dynamics import Dynamics, solve_keywords
from ._spec import ET_TERMS, GRAPH_MODELS, GraphModelConfig


def _core(config: GraphModelConfig, terms, key) -> EnergyTransformer:
    return EnergyTransformer(
        config.dim,
        config.n_heads,
        config.head_dim,
        config.n_memories,
        key=key,
        beta=config.beta,
        learn_beta=config.learn_beta,
        self_attention=config.self_attention,
        hopfield=config.hopfield,
        tau=config.tau,
        init_std=config.init_std,
        dtype=jnp.float32,
        terms=terms,
    )


def _head(in_size: int, out_size, config: GraphModelConfig, key) -> eqx.nn.MLP:
    return eqx.nn.MLP(
        in_size,
        out_size,
        config.head_hidden,
        depth=1,
        activation=jax.nn.relu,
        key=key,
        dtype=jnp.float32,
    )


class NodeDetector(eqx.Module):
    """What every node anomaly detector is (equinox's abstract/final pattern: this class
    is abstract, the detectors below are final and are not subclassed): an `encoder` of
    the node features, a readout `head` of width 2 D to one logit, and `logits` of every
    node of a graph. `new_detector` builds one by name; the benchmark protocol
    (`run_graph_benchmark`) trains and scores any of them alike."""

    encoder: eqx.AbstractVar[eqx.nn.Linear]
    head: eqx.AbstractVar[eqx.nn.MLP]

    @abc.abstractmethod
    def logits(
        self, features: Float[Array, "N F"], senders: Int[Array, " E"], receivers: Int[Array, " E"]
    ) -> Float[Array, " N"]:
        """One anomaly logit per node (`sigmoid` of it: the probability); node
        `receivers[e]` receives from node `senders[e]`."""


class NodeAnomalyET(NodeDetector):
    """The Energy Transformer for node anomaly detection on one fixed graph.

    **Arguments:** `config`, `dynamics`; `n_nodes` (`N`, one learnable position each
    with `config.positions = "learned"`), `n_features` (`F`); `terms`: the energy terms
    (both, or one alone for the ablations); `key`.

    Edges are `(senders, receivers)`, int arrays `[E]`: node `receivers[e]` attends to
    node `senders[e]` (an undirected graph lists both directions). With
    `config.self_attention`, every node also attends to itself (a self-loop per node is
    added to the edges).
    """

    encoder: eqx.nn.Linear
    positions: Float[Array, "N D"] | None
    core: EnergyTransformer
    head: eqx.nn.MLP
    config: GraphModelConfig = eqx.field(static=True)
    dynamics: Dynamics = eqx.field(static=True)

    def __init__(
        self,
        config: GraphModelConfig,
        dynamics: Dynamics = Dynamics(),
        *,
        n_nodes: int,
        n_features: int,
        terms=ENERGY_TERMS,
        key: PRNGKeyArray,
    ):
        if config.positions == "laplacian":
            raise ValueError(
                "NodeAnomalyET takes positions 'learned' or 'none' (one graph: "
                "its nodes have identities); 'laplacian' is for graph "
                "classification."
            )
        k_enc, k_pos, k_core, k_head = jax.random.split(key, 4)
        dim = config.dim
        self.encoder = eqx.nn.Linear(n_features, dim, key=k_enc, dtype=jnp.float32)
        self.positions = (
            config.init_std * jax.random.normal(k_pos, (n_nodes, dim), jnp.float32)
            if config.positions == "learned"
            else None
        )
        self.core = _core(config, terms, k_core)
        self.head = _head(2 * dim, "scalar", config, k_head)
        self.config = config
        self.dynamics = dynamics

    def encode(self, features: Float[Array, "N F"]) -> Float[Array, "N D"]:
        """The initial tokens: encoded features plus each node's position."""
        tokens = jax.vmap(self.encoder)(features)
        return tokens if self.positions is None else tokens + self.positions

    def conditions(
        self, senders: Int[Array, " E"], receivers: Int[Array, " E"], n_nodes: int
    ) -> Conditions:
        """The core's `Conditions`: an edge list (`receivers` attend to `senders`), with a
        self-loop per node when `config.self_attention`. The edges must hold no
        self-loop and no duplicate (a `NodeGraph`'s hold neither): inside `jit` they
        cannot be checked, and a repeated pair would count twice."""
        if self.config.self_attention:  # each node's own key joins its neighbours'
            loops = jnp.arange(n_nodes, dtype=jnp.asarray(senders).dtype)
            senders, receivers = (jnp.concatenate([e, loops]) for e in (senders, receivers))
        return Conditions(edges=(receivers, senders))

    def run(
        self,
        features: Float[Array, "N F"],
        senders: Int[Array, " E"],
        receivers: Int[Array, " E"],
        *,
        options: solvers.SolveOptions | None = None,
        **overrides,
    ):
        """`(x0 [N, D], solution)`: the dynamics of `self.dynamics` on the whole graph,
        `options` (a `solvers.SolveOptions`) replacing their solver, step, tolerances,
        cap and flow (None: the dynamics' own), and any other `solvers.solve` keyword
        given overriding theirs (`t1`, `save`, `stop`, ...; without `options`, the
        solver's keywords too). A field of `options` given as a keyword too is
        refused."""
        x0 = self.encode(features)
        sol = solvers.solve(
            self.core,
            x0,
            args=self.conditions(senders, receivers, x0.shape[0]),
            **solve_keywords(self.dynamics, options, overrides),
        )
        return x0, sol

    def scores_of_states(
        self, x0: Float[Array, "N D"], x: Float[Array, "N D"]
    ) -> Float[Array, " N"]:
        """Anomaly logits `[N]` read out from the start `x0` and any later state `x` (the
        trained readout is of `x(T)`; other times show what the readout would say
        there)."""
        g = jnp.concatenate([self.core.norm(x0), self.core.norm(x)], axis=-1)
        return jax.vmap(self.head)(g)

    def logits(
        self,
        features,
        senders,
        receivers,
        *,
        options: solvers.SolveOptions | None = None,
        **overrides,
    ) -> Float[Array, " N"]:
        """One anomaly logit per node (`sigmoid` of it: the probability), from the
        representation `g(0) || g(T)` of each node; `options` and `overrides` as in
        `run`."""
        x0, sol = self.run(features, senders, receivers, options=options, **overrides)
        return self.scores_of_states(x0, sol.x_final)


def _gcn_propagate(h: Float[Array, "N D"], senders, receivers) -> Float[Array, "N D"]:
    """`D^-1/2 (A + I) D^-1/2 h`, by segment sums over the edges plus self-loops."""
    n = h.shape[0]
    degree = 1.0 + jax.ops.segment_sum(jnp.ones_like(receivers, h.dtype), receivers, num_segments=n)
    scale = jax.lax.rsqrt(degree)
    messages = (scale[:, None] * h)[senders]
    summed = jax.ops.segment_sum(messages, receivers, num_segments=n) + scale[:, None] * h
    return scale[:, None] * summed


class GCNDetector(NodeDetector):
    """Baseline: `h0 = features W0`, two GCN layers of width `D`
    (`h2 = A_hat relu(A_hat h0 W1) W2`), readout of `h0 || h2` by the same MLP as
    `NodeAnomalyET`."""

    encoder: eqx.nn.Linear
    layers: tuple[eqx.nn.Linear, eqx.nn.Linear]
    head: eqx.nn.MLP

    def __init__(self, config: GraphModelConfig, *, n_features: int, key: PRNGKeyArray):
        k_enc, k1, k2, k_head = jax.random.split(key, 4)
        dim = config.dim
        self.encoder = eqx.nn.Linear(n_features, dim, key=k_enc, dtype=jnp.float32)
        self.layers = (
            eqx.nn.Linear(dim, dim, key=k1, dtype=jnp.float32),
            eqx.nn.Linear(dim, dim, key=k2, dtype=jnp.float32),
        )
        self.head = _head(2 * dim, "scalar", config, k_head)

    def logits(self, features, senders, receivers) -> Float[Array, " N"]:
        h0 = jax.vmap(self.encoder)(features)
        h1 = jax.nn.relu(_gcn_propagate(jax.vmap(self.layers[0])(h0), senders, receivers))
        h2 = _gcn_propagate(jax.vmap(self.layers[1])(h1), senders, receivers)
        return jax.vmap(self.head)(jnp.concatenate([h0, h2], axis=-1))


class MLPDetector(NodeDetector):
    """Baseline on the node features alone: `h0 = features W0`, `h1 = relu(h0) W1`,
    readout of `h0 || h1` by the same MLP as `NodeAnomalyET` (edges ignored)."""

    encoder: eqx.nn.Linear
    layer: eqx.nn.Linear
    head: eqx.nn.MLP

    def __init__(self, config: GraphModelConfig, *, n_features: int, key: PRNGKeyArray):
        k_enc, k1, k_head = jax.random.split(key, 3)
        dim = config.dim
        self.encoder = eqx.nn.Linear(n_features, dim, key=k_enc, dtype=jnp.float32)
        self.layer = eqx.nn.Linear(dim, dim, key=k1, dtype=jnp.float32)
        self.head = _head(2 * dim, "scalar", config, k_head)

    def logits(self, features, senders, receivers) -> Float[Array, " N"]:
        del senders, receivers
        h0 = jax.vmap(self.encoder)(features)
        h1 = jax.vmap(self.layer)(jax.nn.relu(h0))
        return jax.vmap(self.head)(jnp.concatenate([h0, h1], axis=-1))


def new_detector(
    kind: str,
    config: GraphModelConfig,
    dynamics: Dynamics,
    *,
    n_nodes: int,
    n_features: int,
    key: PRNGKeyArray,
) -> NodeDetector:
    """A fresh node anomaly detector of `kind`, one of `GRAPH_MODELS`: `"et"`, its
    ablations `"et_attention_only"` / `"et_hopfield_only"`, `"mlp"`, `"gcn"`."""
    if kind in ET_TERMS:
        return NodeAnomalyET(
            config, dynamics, n_nodes=n_nodes, n_features=n_features, terms=ET_TERMS[kind], key=key
        )
    if kind == "gcn":
        return GCNDetector(config, n_features=n_features, key=key)
    if kind == "mlp":
        return MLPDetector(config, n_features=n_features, key=key)
    raise ValueError(f"model must be one of {', '.join(GRAPH_MODELS)} (got {kind!r}).")


# --------------------------------------------------------------- graph classification
class GraphBatch(eqx.Module):
    """Graphs padded to `M` nodes plus a CLS token (token 0): `features [B, M, F]`
    (zero on padding), `eigenvectors [B, M + 1, k]` (positions: the CLS-padded
    Laplacian's, token order), `key_mask [B, M + 1, M + 1]` (the adjacency plus the CLS
    token's edges to and from every real node; nothing for padding), `labels [B]`."""

    features: Float[Array, "B M F"]
    eigenvectors: Float[Array, "B T k"]
    key_mask: Bool[Array, "B T T"]
    labels: Int[Array, " B"]


def laplacian_eigenvectors(
    senders: np.ndarray, receivers: np.ndarray, n_nodes: int, k: int
) -> np.ndarray:
    """`[n_nodes + 1, k]` float32: the eigenvectors of the `k` smallest eigenvalues of
    the normalised Laplacian `I - D^-1/2 A D^-1/2` of the graph with a CLS node (index
    0) joined to every node, columns in increasing order of eigenvalue (zero columns
    past `n_nodes + 1`), each scaled to unit RMS (norm `sqrt(n_nodes + 1)`): a position
    is then as large as the encoded node feature it is added to, not 1/sqrt(n) of it.

    Column 0 is the eigenvalue-0 vector `D^1/2 1` (the CLS-padded graph is connected),
    given its canonical, positive sign: it marks the CLS token (whose entry is the
    largest) and is never flipped. The signs of the other columns are arbitrary
    (training flips them at random)."""
    size = n_nodes + 1
    adjacency = np.zeros((size, size))
    adjacency[np.asarray(receivers) + 1, np.asarray(senders) + 1] = 1.0
    adjacency[0, 1:] = adjacency[1:, 0] = 1.0
    adjacency = np.maximum(adjacency, adjacency.T)
    np.fill_diagonal(adjacency, 0.0)
    inv_sqrt = 1.0 / np.sqrt(np.maximum(adjacency.sum(1), 1e-12))
    laplacian = np.eye(size) - inv_sqrt[:, None] * adjacency * inv_sqrt[None, :]
    _, vectors = np.linalg.eigh(laplacian)
    vectors = vectors[:, :k] * np.sqrt(size)
    vectors[:, 0] *= np.sign(vectors[0, 0])  # D^1/2 1: every entry has one sign
    out = np.zeros((size, k), np.float32)
    out[:, : min(k, size)] = vectors
    return out


def graph_batch(graphs, indices, max_nodes: int, k: int, eigenvectors=None) -> GraphBatch:
    """The graphs `indices` of a `GraphSet` padded to `max_nodes` (see `GraphBatch`);
    `eigenvectors`: their precomputed `laplacian_eigenvectors` (computed here if
    `None`)."""
    indices = np.asarray(indices)
    count, n_features = len(indices), graphs.n_features
    features = np.zeros((count, max_nodes, n_features), np.float32)
    eigen = np.zeros((count, max_nodes + 1, k), np.float32)
    mask = np.zeros((count, max_nodes + 1, max_nodes + 1), bool)
    for row, index in enumerate(indices):
        x, s, r = graphs.features[index], graphs.senders[index], graphs.receivers[index]
        n = len(x)
        if n > max_nodes:
            raise ValueError(f"graph {index} has {n} nodes, more than max_nodes={max_nodes}.")
        features[row, :n] = x
        eigen[row, : n + 1] = (
            laplacian_eigenvectors(s, r, n, k) if eigenvectors is None else eigenvectors[index]
        )
        mask[row, r + 1, s + 1] = True
        mask[row, 0, 1 : n + 1] = mask[row, 1 : n + 1, 0] = True
    return GraphBatch(
        jnp.asarray(features),
        jnp.asarray(eigen),
        jnp.asarray(mask),
        jnp.asarray(graphs.labels[indices], jnp.int32),
    )


class GraphClassifierET(eqx.Module):
    """The Energy Transformer for graph classification (see the module docstring).

    **Arguments:** `config` (`positions` `"laplacian"` or `"none"`), `dynamics`,
    `n_features` (`F`), `n_classes`, `key`; `terms` as in `NodeAnomalyET`.
    """

    encoder: eqx.nn.Linear
    position_map: eqx.nn.Linear | None
    cls_token: Float[Array, " D"]
    core: EnergyTransformer
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
        terms=ENERGY_TERMS,
        key: PRNGKeyArray,
    ):
        if config.positions == "learned":
            raise ValueError(
                "GraphClassifierET takes positions 'laplacian' or 'none' "
                "(graphs differ: a node has no identity to learn)."
            )
        k_enc, k_pos, k_cls, k_core, k_head = jax.random.split(key, 5)
        dim = config.dim
        self.encoder = eqx.nn.Linear(n_features, dim, key=k_enc, dtype=jnp.float32)
        self.position_map = (
            eqx.nn.Linear(config.n_eigenvectors, dim, key=k_pos, dtype=jnp.float32)
            if config.positions == "laplacian"
            else None
        )
        self.cls_token = config.init_std * jax.random.normal(k_cls, (dim,), jnp.float32)
        self.core = _core(config, terms, k_core)
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

    def logits(
        self,
        batch: GraphBatch,
        *,
        options: solvers.SolveOptions | None = None,
        **overrides,
    ) -> Float[Array, "B C"]:
        """Class logits per graph, from the CLS token's `g(T)`; `options` (a
        `solvers.SolveOptions` replacing the dynamics' solver, step, tolerances, cap and
        flow) and `overrides` (other `solvers.solve` keywords) as in
        `NodeAnomalyET.run`."""
        x0 = jax.vmap(self.encode)(batch.features, batch.eigenvectors)
        sol = solvers.solve(
            self.core,
            x0,
            args=Conditions(key_mask=batch.key_mask),
            args_batched=True,
            **solve_keywords(self.dynamics, options, overrides),
        )
        cls = jax.vmap(self.core.norm)(sol.x_final)[:, 0]
        return jax.vmap(self.head)(cls)
