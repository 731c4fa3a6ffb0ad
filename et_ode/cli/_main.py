"""The `et-ode` command line."""

import argparse
import json
import math
import sys
from pathlib import Path

import jax

from ..analysis import FIGURE_FORMATS, model_dtype, trajectory_options
from ..records import atomic_write_text
from ..solvers import MAX_STEPS_LIMIT, SOLVER_NAMES, SolveError, check_options
from ..tasks import (
    EVAL_KEY,
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
from ..vocab import FLOWS
from ._demo import demo_job
from ._graph import add_graph_commands
from ._jobs import STUDIES, compare_solvers_job, energy_video_job, refuse_unused, study_job
from ._runs import (
    Stages,
    folder_photos,
    held_out,
    held_out_description,
    job_folder,
    job_metadata,
)
from ._study_runners import StudySettings

# Seeds of the masks: what jax.random.key gives the same key for with and without
# jax_enable_x64 (beyond 2**32 - 1 a key wraps around without it, and 2**63 overflows).
SEED_MAX = 2**32 - 1
# Frames of `et-ode frames`: each is a PNG and a state of every image kept in memory;
# 10,000 make a video of 14 minutes at 12 fps.
MAX_FRAMES = 10_000

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
            options={k: v for k, v in vars(options).items() if k != "handler"},
        )
        with stages.stage(label):
            return job(model, images, indices, masks, out, meta)
    finally:
        stages.close()


def _frames(options) -> int:
    _check_tolerances(options)

    def job(model, images, indices, masks, out, meta):
        return energy_video_job(
            model,
            images,
            masks,
            out,
            frames=options.frames,
            horizon=options.horizon,
            fps=options.fps,
            indices=indices,
            meta=meta,
            solver=options.solver,
            dt0=options.dt0,
            rtol=options.rtol,
            atol=options.atol,
            max_steps=options.max_steps,
            figure_format=options.format,
        )

    def check(model):  # the solve's options, before any folder: the horizon is at most
        # 4 x the model's t1 (its trained time, or the cap of a fixed-point stop)
        horizon = options.horizon or 4 * float(model.dynamics.t1)
        check_options(
            **trajectory_options(
                model,
                horizon,
                solver=options.solver,
                dt0=options.dt0,
                rtol=options.rtol,
                atol=options.atol,
                max_steps=options.max_steps,
            )
        )

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
            flow=options.flow,
            t1=options.t1,
            solvers=options.solvers,
            tolerances=options.tolerances,
            fixed_solvers=options.fixed_solvers,
            step_sizes=options.step_sizes,
            repeats=options.repeats,
            dtype=options.dtype,
            quick=options.quick,
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
    if options.name not in STUDY_NAMES:
        raise ValueError(f"unknown study {options.name!r}; choose one of {', '.join(STUDY_NAMES)}.")
    _check_tolerances(options)
    if options.name not in ("continuation", "basin-continuation") and (
        options.parameter or options.p_span
    ):
        raise ValueError(
            "--parameter and --p-span are options of `et-ode study continuation` and "
            f"`et-ode study basin-continuation`, not of {options.name}."
        )
    if options.name != "lyapunov-spectrum" and options.measure:
        raise ValueError(
            f"--measure is an option of `et-ode study lyapunov-spectrum`, not of {options.name}."
        )
    # before any image is read
    settings = StudySettings(flow=options.flow, horizon=options.horizon, factor=options.factor)
    refuse_unused(options.name, settings)

    def job(model, images, indices, masks, out, meta):
        return study_job(
            options.name,
            model,
            images,
            masks,
            out,
            meta=meta,
            flow=options.flow,
            horizon=options.horizon,
            factor=options.factor,
            solver=options.solver,
            dt0=options.dt0,
            rtol=options.rtol,
            atol=options.atol,
            dtype=options.dtype,
            quick=options.quick,
            figure_format=options.format,
            parameter=options.parameter,
            p_span=options.p_span,
            measure=options.measure,
        )

    result = _run_job(options, options.name, options.name, job)
    if isinstance(result.get("verdict"), dict):  # stability: what the point is
        print(f"verdict: {result['verdict']['sentence']}")
    for finding in result.get("findings") or ():  # long-horizon: a sentence per flow
        print(finding)
    print(f"wrote {result['files']['json']} and {result['files'][options.format]}")
    return 0


def _check_tolerances(options) -> None:
    if options.atol is not None and options.rtol is None:
        raise ValueError("--atol needs --rtol (both select adaptive steps).")
    if options.rtol is not None and options.atol is None:
        options.atol = options.rtol * 1e-2


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


