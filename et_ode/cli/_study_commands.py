"""What each `et-ode study NAME` takes: one `StudyCommand` per study, with its summary,
how many held-out images it uses, and the options it reads, each with what it means in
that study and its default. `build_parser` makes every study's own subcommand from these
records (`add_study_commands`), `study_job` refuses a setting the study does not read
(`refuse_unread`), and the runners take their numeric defaults from the same records
(`StudyCommand.default`), so the help and the code cannot drift apart."""

import argparse
import dataclasses
from collections.abc import Mapping
from typing import Any

from ..vocab import FLOWS
from ._arguments import (
    _float_list,
    _float_pair,
    _model_options,
    _output_options,
    _positive_float,
    _shown,
    _solver_name,
)

# The options a study may read: `StudySettings` fields, their flags and argparse types.
ARGUMENTS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "flow": (("--flow",), dict(choices=FLOWS)),
    "horizon": (("--horizon", "--t1"), dict(type=_positive_float, metavar="T")),
    "factor": (("--factor",), dict(type=_positive_float)),
    "solver": (("--solver",), dict(type=_solver_name)),
    "dt0": (("--dt0",), dict(type=_positive_float)),
    "rtol": (("--rtol",), dict(type=_positive_float)),
    "atol": (("--atol",), dict(type=_positive_float)),
    "dtype": (("--dtype",), dict(choices=("float32", "float64"))),
    "parameter": (("--parameter",), dict(choices=("memory_scale", "field_strength", "beta"))),
    "p_span": (("--p-span",), dict(type=_float_pair, metavar="LOW,HIGH")),
    "measure": (("--measure",), dict(choices=("g", "metric", "x"))),
    "temperatures": (("--temperatures",), dict(type=_float_list, metavar="T1,T2,...")),
}


def flag(option: str) -> str:
    """The command-line flag of a `StudySettings` field (`p_span` -> `--p-span`)."""
    return ARGUMENTS[option][0][0]


@dataclasses.dataclass(frozen=True)
class StudyOption:
    """One option as a study reads it: `meaning` (what it sets there), `default` (a
    value the runner uses, or a sentence for one computed from the model; None: no
    default to state) and `quick` (the default with `--quick`, when it differs)."""

    meaning: str
    default: Any = None
    quick: Any = None

    def help(self) -> str:
        if self.default is None:
            return self.meaning
        shown = f"default {_value(self.default)}"
        if self.quick is not None and self.quick != self.default:
            shown += f"; --quick: {_value(self.quick)}"
        return f"{self.meaning} ({shown})"


