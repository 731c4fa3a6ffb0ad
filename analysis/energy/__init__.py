"""The studies of an energy system's fixed points and trajectories
(`et_ode.analysis.energy`): how fast each flow converges (`convergence`), whether E rises
along a discrete solve (`energy_descent`), is a fixed point a minimum (`stability`,
`lyapunov_exponent`), do starts reach the same fixed point (`fixed_points`), what happens
far past the horizon (`long_horizon`, `finite_time_lyapunov`), error against work per
solver (`work_precision`), the update's parts over time (`contributions`).

They take any `solvers.EnergySystem` and use the geometry it declares
(`analysis._geometry`); `contributions` needs the ET's parts. Built on the landscape
room; no figure is drawn here (the figures room draws them).
"""

from ._contributions import contributions
from ._convergence import convergence
from ._decay_laws import decay_curve
from ._energy_descent import energy_descent, energy_rises
from ._fixed_points import fixed_points, matched_noise, standard_starts
from ._long_horizon import finite_time_lyapunov, long_horizon
from ._long_horizon_findings import long_horizon_findings
from ._stability import lyapunov_exponent, stability
from ._work_precision import work_precision

__all__ = [
    "contributions",
    "convergence",
    "decay_curve",
    "energy_descent",
    "energy_rises",
    "finite_time_lyapunov",
    "fixed_points",
    "long_horizon",
    "long_horizon_findings",
    "lyapunov_exponent",
    "matched_noise",
    "stability",
    "standard_starts",
    "work_precision",
]
