"""et-ode: the Energy Transformer as a true ODE."""

from ._attention import EnergyAttention
from ._closed_form import closed_form_update
from ._conditions import Conditions
from ._hopfield import HopfieldNetwork
from ._layernorm import EnergyLayerNorm
from ._config import DataConfig, TrainConfig, TrainingConfig, load_config
from ._data import (
    SCENES, TEST_SCENES, TRAIN_SCENES, ChannelNormalisation, check_images, photo_crops,
    tfds_images,
)
from ._evaluate import evaluate_baselines, evaluate_model, interpolation_fill, mean_fill
from ._image_model import Dynamics, ImageModelConfig, MaskedImageET, masked_mse
from ._model import FLOWS, EnergyTransformer
from ._patches import Masking, patchify, random_masking, unpatchify
from ._train import train

__version__ = "0.1.0"

__all__ = [
    "SCENES", "TEST_SCENES", "TRAIN_SCENES", "ChannelNormalisation", "DataConfig",
    "Dynamics", "ImageModelConfig", "Masking", "MaskedImageET", "TrainConfig",
    "TrainingConfig", "check_images", "evaluate_baselines", "evaluate_model",
    "interpolation_fill", "load_config", "masked_mse", "mean_fill", "patchify",
    "photo_crops", "random_masking", "tfds_images", "train", "unpatchify",
    "Conditions", "EnergyAttention", "EnergyLayerNorm", "EnergyTransformer", "FLOWS",
    "HopfieldNetwork", "closed_form_update",
]
