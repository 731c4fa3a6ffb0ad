"""Graph data: containers, the generated anomaly benchmark, CSL, the fraud .mat and TU
loaders, and the splits."""

import dataclasses
import itertools

import numpy as np
import pytest
import scipy.io
import scipy.sparse

from et_ode import tasks
from et_ode.tasks.graphs import _generate
from et_ode.tasks.graphs._generate import CSL_SKIPS


def edge_set(senders, receivers):
    return set(zip(senders.tolist(), receivers.tolist()))


def assert_canonical(senders, receivers, n_nodes):
    assert senders.dtype == receivers.dtype == np.int32
    keys = senders.astype(np.int64) * n_nodes + receivers
    assert np.all(np.diff(keys) > 0)


def assert_symmetric(senders, receivers):
    edges = edge_set(senders, receivers)
    assert edges == {(r, s) for s, r in edges}


# ------------------------------------------------------------------- edge lists


def test_canonical_edges_sorts_deduplicates_and_symmetrises():
    s, r = tasks.canonical_edges([2, 0, 0, 1, 3, 0], [1, 1, 1, 1, 0, 2], 4)
    assert s.dtype == r.dtype == np.int32
    assert list(zip(s.tolist(), r.tolist())) == [(0, 1), (0, 2), (1, 1), (2, 1), (3, 0)]
    s, r = tasks.canonical_edges(
        [2, 0, 0, 1, 3, 0], [1, 1, 1, 1, 0, 2], 4, symmetrize=True, drop_self_loops=True
    )
    assert list(zip(s.tolist(), r.tolist())) == [
        (0, 1),
        (0, 2),
        (0, 3),
        (1, 0),
        (1, 2),
        (2, 0),
        (2, 1),
        (3, 0),
    ]
    s, r = tasks.canonical_edges(np.zeros(0, np.int64), np.zeros(0, np.int64), 3)
    assert s.shape == r.shape == (0,)
    with pytest.raises(ValueError, match=r"node ids must lie in 0 \.\. 3"):
        tasks.canonical_edges([0, 4], [1, 2], 4)
    with pytest.raises(ValueError, match="must be integers"):
        tasks.canonical_edges([0.0], [1.0], 4)


# ------------------------------------------------------------------- containers


def small_node_graph(**changes):
    s, r = tasks.canonical_edges([0, 1, 2], [1, 2, 3], 4, symmetrize=True)
    fields = dict(
        features=np.ones((4, 3), np.float32),
        senders=s,
        receivers=r,
        labels=np.array([0, 1, 0, 0], np.int32),
        name="tiny",
        anomaly_kind=np.array([0, 2, 0, 0], np.int8),
    )
    fields.update(changes)
    return tasks.NodeGraph(**fields)


def test_node_graph_properties_and_checks():
    g = small_node_graph()
    assert (g.n_nodes, g.n_edges, g.n_features, g.n_anomalies) == (4, 6, 3, 1)
    assert "n_anomalies=1" in repr(g)
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.name = "other"
    cases = [
        (dict(features=np.ones((4, 3))), "features must be a 2-D float32 array"),
        (dict(features=np.full((4, 3), np.nan, np.float32)), "features holds 12 NaN"),
        (
            dict(labels=np.array([0, 2, 0, 0], np.int32), anomaly_kind=None),
            r"labels must be 0 \(normal\) or 1",
        ),
        (dict(labels=np.zeros(3, np.int32)), r"labels must be an int32 array of shape \(4,\)"),
        (
            dict(senders=np.array([1, 0], np.int32), receivers=np.array([0, 1], np.int32)),
            "not canonical",
        ),
        (
            dict(senders=np.array([0], np.int32), receivers=np.array([4], np.int32)),
            r"outside 0 \.\. 3",
        ),
        (
            dict(senders=np.array([0, 1], np.int32), receivers=np.array([1, 1], np.int32)),
            r"hold 1 self-loop\(s\); a NodeGraph has none",
        ),
        (
            dict(senders=np.array([0], np.int64), receivers=np.array([1], np.int64)),
            "senders must be a 1-D int32 array",
        ),
        (dict(anomaly_kind=np.array([0, 1, 1, 0], np.int8)), "anomaly_kind and labels disagree"),
        (dict(anomaly_kind=np.array([0, 3, 0, 0], np.int8)), "anomaly_kind must be 0"),
    ]
    for changes, message in cases:
        with pytest.raises(ValueError, match=message):
            small_node_graph(**changes)


