"""Studies of Energy Transformer solutions (uses `et_ode` and `solvers`).

Each study returns plain data, numpy arrays and dicts with a `metadata` entry (flow,
solver, tolerances, dtype, versions, seeds, coordinates), and has a plot function that
returns a matplotlib `Figure` (Agg canvas; pass `path` to save it). `to_json` makes a
result JSON-serialisable and `save_json` writes it atomically.

| study | question |
|---|---|
| `convergence` | how fast does each flow reach a fixed point, against the Hessian's rate? |
| `energy_descent` | where does E rise along a discrete solve, and is it real? |
| `overshoot` | what happens to a masked-image model's error past its horizon? |
| `stability` | Riemannian Hessian spectrum, Morse index, Lyapunov exponent of a state |
| `fixed_points` | do different starts reach the same fixed point? |
| `gradient_depth` | do parameter gradients vanish with horizon, per adjoint? |
| `work_precision` | error against NFE and wall time per solver and tolerance |
| `contributions` | attention against Hopfield parts of the update over time |
"""

from ._contributions import contributions, plot_contributions
from ._convergence import (
    convergence, fit_exponential_rate, fit_power_law, plot_convergence, trace_quantities,
)
from ._energy_descent import energy_descent, energy_rises, plot_energy_descent
from ._fixed_points import fixed_points, matched_noise, plot_fixed_points, standard_starts
from ._gradient_depth import gradient_depth, plot_gradient_depth
from ._overshoot import overshoot, plot_overshoot
from ._records import metadata, save_json, to_json, versions
from ._stability import (
    hessian_eigenvalues, lyapunov_exponent, plot_stability, stability, tangent_basis,
)
from ._work_precision import plot_work_precision, relative_error, work_precision

__all__ = [
    "contributions", "convergence", "energy_descent", "energy_rises", "fit_exponential_rate",
    "fit_power_law", "fixed_points", "gradient_depth", "hessian_eigenvalues",
    "lyapunov_exponent", "matched_noise", "metadata", "overshoot", "plot_contributions",
    "plot_convergence", "plot_energy_descent", "plot_fixed_points", "plot_gradient_depth",
    "plot_overshoot", "plot_stability", "plot_work_precision", "relative_error",
    "save_json", "stability", "standard_starts", "tangent_basis", "to_json",
    "trace_quantities", "versions", "work_precision",
]
