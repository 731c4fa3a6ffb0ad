"""Studies of Energy Transformer solutions (`et_ode.analysis`; builds on `et_ode.core`,
`et_ode.solvers` and `et_ode.tasks`), in four rooms by job, each a subpackage:

| room | what it holds |
|---|---|
| `landscape` | the generic tools for any field or energy system (no ET name imported) |
| `energy` | the studies of an energy system's fixed points and trajectories |
| `tasks` | the studies of the image and graph tasks |
| `figures` | every plot, figure, video and layout check (matplotlib imported there only) |

This namespace is flat (as diffrax's is): every public name of the rooms is here, and a
room is imported the first time one of its names is asked for (PEP 562), so that
`from et_ode.analysis import continuation` loads the landscape room alone. Shared by
all rooms: `cast`, `take`, `float64_available` and the records (`metadata`, `to_json`,
`save_json`, `model_dtype`).

Each study returns plain data, numpy arrays and dicts with a `metadata` entry (flow,
solver, tolerances, dtype, versions, seeds, coordinates), and has a plot function in
`figures` that returns a matplotlib `Figure`, titled with what it shows and captioned
with what produced it.

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

import importlib
from typing import TYPE_CHECKING, Any

from ._common import cast, float64_available, take
from ._records import metadata, model_dtype, save_json, to_json
from ._results import Result

# The rooms, lowest first: each imports only those before it.
ROOMS = ("landscape", "energy", "tasks", "figures")

# Each public name of a room -> the room that holds it (the order of `__all__`, which the
# API page follows: by room, the studies first, then their results).
ROOM_OF = {
    "continuation": "landscape",
    "switch_branch": "landscape",
    "fold_continuation": "landscape",
    "steady_states": "landscape",
    "basins": "landscape",
    "basin_entropy": "landscape",
    "grid_starts": "landscape",
    "basin_continuation": "landscape",
    "lyapunov_spectrum": "landscape",
    "hessian_eigenvalues": "landscape",
    "Branch": "landscape",
    "Bifurcation": "landscape",
    "Fold": "landscape",
    "BranchPoint": "landscape",
    "HopfPoint": "landscape",
    "FoldCurve": "landscape",
    "Cusp": "landscape",
    "SteadyStates": "landscape",
    "Basins": "landscape",
    "Attractor": "landscape",
    "BasinEntropy": "landscape",
    "BasinContinuation": "landscape",
    "Track": "landscape",
    "TrackSummary": "landscape",
    "LyapunovSpectrum": "landscape",
    "HessianSpectrum": "landscape",
    "convergence": "energy",
    "energy_descent": "energy",
    "energy_rises": "energy",
    "stability": "energy",
    "lyapunov_exponent": "energy",
    "fixed_points": "energy",
    "matched_noise": "energy",
    "standard_starts": "energy",
    "long_horizon": "energy",
    "long_horizon_findings": "energy",
    "finite_time_lyapunov": "energy",
    "work_precision": "energy",
    "contributions": "energy",
    "Convergence": "energy",
    "ConvergenceFlow": "energy",
    "EnergyDescent": "energy",
    "EnergyDescentRun": "energy",
    "EnergyRises": "energy",
    "Stability": "energy",
    "StabilityLyapunov": "energy",
    "LyapunovExponent": "energy",
    "FixedPoints": "energy",
    "LongHorizon": "energy",
    "LongHorizonFlow": "energy",
    "FiniteTimeLyapunov": "energy",
    "WorkPrecision": "energy",
    "WorkPrecisionRun": "energy",
    "Contributions": "energy",
    "TokenGroups": "energy",
    "overshoot": "tasks",
    "graph_overshoot": "tasks",
    "gradient_depth": "tasks",
    "image_basins": "tasks",
    "image_basin_continuation": "tasks",
    "held_out_images": "tasks",
    "normalised_patches": "tasks",
    "reference_time": "tasks",
    "trajectory_options": "tasks",
    "frame_times": "tasks",
    "Overshoot": "tasks",
    "GraphOvershoot": "tasks",
    "GradientDepth": "tasks",
    "AdjointGradients": "tasks",
    "AdjointState": "tasks",
    "ImplicitGradient": "tasks",
    "ImageBasins": "tasks",
    "ImageAttractor": "tasks",
    "ImagePlane": "tasks",
    "ImageRandomStarts": "tasks",
    "ImageBasinContinuation": "tasks",
    "ImageTrack": "tasks",
    "plot_continuation": "figures",
    "plot_parameter_plane": "figures",
    "plot_basins": "figures",
    "plot_basin_continuation": "figures",
    "plot_lyapunov_spectrum": "figures",
    "plot_convergence": "figures",
    "plot_energy_descent": "figures",
    "plot_stability": "figures",
    "plot_fixed_points": "figures",
    "plot_long_horizon": "figures",
    "plot_work_precision": "figures",
    "plot_contributions": "figures",
    "plot_overshoot": "figures",
    "plot_graph_overshoot": "figures",
    "plot_gradient_depth": "figures",
    "plot_image_basins": "figures",
    "reconstruction_figure": "figures",
    "tokens_over_time_figure": "figures",
    "memories_figure": "figures",
    "attention_weights_figure": "figures",
    "position_similarity_figure": "figures",
    "energy_video_frames": "figures",
    "figure_to_frame": "figures",
    "write_frames": "figures",
    "write_png": "figures",
    "write_video": "figures",
    "write_figure": "figures",
    "FIGURE_FORMATS": "figures",
    "layout_problems": "figures",
}


def __getattr__(name: str) -> Any:
    if name in ROOMS:  # `analysis.landscape` without importing it first
        return importlib.import_module(f"{__name__}.{name}")
    room = ROOM_OF.get(name)
    if room is None:
        raise AttributeError(f"module 'et_ode.analysis' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{room}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(ROOM_OF) | set(ROOMS))


if TYPE_CHECKING:
    from .energy import (
        Contributions,
        Convergence,
        ConvergenceFlow,
        EnergyDescent,
        EnergyDescentRun,
        EnergyRises,
        FiniteTimeLyapunov,
        FixedPoints,
        LongHorizon,
        LongHorizonFlow,
        LyapunovExponent,
        Stability,
        StabilityLyapunov,
        TokenGroups,
        WorkPrecision,
        WorkPrecisionRun,
        contributions,
        convergence,
        energy_descent,
        energy_rises,
        finite_time_lyapunov,
        fixed_points,
        long_horizon,
        long_horizon_findings,
        lyapunov_exponent,
        matched_noise,
        stability,
        standard_starts,
        work_precision,
    )
    from .figures import (
        FIGURE_FORMATS,
        attention_weights_figure,
        energy_video_frames,
        figure_to_frame,
        layout_problems,
        memories_figure,
        plot_basin_continuation,
        plot_basins,
        plot_continuation,
        plot_contributions,
        plot_convergence,
        plot_energy_descent,
        plot_fixed_points,
        plot_gradient_depth,
        plot_graph_overshoot,
        plot_image_basins,
        plot_long_horizon,
        plot_lyapunov_spectrum,
        plot_overshoot,
        plot_parameter_plane,
        plot_stability,
        plot_work_precision,
        position_similarity_figure,
        reconstruction_figure,
        tokens_over_time_figure,
        write_figure,
        write_frames,
        write_png,
        write_video,
    )
    from .landscape import (
        Attractor,
        BasinContinuation,
        BasinEntropy,
        Basins,
        Bifurcation,
        Branch,
        BranchPoint,
        Cusp,
        Fold,
        FoldCurve,
        HessianSpectrum,
        HopfPoint,
        LyapunovSpectrum,
        SteadyStates,
        Track,
        TrackSummary,
        basin_continuation,
        basin_entropy,
        basins,
        continuation,
        fold_continuation,
        grid_starts,
        hessian_eigenvalues,
        lyapunov_spectrum,
        steady_states,
        switch_branch,
    )
    from .tasks import (
        AdjointGradients,
        AdjointState,
        GradientDepth,
        GraphOvershoot,
        ImageAttractor,
        ImageBasinContinuation,
        ImageBasins,
        ImagePlane,
        ImageRandomStarts,
        ImageTrack,
        ImplicitGradient,
        Overshoot,
        frame_times,
        gradient_depth,
        graph_overshoot,
        held_out_images,
        image_basin_continuation,
        image_basins,
        normalised_patches,
        overshoot,
        reference_time,
        trajectory_options,
    )

__all__ = [
    "continuation",
    "switch_branch",
    "fold_continuation",
    "steady_states",
    "basins",
    "basin_entropy",
    "grid_starts",
    "basin_continuation",
    "lyapunov_spectrum",
    "hessian_eigenvalues",
    "Branch",
    "Bifurcation",
    "Fold",
    "BranchPoint",
    "HopfPoint",
    "FoldCurve",
    "Cusp",
    "SteadyStates",
    "Basins",
    "Attractor",
    "BasinEntropy",
    "BasinContinuation",
    "Track",
    "TrackSummary",
    "LyapunovSpectrum",
    "HessianSpectrum",
    "convergence",
    "energy_descent",
    "energy_rises",
    "stability",
    "lyapunov_exponent",
    "fixed_points",
    "matched_noise",
    "standard_starts",
    "long_horizon",
    "long_horizon_findings",
    "finite_time_lyapunov",
    "work_precision",
    "contributions",
    "Convergence",
    "ConvergenceFlow",
    "EnergyDescent",
    "EnergyDescentRun",
    "EnergyRises",
    "Stability",
    "StabilityLyapunov",
    "LyapunovExponent",
    "FixedPoints",
    "LongHorizon",
    "LongHorizonFlow",
    "FiniteTimeLyapunov",
    "WorkPrecision",
    "WorkPrecisionRun",
    "Contributions",
    "TokenGroups",
    "overshoot",
    "graph_overshoot",
    "gradient_depth",
    "image_basins",
    "image_basin_continuation",
    "held_out_images",
    "normalised_patches",
    "reference_time",
    "trajectory_options",
    "frame_times",
    "Overshoot",
    "GraphOvershoot",
    "GradientDepth",
    "AdjointGradients",
    "AdjointState",
    "ImplicitGradient",
    "ImageBasins",
    "ImageAttractor",
    "ImagePlane",
    "ImageRandomStarts",
    "ImageBasinContinuation",
    "ImageTrack",
    "plot_continuation",
    "plot_parameter_plane",
    "plot_basins",
    "plot_basin_continuation",
    "plot_lyapunov_spectrum",
    "plot_convergence",
    "plot_energy_descent",
    "plot_stability",
    "plot_fixed_points",
    "plot_long_horizon",
    "plot_work_precision",
    "plot_contributions",
    "plot_overshoot",
    "plot_graph_overshoot",
    "plot_gradient_depth",
    "plot_image_basins",
    "reconstruction_figure",
    "tokens_over_time_figure",
    "memories_figure",
    "attention_weights_figure",
    "position_similarity_figure",
    "energy_video_frames",
    "figure_to_frame",
    "write_frames",
    "write_png",
    "write_video",
    "write_figure",
    "FIGURE_FORMATS",
    "layout_problems",
    "Result",
    "cast",
    "take",
    "float64_available",
    "metadata",
    "model_dtype",
    "save_json",
    "to_json",
]
