"""Every plot, figure, video and layout check of the studies (`et_ode.analysis.figures`):
the only room that imports matplotlib. Each `plot_*` reads its study's result (a dict, or
its JSON) and returns a matplotlib `Figure` (Agg canvas; `path` saves it: `.png`, `.pdf`
or `.svg`, see `write_figure`), titled with what it shows and captioned with what
produced it; `layout_problems` lists a figure's overlapping or clipped text; the paper's
figures (`*_figure`) and the energy video (`energy_video_frames`, `write_video`).
"""

from ._energy_studies import (
    plot_contributions,
    plot_convergence,
    plot_energy_descent,
    plot_fixed_points,
    plot_stability,
)
from ._energy_video import energy_video_frames
from ._images import (
    attention_weights_figure,
    memories_figure,
    position_similarity_figure,
    reconstruction_figure,
    tokens_over_time_figure,
)
from ._landscape import (
    plot_basin_continuation,
    plot_basins,
    plot_continuation,
    plot_lyapunov_spectrum,
    plot_parameter_plane,
)
from ._long_horizon import plot_long_horizon
from ._plotting import (
    FIGURE_FORMATS,
    FLOW_COLOURS,
    SEPARATOR,
    TITLE_SIZE,
    caption,
    figure,
    finish,
    label_points,
    layout_problems,
    model_name,
    positive,
    renderer_of,
    samples_text,
    solver_text,
    tidy_log_axes,
    title,
    wrap,
    write_figure,
)
from ._task_studies import (
    plot_gradient_depth,
    plot_graph_overshoot,
    plot_image_basins,
    plot_image_escape,
    plot_overshoot,
    plot_temperature_sweep,
)
from ._video import figure_to_frame, write_frames, write_png, write_video
from ._work_precision import plot_work_precision

__all__ = [
    "attention_weights_figure",
    "caption",
    "energy_video_frames",
    "figure",
    "FIGURE_FORMATS",
    "figure_to_frame",
    "finish",
    "FLOW_COLOURS",
    "label_points",
    "layout_problems",
    "memories_figure",
    "model_name",
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
    "plot_temperature_sweep",
    "plot_image_escape",
    "plot_parameter_plane",
    "plot_stability",
    "plot_work_precision",
    "position_similarity_figure",
    "positive",
    "reconstruction_figure",
    "renderer_of",
    "samples_text",
    "SEPARATOR",
    "solver_text",
    "tidy_log_axes",
    "title",
    "TITLE_SIZE",
    "tokens_over_time_figure",
    "wrap",
    "write_figure",
    "write_frames",
    "write_png",
    "write_video",
]
