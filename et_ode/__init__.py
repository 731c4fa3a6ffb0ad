"""et-ode: the Energy Transformer as a true ODE.

The package is cut in layers, each importing only those below it:

- `et_ode.core`: the model (energy modules, conditions, flows, residual);
- `et_ode.solvers`: integrating and differentiating any energy model with diffrax
  (imports no model code);
- `et_ode.tasks`: masked image completion (data, training, checkpoints, shipped models);
- `et_ode.analysis`: studies of solutions, their plots and video;
- `et_ode.cli`: the `et-ode` command and its jobs.

The names of `core` and `tasks` are also attributes of `et_ode` itself, loaded on first
use (PEP 562), so that `import et_ode.solvers` loads no model, training or data code.
"""

import importlib
from importlib import metadata as _metadata

__version__ = _metadata.version("et-ode")

_CORE = (
    "Conditions",
    "EnergyAttention",
    "EnergyLayerNorm",
    "EnergyTransformer",
    "HopfieldNetwork",
    "closed_form_update",
)
_TASKS = (
    "ChannelNormalisation",
    "DataConfig",
    "Dynamics",
    "ImageModelConfig",
    "MaskedImageET",
    "Masking",
    "SCENES",
    "TEST_SCENES",
    "TRAIN_SCENES",
    "TrainConfig",
    "TrainingConfig",
    "check_images",
    "evaluate_baselines",
    "evaluate_model",
    "interpolation_fill",
    "load_config",
    "masked_mse",
    "mean_fill",
    "patchify",
    "photo_crops",
    "random_masking",
    "tfds_images",
    "train",
    "unpatchify",
)
_SUBPACKAGES = ("analysis", "cli", "core", "records", "solvers", "tasks")
_HOME = {name: "core" for name in _CORE} | {name: "tasks" for name in _TASKS}

__all__ = sorted(_CORE + _TASKS + _SUBPACKAGES)


def __getattr__(name: str):
    if name in _HOME:
        value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    elif name in _SUBPACKAGES:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
