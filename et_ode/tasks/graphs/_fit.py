"""Training one graph model on one split or fold: the data a config names (generated or
read, features standardised), the optimiser, the losses and jitted steps of both tasks
(node anomaly detection, graph classification), the loop that keeps the best model on
the validation part (`fit_and_select`), and the test metrics of the model it keeps. The
benchmark that runs them all is `._train`."""

import functools
import zlib

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from .._training import diverged, what_failed
from ._config import GraphTrainConfig
from ._generate import anomaly_benchmark, csl_graphs
from ._metrics import accuracy, best_threshold, macro_f1, roc_auc
from ._models import (
    graph_batch,
    laplacian_eigenvectors,
    new_detector,
)
from ._paper_classifier import EVALUATION_NOISE, classifier_logits, new_classifier
from ._read import load_fraud_mat, load_tu


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
    logits = classifier_logits(model, batch, jax.random.fold_in(key, 1))
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
    batch = jax.tree.map(lambda a: a[index], everything)
    return classifier_logits(model, batch, jax.random.key(EVALUATION_NOISE))


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
    """Train one graph classifier of `kind` (`new_classifier`) on a fold (`{"train", "val", "test"}`
    graph indices), keeping the parameters of best validation accuracy (the latest best
    on ties, as `fit_and_select`); the test fold is used once, to score the kept model.
    Returns `(model, metrics)` with test and validation accuracy."""
    t = config.training
    everything = everything or padded_graph_set(graphs, config.model.n_eigenvectors)
    key = _run_key(config, run)
    model = new_classifier(
        kind,
        config.model,
        config.dynamics,
        n_features=graphs.n_features,
        n_classes=graphs.n_classes,
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
