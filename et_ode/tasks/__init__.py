"""The task layer: what the Energy Transformer is applied to.

Masked image completion (`MaskedImageET`: patches, encoder, MASK token, positions, an
`EnergyTransformer` core run by `et_ode.solvers`, decoder), its data (embedded photos,
TensorFlow Datasets), training (optax, atomic checkpoints, bit-identical resume),
evaluation against the mean-fill and interpolation baselines, the shipped models, and
the authors' released ImageNet model (`MaskedImageET.load("plaindict_ckpt.npz")`,
read by `read_authors_checkpoint`). Your own photos: `image_problem(model, images)` takes
a folder, photo files (`.jpg`, `.png`, centre-cropped and resized to the model's
`S x S`) or an array `[B, S, S, C]` in [0, 1] to an `ImageProblem`: the core, its
initial state `x0 [B, T, D]` and its batched `Conditions` (`T` tokens of dimension `D`:
the `N` patches, and a CLS token if the model has one), with the evaluation masks (keyed
by `seed`) or masks given; `problem.sample(i)` is one image's `x0 [T, D]` and un-batched
conditions for `et_ode.solvers.solve(problem.core, x0, args=conditions, ...)`, and
`decode`, `masked_mse` and `complete` read a solved state back (patches in the model's
normalised units, images in [0, 1]). Graphs: node anomaly detection
(`NodeAnomalyET`, the `MLPDetector` and `GCNDetector` baselines, all `NodeDetector`s, the
generated `anomaly_benchmark` with its `AnomalyInjection`, `load_fraud_mat`) and graph
classification (`GraphClassifierET`, `csl_graphs`, `load_tu`), run by
`run_graph_benchmark` from a `GraphTrainConfig`.
Builds on `et_ode.core` and `et_ode.solvers`.

Layout: one room per task, `images/` and `graphs/`, neither importing the other; beside
them the pieces both use: the checkpoint format (`_checkpoint`), the dynamics
(`_dynamics`), config validation and reading (`_schema`), the fields of a core
(`_core_spec`), the `[training]` limits and the divergence error (`_training`), and the
shipped models (`_zoo`). Every public name is exported here.
"""

from ._checkpoint import read_checkpoint, save_checkpoint
from ._dynamics import Dynamics
from ._schema import json_schema as config_json_schema
from ._zoo import SHIPPED, SHIPPED_GRAPH, resolve_model_path, shipped_path
from .graphs._authors_noise import (
    AUTHORS_ANNEALING_GAMMA,
    AUTHORS_NOISE_STD,
    authors_annealing,
    authors_temperature,
)
from .graphs._config import (
    GraphDataConfig,
    GraphTrainConfig,
    GraphTrainingConfig,
    ProtocolConfig,
    load_graph_config,
)
from .graphs._containers import GraphSet, NodeGraph, canonical_edges
from .graphs._fit import load_graph_set, load_node_graph, standardise
from .graphs._generate import AnomalyInjection, anomaly_benchmark, csl_graphs
from .graphs._metrics import accuracy, best_threshold, macro_f1, roc_auc
from .graphs._models import (
    GCNDetector,
    GraphBatch,
    GraphClassifierET,
    MLPDetector,
    NodeAnomalyET,
    NodeDetector,
    graph_batch,
    laplacian_eigenvectors,
    new_detector,
)
from .graphs._paper_classifier import PaperGraphClassifierET
from .graphs._read import load_fraud_mat, load_tu
from .graphs._spec import GraphModelConfig
from .graphs._splits import cross_validation_folds, stratified_splits
from .graphs._train import (
    evaluate_graph_model,
    load_graph_model,
    run_graph_benchmark,
    run_split,
    table_markdown,
)
from .images._authors import (
    authors_config,
    read_authors_checkpoint,
)
from .images._config import DataConfig, TrainConfig, TrainingConfig, load_config
from .images._data import (
    SCENES,
    TEST_SCENES,
    TRAIN_SCENES,
    default_scale,
    folder_images,
    photo_crops,
    scene_crops,
)
from .images._evaluate import (
    EVAL_KEY,
    eval_masks,
    evaluate_baselines,
    evaluate_model,
    evaluation_masks,
    interpolation_fill,
    mean_fill,
)
from .images._model import MaskedImageET, load_model_and_config, masked_mse, sincos_positions
from .images._normalisation import ChannelNormalisation, check_images
from .images._patches import Masking, patchify, random_masking, unpatchify
from .images._problem import ImageProblem, image_problem
from .images._spec import ImageModelConfig
from .images._tfds import tfds_images
from .images._train import (
    export_model,
    held_out_indices,
    held_out_split,
    load_split,
    make_optimizer,
    new_model,
    train,
    train_step,
)

__all__ = [
    "config_json_schema",
    "AUTHORS_NOISE_STD",
    "AUTHORS_ANNEALING_GAMMA",
    "authors_temperature",
    "authors_annealing",
    "GCNDetector",
    "GraphBatch",
    "GraphClassifierET",
    "PaperGraphClassifierET",
    "GraphDataConfig",
    "GraphModelConfig",
    "GraphSet",
    "GraphTrainConfig",
    "GraphTrainingConfig",
    "MLPDetector",
    "NodeAnomalyET",
    "NodeDetector",
    "NodeGraph",
    "ProtocolConfig",
    "accuracy",
    "AnomalyInjection",
    "anomaly_benchmark",
    "best_threshold",
    "canonical_edges",
    "cross_validation_folds",
    "csl_graphs",
    "evaluate_graph_model",
    "graph_batch",
    "laplacian_eigenvectors",
    "load_fraud_mat",
    "load_graph_config",
    "load_graph_model",
    "load_graph_set",
    "load_node_graph",
    "load_tu",
    "macro_f1",
    "new_detector",
    "roc_auc",
    "run_graph_benchmark",
    "run_split",
    "standardise",
    "stratified_splits",
    "table_markdown",
    "ChannelNormalisation",
    "DataConfig",
    "Dynamics",
    "EVAL_KEY",
    "ImageModelConfig",
    "ImageProblem",
    "MaskedImageET",
    "Masking",
    "SCENES",
    "SHIPPED",
    "SHIPPED_GRAPH",
    "TEST_SCENES",
    "TRAIN_SCENES",
    "TrainConfig",
    "TrainingConfig",
    "authors_config",
    "check_images",
    "default_scale",
    "eval_masks",
    "evaluate_baselines",
    "evaluate_model",
    "evaluation_masks",
    "export_model",
    "folder_images",
    "held_out_indices",
    "held_out_split",
    "image_problem",
    "interpolation_fill",
    "load_config",
    "load_model_and_config",
    "load_split",
    "make_optimizer",
    "masked_mse",
    "mean_fill",
    "new_model",
    "patchify",
    "photo_crops",
    "random_masking",
    "read_authors_checkpoint",
    "read_checkpoint",
    "resolve_model_path",
    "save_checkpoint",
    "scene_crops",
    "shipped_path",
    "sincos_positions",
    "tfds_images",
    "train",
    "train_step",
    "unpatchify",
]
