"""Fuzzing (Hypothesis): generated inputs to every entry point that reads what a user
or a file hands it, each of which must either work or be refused with a `ValueError`
that names the problem (on the command line: one line, exit code 2). Never another
exception (a traceback from deep inside), never a wrong value accepted silently.

- config documents (image and graph configs): every section and field of the schema,
  unknown names, values of every TOML type including wrong ones and edge values
  (0, -1, huge integers, inf, nan, empty strings, bools, arrays, tables);
- checkpoint bytes (ours, image and graph models) truncated, with bits flipped, or with
  bytes inserted; the authors' `.npz` files changed or damaged;
- command lines of every command (huge integers, seeds beyond int64, tiny, negative
  and non-finite numbers, missing, unreadable and non-UTF-8 files);
- the options of `solvers.solve`, checked, and run on a tiny model when accepted;
- graph files (TU text files, by line and by byte; fraud `.mat` files) and image arrays.

`make test` runs `ET_ODE_FUZZ_EXAMPLES` examples per property (default 40; the property
that runs `solvers.solve` itself, a twentieth of it, at least 6); `make fuzz` runs 4,000
per property (see the Makefile) and prints Hypothesis's statistics and, at the end, a
table of the inputs tried per entry point, accepted, checked and refused (`TALLY`).
"Checked" counts the accepted inputs whose effect the property verified, so that a
silent acceptance fails it: config documents (every value stored as written), `solve`'s
options (`check_accepted_options`) and command lines (`check_reached`: the command's job
started and every option's value reached it).
"""

import collections
import math
import os
import tempfile
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import et_ode
from et_ode.tasks import (
    GraphTrainConfig,
    TrainConfig,
    config_json_schema,
    read_checkpoint,
    save_checkpoint,
)

EXAMPLES = int(os.environ.get("ET_ODE_FUZZ_EXAMPLES", "40"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=EXAMPLES < 1000,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)

REFUSED = object()
# {entry point: Counter(accepted=..., checked=..., refused=...)}, printed at the end of
# the session.
TALLY: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)


def tally(entry: str, how: str) -> None:
    """Count one input of `entry` as `how` ("accepted", "refused", or "checked": an
    accepted input whose effect the property then verified), also as a Hypothesis event
    (its statistics)."""
    TALLY[entry][how] += 1
    event({"accepted": "accepted", "checked": "accepted and checked"}.get(how, "refused"))


def outcome(call, prefix: str = "", entry: str = "other"):
    """`call()`'s result (an accepted input), or `REFUSED` when it raised a `ValueError`
    of one line starting with `prefix`; any other exception fails the property."""
    try:
        result = call()
    except ValueError as error:
        message = str(error).strip()
        assert message.startswith(prefix) and "\n" not in message, message
        tally(entry, "refused")
        return REFUSED
    tally(entry, "accepted")
    return result


class _TallyReport:
    """A pytest plugin: the table of `TALLY` in the terminal summary."""

    def pytest_terminal_summary(self, terminalreporter):
        if not TALLY:
            return
        terminalreporter.section("fuzz inputs per entry point")
        write = terminalreporter.write_line
        write(f"{'entry point':<44} {'tried':>7} {'accepted':>9} {'checked':>8} {'refused':>8}")
        total = collections.Counter()
        for entry in sorted(TALLY):
            counts = TALLY[entry]
            total.update(counts)
            tried = counts["accepted"] + counts["refused"]
            write(
                f"{entry:<44} {tried:>7} {counts['accepted']:>9} {counts['checked']:>8} "
                f"{counts['refused']:>8}"
            )
        failed = len(terminalreporter.stats.get("failed", []))
        label = (
            f"all ({failed} properties FAILED)"
            if failed
            else f"all (0 tracebacks; {total['checked']:,} accepted inputs checked)"
        )
        write(
            f"{label:<44} "
            f"{total['accepted'] + total['refused']:>7} {total['accepted']:>9} "
            f"{total['checked']:>8} {total['refused']:>8}"
        )


@pytest.fixture(scope="module", autouse=True)
def _tally_report(request):
    """Registers `_TallyReport` (the table appears where pytest reports its summary: not
    under xdist workers, whose terminal output the controller does not show)."""
    plugin = _TallyReport()
    manager = request.config.pluginmanager
    if manager.get_plugin("terminalreporter") is not None and not manager.has_plugin(
        "et-ode-fuzz-tally"
    ):
        manager.register(plugin, "et-ode-fuzz-tally")
    yield


# ------------------------------------------------------------------ config documents
EDGE_NUMBERS = [
    0,
    1,
    -1,
    2**63 - 1,
    -(2**63),
    0.0,
    -0.0,
    0.5,
    1.5,
    -1e-300,
    1e308,
    math.inf,
    -math.inf,
    math.nan,
]
SCALARS = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(EDGE_NUMBERS),
    st.booleans(),
    st.text(max_size=12),
    st.sampled_from(
        [
            "",
            "0.9",
            "1",
            "true",
            "yes",
            "nan",
            "euler",
            "tsit5",
            "projected",
            "native",
            "relu",
            "et",
            "sbm",
            "csl",
            "laplacian",
            "photos",
        ]
    ),
)
TOML_VALUES = st.one_of(
    SCALARS,
    st.lists(SCALARS, max_size=4),
    st.dictionaries(st.text(max_size=6), SCALARS, max_size=3),
)


def _valid_values(spec: dict) -> list:
    """Values the schema allows for one field (its default and enum), to mix in."""
    options = spec.get("anyOf", [spec])
    values = [spec["default"]] if spec.get("default") is not None else []
    for option in options:
        values += option.get("enum", [])
        if option.get("type") == "array":
            values += [option.get("items", {}).get("enum", [])[:2]]
    return values


