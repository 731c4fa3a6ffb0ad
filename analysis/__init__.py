"""Studies of Energy Transformer solutions (`et_ode.analysis`; builds on `et_ode.core`,
`et_ode.solvers` and `et_ode.tasks`).

Each study returns plain data, numpy arrays and dicts with a `metadata` entry (flow,
solver, tolerances, dtype, versions, seeds, coordinates), and has a plot function that
returns a matplotlib `Figure` (Agg canvas; pass `path` to save it: `.png`, `.pdf` or
`.svg`, see `write_figure`), titled with what it shows and captioned with what produced
it (model, sample count, horizon, dtype, solver and tolerances, from the metadata);
`layout_problems` lists a figure's overlapping or clipped text. `to_json` makes a
result JSON-serialisable and `save_json` writes it atomically.

The studies of a fixed point or a trajectory (`convergence`, `stability`,
`hessian_eigenvalues`, `lyapunov_exponent`, `fixed_points`, `long_horizon`,
`finite_time_lyapunov`, `energy_descent`, `work_precision`, and `lyapunov_spectrum`,
which takes a plain field too) take any `solvers.EnergySystem` and use the geometry it
declares (a manifold, or flat); the others need the ET or its image and graph tasks and
refuse other models in one line before solving. What each study may call on a model is in
the geometry module (`et_ode.analysis._geometry`).

| study | question |
|---|---|
| `convergence` | how fast does each flow reach a fixed point, against the Hessian's rate? |
| `energy_descent` | where does E rise along a discrete solve, and is it real? |
| `overshoot` | what happens to a masked-image model's error past its horizon? |
| `stability` | is this fixed point a minimum? Newton polish, Hessian, kinks, Lyapunov, verdict |
| `fixed_points` | do different starts reach the same fixed point? |
| `gradient_depth` | do parameter gradients vanish with horizon, per adjoint? |
| `work_precision` | error against NFE and wall time per solver and tolerance |
| `contributions` | attention against Hopfield parts of the update over time |
| `graph_overshoot` | what happens to a node anomaly detector's test AUC past its horizon? |
| `long_horizon` | E, G and its decay law, scales, error, steps, perturbations to t = 1e4 |
| `lyapunov_spectrum` | the top k Lyapunov exponents (QR) of any flow, with their history |
| `continuation` | how does a steady state move with a parameter; where does it fold or branch? |
| `switch_branch` | follow the other branch from a branch point found by `continuation` |
| `fold_continuation` | a fold followed in a second parameter; its cusps |
| `basins` | which attractor does each start reach; how many, how large, how mixed? |
| `basin_continuation` | how do the attractors and their basins change with a parameter? |
| `steady_states` | which steady states exist at one parameter (deflated Newton)? |
"""

from ._basin_continuation import basin_continuation
from ._basins import basin_entropy, basins, grid_starts
from ._common import cast, float64_available, take
from ._continuation import continuation, switch_branch
from ._contributions import contributions, plot_contributions
from ._convergence import (
    convergence,
    plot_convergence,
)
from ._deflation import steady_states
from ._energy_descent import energy_descent, energy_rises, plot_energy_descent
from ._fixed_points import fixed_points, matched_noise, plot_fixed_points, standard_starts
from ._fold_curve import fold_continuation
from ._gradient_depth import gradient_depth, plot_gradient_depth
from ._graph_overshoot import graph_overshoot, plot_graph_overshoot
from ._image_basin_continuation import image_basin_continuation
from ._image_basins import image_basins, plot_image_basins
from ._image_figures import (
    attention_weights_figure,
    energy_video_frames,
    memories_figure,
    position_similarity_figure,
    reconstruction_figure,
    tokens_over_time_figure,
)
from ._image_trajectory import (
    frame_times,
    held_out_images,
    normalised_patches,
    reference_time,
    trajectory_options,
)
from ._landscape_figures import (
    plot_basin_continuation,
    plot_basins,
    plot_continuation,
    plot_lyapunov_spectrum,
    plot_parameter_plane,
)
from ._long_horizon import finite_time_lyapunov, long_horizon
from ._long_horizon_report import long_horizon_findings, plot_long_horizon
from ._lyapunov_spectrum import lyapunov_spectrum
from ._overshoot import overshoot, plot_overshoot
from ._plotting import FIGURE_FORMATS, layout_problems, write_figure
from ._records import metadata, model_dtype, save_json, to_json
from ._stability import (
    hessian_eigenvalues,
    lyapunov_exponent,
    plot_stability,
    stability,
)
from ._video import figure_to_frame, write_frames, write_png, write_video
from ._work_precision import plot_work_precision, work_precision

__all__ = [
    "attention_weights_figure",
    "basin_continuation",
    "basin_entropy",
    "basins",
    "cast",
    "continuation",
    "contributions",
    "convergence",
    "energy_descent",
    "energy_rises",
    "energy_video_frames",
    "FIGURE_FORMATS",
    "figure_to_frame",
    "finite_time_lyapunov",
    "fixed_points",
    "fold_continuation",
    "float64_available",
    "frame_times",
    "gradient_depth",
    "graph_overshoot",
    "grid_starts",
    "held_out_images",
    "hessian_eigenvalues",
    "image_basin_continuation",
    "image_basins",
    "layout_problems",
    "long_horizon",
    "long_horizon_findings",
    "lyapunov_exponent",
    "lyapunov_spectrum",
    "matched_noise",
    "memories_figure",
    "metadata",
    "model_dtype",
    "normalised_patches",
    "overshoot",
    "plot_basin_continuation",
    "plot_basins",
    "plot_continuation",
    "plot_contributions",
    "plot_convergence",
    "plot_energy_descent",
    "plot_fixed_points",
    "plot_gradient_depth",
    "plot_graph_overshoot",
    "plot_image_basins",
    "plot_long_horizon",
    "plot_lyapunov_spectrum",
    "plot_overshoot",
    "plot_parameter_plane",
    "plot_stability",
    "plot_work_precision",
    "position_similarity_figure",
    "reconstruction_figure",
    "reference_time",
    "save_json",
    "stability",
    "standard_starts",
    "steady_states",
    "switch_branch",
    "take",
    "to_json",
    "tokens_over_time_figure",
    "trajectory_options",
    "work_precision",
    "write_figure",
    "write_frames",
    "write_png",
    "write_video",
]
