"""The handlers of the `et-ode` commands (`graph`'s are in `._graph`): each takes the
parsed options, runs its job (the image model's jobs in an output folder, on held-out
crops or the photos of `--images-dir`) and prints what it wrote; returns the exit code."""

import json
import sys
from pathlib import Path

import jax

from ..analysis import model_dtype
from ..records import atomic_write_text
from ..solvers import check_options
from ..tasks import (
    GraphTrainConfig,
    TrainConfig,
    config_json_schema,
    eval_masks,
    evaluate_baselines,
    evaluate_model,
    export_model,
    held_out_split,
    load_config,
    load_model_and_config,
    train,
)
from ._demo import demo_job
from ._jobs import (
    STUDIES,
    CompareSolversSettings,
    EnergyVideoSettings,
    compare_solvers_job,
    energy_video_job,
    refuse_unused,
    study_job,
)
from ._runs import (
    Stages,
    folder_photos,
    held_out,
    held_out_description,
    job_folder,
    job_metadata,
)
from ._study_commands import COMMANDS
from ._study_runners import StudySettings, command_line_options

STUDY_NAMES = STUDIES


def _demo(options) -> int:
    summary = demo_job(
        options.out,
        images=options.images,
        eval_images=options.eval_images,
        quick=options.quick,
        force=options.force,
        progress=options.progress,
        figure_format=options.format,
    )
    folder = summary["run"]["folder"]
    print("\n".join(f"- {sentence}" for sentence in summary["findings"]))
    print(f"wrote {folder}/summary.md, summary.json and the files they list")
    return 0


def _run_job(options, prefix: str, label: str, job, check=None):
    """Float64 on, the model (then `check(model)`, which refuses options that depend on
    it), the output folder and the images (held-out crops, or the photos of
    `--images-dir`), then `job(model, images, indices, masks, out, meta)` as the second
    progress stage; what `frames`, `compare-solvers` and `study` share. A folder this
    job created and left empty (it failed) is removed (`job_folder`)."""
    jax.config.update("jax_enable_x64", True)  # float64 references; models stay float32

    model, config, header = load_model_and_config(options.checkpoint)  # fail fast
    if check is not None:
        check(model)
    images_dir = getattr(options, "images_dir", None)
    with job_folder(options.out, prefix=prefix, force=options.force) as out:
        return _in_folder(options, prefix, label, job, model, config, header, images_dir, out)


def _in_folder(options, prefix, label, job, model, config, header, images_dir, out):
    stages = Stages(2, f"{prefix} -> {out}", options.progress)
    try:
        files = None
        if images_dir is not None:
            with stages.stage(f"up to {options.images} photos of {images_dir}"):
                images, files, masks = folder_photos(
                    config, images_dir, options.images, options.seed
                )
            indices = None
        else:
            with stages.stage(f"{options.images} held-out images"):
                images, indices, masks = held_out(model, config, options.images, options.seed)
        meta = job_metadata(
            prefix,
            options.checkpoint,
            config,
            header,
            indices=indices,
            mask_seed=options.seed,
            dtype=model_dtype(model.core),
            images_dir=images_dir,
            files=files,
            options={  # what was asked (not the handler, nor the refused options)
                k: v for k, v in vars(options).items() if k != "handler" and k[0] != "_"
            },
        )
        with stages.stage(label):
            return job(model, images, indices, masks, out, meta)
    finally:
        stages.close()


def _frames(options) -> int:
    _check_tolerances(options)

    def solve(model):
        return command_line_options(
            model,
            solver=options.solver,
            dt0=options.dt0,
            rtol=options.rtol,
            atol=options.atol,
            max_steps=options.max_steps,
        )

    def job(model, images, indices, masks, out, meta):
        return energy_video_job(
            model,
            images,
            masks,
            out,
            settings=EnergyVideoSettings(
                frames=options.frames,
                horizon=options.horizon,
                fps=options.fps,
                temperature=options.temperature,
                seed=options.noise_seed,
            ),
            indices=indices,
            meta=meta,
            options=solve(model),
            figure_format=options.format,
        )

    def check(model):  # the solve's options, before any folder: the horizon is at most
        # 4 x the model's t1 (its trained time, or the cap of a fixed-point stop)
        horizon = options.horizon or 4 * float(model.dynamics.t1)
        at_temperature = options.temperature > 0
        check_options(solve(model).covering(0.0, horizon), t1=horizon, sde=at_temperature)

    result = _run_job(options, "frames", f"{options.frames} frames", job, check)
    print(
        f"wrote {len(result['frames'])} frames to {result['frames'][0].parent}, the video "
        f"{result['video']}, {result['still']} and {result['json']}"
    )
    return 0


