"""`et-ode demo`, the main job: the shipped models on held-out scenes, in one run folder,
with a summary (Markdown and JSON) that says what was found, with the numbers."""

import os
import time
from typing import Any, TypedDict

import jax

from ..analysis import metadata, save_json
from ..records import atomic_path
from ..tasks import (
    EVAL_KEY,
    eval_masks,
    evaluate_baselines,
    evaluate_model,
    held_out_split,
    load_model_and_config,
)
from ._jobs import (
    CompareSolversSettings,
    EnergyVideoSettings,
    compare_solvers_job,
    energy_video_job,
    study_job,
)
from ._runs import Stages, held_out, job_metadata, output_folder
from ._summary import summarise, summary_markdown

MODELS = ("paper", "ode")


class DemoSizes(TypedDict):
    """How much the demo computes (`SIZES`): held-out crops per study and for the MSE
    table, video crops and frames, and the convergence study's crops, end time and rtol."""

    images: int
    eval_images: int
    video_images: int
    frames: int
    ode_frames: int
    solver_images: int
    convergence_images: int
    convergence_t1: float
    convergence_rtol: float


# What the demo computes; `--quick` is for a first look and for tests.
SIZES = {
    False: DemoSizes(
        images=8,
        eval_images=64,
        video_images=4,
        frames=49,
        ode_frames=25,
        solver_images=4,
        convergence_images=2,
        convergence_t1=100.0,
        convergence_rtol=1e-6,
    ),
    True: DemoSizes(
        images=2,
        eval_images=2,
        video_images=2,
        frames=5,
        ode_frames=0,
        solver_images=2,
        convergence_images=1,
        convergence_t1=5.0,
        convergence_rtol=1e-5,
    ),
}


