"""The studies of an energy system's fixed points and trajectories
(`et_ode.analysis.energy`): how fast each flow converges (`convergence`), whether E rises
along a discrete solve (`energy_descent`), is a fixed point a minimum (`stability`,
`lyapunov_exponent`), do starts reach the same fixed point (`fixed_points`), what happens
far past the horizon (`long_horizon`, `finite_time_lyapunov`), error against work per
solver (`work_precision`), the update's parts over time (`contributions`), how long a
noisy flow stays in a basin at a temperature (`escape_times`, Kramers' law), the measured
orders of the SDE solvers (`sde_orders`).

They take any `solvers.EnergySystem` and use the geometry it declares
(`analysis._geometry`); `contributions` needs the ET's parts. Built on the landscape
room; no figure is drawn here (the figures room draws them).

Each study returns a typed result (`Convergence`, `EnergyDescent`, `Stability`, ...: a
frozen dataclass whose fields say what each entry holds, also a read-only mapping of its
keys), written to JSON by `to_json()` with the keys its dict had and read back by
`from_json`.

How each solves is a `solvers.SolveOptions` (`options`, default a module constant:
`CONVERGENCE_OPTIONS`, `STABILITY_OPTIONS`, ...); what else it is asked to do, one
settings object per study (`settings`: `ConvergenceSettings`, `StabilitySettings`, ...).
"""

from ._contributions import contributions
from ._convergence import convergence
from ._convergence_records import (
    Contributions,
    Convergence,
    ConvergenceFlow,
    TokenGroups,
    quoted_decay,
)
from ._decay_laws import decay_curve
from ._energy_descent import energy_descent, energy_rises
from ._escape import ESCAPE_OPTIONS, EscapeSettings, EscapeTimes, escape_mle, escape_times
from ._fixed_points import fixed_points, matched_noise, standard_starts
from ._long_horizon import finite_time_lyapunov, long_horizon
from ._long_horizon_findings import long_horizon_findings
from ._long_horizon_records import FiniteTimeLyapunov, LongHorizon, LongHorizonFlow
from ._sde_orders import SdeOrder, SdeOrders, SdeOrderSettings, sde_orders
from ._settings import (
    CONTRIBUTIONS_OPTIONS,
    CONVERGENCE_OPTIONS,
    FINITE_TIME_LYAPUNOV_OPTIONS,
    FIXED_POINTS_OPTIONS,
    LONG_HORIZON_OPTIONS,
    LYAPUNOV_EXPONENT_OPTIONS,
    STABILITY_OPTIONS,
    ConvergenceSettings,
    FixedPointSettings,
    LongHorizonSettings,
    StabilitySettings,
    WorkPrecisionSettings,
)
from ._solver_run_records import (
    EnergyDescent,
    EnergyDescentRun,
    EnergyRises,
    WorkPrecision,
    WorkPrecisionRun,
)
from ._stability import lyapunov_exponent, stability
from ._stability_records import FixedPoints, LyapunovExponent, Stability, StabilityLyapunov
from ._work_precision import work_precision

__all__ = [
    "CONTRIBUTIONS_OPTIONS",
    "CONVERGENCE_OPTIONS",
    "FINITE_TIME_LYAPUNOV_OPTIONS",
    "FIXED_POINTS_OPTIONS",
    "LONG_HORIZON_OPTIONS",
    "LYAPUNOV_EXPONENT_OPTIONS",
    "STABILITY_OPTIONS",
    "Contributions",
    "Convergence",
    "ConvergenceSettings",
    "ConvergenceFlow",
    "EnergyDescent",
    "ESCAPE_OPTIONS",
    "EscapeSettings",
    "EscapeTimes",
    "escape_mle",
    "escape_times",
    "EnergyDescentRun",
    "EnergyRises",
    "FiniteTimeLyapunov",
    "FixedPointSettings",
    "FixedPoints",
    "LongHorizon",
    "LongHorizonFlow",
    "LongHorizonSettings",
    "LyapunovExponent",
    "Stability",
    "StabilityLyapunov",
    "StabilitySettings",
    "TokenGroups",
    "WorkPrecision",
    "WorkPrecisionRun",
    "WorkPrecisionSettings",
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
    "quoted_decay",
    "stability",
    "standard_starts",
    "work_precision",
    "sde_orders",
    "SdeOrders",
    "SdeOrder",
    "SdeOrderSettings",
]
