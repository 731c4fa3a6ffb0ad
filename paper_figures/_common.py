"""What every figure script shares: the command line. Loading the model, the held-out
images and masks, the metadata and atomic writing come from `et_ode.cli` and
`et_ode.analysis`, shared with the `et-ode` command line."""

import argparse
import math
import sys
from pathlib import Path

from et_ode.analysis import FIGURE_FORMATS, save_json, write_figure
from et_ode.cli import command_line_options, job_metadata
from et_ode.cli import held_out as _held_out
from et_ode.tasks import EVAL_KEY, load_model_and_config

DEFAULT_SEED = EVAL_KEY  # by default the evaluation's masks


def parser(
    description: str,
    *,
    images: int | None = None,
    dynamics: bool = False,
    frames: int | None = None,
) -> argparse.ArgumentParser:
    """The common options (`--checkpoint`, `--out`, `--format`; `--images`, `--seed` when
    the figure shows held-out images; `--frames`, `--horizon`, `--solver`, `--dt0`,
    `--rtol`, `--atol` when it runs the dynamics over time)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument(
        "--checkpoint",
        default="paper",
        help="a shipped model name (paper, ode) or a checkpoint file (default paper)",
    )
    p.add_argument("--out", default="figures", help="output folder, created (default figures)")
    p.add_argument(
        "--format",
        choices=FIGURE_FORMATS,
        default="png",
        help="the figure as png (default), or as vector graphics: pdf, svg",
    )
    if images is not None:
        p.add_argument(
            "--images",
            type=_positive_int,
            default=images,
            help=f"number of held-out images (default {images})",
        )
        p.add_argument(
            "--seed",
            type=_non_negative_int,
            default=DEFAULT_SEED,
            help=f"seed of the masks (default {DEFAULT_SEED}, the evaluation's)",
        )
    if frames is not None:
        p.add_argument(
            "--frames",
            type=_positive_int,
            default=frames,
            help=f"number of times from 0 to the horizon (default {frames})",
        )
    if dynamics:
        p.add_argument(
            "--horizon",
            type=_positive_float,
            default=None,
            help="end time in tau (default: see the script)",
        )
        p.add_argument(
            "--solver",
            default=None,
            help="solver override (default the model's); alone it means constant steps of --dt0",
        )
        p.add_argument("--dt0", type=_positive_float, default=None, help="(initial) step")
        p.add_argument("--rtol", type=_positive_float, default=None, help="relative tolerance")
        p.add_argument("--atol", type=_positive_float, default=None, help="absolute tolerance")
        p.add_argument(
            "--max-steps",
            type=_positive_int,
            default=None,
            help="step cap (default: enough constant steps, or 4096 adaptive)",
        )
    return p


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer (got {text})")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer (got {text})")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number (got {text})")
    return value


def load(checkpoint: str):
    """`(model, train_config, header)` for a shipped name or a checkpoint path."""
    return load_model_and_config(checkpoint)


def held_out(model, config, n_images: int, seed: int):
    """`(images [n, S, S, 3] in [0, 1], indices, masking)`: see `et_ode.cli.held_out`."""
    return _held_out(model, config, n_images, seed)


def solve_options(model, options):
    """How the figure's trajectory is solved: the model's dynamics with the solver
    options given on the command line (`--solver`, `--dt0`, `--rtol`, `--atol`,
    `--max-steps`), a `solvers.SolveOptions` (`et_ode.cli.command_line_options`)."""
    names = ("solver", "dt0", "rtol", "atol", "max_steps")
    return command_line_options(model, **{name: getattr(options, name) for name in names})


def model_name(options) -> str:
    """The model's name in a figure's caption: the shipped name, or the checkpoint's file
    name."""
    return Path(options.checkpoint).name


def metadata(options, config, header, **extra) -> dict:
    """What produced a figure (`et_ode.cli.job_metadata`): the script and its
    command line, the model (checkpoint, training step, config and dynamics), the data,
    seeds, versions, and `extra` (e.g. the solve options)."""
    script = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else None
    return job_metadata(
        script or "figure",
        options.checkpoint,
        config,
        header,
        options=vars(options),
        mask_seed=getattr(options, "seed", None),
        script=script,
        **extra,
    )


def save_figure(
    out, name: str, fig, data: dict, meta: dict, figure_format: str = "png"
) -> tuple[Path, Path]:
    """Write `out/name.<figure_format>` (png, pdf or svg) and `out/name.json`
    (`{"metadata": meta, "data": data}`, compact) atomically; print and return both
    paths."""
    out = Path(out)
    figure = write_figure(out / f"{name}.{figure_format}", fig)
    js = Path(save_json(out / f"{name}.json", {"metadata": meta, "data": data}, indent=None))
    print(f"wrote {figure} and {js}")
    return figure, js


def model_figure(argv, doc: str, name: str, make, custom_parser=None, **make_options):
    """A figure of the model's parameters only: parse `argv` (with `custom_parser`,
    default the common options), load the model, `fig, data = make(model, **kwargs)`
    with `kwargs[k]` the option named by `make_options[k]` and the model's `name` for
    the caption, and save `name.<--format>`, `.json`."""
    options = (custom_parser or parser(doc.splitlines()[0])).parse_args(argv)
    model, config, header = load(options.checkpoint)
    fig, data = make(
        model, name=model_name(options), **{k: getattr(options, v) for k, v in make_options.items()}
    )
    return save_figure(
        options.out, name, fig, data, metadata(options, config, header), options.format
    )
