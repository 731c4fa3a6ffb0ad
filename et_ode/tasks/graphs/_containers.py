"""The containers of graph data, in NumPy only: `NodeGraph` (one graph, node features,
a binary label per node, 1 = anomaly) and `GraphSet` (many small graphs with one class
label each), and their edge lists.

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
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from ._checks import describe

__all__ = ["GraphSet", "NodeGraph", "canonical_edges"]

# ------------------------------------------------------------------------ edge lists


def canonical_edges(
    senders, receivers, n_nodes: int, *, symmetrize: bool = False, drop_self_loops: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """The canonical form of an edge list: sorted by `(sender, receiver)`, duplicates
    removed, optionally with both directions of every edge (`symmetrize`) and without
    self-loops (`drop_self_loops`).

    `senders`, `receivers`: [E] integer node ids in `0 .. n_nodes - 1`.
    Returns `(senders, receivers)`, each [E'] int32. O(E log E) time, O(E) memory.
    """
    s = np.asarray(senders)
    r = np.asarray(receivers)
    if s.ndim != 1 or r.shape != s.shape:
        raise ValueError(
            f"senders and receivers must be 1-D arrays of one length "
            f"(got shapes {s.shape} and {r.shape})."
        )
    if s.size and not (np.issubdtype(s.dtype, np.integer) and np.issubdtype(r.dtype, np.integer)):
        raise ValueError(f"node ids must be integers (got {s.dtype} and {r.dtype}).")
    s = s.astype(np.int64, copy=False)
    r = r.astype(np.int64, copy=False)
    if s.size and (min(s.min(), r.min()) < 0 or max(s.max(), r.max()) >= n_nodes):
        raise ValueError(
            f"node ids must lie in 0 .. {n_nodes - 1} (got ids from "
            f"{min(s.min(), r.min())} to {max(s.max(), r.max())})."
        )
    if symmetrize:
        s, r = np.concatenate([s, r]), np.concatenate([r, s])
    if drop_self_loops:
        keep = s != r
        s, r = s[keep], r[keep]
    keys = sorted_unique(s * n_nodes + r)
    return (keys // n_nodes).astype(np.int32), (keys % n_nodes).astype(np.int32)


def sorted_unique(values: np.ndarray) -> np.ndarray:
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
            raise ValueError(f"{field}{which} must be a 1-D int32 array (got {describe(array)}).")
    if senders.shape != receivers.shape:
        raise ValueError(
            f"{field}senders and receivers have different lengths "
            f"({senders.size} and {receivers.size})."
        )
    if not senders.size:
        return
    low = min(int(senders.min()), int(receivers.min()))
    high = max(int(senders.max()), int(receivers.max()))
    if low < 0 or high >= n_nodes:
        raise ValueError(
            f"{field}senders/receivers hold node ids from {low} to {high}, "
            f"outside 0 .. {n_nodes - 1}."
        )
    keys = senders.astype(np.int64) * n_nodes + receivers
    if np.any(np.diff(keys) <= 0):
        raise ValueError(
            f"{field}senders/receivers are not canonical (sorted by "
            f"(sender, receiver), without duplicates): build them with "
            f"canonical_edges()."
        )


def _check_features(field: str, features) -> None:
    if not isinstance(features, np.ndarray) or features.ndim != 2 or features.dtype != np.float32:
        raise ValueError(f"{field} must be a 2-D float32 array (got {describe(features)}).")
    if not np.all(np.isfinite(features)):
        raise ValueError(
            f"{field} holds {int(np.sum(~np.isfinite(features)))} NaN or infinite values."
        )


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
            raise ValueError(
                f"senders/receivers hold {loops} self-loop(s); a NodeGraph has "
                f"none (the detectors add their own): drop them with "
                f"canonical_edges(..., drop_self_loops=True)."
            )
        labels = self.labels
        if not isinstance(labels, np.ndarray) or labels.dtype != np.int32 or labels.shape != (n,):
            raise ValueError(
                f"labels must be an int32 array of shape ({n},), one per node "
                f"(got {describe(labels)})."
            )
        if n and not np.all((labels == 0) | (labels == 1)):
            raise ValueError(
                f"labels must be 0 (normal) or 1 (anomaly); found "
                f"{np.unique(labels)[:10].tolist()}."
            )
        if not isinstance(self.name, str):
            raise ValueError(f"name must be a string (got {type(self.name).__name__}).")
        kind = self.anomaly_kind
        if kind is not None:
            if not isinstance(kind, np.ndarray) or kind.dtype != np.int8 or kind.shape != (n,):
                raise ValueError(
                    f"anomaly_kind must be None or an int8 array of shape "
                    f"({n},) (got {describe(kind)})."
                )
            if not np.all((kind >= 0) & (kind <= 2)):
                raise ValueError(
                    "anomaly_kind must be 0 (normal), 1 (structural) or 2 (contextual)."
                )
            if not np.array_equal(kind > 0, labels == 1):
                raise ValueError(
                    "anomaly_kind and labels disagree: labels must be 1 "
                    "exactly where anomaly_kind > 0."
                )

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
        return (
            f"NodeGraph(name={self.name!r}, n_nodes={self.n_nodes}, "
            f"n_edges={self.n_edges}, n_features={self.n_features}, "
            f"n_anomalies={self.n_anomalies})"
        )


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
                raise ValueError(
                    f"{field} must be a tuple with one array per graph (got {describe(value)})."
                )
            object.__setattr__(self, field, tuple(value))
        g = len(self.features)
        if g == 0:
            raise ValueError("a GraphSet needs at least one graph.")
        if len(self.senders) != g or len(self.receivers) != g:
            raise ValueError(
                f"features, senders and receivers must hold one entry per "
                f"graph (got {g}, {len(self.senders)} and {len(self.receivers)})."
            )
        labels = self.labels
        if not isinstance(labels, np.ndarray) or labels.dtype != np.int32 or labels.shape != (g,):
            raise ValueError(
                f"labels must be an int32 array of shape ({g},), one per graph "
                f"(got {describe(labels)})."
            )
        if labels.min() < 0:
            raise ValueError(f"labels must be class indices >= 0 (found {labels.min()}).")
        n_classes = int(labels.max()) + 1 if self.n_classes is None else self.n_classes
        if (
            not isinstance(n_classes, (int, np.integer))
            or isinstance(n_classes, bool)
            or n_classes <= labels.max()
        ):
            raise ValueError(
                f"n_classes must be an integer above every label (got "
                f"{n_classes!r}, largest label {labels.max()})."
            )
        object.__setattr__(self, "n_classes", int(n_classes))
        n_features = None
        for i, (x, s, r) in enumerate(zip(self.features, self.senders, self.receivers)):
            _check_features(f"features[{i}]", x)
            if x.shape[0] == 0:
                raise ValueError(f"features[{i}]: graph {i} has no nodes.")
            if n_features is None:
                n_features = x.shape[1]
            elif x.shape[1] != n_features:
                raise ValueError(
                    f"features[{i}] has {x.shape[1]} features per node, "
                    f"graph 0 has {n_features}: all graphs need the same."
                )
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
                raise ValueError(
                    f"a boolean mask must have shape ({self.n_graphs},) (got {idx.shape})."
                )
            idx = np.flatnonzero(idx)
        if idx.ndim != 1 or not (idx.size == 0 or np.issubdtype(idx.dtype, np.integer)):
            raise ValueError(f"indices must be a 1-D array of graph indices (got {describe(idx)}).")
        if idx.size == 0:
            raise ValueError("subset needs at least one graph index.")
        if idx.min() < 0 or idx.max() >= self.n_graphs:
            raise ValueError(
                f"graph indices must lie in 0 .. {self.n_graphs - 1} (got "
                f"{idx.min()} .. {idx.max()})."
            )
        pick = idx.tolist()
        return GraphSet(
            features=tuple(self.features[i] for i in pick),
            senders=tuple(self.senders[i] for i in pick),
            receivers=tuple(self.receivers[i] for i in pick),
            labels=self.labels[idx],
            name=self.name,
            n_classes=self.n_classes,
        )

    def __repr__(self) -> str:
        return (
            f"GraphSet(name={self.name!r}, n_graphs={self.n_graphs}, "
            f"n_classes={self.n_classes}, n_features={self.n_features}, "
            f"max_nodes={self.max_nodes})"
        )
