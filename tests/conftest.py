"""Test session set-up: float64 everywhere unless a test asks for float32 explicitly,
small shared models so that compiled functions are reused across tests, the installed
wheel (built and installed once per session, shared by test_install.py and test_cli.py),
the compiler settings of the suite, and the order in which `make test` hands modules to
its two xdist workers."""

import atexit
import os
import shutil
import sys
import tempfile

# ------------------------------------------------------------------- compiler settings
# Compiling is most of the suite's CPU time (tiny models, hundreds of distinct solve
# programs), and XLA's CPU backend spends most of a compile optimising code that then runs
# for milliseconds. The suite compiles with the legacy fusion emitters and without LLVM
# optimisation (-O0): compiles take about a third as long, the suite half (measured:
# docs/tests.md), and compiled code runs 2-3x slower, which only the shipped models'
# evaluation would feel (test_shipped.py runs it in a process with XLA's defaults). The
# numbers checked do not depend on it beyond rounding: test_shipped.py also computes a
# few in that process and compares. ET_ODE_TEST_XLA_DEFAULTS=1 runs the whole suite with
# XLA's defaults. The tests' subprocesses inherit the setting (`suite_xla_flags`).
SUITE_XLA_FLAGS = (
    "--xla_cpu_use_fusion_emitters=false",
    "--xla_backend_optimization_level=0",
    "--xla_cpu_parallel_codegen_split_count=1",
)


def given_xla_flags() -> list[str]:
    """The `XLA_FLAGS` the suite was started with (the environment's, without the suite's
    own compiler settings)."""
    return [flag for flag in os.environ.get("XLA_FLAGS", "").split() if flag not in SUITE_XLA_FLAGS]


def suite_xla_flags(*extra: str, inherit: bool = True) -> str:
    """`XLA_FLAGS` for the suite and its subprocesses: the suite's compiler settings, then
    (with `inherit`) `given_xla_flags()`, then `extra`; a later flag wins over an earlier
    one."""
    ours = () if os.environ.get("ET_ODE_TEST_XLA_DEFAULTS") else SUITE_XLA_FLAGS
    return " ".join([*ours, *(given_xla_flags() if inherit else ()), *extra])


def _backend_started() -> bool:
    """Whether JAX has started a backend in this process (it reads `XLA_FLAGS` then)."""
    bridge = sys.modules.get("jax._src.xla_bridge")
    started = getattr(bridge, "backends_are_initialized", None)
    return bool(started and started())


# A plugin that computed with JAX before this file would leave the flags unread.
assert not _backend_started(), "JAX started before tests/conftest.py set XLA_FLAGS"
os.environ["XLA_FLAGS"] = suite_xla_flags()  # before JAX starts its CPU backend

# ------------------------------------------------------------------ compilation cache
# The suite's processes share one JAX persistent compilation cache, new for each run
# (unless JAX_COMPILATION_CACHE_DIR is given): the two xdist workers compile several
# hundred of the same programs, and the command-line tests' subprocesses many of the
# in-process tests' (measured: docs/tests.md). A worker finds the folder by its parent's
# process id, the session's; the session's process removes it at exit.
_SESSION_PID = os.getppid() if os.environ.get("PYTEST_XDIST_WORKER") else os.getpid()
SUITE_CACHE = os.environ.get("JAX_COMPILATION_CACHE_DIR") or os.path.join(
    tempfile.gettempdir(), f"et-ode-suite-jax-cache-{_SESSION_PID}"
)
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    os.environ["JAX_COMPILATION_CACHE_DIR"] = SUITE_CACHE  # read by the subprocesses too
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        atexit.register(shutil.rmtree, SUITE_CACHE, ignore_errors=True)

# ------------------------------------------------------------------ source locations
# JAX writes each operation's Python traceback (up to 100 frames) into the program it
# lowers, for debuggers and profilers; under pytest those stacks are deep, and writing
# them is part of every compile. The suite keeps one frame per operation: no number
# changes (the locations are metadata), and lowering and compiling take about 3 % less
# (docs/tests.md). The tests' subprocesses inherit it.
os.environ.setdefault("JAX_INCLUDE_FULL_TRACEBACKS_IN_LOCATIONS", "0")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
# In case a plugin imported JAX before the variables above were set.
jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
jax.config.update(
    "jax_persistent_cache_min_compile_time_secs",
    float(os.environ.get("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", 1)),
)
jax.config.update(
    "jax_persistent_cache_min_entry_size_bytes",
    int(os.environ.get("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", 0)),
)
jax.config.update(
    "jax_include_full_tracebacks_in_locations",
    os.environ["JAX_INCLUDE_FULL_TRACEBACKS_IN_LOCATIONS"] not in ("0", "false", "False"),
)

