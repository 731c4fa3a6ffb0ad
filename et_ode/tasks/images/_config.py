"""Training configuration: TOML files with four sections, validated by their schema
(`_schema`: the dataclasses below, strict types, ranges, cross-field rules)."""

from typing import Annotated, Literal

from pydantic import Field

from .._dynamics import Dynamics
from .._schema import ConfigDocument, config_section, read_toml
from .._training import MAX_SEED, MAX_STEPS, check_warmup
from ._spec import ImageModelConfig


@config_section
class DataConfig:
    """Training and evaluation images and their masking (the `[data]` section)."""

    source: Annotated[
        Literal["photos", "tfds"],
        Field(
            description=(
                "photos (the embedded scikit-image photographs) or tfds (TensorFlow Datasets)"
            )
        ),
    ] = "photos"
    tfds_name: Annotated[str, Field(min_length=1, description=("the TensorFlow Datasets name"))] = (
        "cifar10"
    )
    data_dir: Annotated[
        str | None,
        Field(min_length=1, description=("the TensorFlow Datasets folder of prepared data")),
    ] = None
    mask_ratio: Annotated[
        float,
        Field(
            gt=0,
            le=1,
            description=(
                "fraction of the patches occluded (the paper: 0.5); at least one patch: "
                "round(mask_ratio x patches) >= 1"
            ),
        ),
    ] = 0.5
    mask_fraction: Annotated[
        float,
        Field(
            ge=0,
            le=1,
            description=(
                "fraction of the occluded patches replaced by MASK, the rest left visible "
                "(the paper: 0.9)"
            ),
        ),
    ] = 0.9
    eval_images: Annotated[
        int, Field(ge=1, description=("held-out images used for each evaluation"))
    ] = 256
    augment: Annotated[
        bool,
        Field(
            description=(
                "random flips, quarter turns and colour-channel permutations of training "
                "images (the embedded data holds only seven training scenes)"
            )
        ),
    ] = True


@config_section
class TrainingConfig:
    """Optimisation (the `[training]` section): AdamW with a warmup-cosine schedule and
    global-norm clipping."""

    steps: Annotated[
        int,
        Field(
            ge=1,
            le=MAX_STEPS,
            description=("optimiser steps in all (at most 2**31 - 1: JAX's int32 step counter)"),
        ),
    ] = 2000
    batch_size: Annotated[int, Field(ge=1, description="images per step")] = 32
    learning_rate: Annotated[float, Field(gt=0, description="peak learning rate")] = 1e-3
    warmup_steps: Annotated[int, Field(ge=0, description=("linear warmup steps, below steps"))] = (
        100
    )
    weight_decay: Annotated[float, Field(ge=0, description="AdamW weight decay")] = 1e-4
    clip_norm: Annotated[float, Field(gt=0, description="global gradient-norm clip")] = 1.0
    seed: Annotated[
        int,
        Field(
            ge=0,
            le=MAX_SEED,
            description=(
                "seed of the parameters, the data order and the masks (0 to 2**32 - 1, "
                "JAX's key range)"
            ),
        ),
    ] = 0
    eval_every: Annotated[int, Field(ge=1, description="steps between evaluations")] = 250
    checkpoint_every: Annotated[int, Field(ge=1, description=("steps between checkpoints"))] = 250
    out_dir: Annotated[
        str, Field(min_length=1, description=("folder of the checkpoint and metrics"))
    ] = "runs/train"
    init_from: Annotated[
        str | None,
        Field(
            min_length=1,
            description=(
                "start from the parameters and data normalisation of a trained model (a "
                "shipped name or a checkpoint path) with the same [model] section: a fine-tune "
                "under this config's dynamics"
            ),
        ),
    ] = None

    def __post_init__(self):
        check_warmup(self.warmup_steps, self.steps)


@config_section
class TrainConfig(ConfigDocument):
    """A training config: `[model]`, `[dynamics]`, `[data]`, `[training]`."""

    model: ImageModelConfig = ImageModelConfig()
    dynamics: Dynamics = Dynamics()
    data: DataConfig = DataConfig()
    training: TrainingConfig = TrainingConfig()

    def __post_init__(self):
        n = self.model.n_patches
        if round(self.data.mask_ratio * n) < 1:
            raise ValueError(
                f"[data] mask_ratio = {self.data.mask_ratio} masks round(mask_ratio x {n}) = 0 "
                f"of the {n} patches of [model] (image_size {self.model.image_size}, patch "
                f"{self.model.patch}): use mask_ratio > {0.5 / n:.4g} (at least one patch; "
                f"{1 / n:.4g} masks exactly one)"
            )


def load_config(path) -> TrainConfig:
    """Read and check a TOML training config (which may not ask for the authors'
    double-LayerNorm decoder: see `ImageModelConfig`)."""
    raw = read_toml(path)
    config = TrainConfig.from_dict(raw, source=str(path))
    if config.model.decoder != "layernorm":
        raise ValueError(
            f"{path}: [model] decoder = {config.model.decoder!r} reproduces the authors' "
            "released decoder (its LayerNorm applied twice, a bug of their code) only to "
            'load their checkpoint; train with decoder = "layernorm" (the default).'
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
