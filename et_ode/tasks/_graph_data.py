"""Data for the graph tasks: node anomaly detection and graph classification.

The Energy Transformer paper (Hoover et al. 2023) applies the model to graphs twice:
detecting anomalous nodes in one large attributed graph (appendix B: YelpChi, Amazon,
T-Finance, T-Social) and classifying many small graphs (appendix F: the TU Dortmund
graph-kernel data sets and CSL). This module holds the data side, in NumPy only:

- `NodeGraph`: one graph, node features, a binary label per node (1 = anomaly).
- `GraphSet`: many small graphs with one class label each.
- `anomaly_benchmark`: a generated, seeded attributed stochastic block model with
  structural and contextual anomalies injected by the standard protocol.
- `csl_graphs`: the Circular Skip Links data set (Murphy et al. 2019), generated.
- `load_fraud_mat`: YelpChi.mat / Amazon.mat as distributed by the CARE-GNN authors.
- `load_tu`: any data set in the TU Dortmund text format (MUTAG, PROTEINS, ...).
- `stratified_splits` (the anomaly-detection protocol) and `cross_validation_folds`
  (stratified k-fold for graph classification).

Edge lists
----------
Every graph is stored as a directed edge list: `senders[e] -> receivers[e]`, int32. An
undirected graph holds both directions of every edge. Edge lists are canonical: sorted
by `(sender, receiver)` with duplicates removed (multi-edges of a source collapse to one
edge), so that equal graphs have equal arrays. Generated graphs and the fraud graphs
have no self-loops (a `NodeGraph` refuses them: the models add their own); TU graphs
keep the self-loops their file lists. `canonical_edges` brings any edge list into this
form; the containers refuse lists that are not in it. The models hand these lists to
`Conditions(edges=...)` inside compiled code, where duplicates cannot be checked: the
lists being duplicate-free here is what makes the attention equal the key mask of the
same pairs.

Everything generated comes from `np.random.default_rng(seed)` and is reproducible.
SciPy (for `.mat` files) is imported only inside `load_fraud_mat`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = [
    "CSL_COPIES", "CSL_NODES", "CSL_SKIPS", "GraphSet", "NodeGraph", "anomaly_benchmark",
    "canonical_edges", "cross_validation_folds", "csl_graphs", "load_fraud_mat", "load_tu",
    "stratified_splits",
]

# Circular Skip Links (Murphy et al. 2019, "Relational Pooling for Graph Representations"):
# class k is the 41-node cycle with skip links of length CSL_SKIPS[k].
CSL_SKIPS = (2, 3, 4, 5, 6, 9, 11, 12, 13, 16)
CSL_NODES = 41
CSL_COPIES = 15

# ------------------------------------------------------------------------ edge lists


def canonical_edges(senders, receivers, n_nodes: int, *, symmetrize: bool = False,
                    drop_self_loops: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The canonical form of an edge list: sorted by `(sender, receiver)`, duplicates
    removed, optionally with both directions of every edge (`symmetrize`) and without
    self-loops (`drop_self_loops`).

    `senders`, `receivers`: [E] integer node ids in `0 .. n_nodes - 1`.
    Returns `(senders, receivers)`, each [E'] int32. O(E log E) time, O(E) memory.
    """
    s = np.asarray(senders)
    r = np.asarray(receivers)
    if s.ndim != 1 or r.shape != s.shape:
        raise ValueError(f"senders and receivers must be 1-D arrays of one length "
                         f"(got shapes {s.shape} and {r.shape}).")
    if s.size and not (np.issubdtype(s.dtype, np.integer) and np.issubdtype(r.dtype, np.integer)):
        raise ValueError(f"node ids must be integers (got {s.dtype} and {r.dtype}).")
    s = s.astype(np.int64, copy=False)
    r = r.astype(np.int64, copy=False)
    if s.size and (min(s.min(), r.min()) < 0 or max(s.max(), r.max()) >= n_nodes):
        raise ValueError(f"node ids must lie in 0 .. {n_nodes - 1} (got ids from "
                         f"{min(s.min(), r.min())} to {max(s.max(), r.max())}).")
    if symmetrize:
        s, r = np.concatenate([s, r]), np.concatenate([r, s])
    if drop_self_loops:
        keep = s != r
        s, r = s[keep], r[keep]
    keys = _sorted_unique(s * n_nodes + r)
    return (keys // n_nodes).astype(np.int32), (keys % n_nodes).astype(np.int32)


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """`np.unique` of a 1-D integer array by sorting (NumPy 2's `np.unique` hashes first,
    several times slower on millions of edges)."""
    values = np.sort(values)
    if values.size < 2:
        return values
    return values[np.concatenate([[True], values[1:] != values[:-1]])]


def _check_edges(field: str, senders, receivers, n_nodes: int) -> None:
    """Raise unless `senders`/`receivers` are a canonical int32 edge list of a graph with
    `n_nodes` nodes (`field` names the graph in the message)."""
    for which, array in (("senders", senders), ("receivers", receivers)):
        if not isinstance(array, np.ndarray) or array.ndim != 1 or array.dtype != np.int32:
            raise ValueError(f"{field}{which} must be a 1-D int32 array (got "
                             f"{_describe(array)}).")
    if senders.shape != receivers.shape:
        raise ValueError(f"{field}senders and receivers have different lengths "
                         f"({senders.size} and {receivers.size}).")
    if not senders.size:
        return
    low = min(int(senders.min()), int(receivers.min()))
    high = max(int(senders.max()), int(receivers.max()))
    if low < 0 or high >= n_nodes:
        raise ValueError(f"{field}senders/receivers hold node ids from {low} to {high}, "
                         f"outside 0 .. {n_nodes - 1}.")
    keys = senders.astype(np.int64) * n_nodes + receivers
    if np.any(np.diff(keys) <= 0):
        raise ValueError(f"{field}senders/receivers are not canonical (sorted by "
                         f"(sender, receiver), without duplicates): build them with "
                         f"canonical_edges().")


def _describe(value) -> str:
    if isinstance(value, np.ndarray):
        return f"{value.dtype} array of shape {value.shape}"
    return type(value).__name__


def _check_features(field: str, features) -> None:
    if not isinstance(features, np.ndarray) or features.ndim != 2 or features.dtype != np.float32:
        raise ValueError(f"{field} must be a 2-D float32 array (got {_describe(features)}).")
    if not np.all(np.isfinite(features)):
        raise ValueError(f"{field} holds {int(np.sum(~np.isfinite(features)))} NaN or "
                         f"infinite values.")


# ------------------------------------------------------------------------ containers


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class NodeGraph:
    """One attributed graph with a binary label per node (1 = anomaly).

    - `features`: [N, F] float32, finite.
    - `senders`, `receivers`: [E] int32 canonical directed edge list (see the module
      docstring); an undirected graph holds both directions; no self-loops (the
      detectors add their own: the ET one per node with `self_attention`, the GCN
      `A + I`; a loop in the list would count twice).
    - `labels`: [N] int32 in {0, 1}.
    - `name`: the data set's name.
    - `anomaly_kind`: [N] int8, 0 normal, 1 structural, 2 contextual (generated data
      only; `labels == (anomaly_kind > 0)`), or None.

    Equality is identity (the fields are arrays).
    """

    features: np.ndarray
    senders: np.ndarray
    receivers: np.ndarray
    labels: np.ndarray
    name: str
    anomaly_kind: np.ndarray | None = None

    def __post_init__(self):
        _check_features("features", self.features)
        n = self.features.shape[0]
        _check_edges("", self.senders, self.receivers, n)
        loops = int(np.count_nonzero(self.senders == self.receivers))
        if loops:
            raise ValueError(f"senders/receivers hold {loops} self-loop(s); a NodeGraph has "
                             f"none (the detectors add their own): drop them with "
                             f"canonical_edges(..., drop_self_loops=True).")
        labels = self.labels
        if not isinstance(labels, np.ndarray) or labels.dtype != np.int32 or labels.shape != (n,):
            raise ValueError(f"labels must be an int32 array of shape ({n},), one per node "
                             f"(got {_describe(labels)}).")
        if n and not np.all((labels == 0) | (labels == 1)):
            raise ValueError(f"labels must be 0 (normal) or 1 (anomaly); found "
                             f"{np.unique(labels)[:10].tolist()}.")
        if not isinstance(self.name, str):
            raise ValueError(f"name must be a string (got {type(self.name).__name__}).")
        kind = self.anomaly_kind
        if kind is not None:
            if not isinstance(kind, np.ndarray) or kind.dtype != np.int8 or kind.shape != (n,):
                raise ValueError(f"anomaly_kind must be None or an int8 array of shape "
                                 f"({n},) (got {_describe(kind)}).")
            if not np.all((kind >= 0) & (kind <= 2)):
                raise ValueError("anomaly_kind must be 0 (normal), 1 (structural) or "
                                 "2 (contextual).")
            if not np.array_equal(kind > 0, labels == 1):
                raise ValueError("anomaly_kind and labels disagree: labels must be 1 "
                                 "exactly where anomaly_kind > 0.")

    @property
    def n_nodes(self) -> int:
        return int(self.features.shape[0])

    @property
    def n_edges(self) -> int:
        """The number of directed edges (twice the undirected count)."""
        return int(self.senders.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.features.shape[1])

    @property
    def n_anomalies(self) -> int:
        return int(np.sum(self.labels))

    def __repr__(self) -> str:
        return (f"NodeGraph(name={self.name!r}, n_nodes={self.n_nodes}, "
                f"n_edges={self.n_edges}, n_features={self.n_features}, "
                f"n_anomalies={self.n_anomalies})")


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class GraphSet:
    """Many small graphs with one class label each (graph classification).

    - `features`: per graph [n_i, F] float32 (the same F for all, n_i >= 1).
    - `senders`, `receivers`: per graph [E_i] int32 canonical edge lists, node ids local
      to the graph (0 .. n_i - 1).
    - `labels`: [G] int32 in 0 .. n_classes - 1.
    - `name`: the data set's name.
    - `n_classes`: the number of classes; None (the default) means `labels.max() + 1`.
      A `subset` keeps its parent's count even when it lacks a class.

    Sequences are stored as tuples. Equality is identity.
    """

    # Any sequence of arrays, one per graph (a list too), stored as a tuple.
    features: Sequence[np.ndarray]
    senders: Sequence[np.ndarray]
    receivers: Sequence[np.ndarray]
    labels: np.ndarray
    name: str
    n_classes: int | None = None

    def __post_init__(self):
        for field in ("features", "senders", "receivers"):
            value = getattr(self, field)
            if isinstance(value, np.ndarray) or not isinstance(value, Sequence):
                raise ValueError(f"{field} must be a tuple with one array per graph "
                                 f"(got {_describe(value)}).")
            object.__setattr__(self, field, tuple(value))
        g = len(self.features)
        if g == 0:
            raise ValueError("a GraphSet needs at least one graph.")
        if len(self.senders) != g or len(self.receivers) != g:
            raise ValueError(f"features, senders and receivers must hold one entry per "
                             f"graph (got {g}, {len(self.senders)} and {len(self.receivers)}).")
        labels = self.labels
        if not isinstance(labels, np.ndarray) or labels.dtype != np.int32 or labels.shape != (g,):
            raise ValueError(f"labels must be an int32 array of shape ({g},), one per graph "
                             f"(got {_describe(labels)}).")
        if labels.min() < 0:
            raise ValueError(f"labels must be class indices >= 0 (found {labels.min()}).")
        n_classes = int(labels.max()) + 1 if self.n_classes is None else self.n_classes
        if (not isinstance(n_classes, (int, np.integer)) or isinstance(n_classes, bool)
                or n_classes <= labels.max()):
            raise ValueError(f"n_classes must be an integer above every label (got "
                             f"{n_classes!r}, largest label {labels.max()}).")
        object.__setattr__(self, "n_classes", int(n_classes))
        n_features = None
        for i, (x, s, r) in enumerate(zip(self.features, self.senders, self.receivers)):
            _check_features(f"features[{i}]", x)
            if x.shape[0] == 0:
                raise ValueError(f"features[{i}]: graph {i} has no nodes.")
            if n_features is None:
                n_features = x.shape[1]
            elif x.shape[1] != n_features:
                raise ValueError(f"features[{i}] has {x.shape[1]} features per node, "
                                 f"graph 0 has {n_features}: all graphs need the same.")
            _check_edges(f"graph {i}: ", s, r, x.shape[0])
        if not isinstance(self.name, str):
            raise ValueError(f"name must be a string (got {type(self.name).__name__}).")

    @property
    def n_graphs(self) -> int:
        return len(self.features)

    @property
    def n_features(self) -> int:
        return int(self.features[0].shape[1])

    @property
    def node_counts(self) -> np.ndarray:
        """[G] int64: the number of nodes of each graph."""
        return np.array([x.shape[0] for x in self.features], dtype=np.int64)

    @property
    def max_nodes(self) -> int:
        return int(self.node_counts.max())

    def subset(self, indices) -> GraphSet:
        """The graphs at `indices` (integers in 0 .. G - 1, in that order, repeats
        allowed, or a boolean mask of length G), with the same `n_classes`."""
        idx = np.asarray(indices)
        if idx.dtype == bool:
            if idx.shape != (self.n_graphs,):
                raise ValueError(f"a boolean mask must have shape ({self.n_graphs},) "
                                 f"(got {idx.shape}).")
            idx = np.flatnonzero(idx)
        if idx.ndim != 1 or not (idx.size == 0 or np.issubdtype(idx.dtype, np.integer)):
            raise ValueError(f"indices must be a 1-D array of graph indices (got "
                             f"{_describe(idx)}).")
        if idx.size == 0:
            raise ValueError("subset needs at least one graph index.")
        if idx.min() < 0 or idx.max() >= self.n_graphs:
            raise ValueError(f"graph indices must lie in 0 .. {self.n_graphs - 1} (got "
                             f"{idx.min()} .. {idx.max()}).")
        pick = idx.tolist()
        return GraphSet(
            features=tuple(self.features[i] for i in pick),
            senders=tuple(self.senders[i] for i in pick),
            receivers=tuple(self.receivers[i] for i in pick),
            labels=self.labels[idx], name=self.name, n_classes=self.n_classes,
        )

    def __repr__(self) -> str:
        return (f"GraphSet(name={self.name!r}, n_graphs={self.n_graphs}, "
                f"n_classes={self.n_classes}, n_features={self.n_features}, "
                f"max_nodes={self.max_nodes})")


# ------------------------------------------------------------------ argument checks


def _integer(name: str, value, minimum: int) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum} (got {value!r}).")
    return int(value)


