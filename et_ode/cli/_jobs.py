"""The jobs behind `et-ode frames`, `et-ode compare-solvers` and `et-ode study NAME`: each
runs on a trained `MaskedImageET` and held-out images, writes its files into a folder,
and returns what it computed; what the first two are asked is one frozen settings object
each (`EnergyVideoSettings`, `CompareSolversSettings`; the studies' is `StudySettings`).
Their inputs come from `et_ode.cli._runs` (`held_out`, `output_folder` /
`fresh_run_folder`, `job_metadata`) and `et_ode.tasks.load_model_and_config`; `et-ode
demo` is `et_ode.cli.demo_job`.

Every JSON file is written by `save_json` with a `metadata` entry (model, data, flow,
solver, tolerances, dtype, seeds, versions); states (`x_final`, `x_star`, ...) are left
out of the files to keep them small.
"""

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict, cast

import jax.numpy as jnp
import numpy as np

from et_ode import solvers as _solvers

from ..analysis import (
    FIGURE_FORMATS,
    WorkPrecisionSettings,
    energy_video_frames,
    figure_to_frame,
    frame_times,
    metadata,
    model_dtype,
    plot_work_precision,
    reference_time,
    save_json,
    work_precision,
    write_figure,
    write_frames,
    write_png,
    write_video,
)
from ..vocab import Flow
from ._findings import finding
from ._landscape_runners import LANDSCAPE_RUNNERS
from ._runs import (
    encoded,
    place,
)
from ._study_commands import COMMANDS, refuse_unread
from ._study_runners import RUNNERS as STUDY_RUNNERS
from ._study_runners import StudySettings

RUNNERS = {**STUDY_RUNNERS, **LANDSCAPE_RUNNERS}

STATE_KEYS = ("x_final", "x_end", "x_star", "g_star", "states", "last_grad")


def write_result(
    out, stem: str, result: Mapping[str, Any], plot=None, figure_format: str = "png"
) -> dict:
    """`out/stem.json` (the result without its states, compact) and, with `plot`,
    `out/stem.<figure_format>` (`plot(result)`, a `Figure`, as png, pdf or svg). Returns
    the paths, the figure's under the key `figure_format`."""
    paths = {}
    if plot is not None:
        paths[figure_format] = write_figure(figure_path(out, stem, figure_format), plot(result))
    paths["json"] = Path(
        save_json(Path(out) / f"{stem}.json", _without_states(result), indent=None)
    )
    return paths


def figure_path(out, stem: str, figure_format: str) -> Path:
    """`out/<stem>.<figure_format>`, refusing a format that `write_figure` cannot write."""
    if figure_format not in FIGURE_FORMATS:
        raise ValueError(
            f"unknown figure format {figure_format!r}; choose one of {', '.join(FIGURE_FORMATS)}."
        )
    return Path(out) / f"{stem}.{figure_format}"


def _without_states(value):
    if isinstance(value, Mapping):  # dicts and typed results (their nested records too)
        return {k: _without_states(v) for k, v in value.items() if k not in STATE_KEYS}
    if isinstance(value, list):
        return [_without_states(v) for v in value]
    return value


def _with_metadata(result: dict, meta: dict | None) -> dict:
    """The study's own metadata completed by the job's: the study's entries win, except
    the job's `checkpoint`, `model`, `data` and `options` (a study's own entry of that
    name is kept as `study_<name>`); seeds are merged."""
    if meta:
        own = result.get("metadata", {})
        merged = {**meta, **own, "seeds": {**meta.get("seeds", {}), **own.get("seeds", {})}}
        for key in ("checkpoint", "model", "data", "options"):
            if key in meta and key in own:
                merged[f"study_{key}"] = own[key]
            if key in meta:
                merged[key] = meta[key]
        result["metadata"] = merged
    return result


# ------------------------------------------------------------------ energy video


@dataclasses.dataclass(frozen=True)
class EnergyVideoSettings:
    """What `energy_video_job` renders (the command line's `--frames`, `--horizon`,
    `--fps`, `--temperature`):

    - `frames`: frame times, equally spaced from 0 to `horizon`.
    - `horizon`: the last time in tau (None: 4 x the time the model was trained to
      reach, `analysis.reference_time`).
    - `fps`: the video's frames per second.
    - `frames_folder`: the frames' folder in the output folder (None: `<stem>_frames`).
    - `temperature`: the dynamics at this temperature (Langevin noise; 0: none), its
      noise from `seed`.
    """

    frames: int = 49
    horizon: float | None = None
    fps: float = 12.0
    frames_folder: str | None = None
    temperature: float = 0.0
    seed: int = 0


