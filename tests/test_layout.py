"""The architecture, enforced: layers import only downwards, no import cycles, no reaching
into another package's private (underscore) modules, the rooms of `et_ode.tasks` apart,
and imports inside functions only for heavy optional dependencies. Parses the source; imports
nothing of the project."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Source folder -> the dotted name it is installed (or run) as.
FOLDERS = {
    "et_ode": "et_ode",
    "solvers": "et_ode.solvers",
    "analysis": "et_ode.analysis",
    "benchmarks": "benchmarks",
    "paper_figures": "paper_figures",
}

# Lower number = lower layer. A module may import project modules of its own layer or
# below; `solvers` additionally imports nothing of the model. A module belongs to the
# first prefix it matches (the rooms before their home package).
LAYERS = [
    ("et_ode.records", 0),  # atomic writes, package versions: used by every layer
    ("et_ode.vocab", 0),  # the named choices (flows, adjoints, activations)
    ("et_ode.core", 1),  # the model
    ("et_ode.solvers", 1),  # generic, model-free
    ("et_ode.tasks.images", 2),  # room: masked image completion
    ("et_ode.tasks.graphs", 2),  # room: node anomaly detection, graph classification
    ("et_ode.tasks", 2),  # the shared pieces: checkpoints, dynamics, schema, shipped models
    ("et_ode.analysis", 3),  # studies
    ("et_ode.cli", 4),  # applications
    ("benchmarks", 4),
    ("paper_figures", 4),
]

# The rooms of a package, each a subpackage for one task, and their home package. A room
# imports its own modules and the home's shared modules (private ones included), never
# another room; the home's shared modules import no room; only the home package itself
# (its `__init__`, which exports every public name) imports from the rooms' private
# modules.
ROOMS = {"et_ode.tasks.images": "et_ode.tasks", "et_ode.tasks.graphs": "et_ode.tasks"}

# Imports allowed inside functions, each with its reason.
DEFERRED_OK = {
    "scipy": "a second of import time, needed by one baseline and the references",
    "tensorflow_datasets": "optional extra (tfds), imported only when a TFDS source is used",
    "imageio": "video writing only; pulls in the ffmpeg plug-in",
    "PIL": "image files only (GIF fallback, photo folders)",
    "skimage": "the embedded photos only; scikit-image's data module is slow to import",
    "matplotlib": "plotting back ends only, where a figure is drawn",
}
# The benchmark runner and the rows that run in fresh processes set up JAX (forced host
# devices, the multi-process runtime) before anything imports it: their imports wait.
DEFERRED_FILES = {
    "benchmarks/__init__.py",
    "benchmarks/_run.py",
    "benchmarks/_devices.py",
    "benchmarks/_distributed.py",
}


def _module_name(path: Path) -> str:
    relative = path.relative_to(ROOT)
    parts = list(relative.with_suffix("").parts)
    parts[0] = FOLDERS[parts[0]]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources():
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            yield path, _module_name(path)


MODULES = {name: path for path, name in _sources()}


# The package root `et_ode` is lazy (PEP 562) and hands out every layer's names
# (`et_ode.EnergyTransformer`, `et_ode.analysis`, ...): only the top layer may import it
# bare, as users do.
ROOT_PACKAGE = ("et_ode", 4)


def _layer(module: str):
    """`(prefix, layer)` of a project module, `None` for anything else."""
    if module == ROOT_PACKAGE[0]:
        return ROOT_PACKAGE
    for prefix, layer in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return prefix, layer
    return None


def _resolve(importer: str, is_package: bool, node, known) -> list[str]:
    """The project modules an import statement loads (absolute dotted names); `known`:
    the modules that exist (`from package import name` loads `package.name` if it is
    one, else `package`)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = importer if is_package else importer.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    targets = []
    for alias in node.names:
        candidate = f"{base}.{alias.name}"
        targets.append(candidate if candidate in known else base)
    return targets


def _imports(path: Path, module: str):
    """`(target, lineno, deferred)` for every import in the file."""
    return imports_in(path.read_text(), module, path.name == "__init__.py", str(path))