def _compare_solvers(options) -> int:
    def job(model, images, indices, masks, out, meta):
        return compare_solvers_job(
            model,
            images,
            masks,
            out,
            settings=CompareSolversSettings(
                flow=options.flow,
                t1=options.t1,
                solvers=options.solvers,
                tolerances=options.tolerances,
                fixed_solvers=options.fixed_solvers,
                step_sizes=options.step_sizes,
                repeats=options.repeats,
                dtype=options.dtype,
                quick=options.quick,
            ),
            meta=meta,
            figure_format=options.format,
        )

    result = _run_job(options, "compare-solvers", "solves", job)
    for run in result["runs"]:
        setting = f"rtol {run['rtol']:g}" if run["kind"] == "adaptive" else f"dt {run['dt0']:g}"
        print(
            f"{run['solver']:<8} {setting:<11} NFE {run['nfe']:>6}  error vs exact "
            f"{run['error_exact']:.2e}  vs paper's Euler {run['error_paper']:.2e}"
        )
    print(f"wrote {result['files']['json']} and {result['files'][options.format]}")
    return 0


def _study(options) -> int:
    command = COMMANDS[options.name]
    _check_tolerances(options)
    settings = {option: getattr(options, option) for option in command.options}
    # before any image is read
    refuse_unused(options.name, StudySettings(**settings))

    def job(model, images, indices, masks, out, meta):
        return study_job(
            options.name,
            model,
            images,
            masks,
            out,
            meta=meta,
            quick=options.quick,
            figure_format=options.format,
            **settings,
        )

    result = _run_job(options, options.name, options.name, job)
    print(result["finding"])
    print(f"wrote {result['files']['json']} and {result['files'][options.format]}")
    return 0


def _check_tolerances(options) -> None:
    rtol, atol = getattr(options, "rtol", None), getattr(options, "atol", None)
    if atol is not None and rtol is None:
        raise ValueError("--atol needs --rtol (both select adaptive steps).")
    if rtol is not None and atol is None:
        options.atol = rtol * 1e-2


def _train(options) -> int:
    config = load_config(options.config)
    state = train(
        config,
        options.out,
        resume=options.resume,
        stop_after=options.stop_after,
        progress=options.progress,
    )
    print(f"trained to step {state.step}; checkpoint in {options.out or config.training.out_dir}")
    return 0


def _eval(options) -> int:
    if options.images is not None and options.images < 1:
        raise ValueError(f"--images must be a positive integer (got {options.images}).")
    model, config, header = load_model_and_config(options.checkpoint)
    source = held_out_description(config, options.images_dir)
    if options.images_dir is not None:
        images, files, _ = folder_photos(config, options.images_dir, options.images)
    else:
        count = config.data.eval_images if options.images is None else options.images
        images, files = held_out_split(config, count), None
        if header.get("kind") == "authors_npz":  # say which photos an ImageNet model sees
            print(
                f"et-ode: the authors' model on {len(images)} {source} (pass "
                "--images-dir DIR for your own photos)",
                file=sys.stderr,
            )
    assert model.normalisation is not None  # a loaded model carries its data normalisation
    images = model.normalisation.apply(images)
    masks = eval_masks(config, len(images))
    result = {
        "checkpoint": str(options.checkpoint),
        "images": len(images),
        "images_source": source,
        "model_masked_mse": evaluate_model(model, images, masks),
    }
    if files is not None:
        result["files"] = files
    if options.baselines:
        result.update(
            evaluate_baselines(
                images, masks, config.model.image_size, config.model.patch, config.model.channels
            )
        )
    print(json.dumps(result, indent=2))
    return 0


def _export(options) -> int:
    export_model(options.checkpoint, options.out, force=options.force)
    print(f"wrote the model of {options.checkpoint} (no optimiser state) to {options.out}")
    return 0


def _config_schema(options) -> int:
    kind = GraphTrainConfig if options.kind == "graph" else TrainConfig
    schema = config_json_schema(kind)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    text = json.dumps(schema, indent=2) + "\n"
    if options.out is None:
        sys.stdout.write(text)
    elif Path(options.out).is_dir() or not Path(options.out).name:
        raise ValueError(f"--out {options.out!r} is a folder; give the schema's file name.")
    else:
        atomic_write_text(options.out, text)
        print(f"wrote the JSON Schema of {options.kind} configs to {options.out}")
    return 0
