"""Graph models and benchmarks: the energy ablations, the GCN propagation and the
metrics against independent NumPy references, the sparse model against a dense key
mask, the Laplacian positions and padded batches, the benchmark protocol (results,
resume, re-evaluation), the command line and the shipped graph model."""

import json
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import et_ode
from conftest import DIM, make_model, make_state
from et_ode import tasks
from et_ode.cli import main
from et_ode.core import Conditions, closed_form_update

ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------ energy ablations
@pytest.mark.parametrize("terms", [("attention",), ("hopfield",)])
def test_ablation_keeps_one_term_and_matches_the_closed_form(terms):
    full = make_model()
    ablated = et_ode.EnergyTransformer(
        DIM, 2, 8, 24, key=jax.random.key(0), init_std=0.3, dtype=jnp.float64, terms=terms
    )  # make_model's
    x = make_state()
    parts = full.energy_parts(x)
    assert float(ablated.energy(x)) == pytest.approx(float(parts[terms[0]]), rel=1e-13)
    update = -jax.grad(ablated.energy_of_g)(ablated.norm(x))
    np.testing.assert_allclose(closed_form_update(ablated, x), update, rtol=1e-11, atol=1e-12)


def test_unknown_energy_term_refused(no_runtime_types):
    # no_runtime_types: "memories" is not an `EnergyTerm`, which the suite's run-time
    # type checks would refuse before the constructor's own message, the one users get.
    with pytest.raises(ValueError, match="energy term"):
        et_ode.EnergyTransformer(DIM, 2, 4, 12, key=jax.random.key(0), terms=("memories",))


# ------------------------------------------------------------------------ metrics
def test_auc_equals_the_pairwise_count_with_ties():
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 2, 400)
    scores = np.round(rng.normal(size=400) + labels, 1)  # many ties
    pos, neg = scores[labels == 1], scores[labels == 0]
    pairs = (pos[:, None] > neg[None]) + 0.5 * (pos[:, None] == neg[None])
    assert tasks.roc_auc(labels, scores) == pytest.approx(pairs.mean(), abs=1e-14)
    assert tasks.roc_auc([0, 1], [0.0, 1.0]) == 1.0
    with pytest.raises(ValueError, match="at least one anomaly"):
        tasks.roc_auc([0, 0], [0.1, 0.2])


def test_macro_f1_and_the_validation_threshold():
    labels = np.array([0, 0, 0, 0, 1, 1])
    predicted = np.array([0, 0, 1, 0, 1, 0])
    # normal: tp 3, fp 1, fn 1 -> 6/8; anomaly: tp 1, fp 1, fn 1 -> 2/4
    assert tasks.macro_f1(labels, predicted) == pytest.approx((0.75 + 0.5) / 2)
    scores = np.array([0.1, 0.2, 0.3, 0.35, 0.8, 0.9])
    threshold = tasks.best_threshold(labels, scores)
    assert 0.35 < threshold < 0.8
    assert tasks.macro_f1(labels, scores > threshold) == 1.0


# ---------------------------------------------------------------------- the models
CONFIG = tasks.GraphModelConfig(
    dim=8, n_heads=1, head_dim=4, n_memories=8, init_std=0.3, self_attention=True, head_hidden=8
)


@pytest.fixture(scope="module")
def small_graph():
    return tasks.anomaly_benchmark(
        120, seed=1, n_features=6, anomalies=tasks.AnomalyInjection(clique_size=6)
    )


def test_sparse_detector_equals_a_dense_key_mask(small_graph):
    g = small_graph
    model = tasks.NodeAnomalyET(
        CONFIG, n_nodes=g.n_nodes, n_features=g.n_features, key=jax.random.key(2)
    )
    features = jnp.asarray(tasks.standardise(g.features))
    sparse = model.logits(features, jnp.asarray(g.senders), jnp.asarray(g.receivers))
    mask = np.eye(g.n_nodes, dtype=bool)  # self_attention: every node's own key
    mask[g.receivers, g.senders] = True
    x0 = model.encode(features)
    sol = et_ode.solvers.solve(model.core, x0, args=Conditions(key_mask=jnp.asarray(mask)))
    dense = model.scores_of_states(x0, sol.x_final)
    np.testing.assert_allclose(sparse, dense, rtol=2e-5, atol=2e-5)


