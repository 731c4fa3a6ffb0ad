"""Graph benchmarks: train and evaluate every model of a config on every split (node
anomaly detection) or fold (graph classification), as the paper's protocol.

Each run (one model on one split or fold) is a unit of work: trained, selected on its
validation part, evaluated on its test part, and written atomically as
`out/runs/<run>.json` plus its model `out/runs/<run>.eqx`. A benchmark that is
interrupted resumes (`resume=True`) with the runs it has not finished; finished runs
are read back, never redone. `out/results.json` holds every run and the table (mean and
std over splits or folds per model and training ratio); `out/metrics.jsonl` the
validation curve of each run."""

import functools
import json
import time
import zlib
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm import tqdm

from ...records import (
    WriteError,
    atomic_write_text,
    filter_json_lines,
    remove_temporaries,
    run_folder_lock,
    versions,
    write_error,
)
from .._checkpoint import fill, read_checkpoint, save_checkpoint
from .._training import check_stop_after, diverged, what_failed
from .._zoo import SHIPPED_GRAPH, resolve_model_path
from ._config import GraphTrainConfig, graph_config_from_header
from ._generate import anomaly_benchmark, csl_graphs
from ._metrics import accuracy, best_threshold, macro_f1, mean_std, roc_auc
from ._models import (
    GraphClassifierET,
    graph_batch,
    laplacian_eigenvectors,
    new_detector,
)
from ._read import load_fraud_mat, load_tu
from ._spec import ET_TERMS
from ._splits import cross_validation_folds, stratified_splits

RESULTS_NAME = "results.json"
GRAPH_METRICS_NAME = "metrics.jsonl"


# ------------------------------------------------------------------------- data
def load_node_graph(config: GraphTrainConfig):
    """The `NodeGraph` of an anomaly config: generated, or read from `data.path`."""
    d = config.data
    if d.source == "sbm":
        return anomaly_benchmark(d.n_nodes, seed=d.seed)
    return load_fraud_mat(d.path, relation=d.relation)


def load_graph_set(config: GraphTrainConfig):
    """The `GraphSet` of a classification config: generated, or read from `data.path`."""
    d = config.data
    if d.source == "csl":
        return csl_graphs(seed=d.seed)
    return load_tu(d.path)


def standardise(features: np.ndarray) -> np.ndarray:
    """Each feature column to mean 0 and std 1 over all nodes (no labels used;
    constant columns stay 0)."""
    features = np.asarray(features, np.float64)
    std = features.std(axis=0)
    return ((features - features.mean(axis=0)) / np.where(std > 0, std, 1.0)).astype(np.float32)


def _optimizer(config: GraphTrainConfig) -> optax.GradientTransformation:
    t = config.training
    return _optimizer_of(t.learning_rate, t.warmup_steps, t.steps, t.clip_norm, t.weight_decay)


@functools.lru_cache(maxsize=16)
def _optimizer_of(learning_rate, warmup_steps, steps, clip_norm, weight_decay):
    """One optimiser object per setting: the jitted steps take it as a static argument
    (its functions, compared by identity), so a new object per run would compile every
    run's step again."""
    schedule = optax.warmup_cosine_decay_schedule(
        0.0, learning_rate, warmup_steps, steps, end_value=0.01 * learning_rate
    )
    return optax.chain(
        optax.clip_by_global_norm(clip_norm), optax.adamw(schedule, weight_decay=weight_decay)
    )


def _run_key(config: GraphTrainConfig, run: str):
    """The PRNG key of one run: from the training seed and the run's name, so that a
    run's result does not depend on which runs came before it."""
    return jax.random.fold_in(jax.random.key(config.training.seed), zlib.crc32(run.encode()))


def _header(config: GraphTrainConfig, run: str, kind: str, shape: dict, metrics: dict) -> dict:
    return {
        "kind": "graph_et",
        "config": config.to_dict(),
        "run": run,
        "model": kind,
        "shape": shape,
        "metrics": metrics,
        "versions": versions(),
    }