import contextlib  # noqa: E402
import subprocess  # noqa: E402
from pathlib import Path  # noqa: E402

import jax.numpy as jnp  # noqa: E402
import jaxtyping  # noqa: E402
import pytest  # noqa: E402


# ------------------------------------------------------------------- import order
# jaxtyping's import hook (pyproject.toml: --jaxtyping-packages) gives every module imported
# while an et_ode module executes its own bytecode tag, third-party ones included: in a
# fresh .venv the two workers would compile diffrax, equinox, scipy, matplotlib, optax and
# more from source under that tag, and the subprocesses (which run without the hook) again
# under the plain one. Imported here first, outside the hook, they are compiled once for
# every process. (The hook does not change them: it instruments et_ode only.)
def import_et_odes_dependencies_first() -> None:
    """Import every module that a module of et_ode imports at its top level (read from
    the sources; submodules named in `from X import Y` included), except et_ode's own."""
    import ast
    import importlib

    modules: dict[str, set[str]] = {}  # module -> the names taken from it
    for folder in ("et_ode", "solvers", "analysis"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        modules.setdefault(alias.name, set())
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    modules.setdefault(node.module, set()).update(a.name for a in node.names)
    for name, taken in sorted(modules.items()):
        if name.split(".")[0] == "et_ode":
            continue
        module = importlib.import_module(name)
        for attribute in sorted(taken):
            try:  # a submodule, or an attribute that its package loads lazily (pydantic)
                getattr(module, attribute)
            except AttributeError:
                importlib.import_module(f"{name}.{attribute}")


ROOT = Path(__file__).resolve().parents[1]
import_et_odes_dependencies_first()

import et_ode  # noqa: E402

N_TOKENS, DIM = 6, 16


def make_model(hopfield="relu", self_attention=False, init_std=0.3, dtype=jnp.float64, seed=0):
    return et_ode.EnergyTransformer(
        DIM,
        2,
        8,
        24,
        key=jax.random.key(seed),
        hopfield=hopfield,
        self_attention=self_attention,
        init_std=init_std,
        dtype=dtype,
    )


def make_state(seed=1, dtype=jnp.float64, batch=()):
    return jax.random.normal(jax.random.key(seed), batch + (N_TOKENS, DIM), dtype)


@pytest.fixture(scope="session")
def model():
    """The default tiny model: ReLU Hopfield, no self-attention, float64."""
    return make_model()


@pytest.fixture(scope="session")
def smooth_model():
    """A smooth model (softmax Hopfield) for order-of-convergence and reference tests."""
    return make_model(hopfield="softmax")


@pytest.fixture(scope="session")
def x0():
    return make_state()


def run_page_example(
    page: Path, index: int | str, namespace: dict | None = None
) -> tuple[dict, str, str]:
    """The `index`-th Python block of the how-to page `page` (or the one block that holds
    the string `index`: found wherever the page puts it), run as written (in `namespace`,
    where it goes on from an earlier block's): its namespace, what it printed, and the
    first text block after it (what the page says it prints)."""
    import io
    import re

    text = page.read_text()
    blocks = list(re.finditer(r"```python\n(.*?)```", text, re.S))
    if isinstance(index, str):
        holding = [i for i, block in enumerate(blocks) if index in block.group(1)]
        assert len(holding) == 1, f"{len(holding)} Python blocks of {page.name} hold {index!r}"
        (index,) = holding
    code = blocks[index].group(1)
    after = re.search(r"```text\n(.*?)```", text[blocks[index].end() :], re.S)
    printed = after.group(1) if after else ""
    namespace = {} if namespace is None else namespace
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(page), "exec"), namespace)
    return namespace, out.getvalue(), printed


@contextlib.contextmanager
def runtime_types_off():
    """Run-time type checks off inside the block (see `no_runtime_types`)."""
    config = jaxtyping.config
    before = config.jaxtyping_disable
    config.update("jaxtyping_disable", True)
    try:
        yield
    finally:
        config.update("jaxtyping_disable", before)