def test_a_detector_with_learned_betas_gets_their_gradient(small_graph):
    """`learn_beta = true` (the paper's appendix B.1): one inverse temperature per head,
    started at the model's beta (the same logits as without), and the training loss'
    gradient reaches it."""
    g = small_graph
    config = tasks.GraphModelConfig(**{**vars(CONFIG), "n_heads": 2, "learn_beta": True})
    learned = tasks.NodeAnomalyET(
        config, n_nodes=g.n_nodes, n_features=g.n_features, key=jax.random.key(2)
    )
    fixed = tasks.NodeAnomalyET(
        tasks.GraphModelConfig(**{**vars(config), "learn_beta": False}),
        n_nodes=g.n_nodes,
        n_features=g.n_features,
        key=jax.random.key(2),
    )
    assert learned.core.attention.log_beta.shape == (2,) and fixed.core.attention.log_beta is None
    features = jnp.asarray(tasks.standardise(g.features))
    edges = jnp.asarray(g.senders), jnp.asarray(g.receivers)
    np.testing.assert_allclose(
        learned.logits(features, *edges), fixed.logits(features, *edges), rtol=1e-5, atol=1e-6
    )

    def loss(log_beta):
        model = eqx.tree_at(lambda m: m.core.attention.log_beta, learned, log_beta)
        return jnp.mean(model.logits(features, *edges) ** 2)

    gradient = jax.grad(loss)(learned.core.attention.log_beta)
    assert np.all(np.isfinite(gradient)) and np.all(gradient != 0)


def test_the_detector_takes_solve_options(small_graph):
    """`logits(..., options=)` replaces the dynamics' solver options: the model's own give
    its own logits, a variant those of the keyword override; both ways is refused."""
    g = small_graph
    model = tasks.NodeAnomalyET(
        CONFIG, n_nodes=g.n_nodes, n_features=g.n_features, key=jax.random.key(2)
    )
    features = jnp.asarray(tasks.standardise(g.features))
    edges = jnp.asarray(g.senders), jnp.asarray(g.receivers)
    own = model.logits(features, *edges)
    np.testing.assert_array_equal(
        own, model.logits(features, *edges, options=model.dynamics.options)
    )
    finer = model.dynamics.options.replace(dt0=0.05)
    np.testing.assert_array_equal(
        model.logits(features, *edges, options=finer), model.logits(features, *edges, dt0=0.05)
    )
    with pytest.raises(ValueError, match=r"^dt0= given both"):
        model.logits(features, *edges, options=finer, dt0=0.05)


def test_every_detector_is_a_node_detector():
    """`tasks.NodeDetector` is abstract (equinox's abstract/final pattern): the three
    detectors `new_detector` builds are its subclasses; it cannot be built itself, nor can
    a subclass that lacks `logits`."""
    import equinox as eqx

    config = tasks.GraphModelConfig(dim=8, n_heads=1, head_dim=4, n_memories=8)
    for kind in ("et", "gcn", "mlp"):
        detector = tasks.new_detector(
            kind, config, et_ode.tasks.Dynamics(), n_nodes=5, n_features=3, key=jax.random.key(0)
        )
        assert isinstance(detector, tasks.NodeDetector)
    with pytest.raises(TypeError, match="abstract"):
        tasks.NodeDetector()

    class NoLogits(tasks.NodeDetector):
        encoder: eqx.nn.Linear
        head: eqx.nn.MLP

    with pytest.raises(TypeError, match="abstract"):
        NoLogits(None, None)