def _value(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


@dataclasses.dataclass(frozen=True)
class StudyCommand:
    """One `et-ode study NAME`: `summary` (a line: what it computes), `images`
    (`(fewest, most)` held-out images it uses; `most` None: all it is given, as one
    batch), `uses` (which images, in words), `quick` (what `--quick` changes) and
    `options` (the `StudySettings` fields it reads, each a `StudyOption`); `refusals`:
    why it has no option that others have, where a reason helps (`--flow` of a study of
    the projected flow's fixed points)."""

    name: str
    summary: str
    images: tuple[int, int | None]
    uses: str
    quick: str
    options: Mapping[str, StudyOption]
    refusals: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def default(self, option: str, quick: bool):
        """The runner's default of `option` (`--quick`'s when `quick` and it differs)."""
        entry = self.options[option]
        return entry.quick if quick and entry.quick is not None else entry.default

    @property
    def default_images(self) -> int:
        return self.images[1] or 8

    def check_images(self, count: int) -> None:
        """Refuse a number of images the study does not use (it would not be what the
        metadata, titles and findings count)."""
        low, high = self.images
        if count < low or (high is not None and count > high):
            wanted = f"{low}" if low == high else f"{low} to {high}" if high else f">= {low}"
            raise ValueError(
                f"study {self.name} uses {self.uses}: give --images {wanted} (got {count})."
            )

    def refusal(self, option: str, hint: bool = True) -> str:
        """The one-line refusal of an option this study does not read (`hint`: name
        the help that lists its options)."""
        why = self.refusals.get(option)
        text = f"{flag(option)} is not an option of `et-ode study {self.name}` ("
        text += f"{why}; drop it" if why else "drop it"
        if hint:
            text += f"; `et-ode study {self.name} --help` lists its options"
        return text + ")"


# ------------------------------------------------------------------ option texts
_FLOAT64 = "float64, the weights cast"


def _steps(default: str) -> dict[str, StudyOption]:
    """`--solver`, `--dt0`, `--rtol`, `--atol` of a study whose steps default to
    `default` (in words)."""
    return dict(
        solver=StudyOption(
            "the solver; alone (no --rtol), or a solver without an error estimate, "
            "takes constant steps of --dt0",
            default,
        ),
        dt0=StudyOption("the constant step in tau with --solver, else the first step", 0.1),
        rtol=StudyOption("relative tolerance of adaptive steps", _TIGHT_RTOL),
        atol=StudyOption("absolute tolerance of adaptive steps", "rtol/100"),
    )


_TIGHT_RTOL = "1e-7 in float64, 1e-5 in float32 and with --quick"
_MODEL_STEPS = dict(
    solver=StudyOption(
        "the solver (with --rtol: adaptive steps; alone: constant steps of --dt0)",
        "the model's own",
    ),
    dt0=StudyOption("the (first) step in tau", "the model's own"),
    rtol=StudyOption("relative tolerance of adaptive steps", "the model's own"),
    atol=StudyOption("absolute tolerance of adaptive steps", "rtol/100"),
)
_PROJECTED = "it studies the projected flow's fixed points (the native flow has none)"


def _dtype(default: str) -> StudyOption:
    return StudyOption("the dtype the core is solved in", default)


COMMANDS: dict[str, StudyCommand] = {
    command.name: command
    for command in (
        StudyCommand(
            "convergence",
            "how both flows approach a fixed point: RMS G, |dg/dt|, |dE/dt| and token "
            "scales against time, with fitted rates",
            images=(1, None),
            uses="every image it is given, as one batch",
            quick="16 recorded times, no time-to-tolerance solve, tolerances 1e-5/1e-7",
            options=dict(
                flow=StudyOption("one flow only", "both: native and projected"),
                horizon=StudyOption("the end time t1 in tau", 100.0, 20.0),
                **_steps("tsit5"),
                dtype=_dtype(_FLOAT64),
            ),
        ),
        StudyCommand(
            "energy-descent",
            "the energy along each solver's trajectory and the steps where it rose",
            images=(1, None),
            uses="every image it is given, as one batch",
            quick="a shorter horizon, tolerances 1e-5/1e-7",
            options=dict(
                flow=StudyOption("the flow", "the model's"),
                horizon=StudyOption("the end time t1 in tau", 12.0, 2.4),
                solver=StudyOption(
                    "one solver instead of the default three runs (alone: constant steps "
                    "of --dt0; with --rtol: adaptive)",
                    "Euler at dt --dt0 and 0.5, and tsit5 at --rtol",
                ),
                dt0=StudyOption("the first Euler run's step, or --solver's", 0.1),
                rtol=StudyOption("relative tolerance of the adaptive run", _TIGHT_RTOL),
                atol=StudyOption("absolute tolerance of the adaptive run", "rtol/100"),
                dtype=_dtype(_FLOAT64),
            ),
        ),
        StudyCommand(
            "overshoot",
            "the masked MSE and the energy beyond the training horizon",
            images=(1, None),
            uses="every image it is given, as one batch",
            quick="12 recorded times and a 10 x horizon",
            options=dict(
                flow=StudyOption("the flow", "the model's"),
                horizon=StudyOption(
                    "the end time in tau (a model with a fixed-point stop takes --factor)",
                    "--factor x the training horizon",
                ),
                factor=StudyOption(
                    "the end time as a multiple of the training horizon", 100.0, 10.0
                ),
                **_MODEL_STEPS,
                dtype=_dtype("the model's own"),
            ),
        ),
        StudyCommand(
            "temperature",
            "the masked MSE and the energy of the completion against the temperature of "
            "the dynamics (Langevin noise): how much noise the model tolerates",
            images=(1, None),
            uses="every image it is given, as one batch, each with its own noise draws",
            quick="5 temperatures and 2 noise draws per image (4 otherwise)",
            options=dict(
                temperatures=StudyOption(
                    "the temperatures swept (0, the deterministic completion, is added)",
                    "1e-4,2e-4,1e-3,1e-2,3e-2,0.1,0.3",
                    "2e-4,1e-3,1e-2,0.1,0.3",
                ),
                flow=StudyOption(
                    "the flow (native: isotropic noise, the authors'; projected: tangent "
                    "noise, which samples exp(-E/T))",
                    "the model's",
                ),
                dt0=StudyOption("the Euler-Maruyama step", "the model's"),
            ),
        ),
        StudyCommand(
            "escape",
            "escape times from the first image's fixed point to its nearest other memory "
            "against 1/T, and their slope against the barrier of the saddle between them "
            "(Kramers' law)",
            images=(1, 1),
            uses="one image (the first held-out crop's fixed point and its nearest memory)",
            quick="barrier/T = 1, 1.5, 2 and 32 paths (else 1, 1.5, 2, 3, 4 and 200 paths)",
            options=dict(
                temperatures=StudyOption(
                    "the temperatures of the escapes",
                    "the barrier over 1, 1.5, 2, 3, 4",
                    "the barrier over 1, 1.5, 2",
                ),
                flow=StudyOption(
                    "the flow of the escapes (projected: tangent noise, which samples "
                    "exp(-E/T); native: isotropic noise, the authors')",
                    "projected",
                ),
                horizon=StudyOption(
                    "each path's horizon in tau (censored beyond)", 10_000.0, 1000.0
                ),
                dt0=StudyOption("the Euler-Maruyama step", 0.05),
            ),
        ),
        StudyCommand(
            "stability",
            "the first image's fixed point polished by Newton: its Hessian spectrum on "
            "the tangent space, the kinks in reach, the top Lyapunov exponent, a verdict",
            images=(1, 1),
            uses="one image (the first held-out crop's fixed point)",
            quick="2 eigenvalues, a 2-tau Lyapunov time in 4 segments, looser Lanczos",
            options=dict(
                flow=StudyOption("the flow of the Lyapunov exponent", "projected"),
                horizon=StudyOption("the Lyapunov averaging time in tau", 20.0, 2.0),
                **_steps("auto to RMS G 1e-6, then Newton"),
                dtype=_dtype(_FLOAT64),
            ),
        ),
        StudyCommand(
            "fixed-points",
            "the projected flow from several starts (the image, another image's fixed "
            "point, matched noise) to fixed points: how many are distinct",
            images=(1, 2),
            uses="one image's starts, and a second image's fixed point as one more start",
            quick="a looser fixed-point tolerance (RMS G 1e-4)",
            options=dict(
                horizon=StudyOption("the cap on each solve's time in tau", 1000.0),
                solver=StudyOption("the solver (adaptive)", "tsit5"),
                rtol=StudyOption("relative tolerance", _TIGHT_RTOL),
                atol=StudyOption("absolute tolerance", "rtol/100"),
                dtype=_dtype(_FLOAT64),
            ),
            refusals=dict(flow=_PROJECTED, dt0="its steps are adaptive"),
        ),
        StudyCommand(
            "gradient-depth",
            "gradients of the masked loss against the horizon, per adjoint: do they vanish",
            images=(1, None),
            uses="every image it is given, as one batch",
            quick="2 horizons, the checkpoint adjoint only, 3 splits",
            options=dict(
                flow=StudyOption("the flow", "the model's"),
                horizon=StudyOption(
                    "the longest horizon in tau",
                    "8 x the model's reference time",
                    "2 x the model's reference time",
                ),
                **_MODEL_STEPS,
                dtype=_dtype("the model's own"),
            ),
        ),
        StudyCommand(
            "contributions",
            "which term moves the tokens: the attention, Hopfield and external parts "
            "of the update on masked and visible tokens",
            images=(1, None),
            uses="every image it is given, as one batch",
            quick="7 recorded times instead of 13",
            options=dict(
                flow=StudyOption("the flow", "the model's"),
                horizon=StudyOption("the last time in tau", "the model's reference time"),
                **_MODEL_STEPS,
                dtype=_dtype("the model's own"),
            ),
        ),
        StudyCommand(
            "long-horizon",
            "both flows of the first image far beyond training: energy, RMS G, masked "
            "MSE, token scales, decay laws and finite-time Lyapunov exponents",
            images=(1, 1),
            uses="one image (the first held-out crop)",
            quick="41 recorded times, FTLE over 1 and 10, 2 directions",
            options=dict(
                flow=StudyOption("one flow only", "both: native and projected"),
                horizon=StudyOption("the end time in tau", 1e4, 100.0),
                solver=StudyOption("the solver of both flows", "tsit5 native, auto projected"),
                rtol=StudyOption("relative tolerance", 1e-4),
                atol=StudyOption("absolute tolerance", 1e-6),
                dtype=_dtype("float64"),
            ),
            refusals=dict(dt0="its steps are adaptive"),
        ),
        StudyCommand(
            "continuation",
            "the first image's fixed point followed in a parameter both ways from its "
            "trained value, with the leading eigenvalues and the bifurcations",
            images=(1, 1),
            uses="one image (the first held-out crop's fixed point)",
            quick="2 eigenvalues, at most 8 points each way",
            options=dict(
                parameter=StudyOption(
                    "what p is: memory_scale (the memories scaled by p, the trained "
                    "model at p = 1), field_strength, beta (the external field's "
                    "strength, the attention's inverse temperature)",
                    "memory_scale",
                ),
                p_span=StudyOption(
                    "the range of p, containing its trained value",
                    "0.5 to 2 x the trained value; 0.3 to 3 x for beta",
                ),
                **_steps("auto to RMS G 1e-6, then Newton"),
                dtype=_dtype(_FLOAT64),
            ),
            refusals=dict(
                flow="it follows the projected flow's fixed points",
                horizon="it follows a fixed point in its parameter and has no end time; "
                "--p-span sets its range",
            ),
        ),
        StudyCommand(
            "basins",
            "the basins of attraction on the plane through two images' encodings and "
            "from random starts, with each attractor's Morse index and image",
            images=(2, 2),
            uses="two images (the plane goes through both)",
            quick="8 x 8 plane starts, 16 random starts, 4 attractors polished",
            options=dict(
                horizon=StudyOption("the cap on each solve's time in tau", 1000.0),
                **_steps("tsit5"),
                dtype=_dtype("float64"),
            ),
            refusals=dict(flow=_PROJECTED),
        ),
        StudyCommand(
            "basin-continuation",
            "the attractors reached from the first image and random starts, followed "
            "across a parameter: where attractors appear and vanish",
            images=(1, 1),
            uses="one image (the first held-out crop's conditions)",
            quick="7 values, 8 random starts, no Newton polish or Morse index",
            options=dict(
                parameter=StudyOption("what p is, as for continuation", "beta"),
                p_span=StudyOption(
                    "the range of p, containing its trained value (values spaced in log p)",
                    "0.1 to 10 x the trained value for beta, 0.5 to 2 x otherwise",
                ),
                horizon=StudyOption("the cap on each solve's time in tau", 1000.0),
                **_steps("tsit5"),
                dtype=_dtype("float64"),
            ),
            refusals=dict(flow=_PROJECTED),
        ),
        StudyCommand(
            "lyapunov-spectrum",
            "the top Lyapunov exponents of the first image's core along a flow",
            images=(1, 1),
            uses="one image (the first held-out crop)",
            quick="4 exponents instead of 8, tolerances 1e-5/1e-7",
            options=dict(
                flow=StudyOption("the flow", "native"),
                horizon=StudyOption(
                    "the averaging time in tau (after a transient of a tenth of it)", 1000.0, 20.0
                ),
                solver=StudyOption("the solver (adaptive)", "tsit5"),
                rtol=StudyOption("relative tolerance", _TIGHT_RTOL),
                atol=StudyOption("absolute tolerance", "rtol/100"),
                dtype=_dtype("float64"),
                measure=StudyOption(
                    "where tangent vectors are measured: g (the energy's coordinates, as "
                    "the stability study's exponent), metric, or x (the state's own)",
                    "g",
                ),
            ),
            refusals=dict(dt0="its steps are adaptive"),
        ),
        StudyCommand(
            "work-precision",
            "error against evaluations and wall time per solver and tolerance or step "
            "(as et-ode compare-solvers)",
            images=(1, None),
            uses="every image it is given, as one batch",
            quick="tsit5 at 1e-3, 1e-5 and Euler at 0.1, 0.05, a loose reference",
            options=dict(
                flow=StudyOption("the flow", "the model's"),
                horizon=StudyOption("the end time t1 in tau", "the model's reference time"),
                solver=StudyOption(
                    "one solver only: by tolerances if it is adaptive, else by steps",
                    "bosh3, tsit5, euler, heun",
                ),
                dtype=_dtype("the model's own"),
            ),
            refusals=dict(
                dt0="et-ode compare-solvers sets the steps (--step-sizes)",
                rtol="et-ode compare-solvers sets the tolerances (--tolerances)",
                atol="et-ode compare-solvers sets the tolerances (--tolerances)",
            ),
        ),
    )
}


def refuse_unread(name: str, settings: Mapping[str, Any]) -> None:
    """Refuse a setting (a `StudySettings` field given, not None) that study `name`
    does not read, in one line naming the option."""
    command = COMMANDS[name]
    for option in ARGUMENTS:
        if settings.get(option) is not None and option not in command.options:
            raise ValueError(command.refusal(option))


class _Refused(argparse.Action):
    """A hidden option that a study does not read: refused in one line, with why."""

    def __init__(self, option_strings, dest, message: str, **kwargs):
        super().__init__(option_strings, dest, nargs="?", help=argparse.SUPPRESS, **kwargs)
        self.message = message

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(self.message)


def _images_type(command: StudyCommand):
    """`--images`: an integer in the study's range, else its refusal in one line."""

    def parse(text: str) -> int:
        try:
            count = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer (got {_shown(text)})") from None
        try:
            command.check_images(count)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
        return count

    return parse


def add_study_commands(study: argparse.ArgumentParser, handler) -> None:
    """One subcommand of `et-ode study` per `COMMANDS` entry: its images, the options
    it reads with their meaning and defaults there, `--quick`, the output options; the
    options it does not read are refused in one line."""
    names = study.add_subparsers(dest="name", metavar="NAME", required=True)
    for command in COMMANDS.values():
        parser = names.add_parser(
            command.name,
            help=command.summary,
            description=f"{command.summary[:1].upper()}{command.summary[1:]}. "
            f"It uses {command.uses}.",
        )
        _model_options(parser, images=command.default_images)
        images = next(a for a in parser._actions if a.dest == "images")
        images.type = _images_type(command)
        images.help = (
            f"held-out crops (default {command.default_images}): the study uses {command.uses}"
        )
        for option, (flags, kwargs) in ARGUMENTS.items():
            if option in command.options:
                parser.add_argument(
                    *flags, dest=option, default=None, help=command.options[option].help(), **kwargs
                )
            else:
                parser.add_argument(
                    *flags,
                    dest=f"_unread_{option}",
                    action=_Refused,
                    message=command.refusal(option, hint=False),
                )
        parser.add_argument("--quick", action="store_true", help=f"a first look: {command.quick}")
        _output_options(parser, command.name)
        parser.set_defaults(handler=handler)