def imports_in(source: str, module: str, is_package: bool = False, filename="<source>", known=None):
    """`(target, lineno, deferred)` for every import in `source`, the text of `module`;
    `known`: the modules that exist (default: the project's)."""
    known = MODULES if known is None else known
    tree = ast.parse(source, filename=filename)
    found = []

    def visit(node, deferred):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                for target in _resolve(module, is_package, child, known):
                    found.append((target, child.lineno, deferred))
            inner = deferred or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            visit(child, inner)

    visit(tree, False)
    return found


ALL_IMPORTS = {module: _imports(path, module) for module, path in MODULES.items()}


def _project(target: str) -> bool:
    return _layer(target) is not None


# Each check takes `{module: [(target, lineno, deferred), ...]}` and returns its problems,
# one line each; the tests run them on the project's modules and on planted ones.
def unlayered_modules(imports) -> list[str]:
    return [
        f"{module} belongs to no layer: add it to LAYERS in tests/test_layout.py"
        for module in imports
        if _layer(module) is None
    ]


def layer_problems(imports) -> list[str]:
    problems = []
    for module, found in imports.items():
        own = _layer(module)
        for target, line, _ in found:
            theirs = _layer(target)
            if own is None or theirs is None:
                continue  # not the project's (an unlayered module is its own problem)
            if theirs[1] > own[1]:
                problems.append(f"{module}:{line} imports {target} from a higher layer")
            if own[0] == "et_ode.solvers" and theirs[1] > 0 and theirs[0] != "et_ode.solvers":
                problems.append(f"{module}:{line}: solvers must import no model code ({target})")
            if own[0] == "et_ode.core" and theirs[0] == "et_ode.solvers":
                problems.append(f"{module}:{line}: the model does not depend on the solvers")
    return problems


def _room(module: str):
    """The room (a key of `ROOMS`) that `module` is in, `None` if none."""
    for room in ROOMS:
        if module == room or module.startswith(room + "."):
            return room
    return None


def _private_allowed(package: str, parent: str) -> bool:
    """Whether modules of `package` may import the private modules of `parent`: their
    own, and across a room and its home (a room uses the home's shared modules; the
    home package exports the rooms' names)."""
    if parent == package:
        return True
    if _room(package) == package and ROOMS[package] == parent:
        return True
    return _room(parent) == parent and ROOMS[parent] == package


def private_problems(imports, packages) -> list[str]:
    """`packages`: module -> whether it is a package (`__init__.py`)."""
    problems = []
    for module, found in imports.items():
        package = module if packages[module] else module.rpartition(".")[0]
        for target, line, _ in found:
            if not _project(target):
                continue
            parent, _, leaf = target.rpartition(".")
            if leaf.startswith("_") and not _private_allowed(package, parent):
                problems.append(f"{module}:{line} imports the private module {target}")
    return problems


def room_problems(imports) -> list[str]:
    """A room importing another room, or a shared module of a home importing a room."""
    problems = []
    for module, found in imports.items():
        own = _room(module)
        for target, line, _ in found:
            theirs = _room(target)
            if theirs is None or theirs == own:
                continue
            if own is not None:
                problems.append(
                    f"{module}:{line}: the room {own} imports the room {theirs} "
                    f"({target}); move what both use to {ROOMS[own]}"
                )
            elif module.startswith(ROOMS[theirs] + ".") and module != ROOMS[theirs]:
                problems.append(
                    f"{module}:{line}: a shared module of {ROOMS[theirs]} "
                    f"imports the room {theirs} ({target})"
                )
    return problems


def cycle_problems(imports) -> list[str]:
    graph = {
        module: sorted({t for t, _, _ in found if t in imports and t != module})
        for module, found in imports.items()
    }
    state, stack, cycles = {}, [], []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in graph.get(node, []):
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for module in graph:
        if module not in state:
            visit(module)
    return [" -> ".join(cycle) for cycle in cycles]


def deferred_problems(imports, exempt=()) -> list[str]:
    """`exempt`: modules whose imports may all wait (`DEFERRED_FILES`)."""
    return [
        f"{module}:{line} imports {target} inside a function"
        for module, found in imports.items()
        if module not in exempt
        for target, line, deferred in found
        if deferred and target.split(".")[0] not in DEFERRED_OK
    ]