def fit_and_select(
    config: GraphTrainConfig, run: str, model, optimizer, take_step, validate, metric: str, log=None
):
    """`training.steps` optimiser steps (`take_step(model, opt_state, step) -> (model,
    opt_state, loss)`), the validation metric `validate(model)` measured every
    `eval_every` steps and at the end (logged as `metric`); returns the model of the
    best value (the latest on ties: with the few validation graphs of a classification
    fold ties are common, and the later model has trained longer) and that value. A
    non-finite loss stops the run with a message."""
    t = config.training
    opt_state = optimizer.init(eqx.filter(model, eqx.is_array))
    best, best_value = model, -np.inf
    for step in range(1, t.steps + 1):
        try:  # a solve that fails inside the step (its state became NaN) raises here
            model, opt_state, loss = take_step(model, opt_state, step)
            if step % t.eval_every == 0 or step == t.steps:
                loss = float(loss)
        except eqx.EquinoxRuntimeError:
            loss = None
        if step % t.eval_every == 0 or step == t.steps or loss is None:
            if loss is None or not np.isfinite(loss):
                raise diverged(
                    f"{run}: {what_failed(loss)}",
                    step,
                    t.learning_rate,
                    "the finished runs are kept in runs/",
                )
            value = validate(model)
            if value >= best_value:
                best, best_value = model, value
            if log is not None:
                log({"run": run, "step": step, "loss": loss, metric: value})
    return best, best_value


# ------------------------------------------------------------- anomaly detection
def _anomaly_loss(model, features, senders, receivers, labels, train, pos_weight):
    """Weighted binary cross-entropy over the training nodes (`train [N]` bool):
    anomalies weighted by `pos_weight` = normal / anomalous training nodes (the paper's
    weighted log-likelihood), normalised by the total weight."""
    logits = model.logits(features, senders, receivers)
    weight = jnp.where(train, jnp.where(labels == 1, pos_weight, 1.0), 0.0)
    per_node = jnp.where(labels == 1, jax.nn.softplus(-logits), jax.nn.softplus(logits))
    return jnp.sum(weight * per_node) / jnp.sum(weight)


@eqx.filter_jit
def anomaly_step(
    model, opt_state, optimizer, features, senders, receivers, labels, train, pos_weight
):
    """One full-graph optimiser step; returns `(model, opt_state, loss)`."""
    loss, grads = eqx.filter_value_and_grad(_anomaly_loss)(
        model, features, senders, receivers, labels, train, pos_weight
    )
    updates, opt_state = optimizer.update(grads, opt_state, eqx.filter(model, eqx.is_array))
    return eqx.apply_updates(model, updates), opt_state, loss


@eqx.filter_jit
def anomaly_scores(model, features, senders, receivers):
    """Anomaly logits `[N]` of every node."""
    return model.logits(features, senders, receivers)


def _graph_arrays(graph):
    return (
        jnp.asarray(standardise(graph.features)),
        jnp.asarray(graph.senders, jnp.int32),
        jnp.asarray(graph.receivers, jnp.int32),
        jnp.asarray(graph.labels, jnp.int32),
    )


def anomaly_metrics(labels, scores, split: dict) -> dict:
    """Test AUC and macro-F1 (at the threshold of best validation macro-F1), and the
    validation AUC, of node scores `[N]` on a split."""
    labels, scores = np.asarray(labels), np.asarray(scores, np.float64)
    val, test = split["val"], split["test"]
    threshold = best_threshold(labels[val], scores[val])
    return {
        "auc": roc_auc(labels[test], scores[test]),
        "macro_f1": macro_f1(labels[test], scores[test] > threshold),
        "val_auc": roc_auc(labels[val], scores[val]),
        "threshold": threshold,
    }


