"""The model layer: the Energy Transformer's energy and its flows.

`EnergyTransformer` holds the three energy modules (`EnergyLayerNorm`,
`EnergyAttention`, `HopfieldNetwork`) and defines `energy`, `vector_field` (native or
projected flow) and `residual` (the Riemannian gradient G, zero exactly at fixed
points): the protocol `et_ode.solvers` integrates. `Conditions` are the `args` of the
dynamics (key mask or edge list, clamped tokens, external field). Imports nothing of
the solvers, tasks or studies.
"""

from ._attention import EnergyAttention
from ._closed_form import closed_form_update
from ._conditions import Conditions
from ._hopfield import HopfieldNetwork
from ._layernorm import EnergyLayerNorm
from ._model import EnergyTransformer

__all__ = [
    "Conditions",
    "EnergyAttention",
    "EnergyLayerNorm",
    "EnergyTransformer",
    "HopfieldNetwork",
    "closed_form_update",
]
