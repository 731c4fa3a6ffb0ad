"""Graph data read from files: `load_fraud_mat` (YelpChi.mat / Amazon.mat as distributed
by the CARE-GNN authors) and `load_tu` (any data set in the TU Dortmund text format:
MUTAG, PROTEINS, ...). SciPy (for `.mat` files) is imported only inside
`load_fraud_mat`."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ._checks import describe
from ._containers import GraphSet, NodeGraph, canonical_edges

__all__ = ["load_fraud_mat", "load_tu"]

# --------------------------------------------------------------------- fraud .mat files

_FRAUD_HINT = (
    "YelpChi.mat and Amazon.mat are distributed by the CARE-GNN authors "
    "(github.com/YingtongDou/CARE-GNN, data/YelpChi.zip and data/Amazon.zip)"
)


def _dense_labels(path: Path, raw, n: int) -> np.ndarray:
    y = np.asarray(raw)
    if y.ndim == 2 and 1 in y.shape:
        y = y.reshape(-1)
    if y.ndim != 1:
        raise ValueError(
            f"{path}: 'label' has shape {np.shape(raw)}; expected (1, N), (N, 1) or (N,)."
        )
    if y.shape[0] != n:
        raise ValueError(
            f"{path}: 'label' has {y.shape[0]} entries but the adjacency has {n} nodes."
        )
    if not np.issubdtype(y.dtype, np.number) or not np.all((y == 0) | (y == 1)):
        found = np.unique(y)[:10].tolist() if np.issubdtype(y.dtype, np.number) else y.dtype
        raise ValueError(f"{path}: 'label' must hold 0 (normal) or 1 (fraud) only; found {found}.")
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
        raise ValueError(
            f"{path} is a MATLAB v7.3 (HDF5) file, which scipy.io cannot "
            f"read: save it again as v7 (MATLAB: save(file, '-v7'))."
        ) from exc
    except Exception as exc:  # MatReadError, ValueError, ... all mean "not a .mat file"
        raise ValueError(f"{path} is not a MATLAB .mat file ({exc}); {_FRAUD_HINT}.") from exc
    present = sorted(key for key in data if not key.startswith("__"))
    for key in (relation, "features", "label"):
        if key not in data:
            hint = " (relation= names the adjacency matrix to read)" if key == relation else ""
            raise ValueError(f"{path} has no key {key!r}{hint}; its keys are {present}.")

    adjacency = data[relation]
    if not (
        scipy.sparse.issparse(adjacency)
        or (isinstance(adjacency, np.ndarray) and np.issubdtype(adjacency.dtype, np.number))
    ):
        raise ValueError(f"{path}: {relation!r} is not a matrix (got {describe(adjacency)}).")
    if adjacency.ndim != 2 or adjacency.shape[0] != adjacency.shape[1]:
        raise ValueError(
            f"{path}: adjacency {relation!r} must be square, N x N (got shape {adjacency.shape})."
        )
    n = adjacency.shape[0]
    coo = scipy.sparse.coo_matrix(adjacency)
    nonzero = coo.data != 0
    senders, receivers = canonical_edges(
        coo.row[nonzero], coo.col[nonzero], n, symmetrize=True, drop_self_loops=True
    )

    raw = data["features"]
    features = raw.toarray() if scipy.sparse.issparse(raw) else np.asarray(raw)
    if features.ndim != 2 or not np.issubdtype(features.dtype, np.number):
        raise ValueError(
            f"{path}: 'features' must be an N x F numeric matrix (got {describe(features)})."
        )
    if features.shape[0] != n:
        raise ValueError(
            f"{path}: 'features' has {features.shape[0]} rows but adjacency "
            f"{relation!r} has {n} nodes."
        )
    features = features.astype(np.float32)
    bad = ~np.isfinite(features)
    if bad.any():
        raise ValueError(
            f"{path}: 'features' holds {int(bad.sum())} NaN or infinite "
            f"values (first in row {int(np.argwhere(bad)[0, 0])})."
        )
    labels = _dense_labels(path, data["label"], n)
    return NodeGraph(
        features=features, senders=senders, receivers=receivers, labels=labels, name=path.stem
    )


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
            raise ValueError(
                f"{path}, line {number}: expected {width} comma-separated "
                f"value(s), got {len(row)} ({lines[number - 1].strip()!r})."
            )
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
                raise ValueError(
                    f"{path}, line {number}: expected {what}, got {lines[number - 1].strip()!r}."
                ) from None
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
        raise ValueError(
            f"{folder} is not a folder; pass the folder of a TU data set "
            f"(holding DS_A.txt, DS_graph_indicator.txt, DS_graph_labels.txt)."
        )
    name = folder.name if name is None else name
    for kind in ("A", "graph_indicator", "graph_labels"):
        path = _tu_file(folder, name, kind)
        if not path.is_file():
            found = sorted(p.name[: -len("_A.txt")] for p in folder.glob("*_A.txt"))
            hint = f"; the folder holds data set(s) {found}: pass name=" if found else ""
            raise ValueError(
                f"{path} is missing: a TU data set needs {name}_A.txt, "
                f"{name}_graph_indicator.txt and {name}_graph_labels.txt"
                f"{hint}."
            )

    indicator_path = _tu_file(folder, name, "graph_indicator")
    indicator = _parse_table(indicator_path, _read_lines(indicator_path), 1, int)[:, 0]
    n = indicator.shape[0]
    if n == 0:
        raise ValueError(f"{indicator_path} is empty: a data set needs at least one node.")
    if indicator[0] != 1:
        raise ValueError(
            f"{indicator_path}, line 1: graph ids must start at 1 (got {indicator[0]})."
        )
    steps = np.diff(indicator)
    bad = np.flatnonzero((steps != 0) & (steps != 1))
    if bad.size:
        line = int(bad[0]) + 2
        raise ValueError(
            f"{indicator_path}, line {line}: graph id {indicator[line - 1]} "
            f"follows {indicator[line - 2]}; graph ids must be nondecreasing "
            f"without gaps (the nodes of each graph consecutive)."
        )
    n_graphs = int(indicator[-1])
    graph_of = indicator - 1  # [N] 0-based
    starts = np.searchsorted(graph_of, np.arange(n_graphs + 1))  # [G + 1]

    labels_path = _tu_file(folder, name, "graph_labels")
    raw_labels = _parse_table(labels_path, _read_lines(labels_path), 1, int)[:, 0]
    if raw_labels.shape[0] != n_graphs:
        raise ValueError(
            f"{labels_path} has {raw_labels.shape[0]} lines but "
            f"{indicator_path.name} numbers {n_graphs} graphs (one label "
            f"per graph)."
        )
    _, labels = np.unique(raw_labels, return_inverse=True)

    edges_path = _tu_file(folder, name, "A")
    edges = _parse_table(edges_path, _read_lines(edges_path), 2, int)
    outside = np.flatnonzero(np.any((edges < 1) | (edges > n), axis=1))
    if outside.size:
        line = int(outside[0]) + 1
        raise ValueError(
            f"{edges_path}, line {line}: node id out of range 1 .. {n} "
            f"({edges[line - 1, 0]}, {edges[line - 1, 1]})."
        )
    edges = edges - 1
    crossing = np.flatnonzero(graph_of[edges[:, 0]] != graph_of[edges[:, 1]])
    if crossing.size:
        line = int(crossing[0]) + 1
        a, b = edges[line - 1] + 1
        raise ValueError(
            f"{edges_path}, line {line}: edge ({a}, {b}) joins graph "
            f"{graph_of[a - 1] + 1} to graph {graph_of[b - 1] + 1}; edges "
            f"must stay inside one graph."
        )
    senders, receivers = canonical_edges(edges[:, 0], edges[:, 1], n)
    edge_bounds = np.searchsorted(graph_of[senders], np.arange(n_graphs + 1))

    features = _tu_features(folder, name, n)
    per_graph = range(n_graphs)
    return GraphSet(
        features=tuple(features[starts[g] : starts[g + 1]] for g in per_graph),
        senders=tuple(
            senders[edge_bounds[g] : edge_bounds[g + 1]] - np.int32(starts[g]) for g in per_graph
        ),
        receivers=tuple(
            receivers[edge_bounds[g] : edge_bounds[g + 1]] - np.int32(starts[g]) for g in per_graph
        ),
        labels=labels.astype(np.int32),
        name=name,
    )


def _tu_features(folder: Path, name: str, n: int) -> np.ndarray:
    """[N, F] float32: node attributes, then one-hot node labels; [N, 1] ones if the
    data set has neither."""
    parts = []
    attributes_path = _tu_file(folder, name, "node_attributes")
    if attributes_path.is_file():
        attributes = _parse_table(attributes_path, _read_lines(attributes_path), None, float)
        if attributes.shape[0] != n:
            raise ValueError(
                f"{attributes_path} has {attributes.shape[0]} lines but the "
                f"graph indicator lists {n} nodes (one line per node)."
            )
        bad = np.flatnonzero(~np.all(np.isfinite(attributes), axis=1))
        if bad.size:
            raise ValueError(
                f"{attributes_path}, line {int(bad[0]) + 1}: NaN or infinite attribute."
            )
        parts.append(attributes)
    node_labels_path = _tu_file(folder, name, "node_labels")
    if node_labels_path.is_file():
        node_labels = _parse_table(node_labels_path, _read_lines(node_labels_path), 1, int)[:, 0]
        if node_labels.shape[0] != n:
            raise ValueError(
                f"{node_labels_path} has {node_labels.shape[0]} lines but the "
                f"graph indicator lists {n} nodes (one line per node)."
            )
        values, index = np.unique(node_labels, return_inverse=True)
        one_hot = np.zeros((n, values.size))
        one_hot[np.arange(n), index] = 1.0
        parts.append(one_hot)
    if not parts:
        return np.ones((n, 1), np.float32)
    return np.concatenate(parts, axis=1).astype(np.float32)
