"""Graph benchmark configuration: TOML files with five sections, validated by their
schema (`_schema`).

A config names the task (node anomaly detection or graph classification), its data,
the protocol (models compared, training ratios and splits, or cross-validation
folds), the architecture, the dynamics and the optimisation."""

from typing import Annotated, Literal, get_args

from pydantic import Field

from .._dynamics import Dynamics
from .._schema import ConfigDocument, config_section, read_toml
from .._training import MAX_SEED, MAX_STEPS, check_warmup
from ._spec import ET_TERMS, GRAPH_MODELS, PAPER_CLASSIFIER, GraphModelConfig, GraphModelName

Task = Literal["anomaly", "classification"]
Source = Literal["sbm", "fraud_mat", "csl", "tu"]
TASKS = get_args(Task)
SOURCES = {"anomaly": ("sbm", "fraud_mat"), "classification": ("csl", "tu")}
MAX_NODES = 1_000_000


@config_section
class GraphDataConfig:
    """The graph data (the `[data]` section). The generated sources draw from `seed`,
    which also draws the splits and folds."""

    task: Annotated[
        Task,
        Field(
            description=(
                "anomaly (node anomaly detection) or classification (graph classification)"
            )
        ),
    ] = "anomaly"
    source: Annotated[
        Source,
        Field(
            description=(
                "anomaly: sbm (the generated benchmark: an attributed stochastic block model with "
                "injected structural and contextual anomalies) or fraud_mat (YelpChi.mat / "
                "Amazon.mat at path); classification: csl (circular skip links, generated) or tu "
                "(a folder of TU text files at path)"
            )
        ),
    ] = "sbm"
    path: Annotated[
        str | None, Field(min_length=1, description=("the file (fraud_mat) or folder (tu) to read"))
    ] = None
    n_nodes: Annotated[
        int,
        Field(
            ge=50,
            le=MAX_NODES,
            description=(
                f"sbm: nodes of the generated graph (at most {MAX_NODES:,}: full-graph training "
                "holds every node's state and a learned position per node)"
            ),
        ),
    ] = 2000
    relation: Annotated[
        str,
        Field(min_length=1, description=("fraud_mat: the adjacency to read (homo: all relations)")),
    ] = "homo"
    seed: Annotated[
        int,
        Field(
            ge=0, le=MAX_SEED, description=("seed of the data, splits and folds (0 to 2**32 - 1)")
        ),
    ] = 0

    def __post_init__(self):
        if self.source not in SOURCES[self.task]:
            raise ValueError(
                f"source for task {self.task!r} must be one of "
                f"{', '.join(SOURCES[self.task])} (got {self.source!r})"
            )
        if self.source in ("fraud_mat", "tu") and not self.path:
            raise ValueError(f"source {self.source!r} needs path (the file or folder to read)")


@config_section
class ProtocolConfig:
    """What is compared and how (the `[protocol]` section). Anomalies: `train_ratios`
    and `n_splits` (the rest of the nodes split 1:2 into validation and test).
    Classification: `n_folds` of stratified cross-validation, each fold selecting its
    model on its own validation part (`val_fraction` of the graphs outside the test
    fold)."""

    models: Annotated[
        tuple[GraphModelName, ...],
        Field(
            min_length=1,
            description=(
                "et, et_attention_only and et_hopfield_only (the paper's ablations), mlp and gcn "
                "(baselines; node anomaly detection only), et_paper (the paper's graph "
                "classifier: weighted adjacency, stacked blocks, learned per-head beta, noise; "
                "graph classification only), each at most once"
            ),
        ),
    ] = GRAPH_MODELS
    train_ratios: Annotated[
        tuple[Annotated[float, Field(gt=0, lt=1)], ...],
        Field(
            min_length=1,
            description=("anomalies: fractions of the nodes used for training, in (0, 1)"),
        ),
    ] = (0.4,)
    n_splits: Annotated[
        int,
        Field(
            ge=1,
            description=("anomalies: random stratified splits per training ratio (the paper: 5)"),
        ),
    ] = 5
    n_folds: Annotated[
        int, Field(ge=2, description=("classification: cross-validation folds (the paper: 10)"))
    ] = 10
    val_fraction: Annotated[
        float,
        Field(
            gt=0,
            lt=1,
            description=("classification: the validation part of the graphs outside the test fold"),
        ),
    ] = 0.1

    def __post_init__(self):
        if len(set(self.models)) != len(self.models):
            raise ValueError(f"models must be distinct (got {list(self.models)})")