def test_graph_set_checks_and_subset():
    triangle = tasks.canonical_edges([0, 1, 2], [1, 2, 0], 3, symmetrize=True)
    edge = tasks.canonical_edges([0], [1], 2, symmetrize=True)
    graphs = tasks.GraphSet(
        features=[
            np.ones((3, 2), np.float32),
            np.zeros((2, 2), np.float32),
            np.ones((3, 2), np.float32),
        ],
        senders=[triangle[0], edge[0], triangle[0]],
        receivers=[triangle[1], edge[1], triangle[1]],
        labels=np.array([0, 2, 1], np.int32),
        name="toy",
    )
    assert isinstance(graphs.features, tuple)
    assert (graphs.n_graphs, graphs.n_classes, graphs.n_features, graphs.max_nodes) == (3, 3, 2, 3)
    assert graphs.node_counts.tolist() == [3, 2, 3]
    part = graphs.subset([2, 0])
    assert part.labels.tolist() == [1, 0] and part.n_classes == 3  # class 2 absent, kept
    assert part.features[0] is graphs.features[2]
    assert graphs.subset(np.array([False, True, False])).labels.tolist() == [2]
    with pytest.raises(ValueError, match=r"graph indices must lie in 0 \.\. 2"):
        graphs.subset([3])
    with pytest.raises(ValueError, match="at least one graph index"):
        graphs.subset([])
    with pytest.raises(ValueError, match="features\\[1\\] has 3 features per node"):
        tasks.GraphSet(
            (np.ones((3, 2), np.float32), np.ones((2, 3), np.float32)),
            (triangle[0], edge[0]),
            (triangle[1], edge[1]),
            np.array([0, 1], np.int32),
            "bad",
        )
    with pytest.raises(ValueError, match=r"graph 1: senders/receivers hold node ids from 0 to 2"):
        tasks.GraphSet(
            (np.ones((3, 2), np.float32), np.ones((2, 2), np.float32)),
            (triangle[0], triangle[0]),
            (triangle[1], triangle[1]),
            np.array([0, 1], np.int32),
            "bad",
        )
    with pytest.raises(ValueError, match="n_classes must be an integer above every label"):
        tasks.GraphSet(
            (np.ones((3, 2), np.float32),),
            (triangle[0],),
            (triangle[1],),
            np.array([2], np.int32),
            "bad",
            n_classes=2,
        )
    with pytest.raises(ValueError, match="one entry per graph"):
        tasks.GraphSet((np.ones((3, 2), np.float32),), (), (), np.array([0], np.int32), "bad")


# ---------------------------------------------------------- generated anomaly graph


@pytest.fixture(scope="module")
def benchmark():
    return tasks.anomaly_benchmark()


def test_anomaly_benchmark_structure(benchmark):
    g = benchmark
    assert (g.n_nodes, g.n_features) == (2000, 32)
    assert g.features.dtype == np.float32 and g.anomaly_kind.dtype == np.int8
    # Defaults: round(0.025 * 2000 / 15) = 3 cliques of 15, and as many contextual nodes.
    assert np.bincount(g.anomaly_kind).tolist() == [1910, 45, 45]
    assert g.n_anomalies == 90
    np.testing.assert_array_equal(g.labels, (g.anomaly_kind > 0).astype(np.int32))
    assert_canonical(g.senders, g.receivers, g.n_nodes)
    assert_symmetric(g.senders, g.receivers)
    assert not np.any(g.senders == g.receivers)
    assert abs(g.n_edges / g.n_nodes - 10.0) < 1.5
    # Every structural node is linked to the 14 other members of its clique.
    structural = np.flatnonzero(g.anomaly_kind == 1)
    inside = np.isin(g.senders, structural) & np.isin(g.receivers, structural)
    degree_inside = np.bincount(g.senders[inside], minlength=g.n_nodes)[structural]
    assert degree_inside.min() >= 14
    assert inside.sum() >= 3 * 15 * 14