@pytest.fixture
def no_runtime_types():
    """Run-time type checks off for one test. The suite runs with jaxtyping's import hook
    (`--jaxtyping-packages` in pyproject.toml): every annotation of et_ode is checked by
    beartype when it is called. A test that hands a function a value of the wrong type on
    purpose, to check et_ode's own error message for it, asks for this fixture (or uses
    `runtime_types_off` around the one call): else the type check would refuse the call
    before et_ode's own check runs."""
    with runtime_types_off():
        yield


# ------------------------------------------------------------------ xdist: units, order
# `make test` runs `pytest -n 2 --dist loadfile`: each module is one unit of work, so its
# module fixtures run once. Two changes (`pytest_xdist_make_scheduler` below):
# test_install.py joins test_cli.py's unit, as both use the session fixture
# `installed_demo` (the demo run from the installed wheel), which then runs once; and the
# units go to the workers in the order of `COSTS`, the longest first, so that the two
# workers finish together (xdist's own order is by number of tests, and the longest
# module last would leave one worker idle). The costs are seconds per module (setup, call
# and teardown, `--durations=0`; test_install.py's in test_cli.py's) measured from a fresh
# clone on the 2-core AMD EPYC VM (2026-11-27, f21b930); only their order matters. A
# module not listed (each under a second) counts as `DEFAULT_COST`. Re-measure when a
# module grows: a long one sorted late leaves one worker alone at the end (before this
# measurement the landscape's modules, about 450 s of the suite's 1,855, were sorted last).
# (`--dist loadgroup` with `xdist_group` marks would do the joining, but pytest-xdist 3.8
# cannot group under pytest 9: it renames `item._nodeid`, which pytest 9's `nodeid` no
# longer reads.)
JOINED = {"test_install.py": "test_cli.py"}
COSTS = {
    "test_cli.py": 146,
    "test_study_outputs.py": 92,  # 14 studies on a tiny model, 2026-12-02
    "test_results_energy.py": 28,
    "test_results_tasks.py": 26,
    "test_results_landscape.py": 14,
    "test_results.py": 8,
    "test_authors_checkpoint.py": 127,
    "test_analysis.py": 98,
    "test_benchmarks.py": 93,
    "test_graphs.py": 85,
    "test_stiff_continuation.py": 74,
    "test_shipped.py": 71,
    "test_verdicts.py": 66,
    "test_gradients.py": 72,
    "test_reliability.py": 63,
    "test_continuation.py": 63,
    "test_counting.py": 58,
    "test_sparse_attention.py": 56,
    "test_lyapunov_spectrum.py": 54,
    "test_trajectories.py": 53,
    "test_own_model.py": 47,
    "test_solver_objects.py": 45,
    "test_langevin.py": 42,  # measured alone 2026-12-02, Intel Xeon VM
    "test_sde_orders.py": 55,  # measured alone 2026-12-02, Intel Xeon VM (53-57 s)
    "test_weighted_attention.py": 10,  # measured alone 2026-12-02, Intel Xeon VM
    "test_paper_classifier.py": 14,  # measured alone 2026-12-02, Intel Xeon VM
    "test_escape.py": 33,  # in the suite 2026-12-02 (fresh clone, durations), Intel Xeon VM
    "test_auto_solver.py": 37,
    "test_figure_layout.py": 37,
    "test_fold_curve.py": 44,
    "test_figures.py": 32,
    "test_fuzz.py": 26,
    "test_long_horizon.py": 26,
    "test_training.py": 20,
    "test_own_images.py": 25,  # about 12 s on the Intel Xeon VM (2026-12-02), AMD about 2x
    "test_docs_examples.py": 20,
    "test_fixed_points.py": 20,
    "test_docs_recipe.py": 19,
    "test_basins.py": 17,
    "test_basin_continuation.py": 13,
    "test_anderson.py": 15,
    "test_errors.py": 15,
    "test_docs.py": 14,
    "test_multiprocess.py": 14,
    "test_order.py": 13,
    "test_model.py": 12,
    "test_readme.py": 9,
    "test_layout.py": 4,
    "test_eigen.py": 4,
    "test_graph_data.py": 2,
    "test_data.py": 1,
}
DEFAULT_COST = 1


def _unit(module_path: str) -> str:
    """The unit of work of a module (`tests/test_install.py` -> `tests/test_cli.py`)."""
    folder, _, name = module_path.rpartition("/")
    return f"{folder}/{JOINED[name]}" if name in JOINED else module_path