def documents(kind):
    """Config documents for the config dataclass `kind`: known and unknown sections
    and fields, valid and invalid values."""
    schema = config_json_schema(kind)
    sections = {}
    for name, spec in schema["properties"].items():
        section = schema["$defs"][(spec.get("$ref") or spec["allOf"][0]["$ref"]).split("/")[-1]]
        fields = {
            field: st.one_of(TOML_VALUES, st.sampled_from(_valid_values(f)))
            if _valid_values(f)
            else TOML_VALUES
            for field, f in section["properties"].items()
        }
        fields["bogus"] = TOML_VALUES
        sections[name] = st.fixed_dictionaries({}, optional=fields)
    sections["bogus"] = st.dictionaries(st.text(max_size=4), SCALARS, max_size=2)
    return st.fixed_dictionaries({}, optional=sections) | st.sampled_from([[], 3, "x", None])


def _same_value(given, stored) -> bool:
    """Whether a stored field holds exactly the value given (an int may become the
    equal float; nothing else may change type)."""
    if isinstance(given, list):
        return (
            isinstance(stored, tuple)
            and len(given) == len(stored)
            and all(_same_value(g, s) for g, s in zip(given, stored))
        )
    if isinstance(given, bool) or isinstance(stored, bool):
        return given is stored
    if isinstance(given, int) and isinstance(stored, float):
        return float(given) == stored
    return type(given) is type(stored) and given == stored


def _check_document(kind, document):
    config = outcome(
        lambda: kind.from_dict(document, source="fuzz.toml"),
        "fuzz.toml: ",
        entry=f"config documents ({kind.__name__})",
    )
    if config is REFUSED:
        return
    assert isinstance(document, dict)
    for section, fields in document.items():
        for field, value in fields.items():
            stored = getattr(getattr(config, section), field)
            assert _same_value(value, stored), (section, field, value, stored)
            if isinstance(stored, float):
                assert math.isfinite(stored), (section, field, stored)
    tally(f"config documents ({kind.__name__})", "checked")


# no_runtime_types: a document that is not a table reaches `from_dict` on purpose (as a
# TOML file or a checkpoint header can hand it anything); the suite's run-time type
# checks would refuse it before the schema's own message, the one users get.
@FUZZ
@given(document=documents(TrainConfig))
def test_training_config_documents(document, no_runtime_types):
    _check_document(TrainConfig, document)


@FUZZ
@given(document=documents(GraphTrainConfig))
def test_graph_config_documents(document, no_runtime_types):
    _check_document(GraphTrainConfig, document)


# ------------------------------------------------------------------ checkpoint bytes
@pytest.fixture(scope="module")
def checkpoint_bytes(tmp_path_factory):
    """A valid model checkpoint of a tiny `MaskedImageET`, as `et-ode train` writes it."""
    from et_ode.tasks.images._train import _header

    config = TrainConfig.from_dict(
        {
            "model": {
                "image_size": 8,
                "patch": 4,
                "dim": 8,
                "n_heads": 1,
                "head_dim": 4,
                "n_memories": 8,
            }
        }
    )
    normalisation = et_ode.tasks.ChannelNormalisation.imagenet()
    model = et_ode.tasks.new_model(config, normalisation)
    path = tmp_path_factory.mktemp("fuzz") / "model.eqx"
    save_checkpoint(path, _header(config, 0, normalisation, None), model)
    return Intact(path.read_bytes())


class Intact(bytes):
    """The bytes of a valid checkpoint (a short repr in failure reports)."""

    def __repr__(self):
        return f"<{len(self)} bytes of a valid checkpoint>"


@st.composite
def damaged(draw, data: bytes):
    """`data` truncated, with bits flipped, or with bytes inserted."""
    how = draw(st.sampled_from(["truncate", "flip", "insert"]))
    if how == "truncate":
        return data[: draw(st.integers(0, len(data) - 1))]
    if how == "flip":
        out = bytearray(data)
        for index in draw(st.lists(st.integers(0, len(data) - 1), min_size=1, max_size=4)):
            out[index] ^= 1 << draw(st.integers(0, 7))
        return bytes(out)
    at = draw(st.integers(0, len(data)))
    return data[:at] + draw(st.binary(min_size=1, max_size=16)) + data[at:]


@FUZZ
@given(data=st.data())
def test_damaged_checkpoints_are_refused(checkpoint_bytes, data, no_runtime_types):
    damaged_bytes = data.draw(damaged(checkpoint_bytes))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.eqx"
        path.write_bytes(damaged_bytes)
        for reader in (read_checkpoint, et_ode.tasks.MaskedImageET.load):
            if damaged_bytes == checkpoint_bytes:
                reader(path)
                continue
            with pytest.raises(ValueError, match=str(path)):
                reader(path)
        tally(
            "checkpoint bytes (read_checkpoint, load)",
            "accepted" if damaged_bytes == checkpoint_bytes else "refused",
        )


# ------------------------------------------------------ the authors' checkpoint files
def _authors_arrays(dim=4, heads=1, head_dim=2, memories=3, patch=2, side=2) -> dict:
    """A small valid file in the authors' format (their keys and layout)."""
    import numpy as np

    rng = np.random.default_rng(0)
    p = 3 * patch * patch
    shapes = dict(
        Wq=(heads, head_dim, dim),
        Wk=(heads, head_dim, dim),
        Xi=(dim, memories),
        Wenc=(p, dim),
        Benc=(dim,),
        Wdec=(dim, p),
        Bdec=(p,),
        LNORM_gamma=(),
        LNORM_bias=(dim,),
        CLS_token=(dim,),
        MASK_token=(dim,),
        POS_embed=(1 + side * side, dim),
    )
    arrays = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    arrays["LNORM_gamma"] = np.asarray(1.3, np.float32)
    return arrays


AUTHORS_KEYS = sorted(_authors_arrays())
DTYPES = ["float32", "float64", "int32", "bool", "complex64", "U3", "object"]


