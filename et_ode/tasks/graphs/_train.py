"""Graph benchmarks: train and evaluate every model of a config on every split (node
anomaly detection) or fold (graph classification), as the paper's protocol.

Each run (one model on one split or fold) is a unit of work: trained, selected on its
validation part, evaluated on its test part, and written atomically as
`out/runs/<run>.json` plus its model `out/runs/<run>.eqx`. A benchmark that is
interrupted resumes (`resume=True`) with the runs it has not finished; finished runs
are read back, never redone. `out/results.json` holds every run and the table (mean and
std over splits or folds per model and training ratio); `out/metrics.jsonl` the
validation curve of each run. Saved models are read back and re-evaluated here too
(`load_graph_model`, `evaluate_graph_model`); training one model is `._fit`."""

import functools
import json
import time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
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
from .._training import check_stop_after
from .._zoo import SHIPPED_GRAPH, resolve_model_path
from ._config import GraphTrainConfig, graph_config_from_header
from ._fit import (
    _graph_arrays,
    anomaly_metrics,
    anomaly_scores,
    classification_logits,
    load_graph_set,
    load_node_graph,
    padded_graph_set,
    train_classifier,
    train_detector,
)
from ._metrics import accuracy, mean_std
from ._models import new_detector
from ._paper_classifier import new_classifier
from ._splits import cross_validation_folds, stratified_splits

RESULTS_NAME = "results.json"
GRAPH_METRICS_NAME = "metrics.jsonl"


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
    ends this call after that many new runs (resume later). `progress`: a tqdm bar on
    stderr, drawn only when stderr is a terminal (a log gets no carriage returns).

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
    bar = tqdm(  # disable=None: drawn only on a terminal
        planned,
        disable=None if progress else True,
        desc="graph runs",
        unit="run",
        dynamic_ncols=True,
    )
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
                functools.partial(new_classifier, kind),
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