PACKAGES = {module: path.name == "__init__.py" for module, path in MODULES.items()}
EXEMPT = {
    module
    for module, path in MODULES.items()
    if path.relative_to(ROOT).as_posix() in DEFERRED_FILES
}


def test_every_module_has_a_layer():
    assert MODULES and not unlayered_modules(ALL_IMPORTS), unlayered_modules(ALL_IMPORTS)


def test_layers_import_only_downwards():
    problems = layer_problems(ALL_IMPORTS)
    assert not problems, "\n".join(problems)


def test_no_private_module_of_another_package():
    problems = private_problems(ALL_IMPORTS, PACKAGES)
    assert not problems, "\n".join(problems)


def test_rooms_import_neither_each_other_nor_from_the_shared_modules():
    assert all(room in MODULES for room in ROOMS)
    problems = room_problems(ALL_IMPORTS)
    assert not problems, "\n".join(problems)


def test_no_import_cycles():
    # The package `et_ode` itself is lazy (PEP 562): importing it loads no submodule.
    assert not [t for t, _, deferred in ALL_IMPORTS["et_ode"] if _project(t)]
    problems = cycle_problems(ALL_IMPORTS)
    assert not problems, "\n".join(problems)


def test_imports_inside_functions_only_for_heavy_optional_dependencies():
    problems = deferred_problems(ALL_IMPORTS, EXEMPT)
    assert not problems, "\n".join(problems)


def test_the_checks_catch_planted_imports():
    """The checker itself: modules planted beside the project's, each breaking one rule,
    are each reported by the check for that rule (and the project alone by none)."""
    planted = {
        "et_ode.solvers._planted": (
            "import et_ode\n"  # the lazy root: every layer
            "from et_ode.analysis import _stability\n"  # higher layer, private
            "from et_ode.core import EnergyTransformer\n"  # model code in solvers
            "def f():\n    import optax\n"
        ),  # light import deferred
        "et_ode.core._planted": "from et_ode.solvers import solve\n",
        "et_ode.tasks._cycle_a": "from et_ode.tasks import _cycle_b\n",
        "et_ode.tasks._cycle_b": "from et_ode.tasks import _cycle_a\n",
        "et_ode.tasks.graphs._planted": (
            "from et_ode.tasks.images import _config\n"  # the other room, private
            "from et_ode.tasks import _checkpoint\n"  # the home's shared module: fine
            "from et_ode.tasks.images import MaskedImageET\n"
        ),  # the other room
        "et_ode.tasks._planted_shared": "from et_ode.tasks import graphs\n",  # a room
        "et_ode.core._planted_private": "from et_ode.tasks import _checkpoint\n",
        "et_ode.plugins": "import jax\n",  # no layer
    }
    imports = dict(ALL_IMPORTS)
    known = set(MODULES) | set(planted)
    imports.update(
        {name: imports_in(source, name, known=known) for name, source in planted.items()}
    )
    packages = dict(PACKAGES, **{name: False for name in planted})

    assert unlayered_modules(imports) == [
        "et_ode.plugins belongs to no layer: add it to LAYERS in tests/test_layout.py"
    ]
    layers = layer_problems(imports)
    assert "et_ode.solvers._planted:1 imports et_ode from a higher layer" in layers
    assert (
        "et_ode.solvers._planted:2 imports et_ode.analysis._stability from a higher layer" in layers
    )
    assert any("solvers must import no model code (et_ode.core" in p for p in layers)
    assert any(p.startswith("et_ode.core._planted:1: the model does not depend") for p in layers)
    assert private_problems(imports, packages) == [
        "et_ode.solvers._planted:2 imports the private module et_ode.analysis._stability",
        "et_ode.tasks.graphs._planted:1 imports the private module et_ode.tasks.images._config",
        "et_ode.core._planted_private:1 imports the private module et_ode.tasks._checkpoint",
    ]
    assert room_problems(imports) == [
        "et_ode.tasks.graphs._planted:1: the room et_ode.tasks.graphs imports the room "
        "et_ode.tasks.images (et_ode.tasks.images._config); move what both use to "
        "et_ode.tasks",
        "et_ode.tasks.graphs._planted:3: the room et_ode.tasks.graphs imports the room "
        "et_ode.tasks.images (et_ode.tasks.images); move what both use to et_ode.tasks",
        "et_ode.tasks._planted_shared:1: a shared module of et_ode.tasks imports the room "
        "et_ode.tasks.graphs (et_ode.tasks.graphs)",
    ]
    assert cycle_problems(imports) == [
        "et_ode.tasks._cycle_a -> et_ode.tasks._cycle_b -> et_ode.tasks._cycle_a"
    ]
    assert deferred_problems(imports, EXEMPT) == [
        "et_ode.solvers._planted:5 imports optax inside a function"
    ]