@st.composite
def authors_files(draw):
    """A dict of arrays: the valid file with one to three changes (a key dropped, an
    array of another shape or dtype, NaN or inf inside, an extra key)."""
    import numpy as np

    arrays = _authors_arrays()
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from(AUTHORS_KEYS + ["extra"]))
        change = draw(st.sampled_from(["drop", "shape", "dtype", "nonfinite"]))
        if change == "drop":
            arrays.pop(key, None)
        elif change == "shape":
            shape = tuple(draw(st.lists(st.integers(0, 6), max_size=3)))
            arrays[key] = np.ones(shape, np.float32)
        elif change == "dtype":
            dtype = draw(st.sampled_from(DTYPES))
            value = arrays.get(key, np.zeros(2))
            if value.dtype.kind not in "fiub":
                value = np.zeros(2)
            with warnings.catch_warnings():  # complex to real, NaN to int: on purpose
                warnings.simplefilter("ignore")
                arrays[key] = (
                    np.array([{"a": 1}], dtype=object) if dtype == "object" else value.astype(dtype)
                )
        elif key in arrays and np.size(arrays[key]) and arrays[key].dtype.kind in "fiub":
            flat = np.array(arrays[key], np.float64).ravel()
            flat[draw(st.integers(0, flat.size - 1))] = draw(
                st.sampled_from([np.nan, np.inf, -np.inf])
            )
            arrays[key] = flat.reshape(np.shape(arrays[key]))
    return arrays


@FUZZ
@given(arrays=authors_files())
def test_authors_files_are_read_or_refused(arrays, no_runtime_types):
    import numpy as np

    from et_ode.tasks import read_authors_checkpoint

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "plaindict_ckpt.npz"
        np.savez(path, **arrays)
        read = outcome(
            lambda: read_authors_checkpoint(path), str(path), entry="authors' .npz arrays"
        )
    if read is REFUSED:
        return
    config, _, _, parameters, _ = read
    assert all(np.all(np.isfinite(v)) for v in parameters.values())
    assert config.model.dim == parameters["core.attention.Wq"].shape[-1]
    tally("authors' .npz arrays", "checked")


# ------------------------------------------------------------- command-line vectors
class Reached(BaseException):
    """Raised by a stubbed job: the command line was accepted and work would start;
    it carries the job's name and the arguments it was given."""

    def __init__(self, job: str, args: tuple, kwargs: dict):
        super().__init__(job)
        self.job, self.args, self.kwargs = job, args, kwargs


# Where each command's work starts, stubbed so that an accepted vector costs nothing:
# every check before it (options, files, checkpoints, configs) runs for real.
JOBS = {
    "et_ode.cli._commands": (
        "demo_job",
        "energy_video_job",
        "compare_solvers_job",
        "study_job",
        "train",
        "evaluate_model",
        "export_model",
    ),
    "et_ode.cli._graph": (
        "run_graph_benchmark",
        "evaluate_graph_model",
        "convergence",
        "energy_descent",
        "graph_overshoot",
        "long_horizon",
        "contributions",
    ),
}
# Values for options: valid and invalid ones; paths only relative (the tests run as
# root in CI: never a system file as an output).
OPTION_VALUES = [
    "-1",
    "0",
    "1",
    "2",
    "0.5",
    "nan",
    "inf",
    "-inf",
    "1e999",
    "abc",
    "",
    "paper",
    "ode",
    "graph_anomaly",
    "tsit5",
    "euler",
    "native",
    "projected",
    "1e-3,1e-5",
    "1e-3,abc",
    "float32",
    "float16",
    "missing.toml",
    "bad.toml",
    "folder",
    "missing/",
    "notes.txt",
    "latin1.toml",
    "tiny_dt.toml",
    # huge integers, seeds beyond int64, tiny and negative numbers
    "99999999999999999999",
    str(2**31),
    str(2**32),
    str(2**63),
    str(2**64),
    "9" * 5000,
    "1e-300",
    "5e-324",
    "-1e-300",
    "-5",
    "-0",
    "1e-300,1e-3",
]
INTEGERS = st.integers(min_value=-(2**70), max_value=2**70).map(str)
FLOATS = st.floats(allow_nan=True, allow_infinity=True).map(repr)
READ_ONLY_VALUES = ["/etc/passwd", "/dev/null", "/"]  # only for inputs, never --out


def _commands():
    """`{name: (argv prefix, parser)}` for every command and graph action."""
    import argparse

    from et_ode.cli import build_parser

    found = {}

    def walk(parser, prefix):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found[" ".join(prefix + [name])] = (prefix + [name], sub)
                    walk(sub, prefix + [name])

    walk(build_parser(), [])
    return {
        name: spec
        for name, spec in found.items()
        if not any(other.startswith(name + " ") for other in found)
    }


COMMANDS = _commands()


def _any_value(draw, action):
    """Any value for an option: valid and invalid ones, huge and non-finite numbers."""
    values = OPTION_VALUES + ([] if "out" in action.dest else READ_ONLY_VALUES)
    return draw(st.one_of(st.sampled_from(values + list(action.choices or [])), INTEGERS, FLOATS))


def _plausible_value(draw, action):
    """A value near the option's own default (a number doubled or halved, an integer
    plus one, another choice), a shipped model for a checkpoint, `good.toml` for a
    config; `None` (the option left out) where there is no default to start from."""
    default = action.default
    if action.choices:
        return draw(st.sampled_from(list(action.choices)))
    if action.dest == "checkpoint":
        return draw(st.sampled_from(["paper", "ode", "graph_anomaly"]))
    if action.dest == "config":
        return "good.toml"
    if isinstance(default, bool) or default is None:
        return None
    if isinstance(default, int):
        return str(default + draw(st.sampled_from([0, 1])))
    if isinstance(default, float):
        return repr(default * draw(st.sampled_from([1.0, 2.0, 0.5])))
    return default if isinstance(default, str) else None