class _Parser(argparse.ArgumentParser):
    """argparse with one-line refusals: `et-ode COMMAND: error: MESSAGE (et-ode COMMAND
    --help lists the options)` on stderr and exit code 2, no usage block. Its
    sub-parsers (the commands, the graph actions) are of this class too."""

    def error(self, message):
        message = " ".join(str(message).split())  # one line, whatever the value held
        self.exit(2, f"{self.prog}: error: {message} ({self.prog} --help lists the options)\n")


def build_parser() -> argparse.ArgumentParser:
    """The `et-ode` argument parser: every command, option, default and help text."""
    parser = _Parser(prog="et-ode", description="The Energy Transformer as a true ODE.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo",
        help="the main job: energy video, solver comparison, overshoot and "
        "convergence studies and held-out MSE of the shipped models, with a summary",
    )
    demo.add_argument(
        "--images",
        type=_positive_int,
        default=None,
        help="held-out crops for the video and the studies (default 8; 2 with --quick)",
    )
    demo.add_argument(
        "--eval-images",
        type=_positive_int,
        default=None,
        help="held-out crops for the MSE table (default 64; --quick: 2)",
    )
    demo.add_argument(
        "--quick",
        action="store_true",
        help="small grids, few frames, short horizons (under a minute)",
    )
    _output_options(demo, "demo")
    demo.set_defaults(handler=_demo)

    frames = commands.add_parser(
        "frames", help="energy-trajectory video: PNG frames, mp4 (GIF if ffmpeg fails), JSON"
    )
    _model_options(frames, images=4, images_dir=True)
    frames.add_argument(
        "--frames",
        type=_int_between(2, MAX_FRAMES),
        default=49,
        help=f"frames, equally spaced from t = 0 to --horizon (default 49, at most {MAX_FRAMES:,})",
    )
    frames.add_argument(
        "--horizon",
        type=_positive_float,
        default=None,
        help="last time in tau (default 4 x the model's trained time)",
    )
    _solver_options(frames)
    frames.add_argument(
        "--max-steps",
        type=_int_between(1, MAX_STEPS_LIMIT),
        default=None,
        help=f"step cap, at most {MAX_STEPS_LIMIT} (default: enough for the horizon)",
    )
    frames.add_argument(
        "--fps", type=_positive_float, default=12.0, help="video frames per second (default 12)"
    )
    _output_options(frames, "frames")
    frames.set_defaults(handler=_frames)

    compare = commands.add_parser(
        "compare-solvers",
        help="error against NFE and wall time per solver, tolerance and "
        "step size, on the model's core from held-out images",
    )
    _model_options(compare, images=8)
    compare.add_argument("--flow", choices=FLOWS, default=None, help="default: the model's")
    compare.add_argument(
        "--t1",
        type=_positive_float,
        default=None,
        help="end time in tau (default: the model's trained time)",
    )
    compare.add_argument(
        "--solvers",
        type=_solver_list,
        default=None,
        help="adaptive solvers, comma-separated (default bosh3,tsit5)",
    )
    compare.add_argument(
        "--tolerances",
        type=_float_list,
        default=None,
        help="rtol values, atol = rtol/100 (default 1e-3,1e-4,1e-5,1e-6)",
    )
    compare.add_argument(
        "--fixed-solvers",
        type=_solver_list,
        default=None,
        help="constant-step solvers (default euler,heun)",
    )
    compare.add_argument(
        "--step-sizes",
        type=_float_list,
        default=None,
        help="constant steps (default 0.2,0.1,0.05,0.025)",
    )
    compare.add_argument(
        "--repeats",
        type=_positive_int,
        default=1,
        help="timed solves per setting after a warm-up (default 1)",
    )
    compare.add_argument(
        "--dtype",
        choices=("float32", "float64"),
        default=None,
        help="cast the core (default: its own, float32)",
    )
    compare.add_argument(
        "--quick", action="store_true", help="default grid: tsit5 at 1e-3, 1e-5; euler at 0.1, 0.05"
    )
    _output_options(compare, "compare-solvers")
    compare.set_defaults(handler=_compare_solvers)

    study = commands.add_parser(
        "study",
        help="one study of the model's dynamics on held-out images: " + ", ".join(STUDY_NAMES),
    )
    study.add_argument("name", metavar="NAME", help="one of " + ", ".join(STUDY_NAMES))
    _model_options(study, images=8)
    study.add_argument(
        "--flow",
        choices=FLOWS,
        default=None,
        help="default: the study's: both flows for convergence and long-horizon; "
        "projected for stability, fixed-points, basins, basin-continuation and "
        "continuation (the last four take no other); native for lyapunov-spectrum; the "
        "model's for the others",
    )
    study.add_argument(
        "--horizon",
        "--t1",
        dest="horizon",
        type=_positive_float,
        default=None,
        help="end time in tau (its meaning per study: docs, how-to/long-horizons; "
        "continuation has none)",
    )
    study.add_argument(
        "--factor",
        type=_positive_float,
        default=None,
        help="overshoot (only): end time as a multiple of the horizon (default 100; --quick: 10)",
    )
    _solver_options(study)
    study.add_argument(
        "--dtype",
        choices=("float32", "float64"),
        default=None,
        help="default float64 for studies of the core, the model's own for "
        "overshoot, gradient-depth, contributions, work-precision",
    )
    study.add_argument(
        "--quick",
        action="store_true",
        help="small grids, short horizons; on models as large as the "
        "authors' ImageNet model, the model's dtype and own steps (docs: "
        "the authors' model)",
    )
    study.add_argument(
        "--parameter",
        choices=("memory_scale", "field_strength", "beta"),
        default=None,
        help="continuation, basin-continuation: what p is (default memory_scale for "
        "continuation, beta for basin-continuation; memory_scale: the Hopfield "
        "memories scaled by p, the trained model at p = 1; field_strength, "
        "beta: the external field's strength, the attention's inverse "
        "temperature, themselves)",
    )
    study.add_argument(
        "--p-span",
        type=_float_pair,
        default=None,
        metavar="LOW,HIGH",
        help="continuation, basin-continuation: the range of p, around its trained "
        "value (default 0.5 to 2 times it; for beta 0.3 to 3 times, and 0.1 to 10 "
        "times for basin-continuation)",
    )
    study.add_argument(
        "--measure",
        choices=("g", "metric", "x"),
        default=None,
        help="lyapunov-spectrum: where the tangent vectors are measured (default g: "
        "the energy's coordinates, token scales and means dropped, as the stability "
        "study's exponent; x: the state's own, where the native flow's scales grow)",
    )
    _output_options(study, "NAME")
    study.set_defaults(handler=_study)

    train = commands.add_parser("train", help="train a masked-image model from a TOML config")
    train.add_argument("--config", required=True, help="TOML config (see configs/)")
    train.add_argument("--out", default=None, help="run folder (default: [training] out_dir)")
    train.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out from its checkpoint, bit-identically",
    )
    train.add_argument(
        "--stop-after",
        type=_positive_int,
        default=None,
        help="end this run after this many steps (resume later)",
    )
    train.add_argument(
        "--no-progress", dest="progress", action="store_false", help="no progress bar"
    )
    train.set_defaults(handler=_train)

    evaluate = commands.add_parser(
        "eval", help="held-out masked-patch MSE of a model, with the two baselines"
    )
    evaluate.add_argument(
        "--checkpoint",
        required=True,
        help="a shipped model name (paper, ode), a checkpoint file, or "
        "the authors' plaindict_ckpt.npz",
    )
    evaluate.add_argument(
        "--images",
        type=_positive_int,
        default=None,
        help="number of held-out images (default: the config's "
        "eval_images); with --images-dir, at most this many photos "
        "(default all)",
    )
    evaluate.add_argument(
        "--images-dir",
        default=None,
        metavar="DIR",
        help="evaluate on the photos (jpg, png) of DIR, centre-cropped "
        "and resized to the model's image size, instead of the "
        "held-out crops",
    )
    evaluate.add_argument(
        "--no-baselines",
        dest="baselines",
        action="store_false",
        help="skip the mean-fill and interpolation baselines",
    )
    evaluate.set_defaults(handler=_eval)

    export = commands.add_parser(
        "export", help="write a model-only copy of a training checkpoint (for shipping)"
    )
    export.add_argument("--checkpoint", required=True, help="training checkpoint file")
    export.add_argument("--out", required=True, help="destination file")
    export.add_argument("--force", action="store_true", help="replace an existing destination")
    export.set_defaults(handler=_export)

    schema = commands.add_parser(
        "config-schema",
        help="print the JSON Schema of TOML configs (for editors that "
        "validate TOML, such as Even Better TOML with a #:schema line)",
    )
    schema.add_argument(
        "kind",
        nargs="?",
        choices=("train", "graph"),
        default="train",
        help="train: `et-ode train` configs; graph: `et-ode graph train`",
    )
    schema.add_argument("--out", default=None, help="write it to this file (default: stdout)")
    schema.set_defaults(handler=_config_schema)

    add_graph_commands(commands, _positive_int, _positive_float)
    return parser


