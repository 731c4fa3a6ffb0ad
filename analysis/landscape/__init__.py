"""The generic tools for any field or energy system (`et_ode.analysis.landscape`): steady
states followed in a parameter (`continuation`, `switch_branch`), folds in two parameters
and their cusps (`fold_continuation`), every steady state at one parameter
(`steady_states`, deflated Newton), the minimum energy path between two minima and its
saddle (`minimum_energy_path`, the string method), basins of attraction and their continuation in a
parameter (`basins`, `basin_continuation`), Lyapunov spectra (`lyapunov_spectrum`), the
tangent Hessian's spectrum (`hessian_eigenvalues`) and the verdict on it.

Imports `et_ode.solvers` and nothing of the Energy Transformer: an energy model's
parameters are its own `lenses` (`EnergyTransformer.lenses` names `"beta"`, `"beta_0"`, ...,
`"memory_scale"`, `"field_strength"`), looked up by name. No `et_ode.tasks`, optax, tqdm
or matplotlib is loaded with it (tests/test_layout.py).

How a trajectory is solved is a `solvers.SolveOptions` (`options=`, defaults
`BASIN_OPTIONS`, `LYAPUNOV_OPTIONS`); each tool's other knobs are one settings object
(`ContinuationSettings`, `SteadyStateSettings`, `BasinSettings`,
`BasinContinuationSettings`, `LyapunovSpectrumSettings`; Newton's are a `NewtonSettings`
inside them).
"""

from ._basin_continuation import basin_continuation
from ._basin_records import (
    Attractor,
    BasinContinuation,
    BasinContinuationSettings,
    BasinEntropy,
    Basins,
    BasinSettings,
    Track,
    TrackSummary,
)
from ._basins import BASIN_OPTIONS, basin_entropy, basins, grid_starts
from ._branch_records import (
    Bifurcation,
    Branch,
    BranchPoint,
    ContinuationSettings,
    Cusp,
    Fold,
    FoldCurve,
    HopfPoint,
)
from ._continuation import Parameter, continuation, switch_branch
from ._critical_points import (
    PATH_OPTIONS,
    MinimumEnergyPath,
    PathSettings,
    minimum_energy_path,
    polish_near,
)
from ._energy_field import flow_eigenvalues
from ._fold_curve import fold_continuation
from ._hessian import (
    Coordinates,
    HessianSpectrum,
    Method,
    hessian_eigenvalues,
    smallest_eigenvalue_magnitude,
)
from ._lyapunov_records import LYAPUNOV_OPTIONS, LyapunovSpectrum, LyapunovSpectrumSettings
from ._lyapunov_spectrum import lyapunov_spectrum
from ._steady_states import SteadyStates, SteadyStateSettings, steady_states
from ._verdict import GRADIENT_ASYMMETRY, linear_rate_range, linearly_stable, verdict

__all__ = [
    "Attractor",
    "BasinContinuation",
    "BasinEntropy",
    "Basins",
    "HessianSpectrum",
    "LyapunovSpectrum",
    "SteadyStates",
    "MinimumEnergyPath",
    "PathSettings",
    "PATH_OPTIONS",
    "Track",
    "TrackSummary",
    "Cusp",
    "FoldCurve",
    "Bifurcation",
    "Branch",
    "BranchPoint",
    "Fold",
    "HopfPoint",
    "ContinuationSettings",
    "SteadyStateSettings",
    "BasinSettings",
    "BasinContinuationSettings",
    "LyapunovSpectrumSettings",
    "BASIN_OPTIONS",
    "LYAPUNOV_OPTIONS",
    "basin_continuation",
    "basin_entropy",
    "basins",
    "continuation",
    "Coordinates",
    "flow_eigenvalues",
    "fold_continuation",
    "GRADIENT_ASYMMETRY",
    "grid_starts",
    "hessian_eigenvalues",
    "linear_rate_range",
    "linearly_stable",
    "lyapunov_spectrum",
    "Method",
    "Parameter",
    "polish_near",
    "smallest_eigenvalue_magnitude",
    "steady_states",
    "minimum_energy_path",
    "switch_branch",
    "verdict",
]
