"""The architecture, enforced: layers import only downwards, no import cycles, no reaching
into another package's private (underscore) modules, and imports inside functions only
for heavy optional dependencies. Parses the source; imports nothing of the project."""

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
# below; `solvers` additionally imports nothing of the model.
LAYERS = [
    ("et_ode.records", 0),   # atomic writes, package versions: used by every layer
    ("et_ode.vocab", 0),     # the named choices (flows, adjoints, activations)
    ("et_ode.core", 1),      # the model
    ("et_ode.solvers", 1),   # generic, model-free
    ("et_ode.tasks", 2),     # images (graphs next): encoders, data, training, checkpoints
    ("et_ode.analysis", 3),  # studies
    ("et_ode.cli", 4),       # applications
    ("benchmarks", 4),
    ("paper_figures", 4),
]

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
DEFERRED_FILES = {"benchmarks/__init__.py", "benchmarks/_run.py", "benchmarks/_devices.py",
                  "benchmarks/_distributed.py"}


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


def _layer(module: str):
    for prefix, layer in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return prefix, layer
    return None


def _resolve(importer: str, is_package: bool, node) -> list[str]:
    """The project modules an import statement loads (absolute dotted names)."""
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
        targets.append(candidate if candidate in MODULES else base)
    return targets


def _imports(path: Path, module: str):
    """`(target, lineno, deferred)` for every import in the file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    found = []

    def visit(node, deferred):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                for target in _resolve(module, is_package, child):
                    found.append((target, child.lineno, deferred))
            inner = deferred or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            visit(child, inner)

    visit(tree, False)
    return found


ALL_IMPORTS = {module: _imports(path, module) for module, path in MODULES.items()}


def _project(target: str) -> bool:
    return _layer(target) is not None or target == "et_ode"


def test_layers_import_only_downwards():
    problems = []
    for module, imports in ALL_IMPORTS.items():
        own = _layer(module)
        if own is None:
            continue
        for target, line, _ in imports:
            theirs = _layer(target)
            if theirs is None:
                continue
            if theirs[1] > own[1]:
                problems.append(f"{module}:{line} imports {target} from a higher layer")
            if own[0] == "et_ode.solvers" and theirs[1] > 0 and theirs[0] != "et_ode.solvers":
                problems.append(f"{module}:{line}: solvers must import no model code ({target})")
            if own[0] == "et_ode.core" and theirs[0] == "et_ode.solvers":
                problems.append(f"{module}:{line}: the model does not depend on the solvers")
    assert not problems, "\n".join(problems)


def test_no_private_module_of_another_package():
    problems = []
    for module, imports in ALL_IMPORTS.items():
        package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
        for target, line, _ in imports:
            if not _project(target):
                continue
            parent, _, leaf = target.rpartition(".")
            if leaf.startswith("_") and parent != package:
                problems.append(f"{module}:{line} imports the private module {target}")
    assert not problems, "\n".join(problems)


def test_no_import_cycles():
    graph = {module: sorted({t for t, _, deferred in imports if t in MODULES and t != module})
             for module, imports in ALL_IMPORTS.items()}
    # The package `et_ode` itself is lazy (PEP 562): importing it loads no submodule.
    assert not [t for t, _, deferred in ALL_IMPORTS["et_ode"] if _project(t)]
    state, stack, cycles = {}, [], []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in graph.get(node, []):
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for module in graph:
        if module not in state:
            visit(module)
    assert not cycles, "\n".join(" -> ".join(cycle) for cycle in cycles)


def test_imports_inside_functions_only_for_heavy_optional_dependencies():
    problems = []
    for module, imports in ALL_IMPORTS.items():
        relative = MODULES[module].relative_to(ROOT).as_posix()
        if relative in DEFERRED_FILES:
            continue
        for target, line, deferred in imports:
            if deferred and target.split(".")[0] not in DEFERRED_OK:
                problems.append(f"{relative}:{line} imports {target} inside a function")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("module", ["et_ode.solvers", "et_ode.core"])
def test_light_imports_load_no_training_or_data_code(module):
    """In a fresh interpreter: `import et_ode.solvers` loads no model, task, training or
    data code (optax, tqdm, tfds); `import et_ode.core` no solvers or tasks."""
    import subprocess
    import sys

    forbidden = {
        "et_ode.solvers": ["et_ode.core", "et_ode.tasks", "et_ode.analysis", "optax", "tqdm",
                           "tensorflow_datasets", "matplotlib"],
        "et_ode.core": ["et_ode.solvers", "et_ode.tasks", "et_ode.analysis", "optax", "tqdm"],
    }[module]
    code = (f"import sys, {module}; "
            f"print(','.join(m for m in sys.modules if m.split('.')[0] in {{'optax','tqdm','tensorflow_datasets','matplotlib'}} or m.startswith('et_ode.')))")
    loaded = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                            text=True, cwd=ROOT / "tests").stdout.strip().split(",")
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