def pytest_collection_modifyitems(config, items):
    """Modules sorted by `COSTS`, the longest first (a stable sort: the tests of a module
    keep their order, and modules of equal cost their collection order)."""

    def cost(item):
        return COSTS.get(JOINED.get(item.path.name, item.path.name), DEFAULT_COST)

    items.sort(key=lambda item: -cost(item))


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, when it is installed
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling  # type: ignore[import-untyped]

    class JoinedLoadFile(LoadFileScheduling):
        def _split_scope(self, nodeid):
            return _unit(super()._split_scope(nodeid))

    config.option.loadscopereorder = False  # keep the collection's order (sorted above)
    return JoinedLoadFile(config, log)


# ----------------------------------------------------------------------- installed wheel
_COPY_IGNORE = shutil.ignore_patterns(
    ".git",
    ".venv",
    ".venv-cuda",
    "build",
    "dist",
    "site",
    "runs",
    "*.egg-info",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    ".mypy_cache",
)
# A researcher's own modules with the generic names that et_ode must never import.
SHADOWS = ("analysis", "solvers")
SHADOW_SOURCE = """\
# A module of the working folder that shares a name with one of et_ode's layers.
from pathlib import Path

Path(__file__).with_name("IMPORTED-" + Path(__file__).stem).touch()
raise ImportError(f"{__file__} was imported instead of et_ode's own module")
"""


def _checkout_files(root: Path):
    """The files a fresh clone holds plus the untracked ones git does not ignore (the
    checkout as it is, uncommitted changes included); `None` without git."""
    try:
        done = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            check=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return [name for name in done.stdout.decode().split("\0") if name]


def _copy_checkout(destination: Path) -> Path:
    """A copy of the checkout to build from: `pip wheel .` in the checkout itself would
    write build/ and *.egg-info there (and two runs at once would share them)."""
    files = _checkout_files(ROOT)
    if files is None:
        shutil.copytree(ROOT, destination, ignore=_COPY_IGNORE)
        return destination
    for name in files:
        source = ROOT / name
        if source.is_file():  # deleted but not yet staged: skip
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return destination


def _pip(*args, cwd=None):
    done = subprocess.run(
        [sys.executable, "-m", "pip", *args, "--quiet", "--disable-pip-version-check"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"pip {' '.join(args)}:\n{done.stdout}\n{done.stderr}"[-4000:]


@pytest.fixture(scope="session")
def installed_wheel(tmp_path_factory):
    """`pip wheel . --no-deps` (from a copy of the checkout) and a non-editable install of
    that wheel with `pip install --no-deps --target`. Returns `(wheel, target, source)`,
    `source` the copy the wheel was built from."""
    base = tmp_path_factory.mktemp("wheel")
    source = _copy_checkout(base / "source")
    _pip("wheel", str(source), "--no-deps", "-w", str(base / "dist"))
    (wheel,) = (base / "dist").glob("et_ode-*.whl")
    target = base / "target"
    # --no-compile: the .pyc files that appear later show which code ran from `target`.
    _pip("install", "--no-deps", "--no-compile", "--target", str(target), str(wheel))
    return wheel, target, source


@pytest.fixture(scope="session")
def shadowed_folder(tmp_path_factory):
    """A working folder with its own `analysis.py` and `solvers.py`, which leave a marker
    file `IMPORTED-<name>` and raise if anything imports them."""
    folder = tmp_path_factory.mktemp("work")
    for name in SHADOWS:
        (folder / f"{name}.py").write_text(SHADOW_SOURCE)
    return folder


def installed_env(target: Path) -> dict:
    """The environment that runs the installed copy: `target` first on the path (ahead of
    the editable install), bytecode written, the working folder on the path."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONSAFEPATH", "PYTHONDONTWRITEBYTECODE")
    }
    env["PYTHONPATH"] = str(target)
    return env


@pytest.fixture(scope="session")
def installed_demo(installed_wheel, shadowed_folder, tmp_path_factory):
    """`python -m et_ode.cli demo --quick` from the installed wheel, run in the shadowed
    folder: the one demo run of the session (test_install.py checks how it ran,
    test_cli.py what it wrote). Returns `(completed process, out folder)`."""
    _, target, _ = installed_wheel
    out = tmp_path_factory.mktemp("demo") / "run"
    done = subprocess.run(
        [sys.executable, "-m", "et_ode.cli", "demo", "--quick", "--no-progress", "--out", str(out)],
        cwd=shadowed_folder,
        env=installed_env(target),
        capture_output=True,
        text=True,
        timeout=1200,
    )
    return done, out
