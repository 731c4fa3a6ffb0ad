"""Metrics of node anomaly detection and graph classification (NumPy, float64): the
area under the ROC curve, macro-F1 at a threshold, the threshold chosen on validation
nodes, accuracy, and mean +- std over runs."""

import numpy as np


def _binary(labels) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.ndim != 1 or not np.isin(labels, (0, 1)).all():
        raise ValueError("labels must be a 1-D array of 0 (normal) and 1 (anomaly).")
    return labels.astype(bool)


def roc_auc(labels, scores) -> float:
    """Area under the ROC curve: the probability that a random anomaly scores above a
    random normal node, ties counting one half (the Mann-Whitney statistic, from
    average ranks). `labels [N]` in {0, 1}, `scores [N]` finite; both classes needed."""
    positive = _binary(labels)
    scores = np.asarray(scores, np.float64)
    if scores.shape != positive.shape or not np.isfinite(scores).all():
        raise ValueError("scores must be finite and of the labels' shape.")
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if not n_pos or not n_neg:
        raise ValueError("the AUC needs at least one anomaly and one normal node.")
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)  # 1-based rank of the last of each run of equal scores
    ranks = (ends - 0.5 * (counts - 1))[inverse]  # the run's average rank
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def macro_f1(labels, predictions) -> float:
    """The mean of the F1 scores of the two classes (normal and anomaly); a class that
    is neither present nor predicted scores 1, one present but never predicted 0."""
    truth, predicted = _binary(labels), _binary(np.asarray(predictions).astype(int))
    scores = []
    for cls in (False, True):
        tp = np.sum((predicted == cls) & (truth == cls))
        fp = np.sum((predicted == cls) & (truth != cls))
        fn = np.sum((predicted != cls) & (truth == cls))
        scores.append(1.0 if tp + fp + fn == 0 else 2 * tp / (2 * tp + fp + fn))
    return float(np.mean(scores))


def best_threshold(labels, scores) -> float:
    """The threshold on `scores` (predict anomaly where `score > threshold`) with the
    highest macro-F1 on these nodes (the validation nodes: never the test nodes),
    searched over the midpoints between consecutive distinct scores."""
    truth = _binary(labels)
    scores = np.asarray(scores, np.float64)
    distinct = np.unique(scores)
    candidates = np.r_[distinct[0] - 1.0, 0.5 * (distinct[1:] + distinct[:-1])]
    if len(candidates) > 512:  # quantiles: enough resolution, bounded cost
        candidates = np.quantile(candidates, np.linspace(0, 1, 512))
    f1 = [macro_f1(truth, scores > c) for c in candidates]
    return float(candidates[int(np.argmax(f1))])


def accuracy(labels, logits) -> float:
    """Fraction of rows of `logits [B, C]` whose largest entry is at `labels [B]`."""
    return float(np.mean(np.argmax(np.asarray(logits), axis=-1) == np.asarray(labels)))


def mean_std(values) -> dict:
    """`{"mean", "std", "n"}` of a list of numbers (std with ddof 0, as the paper's
    tables over 5 runs; 0 for one run)."""
    values = np.asarray(values, np.float64)
    return {"mean": float(values.mean()), "std": float(values.std()), "n": int(values.size)}