def _model_options(parser, images: int, images_dir: bool = False) -> None:
    parser.add_argument(
        "--checkpoint",
        default="paper",
        help="a shipped model (paper, ode), a checkpoint file, or the "
        "authors' plaindict_ckpt.npz (default paper)",
    )
    parser.add_argument(
        "--images",
        type=_positive_int,
        default=images,
        help=f"held-out crops, spread over the test scenes (default {images})"
        + ("; with --images-dir, the first N photos" if images_dir else ""),
    )
    if images_dir:
        parser.add_argument(
            "--images-dir",
            default=None,
            metavar="DIR",
            help="your own photos instead of the held-out crops: the "
            "jpg/png files of DIR in name order, centre-cropped and "
            "resized to the model's image size",
        )
    parser.add_argument(
        "--seed",
        type=_int_between(0, SEED_MAX),
        default=EVAL_KEY,
        help=f"seed of the masks, 0 to {SEED_MAX} (default {EVAL_KEY}: those of et-ode eval)",
    )


def _solver_options(parser) -> None:
    parser.add_argument(
        "--solver",
        type=_solver_name,
        default=None,
        help="solver (default the model's/study's); alone: constant steps",
    )
    parser.add_argument("--dt0", type=_positive_float, default=None, help="(initial) step in tau")
    parser.add_argument(
        "--rtol", type=_positive_float, default=None, help="relative tolerance (adaptive steps)"
    )
    parser.add_argument(
        "--atol", type=_positive_float, default=None, help="absolute tolerance (default rtol/100)"
    )


