"""Generated graph data, seeded: `anomaly_benchmark` (an attributed stochastic block model
with structural and contextual anomalies injected by the standard protocol) and
`csl_graphs` (the Circular Skip Links data set, Murphy et al. 2019). Everything comes
from `np.random.default_rng(seed)` and is reproducible."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from ._checks import integer, real
from ._containers import GraphSet, NodeGraph, canonical_edges, sorted_unique

__all__ = [
    "CSL_COPIES",
    "CSL_NODES",
    "CSL_SKIPS",
    "AnomalyInjection",
    "anomaly_benchmark",
    "csl_graphs",
]

# Circular Skip Links (Murphy et al. 2019, "Relational Pooling for Graph Representations"):
# class k is the 41-node cycle with skip links of length CSL_SKIPS[k].
CSL_SKIPS = (2, 3, 4, 5, 6, 9, 11, 12, 13, 16)
CSL_NODES = 41
CSL_COPIES = 15

# ----------------------------------------------------------- generated anomaly graph


def _triangle_pairs(index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decode indices `k` in 0 .. m(m-1)/2 - 1 into the pairs `(i, j)`, `j < i`, with
    `k = i(i-1)/2 + j` (every unordered pair of m nodes exactly once)."""
    i = np.floor((1.0 + np.sqrt(1.0 + 8.0 * index)) / 2.0).astype(np.int64)
    i -= i * (i - 1) // 2 > index  # correct float rounding either way
    i += (i + 1) * i // 2 <= index
    return i, index - i * (i - 1) // 2


def _distinct_sample(rng, population: int, count: int) -> np.ndarray:
    """`count` distinct integers drawn uniformly from 0 .. population - 1, in O(count)
    memory. (`rng.choice(replace=False)` allocates the whole population once the sample
    exceeds 2% of it; between 2% and 25% this draws with replacement, tops up the
    duplicates and keeps a uniform `count`-subset, which is uniform by symmetry.)"""
    if 50 * count <= population or population <= 4 * count:
        return rng.choice(population, size=count, replace=False)
    chosen = sorted_unique(rng.integers(0, population, size=count))
    while chosen.size < count:
        extra = rng.integers(0, population, size=2 * (count - chosen.size))
        chosen = sorted_unique(np.concatenate([chosen, extra]))
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
        candidates += candidates >= node  # skip the node itself
        distances = np.sum((base[candidates] - base[node]) ** 2, axis=1)
        out[row] = base[candidates[np.argmax(distances)]]
    return out


@dataclasses.dataclass(frozen=True)
class AnomalyInjection:
    """The anomalies `anomaly_benchmark` injects, by the standard protocol (PyGOD's
    `gen_structural_outlier` and `gen_contextual_outlier`), checked when made:

    - `clique_size`: nodes per structural clique (at least 2).
    - `n_cliques`: structural cliques (`None`: `max(1, round(0.025 * n_nodes /
      clique_size))`, about 2.5% of the nodes).
    - `n_contextual`: contextual anomalies (`None`: as many as structural nodes).
    - `k_candidates`: the random other nodes each contextual anomaly draws to take the
      features of the farthest (at most `n_nodes - 1` are drawn).
    """

    clique_size: int = 15
    n_cliques: int | None = None
    n_contextual: int | None = None
    k_candidates: int = 50

    def __post_init__(self):
        integer("clique_size", self.clique_size, 2)
        integer("k_candidates", self.k_candidates, 1)
        for name in ("n_cliques", "n_contextual"):
            if getattr(self, name) is not None:
                integer(name, getattr(self, name), 0)


def anomaly_benchmark(
    n_nodes: int = 2000,
    *,
    seed: int = 0,
    n_communities: int = 4,
    n_features: int = 32,
    mean_degree: float = 10.0,
    p_in_ratio: float = 8.0,
    feature_noise: float = 1.0,
    anomalies: AnomalyInjection = AnomalyInjection(),
) -> NodeGraph:
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

    Anomalies (`anomalies`, an `AnomalyInjection`: its fields below):

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
    n = integer("n_nodes", n_nodes, 50)
    seed = integer("seed", seed, 0)
    k_blocks = integer("n_communities", n_communities, 1)
    if k_blocks > n // 2:
        raise ValueError(
            f"n_communities={k_blocks} is too many for {n} nodes: every "
            f"community needs at least 2 nodes (use at most {n // 2})."
        )
    f = integer("n_features", n_features, 1)
    degree = real("mean_degree", mean_degree, low=0.0)
    ratio = real("p_in_ratio", p_in_ratio, low=0.0)
    noise = real("feature_noise", feature_noise, low=0.0, low_open=False)
    if not isinstance(anomalies, AnomalyInjection):
        raise ValueError(
            "anomalies must be a tasks.AnomalyInjection(clique_size=..., n_cliques=..., "
            f"n_contextual=..., k_candidates=...) (got {type(anomalies).__name__})."
        )
    size = int(anomalies.clique_size)
    k = min(int(anomalies.k_candidates), n - 1)
    n_cliques = anomalies.n_cliques
    q = max(1, math.floor(0.025 * n / size + 0.5)) if n_cliques is None else int(n_cliques)
    n_contextual = anomalies.n_contextual
    n_ctx = q * size if n_contextual is None else int(n_contextual)
    if q * size + n_ctx > n:
        raise ValueError(
            f"{q} cliques of {size} nodes plus {n_ctx} contextual anomalies "
            f"need {q * size + n_ctx} distinct nodes but the graph has {n}: "
            f"lower n_cliques, clique_size or n_contextual."
        )

    # Edge probabilities from the expected degree of a node of a community of mean size.
    m = n / k_blocks
    p_in = degree / ((m - 1) + (n - m) / ratio)
    p_out = p_in / ratio
    if max(p_in, p_out) > 1:
        raise ValueError(
            f"mean_degree={degree} is not reachable with {n} nodes in "
            f"{k_blocks} communities and p_in_ratio={ratio} (it needs edge "
            f"probability {max(p_in, p_out):.3g} > 1): lower mean_degree."
        )

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
        np.concatenate([sbm_s, clique_s]),
        np.concatenate([sbm_r, clique_r]),
        n,
        symmetrize=True,
        drop_self_loops=True,
    )
    return NodeGraph(
        features=features.astype(np.float32),
        senders=senders,
        receivers=receivers,
        labels=(kind > 0).astype(np.int32),
        name=f"sbm_anomaly_n{n}_seed{seed}",
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
    seed = integer("seed", seed, 0)
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
    return GraphSet(
        tuple(features),
        tuple(senders),
        tuple(receivers),
        np.array(labels, np.int32),
        name="CSL",
        n_classes=len(CSL_SKIPS),
    )
