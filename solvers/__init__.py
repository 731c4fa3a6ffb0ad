"""Integrating and differentiating energy-based dynamical systems with diffrax.

`solve` integrates any `EnergySystem` (energy, vector_field, residual); the implicit
adjoint and `find_fixed_point` work on the manifold a `ManifoldEnergySystem` declares and
treat any other model as flat (the state itself is the manifold). This package imports no
model code.
"""

from ._auto import AutoSwitch
from ._blowup import blowup_note as blowup_note  # for the studies; not in __all__
from ._blowup import growth_note as growth_note  # for the studies; not in __all__
from ._crawl import SlowSolveWarning
from ._defaults import MAX_STEPS_LIMIT, constant_step_count
from ._fixed_point import NEWTON_DENSE_MAX, FixedPointResult, find_fixed_point
from ._options import check_options
from ._presets import SOLVER_NAMES, SolverPreset, get_preset
from ._protocol import (
    MANIFOLD_METHODS,
    EnergySystem,
    ManifoldEnergySystem,
    batched_args_axes,
)
from ._protocol import (
    as_manifold_system as as_manifold_system,  # for the studies; not in __all__
)
from ._sharding import batch_mesh, shard_batch
from ._solution import STOP_REASONS, EnergySolution, StopReason
from ._solve import solve
from ._statistics import SolveError
from ._stop import FixedPointStop, rms
from ._validate import BACKSOLVE_STABLE_HORIZON, DENSE_JACOBIAN_MAX_STATE

__all__ = [
    "AutoSwitch",
    "BACKSOLVE_STABLE_HORIZON",
    "DENSE_JACOBIAN_MAX_STATE",
    "EnergySolution",
    "EnergySystem",
    "FixedPointResult",
    "FixedPointStop",
    "MAX_STEPS_LIMIT",
    "ManifoldEnergySystem",
    "NEWTON_DENSE_MAX",
    "SOLVER_NAMES",
    "STOP_REASONS",
    "SlowSolveWarning",
    "SolveError",
    "MANIFOLD_METHODS",
    "SolverPreset",
    "StopReason",
    "batch_mesh",
    "batched_args_axes",
    "check_options",
    "constant_step_count",
    "find_fixed_point",
    "get_preset",
    "rms",
    "shard_batch",
    "solve",
]