def energy_video_job(
    model,
    images,
    masks,
    out,
    *,
    settings: EnergyVideoSettings = EnergyVideoSettings(),
    options: _solvers.SolveOptions | None = None,
    meta: dict | None = None,
    indices=None,
    stem: str = "energy_video",
    figure_format: str = "png",
) -> dict:
    """The energy-trajectory video (paper figure 8): `settings.frames` times from 0 to
    `settings.horizon` (an `EnergyVideoSettings`; default 4 x the time the model was
    trained to reach, `reference_time`), one solve.

    Writes `out/<frames_folder>/frame_0000.png`, ... (default folder `<stem>_frames`),
    `out/<stem>.mp4` (a `.gif` if ffmpeg fails), `out/<stem>.<figure_format>` (the
    still: the frame nearest the reference time, with a line saying which frame it is,
    and that it is the last one when the reference lies beyond the horizon; png at the
    frames' size, or pdf or svg) and `out/<stem>.json` (`{"metadata", "data"}`: times,
    energies, MSE(t), the solve options and statistics; `meta`: its metadata, default
    `analysis.metadata` of the study; `indices`: the images' held-out indices, recorded
    in `data`). `options`: how to solve, a `solvers.SolveOptions` (None: the model's
    own, `model.dynamics.options`; the command line's `--solver`, `--dt0`, ... on it:
    `command_line_options`), its cap raised to reach the horizon
    (`SolveOptions.covering`).

    **Returns:** a dict: `frames` (paths), `video`, `still` (the still's path; also under
    its earlier key `png` when it is a PNG), `json`, `data`, `metadata`.
    """
    still_path = figure_path(out, stem, figure_format)  # refuse a bad format before solving
    reference = reference_time(model, images, masks)
    horizon = settings.horizon or 4 * reference[0]
    times = frame_times(horizon, settings.frames)
    name = (meta or {}).get("checkpoint")
    pictures, data, figure = energy_video_frames(
        model,
        images,
        masks,
        times,
        reference=reference,
        still=True,
        name=Path(name).name if name else None,
        options=options,
        temperature=settings.temperature,
        seed=settings.seed,
    )
    out = Path(out)
    frame_paths = write_frames(pictures, out / (settings.frames_folder or f"{stem}_frames"))
    video = write_video(pictures, out / f"{stem}.mp4", fps=settings.fps)
    if figure_format == "png":  # the still's pixels: the frames' size
        still = write_png(still_path, figure_to_frame(figure))
    else:  # vector graphics
        still = write_figure(still_path, figure)
    data |= {
        "video": video.name,
        "still": still.name,
        "frames": len(pictures),
        "frame_size": list(pictures[0].shape),
    }
    if indices is not None:
        data["image_indices"] = np.asarray(indices)
    meta = dict(meta or metadata(study="energy_video", dtype=model_dtype(model.core)))
    meta |= {"solve": data.pop("options"), "stats": data.pop("stats")}
    js = Path(save_json(out / f"{stem}.json", {"metadata": meta, "data": data}, indent=None))
    result = {
        "frames": frame_paths,
        "video": video,
        "still": still,
        "json": js,
        "data": data,
        "metadata": meta,
    }
    if figure_format == "png":
        result["png"] = still  # the still's earlier name, kept for existing callers
    return result


# --------------------------------------------------------------- solver comparison


class SolverGrid(TypedDict):
    """What `compare_solvers_job` compares: adaptive `solvers` x `tolerances` and
    constant-step `fixed_solvers` x `step_sizes`."""

    solvers: tuple[str, ...]
    tolerances: tuple[float, ...]
    fixed_solvers: tuple[str, ...]
    step_sizes: tuple[float, ...]