def train_detector(
    config: GraphTrainConfig, kind: str, graph, split: dict, run: str, log=None, arrays=None
):
    """Train one anomaly detector of `kind` on `split` (`{"train", "val", "test"}` node
    indices); the parameters with the best validation AUC (measured every `eval_every`
    steps) are kept. Returns `(model, metrics)`."""
    features, senders, receivers, labels = arrays or _graph_arrays(graph)
    in_train = np.zeros(graph.n_nodes, bool)
    in_train[split["train"]] = True
    n_anomalies = int(np.sum(graph.labels[split["train"]]))
    pos_weight = jnp.float32((in_train.sum() - n_anomalies) / max(n_anomalies, 1))
    model = new_detector(
        kind,
        config.model,
        config.dynamics,
        n_nodes=graph.n_nodes,
        n_features=graph.features.shape[1],
        key=_run_key(config, run),
    )
    optimizer = _optimizer(config)
    train, val = jnp.asarray(in_train), split["val"]

    def take_step(model, opt_state, step):
        return anomaly_step(
            model, opt_state, optimizer, features, senders, receivers, labels, train, pos_weight
        )

    def validate(model):
        scores = np.asarray(anomaly_scores(model, features, senders, receivers))
        return roc_auc(graph.labels[val], scores[val])

    best, _ = fit_and_select(config, run, model, optimizer, take_step, validate, "val_auc", log)
    scores = np.asarray(anomaly_scores(best, features, senders, receivers))
    return best, anomaly_metrics(graph.labels, scores, split)


# ----------------------------------------------------------- graph classification
def _classification_loss(model, batch, key):
    signs = jax.random.rademacher(
        key, (batch.eigenvectors.shape[0], 1, batch.eigenvectors.shape[-1]), jnp.float32
    )
    signs = signs.at[..., 0].set(1.0)  # column 0, D^1/2 1, has a canonical sign
    batch = eqx.tree_at(lambda b: b.eigenvectors, batch, batch.eigenvectors * signs)
    logits = model.logits(batch)
    return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, batch.labels))


@eqx.filter_jit
def classification_step(model, opt_state, optimizer, everything, index, key):
    """One optimiser step on the graphs `index` of the padded set `everything`, with a
    random sign of each Laplacian eigenvector but the first per graph (their sign is
    arbitrary)."""
    batch = jax.tree.map(lambda a: a[index], everything)
    loss, grads = eqx.filter_value_and_grad(_classification_loss)(model, batch, key)
    updates, opt_state = optimizer.update(grads, opt_state, eqx.filter(model, eqx.is_array))
    return eqx.apply_updates(model, updates), opt_state, loss


@eqx.filter_jit
def classification_logits(model, everything, index):
    return model.logits(jax.tree.map(lambda a: a[index], everything))


def padded_graph_set(graphs, k: int):
    """All graphs of a `GraphSet` as one `GraphBatch` (padded to the largest)."""
    eigen = [
        laplacian_eigenvectors(s, r, len(x), k)
        for x, s, r in zip(graphs.features, graphs.senders, graphs.receivers)
    ]
    return graph_batch(graphs, np.arange(graphs.n_graphs), graphs.max_nodes, k, eigen)


def stratified_batches(labels, train, batch_size: int, rng):
    """Endless batches of the graph indices `train`, each holding a fixed number of
    graphs of every class: its share of `batch_size` in `train`, rounded (at least one,
    at most all of them; a batch may so differ from `batch_size` by a few graphs), so
    that the label mix is the same in every batch.

    With the few graphs of a classification fold, the label mix of a uniform batch
    varies a lot; until the model tells the classes apart that variation is all its
    gradient carries, and it pushes the readout's ReLU units dead (the loss then stays
    at log C for good)."""
    labels, train = np.asarray(labels), np.asarray(train)
    classes, counts = np.unique(labels[train], return_counts=True)
    per_class = np.clip(np.round(batch_size * counts / counts.sum()).astype(int), 1, counts)
    members = [train[labels[train] == c] for c in classes]
    while True:
        yield np.concatenate([rng.choice(m, n, replace=False) for m, n in zip(members, per_class)])