@st.composite
def argument_vectors(draw, plausible: bool = False):
    """A command line of any command: some of its options (the required ones always),
    each with any value, or (`plausible`) with a value near its default, so that most
    such command lines run."""
    import argparse

    name = draw(st.sampled_from(sorted(COMMANDS)))
    prefix, parser = COMMANDS[name]
    argv = list(prefix)
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if not action.option_strings:  # a positional (a study name, a kind)
            wrong = [] if plausible else ["bogus", "convergence", "overshoot"]
            choices = list(action.choices or []) + wrong
            argv.append(draw(st.sampled_from(choices or ["convergence"])))
            continue
        if not (action.required or draw(st.booleans())):
            continue
        if action.nargs == 0:
            argv.append(action.option_strings[-1])
            continue
        value = (_plausible_value if plausible else _any_value)(draw, action)
        if value is not None:
            argv += [action.option_strings[-1], value]
    return argv


@pytest.fixture
def stubbed_jobs(monkeypatch, tmp_path):
    import importlib

    def stub(name):
        def reached(*args, **kwargs):
            raise Reached(name, args, kwargs)

        return reached

    for module, names in JOBS.items():
        for name in names:
            monkeypatch.setattr(importlib.import_module(module), name, stub(name))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.toml").write_text("[training]\nsteps = 'many'\n")
    (tmp_path / "notes.txt").write_text("not a model")
    (tmp_path / "latin1.toml").write_bytes("[training]\nout_dir = 'caf\u00e9'\n".encode("latin-1"))
    (tmp_path / "tiny_dt.toml").write_text("[dynamics]\ndt0 = 1e-300\n")
    (tmp_path / "folder").mkdir()
    (tmp_path / "good.toml").write_text("[training]\nsteps = 2\n")


def _job_of(command: str, argv: list[str]) -> set[str]:
    """The stubbed job an accepted command line must start."""
    if command.startswith("study "):
        return {"study_job"}
    if command == "graph study":
        study = argv[2] if len(argv) > 2 else ""
        return {study.replace("-", "_"), "graph_overshoot"} & set(JOBS["et_ode.cli._graph"])
    return {
        "demo": {"demo_job"},
        "frames": {"energy_video_job"},
        "compare-solvers": {"compare_solvers_job"},
        "train": {"train"},
        "eval": {"evaluate_model"},
        "export": {"export_model"},
        "graph train": {"run_graph_benchmark"},
        "graph eval": {"evaluate_graph_model"},
    }[command]


def _values_in(value, name: str = "", depth: int = 0):
    """`(name, value)` for every value reachable from a job's arguments, named by its
    keyword, key or field: through tuples, lists, dicts, dataclasses and namespaces
    (arrays and models as themselves)."""
    import dataclasses

    if name in ("meta", "metadata"):  # the record of the command line, not its effect
        return
    yield name, value
    if depth > 4:
        return
    if isinstance(value, dict):
        items = [(str(key), item) for key, item in value.items()]
    elif isinstance(value, (list, tuple)):
        items = [("", item) for item in value]
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = [(f.name, getattr(value, f.name, None)) for f in dataclasses.fields(value)]
    elif type(value).__name__ == "Namespace":
        items = list(vars(value).items())
    else:
        return
    for key, item in items:
        yield from _values_in(item, key, depth + 1)


def _same(parsed, value) -> bool:
    if isinstance(value, (list, tuple)) and not isinstance(parsed, (list, tuple)):
        return any(_same(parsed, item) for item in value)  # one of several (flows)
    if (
        isinstance(parsed, float)
        and isinstance(value, (int, float))
        and not isinstance(value, bool)
    ):
        return parsed == value or (math.isnan(parsed) and math.isnan(value))
    try:
        return bool(parsed == value)
    except Exception:  # an array compared with a number: not the value sought
        return False


# Options a command consumes before its job (the job gets what they made, not their
# text): output folders, models and data read from a path, the images drawn.
# `--seed` draws the held-out crops the job is handed (`--images` of them: checked as
# their count). A graph study's figure is written after the stubbed study, and
# `--graphs` is the batch size of the state it is handed.
CONSUMED: dict[str, set[str]] = {
    "*": {"out", "force", "progress", "checkpoint", "config", "seed"},
    "graph study": {"format", "graphs"},
}


# Options that reach a job under another name (one flow of the several a study takes).
ALIASES = {"flow": ("flow", "flows")}


def _count(value):
    """`len(value)` for a sequence or an array with an axis, else `value` itself."""
    if isinstance(value, (list, tuple)) or getattr(value, "ndim", 0) > 0:
        return len(value)
    return value


def check_reached(argv: list[str], reached: Reached) -> None:
    """An accepted command line started the job of its command, and every option value
    it gave reached that job: the parsed value is among the job's arguments (directly,
    or as a field of a settings object it was handed; by name where the job has a
    value of the option's name), except the options in `CONSUMED`."""
    command = max((n for n in COMMANDS if argv[: len(n.split())] == n.split()), key=len)
    assert reached.job in _job_of(command, argv), (argv, reached.job)
    prefix, parser = COMMANDS[command]
    namespace = parser.parse_args(argv[len(prefix) :])
    given = {
        a.dest for a in parser._actions if a.option_strings and set(a.option_strings) & set(argv)
    }
    bag = list(_values_in((reached.args, reached.kwargs)))
    for dest in sorted(given - CONSUMED.get(command, set()) - CONSUMED["*"]):
        parsed = getattr(namespace, dest)
        # by its name where the job has a value of that name, else by value
        names = ALIASES.get(dest, (dest,))
        named = [value for name, value in bag if name in names] or [value for _, value in bag]
        if dest == "images":  # a count: the images handed over, or the count itself
            named = [_count(v) for v in named]
        assert any(_same(parsed, value) for value in named), (argv, dest, parsed)


