"""Training configuration: TOML files with four sections, every field checked."""

import dataclasses
import math
import tomllib
from pathlib import Path

from .. import solvers
from ..vocab import ACTIVATIONS, ADJOINTS, FLOWS

from ._dynamics import Dynamics
from ._image_spec import ImageModelConfig


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """`source`: `"photos"` (the embedded scikit-image photographs) or `"tfds"`;
    `tfds_name`, `data_dir`: the TensorFlow Datasets name and prepared-data folder;
    `mask_ratio`, `mask_fraction`: the paper's masking (0.5 occluded, 0.9 of those MASK);
    `eval_images`: held-out images used for each evaluation; `augment`: random flips,
    quarter turns and colour-channel permutations of training images (the embedded data
    holds only seven training scenes)."""

    source: str = "photos"
    tfds_name: str = "cifar10"
    data_dir: str | None = None
    mask_ratio: float = 0.5
    mask_fraction: float = 0.9
    eval_images: int = 256
    augment: bool = True


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    """Optimisation: AdamW with a warmup-cosine schedule and global-norm clipping.
    `steps` total, `batch_size` images per step, `learning_rate` peak, `warmup_steps`,
    `weight_decay`, `clip_norm`, `seed` (parameters, data order and masks),
    `eval_every` and `checkpoint_every` in steps, `out_dir` for checkpoints and metrics,
    `init_from`: start from the parameters and data normalisation of a trained model (a
    shipped name or a checkpoint path) with the same `[model]` section, instead of a
    random initialisation: a fine-tune under this config's dynamics."""

    steps: int = 2000
    batch_size: int = 32
    learning_rate: float = 1e-3
    warmup_steps: int = 100
    weight_decay: float = 1e-4
    clip_norm: float = 1.0
    seed: int = 0
    eval_every: int = 250
    checkpoint_every: int = 250
    out_dir: str = "runs/train"
    init_from: str | None = None


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    model: ImageModelConfig = ImageModelConfig()
    dynamics: Dynamics = Dynamics()
    data: DataConfig = DataConfig()
    training: TrainingConfig = TrainingConfig()

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, raw: dict, source: str = "config") -> "TrainConfig":
        config = cls(**sections_from_dict(cls, raw, source))
        config.check(source)
        return config

    def check(self, source: str = "config") -> None:
        """Raise `ValueError` naming any out-of-range field."""
        problems = []

        def need(condition, message):
            if not condition:
                problems.append(message)

        m, d, data, t = self.model, self.dynamics, self.data, self.training
        for name in ("image_size", "patch", "channels", "dim", "n_heads", "head_dim",
                     "n_memories"):
            value = getattr(m, name)
            need(isinstance(value, int) and value >= 1, f"[model] {name} must be a positive integer")
        need(m.channels in (1, 3), "[model] channels must be 1 or 3")
        need(m.hopfield in ACTIVATIONS, f"[model] hopfield must be one of {', '.join(ACTIVATIONS)}")
        need(positive(m.tau), "[model] tau must be positive")
        need(d.flow in FLOWS, f"[dynamics] flow must be one of {', '.join(FLOWS)}")
        need(d.adjoint in ADJOINTS, f"[dynamics] adjoint must be one of {', '.join(ADJOINTS)}")
        need(positive(d.t1), "[dynamics] t1 must be positive")
        need(d.dt0 is None or positive(d.dt0), "[dynamics] dt0 must be positive")
        need(d.fixed_point_atol is None or positive(d.fixed_point_atol),
             "[dynamics] fixed_point_atol must be positive")
        if not problems:  # the combination, as solvers.solve will see it
            try:
                solvers.check_options(**d.solve_options())
            except (ValueError, TypeError) as error:
                problems.append(f"[dynamics] {str(error).rstrip('.')}")
        need(data.source in ("photos", "tfds"), "[data] source must be photos or tfds")
        need(0 < data.mask_ratio <= 1, "[data] mask_ratio must be in (0, 1]")
        need(0 <= data.mask_fraction <= 1, "[data] mask_fraction must be in [0, 1]")
        need(isinstance(data.eval_images, int) and data.eval_images >= 1,
             "[data] eval_images must be a positive integer")
        problems += optimisation_problems(t, ("steps", "batch_size", "eval_every",
                                              "checkpoint_every"))
        if problems:
            raise ValueError(f"{source}: " + "; ".join(problems) + ".")