def train_classifier(
    config: GraphTrainConfig, kind: str, graphs, fold: dict, run: str, log=None, everything=None
):
    """Train one `GraphClassifierET` of `kind` on a fold (`{"train", "val", "test"}`
    graph indices), keeping the parameters of best validation accuracy (the latest best
    on ties, as `fit_and_select`); the test fold is used once, to score the kept model.
    Returns `(model, metrics)` with test and validation accuracy."""
    t = config.training
    everything = everything or padded_graph_set(graphs, config.model.n_eigenvectors)
    key = _run_key(config, run)
    model = GraphClassifierET(
        config.model,
        config.dynamics,
        n_features=graphs.n_features,
        n_classes=graphs.n_classes,
        terms=ET_TERMS[kind],
        key=jax.random.fold_in(key, 0),
    )
    optimizer = _optimizer(config)
    train, val, test = (np.asarray(fold[p]) for p in ("train", "val", "test"))
    rng = np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel()[-1])
    batches = stratified_batches(graphs.labels, train, min(t.batch_size, len(train)), rng)

    def take_step(model, opt_state, step):
        index = jnp.asarray(next(batches))
        return classification_step(
            model, opt_state, optimizer, everything, index, jax.random.fold_in(key, step)
        )

    def validate(model):
        return accuracy(
            graphs.labels[val], classification_logits(model, everything, jnp.asarray(val))
        )

    best, best_acc = fit_and_select(
        config, run, model, optimizer, take_step, validate, "val_accuracy", log
    )
    test_acc = accuracy(
        graphs.labels[test], classification_logits(best, everything, jnp.asarray(test))
    )
    return best, {"accuracy": test_acc, "val_accuracy": best_acc}


# ------------------------------------------------------------------- the benchmark
def _runs(config: GraphTrainConfig, labels) -> list[dict]:
    """Every run of the protocol: `{"name", "model", "ratio", "split", "part"}`."""
    p, d = config.protocol, config.data
    runs = []
    if d.task == "anomaly":
        for ratio in p.train_ratios:
            parts = stratified_splits(labels, ratio, n_splits=p.n_splits, seed=d.seed)
            for index, part in enumerate(parts):
                for kind in p.models:
                    runs.append(
                        {
                            "name": f"ratio{ratio:g}-split{index}-{kind}",
                            "model": kind,
                            "ratio": ratio,
                            "split": index,
                            "part": part,
                        }
                    )
    else:
        parts = cross_validation_folds(
            labels, n_folds=p.n_folds, seed=d.seed, val_fraction=p.val_fraction
        )
        for index, part in enumerate(parts):
            for kind in p.models:
                runs.append(
                    {
                        "name": f"fold{index}-{kind}",
                        "model": kind,
                        "ratio": None,
                        "split": index,
                        "part": part,
                    }
                )
    return runs


def summarise(config: GraphTrainConfig, results: list[dict]) -> list[dict]:
    """The results table: one row per (model, training ratio) with the mean and std
    of each metric over its splits or folds."""
    metrics = ("auc", "macro_f1") if config.data.task == "anomaly" else ("accuracy",)
    rows = []
    for ratio in config.protocol.train_ratios if config.data.task == "anomaly" else (None,):
        for kind in config.protocol.models:
            chosen = [r for r in results if r["model"] == kind and r["ratio"] == ratio]
            if chosen:
                rows.append(
                    {
                        "model": kind,
                        "ratio": ratio,
                        **{m: mean_std([r["metrics"][m] for r in chosen]) for m in metrics},
                    }
                )
    return rows


def table_markdown(config: GraphTrainConfig, rows: list[dict]) -> str:
    """The results table as Markdown (percentages, mean +- std)."""
    anomaly = config.data.task == "anomaly"
    head = (
        "| model | train ratio | AUC (%) | macro-F1 (%) | runs |\n|---|---|---|---|---|"
        if anomaly
        else "| model | accuracy (%) | folds |\n|---|---|---|"
    )
    lines = [head]
    for row in rows:
        cells = [
            f"{100 * row[m]['mean']:.2f} +- {100 * row[m]['std']:.2f}"
            for m in (("auc", "macro_f1") if anomaly else ("accuracy",))
        ]
        n = row["auc" if anomaly else "accuracy"]["n"]
        lines.append(
            "| "
            + " | ".join(
                [row["model"]] + ([f"{row['ratio']:g}"] if anomaly else []) + cells + [str(n)]
            )
            + " |"
        )
    return "\n".join(lines) + "\n"