@FUZZ
@given(argv=st.one_of(argument_vectors(), argument_vectors(plausible=True)))
def test_command_lines_run_or_are_refused_in_one_line(argv, stubbed_jobs, capsys):
    """Every command with generated option values: it reaches its job, or ends with
    exit code 2 and one line on stderr (the option parser's `et-ode COMMAND: error:
    ... (et-ode COMMAND --help lists the options)`, or `et-ode: error: ...`); never a
    traceback, and a refused command leaves no new file or folder behind."""
    from et_ode.cli import main

    before = sorted(Path().rglob("*"))
    capsys.readouterr()
    try:
        code = main(argv)
    except Reached as reached:
        tally("command lines (et_ode.cli.main)", "accepted")
        check_reached(argv, reached)
        tally("command lines (et_ode.cli.main)", "checked")
        return
    except SystemExit as exit:  # the option parser: one line
        err = capsys.readouterr().err
        command = "et-ode " + max(
            (name for name in COMMANDS if argv[: len(name.split())] == name.split()), key=len
        )
        assert exit.code == 2 and err.count("\n") == 1, (argv, err)
        # the command's parser, or the top one (for arguments no parser took)
        prog = command if err.startswith(command + ":") else "et-ode"
        assert err.startswith(f"{prog}: error: "), (argv, err)
        assert err.endswith(f"({prog} --help lists the options)\n"), (argv, err)
        tally("command lines (et_ode.cli.main)", "refused")
        return
    err = capsys.readouterr().err.strip().splitlines()
    if code == 0:  # a command without a job (config-schema)
        tally("command lines (et_ode.cli.main)", "accepted")
        return
    # one error line, the last (a progress display may come before it), no traceback;
    # exit code 2, or 1 where the OS refused a file (a name too long), with its answer
    errors = [line for line in err if line.startswith("et-ode: error: ")]
    assert len(errors) == 1 and err[-1] == errors[0], (argv, err)
    assert code == 2 or (code == 1 and "[Errno " in errors[0]), (argv, err)
    assert not any(line.startswith("Traceback") for line in err), (argv, err)
    assert sorted(Path().rglob("*")) == before, argv  # refused before any folder
    tally("command lines (et_ode.cli.main)", "refused")


# ------------------------------------------------------------------ solve's options
NUMBERS = st.one_of(
    st.none(),
    st.sampled_from(EDGE_NUMBERS),
    st.floats(-10, 10),
    st.integers(-5, 5),
    st.booleans(),
    st.sampled_from(["1e-3", "x"]),
    st.sampled_from([1e-300, 5e-324, 1e-9, 2**31 - 1, 2**31, 2**62, 2**64]),
)


TOLERANCES = st.sampled_from([1e-6, 1e-3, 1e-8, 0.0, 0, math.inf, -1e-9, math.nan, 1e300, 5e-324])


@st.composite
def solve_options(draw):
    import diffrax

    from et_ode import solvers

    solver = draw(
        st.one_of(
            st.sampled_from(list(solvers.SOLVER_NAMES) + ["rk45", "", "EULER"]),
            st.sampled_from(
                [
                    diffrax.Tsit5(),
                    diffrax.Euler(),
                    diffrax.Kvaerno3(),
                    diffrax.EulerHeun(),
                    diffrax.Tsit5,
                    3,
                ]
            ),
        )
    )
    options = dict(solver=solver)
    for name in ("t0", "t1", "dt0", "rtol", "atol", "dtmin", "max_steps"):
        if draw(st.booleans()):
            options[name] = draw(NUMBERS)
    if draw(st.booleans()):  # the tolerance shortcut as a pair, often valid but one
        options.update(rtol=draw(TOLERANCES), atol=draw(TOLERANCES), dt0=None)
    for name, values in (
        ("flow", ["native", "projected", "sideways", None, 1]),
        ("adjoint", ["checkpoint", "backsolve", "implicit", "magic", None]),
        ("save", ["final", "all", "steps", [0.1, 0.2], [0.2, 0.1], [], [math.nan], 3, None]),
        (
            "stepsize_controller",
            [
                None,
                diffrax.ConstantStepSize(),
                diffrax.PIDController(rtol=1e-3, atol=1e-6),
                diffrax.PIDController,
                "pid",
            ],
        ),
    ):
        if draw(st.booleans()):
            options[name] = draw(st.sampled_from(values))
    if draw(st.booleans()):
        atol = draw(NUMBERS)
        try:
            options["stop"] = solvers.FixedPointStop(atol=atol)
        except ValueError:  # refused where it is built: the message is checked there
            options["stop"] = "not a stop"
    return options


@st.composite
def plausible_solve_options(draw):
    """Options that `check_options` mostly accepts (so that `solve` runs), with edge
    values of the times, steps and tolerances: tiny, huge, at the limits."""
    from et_ode import solvers

    solver = draw(st.sampled_from(solvers.SOLVER_NAMES))
    options = dict(
        solver=solver,
        flow=draw(st.sampled_from(["native", "projected"])),
        t1=draw(st.sampled_from([0.3, 1.2, 1e-300, 1e300, 2.0])),
        save=draw(st.sampled_from(["final", "steps", [0.0, 0.1]])),
    )
    tolerance = st.sampled_from([1e-3, 1e-8, 1e-300, 1e300, 0.0, math.inf])
    if solvers.get_preset(solver).adaptive and draw(st.booleans()):
        options.update(
            rtol=draw(tolerance),
            atol=draw(tolerance),
            dt0=draw(st.sampled_from([None, 0.1, 1e-300])),
        )
    else:
        options["dt0"] = draw(st.sampled_from([0.1, 0.25, 1e-300, 1e-9, 1e300]))
    if draw(st.booleans()):
        options["stop"] = solvers.FixedPointStop(atol=draw(st.sampled_from([1e-6, 1e-300])))
    if draw(st.booleans()):
        options["adjoint"] = draw(st.sampled_from(["checkpoint", "backsolve", "implicit"]))
    return options