def optimisation_problems(t, counts: tuple[str, ...]) -> list[str]:
    """What is wrong with a `[training]` section `t` of AdamW with warmup-cosine and
    clipping: its `counts` must be positive integers, `warmup_steps` in `[0, steps)`,
    `learning_rate` and `clip_norm` positive, `weight_decay` >= 0."""
    problems = [f"[training] {name} must be a positive integer" for name in counts
                if not (isinstance(getattr(t, name), int) and getattr(t, name) >= 1)]
    checks = (
        (isinstance(t.warmup_steps, int) and 0 <= t.warmup_steps < t.steps,
         "[training] warmup_steps must be an integer in [0, steps)"),
        (positive(t.learning_rate), "[training] learning_rate must be positive"),
        (t.weight_decay >= 0, "[training] weight_decay must be >= 0"),
        (positive(t.clip_norm), "[training] clip_norm must be positive"),
    )
    return problems + [message for ok, message in checks if not ok]


def sections_from_dict(cls, raw: dict, source: str) -> dict:
    """The sections of the dataclass `cls` (each field a dataclass of its own) built
    from `raw`, a dict of tables as read from TOML: unknown sections and fields are
    refused naming them and the allowed ones; a field's own checks are reported with
    its section. Missing sections and fields take their defaults."""
    sections = {f.name: f.type for f in dataclasses.fields(cls)}
    if not isinstance(raw, dict):
        raise ValueError(f"{source}: a config is a table of sections.")
    unknown = set(raw) - set(sections)
    if unknown:
        raise ValueError(
            f"{source}: unknown section(s) {sorted(unknown)}; allowed: {sorted(sections)}."
        )
    built = {}
    for name, kind in sections.items():
        values = raw.get(name, {})
        if not isinstance(values, dict):
            raise ValueError(f"{source}: [{name}] must be a table of fields.")
        fields = {f.name: f for f in dataclasses.fields(kind)}
        unknown = set(values) - set(fields)
        if unknown:
            raise ValueError(
                f"{source}: unknown field(s) {sorted(unknown)} in [{name}]; "
                f"allowed: {sorted(fields)}."
            )
        try:
            built[name] = kind(**{k: tuple(v) if isinstance(v, list) else v
                                  for k, v in values.items()})
        except (TypeError, ValueError) as error:
            raise ValueError(f"{source}: [{name}]: {error}") from None
    return built


def read_toml(path) -> dict:
    """The tables of a TOML file; a missing file or invalid TOML is a `ValueError`
    naming the file."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"config file {path} does not exist.")
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"{path}: not valid TOML: {error}") from None


def positive(value) -> bool:
    """A finite number above zero."""
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def load_config(path) -> TrainConfig:
    """Read and check a TOML training config (which may not ask for the authors'
    double-LayerNorm decoder: see `ImageModelConfig`)."""
    raw = read_toml(path)
    config = TrainConfig.from_dict(raw, source=str(path))
    if config.model.decoder != "layernorm":
        raise ValueError(
            f"{path}: [model] decoder = {config.model.decoder!r} reproduces the authors' "
            "released decoder (its LayerNorm applied twice, a bug of their code) only to "
            "load their checkpoint; train with decoder = \"layernorm\" (the default)."
        )
    return config


def config_from_header(header: dict, path) -> TrainConfig:
    """The `TrainConfig` stored in a checkpoint header read from `path` (named in errors)."""
    if header.get("kind") != "masked_image_et":
        raise ValueError(f"{path}: not a MaskedImageET checkpoint (kind {header.get('kind')!r}).")
    missing = {"config", "normalisation", "step"} - set(header)
    if missing or not isinstance(header["config"], dict):
        raise ValueError(f"{path}: corrupt checkpoint header (missing {sorted(missing)}).")
    return TrainConfig.from_dict(header["config"], source=str(path))