def demo_job(
    out=None,
    *,
    images: int | None = None,
    eval_images: int | None = None,
    quick: bool = False,
    force: bool = False,
    root="runs",
    progress: bool = True,
    figure_format: str = "png",
) -> dict:
    """Run the demo and write into `out` (default: a fresh `root/demo-<time>` folder):

    - `energy_video_paper.mp4` (+ `_frames/`, the still `.png`, `.json`) and, unless `quick`,
      `energy_video_ode.*`: the energy-trajectory video of each model to 4x its horizon;
    - `compare-solvers.json`/`.png`: work against precision of the paper model's core;
    - `overshoot_paper.*`, `overshoot_ode.*`: masked MSE and energy far past the horizon
      (100 x a fixed horizon, 10 x a fixed-point model's stop time; 10 x with `quick`);
    - `convergence.*`: both flows of the paper model's core (float64) towards a fixed point;
    - `held_out_mse.json`: both models against the two baselines (`et-ode eval`'s
      crops and masks);
    - `summary.md`, `summary.json`: what was found, with the numbers and the run time.

    `images`: held-out crops for the studies (default 8; 2 with `quick`);
    `eval_images`: crops for the MSE table (default 64); `figure_format`: every figure
    (the `.png` above) as png, pdf or svg. Returns the summary dict.
    """
    started, cpu_started, load_start = time.perf_counter(), time.process_time(), _load()
    jax.config.update("jax_enable_x64", True)  # float64 references; the models stay float32
    size = SIZES[bool(quick)].copy()
    size["images"] = images or size["images"]
    size["eval_images"] = eval_images or size["eval_images"]
    folder = output_folder(out, prefix="demo", root=root, force=force)
    stages = Stages(7 + (size["ode_frames"] > 0), f"demo -> {folder}", progress)
    results = {}
    try:
        with stages.stage("load the shipped models and held-out images"):
            loaded = {name: load_model_and_config(name) for name in MODELS}
            data = {
                name: held_out(model, config, size["images"])
                for name, (model, config, _) in loaded.items()
            }

        def meta(study, name, **extra):
            model, config, header = loaded[name]
            return job_metadata(
                study,
                name,
                config,
                header,
                indices=data[name][1],
                mask_seed=EVAL_KEY,
                options=dict(size, quick=quick),
                **extra,
            )

        def subset(name, count):
            images, indices, masks = data[name]
            return images[:count], jax.tree.map(lambda a: a[:count], masks), indices[:count]

        for name, frames in (("paper", size["frames"]), ("ode", size["ode_frames"])):
            if frames:
                with stages.stage(f"energy video ({name}, {frames} frames)"):
                    images, masks, indices = subset(name, size["video_images"])
                    results[f"video_{name}"] = energy_video_job(
                        loaded[name][0],
                        images,
                        masks,
                        folder,
                        settings=EnergyVideoSettings(frames=frames),
                        stem=f"energy_video_{name}",
                        indices=indices,
                        meta=meta("energy_video", name),
                        figure_format=figure_format,
                    )
        with stages.stage("solver comparison (paper core)"):
            images, masks, _ = subset("paper", size["solver_images"])
            results["solvers"] = compare_solvers_job(
                loaded["paper"][0],
                images,
                masks,
                folder,
                settings=CompareSolversSettings(quick=quick),
                meta=meta("work_precision", "paper"),
                figure_format=figure_format,
            )
        for name in MODELS:
            with stages.stage(f"overshoot ({name})"):
                images, _, masks = data[name]
                model = loaded[name][0]
                # 100 x a fixed horizon; 10 x a fixed-point model's stop time (by then it
                # sits at its fixed point, and its adaptive steps cost more).
                factor = 10.0 if quick or model.dynamics.fixed_point_atol is not None else 100.0
                results[f"overshoot_{name}"] = study_job(
                    "overshoot",
                    model,
                    images,
                    masks,
                    folder,
                    stem=f"overshoot_{name}",
                    factor=factor,
                    quick=quick,
                    meta=meta("overshoot", name),
                    figure_format=figure_format,
                )
        with stages.stage("convergence (paper core, both flows)"):
            images, masks, _ = subset("paper", size["convergence_images"])
            results["convergence"] = study_job(
                "convergence",
                loaded["paper"][0],
                images,
                masks,
                folder,
                horizon=size["convergence_t1"],
                rtol=size["convergence_rtol"],
                atol=size["convergence_rtol"] * 1e-2,
                quick=quick,
                meta=meta("convergence", "paper"),
                figure_format=figure_format,
            )
        with stages.stage(f"held-out MSE ({size['eval_images']} crops) and baselines"):
            results["held_out"] = held_out_mse(loaded, size["eval_images"])
            save_json(
                folder / "held_out_mse.json",
                dict(
                    results["held_out"],
                    metadata=metadata(study="held_out_mse", seeds={"masks": EVAL_KEY}),
                ),
            )
    finally:
        stages.close()
    seconds = time.perf_counter() - started
    run = dict(
        folder=str(folder),
        seconds=seconds,
        quick=bool(quick),
        sizes=size,
        cpu_seconds=time.process_time() - cpu_started,
        stage_seconds=stages.seconds,
        stage_cpu_seconds=stages.cpu_seconds,
        devices=_devices(),
        load_average=dict(start=load_start, end=_load()),
        created=time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        models={name: _model_line(*loaded[name]) for name in MODELS},
    )
    summary = summarise(run, results)
    summary["metadata"] = metadata(study="demo", seeds={"masks": EVAL_KEY})
    save_json(folder / "summary.json", summary)
    with atomic_path(folder / "summary.md") as temporary:
        temporary.write_text(summary_markdown(summary))
    return summary


def held_out_mse(loaded: dict, n_images: int) -> dict:
    """Masked-patch MSE of each model and of the two baselines on the first `n_images`
    evaluation crops with the evaluation masks (what `et-ode eval` computes)."""

    out: dict[str, Any] = {"images": n_images}
    baselines: dict[str, dict] = {}
    for name, (model, config, _) in loaded.items():
        images = model.normalisation.apply(held_out_split(config, n_images))
        masks = eval_masks(config, n_images)
        key = repr(model.normalisation.to_dict())  # the baselines depend on it only
        if key not in baselines:
            baselines[key] = evaluate_baselines(
                images, masks, config.model.image_size, config.model.patch, config.model.channels
            )
        out[name] = dict(model=evaluate_model(model, images, masks), **baselines[key])
    return out


def _load():
    """The 1-minute load average (`None` where the platform has none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def _devices() -> dict:
    devices = jax.devices()
    return dict(
        platform=devices[0].platform,
        count=len(devices),
        cpu_cores=os.cpu_count(),
        kind=devices[0].device_kind,
    )


def _model_line(model, config, header) -> dict:
    d = config.dynamics
    return dict(
        step=header.get("step"),
        solver=d.solver,
        dt0=d.dt0,
        rtol=d.rtol,
        t1=d.t1,
        flow=d.flow,
        fixed_point_atol=d.fixed_point_atol,
        clamp_visible=d.clamp_visible,
        external_field=d.external_field,
    )