@FUZZ
@given(options=st.one_of(solve_options(), plausible_solve_options()))
def test_solve_options_are_checked_or_refused(options, no_runtime_types):
    """`solvers.check_options`, which `solve` and the config files run before any work:
    any combination returns or raises `ValueError` (one line); never another error."""
    from et_ode import solvers

    adaptive = outcome(lambda: solvers.check_options(**options), entry="solvers.check_options")
    if adaptive is not REFUSED:
        check_accepted_options(options, adaptive)
        tally("solvers.check_options", "checked")


def check_accepted_options(options: dict, adaptive: bool) -> None:
    """What an accepted set of `solve` options must mean (the documented ranges and
    rules, written here independently of `check_options`): a known solver, real
    positive finite steps and tolerances, a horizon that moves forward, a known flow and
    adjoint, and steps adaptive exactly when a PID controller or the rtol/atol shortcut
    asks for them. A value accepted outside them is a silent acceptance: it fails."""
    import diffrax

    from et_ode import solvers

    def positive_finite(value) -> bool:
        return not isinstance(value, bool) and math.isfinite(value) and value > 0

    solver = options["solver"]
    if isinstance(solver, str):
        assert solver in solvers.SOLVER_NAMES, options
    else:
        assert isinstance(solver, diffrax.AbstractSolver), options
    t0, t1 = options.get("t0", 0.0), options.get("t1", 1.2)
    assert math.isfinite(t0) and t1 > t0, options
    for name in ("dt0", "dtmin"):
        if options.get(name) is not None:
            assert positive_finite(options[name]), (name, options)
    rtol, atol = options.get("rtol"), options.get("atol")
    if rtol is not None or atol is not None:  # the shortcut takes both, finite, >= 0
        assert rtol is not None and atol is not None, options
        assert all(math.isfinite(v) and v >= 0 for v in (rtol, atol)), options
        assert rtol + atol > 0, options
    if options.get("max_steps") is not None:
        steps = options["max_steps"]
        assert isinstance(steps, int) and not isinstance(steps, bool) and steps >= 1, options
    assert options.get("flow", "native") in ("native", "projected"), options
    assert options.get("adjoint", "checkpoint") in ("checkpoint", "backsolve", "implicit"), options
    assert options.get("save", "final") in ("final", "steps") or isinstance(
        options.get("save"), list
    ), options
    controller = options.get("stepsize_controller")
    if controller is not None:
        assert isinstance(controller, diffrax.AbstractStepSizeController), options
        expected = isinstance(controller, diffrax.AbstractAdaptiveStepSizeController)
    else:
        expected = options.get("rtol") is not None or (
            solver == "auto" and options.get("dt0", 0.1) is None
        )
    assert adaptive == expected or solver == "auto", (adaptive, options)


@pytest.fixture(scope="module")
def tiny_system():
    """One tiny float64 Energy Transformer and state (`[3, 4]`), shared by every solve."""
    import jax
    import jax.numpy as jnp

    model = et_ode.EnergyTransformer(4, 1, 2, 3, key=jax.random.key(0), dtype=jnp.float64)
    return model, jax.random.normal(jax.random.key(1), (3, 4), jnp.float64)


# Each new combination of options compiles a solve (a second or more): a twentieth of
# the budget, at least 6.
SOLVE_EXAMPLES = max(EXAMPLES // 20, 6)


@settings(FUZZ, max_examples=SOLVE_EXAMPLES)
@given(options=st.one_of(plausible_solve_options(), plausible_solve_options(), solve_options()))
def test_solve_runs_or_is_refused(options, tiny_system, no_runtime_types):
    """The options `check_options` accepts, given to `solvers.solve` itself (a tiny
    float64 model, at most 32 steps): it returns a finite solution, or stops with a
    `SolveError` saying why (the step cap, a step too small), or refuses with a
    one-line `ValueError`; never another error."""
    import numpy as np

    from et_ode import solvers

    try:
        solvers.check_options(**options)
    except ValueError:
        return  # counted by test_solve_options_are_checked_or_refused
    model, x0 = tiny_system
    options = dict(options, max_steps=32)  # cheap, and one compilation per combination
    try:
        sol = outcome(lambda: solvers.solve(model, x0, **options), entry="solvers.solve")
    except solvers.SolveError as error:
        assert str(error).strip() and "\n" not in str(error).strip(), str(error)
        TALLY["solvers.solve"]["refused"] += 1  # a failed solve, with its reason
        event("failed solve with its reason")
        return
    if sol is not REFUSED:
        assert np.all(np.isfinite(np.asarray(sol.x_final))), options
        tally("solvers.solve", "checked")


# ---------------------------------------------------------------- graph files (TU)
TU_FILES = {  # three graphs: a path (an edge listed twice), a triangle, a self-loop
    "A": [
        "1, 2",
        "2, 1",
        "2, 3",
        "3, 2",
        "3, 4",
        "4, 3",
        "1, 2",
        "5, 6",
        "6, 5",
        "6, 7",
        "7, 6",
        "5, 7",
        "7, 5",
        "8, 9",
        "9, 8",
        "10, 10",
    ],
    "graph_indicator": ["1", "1", "1", "1", "2", "2", "2", "3", "3", "3"],
    "graph_labels": ["-1", "1", "-1"],
    "node_labels": ["3", "5", "3", "7", "5", "5", "3", "7", "7", "3"],
    "node_attributes": [f"{i}.5, {-i}" for i in range(10)],
}
TU_TOKENS = [
    "0",
    "1",
    "-1",
    "11",
    "99999999999",
    "2.5",
    "nan",
    "inf",
    "x",
    "",
    " ",
    ",",
    "1,",
    ", 2",
    "1, 2, 3",
    "\t",
    "1e3",
    "0x1",
]


@st.composite
def tu_folders(draw):
    """The files of a small TU data set with one to three changes: a file dropped, a
    line dropped, duplicated or replaced by a token, a line appended."""
    files = {kind: list(lines) for kind, lines in TU_FILES.items()}
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(sorted(files)))
        lines = files[kind]
        change = draw(
            st.sampled_from(["drop file", "drop line", "duplicate", "replace", "append", "empty"])
        )
        if change == "drop file" and kind not in ("A", "graph_indicator", "graph_labels"):
            files.pop(kind)
        elif change == "empty":
            files[kind] = []
        elif lines and change in ("drop line", "duplicate", "replace"):
            at = draw(st.integers(0, len(lines) - 1))
            if change == "drop line":
                lines.pop(at)
            elif change == "duplicate":
                lines.insert(at, lines[at])
            else:
                lines[at] = draw(st.sampled_from(TU_TOKENS))
        else:
            lines.append(draw(st.sampled_from(TU_TOKENS)))
    return files