@pytest.mark.parametrize("module", ["et_ode.solvers", "et_ode.core"])
def test_light_imports_load_no_training_or_data_code(module):
    """In a fresh interpreter: `import et_ode.solvers` loads no model, task, training or
    data code (optax, tqdm, tfds); `import et_ode.core` no solvers or tasks."""
    import subprocess
    import sys

    forbidden = {
        "et_ode.solvers": [
            "et_ode.core",
            "et_ode.tasks",
            "et_ode.analysis",
            "optax",
            "tqdm",
            "tensorflow_datasets",
            "matplotlib",
        ],
        "et_ode.core": ["et_ode.solvers", "et_ode.tasks", "et_ode.analysis", "optax", "tqdm"],
    }[module]
    heavy = "{'optax', 'tqdm', 'tensorflow_datasets', 'matplotlib'}"
    code = (
        f"import sys, {module}; "
        f"print(','.join(m for m in sys.modules "
        f"if m.split('.')[0] in {heavy} or m.startswith('et_ode.')))"
    )
    loaded = (
        subprocess.run(
            [sys.executable, "-c", code],
            check=True,
            capture_output=True,
            text=True,
            cwd=ROOT / "tests",
        )
        .stdout.strip()
        .split(",")
    )
    bad = [m for m in loaded for f in forbidden if m == f or m.startswith(f + ".")]
    assert not bad, f"import {module} loaded {sorted(set(bad))}"


# ------------------------------------------ typed vocabularies, checked at run time
# (These import et_ode: what the layout promises beyond the source's imports.)
def test_jaxtyping_import_hook_is_active():
    """The suite runs every annotation of et_ode through jaxtyping and beartype
    (`--jaxtyping-packages` in pyproject.toml). If the hook were off, this rank-1 state
    would reach the energy's own code and fail there with another error, or not at all."""
    import jax.numpy as jnp
    import jaxtyping

    from conftest import make_model

    model = make_model()
    assert model.energy(jnp.zeros((6, 16))).shape == ()  # the right shape passes
    with pytest.raises(jaxtyping.TypeCheckError, match="N D"):
        model.energy(jnp.zeros((16,)))  # [D], not [N, D]


def test_stop_reasons_are_the_enumeration():
    """`stats["stop"]` is an item of `solvers.StopReason` (an `eqx.Enumeration`, as
    diffrax's RESULTS); `stop_code` indexes `STOP_REASONS`, whose names are its items."""
    from conftest import make_model, make_state
    from et_ode import solvers

    sol = solvers.solve(make_model(), make_state())  # the paper's 12 Euler steps
    stop = sol.stats["stop"]
    assert stop._enumeration is solvers.StopReason
    assert bool(stop == solvers.StopReason.t1) and not bool(sol.converged)
    assert solvers.STOP_REASONS[int(sol.stats["stop_code"])] == sol.stats["stop_reason"] == "t1"
    assert all(hasattr(solvers.StopReason, name) for name in solvers.STOP_REASONS)
    # the step-size underflow message names the solver that handles stiffness at any size,
    # and kvaerno5's limit as solve enforces it
    message = solvers.StopReason[solvers.StopReason.dt_underflow]
    assert "solver='auto'" in message and str(solvers.DENSE_JACOBIAN_MAX_STATE) in message


def test_dynamics_leave_the_step_cap_to_solve():
    """`Dynamics.max_steps` defaults to None: training and `reconstruct` get `solve`'s exact
    constant-step cap (and every-step checkpoints), not a number of their own."""
    from et_ode.tasks import Dynamics

    assert Dynamics().max_steps is None and Dynamics().solve_options()["max_steps"] is None
