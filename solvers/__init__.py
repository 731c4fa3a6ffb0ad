"""Integrating and differentiating energy-based dynamical systems with diffrax.

`solve` integrates any `EnergySystem` (energy, vector_field, residual); the implicit
adjoint and `find_fixed_point` work on the manifold a `ManifoldEnergySystem` declares and
treat any other model as flat (the state itself is the manifold). This package imports no
model code.
"""

import warnings

from ._anderson import AndersonSettings
from ._auto import AutoSwitch
from ._blowup import blowup_note as blowup_note  # for the studies; not in __all__
from ._blowup import growth_note as growth_note  # for the studies; not in __all__
from ._crawl import SlowSolveWarning
from ._defaults import DENSE_MAX, MAX_STEPS_LIMIT, constant_step_count
from ._fixed_point import FixedPointResult, find_fixed_point
from ._options import SolveOptions, check_options
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
from ._sde import SDE_SOLVER_NAMES, STRONG_ORDERS, Brownian, StepPath
from ._sharding import batch_mesh, shard_batch
from ._solution import STOP_REASONS, EnergySolution, StopReason
from ._solve import solve
from ._statistics import SolveError
from ._stop import FixedPointStop, PassageStop, rms
from ._validate import BACKSOLVE_STABLE_HORIZON

# Entry points first (the API page follows this order): solving, fixed points, the
# solver objects, the protocol a model satisfies, batching, then the limits.
__all__ = [
    "solve",
    "SolveOptions",
    "EnergySolution",
    "StopReason",
    "STOP_REASONS",
    "SolveError",
    "SlowSolveWarning",
    "find_fixed_point",
    "FixedPointResult",
    "AndersonSettings",
    "FixedPointStop",
    "PassageStop",
    "Brownian",
    "StepPath",
    "AutoSwitch",
    "SolverPreset",
    "get_preset",
    "SOLVER_NAMES",
    "SDE_SOLVER_NAMES",
    "STRONG_ORDERS",
    "EnergySystem",
    "ManifoldEnergySystem",
    "MANIFOLD_METHODS",
    "batched_args_axes",
    "batch_mesh",
    "shard_batch",
    "check_options",
    "constant_step_count",
    "rms",
    "BACKSOLVE_STABLE_HORIZON",
    "DENSE_MAX",
    "MAX_STEPS_LIMIT",
]


# The names the dense limit had before it was one (issue 48): they still resolve, with a
# warning naming the one that replaces them.
_RENAMED = {"NEWTON_DENSE_MAX": "DENSE_MAX", "DENSE_JACOBIAN_MAX_STATE": "DENSE_MAX"}


def __getattr__(name: str):
    if name in _RENAMED:
        warnings.warn(
            f"solvers.{name} is now solvers.{_RENAMED[name]} (one dense limit for every "
            "method chosen by size).",
            DeprecationWarning,
            stacklevel=2,
        )
        return globals()[_RENAMED[name]]
    raise AttributeError(f"module 'et_ode.solvers' has no attribute {name!r}")
