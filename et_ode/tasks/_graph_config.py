"""Graph benchmark configuration: TOML files with five sections, every field checked.

A config names the task (node anomaly detection or graph classification), its data,
the protocol (models compared, training ratios and splits, or cross-validation
folds), the architecture, the dynamics and the optimisation."""

import dataclasses

from .. import solvers
from ..vocab import ADJOINTS, FLOWS
from ._config import optimisation_problems, read_toml, sections_from_dict
from ._dynamics import Dynamics
from ._graph_spec import ET_TERMS, GRAPH_MODELS, GraphModelConfig

TASKS = ("anomaly", "classification")
SOURCES = {"anomaly": ("sbm", "fraud_mat"), "classification": ("csl", "tu")}


@dataclasses.dataclass(frozen=True)
class GraphDataConfig:
    """`task`: `"anomaly"` (node anomaly detection) or `"classification"`.
    `source`: for anomalies `"sbm"` (the generated benchmark: an attributed stochastic
    block model with injected structural and contextual anomalies, `n_nodes` nodes,
    from `seed`) or `"fraud_mat"` (`path` to `YelpChi.mat` / `Amazon.mat`, adjacency
    `relation`); for classification `"csl"` (circular skip links, generated from
    `seed`) or `"tu"` (`path` to a folder of TU text files). `seed` also draws the
    splits and folds."""

    task: str = "anomaly"
    source: str = "sbm"
    path: str | None = None
    n_nodes: int = 2000
    relation: str = "homo"
    seed: int = 0


@dataclasses.dataclass(frozen=True)
class ProtocolConfig:
    """What is compared and how. `models`: any of `"et"`, `"et_attention_only"`,
    `"et_hopfield_only"` (the paper's ablations), `"mlp"`, `"gcn"` (baselines; node
    anomaly detection only). Anomalies: `train_ratios` (fractions of the nodes used
    for training; the rest split 1:2 into validation and test) and `n_splits` random
    stratified splits per ratio (the paper: 5). Classification: `n_folds` of
    stratified cross-validation (the paper: 10), each fold selecting its model on its
    own validation part (`val_fraction` of the graphs outside the test fold)."""

    models: tuple[str, ...] = GRAPH_MODELS
    train_ratios: tuple[float, ...] = (0.4,)
    n_splits: int = 5
    n_folds: int = 10
    val_fraction: float = 0.1


@dataclasses.dataclass(frozen=True)
class GraphTrainingConfig:
    """Optimisation: AdamW with a warmup-cosine schedule and global-norm clipping,
    `steps` per run (full-graph steps for anomalies, mini-batches of `batch_size`
    graphs for classification), `eval_every` steps the validation metric (AUC or
    accuracy) is measured and the best parameters so far kept (the model selected on
    validation), `seed` of the parameters and the batches, `out_dir` for results and
    checkpoints."""

    steps: int = 300
    batch_size: int = 32
    learning_rate: float = 3e-3
    warmup_steps: int = 20
    weight_decay: float = 1e-4
    clip_norm: float = 1.0
    seed: int = 0
    eval_every: int = 10
    out_dir: str = "runs/graph"


@dataclasses.dataclass(frozen=True)
class GraphTrainConfig:
    data: GraphDataConfig = GraphDataConfig()
    protocol: ProtocolConfig = ProtocolConfig()
    model: GraphModelConfig = GraphModelConfig()
    dynamics: Dynamics = Dynamics()
    training: GraphTrainingConfig = GraphTrainingConfig()

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, raw: dict, source: str = "config") -> "GraphTrainConfig":
        config = cls(**sections_from_dict(cls, raw, source))
        config.check(source)
        return config

    def check(self, source: str = "config") -> None:
        """Raise `ValueError` naming every out-of-range field."""
        problems = []

        def need(condition, message):
            if not condition:
                problems.append(message)

        data, p, m, d, t = self.data, self.protocol, self.model, self.dynamics, self.training
        need(data.task in TASKS, f"[data] task must be one of {', '.join(TASKS)}")
        sources = SOURCES.get(data.task, ())
        need(data.source in sources or data.task not in TASKS,
             f"[data] source for task {data.task!r} must be one of {', '.join(sources)}")
        need(data.source not in ("fraud_mat", "tu") or data.path,
             f"[data] source {data.source!r} needs path (the file or folder to read)")
        need(isinstance(data.n_nodes, int) and data.n_nodes >= 50,
             "[data] n_nodes must be an integer >= 50")
        need(bool(p.models) and all(k in GRAPH_MODELS for k in p.models)
             and len(set(p.models)) == len(p.models),
             f"[protocol] models must be distinct names among {', '.join(GRAPH_MODELS)}")
        if data.task == "classification":
            need(all(k in ET_TERMS for k in p.models),
                 "[protocol] graph classification compares the ET models only "
                 f"({', '.join(ET_TERMS)})")
            need(m.positions != "learned",
                 "[model] positions must be 'laplacian' or 'none' for classification")
        else:
            need(m.positions != "laplacian",
                 "[model] positions must be 'learned' or 'none' for node anomalies")
        need(bool(p.train_ratios) and all(isinstance(r, float) and 0 < r < 1
                                          for r in p.train_ratios),
             "[protocol] train_ratios must be numbers in (0, 1), written with a decimal point")
        for name in ("n_splits", "n_folds"):
            value = getattr(p, name)
            need(isinstance(value, int) and value >= 1, f"[protocol] {name} must be >= 1")
        need(isinstance(p.n_folds, int) and p.n_folds >= 2, "[protocol] n_folds must be >= 2")
        need(0 < p.val_fraction < 1, "[protocol] val_fraction must be in (0, 1)")
        need(d.flow in FLOWS, f"[dynamics] flow must be one of {', '.join(FLOWS)}")
        need(d.adjoint in ADJOINTS, f"[dynamics] adjoint must be one of {', '.join(ADJOINTS)}")
        need(not d.clamp_visible and not d.external_field,
             "[dynamics] clamp_visible and external_field are image-model options")
        if not problems:
            try:
                solvers.check_options(**d.solve_options())
            except (ValueError, TypeError) as error:
                problems.append(f"[dynamics] {str(error).rstrip('.')}")
        problems += optimisation_problems(t, ("steps", "batch_size", "eval_every"))
        if problems:
            raise ValueError(f"{source}: " + "; ".join(problems) + ".")


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