# Quick: one adaptive solver against the paper's Euler map (always computed), loose reference.
QUICK_GRID = SolverGrid(
    solvers=("tsit5",), tolerances=(1e-3, 1e-5), fixed_solvers=(), step_sizes=(0.1, 0.05)
)
DEFAULT_GRID = SolverGrid(
    solvers=("bosh3", "tsit5"),
    tolerances=(1e-3, 1e-4, 1e-5, 1e-6),
    fixed_solvers=("euler", "heun"),
    step_sizes=(0.2, 0.1, 0.05, 0.025),
)


@dataclasses.dataclass(frozen=True)
class CompareSolversSettings:
    """What `compare_solvers_job` compares, and how (the command line's options of
    `et-ode compare-solvers`; None: the default named):

    - `flow`: the flow (None: the model's).
    - `t1`: the end time in tau (None: the model's trained time, `reference_time`).
    - `solvers`, `tolerances`: adaptive solvers, each at every tolerance (`rtol`;
      `atol = rtol / 100`), and `fixed_solvers`, `step_sizes`: constant-step solvers,
      each at every step size (None: those of `DEFAULT_GRID`, or of `QUICK_GRID` when
      `quick`).
    - `repeats`: timed calls of each solve after a warm-up (the median is reported).
    - `dtype`: the core's dtype (None: its own).
    - `quick`: the small grid and a loose reference, for a first look.
    - `reference_rtol`: the float64 dopri8 reference's `rtol` (None: 1e-8 for a float32
      core, whose errors stop near 1e-6 anyway, 1e-10 for float64, 1e-6 when `quick`;
      ReLU memories make tighter ones cost thousands of steps).
    """

    flow: str | None = None
    t1: float | None = None
    solvers: Sequence[str] | None = None
    tolerances: Sequence[float] | None = None
    fixed_solvers: Sequence[str] | None = None
    step_sizes: Sequence[float] | None = None
    repeats: int = 1
    dtype: str | None = None
    quick: bool = False
    reference_rtol: float | None = None


def compare_solvers_job(
    model,
    images,
    masks,
    out,
    *,
    settings: CompareSolversSettings = CompareSolversSettings(),
    meta: dict | None = None,
    stem: str = "compare-solvers",
    figure_format: str = "png",
) -> dict:
    """Work against precision (`analysis.work_precision`) of the model's core from the
    encoded masked `images`: what `settings` (a `CompareSolversSettings`) names,
    adaptive `solvers` x `tolerances` and constant-step `fixed_solvers` x `step_sizes`
    (defaults `DEFAULT_GRID`, or `QUICK_GRID`), each compared with a float64 reference
    and with the paper's Euler map at `t1` (default the model's trained time,
    `reference_time`) on `flow` (default the model's), the core in `dtype` (default its
    own). Writes `out/<stem>.json` (with `meta`, the job's metadata, merged into the
    study's) and the figure, `out/<stem>.<figure_format>` (png, pdf or svg).

    **Returns:** the `work_precision` result, with `finding` (first) and `files`.
    """
    figure_path(out, stem, figure_format)  # a bad format refused before any solve
    s, quick = settings, settings.quick
    default = QUICK_GRID if quick else DEFAULT_GRID
    grid = SolverGrid(
        solvers=default["solvers"] if s.solvers is None else tuple(s.solvers),
        tolerances=default["tolerances"] if s.tolerances is None else tuple(s.tolerances),
        fixed_solvers=(
            default["fixed_solvers"] if s.fixed_solvers is None else tuple(s.fixed_solvers)
        ),
        step_sizes=default["step_sizes"] if s.step_sizes is None else tuple(s.step_sizes),
    )
    if not (grid["solvers"] and grid["tolerances"]) and not (
        grid["fixed_solvers"] and grid["step_sizes"]
    ):
        raise ValueError(
            "nothing to compare: give --solvers with --tolerances, or "
            "--fixed-solvers with --step-sizes."
        )
    t1 = s.t1 or reference_time(model, images, masks)[0]
    core, x0, args = encoded(model, images, masks, s.dtype)
    x0, args = place(x0, args)
    reference_rtol = s.reference_rtol or (
        1e-6 if quick else 1e-10 if x0.dtype == jnp.float64 else 1e-8
    )
    typed = work_precision(
        core,
        x0,
        args,
        t1=float(t1),
        flow=cast(Flow, s.flow or model.dynamics.flow),
        settings=WorkPrecisionSettings(
            reference_rtol=reference_rtol, repeats=s.repeats, args_batched=True
        ),
        **grid,
    )
    result = _with_metadata(dict(typed), meta)  # the typed result's keys, in a new dict
    result["metadata"]["images"] = len(images)
    result = {"finding": finding("work-precision", result), **result}
    result["files"] = write_result(out, stem, result, plot_work_precision, figure_format)
    return result


