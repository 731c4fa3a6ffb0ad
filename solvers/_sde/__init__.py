"""A solve at a temperature: the Langevin SDE's solvers, checks and terms (`._langevin`,
seen by the rest of `solvers` as `langevin`) and the Brownian paths that drive it
(`._brownian`)."""

from . import _langevin as langevin
from ._brownian import Brownian, StepPath
from ._langevin import DRIFT_EVALS, SDE_BASES, SDE_SOLVER_NAMES, SDE_SOLVERS, STRONG_ORDERS

__all__ = [
    "langevin",
    "Brownian",
    "StepPath",
    "DRIFT_EVALS",
    "SDE_BASES",
    "SDE_SOLVER_NAMES",
    "SDE_SOLVERS",
    "STRONG_ORDERS",
]