def test_gcn_propagation_equals_the_normalised_adjacency():
    rng = np.random.default_rng(0)
    n = 9
    adjacency = np.triu(rng.random((n, n)) < 0.3, 1)
    adjacency = adjacency | adjacency.T
    receivers, senders = np.nonzero(adjacency)
    h = rng.normal(size=(n, 5))
    a_hat = adjacency + np.eye(n)
    d = 1 / np.sqrt(a_hat.sum(1))
    expected = d[:, None] * a_hat * d[None] @ h
    from et_ode.tasks.graphs._models import _gcn_propagate

    got = _gcn_propagate(jnp.asarray(h), jnp.asarray(senders), jnp.asarray(receivers))
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_laplacian_positions_and_padded_batches():
    graphs = tasks.csl_graphs(seed=0)
    s, r = graphs.senders[20], graphs.receivers[20]
    vectors = tasks.laplacian_eigenvectors(s, r, 41, 6)
    adjacency = np.zeros((42, 42))
    adjacency[r + 1, s + 1] = 1
    adjacency[0, 1:] = adjacency[1:, 0] = 1
    d = 1 / np.sqrt(adjacency.sum(1))
    laplacian = np.eye(42) - d[:, None] * adjacency * d[None]
    values = np.linalg.eigvalsh(laplacian)[:6]
    np.testing.assert_allclose(laplacian @ vectors, vectors * values, atol=1e-5)
    # unit RMS per column; column 0 is D^1/2 1 with its canonical (positive) sign
    np.testing.assert_allclose(np.sqrt(np.mean(vectors**2, 0)), 1.0, rtol=1e-5)
    np.testing.assert_allclose(vectors[:, 0], np.sqrt(42 / adjacency.sum()) / d, rtol=1e-5)
    batch = tasks.graph_batch(graphs, [20, 3], 45, 6)
    assert batch.key_mask.shape == (2, 46, 46) and batch.features.shape == (2, 45, 1)
    mask = np.asarray(batch.key_mask[0])
    assert mask[0, 1:42].all() and mask[1:42, 0].all() and not mask[0, 0]
    assert not mask[42:].any() and not mask[:, 42:].any()  # padding: no edges
    assert mask[1:42, 1:42].sum() == len(s) and (mask[1:42, 1:42] == adjacency[1:, 1:]).all()


def test_stratified_batches_keep_the_label_mix():
    from et_ode.tasks.graphs._fit import stratified_batches

    labels = np.repeat(np.arange(3), [40, 20, 10])
    train = np.arange(0, 70, 2)  # 20, 10 and 5 graphs of the three classes
    batches = stratified_batches(labels, train, 14, np.random.default_rng(0))
    for _ in range(20):
        batch = next(batches)
        assert set(batch) <= set(train) and len(set(batch)) == len(batch)
        assert np.bincount(labels[batch], minlength=3).tolist() == [8, 4, 2]


POSITIONLESS = tasks.GraphModelConfig(
    dim=8, n_heads=1, head_dim=4, n_memories=8, init_std=0.3, positions="none", head_hidden=8
)


def test_classifier_ignores_node_order():
    """Without positions the classifier is a function of the graph, not of its node
    numbering: a random irregular graph and its relabelled copy give one set of logits."""
    rng = np.random.default_rng(5)
    n, perm = 11, rng.permutation(11)
    upper = np.triu(rng.random((n, n)) < 0.35, 1)
    receivers, senders = np.nonzero(upper | upper.T)
    features = rng.normal(size=(n, 3)).astype(np.float32)
    inverse = np.argsort(perm)  # node i of the copy is node perm[i] of the original
    copy_edges = tasks.canonical_edges(inverse[senders], inverse[receivers], n)
    graphs = tasks.GraphSet(
        features=(features, features[perm]),
        senders=(tasks.canonical_edges(senders, receivers, n)[0], copy_edges[0]),
        receivers=(tasks.canonical_edges(senders, receivers, n)[1], copy_edges[1]),
        labels=np.array([0, 1], np.int32),
        name="relabelled",
    )
    model = tasks.GraphClassifierET(POSITIONLESS, n_features=3, n_classes=4, key=jax.random.key(0))
    logits = np.asarray(model.logits(tasks.graph_batch(graphs, [0, 1], 13, 4)))
    np.testing.assert_allclose(logits[0], logits[1], rtol=1e-5, atol=1e-6)