def _output_options(parser, prefix: str) -> None:
    parser.add_argument(
        "--out",
        default=None,
        help=f"output folder (default: a fresh runs/{prefix}-YYYYmmdd-HHMMSS); "
        "an existing one must be empty",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="write into a non-empty --out, replacing files of the same name",
    )
    parser.add_argument(
        "--format",
        choices=FIGURE_FORMATS,
        default="png",
        help="figures as png (default), or as vector graphics: pdf, svg (video frames stay png)",
    )
    parser.add_argument(
        "--no-progress", dest="progress", action="store_false", help="no progress bar"
    )


def _positive_int(text: str) -> int:
    return _int_at_least(1)(text)


def _int_at_least(low: int):
    return _int_between(low, None)


def _int_between(low: int, high: int | None):
    """An argparse type: an integer from `low` to `high` (None: no upper bound)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:  # not an integer, or more digits than Python converts
            value = None
        if value is None or value < low or (high is not None and value > high):
            allowed = f">= {low}" + ("" if high is None else f" and <= {high}")
            raise argparse.ArgumentTypeError(f"must be an integer {allowed} (got {_shown(text)})")
        return value

    return parse


def _shown(text: str) -> str:
    """A value given on the command line, for a message: quoted, at most 40 characters."""
    return repr(text if len(text) <= 40 else text[:37] + "...")


def _float_pair(text: str) -> tuple[float, float]:
    """`LOW,HIGH`: two finite numbers, LOW < HIGH."""
    try:
        low, high = (float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LOW,HIGH (two numbers), got {text!r}") from None
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise argparse.ArgumentTypeError(f"expected LOW < HIGH, both finite; got {text!r}")
    return low, high


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number (got {_shown(text)})")
    return value


def _float_list(text: str) -> tuple:
    return tuple(_positive_float(item) for item in text.split(",") if item.strip())


def _solver_name(text: str) -> str:
    if text not in SOLVER_NAMES:
        raise argparse.ArgumentTypeError(
            f"unknown solver {_shown(text)}; choose one of {', '.join(SOLVER_NAMES)}"
        )
    return text


def _solver_list(text: str) -> tuple:
    return tuple(_solver_name(item.strip()) for item in text.split(",") if item.strip())


def main(argv=None) -> int:
    """Run `et-ode` with `argv` (default `sys.argv[1:]`). **Returns:** the exit code: 0,
    2 for bad input (one line on stderr), 1 for a failed solve (its reason) or a file
    that could not be written or read (the file, the OS's reason and, for training, the
    last good checkpoint)."""
    options = build_parser().parse_args(argv)  # bad options: one line, exit 2
    try:
        return options.handler(options)
    except ValueError as error:  # bad input: a message, not a traceback
        return _fail(error, 2)
    except (OSError, FloatingPointError) as error:  # no space, no permission, a NaN loss:
        return _fail(error, 1)  # what happened and what is still good
    except MemoryError:
        return _fail(_OUT_OF_MEMORY, 1)
    except RuntimeError as error:  # a failed solve (solvers.SolveError) says why
        if isinstance(error, SolveError):
            return _fail(error, 1)
        if "RESOURCE_EXHAUSTED" in str(error):  # XLA could not allocate
            return _fail(_OUT_OF_MEMORY, 1)
        raise


_OUT_OF_MEMORY = (
    "out of memory: use fewer --images (or a smaller batch_size, model or "
    "max_steps in the config), or free memory and run it again."
)


def _fail(error, code: int) -> int:
    """Print `error` as one line `et-ode: error: ...` on stderr; return `code`."""
    print(f"et-ode: error: {' '.join(str(error).split())}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