@FUZZ
@given(files=tu_folders())
def test_tu_files_are_read_or_refused(files, no_runtime_types):
    import numpy as np

    from et_ode.tasks import load_tu

    with tempfile.TemporaryDirectory() as root:
        folder = Path(root) / "TOY"
        folder.mkdir()
        for kind, lines in files.items():
            (folder / f"TOY_{kind}.txt").write_text("\n".join(lines) + "\n")
        graphs = outcome(lambda: load_tu(folder), entry="TU graph files (lines)")
    if graphs is REFUSED:
        return
    assert graphs.n_graphs == len(graphs.labels) >= 1
    for x, s, r in zip(graphs.features, graphs.senders, graphs.receivers):
        assert np.all(np.isfinite(x))
        assert s.size == 0 or (0 <= min(s.min(), r.min()) and max(s.max(), r.max()) < len(x))
    tally("TU graph files (lines)", "checked")


TEXT_DAMAGE = [
    b"\xff\xfe1\x00",
    "caf\u00e9, 1".encode("latin-1"),
    b"\x00\x00",
    b"\xc3",
    "1, 2".encode("utf-16"),
    b"\r\n\r\n",
    b"1\r2",
]


@FUZZ
@given(data=st.data())
def test_tu_file_bytes_are_read_or_refused(data, no_runtime_types):
    """One file of a valid TU data set with its bytes damaged (truncated, bits flipped,
    bytes inserted) or text that is not UTF-8: read, or refused with a message that
    names the folder or file; never a codec error alone or a traceback."""
    import numpy as np

    from et_ode.tasks import load_tu

    with tempfile.TemporaryDirectory() as root:
        folder = Path(root) / "TOY"
        folder.mkdir()
        for kind, lines in TU_FILES.items():
            (folder / f"TOY_{kind}.txt").write_text("\n".join(lines) + "\n")
        victim = folder / f"TOY_{data.draw(st.sampled_from(sorted(TU_FILES)))}.txt"
        intact = victim.read_bytes()
        if data.draw(st.booleans()):
            victim.write_bytes(data.draw(damaged(intact)))
        else:
            at = data.draw(st.integers(0, len(intact)))
            victim.write_bytes(intact[:at] + data.draw(st.sampled_from(TEXT_DAMAGE)) + intact[at:])
        try:
            graphs = load_tu(folder)
        except ValueError as error:
            message = str(error)
            assert "\n" not in message.strip() and str(folder) in message, message
            tally("TU graph files (bytes)", "refused")
            return
    tally("TU graph files (bytes)", "accepted")
    for x, s, r in zip(graphs.features, graphs.senders, graphs.receivers):
        assert np.all(np.isfinite(x))
        assert s.size == 0 or (0 <= min(s.min(), r.min()) and max(s.max(), r.max()) < len(x))
    tally("TU graph files (bytes)", "checked")


# ------------------------------------------------------------ graph checkpoints
@pytest.fixture(scope="module")
def graph_checkpoint_bytes(tmp_path_factory):
    """The shipped graph model (a node anomaly detector) saved as `et-ode graph train`
    saves a run (format 2: its header covered by a SHA-256 too)."""
    from et_ode.tasks import load_graph_model

    model, _, header = load_graph_model("graph_anomaly")
    path = tmp_path_factory.mktemp("fuzz") / "graph.eqx"
    save_checkpoint(path, {k: v for k, v in header.items() if k not in ("format", "blobs")}, model)
    return Intact(path.read_bytes())


@FUZZ
@given(data=st.data())
def test_damaged_graph_checkpoints_are_refused(graph_checkpoint_bytes, data, no_runtime_types):
    """`load_graph_model` on the shipped graph checkpoint truncated, with bits flipped
    or bytes inserted: refused with a `ValueError` naming the file (its SHA-256 covers
    every byte), the intact file loads."""
    from et_ode.tasks import load_graph_model

    damaged_bytes = data.draw(damaged(graph_checkpoint_bytes))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "run.eqx"
        path.write_bytes(damaged_bytes)
        if damaged_bytes == graph_checkpoint_bytes:
            load_graph_model(path)
            tally("graph checkpoints (load_graph_model)", "accepted")
            return
        assert (
            outcome(
                lambda: load_graph_model(path),
                str(path),
                entry="graph checkpoints (load_graph_model)",
            )
            is REFUSED
        )


# ------------------------------------------------------------------ image arrays
@st.composite
def image_arrays(draw):
    import numpy as np

    shape = draw(
        st.one_of(st.just((2, 8, 8, 3)), st.lists(st.integers(0, 9), max_size=5).map(tuple))
    )
    dtype = draw(
        st.sampled_from(
            ["float32", "float64", "uint8", "int32", "int64", "bool", "complex64", "float16"]
        )
    )
    values = draw(st.sampled_from(["unit", "0..255", "negative", "nan", "inf", "huge"]))
    rng = np.random.default_rng(draw(st.integers(0, 99)))
    array = {
        "unit": rng.uniform(size=shape),
        "0..255": rng.integers(0, 256, size=shape),
        "negative": -rng.uniform(size=shape),
        "huge": np.full(shape, 1e6),
        "nan": np.full(shape, np.nan),
        "inf": np.full(shape, np.inf),
    }[values]
    with warnings.catch_warnings():  # NaN to int, complex: on purpose
        warnings.simplefilter("ignore")
        return np.asarray(array).astype(dtype)