def test_csl_needs_positions():
    """CSL's graphs are 4-regular with one constant feature: without positions every
    node sees the same neighbourhood, so two skip lengths give the same logits (the
    reason the paper gives the graph-classification ET Laplacian positions); with
    them, they differ."""
    graphs = tasks.csl_graphs(seed=0)
    model = tasks.GraphClassifierET(POSITIONLESS, n_features=1, n_classes=10, key=jax.random.key(0))
    logits = np.asarray(model.logits(tasks.graph_batch(graphs, [0, 30], 41, 8)))
    np.testing.assert_allclose(logits[0], logits[1], rtol=1e-5, atol=1e-6)
    positioned = tasks.GraphClassifierET(
        tasks.GraphModelConfig(
            dim=8,
            n_heads=1,
            head_dim=4,
            n_memories=8,
            init_std=0.3,
            positions="laplacian",
            head_hidden=8,
        ),
        n_features=1,
        n_classes=10,
        key=jax.random.key(0),
    )
    logits = np.asarray(positioned.logits(tasks.graph_batch(graphs, [0, 30], 41, 8)))
    assert np.abs(logits[0] - logits[1]).max() > 1e-4


# ----------------------------------------------------------------------- benchmark
TINY = {
    "data": {"task": "anomaly", "source": "sbm", "n_nodes": 120, "seed": 1},
    "protocol": {"models": ["et", "gcn"], "train_ratios": [0.4], "n_splits": 2},
    "model": {
        "dim": 8,
        "n_heads": 1,
        "head_dim": 4,
        "n_memories": 8,
        "head_hidden": 8,
        "self_attention": True,
    },
    "training": {"steps": 6, "warmup_steps": 2, "eval_every": 3},
}


