"""et-ode: the Energy Transformer as a true ODE."""

from ._attention import EnergyAttention
from ._closed_form import closed_form_update
from ._conditions import Conditions
from ._hopfield import HopfieldNetwork
from ._layernorm import EnergyLayerNorm
from ._model import FLOWS, EnergyTransformer

__version__ = "0.1.0"

__all__ = [
    "Conditions", "EnergyAttention", "EnergyLayerNorm", "EnergyTransformer", "FLOWS",
    "HopfieldNetwork", "closed_form_update",
]