def test_contextual_anomalies_take_far_features_of_other_nodes(benchmark):
    g = benchmark
    # The same seed without contextual nodes draws the same edges and original features.
    plain = tasks.anomaly_benchmark(anomalies=tasks.AnomalyInjection(n_contextual=0))
    np.testing.assert_array_equal(plain.senders, g.senders)
    np.testing.assert_array_equal(plain.receivers, g.receivers)
    base = plain.features
    contextual = np.flatnonzero(g.anomaly_kind == 2)
    normal = g.anomaly_kind != 2
    np.testing.assert_array_equal(g.features[normal], base[normal])
    for node in contextual:
        matches = np.flatnonzero(np.all(base == g.features[node], axis=1))
        assert matches.size >= 1 and node not in matches
        distances = np.linalg.norm(base - base[node], axis=1)
        # The farthest of 50 random candidates lies beyond the median (p = 1 - 2^-50).
        assert distances[matches[0]] > np.median(distances)


def test_anomaly_benchmark_communities_and_reproducibility():
    n, k, ratio = 4000, 4, 8.0
    none = tasks.AnomalyInjection(n_cliques=0, n_contextual=0)
    g = tasks.anomaly_benchmark(n, anomalies=none, seed=5, n_communities=k, p_in_ratio=ratio)
    assert g.n_anomalies == 0 and g.name == "sbm_anomaly_n4000_seed5"
    community = np.repeat(np.arange(k), n // k)
    same = community[g.senders] == community[g.receivers]
    m = n / k
    expected = (m - 1) / ((m - 1) + (n - m) / ratio)  # share of a degree inside
    assert abs(same.mean() - expected) < 0.03
    assert abs(g.n_edges / n - 10.0) < 1.5
    # Nodes of one community share a mean: class-dependent features.
    means = np.stack([g.features[community == c].mean(axis=0) for c in range(k)])
    spread = np.linalg.norm(means[:, None] - means[None], axis=-1)[np.triu_indices(k, 1)]
    assert spread.min() > 3.0
    again = tasks.anomaly_benchmark(n, anomalies=none, seed=5, n_communities=k, p_in_ratio=ratio)
    other = tasks.anomaly_benchmark(n, anomalies=none, seed=6, n_communities=k, p_in_ratio=ratio)
    for field in ("features", "senders", "receivers", "labels"):
        np.testing.assert_array_equal(getattr(g, field), getattr(again, field))
    assert not np.array_equal(g.features, other.features)
    assert edge_set(g.senders, g.receivers) != edge_set(other.senders, other.receivers)


@pytest.mark.parametrize("n_nodes, degree", [(50, 6.0), (200, 30.0), (1000, 10.0), (5000, 4.0)])
def test_anomaly_benchmark_sizes_and_degree(n_nodes, degree):
    contextual = tasks.AnomalyInjection(n_cliques=0, n_contextual=n_nodes // 20)
    g = tasks.anomaly_benchmark(n_nodes, mean_degree=degree, seed=1, anomalies=contextual)
    assert g.n_nodes == n_nodes and g.n_anomalies == n_nodes // 20
    assert abs(g.n_edges / n_nodes - degree) < 0.15 * degree
    assert_canonical(g.senders, g.receivers, n_nodes)


@pytest.mark.parametrize("population, count", [(10**6, 100), (10**6, 10**5), (1000, 900)])
def test_distinct_sample(population, count):
    # Sparse (Floyd), intermediate (draws with replacement, tops up) and dense branches.
    rng = np.random.default_rng(0)
    sample = _generate._distinct_sample(rng, population, count)
    assert sample.shape == (count,) and np.unique(sample).size == count
    assert sample.min() >= 0 and sample.max() < population
    np.testing.assert_array_equal(
        sample, _generate._distinct_sample(np.random.default_rng(0), population, count)
    )


def test_triangle_pairs_enumerate_every_pair_once():
    m = 300
    i, j = _generate._triangle_pairs(np.arange(m * (m - 1) // 2))
    assert np.all((0 <= j) & (j < i) & (i < m))
    assert np.unique(i * m + j).size == m * (m - 1) // 2


def test_anomaly_benchmark_100k_nodes():
    g = tasks.anomaly_benchmark(100_000)
    assert g.features.shape == (100_000, 32) and g.labels.shape == (100_000,)
    # round(0.025 * 100000 / 15) = 167 cliques: 2505 structural and 2505 contextual.
    assert np.bincount(g.anomaly_kind).tolist() == [94_990, 2505, 2505]
    assert abs(g.n_edges / g.n_nodes - 10.0) < 1.0
    assert not np.any(g.senders == g.receivers)
    assert np.all(np.diff(g.senders.astype(np.int64) * g.n_nodes + g.receivers) > 0)


def test_anomaly_benchmark_argument_errors():
    crowded = tasks.AnomalyInjection(n_cliques=5, clique_size=15, n_contextual=30)
    cases = [
        (dict(n_nodes=49), "n_nodes must be an integer >= 50"),
        (dict(n_nodes=100, n_communities=51), "n_communities=51 is too many for 100 nodes"),
        (
            dict(n_nodes=100, anomalies=crowded),
            "need 105 distinct nodes but the graph has 100",
        ),
        (dict(n_nodes=60, mean_degree=80.0), "mean_degree=80.0 is not reachable"),
        (dict(feature_noise=-1.0), r"feature_noise must be a number in \[0.0, inf\)"),
        (dict(p_in_ratio=0.0), "p_in_ratio must be a number"),
        (dict(seed=-1), "seed must be an integer >= 0"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            tasks.anomaly_benchmark(**kwargs)
    # the anomalies' own fields are refused where they are given
    for fields, message in (
        (dict(clique_size=1), "clique_size must be an integer >= 2"),
        (dict(k_candidates=0), "k_candidates must be an integer >= 1"),
        (dict(n_cliques=-1), "n_cliques must be an integer >= 0"),
        (dict(n_contextual=-1), "n_contextual must be an integer >= 0"),
    ):
        with pytest.raises(ValueError, match=message):
            tasks.AnomalyInjection(**fields)


def test_anomaly_benchmark_float_node_count(no_runtime_types):
    # no_runtime_types: 100.0 is not an `int`, which the suite's run-time type checks
    # would refuse before anomaly_benchmark's own message, the one users get.
    with pytest.raises(ValueError, match="n_nodes must be an integer"):
        tasks.anomaly_benchmark(n_nodes=100.0)


# -------------------------------------------------------------------------------- CSL


def adjacency(senders, receivers, n):
    a = np.zeros((n, n))
    a[senders, receivers] = 1.0
    return a


def test_csl_graphs():
    csl = tasks.csl_graphs()
    assert (csl.n_graphs, csl.n_classes, csl.n_features, csl.max_nodes, csl.name) == (
        150,
        10,
        1,
        41,
        "CSL",
    )
    assert np.bincount(csl.labels).tolist() == [15] * 10
    base = [
        tasks.canonical_edges(
            np.tile(np.arange(41), 2),
            np.concatenate([(np.arange(41) + 1) % 41, (np.arange(41) + s) % 41]),
            41,
            symmetrize=True,
        )
        for s in CSL_SKIPS
    ]
    spectra = [np.linalg.eigvalsh(adjacency(*edges, 41)) for edges in base]
    # The classes are not isomorphic (distinct spectra), and every graph's spectrum is
    # its class's: a relabelling cannot change it.
    for a, b in itertools.combinations(spectra, 2):
        assert np.abs(a - b).max() > 0.1
    rng = np.random.default_rng(0)  # the documented relabelling protocol
    for g in range(150):
        s, r, x, label = csl.senders[g], csl.receivers[g], csl.features[g], csl.labels[g]
        assert x.shape == (41, 1) and np.all(x == 1.0)
        assert s.shape == (164,)
        assert np.bincount(s, minlength=41).tolist() == [4] * 41
        assert_canonical(s, r, 41)
        assert_symmetric(s, r)
        assert label == g // 15
        np.testing.assert_allclose(
            np.linalg.eigvalsh(adjacency(s, r, 41)), spectra[label], atol=1e-9
        )
        perm = rng.permutation(41)
        base_s, base_r = base[label]
        assert edge_set(s, r) == edge_set(perm[base_s], perm[base_r])
    # Copies of a class differ (each has its own relabelling).
    assert edge_set(csl.senders[0], csl.receivers[0]) != edge_set(csl.senders[1], csl.receivers[1])


def test_csl_seeds():
    a, b, c = tasks.csl_graphs(seed=0), tasks.csl_graphs(seed=0), tasks.csl_graphs(seed=1)
    for g in range(150):
        np.testing.assert_array_equal(a.senders[g], b.senders[g])
        np.testing.assert_array_equal(a.receivers[g], b.receivers[g])
    assert any(not np.array_equal(a.receivers[g], c.receivers[g]) for g in range(150))
    np.testing.assert_array_equal(a.labels, c.labels)


# --------------------------------------------------------------------- fraud .mat files


def write_fraud(path, n=6, **overrides):
    """A small file in the CARE-GNN layout: sparse csc relations, sparse features,
    label (1, N)."""
    rows = np.array([0, 1, 2, 3, 4, 4, 2])
    cols = np.array([1, 2, 3, 4, 5, 5, 2])  # a duplicate and a self-loop
    homo = scipy.sparse.csc_matrix((np.ones(7), (rows, cols)), shape=(n, n))
    net = scipy.sparse.csc_matrix((np.ones(1), ([0], [5])), shape=(n, n))
    features = scipy.sparse.csc_matrix(np.arange(n * 3, dtype=float).reshape(n, 3))
    data = {
        "homo": homo,
        "net_rur": net,
        "features": features,
        "label": np.array([[0, 1, 0, 0, 1, 0]]),
    }
    data.update(overrides)
    data = {key: value for key, value in data.items() if value is not None}
    scipy.io.savemat(path, data)
    return path


def test_load_fraud_mat_round_trip(tmp_path):
    path = write_fraud(tmp_path / "YelpChi.mat")
    g = tasks.load_fraud_mat(path)
    assert g.name == "YelpChi" and g.anomaly_kind is None
    assert (g.n_nodes, g.n_features, g.n_anomalies) == (6, 3, 2)
    np.testing.assert_array_equal(g.features, np.arange(18, dtype=np.float32).reshape(6, 3))
    assert g.features.dtype == np.float32
    assert g.labels.tolist() == [0, 1, 0, 0, 1, 0]
    expected = {(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)}
    assert edge_set(g.senders, g.receivers) == expected | {(b, a) for a, b in expected}
    assert_canonical(g.senders, g.receivers, 6)
    other = tasks.load_fraud_mat(str(path), relation="net_rur")
    assert edge_set(other.senders, other.receivers) == {(0, 5), (5, 0)}
    # Dense features and an (N, 1) label read the same.
    path = write_fraud(
        tmp_path / "Amazon.mat",
        features=np.arange(18.0).reshape(6, 3),
        label=np.array([[0], [1], [0], [0], [1], [0]]),
    )
    g2 = tasks.load_fraud_mat(path)
    np.testing.assert_array_equal(g2.features, g.features)
    assert g2.labels.tolist() == g.labels.tolist() and g2.name == "Amazon"


def test_load_fraud_mat_errors(tmp_path):
    with pytest.raises(ValueError, match="does not exist; YelpChi.mat and Amazon.mat"):
        tasks.load_fraud_mat(tmp_path / "missing.mat")
    junk = tmp_path / "junk.mat"
    junk.write_bytes(b"this is not a MATLAB file at all" * 8)
    with pytest.raises(ValueError, match="is not a MATLAB .mat file"):
        tasks.load_fraud_mat(junk)
    path = write_fraud(tmp_path / "a.mat")
    with pytest.raises(
        ValueError,
        match=r"no key 'net_upu' \(relation= .*keys are "
        r"\['features', 'homo', 'label', 'net_rur'\]",
    ):
        tasks.load_fraud_mat(path, relation="net_upu")
    with pytest.raises(ValueError, match="no key 'label'"):
        tasks.load_fraud_mat(write_fraud(tmp_path / "b.mat", label=None))
    cases = [
        (
            dict(homo=scipy.sparse.csc_matrix((6, 5))),
            r"must be square, N x N \(got shape \(6, 5\)\)",
        ),
        (dict(features=np.ones((5, 3))), "'features' has 5 rows but adjacency 'homo' has 6 nodes"),
        (dict(label=np.zeros((1, 5))), "'label' has 5 entries but the adjacency has 6 nodes"),
        (dict(label=np.zeros((2, 3))), r"'label' has shape \(2, 3\)"),
        (
            dict(label=np.array([[0, 1, 2, 0, 1, 0]])),
            r"0 \(normal\) or 1 \(fraud\) only; found \[0, 1, 2\]",
        ),
        (dict(features=np.where(np.eye(6, 3) > 0, np.nan, 1.0)), "3 NaN or infinite values"),
    ]
    for i, (overrides, message) in enumerate(cases):
        with pytest.raises(ValueError, match=message):
            tasks.load_fraud_mat(write_fraud(tmp_path / f"case{i}.mat", **overrides))


# ------------------------------------------------------------------------ TU data sets

# Three graphs, ten nodes: a path 1-2-3-4 (one edge listed twice), a triangle 5-6-7 and
# 8-9-10 with a self-loop on 10. Graph labels -1, 1, -1.
TOY = {
    "A": [
        "1, 2",
        "2, 1",
        "2, 3",
        "3, 2",
        "3, 4",
        "4, 3",
        "1, 2",
        "5, 6",
        "6, 5",
        "6, 7",
        "7, 6",
        "5, 7",
        "7, 5",
        "8, 9",
        "9, 8",
        "10, 10",
    ],
    "graph_indicator": ["1", "1", "1", "1", "2", "2", "2", "3", "3", "3"],
    "graph_labels": ["-1", "1", "-1"],
    "node_labels": ["3", "5", "3", "7", "5", "5", "3", "7", "7", "3"],
    "node_attributes": [f"{i}.5, {-i}" for i in range(10)],
}


def write_tu(folder, name="TOY", **overrides):
    folder.mkdir(parents=True, exist_ok=True)
    files = dict(TOY, **overrides)
    for kind, lines in files.items():
        if lines is not None:
            (folder / f"{name}_{kind}.txt").write_text("\n".join(lines) + "\n")
    return folder


def test_load_tu(tmp_path):
    graphs = tasks.load_tu(write_tu(tmp_path / "TOY"))
    assert graphs.name == "TOY"
    assert (graphs.n_graphs, graphs.n_classes, graphs.n_features) == (3, 2, 5)
    assert graphs.labels.tolist() == [0, 1, 0]
    assert graphs.node_counts.tolist() == [4, 3, 3]
    edges = [edge_set(s, r) for s, r in zip(graphs.senders, graphs.receivers)]
    assert edges[0] == {(0, 1), (1, 0), (1, 2), (2, 1), (2, 3), (3, 2)}
    assert edges[1] == {(a, b) for a in range(3) for b in range(3) if a != b}
    assert edges[2] == {(0, 1), (1, 0), (2, 2)}  # the self-loop is kept
    for s, r, x in zip(graphs.senders, graphs.receivers, graphs.features):
        assert_canonical(s, r, x.shape[0])
    # Attributes first, then the one-hot node labels over the sorted labels 3, 5, 7.
    np.testing.assert_array_equal(
        graphs.features[0],
        np.array(
            [[0.5, 0, 1, 0, 0], [1.5, -1, 0, 1, 0], [2.5, -2, 1, 0, 0], [3.5, -3, 0, 0, 1]],
            np.float32,
        ),
    )
    np.testing.assert_array_equal(graphs.features[2][:, 2:], [[0, 0, 1], [0, 0, 1], [1, 0, 0]])
    # Without the optional files: the constant feature; an explicit name.
    plain = tasks.load_tu(
        write_tu(tmp_path / "folder", name="DS", node_labels=None, node_attributes=None), name="DS"
    )
    assert plain.name == "DS" and plain.n_features == 1
    assert all(np.all(x == 1.0) for x in plain.features)
    only_labels = tasks.load_tu(write_tu(tmp_path / "L", name="L", node_attributes=None))
    assert only_labels.n_features == 3


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(A=["1, 2", "2, x"]), r"TOY_A.txt, line 2: expected integers, got '2, x'"),
        (
            dict(A=["1, 2", "2, 3, 4"]),
            r"TOY_A.txt, line 2: expected 2 comma-separated value\(s\), got 3",
        ),
        (dict(A=["1, 2", "", "2, 1"]), r"TOY_A.txt, line 2: empty line"),
        (dict(A=["1, 2", "2, 11"]), r"TOY_A.txt, line 2: node id out of range 1 \.\. 10 \(2, 11\)"),
        (dict(A=["1, 2", "0, 1"]), r"line 2: node id out of range"),
        (dict(A=["1, 2", "4, 5"]), r"TOY_A.txt, line 2: edge \(4, 5\) joins graph 1 to graph 2"),
        (dict(graph_indicator=["2"] * 4 + ["3"] * 6), "line 1: graph ids must start at 1"),
        (
            dict(graph_indicator=["1"] * 4 + ["3"] * 6),
            r"graph_indicator.txt, line 5: graph id 3 follows 1",
        ),
        (
            dict(graph_indicator=["1", "1", "2", "1", "2", "2", "2", "3", "3", "3"]),
            r"line 4: graph id 1 follows 2; graph ids must be nondecreasing",
        ),
        (
            dict(graph_indicator=["1"] * 4 + ["2.0"] * 6),
            r"graph_indicator.txt, line 5: expected integers",
        ),
        (
            dict(graph_labels=["-1", "1"]),
            "TOY_graph_labels.txt has 2 lines but TOY_graph_indicator.txt numbers 3 graphs",
        ),
        (
            dict(node_labels=["1"] * 9),
            "TOY_node_labels.txt has 9 lines but the graph indicator lists 10 nodes",
        ),
        (
            dict(node_attributes=["1.0, 2.0"] * 3 + ["nan, 1.0"] + ["1.0, 2.0"] * 6),
            r"TOY_node_attributes.txt, line 4: NaN or infinite attribute",
        ),
        (
            dict(node_attributes=["1.0, 2.0"] * 3 + ["1.0"] + ["1.0, 2.0"] * 6),
            r"TOY_node_attributes.txt, line 4: expected 2 comma-separated",
        ),
    ],
)
def test_load_tu_errors(tmp_path, overrides, message):
    with pytest.raises(ValueError, match=message):
        tasks.load_tu(write_tu(tmp_path / "TOY", **overrides))


def test_load_tu_missing_files(tmp_path):
    folder = write_tu(tmp_path / "folder", name="MUTAG")
    with pytest.raises(
        ValueError,
        match=r"folder_A.txt is missing.*"
        r"data set\(s\) \['MUTAG'\]: pass name=",
    ):
        tasks.load_tu(folder)
    (folder / "MUTAG_graph_labels.txt").unlink()
    with pytest.raises(ValueError, match="MUTAG_graph_labels.txt is missing"):
        tasks.load_tu(folder, name="MUTAG")
    with pytest.raises(ValueError, match="is not a folder"):
        tasks.load_tu(tmp_path / "nowhere")


# --------------------------------------------------------------------------- splits


def anomaly_labels():
    labels = np.zeros(2000, np.int32)
    labels[np.random.default_rng(3).choice(2000, 90, replace=False)] = 1
    return labels


def test_stratified_splits():
    labels = anomaly_labels()
    splits = tasks.stratified_splits(labels, 0.4, n_splits=3, seed=7)
    assert len(splits) == 3
    for split in splits:
        parts = [split["train"], split["val"], split["test"]]
        assert all(p.dtype == np.int64 and np.all(np.diff(p) > 0) for p in parts)
        np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(2000))
        # Class 0: 1910 nodes -> 764 / 382 / 764; class 1: 90 nodes -> 36 / 18 / 36.
        assert [np.bincount(labels[p], minlength=2).tolist() for p in parts] == [
            [764, 36],
            [382, 18],
            [764, 36],
        ]
    assert not np.array_equal(splits[0]["train"], splits[1]["train"])
    again = tasks.stratified_splits(labels, 0.4, n_splits=3, seed=7)
    for a, b in zip(splits, again):
        for key in ("train", "val", "test"):
            np.testing.assert_array_equal(a[key], b[key])
    # 1% training, the paper's low-label setting: one anomaly (of 90) in training.
    low = tasks.stratified_splits(labels, 0.01, n_splits=1)[0]
    assert np.bincount(labels[low["train"]]).tolist() == [19, 1]
    given = tasks.stratified_splits(labels, 0.01, val_ratio=0.09, n_splits=1)[0]
    assert [len(given[k]) for k in ("train", "val", "test")] == [20, 180, 1800]


def test_stratified_split_errors():
    labels = anomaly_labels()
    with pytest.raises(
        ValueError,
        match=r"train_ratio=0.001 is too small: class 1 has 90 "
        r"nodes, so its training part would be empty",
    ):
        tasks.stratified_splits(labels, 0.001)
    with pytest.raises(ValueError, match=r"validation share \(1 - train_ratio\) / 3 = 0.0033"):
        tasks.stratified_splits(labels, 0.99)
    with pytest.raises(ValueError, match="the test share .* is too small"):
        tasks.stratified_splits(labels, 0.5, val_ratio=0.495)
    with pytest.raises(ValueError, match="leaves no test nodes"):
        tasks.stratified_splits(labels, 0.5, val_ratio=0.5)
    with pytest.raises(ValueError, match=r"train_ratio must be a number in \(0.0, 1.0\)"):
        tasks.stratified_splits(labels, 1.0)
    with pytest.raises(ValueError, match="labels must be a non-empty 1-D integer array"):
        tasks.stratified_splits(labels.astype(float), 0.4)


def test_cross_validation_folds():
    labels = np.repeat(np.arange(3), [30, 23, 17]).astype(np.int32)
    folds = tasks.cross_validation_folds(labels, n_folds=10, seed=2, val_fraction=0.1)
    tests = np.concatenate([f["test"] for f in folds])
    np.testing.assert_array_equal(np.sort(tests), np.arange(70))  # a partition
    for fold in folds:
        train, val, test = fold["train"], fold["val"], fold["test"]
        np.testing.assert_array_equal(np.sort(np.concatenate([train, val, test])), np.arange(70))
        assert len(test) == 7
        per_class = np.bincount(labels[test], minlength=3)
        assert np.all(per_class >= np.array([30, 23, 17]) // 10)
        assert np.all(per_class <= -(-np.array([30, 23, 17]) // 10))
        rest = np.bincount(labels[np.concatenate([train, val])], minlength=3)
        expected_val = np.floor(0.1 * rest + 0.5).astype(int)
        assert np.bincount(labels[val], minlength=3).tolist() == expected_val.tolist()
    again = tasks.cross_validation_folds(labels, n_folds=10, seed=2, val_fraction=0.1)
    other = tasks.cross_validation_folds(labels, n_folds=10, seed=3, val_fraction=0.1)
    assert all(np.array_equal(a["val"], b["val"]) for a, b in zip(folds, again))
    assert not all(np.array_equal(a["test"], b["test"]) for a, b in zip(folds, other))
    no_val = tasks.cross_validation_folds(labels, n_folds=5, val_fraction=0.0)
    assert all(f["val"].size == 0 and f["train"].size == 56 for f in no_val)
    csl = tasks.cross_validation_folds(tasks.csl_graphs().labels)
    assert [len(f["test"]) for f in csl] == [15] * 10
    assert all(np.bincount(tasks.csl_graphs().labels[f["val"]]).tolist() == [1] * 10 for f in csl)


def test_cross_validation_errors():
    labels = np.repeat(np.arange(2), [20, 8])
    with pytest.raises(ValueError, match="class 1 has 8 graphs, fewer than n_folds=10"):
        tasks.cross_validation_folds(labels)
    with pytest.raises(ValueError, match="val_fraction=0.05 is too small: class 1 has 6 graphs"):
        tasks.cross_validation_folds(labels, n_folds=4, val_fraction=0.05)
    with pytest.raises(ValueError, match="val_fraction=0.95 is too large: it takes all 6"):
        tasks.cross_validation_folds(labels, n_folds=4, val_fraction=0.95)
    with pytest.raises(ValueError, match=r"val_fraction must be a number in \[0.0, 1.0\)"):
        tasks.cross_validation_folds(labels, n_folds=4, val_fraction=1.0)
    with pytest.raises(ValueError, match="n_folds must be an integer >= 2"):
        tasks.cross_validation_folds(labels, n_folds=1)