@config_section
class GraphTrainingConfig:
    """Optimisation (the `[training]` section): AdamW with a warmup-cosine schedule and
    global-norm clipping; every `eval_every` steps the validation metric (AUC or
    accuracy) is measured and the best parameters so far kept."""

    steps: Annotated[
        int,
        Field(
            ge=1,
            le=MAX_STEPS,
            description=(
                "optimiser steps per run (full-graph steps for anomalies, mini-batches for "
                "classification); at most 2**31 - 1"
            ),
        ),
    ] = 300
    batch_size: Annotated[
        int, Field(ge=1, description=("classification: graphs per step (as many of each class)"))
    ] = 32
    learning_rate: Annotated[float, Field(gt=0, description="peak learning rate")] = 3e-3
    warmup_steps: Annotated[int, Field(ge=0, description=("linear warmup steps, below steps"))] = 20
    weight_decay: Annotated[float, Field(ge=0, description="AdamW weight decay")] = 1e-4
    clip_norm: Annotated[float, Field(gt=0, description="global gradient-norm clip")] = 1.0
    seed: Annotated[
        int,
        Field(
            ge=0, le=MAX_SEED, description=("seed of the parameters and batches (0 to 2**32 - 1)")
        ),
    ] = 0
    eval_every: Annotated[
        int, Field(ge=1, description=("steps between validations (model selection)"))
    ] = 10
    out_dir: Annotated[
        str, Field(min_length=1, description=("folder of results and checkpoints"))
    ] = "runs/graph"

    def __post_init__(self):
        check_warmup(self.warmup_steps, self.steps)


@config_section
class GraphTrainConfig(ConfigDocument):
    """A graph benchmark config: `[data]`, `[protocol]`, `[model]`, `[dynamics]`,
    `[training]`."""

    data: GraphDataConfig = GraphDataConfig()
    protocol: ProtocolConfig = ProtocolConfig()
    model: GraphModelConfig = GraphModelConfig()
    dynamics: Dynamics = Dynamics()
    training: GraphTrainingConfig = GraphTrainingConfig()

    def __post_init__(self):
        if self.data.task == "classification":
            if not all(k in ET_TERMS or k == PAPER_CLASSIFIER for k in self.protocol.models):
                raise ValueError(
                    "[protocol] graph classification compares the ET models "
                    f"only ({', '.join(ET_TERMS)}, {PAPER_CLASSIFIER}; got models = "
                    f"{list(self.protocol.models)})"
                )
            if self.model.positions == "learned":
                raise ValueError(
                    "[model] positions must be 'laplacian' or 'none' for "
                    "classification (got 'learned')"
                )
        elif PAPER_CLASSIFIER in self.protocol.models:
            raise ValueError(
                f"[protocol] {PAPER_CLASSIFIER} is the paper's graph classifier: for "
                "task = 'classification' only (drop it from models)"
            )
        elif self.model.positions == "laplacian":
            raise ValueError(
                "[model] positions must be 'learned' or 'none' for node anomalies (got 'laplacian')"
            )
        if self.dynamics.clamp_visible or self.dynamics.external_field:
            raise ValueError(
                "[dynamics] clamp_visible and external_field are image-model "
                f"options: set both false for graphs (got clamp_visible = "
                f"{str(self.dynamics.clamp_visible).lower()}, external_field "
                f"= {str(self.dynamics.external_field).lower()})"
            )


def load_graph_config(path) -> GraphTrainConfig:
    """Read and check a TOML graph benchmark config."""
    return GraphTrainConfig.from_dict(read_toml(path), source=str(path))


def graph_config_from_header(header: dict, path) -> GraphTrainConfig:
    """The `GraphTrainConfig` stored in a graph checkpoint header read from `path`."""
    if header.get("kind") != "graph_et":
        raise ValueError(f"{path}: not a graph model checkpoint (kind {header.get('kind')!r}).")
    if not isinstance(header.get("config"), dict):
        raise ValueError(f"{path}: corrupt checkpoint header (no config).")
    return GraphTrainConfig.from_dict(header["config"], source=str(path))
