"""Splits of labelled data: `stratified_splits` (random stratified train / validation /
test splits of the nodes, the anomaly-detection protocol) and `cross_validation_folds`
(stratified k-fold cross-validation for graph classification)."""

from __future__ import annotations

import math

import numpy as np

from ._checks import describe, integer, real

__all__ = ["cross_validation_folds", "stratified_splits"]

# --------------------------------------------------------------------------- splits


def _class_members(labels) -> tuple[np.ndarray, list[np.ndarray]]:
    y = np.asarray(labels)
    if y.ndim != 1 or y.size == 0 or not (np.issubdtype(y.dtype, np.integer) or y.dtype == bool):
        raise ValueError(f"labels must be a non-empty 1-D integer array (got {describe(y)}).")
    classes, index = np.unique(y, return_inverse=True)
    order = np.argsort(index, kind="stable")
    members = np.split(order, np.cumsum(np.bincount(index))[:-1])
    return classes, members


def _rounded(share: float, count: int) -> int:
    return math.floor(share * count + 0.5)


def stratified_splits(
    labels, train_ratio: float, *, n_splits: int = 5, val_ratio: float | None = None, seed: int = 0
) -> list[dict]:
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
    train_ratio = real("train_ratio", train_ratio, low=0.0, high=1.0)
    n_splits = integer("n_splits", n_splits, 1)
    seed = integer("seed", seed, 0)
    if val_ratio is None:
        val_share, val_name = (1.0 - train_ratio) / 3.0, "(1 - train_ratio) / 3"
    else:
        val_share = real("val_ratio", val_ratio, low=0.0, high=1.0)
        val_name = "val_ratio"
        if train_ratio + val_share >= 1.0:
            raise ValueError(
                f"train_ratio + val_ratio = {train_ratio + val_share:g} leaves "
                f"no test nodes; it must be below 1."
            )
    counts = []
    for value, member in zip(classes, members):
        n_c = member.size
        n_train, n_val = _rounded(train_ratio, n_c), _rounded(val_share, n_c)
        n_test = n_c - n_train - n_val
        for part, size, what in (
            ("training", n_train, f"train_ratio={train_ratio:g} is too small"),
            (
                "validation",
                n_val,
                f"the validation share {val_name} = {val_share:.4g} is too small",
            ),
            ("test", n_test, "the test share (what train and validation leave) is too small"),
        ):
            if size < 1:
                raise ValueError(
                    f"{what}: class {value} has {n_c} nodes, so its {part} "
                    f"part would be empty; every part needs at least one node "
                    f"of each class."
                )
        counts.append((n_train, n_val))
    splits = []
    for split in range(n_splits):
        rng = np.random.default_rng([seed, split])
        parts: dict[str, list[np.ndarray]] = {"train": [], "val": [], "test": []}
        for member, (n_train, n_val) in zip(members, counts):
            shuffled = rng.permutation(member)
            parts["train"].append(shuffled[:n_train])
            parts["val"].append(shuffled[n_train : n_train + n_val])
            parts["test"].append(shuffled[n_train + n_val :])
        splits.append(
            {key: np.sort(np.concatenate(value)).astype(np.int64) for key, value in parts.items()}
        )
    return splits


def cross_validation_folds(
    labels, *, n_folds: int = 10, seed: int = 0, val_fraction: float = 0.1
) -> list[dict]:
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
    n_folds = integer("n_folds", n_folds, 2)
    seed = integer("seed", seed, 0)
    val_fraction = real("val_fraction", val_fraction, low=0.0, high=1.0, low_open=False)
    smallest = int(np.argmin([m.size for m in members]))
    if members[smallest].size < n_folds:
        raise ValueError(
            f"class {classes[smallest]} has {members[smallest].size} graphs, "
            f"fewer than n_folds={n_folds}: some test folds would lack it; "
            f"lower n_folds."
        )
    rng = np.random.default_rng(seed)
    order = np.concatenate([rng.permutation(member) for member in members])
    fold_of = np.empty(order.size, np.int64)
    fold_of[order] = np.arange(order.size) % n_folds
    folds = []
    for fold in range(n_folds):
        fold_rng = np.random.default_rng([seed, fold])
        val_parts = []
        for value, member in zip(classes, members):
            rest = member[fold_of[member] != fold]
            n_val = _rounded(val_fraction, rest.size)
            if val_fraction > 0 and n_val < 1:
                raise ValueError(
                    f"val_fraction={val_fraction:g} is too small: class "
                    f"{value} has {rest.size} graphs outside test fold {fold}, "
                    f"so its validation part would be empty."
                )
            if n_val >= rest.size:
                raise ValueError(
                    f"val_fraction={val_fraction:g} is too large: it takes all "
                    f"{rest.size} training graphs of class {value} in fold "
                    f"{fold}."
                )
            val_parts.append(fold_rng.permutation(rest)[:n_val])
        val = np.sort(np.concatenate(val_parts)).astype(np.int64)
        test = np.flatnonzero(fold_of == fold).astype(np.int64)
        in_train = fold_of != fold
        in_train[val] = False
        folds.append({"train": np.flatnonzero(in_train).astype(np.int64), "val": val, "test": test})
    return folds