# ------------------------------------------------------------------------ studies


STUDIES = tuple(COMMANDS)  # the runners' and work-precision, in the help's order


def refuse_unused(name: str, s: StudySettings) -> None:
    """Refuse a setting the study `name` does not read (it would be silently ignored),
    in one line naming the option and why (`StudyCommand.refusal`)."""
    refuse_unread(name, dataclasses.asdict(s))


def study_job(
    name: str,
    model,
    images,
    masks,
    out,
    *,
    meta: dict | None = None,
    stem: str | None = None,
    figure_format: str = "png",
    **settings,
) -> dict:
    """Run the study `name` (one of `STUDIES`) on a `MaskedImageET` and held-out `images`
    (`[B, S, S, C]` in [0, 1]) with `masks`, and write `out/<stem>.json` (default stem:
    `name`) and `out/<stem>.<figure_format>` (the study's plot: png, pdf or svg).

    `settings` (see `StudySettings`; `None`: the study's default): `flow`, `horizon`
    (the end time: `t1` of convergence, energy-descent and work-precision, the
    Lyapunov time of stability, the cap of fixed-points, the longest horizon of
    gradient-depth, the last time of contributions, `t_max` of overshoot, the averaging
    time of lyapunov-spectrum), `factor`
    (overshoot: the end as a multiple of the training horizon), `solver`, `dt0`, `rtol`,
    `atol`, `dtype` (studies of the core run in float64 by default, the model's weights
    cast; overshoot, gradient-depth, contributions and work-precision in the model's
    own dtype), `quick` (small grids and horizons, for a first look and for tests),
    `seed`, for `continuation` and `basin-continuation` `parameter` (`"memory_scale"`,
    `"field_strength"` or `"beta"`) and `p_span` (`(low, high)` around the trained
    value), and for
    `lyapunov-spectrum` `measure` (`"g"`, the default, `"metric"` or `"x"`: see
    `analysis.lyapunov_spectrum`). A setting the study does not read is refused, and so
    is a number of images it does not use (`StudyCommand.images`: stability, say, uses
    one); `et-ode study NAME --help` lists each study's settings with their defaults.

    **Returns:** the study's result with `finding` (a sentence: what it found, with its
    numbers; the first entry of the JSON file) and `files`.
    """
    if name not in STUDIES:
        raise ValueError(f"unknown study {name!r}; choose one of {', '.join(STUDIES)}.")
    figure_path(out, stem or name, figure_format)  # a bad format refused before any solve
    s = StudySettings(**settings)
    refuse_unused(name, s)
    COMMANDS[name].check_images(len(images))
    if name == "work-precision":
        only: tuple[str, ...] | None = None  # a grid's solvers (None: the default)
        fixed_only: tuple[str, ...] | None = None  # and its constant-step solvers
        if s.solver is not None:  # one solver: by tolerances if it can, else by steps
            adaptive = _solvers.get_preset(s.solver).adaptive
            only = (s.solver,) if adaptive else ()
            fixed_only = () if adaptive else (s.solver,)
        return compare_solvers_job(
            model,
            images,
            masks,
            out,
            settings=CompareSolversSettings(
                flow=s.flow,
                t1=s.horizon,
                solvers=only,
                fixed_solvers=fixed_only,
                dtype=s.dtype,
                quick=s.quick,
            ),
            meta=meta,
            stem=stem or name,
            figure_format=figure_format,
        )
    result, plot = RUNNERS[name](model, images, masks, s)
    result = _with_metadata(dict(result), meta)  # a typed result's keys, in a new dict
    result["metadata"]["job"] = dataclasses.asdict(s)
    result["metadata"]["images"] = len(images)  # what it used: all it was given
    result = {"finding": finding(name, result), **result}
    result["files"] = write_result(out, stem or name, result, plot, figure_format)
    return result