def _toml(raw: dict) -> str:
    lines = []
    for section, values in raw.items():
        lines.append(f"[{section}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in values.items()]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def benchmark(tmp_path_factory):
    """The tiny benchmark through the command line: stopped after 3 of its 4 runs, then
    resumed. Returns `(config, out, first, summary)`, the last two as results.json read
    after each command."""
    folder = tmp_path_factory.mktemp("graph")
    config_path, out = folder / "tiny.toml", folder / "bench"
    config_path.write_text(_toml(TINY))
    command = ["graph", "train", "--config", str(config_path), "--out", str(out), "--no-progress"]
    assert main(command + ["--stop-after", "3"]) == 0
    first = json.loads((out / "results.json").read_text())
    assert not first["complete"] and len(first["runs"]) == 3
    assert main(command + ["--resume"]) == 0
    summary = json.loads((out / "results.json").read_text())
    return tasks.GraphTrainConfig.from_dict(TINY), out, first, summary


def test_benchmark_runs_every_model_and_resumes(benchmark):
    config, out, first, summary = benchmark
    assert summary["complete"] and len(summary["runs"]) == 4
    assert [r["name"] for r in summary["runs"][:3]] == [r["name"] for r in first["runs"]]
    assert summary["runs"][:3] == first["runs"]  # read back, not redone
    table = {(row["model"], row["ratio"]): row for row in summary["table"]}
    for kind in ("et", "gcn"):
        runs = [r["metrics"]["auc"] for r in summary["runs"] if r["model"] == kind]
        assert table[(kind, 0.4)]["auc"]["mean"] == pytest.approx(np.mean(runs))
        assert table[(kind, 0.4)]["auc"]["n"] == 2
    assert "| et | 0.4 |" in (out / "results.md").read_text()
    with pytest.raises(ValueError, match="--resume"):
        tasks.run_graph_benchmark(config, out, progress=False)
    other = tasks.GraphTrainConfig.from_dict({**TINY, "training": {**TINY["training"], "steps": 9}})
    with pytest.raises(ValueError, match="different config"):
        tasks.run_graph_benchmark(other, out, resume=True, progress=False)


def test_a_run_is_the_same_wherever_it_runs(benchmark, tmp_path):
    """A run's result depends on its name, not on the runs before it: the split-1 ET
    run alone gives the numbers it gave inside the whole benchmark."""
    config, _, _, summary = benchmark
    alone = tasks.GraphTrainConfig.from_dict(
        {**TINY, "protocol": {**TINY["protocol"], "models": ["et"]}}
    )
    result = tasks.run_graph_benchmark(alone, tmp_path / "alone", progress=False)
    inside = {r["name"]: r["metrics"] for r in summary["runs"]}
    for run in result["runs"]:
        for name, value in run["metrics"].items():
            assert value == pytest.approx(inside[run["name"]][name], rel=1e-6, abs=1e-9)


def test_saved_runs_re_evaluate_to_their_numbers(benchmark):
    _, out, _, summary = benchmark
    for run in summary["runs"]:
        again = tasks.evaluate_graph_model(out / "runs" / f"{run['name']}.eqx")
        for name in ("auc", "macro_f1", "val_auc"):
            assert again[name] == pytest.approx(run["metrics"][name], abs=1e-6)


def test_anomaly_loss_weights_anomalies_by_normal_over_anomalous():
    """The paper's weighted log-likelihood: `train_detector` hands the step the weight
    (normal / anomalous training nodes), under which both classes weigh the same in
    total, and the loss is the weighted mean of the per-node cross-entropies over the
    training nodes only."""
    from et_ode.tasks.graphs import _fit as graph_train

    config = tasks.GraphTrainConfig.from_dict(TINY)
    graph = tasks.load_node_graph(config)
    split = tasks.stratified_splits(graph.labels, 0.4, n_splits=1, seed=3)[0]
    seen = {}

    class Captured(Exception):
        pass

    def capture(
        model, opt_state, optimizer, features, senders, receivers, labels, train, pos_weight
    ):
        seen.update(
            model=model,
            args=(features, senders, receivers, labels, train),
            pos_weight=float(pos_weight),
        )
        raise Captured

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(graph_train, "anomaly_step", capture)
        with pytest.raises(Captured):
            graph_train.train_detector(config, "mlp", graph, split, "weight")
    labels = graph.labels[split["train"]]
    n_anomalies, n_normal = int(labels.sum()), int((labels == 0).sum())
    assert n_anomalies >= 2 and n_normal > 2 * n_anomalies  # a weight that matters (3 here)
    assert seen["pos_weight"] == pytest.approx(n_normal / n_anomalies, rel=1e-6)
    train = np.asarray(seen["args"][4])
    assert train.sum() == len(split["train"]) and train[split["train"]].all()
    # the loss: the weighted mean over training nodes, anomalies weighted pos_weight
    loss = float(graph_train._anomaly_loss(seen["model"], *seen["args"], seen["pos_weight"]))
    z = np.asarray(seen["model"].logits(*seen["args"][:3]), np.float64)[split["train"]]
    softplus = lambda v: np.logaddexp(0.0, v)  # noqa: E731
    w = seen["pos_weight"]
    expected = (softplus(z[labels == 0]).sum() + w * softplus(-z[labels == 1]).sum()) / (
        n_normal + w * n_anomalies
    )
    assert loss == pytest.approx(expected, rel=1e-5)
    assert w * n_anomalies == pytest.approx(n_normal, rel=1e-6)  # classes balanced


@pytest.mark.parametrize(
    "change, message",
    [
        (
            {"protocol": {"models": ["et", "transformer"]}},
            r"\[protocol\] models.1 = \"transformer\": input should be 'et', ",
        ),
        ({"protocol": {"models": ["et", "et"]}}, r"\[protocol\] models must be distinct"),
        (
            {"data": {"task": "anomaly", "source": "csl"}},
            r"\[data\] source for task 'anomaly' must be one of sbm, fraud_mat",
        ),
        (
            {"data": {"n_nodes": 10}},
            r"\[data\] n_nodes = 10: input should be greater than or equal to 50",
        ),
        ({"dynamics": {"clamp_visible": True}}, "image-model options"),
        (
            {"data": {"task": "classification", "source": "csl"}, "protocol": {"models": ["gcn"]}},
            "compares the ET models only",
        ),
        ({"data": {"source": "fraud_mat"}}, "needs path"),
        ({"model": {"positions": "laplacian"}}, "'learned' or 'none'"),
        (
            {"protocol": {"train_ratios": [1]}},
            r"\[protocol\] train_ratios.0 = 1: input should be less than 1",
        ),
    ],
)
def test_bad_graph_configs_are_refused_with_the_field(change, message):
    raw = {k: dict(v) for k, v in TINY.items()}
    for section, values in change.items():
        raw.setdefault(section, {}).update(values)
    with pytest.raises(ValueError, match=message):
        tasks.GraphTrainConfig.from_dict(raw)


# ------------------------------------------------------------ graph classification
def _write_tu_rings_and_paths(folder: Path, count: int = 18) -> Path:
    """A TU data set (`RINGS_A.txt`, `RINGS_graph_indicator.txt`,
    `RINGS_graph_labels.txt`; 1-based node ids, both directions of each edge): `count`
    graphs of 4 to 6 nodes, cycles (label 1) and paths (label 2) in turn."""
    folder.mkdir(parents=True, exist_ok=True)
    edges, indicator, labels, first = [], [], [], 1
    for graph in range(count):
        n, ring = 4 + graph % 3, graph % 2 == 0
        pairs = [(i, (i + 1) % n) for i in range(n if ring else n - 1)]
        edges += [f"{first + a}, {first + b}" for i, j in pairs for a, b in ((i, j), (j, i))]
        indicator += [str(graph + 1)] * n
        labels.append("1" if ring else "2")
        first += n
    for kind, lines in (("A", edges), ("graph_indicator", indicator), ("graph_labels", labels)):
        (folder / f"RINGS_{kind}.txt").write_text("\n".join(lines) + "\n")
    return folder


def _classification_config(folder: Path) -> dict:
    return {
        "data": {"task": "classification", "source": "tu", "path": str(folder)},
        "protocol": {"models": ["et"], "n_folds": 3, "val_fraction": 0.25},
        "model": {
            "dim": 8,
            "n_heads": 1,
            "head_dim": 4,
            "n_memories": 8,
            "head_hidden": 8,
            "positions": "laplacian",
            "n_eigenvectors": 3,
            "init_std": 0.3,
        },
        "training": {"steps": 4, "batch_size": 4, "warmup_steps": 1, "eval_every": 2},
    }


def test_classification_cross_validation_end_to_end(tmp_path):
    """`et-ode graph train` on a TU set written here, 3 folds: one run per fold whose
    test accuracy is that of the model its own validation split chose (the latest best
    of the logged validation accuracies), the mean and std over folds in the table, and
    the chosen model independent of the test fold."""
    from et_ode.tasks.graphs._fit import train_classifier

    raw = _classification_config(_write_tu_rings_and_paths(tmp_path / "RINGS"))
    config_path, out = tmp_path / "tu.toml", tmp_path / "bench"
    config_path.write_text(_toml(raw))
    assert (
        main(["graph", "train", "--config", str(config_path), "--out", str(out), "--no-progress"])
        == 0
    )
    summary = json.loads((out / "results.json").read_text())
    assert summary["complete"] and summary["data"] == "RINGS"
    runs = summary["runs"]
    assert [r["name"] for r in runs] == ["fold0-et", "fold1-et", "fold2-et"]
    graphs = tasks.load_tu(tmp_path / "RINGS")
    folds = tasks.cross_validation_folds(graphs.labels, n_folds=3, seed=0, val_fraction=0.25)
    assert sorted(np.concatenate([f["test"] for f in folds]).tolist()) == list(range(18))
    logged = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    for run, fold in zip(runs, folds):
        assert not set(fold["test"]) & (set(fold["train"]) | set(fold["val"]))
        metrics = run["metrics"]
        assert set(metrics) == {"accuracy", "val_accuracy"}
        # accuracies are counts of graphs: 6 test graphs, 4 validation graphs per fold
        assert metrics["accuracy"] * len(fold["test"]) == pytest.approx(
            round(metrics["accuracy"] * len(fold["test"])), abs=1e-9
        )
        # selection: validation only (the log holds no test metric), the best value
        lines = [r for r in logged if r["run"] == run["name"]]
        assert [r["step"] for r in lines] == [2, 4]
        assert all(set(r) == {"run", "step", "loss", "val_accuracy"} for r in lines)
        assert metrics["val_accuracy"] == max(r["val_accuracy"] for r in lines)
    (row,) = summary["table"]
    accuracies = [r["metrics"]["accuracy"] for r in runs]
    assert row["model"] == "et" and row["accuracy"]["n"] == 3
    assert row["accuracy"]["mean"] == pytest.approx(np.mean(accuracies), abs=1e-12)
    assert row["accuracy"]["std"] == pytest.approx(np.std(accuracies), abs=1e-12)
    assert "| et |" in (out / "results.md").read_text()
    # the saved fold-0 model re-evaluates to its numbers; trained again with another
    # "test" part (its training graphs), the same parameters are chosen: no leakage
    saved, _, _ = tasks.load_graph_model(out / "runs" / "fold0-et.eqx")
    again = tasks.evaluate_graph_model(out / "runs" / "fold0-et.eqx")
    assert again["accuracy"] == pytest.approx(runs[0]["metrics"]["accuracy"], abs=1e-9)
    config = tasks.GraphTrainConfig.from_dict(raw)
    other_test = dict(folds[0], test=folds[0]["train"][: len(folds[0]["test"])])
    model, metrics = train_classifier(config, "et", graphs, other_test, "fold0-et")
    assert metrics["val_accuracy"] == runs[0]["metrics"]["val_accuracy"]
    for a, b in zip(jax.tree.leaves(model), jax.tree.leaves(saved)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_fit_and_select_keeps_the_latest_best_on_ties():
    """Selection by the validation metric alone, every `eval_every` steps and at the
    last step; of equal values the later model (trained longer) is kept."""
    from et_ode.tasks.graphs._fit import _optimizer, fit_and_select

    config = tasks.GraphTrainConfig.from_dict(
        {**TINY, "training": {"steps": 7, "warmup_steps": 1, "eval_every": 2}}
    )
    values = {2: 0.5, 4: 0.75, 6: 0.75, 7: 0.25}
    seen, logged = [], []

    def take_step(model, opt_state, step):
        return step, opt_state, 0.1

    def validate(model):
        seen.append(model)
        return values[model]

    optimizer = _optimizer(config)
    best, value = fit_and_select(
        config, "r", 0, optimizer, take_step, validate, "val", logged.append
    )
    assert seen == [2, 4, 6, 7] and (best, value) == (6, 0.75)
    assert [r["val"] for r in logged] == [0.5, 0.75, 0.75, 0.25]


# --------------------------------------------------------------------- command line
def test_graph_commands(benchmark, tmp_path, capsys):
    _, out, _, _ = benchmark
    checkpoint = out / "runs" / "ratio0.4-split0-et.eqx"
    assert main(["graph", "eval", "--checkpoint", str(checkpoint)]) == 0
    assert "auc" in capsys.readouterr().out
    assert (
        main(
            [
                "graph",
                "study",
                "overshoot",
                "--checkpoint",
                str(checkpoint),
                "--quick",
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 0
    )
    result = json.loads((tmp_path / "o" / "overshoot.json").read_text())
    assert next(iter(result)) == "finding" and result["finding"] in capsys.readouterr().out
    at_horizon = result["auc"][int(np.argmin(np.abs(np.asarray(result["times"]) - 1.2)))]
    stored = json.loads((out / "runs" / "ratio0.4-split0-et.json").read_text())
    assert at_horizon == pytest.approx(stored["metrics"]["auc"], abs=1e-4)
    assert (tmp_path / "o" / "overshoot.png").stat().st_size > 0
    assert (
        main(
            [
                "graph",
                "study",
                "convergence",
                "--checkpoint",
                str(checkpoint),
                "--quick",
                "--out",
                str(tmp_path / "c"),
            ]
        )
        == 0
    )
    finding = json.loads((tmp_path / "c" / "convergence.json").read_text())["finding"]
    assert finding.startswith("Convergence on 1 graph") and finding in capsys.readouterr().out
    assert main(["graph", "study", "spectrum", "--checkpoint", str(checkpoint)]) == 2
    assert "unknown graph study" in capsys.readouterr().err


def test_graph_studies_energy_contributions_long_horizon(benchmark, tmp_path):
    """The other three studies on the tiny benchmark's ET (120 nodes, self-loops, the
    sparse edges), quick: the energy falls along the accurate solve, the attention and
    Hopfield parts add up to the applied update, the long horizon records both flows."""
    _, out, _, _ = benchmark
    checkpoint = str(out / "runs" / "ratio0.4-split0-et.eqx")

    def study(name, *extra):
        folder = tmp_path / name
        assert (
            main(
                [
                    "graph",
                    "study",
                    name,
                    "--checkpoint",
                    checkpoint,
                    "--quick",
                    "--out",
                    str(folder),
                    *extra,
                ]
            )
            == 0
        )
        written = json.loads((folder / f"{name}.json").read_text())
        assert next(iter(written)) == "finding" and " graph" in written["finding"]
        return written

    descent = study("energy-descent", "--horizon", "1.2")
    runs = {run["label"]: run for run in descent["runs"]}
    accurate = next(run for label, run in runs.items() if "tsit5" in label)
    energies = np.asarray(accurate["energies"])
    assert energies.size > 2 and energies[-1] < energies[0]
    # non-increasing along the tsit5 solve, to a round-off allowance of the energy's size
    assert np.max(np.diff(energies)) <= 1e-9 * np.max(np.abs(energies))
    assert accurate["real_rises"] == 0

    parts = study("contributions", "--horizon", "1.2")
    share = np.asarray(parts["attention_fraction"]["visible"], float)
    attention = np.asarray(parts["attention"]["visible"], float)
    hopfield = np.asarray(parts["hopfield"]["visible"], float)
    assert share.shape == (13,) and np.all((share >= 0) & (share <= 1))
    np.testing.assert_allclose(share, attention / (attention + hopfield), rtol=1e-12)
    assert 0 < share.min() and share.max() < 1  # both terms act on a graph model
    assert np.max(parts["sum_mismatch"]) < 1e-9  # the parts sum to the update

    horizon = study("long-horizon", "--horizon", "5", "--flow", "native")  # one flow: cheaper
    assert set(horizon["flows"]) == {"native"}
    times = np.asarray(horizon["times"], float)
    assert times[0] == 0 and times[-1] == pytest.approx(5.0) and times.size == 12
    record = horizon["flows"]["native"]
    residual, energy = (np.asarray(record[k], float) for k in ("residual_rms", "energy"))
    assert residual.shape == energy.shape == times.shape and np.all(np.isfinite(residual))
    # E falls at every record (by 1e-4 or more per interval, measured; round-off is
    # 1e-13 here); G falls too, slowly (0.1% by t = 5: the native flow's clock slows)
    assert np.max(np.diff(energy)) < 0
    assert residual[-1] < residual[0]
    assert record["total_steps"] > 0 and record["lyapunov"] is not None
    assert any("native flow" in line for line in horizon["findings"])


def test_shipped_graph_model_reproduces_its_numbers():
    model, config, header = tasks.load_graph_model("graph_anomaly")
    assert isinstance(model, tasks.NodeAnomalyET)
    again = tasks.evaluate_graph_model(
        tasks.resolve_model_path("graph_anomaly", tasks.SHIPPED_GRAPH)
    )
    # float32 scores: a rounding change can swap two nearly tied nodes, nothing more
    assert again["auc"] == pytest.approx(header["metrics"]["auc"], abs=2e-3)
    assert again["val_auc"] == pytest.approx(header["metrics"]["val_auc"], abs=2e-3)
    assert again["macro_f1"] == pytest.approx(header["metrics"]["macro_f1"], abs=2e-2)


def test_resume_keeps_the_metrics_of_finished_runs_only(tmp_path):
    """A run interrupted mid-way is redone on resume: its earlier metric lines go (and a
    line cut short by the interruption), the finished runs' stay."""
    import json

    from et_ode.tasks.graphs._train import _keep_finished_metrics

    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "done.json").write_text("{}")
    lines = [{"run": "done", "step": 1}, {"run": "done", "step": 2}, {"run": "cut", "step": 1}]
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines) + '{"run": "cut", "st')
    _keep_finished_metrics(path, tmp_path / "runs")
    assert [json.loads(line) for line in path.read_text().splitlines()] == lines[:2]