@FUZZ
@given(images=image_arrays())
def test_image_arrays_are_checked_or_refused(images, no_runtime_types):
    """`check_images` as `MaskedImageET.complete` and the data loaders run it: a batch
    of 8 x 8 RGB images in [0, 1] (or integers in 0..255) passes; anything else is
    refused."""
    import numpy as np

    from et_ode.tasks import check_images

    if (
        outcome(
            lambda: check_images(images, size=8, channels=3, unit_range=True),
            entry="image arrays (check_images)",
        )
        is REFUSED
    ):
        return
    assert images.ndim == 4 and images.shape[1:] == (8, 8, 3)
    assert np.all(np.isfinite(images)) and images.dtype.kind in "fiu"
    top = 1 if images.dtype.kind == "f" else 255  # integers: 0..255, converted explicitly
    assert images.size == 0 or (0 <= images.min() and images.max() <= top)
    tally("image arrays (check_images)", "checked")


# ------------------------------------------------------- fraud graphs (.mat files)
@st.composite
def fraud_files(draw):
    """A small CARE-GNN `.mat` layout (sparse `homo` adjacency, features, labels) with
    one to three changes: a key dropped, or replaced by an array of another shape,
    dtype or content (NaN, labels other than 0/1)."""
    import numpy as np
    import scipy.sparse

    n = 6
    data = {
        "homo": scipy.sparse.csc_matrix(
            (np.ones(6), ([0, 1, 2, 3, 4, 4], [1, 2, 3, 4, 5, 5])), shape=(n, n)
        ),
        "features": scipy.sparse.csc_matrix(np.arange(n * 3, dtype=float).reshape(n, 3)),
        "label": np.array([[0, 1, 0, 0, 1, 0]]),
    }
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from(["homo", "features", "label"]))
        change = draw(st.sampled_from(["drop", "shape", "nan", "labels", "text", "dense"]))
        if change == "drop":
            data.pop(key, None)
        elif change == "shape":
            data[key] = np.ones(tuple(draw(st.lists(st.integers(1, 7), min_size=1, max_size=3))))
        elif change == "nan":
            data[key] = np.full((n, 3) if key == "features" else (n, n), np.nan)
        elif change == "labels":
            data["label"] = np.array(
                [draw(st.lists(st.sampled_from([0, 1, 2, -1]), min_size=n, max_size=n))]
            )
        elif change == "text":
            data[key] = "not an array"
        else:
            data[key] = (
                np.asarray(data[key].todense())
                if key in data and hasattr(data[key], "todense")
                else np.zeros((n, n))
            )
    return data


@FUZZ
@given(data=fraud_files())
def test_fraud_files_are_read_or_refused(data, no_runtime_types):
    import numpy as np
    import scipy.io

    from et_ode.tasks import load_fraud_mat

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "YelpChi.mat"
        scipy.io.savemat(path, data)
        graph = outcome(lambda: load_fraud_mat(path), entry="fraud graph files (.mat)")
    if graph is REFUSED:
        return
    assert np.all(np.isfinite(graph.features)) and set(np.unique(graph.labels)) <= {0, 1}
    assert (
        graph.senders.size == 0 or max(graph.senders.max(), graph.receivers.max()) < graph.n_nodes
    )
    tally("fraud graph files (.mat)", "checked")


@FUZZ
@given(data=st.data())
def test_damaged_npz_bytes_are_refused(data, no_runtime_types):
    """The authors' `.npz` (a zip archive) truncated, with bits flipped, or with bytes
    inserted: read or refused, never a traceback from the zip or NumPy readers."""
    import numpy as np

    from et_ode.tasks import read_authors_checkpoint

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "plaindict_ckpt.npz"
        np.savez(path, **_authors_arrays())
        want = read_authors_checkpoint(path)[3]
        path.write_bytes(data.draw(damaged(path.read_bytes())))
        read = outcome(
            lambda: read_authors_checkpoint(path), str(path), entry="authors' .npz bytes"
        )
    if read is not REFUSED:  # damage outside the arrays (zip metadata): values intact
        parameters = read[3]
        assert parameters.keys() == want.keys()
        assert all(np.array_equal(parameters[k], want[k]) for k in want)
        tally("authors' .npz bytes", "checked")


def test_the_checks_of_accepted_inputs_fail_on_planted_silent_acceptances():
    """The checks the properties run on an accepted input, on planted acceptances: an
    infinite tolerance taken as valid, and a command-line option that never reaches its
    job (`--repeats 2` handed on as 1) fail them; the honest cases pass."""
    from et_ode.cli._jobs import CompareSolversSettings

    check_accepted_options(dict(solver="tsit5", rtol=1e-6, atol=1e-8), True)
    with pytest.raises(AssertionError):
        check_accepted_options(dict(solver="tsit5", rtol=math.inf, atol=1e-8), True)
    with pytest.raises(AssertionError):  # adaptive steps reported for constant ones
        check_accepted_options(dict(solver="euler", dt0=0.1), True)
    argv = ["compare-solvers", "--repeats", "2"]
    honest = Reached("compare_solvers_job", (), {"settings": CompareSolversSettings(repeats=2)})
    check_reached(argv, honest)
    dropped = Reached(
        "compare_solvers_job",
        (),
        {"settings": CompareSolversSettings(repeats=1), "meta": {"repeats": 2}},
    )
    with pytest.raises(AssertionError, match="repeats"):
        check_reached(argv, dropped)
    with pytest.raises(AssertionError):  # the wrong job
        check_reached(argv, Reached("study_job", (), {}))