def _real(name: str, value, *, low: float, high: float = math.inf,
          low_open: bool = True, high_open: bool = True) -> float:
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if ok:
        value = float(value)
        ok = (math.isfinite(value) and (value > low if low_open else value >= low)
              and (value < high if high_open else value <= high))
    if not ok:
        bounds = (f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}")
        raise ValueError(f"{name} must be a number in {bounds} (got {value!r}).")
    return value


# ----------------------------------------------------------- generated anomaly graph


def _triangle_pairs(index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decode indices `k` in 0 .. m(m-1)/2 - 1 into the pairs `(i, j)`, `j < i`, with
    `k = i(i-1)/2 + j` (every unordered pair of m nodes exactly once)."""
    i = np.floor((1.0 + np.sqrt(1.0 + 8.0 * index)) / 2.0).astype(np.int64)
    i -= i * (i - 1) // 2 > index          # correct float rounding either way
    i += (i + 1) * i // 2 <= index
    return i, index - i * (i - 1) // 2


def _distinct_sample(rng, population: int, count: int) -> np.ndarray:
    """`count` distinct integers drawn uniformly from 0 .. population - 1, in O(count)
    memory. (`rng.choice(replace=False)` allocates the whole population once the sample
    exceeds 2% of it; between 2% and 25% this draws with replacement, tops up the
    duplicates and keeps a uniform `count`-subset, which is uniform by symmetry.)"""
    if 50 * count <= population or population <= 4 * count:
        return rng.choice(population, size=count, replace=False)
    chosen = _sorted_unique(rng.integers(0, population, size=count))
    while chosen.size < count:
        extra = rng.integers(0, population, size=2 * (count - chosen.size))
        chosen = _sorted_unique(np.concatenate([chosen, extra]))
    return rng.choice(chosen, size=count, replace=False)


def _sbm_edges(rng, bounds: np.ndarray, p_in: float, p_out: float):
    """An undirected stochastic block model on the contiguous blocks
    `bounds[c] .. bounds[c + 1] - 1`: every pair of nodes is an edge independently with
    probability `p_in` (same block) or `p_out`. Per block pair, the edge count is drawn
    from its binomial law and that many distinct pairs uniformly (exactly the SBM, in
    O(E) time and memory). Returns one direction of each edge, int64."""
    senders, receivers = [], []
    n_blocks = len(bounds) - 1
    for a in range(n_blocks):
        for b in range(a, n_blocks):
            m_a, m_b = int(bounds[a + 1] - bounds[a]), int(bounds[b + 1] - bounds[b])
            pairs = m_a * (m_a - 1) // 2 if a == b else m_a * m_b
            count = int(rng.binomial(pairs, p_in if a == b else p_out)) if pairs else 0
            if count == 0:
                continue
            index = _distinct_sample(rng, pairs, count).astype(np.int64)
            if a == b:
                i, j = _triangle_pairs(index)
            else:
                i, j = index // m_b, index % m_b
            senders.append(i + bounds[a])
            receivers.append(j + bounds[b])
    if not senders:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(senders), np.concatenate(receivers)


def _contextual_swap(rng, base: np.ndarray, nodes: np.ndarray, k: int) -> np.ndarray:
    """For each node of `nodes`: `k` distinct other nodes drawn at random, and the
    features of the one farthest (Euclidean) from the node. Reads only the original
    features `base` [N, F]; returns [len(nodes), F]."""
    n = base.shape[0]
    out = np.empty((len(nodes), base.shape[1]), base.dtype)
    for row, node in enumerate(nodes):
        candidates = rng.choice(n - 1, size=k, replace=False)
        candidates += candidates >= node                    # skip the node itself
        distances = np.sum((base[candidates] - base[node]) ** 2, axis=1)
        out[row] = base[candidates[np.argmax(distances)]]
    return out


def anomaly_benchmark(n_nodes: int = 2000, *, seed: int = 0, n_communities: int = 4,
                      n_features: int = 32, mean_degree: float = 10.0,
                      p_in_ratio: float = 8.0, clique_size: int = 15,
                      n_cliques: int | None = None, n_contextual: int | None = None,
                      k_candidates: int = 50, feature_noise: float = 1.0) -> NodeGraph:
    """A seeded node anomaly-detection graph: an attributed stochastic block model with
    structural and contextual anomalies injected by the protocol of the graph anomaly-
    detection literature (Ding et al. 2019, "Deep anomaly detection on attributed
    networks"; the BOND benchmark, Liu et al. 2022; PyGOD's `gen_structural_outlier`
    and `gen_contextual_outlier`).

    Normal graph: `n_communities` communities of equal size (sizes differ by at most
    one; community c holds the contiguous node ids `c*N//K .. (c+1)*N//K - 1`). Two
    nodes are linked with probability `p_in` inside a community and
    `p_out = p_in / p_in_ratio` across, chosen so that the expected degree is
    `mean_degree`. Each community has a mean vector drawn from N(0, I_F); a node's
    features are its community's mean plus `feature_noise` * N(0, I_F).

    Anomalies:

    - structural (kind 1): `n_cliques` disjoint groups of `clique_size` random nodes,
      each made fully connected;
    - contextual (kind 2): `n_contextual` other random nodes; each draws `k_candidates`
      random other nodes (at most `n_nodes - 1`) and takes the features of the one
      farthest from it in Euclidean distance (among the original, unswapped features).

    Defaults: `n_cliques = max(1, round(0.025 * n_nodes / clique_size))` and
    `n_contextual = n_cliques * clique_size`: about 5% anomalies, half of each kind (90
    of 2000 nodes; a graph too small for a whole clique still gets one, so the share is
    larger below about 600 nodes). Returns a `NodeGraph` with `anomaly_kind` (int8,
    0/1/2), undirected (both directions), no self-loops. O(N F + E) time and memory;
    100,000 nodes take well under a second.
    """
    n = _integer("n_nodes", n_nodes, 50)
    seed = _integer("seed", seed, 0)
    k_blocks = _integer("n_communities", n_communities, 1)
    if k_blocks > n // 2:
        raise ValueError(f"n_communities={k_blocks} is too many for {n} nodes: every "
                         f"community needs at least 2 nodes (use at most {n // 2}).")
    f = _integer("n_features", n_features, 1)
    degree = _real("mean_degree", mean_degree, low=0.0)
    ratio = _real("p_in_ratio", p_in_ratio, low=0.0)
    size = _integer("clique_size", clique_size, 2)
    k = min(_integer("k_candidates", k_candidates, 1), n - 1)
    noise = _real("feature_noise", feature_noise, low=0.0, low_open=False)
    if n_cliques is None:
        n_cliques = max(1, math.floor(0.025 * n / size + 0.5))
    q = _integer("n_cliques", n_cliques, 0)
    n_ctx = _integer("n_contextual", q * size if n_contextual is None else n_contextual, 0)
    if q * size + n_ctx > n:
        raise ValueError(f"{q} cliques of {size} nodes plus {n_ctx} contextual anomalies "
                         f"need {q * size + n_ctx} distinct nodes but the graph has {n}: "
                         f"lower n_cliques, clique_size or n_contextual.")

    # Edge probabilities from the expected degree of a node of a community of mean size.
    m = n / k_blocks
    p_in = degree / ((m - 1) + (n - m) / ratio)
    p_out = p_in / ratio
    if max(p_in, p_out) > 1:
        raise ValueError(f"mean_degree={degree} is not reachable with {n} nodes in "
                         f"{k_blocks} communities and p_in_ratio={ratio} (it needs edge "
                         f"probability {max(p_in, p_out):.3g} > 1): lower mean_degree.")

    rng = np.random.default_rng(seed)
    bounds = (np.arange(k_blocks + 1) * n) // k_blocks
    sbm_s, sbm_r = _sbm_edges(rng, bounds, p_in, p_out)
    community = np.repeat(np.arange(k_blocks), np.diff(bounds))
    means = rng.normal(size=(k_blocks, f))
    features = means[community] + noise * rng.normal(size=(n, f))

    kind = np.zeros(n, np.int8)
    structural = rng.choice(n, size=q * size, replace=False)
    kind[structural] = 1
    groups = structural.reshape(q, size)
    upper_i, upper_j = np.triu_indices(size, 1)
    clique_s, clique_r = groups[:, upper_i].ravel(), groups[:, upper_j].ravel()

    others = np.flatnonzero(kind == 0)
    contextual = rng.choice(others, size=n_ctx, replace=False)
    kind[contextual] = 2
    if n_ctx:
        features[contextual] = _contextual_swap(rng, features, contextual, k)
    # (`features` is read before it is written: the swap sees the original features.)

    senders, receivers = canonical_edges(
        np.concatenate([sbm_s, clique_s]), np.concatenate([sbm_r, clique_r]), n,
        symmetrize=True, drop_self_loops=True,
    )
    return NodeGraph(
        features=features.astype(np.float32), senders=senders, receivers=receivers,
        labels=(kind > 0).astype(np.int32), name=f"sbm_anomaly_n{n}_seed{seed}",
        anomaly_kind=kind,
    )


# -------------------------------------------------------------------------------- CSL


def _circulant_edges(n: int, skips: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """The undirected circulant graph on n nodes: i ~ i + s (mod n) for each s."""
    i = np.arange(n)
    senders = np.concatenate([i for _ in skips])
    receivers = np.concatenate([(i + s) % n for s in skips])
    return canonical_edges(senders, receivers, n, symmetrize=True, drop_self_loops=True)


def csl_graphs(*, seed: int = 0) -> GraphSet:
    """The Circular Skip Links data set (Murphy et al. 2019): 150 graphs, 10 classes.

    Class c is the 41-node cycle (i ~ i + 1 mod 41) with skip links i ~ i + s mod 41,
    s = `CSL_SKIPS[c]` = (2, 3, 4, 5, 6, 9, 11, 12, 13, 16)[c]: every graph is 4-regular
    with 164 directed edges, and the classes are not distinguished by the 1-WL test.
    Graph `15 c + j` is copy j of class c with its nodes relabelled: node i of the
    circulant becomes node `perm[i]`, `perm = rng.permutation(41)` drawn in graph order
    from `np.random.default_rng(seed)`. Node features: the constant 1.0, [41, 1] float32.
    """
    seed = _integer("seed", seed, 0)
    rng = np.random.default_rng(seed)
    features, senders, receivers, labels = [], [], [], []
    for label, skip in enumerate(CSL_SKIPS):
        base_s, base_r = _circulant_edges(CSL_NODES, (1, skip))
        for _ in range(CSL_COPIES):
            perm = rng.permutation(CSL_NODES)
            s, r = canonical_edges(perm[base_s], perm[base_r], CSL_NODES)
            features.append(np.ones((CSL_NODES, 1), np.float32))
            senders.append(s)
            receivers.append(r)
            labels.append(label)
    return GraphSet(tuple(features), tuple(senders), tuple(receivers),
                    np.array(labels, np.int32), name="CSL", n_classes=len(CSL_SKIPS))


# --------------------------------------------------------------------- fraud .mat files

_FRAUD_HINT = ("YelpChi.mat and Amazon.mat are distributed by the CARE-GNN authors "
               "(github.com/YingtongDou/CARE-GNN, data/YelpChi.zip and data/Amazon.zip)")


def _dense_labels(path: Path, raw, n: int) -> np.ndarray:
    y = np.asarray(raw)
    if y.ndim == 2 and 1 in y.shape:
        y = y.reshape(-1)
    if y.ndim != 1:
        raise ValueError(f"{path}: 'label' has shape {np.shape(raw)}; expected (1, N), "
                         f"(N, 1) or (N,).")
    if y.shape[0] != n:
        raise ValueError(f"{path}: 'label' has {y.shape[0]} entries but the adjacency has "
                         f"{n} nodes.")
    if not np.issubdtype(y.dtype, np.number) or not np.all((y == 0) | (y == 1)):
        found = np.unique(y)[:10].tolist() if np.issubdtype(y.dtype, np.number) else y.dtype
        raise ValueError(f"{path}: 'label' must hold 0 (normal) or 1 (fraud) only; "
                         f"found {found}.")
    return y.astype(np.int32)


def load_fraud_mat(path, *, relation: str = "homo") -> NodeGraph:
    """A fraud-detection graph from its MATLAB file, as distributed by the CARE-GNN
    authors: `YelpChi.mat` (45,954 reviews, 32 features; relations `homo`, `net_rur`,
    `net_rtr`, `net_rsr`) or `Amazon.mat` (11,944 users, 25 features; `homo`, `net_upu`,
    `net_usu`, `net_uvu`).

    Keys read (with `scipy.io.loadmat`): `relation` (a sparse or dense N x N adjacency;
    its nonzero pattern is the edge set), `features` (sparse or dense N x F) and `label`
    ((1, N), (N, 1) or (N,), values 0/1). The adjacency is symmetrised, self-loops are
    dropped and duplicates removed. The name is the file's stem ("YelpChi").
    """
    import scipy.io
    import scipy.sparse

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path} does not exist; {_FRAUD_HINT}.")
    try:
        data = scipy.io.loadmat(path)
    except NotImplementedError as exc:  # scipy's answer to MATLAB v7.3 (HDF5) files
        raise ValueError(f"{path} is a MATLAB v7.3 (HDF5) file, which scipy.io cannot "
                         f"read: save it again as v7 (MATLAB: save(file, '-v7')).") from exc
    except Exception as exc:  # MatReadError, ValueError, ... all mean "not a .mat file"
        raise ValueError(f"{path} is not a MATLAB .mat file ({exc}); {_FRAUD_HINT}.") from exc
    present = sorted(key for key in data if not key.startswith("__"))
    for key in (relation, "features", "label"):
        if key not in data:
            hint = (" (relation= names the adjacency matrix to read)" if key == relation
                    else "")
            raise ValueError(f"{path} has no key {key!r}{hint}; its keys are {present}.")

    adjacency = data[relation]
    if not (scipy.sparse.issparse(adjacency)
            or (isinstance(adjacency, np.ndarray) and np.issubdtype(adjacency.dtype, np.number))):
        raise ValueError(f"{path}: {relation!r} is not a matrix (got {_describe(adjacency)}).")
    if adjacency.ndim != 2 or adjacency.shape[0] != adjacency.shape[1]:
        raise ValueError(f"{path}: adjacency {relation!r} must be square, N x N (got shape "
                         f"{adjacency.shape}).")
    n = adjacency.shape[0]
    coo = scipy.sparse.coo_matrix(adjacency)
    nonzero = coo.data != 0
    senders, receivers = canonical_edges(coo.row[nonzero], coo.col[nonzero], n,
                                         symmetrize=True, drop_self_loops=True)

    raw = data["features"]
    features = raw.toarray() if scipy.sparse.issparse(raw) else np.asarray(raw)
    if features.ndim != 2 or not np.issubdtype(features.dtype, np.number):
        raise ValueError(f"{path}: 'features' must be an N x F numeric matrix (got "
                         f"{_describe(features)}).")
    if features.shape[0] != n:
        raise ValueError(f"{path}: 'features' has {features.shape[0]} rows but adjacency "
                         f"{relation!r} has {n} nodes.")
    features = features.astype(np.float32)
    bad = ~np.isfinite(features)
    if bad.any():
        raise ValueError(f"{path}: 'features' holds {int(bad.sum())} NaN or infinite "
                         f"values (first in row {int(np.argwhere(bad)[0, 0])}).")
    labels = _dense_labels(path, data["label"], n)
    return NodeGraph(features=features, senders=senders, receivers=receivers,
                     labels=labels, name=path.stem)


# ------------------------------------------------------------------------ TU data sets


def _read_lines(path: Path) -> list[str]:
    """The lines of a text file; trailing blank lines are ignored, inner ones refused."""
    try:
        lines = path.read_text().splitlines()
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not a text file ({exc}).") from exc
    while lines and not lines[-1].strip():
        lines.pop()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            raise ValueError(f"{path}, line {number}: empty line.")
    return lines


def _parse_table(path: Path, lines: list[str], width: int | None, kind: type) -> np.ndarray:
    """Comma-separated numbers, `width` per line (None: as many as on line 1).
    Returns [lines, width] int64 (`kind` int) or float64 (`kind` float)."""
    rows = [line.split(",") for line in lines]
    if width is None:
        width = len(rows[0]) if rows else 0
    for number, row in enumerate(rows, 1):
        if len(row) != width:
            raise ValueError(f"{path}, line {number}: expected {width} comma-separated "
                             f"value(s), got {len(row)} ({lines[number - 1].strip()!r}).")
    dtype = np.int64 if kind is int else np.float64
    if not rows:
        return np.zeros((0, width), dtype)
    try:
        return np.array(rows, dtype=dtype)
    except (ValueError, OverflowError):
        for number, row in enumerate(rows, 1):
            try:
                np.array(row, dtype=dtype)
            except (ValueError, OverflowError):
                what = "integers" if kind is int else "numbers"
                raise ValueError(f"{path}, line {number}: expected {what}, got "
                                 f"{lines[number - 1].strip()!r}.") from None
        raise


def _tu_file(folder: Path, name: str, kind: str) -> Path:
    return folder / f"{name}_{kind}.txt"


def load_tu(folder, name: str | None = None) -> GraphSet:
    """A graph-classification data set in the TU Dortmund text format
    (chrsmrrs.github.io/datasets), from `folder` holding, for DS = `name` (default: the
    folder's name):

    - `DS_A.txt`: one directed edge per line, `row, col`, 1-based global node ids;
    - `DS_graph_indicator.txt`: line i, the 1-based graph id of node i (graph ids start
      at 1 and never decrease or skip: the nodes of a graph are consecutive);
    - `DS_graph_labels.txt`: line j, the class of graph j (any integers; relabelled
      densely 0 .. C-1 in sorted order);
    - optional `DS_node_labels.txt`: line i, an integer label of node i (one-hot encoded
      over the sorted distinct labels);
    - optional `DS_node_attributes.txt`: line i, comma-separated floats.

    Node features are the attributes followed by the one-hot node labels, or the single
    constant 1.0 when neither file exists. Edges are kept as listed (TU files list both
    directions of undirected graphs), duplicates removed, self-loops kept; edge labels
    and attributes are not read.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder; pass the folder of a TU data set "
                         f"(holding DS_A.txt, DS_graph_indicator.txt, DS_graph_labels.txt).")
    name = folder.name if name is None else name
    for kind in ("A", "graph_indicator", "graph_labels"):
        path = _tu_file(folder, name, kind)
        if not path.is_file():
            found = sorted(p.name[:-len("_A.txt")] for p in folder.glob("*_A.txt"))
            hint = f"; the folder holds data set(s) {found}: pass name=" if found else ""
            raise ValueError(f"{path} is missing: a TU data set needs {name}_A.txt, "
                             f"{name}_graph_indicator.txt and {name}_graph_labels.txt"
                             f"{hint}.")

    indicator_path = _tu_file(folder, name, "graph_indicator")
    indicator = _parse_table(indicator_path, _read_lines(indicator_path), 1, int)[:, 0]
    n = indicator.shape[0]
    if n == 0:
        raise ValueError(f"{indicator_path} is empty: a data set needs at least one node.")
    if indicator[0] != 1:
        raise ValueError(f"{indicator_path}, line 1: graph ids must start at 1 (got "
                         f"{indicator[0]}).")
    steps = np.diff(indicator)
    bad = np.flatnonzero((steps != 0) & (steps != 1))
    if bad.size:
        line = int(bad[0]) + 2
        raise ValueError(f"{indicator_path}, line {line}: graph id {indicator[line - 1]} "
                         f"follows {indicator[line - 2]}; graph ids must be nondecreasing "
                         f"without gaps (the nodes of each graph consecutive).")
    n_graphs = int(indicator[-1])
    graph_of = indicator - 1                                          # [N] 0-based
    starts = np.searchsorted(graph_of, np.arange(n_graphs + 1))      # [G + 1]

    labels_path = _tu_file(folder, name, "graph_labels")
    raw_labels = _parse_table(labels_path, _read_lines(labels_path), 1, int)[:, 0]
    if raw_labels.shape[0] != n_graphs:
        raise ValueError(f"{labels_path} has {raw_labels.shape[0]} lines but "
                         f"{indicator_path.name} numbers {n_graphs} graphs (one label "
                         f"per graph).")
    _, labels = np.unique(raw_labels, return_inverse=True)

    edges_path = _tu_file(folder, name, "A")
    edges = _parse_table(edges_path, _read_lines(edges_path), 2, int)
    outside = np.flatnonzero(np.any((edges < 1) | (edges > n), axis=1))
    if outside.size:
        line = int(outside[0]) + 1
        raise ValueError(f"{edges_path}, line {line}: node id out of range 1 .. {n} "
                         f"({edges[line - 1, 0]}, {edges[line - 1, 1]}).")
    edges = edges - 1
    crossing = np.flatnonzero(graph_of[edges[:, 0]] != graph_of[edges[:, 1]])
    if crossing.size:
        line = int(crossing[0]) + 1
        a, b = edges[line - 1] + 1
        raise ValueError(f"{edges_path}, line {line}: edge ({a}, {b}) joins graph "
                         f"{graph_of[a - 1] + 1} to graph {graph_of[b - 1] + 1}; edges "
                         f"must stay inside one graph.")
    senders, receivers = canonical_edges(edges[:, 0], edges[:, 1], n)
    edge_bounds = np.searchsorted(graph_of[senders], np.arange(n_graphs + 1))

    features = _tu_features(folder, name, n)
    per_graph = range(n_graphs)
    return GraphSet(
        features=tuple(features[starts[g]:starts[g + 1]] for g in per_graph),
        senders=tuple(senders[edge_bounds[g]:edge_bounds[g + 1]] - np.int32(starts[g])
                      for g in per_graph),
        receivers=tuple(receivers[edge_bounds[g]:edge_bounds[g + 1]] - np.int32(starts[g])
                        for g in per_graph),
        labels=labels.astype(np.int32), name=name,
    )


def _tu_features(folder: Path, name: str, n: int) -> np.ndarray:
    """[N, F] float32: node attributes, then one-hot node labels; [N, 1] ones if the
    data set has neither."""
    parts = []
    attributes_path = _tu_file(folder, name, "node_attributes")
    if attributes_path.is_file():
        attributes = _parse_table(attributes_path, _read_lines(attributes_path), None, float)
        if attributes.shape[0] != n:
            raise ValueError(f"{attributes_path} has {attributes.shape[0]} lines but the "
                             f"graph indicator lists {n} nodes (one line per node).")
        bad = np.flatnonzero(~np.all(np.isfinite(attributes), axis=1))
        if bad.size:
            raise ValueError(f"{attributes_path}, line {int(bad[0]) + 1}: NaN or infinite "
                             f"attribute.")
        parts.append(attributes)
    node_labels_path = _tu_file(folder, name, "node_labels")
    if node_labels_path.is_file():
        node_labels = _parse_table(node_labels_path, _read_lines(node_labels_path), 1,
                                   int)[:, 0]
        if node_labels.shape[0] != n:
            raise ValueError(f"{node_labels_path} has {node_labels.shape[0]} lines but the "
                             f"graph indicator lists {n} nodes (one line per node).")
        values, index = np.unique(node_labels, return_inverse=True)
        one_hot = np.zeros((n, values.size))
        one_hot[np.arange(n), index] = 1.0
        parts.append(one_hot)
    if not parts:
        return np.ones((n, 1), np.float32)
    return np.concatenate(parts, axis=1).astype(np.float32)


# --------------------------------------------------------------------------- splits


def _class_members(labels) -> tuple[np.ndarray, list[np.ndarray]]:
    y = np.asarray(labels)
    if y.ndim != 1 or y.size == 0 or not (np.issubdtype(y.dtype, np.integer)
                                          or y.dtype == bool):
        raise ValueError(f"labels must be a non-empty 1-D integer array (got "
                         f"{_describe(y)}).")
    classes, index = np.unique(y, return_inverse=True)
    order = np.argsort(index, kind="stable")
    members = np.split(order, np.cumsum(np.bincount(index))[:-1])
    return classes, members


def _rounded(share: float, count: int) -> int:
    return math.floor(share * count + 0.5)


def stratified_splits(labels, train_ratio: float, *, n_splits: int = 5,
                      val_ratio: float | None = None, seed: int = 0) -> list[dict]:
    """Random stratified train / validation / test splits of the nodes (the
    anomaly-detection protocol of the paper's appendix B).

    Per class of `labels` ([N] integers), `round(train_ratio * n_c)` nodes train,
    `round(val_share * n_c)` validate and the rest test, where `val_share` is
    `val_ratio` or, by default, a third of what training leaves (the rest is split 1:2
    into validation and test). Split i is drawn from `np.random.default_rng([seed, i])`:
    reproducible and different per split. Returns `n_splits` dicts
    `{"train", "val", "test"}` of sorted int64 node indices, disjoint and together all
    N nodes. Refuses ratios that would leave a part without a node of some class.
    """
    classes, members = _class_members(labels)
    train_ratio = _real("train_ratio", train_ratio, low=0.0, high=1.0)
    n_splits = _integer("n_splits", n_splits, 1)
    seed = _integer("seed", seed, 0)
    if val_ratio is None:
        val_share, val_name = (1.0 - train_ratio) / 3.0, "(1 - train_ratio) / 3"
    else:
        val_share = _real("val_ratio", val_ratio, low=0.0, high=1.0)
        val_name = "val_ratio"
        if train_ratio + val_share >= 1.0:
            raise ValueError(f"train_ratio + val_ratio = {train_ratio + val_share:g} leaves "
                             f"no test nodes; it must be below 1.")
    counts = []
    for value, member in zip(classes, members):
        n_c = member.size
        n_train, n_val = _rounded(train_ratio, n_c), _rounded(val_share, n_c)
        n_test = n_c - n_train - n_val
        for part, size, what in (("training", n_train, f"train_ratio={train_ratio:g} is "
                                  f"too small"),
                                 ("validation", n_val, f"the validation share {val_name} "
                                  f"= {val_share:.4g} is too small"),
                                 ("test", n_test, "the test share (what train and "
                                  "validation leave) is too small")):
            if size < 1:
                raise ValueError(f"{what}: class {value} has {n_c} nodes, so its {part} "
                                 f"part would be empty; every part needs at least one node "
                                 f"of each class.")
        counts.append((n_train, n_val))
    splits = []
    for split in range(n_splits):
        rng = np.random.default_rng([seed, split])
        parts = {"train": [], "val": [], "test": []}
        for member, (n_train, n_val) in zip(members, counts):
            shuffled = rng.permutation(member)
            parts["train"].append(shuffled[:n_train])
            parts["val"].append(shuffled[n_train:n_train + n_val])
            parts["test"].append(shuffled[n_train + n_val:])
        splits.append({key: np.sort(np.concatenate(value)).astype(np.int64)
                       for key, value in parts.items()})
    return splits


def cross_validation_folds(labels, *, n_folds: int = 10, seed: int = 0,
                           val_fraction: float = 0.1) -> list[dict]:
    """Stratified k-fold cross-validation for graph classification.

    The graphs of each class are shuffled (`np.random.default_rng(seed)`) and dealt to
    the folds in turn, class after class, so every fold holds each class's graphs
    within one of `n_c / n_folds` and fold sizes differ by at most one. Fold i tests on
    the i-th fold; its validation set is a stratified `round(val_fraction * m_c)` of the
    m_c remaining graphs of each class (never the test fold; drawn from
    `np.random.default_rng([seed, i])`), and it trains on the rest. `val_fraction=0`
    gives empty validation sets. Returns `n_folds` dicts `{"train", "val", "test"}` of
    sorted int64 graph indices; the test sets partition all graphs.
    """
    classes, members = _class_members(labels)
    n_folds = _integer("n_folds", n_folds, 2)
    seed = _integer("seed", seed, 0)
    val_fraction = _real("val_fraction", val_fraction, low=0.0, high=1.0, low_open=False)
    smallest = int(np.argmin([m.size for m in members]))
    if members[smallest].size < n_folds:
        raise ValueError(f"class {classes[smallest]} has {members[smallest].size} graphs, "
                         f"fewer than n_folds={n_folds}: some test folds would lack it; "
                         f"lower n_folds.")
    rng = np.random.default_rng(seed)
    order = np.concatenate([rng.permutation(member) for member in members])
    fold_of = np.empty(order.size, np.int64)
    fold_of[order] = np.arange(order.size) % n_folds
    folds = []
    for fold in range(n_folds):
        fold_rng = np.random.default_rng([seed, fold])
        val = []
        for value, member in zip(classes, members):
            rest = member[fold_of[member] != fold]
            n_val = _rounded(val_fraction, rest.size)
            if val_fraction > 0 and n_val < 1:
                raise ValueError(f"val_fraction={val_fraction:g} is too small: class "
                                 f"{value} has {rest.size} graphs outside test fold {fold}, "
                                 f"so its validation part would be empty.")
            if n_val >= rest.size:
                raise ValueError(f"val_fraction={val_fraction:g} is too large: it takes all "
                                 f"{rest.size} training graphs of class {value} in fold "
                                 f"{fold}.")
            val.append(fold_rng.permutation(rest)[:n_val])
        val = np.sort(np.concatenate(val)).astype(np.int64)
        test = np.flatnonzero(fold_of == fold).astype(np.int64)
        in_train = fold_of != fold
        in_train[val] = False
        folds.append({"train": np.flatnonzero(in_train).astype(np.int64), "val": val,
                      "test": test})
    return folds
