"""The pieces of the `et-ode` parser: its one-line refusals (`_Parser`), the option groups
that commands share (model and images, solver, output) and the argparse types of the
options (integers and numbers in range, lists of them, solver names)."""

import argparse
import math
import re

from ..analysis import FIGURE_FORMATS
from ..solvers import SDE_SOLVER_NAMES, SOLVER_NAMES
from ..tasks import EVAL_KEY

# Seeds of the masks: what jax.random.key gives the same key for with and without
# jax_enable_x64 (beyond 2**32 - 1 a key wraps around without it, and 2**63 overflows).
SEED_MAX = 2**32 - 1

# What reads as a negative number on the command line (`-1`, `-.5`, `-1e-6`, `-inf`).
NEGATIVE_NUMBER = re.compile(r"^-(\d|\.\d|inf|nan)", re.IGNORECASE)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line refusals: `et-ode COMMAND: error: MESSAGE (et-ode COMMAND
    --help lists the options)` on stderr and exit code 2, no usage block. Its
    sub-parsers (the commands, the graph actions) are of this class too.

    A negative number is a value, never an option (`--rtol -1e-6` reaches the option's
    own range check): argparse's own test takes `-1` and `-0.5` but not `-1e-6`, `-inf`
    or `-nan`, which it would read as an unknown option and answer "expected one
    argument"; no option of `et-ode` starts with a digit, a dot, `inf` or `nan`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = NEGATIVE_NUMBER

    def error(self, message):
        message = " ".join(str(message).split())  # one line, whatever the value held
        self.exit(2, f"{self.prog}: error: {message} ({self.prog} --help lists the options)\n")


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
        help="solver (default the model's/study's); alone: constant steps; at a "
        "temperature an SDE solver (euler is then Euler-Maruyama, milstein, sea, ...)",
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


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a number >= 0 (got {_shown(text)})")
    return value


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
    """A solver by name: an ODE solver's, or an SDE solver's (for a run at a temperature;
    the run refuses one that does not fit it, naming why)."""
    if text not in SOLVER_NAMES and text not in SDE_SOLVER_NAMES:
        raise argparse.ArgumentTypeError(
            f"unknown solver {_shown(text)}; choose one of {', '.join(SOLVER_NAMES)} (or, "
            f"at a temperature, {', '.join(n for n in SDE_SOLVER_NAMES if n not in SOLVER_NAMES)})"
        )
    return text


def _solver_list(text: str) -> tuple:
    return tuple(_solver_name(item.strip()) for item in text.split(",") if item.strip())