def run_graph_benchmark(
    config: GraphTrainConfig,
    out_dir=None,
    *,
    resume: bool = False,
    stop_after: int | None = None,
    progress: bool = True,
) -> dict:
    """Train and evaluate every run of `config` (see the module docstring); returns the
    contents of `results.json` (`config`, `runs`, `table`, `complete`). `stop_after`
    ends this call after that many new runs (resume later).

    One writer per benchmark folder (`et_ode.records.run_folder_lock`), as `train`; a
    write that fails ends with an `et_ode.records.WriteError` naming the file, the OS's
    reason and what is kept (the finished runs)."""
    check_stop_after(stop_after, "runs of this call")
    out = Path(out_dir or config.training.out_dir)
    with run_folder_lock(out):
        remove_temporaries(out)
        remove_temporaries(out / "runs")
        try:
            return _run_graph_benchmark(config, out, resume, stop_after, progress)
        except WriteError as error:
            kept = len(list((out / "runs").glob("*.json")))
            raise write_error(
                None,
                error,
                f"{kept} finished run(s) are kept in {out / 'runs'} (resume with --resume)",
            ) from None


def _read_json(path: Path):
    """The JSON value of a file the benchmark wrote; a damaged one is a `ValueError`
    naming it."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(
            f"{path} is damaged (not JSON: {error}); remove it to redo that "
            "part, or choose another --out."
        ) from None


def _keep_finished_metrics(path: Path, runs_dir: Path) -> None:
    """Keep only the metric lines of finished runs (those with a record in `runs_dir`):
    a run interrupted mid-way is redone from its start on resume, and logs again."""
    finished = {p.stem for p in runs_dir.glob("*.json")}
    filter_json_lines(path, lambda record: record.get("run") in finished)


def _run_graph_benchmark(
    config: GraphTrainConfig, out: Path, resume: bool, stop_after: int | None, progress: bool
) -> dict:
    """`run_graph_benchmark` inside its lock."""
    runs_dir = out / "runs"
    stored_config = out / "config.json"
    if stored_config.exists():
        if not resume:
            raise ValueError(
                f"{out} holds a benchmark: pass --resume to continue it, or choose another --out."
            )
        if _read_json(stored_config) != json.loads(json.dumps(config.to_dict())):
            raise ValueError(
                f"{out} was started with a different config; resume with the "
                "same config, or choose another --out."
            )
    # The data first: data that cannot be read leave no benchmark (config.json) behind.
    anomaly = config.data.task == "anomaly"
    dataset = load_node_graph(config) if anomaly else load_graph_set(config)
    runs_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(stored_config, json.dumps(config.to_dict(), indent=1))
    prepared = (
        _graph_arrays(dataset)
        if anomaly
        else padded_graph_set(dataset, config.model.n_eigenvectors)
    )
    metrics_path = out / GRAPH_METRICS_NAME
    _keep_finished_metrics(metrics_path, runs_dir)

    def log(record):
        try:
            with metrics_path.open("a") as file:
                file.write(json.dumps(record) + "\n")
        except OSError as error:
            raise write_error(metrics_path, error) from None

    results, new_runs = [], 0
    planned = _runs(config, dataset.labels)
    bar = tqdm(planned, disable=not progress, desc="graph runs", unit="run", dynamic_ncols=True)
    for run in bar:
        record_path = runs_dir / f"{run['name']}.json"
        if record_path.exists():
            results.append(_read_json(record_path))
            continue
        if stop_after is not None and new_runs >= stop_after:
            break
        bar.set_postfix(run=run["name"])
        started = time.perf_counter()
        if anomaly:
            model, metrics = train_detector(
                config, run["model"], dataset, run["part"], run["name"], log, prepared
            )
            shape = {"n_nodes": dataset.n_nodes, "n_features": int(dataset.features.shape[1])}
        else:
            model, metrics = train_classifier(
                config, run["model"], dataset, run["part"], run["name"], log, prepared
            )
            shape = {"n_features": dataset.n_features, "n_classes": dataset.n_classes}
        record = {key: run[key] for key in ("name", "model", "ratio", "split")}
        record.update(metrics=metrics, seconds=time.perf_counter() - started, data=dataset.name)
        save_checkpoint(
            runs_dir / f"{run['name']}.eqx",
            _header(config, run["name"], run["model"], shape, metrics),
            model,
        )
        atomic_write_text(record_path, json.dumps(record, indent=1))
        results.append(record)
        new_runs += 1
    bar.close()
    summary = {
        "config": config.to_dict(),
        "data": dataset.name,
        "runs": results,
        "table": summarise(config, results),
        "complete": len(results) == len(planned),
        "versions": versions(),
    }
    atomic_write_text(out / RESULTS_NAME, json.dumps(summary, indent=1))
    atomic_write_text(out / "results.md", table_markdown(config, summary["table"]))
    return summary


# ------------------------------------------------------------------ saved models
def load_graph_model(name_or_path):
    """`(model, config, header)` of a graph model written by `run_graph_benchmark`
    (`runs/<run>.eqx`) or shipped (`"graph_anomaly"`)."""
    path = resolve_model_path(name_or_path, SHIPPED_GRAPH)
    header, blobs = read_checkpoint(path)
    config = graph_config_from_header(header, path)
    kind, shape = header.get("model"), header.get("shape") or {}
    key = jax.random.key(0)
    try:
        if config.data.task == "anomaly":
            skeleton = eqx.filter_eval_shape(
                new_detector,
                kind,
                config.model,
                config.dynamics,
                n_nodes=shape["n_nodes"],
                n_features=shape["n_features"],
                key=key,
            )
        else:
            skeleton = eqx.filter_eval_shape(
                functools.partial(GraphClassifierET, terms=ET_TERMS[kind]),
                config.model,
                config.dynamics,
                n_features=shape["n_features"],
                n_classes=shape["n_classes"],
                key=key,
            )
    except (KeyError, TypeError) as error:
        raise ValueError(f"{path}: corrupt graph checkpoint header ({error!r}).") from None
    return fill(skeleton, blobs[0], path), config, header


def run_split(config: GraphTrainConfig, dataset, run: str, path="checkpoint") -> dict:
    """The split or fold (`{"train", "val", "test"}` indices) of the run named `run`
    of `config`'s protocol on `dataset` (its `NodeGraph` or `GraphSet`)."""
    found = next((r for r in _runs(config, dataset.labels) if r["name"] == run), None)
    if found is None:
        raise ValueError(f"{path}: its run {run!r} is not part of its config's protocol.")
    return found["part"]


def evaluate_graph_model(path) -> dict:
    """Re-evaluate a saved graph model on its own data and split or fold (rebuilt from
    the config in its header): the metrics its run reported, computed now."""
    model, config, header = load_graph_model(path)
    anomaly = config.data.task == "anomaly"
    dataset = load_node_graph(config) if anomaly else load_graph_set(config)
    part = run_split(config, dataset, header["run"], path)
    if anomaly:
        features, senders, receivers, _ = _graph_arrays(dataset)
        scores = np.asarray(anomaly_scores(model, features, senders, receivers))
        return anomaly_metrics(dataset.labels, scores, part)
    everything = padded_graph_set(dataset, config.model.n_eigenvectors)
    val, test = (part[p] for p in ("val", "test"))
    return {
        "accuracy": accuracy(
            dataset.labels[test], classification_logits(model, everything, jnp.asarray(test))
        ),
        "val_accuracy": accuracy(
            dataset.labels[val], classification_logits(model, everything, jnp.asarray(val))
        ),
    }
