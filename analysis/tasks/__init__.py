"""The studies of the image and graph tasks (`et_ode.analysis.tasks`): a masked-image
model's error past its horizon (`overshoot`), a node anomaly detector's AUC past its
horizon (`graph_overshoot`), gradients against depth per adjoint (`gradient_depth`), the
attractors reached from a held-out image (`image_basins`, `image_basin_continuation`),
and the trajectory of an image completion (`image_trajectory` and its helpers). Each
study returns a typed result (`Overshoot`, `GraphOvershoot`, `GradientDepth`,
`ImageBasins`, `ImageBasinContinuation`: `._task_records`). How each solves is one
`solvers.SolveOptions` (`options`; for a task model by default its own,
`model.dynamics.options`, `GRADIENT_DEPTH_OPTIONS` for `gradient_depth`); what else a
study is asked to do, one settings object (`GradientDepthSettings`).
"""

from ._gradient_depth import GRADIENT_DEPTH_OPTIONS, GradientDepthSettings, gradient_depth
from ._graph_overshoot import graph_overshoot
from ._image_basin_continuation import image_basin_continuation
from ._image_basins import image_basins
from ._image_escape import ImageEscape, ImageEscapeSettings, image_escape
from ._image_trajectory import (
    completed_patches,
    frame_steps,
    frame_times,
    held_out_images,
    image_trajectory,
    normalised_patches,
    reference_time,
    still_frame,
    to_display,
)
from ._overshoot import overshoot
from ._task_records import (
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
)
from ._temperature import TemperatureSweep, temperature_sweep

__all__ = [
    "GRADIENT_DEPTH_OPTIONS",
    "AdjointGradients",
    "AdjointState",
    "GradientDepth",
    "GradientDepthSettings",
    "GraphOvershoot",
    "ImageAttractor",
    "ImageBasinContinuation",
    "ImageBasins",
    "ImagePlane",
    "ImageRandomStarts",
    "ImageTrack",
    "ImplicitGradient",
    "Overshoot",
    "TemperatureSweep",
    "ImageEscape",
    "ImageEscapeSettings",
    "completed_patches",
    "frame_steps",
    "frame_times",
    "gradient_depth",
    "graph_overshoot",
    "held_out_images",
    "image_basin_continuation",
    "image_basins",
    "image_trajectory",
    "normalised_patches",
    "overshoot",
    "reference_time",
    "still_frame",
    "temperature_sweep",
    "image_escape",
    "to_display",
]
