"""The `et-ode` command line: its parser (`build_parser`: every command, option, default
and help text; the handlers are in `._commands`, the parser's pieces in `._arguments`)
and `main`, which runs a command and turns its failures into one line and an exit code."""

import argparse
import sys

from ..solvers import MAX_STEPS_LIMIT, SolveError
from ..vocab import FLOWS
from ._arguments import (
    _float_list,
    _int_between,
    _model_options,
    _non_negative_float,
    _output_options,
    _Parser,
    _positive_float,
    _positive_int,
    _solver_list,
    _solver_options,
)
from ._commands import (
    STUDY_NAMES,
    _compare_solvers,
    _config_schema,
    _demo,
    _eval,
    _export,
    _frames,
    _study,
    _train,
)
from ._graph import add_graph_commands
from ._study_commands import add_study_commands

# Frames of `et-ode frames`: each is a PNG and a state of every image kept in memory;
# 10,000 make a video of 14 minutes at 12 fps.
MAX_FRAMES = 10_000


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
    frames.add_argument(
        "--temperature",
        type=_non_negative_float,
        default=0.0,
        help="run the dynamics at this temperature: Langevin noise, isotropic on the native "
        "flow (Euler-Maruyama with the model's steps), drawn from --noise-seed (default 0: "
        "no noise)",
    )
    frames.add_argument(
        "--noise-seed",
        type=_int_between(0, 2**32 - 1),
        default=0,
        help="seed of the noise with --temperature (default 0; each image its own noise)",
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
        description="One study of the model's dynamics on held-out images; `et-ode study "
        "NAME --help` lists the options of that study, with their meaning and defaults there.",
    )
    add_study_commands(study, _study)

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
