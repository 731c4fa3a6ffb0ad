"""The architecture, enforced: layers import only downwards, no import cycles, no reaching
into another package's private (underscore) modules, the rooms of `et_ode.tasks` apart,
the rooms of `et_ode.analysis` in order (the generic one free of the model, matplotlib in
the figures one only), modules and folders of a readable size, and imports inside
functions only for heavy optional dependencies. Parses the source; imports nothing of the
project (but for the tests at the end, which do, in fresh interpreters or in-process)."""

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

# The ordered rooms of a package, lowest first, by their home package. A room imports a
# lower room through that room's package only (`from ..landscape import basins`), never a
# module inside it, and never a higher room; it imports the home's shared modules (private
# ones included); the home's shared modules import no room; the home's `__init__` (lazy,
# PEP 562) names the rooms' packages.
ORDERED_ROOMS = {
    "et_ode.analysis": (
        "et_ode.analysis.landscape",  # generic tools for any field or energy system
        "et_ode.analysis.energy",  # studies of an energy system
        "et_ode.analysis.tasks",  # studies of the image and graph tasks
        "et_ode.analysis.figures",  # every plot
    )
}
# The generic room imports, of the project, only these (and its home's shared modules
# and itself): no name of the Energy Transformer, its tasks or applications; and none of
# these third-party packages, at the top or inside a function.
GENERIC_ROOM = "et_ode.analysis.landscape"
GENERIC_IMPORTS = ("et_ode.solvers", "et_ode.vocab", "et_ode.records")
GENERIC_FORBIDDEN = ("optax", "tqdm", "matplotlib")
# Within `et_ode.analysis`, only the figures room imports matplotlib (other layers, the
# applications, the paper's figures and the benchmarks, may).
FIGURES_ROOM = "et_ode.analysis.figures"

# Sizes, in these source folders (each folder, at any depth, counted on its own).
SIZE_FOLDERS = ("et_ode", "solvers", "analysis")
MAX_LINES = 600  # per module
MAX_MODULES = 20  # `.py` files per folder, `__init__.py` included

# Parameters of a public function (positional, keyword-only, `*args` and `**kwargs` each
# count): more go into a settings object (as BifurcationKit's `ContinuationPar`:
# `analysis.Settings`, `solvers.AndersonSettings`, `cli.CompareSolversSettings`, ...), how
# to solve into one `solvers.SolveOptions`. Public: named in the `__all__` (a literal) of a
# public namespace, a module of the library (PUBLIC_FOLDERS) with no underscore in its
# dotted name (`et_ode.solvers`, `et_ode.records`, ...), and followed through that
# namespace's imports to its `def`. (The lazy root `et_ode` hands out names of `core` and
# `tasks`, checked there; an ordered room's `__all__` also holds what the rooms share,
# and its home's flat `__all__` is the public one. Classes and their methods are not
# counted.)
MAX_PARAMETERS = 10
PUBLIC_FOLDERS = ("et_ode", "solvers", "analysis")
# The namespaces the check must find (any other public one is checked too).
PUBLIC_NAMESPACES = (
    "et_ode.solvers",
    "et_ode.core",
    "et_ode.tasks",
    "et_ode.cli",
    "et_ode.analysis",
    "et_ode.records",
    "et_ode.vocab",
)
# The one exemption, and why.
PARAMETER_EXEMPT = {
    "et_ode.solvers.solve": (
        "the entry point: its keywords are the fields of one SolveOptions (options= takes "
        "them whole) and the caller's question (horizon, stop, save, adjoint)"
    ),
}

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


def _ordered_room(module: str):
    """`(home, rank, room)` of the ordered room that `module` is in, `None` if none."""
    for home, rooms in ORDERED_ROOMS.items():
        for rank, room in enumerate(rooms):
            if module == room or module.startswith(room + "."):
                return home, rank, room
    return None


def _shared_module(module: str) -> bool:
    """Whether `module` is a shared module of a home of ordered rooms (in the home, in
    no room, not the home itself)."""
    return module.rpartition(".")[0] in ORDERED_ROOMS and _ordered_room(module) is None


def _private_allowed(package: str, parent: str) -> bool:
    """Whether modules of `package` may import the private modules of `parent`: their
    own, and across a room and its home (a room uses the home's shared modules; the
    home package of the rooms of `et_ode.tasks` exports the rooms' names; the home of
    the ordered rooms imports only the rooms' packages)."""
    if parent == package:
        return True
    if _room(package) == package and ROOMS[package] == parent:
        return True
    ordered = _ordered_room(package)
    if ordered is not None and ordered[0] == parent:
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


def ordered_room_problems(imports) -> list[str]:
    """A room importing a higher room, or a module inside a lower room (not its package);
    a shared module of a home importing a room."""
    problems = []
    for module, found in imports.items():
        own = _ordered_room(module)
        for target, line, _ in found:
            theirs = _ordered_room(target)
            if theirs is None or (own is not None and theirs[2] == own[2]):
                continue
            home, rank, room = theirs
            if own is None:
                if _shared_module(module) and module.rpartition(".")[0] == home:
                    problems.append(
                        f"{module}:{line}: a shared module of {home} imports the room "
                        f"{room} ({target})"
                    )
            elif own[0] != home:
                continue  # rooms of another home: the layers decide
            elif rank > own[1]:
                problems.append(
                    f"{module}:{line}: the room {own[2]} imports the higher room {room} ({target})"
                )
            elif target != room:
                problems.append(
                    f"{module}:{line}: the room {own[2]} imports {target}, a module inside "
                    f"the room {room}: import it from {room} (no underscore import between "
                    f"rooms)"
                )
    return problems


def generic_room_problems(imports) -> list[str]:
    """A module of the generic room importing a project module beyond the model-free
    ones (the solvers, the vocabulary, the records, its home's shared modules, itself),
    or a forbidden third-party package."""
    home = _ordered_room(GENERIC_ROOM)[0]
    allowed = (*GENERIC_IMPORTS, GENERIC_ROOM)
    problems = []
    for module, found in imports.items():
        if not (module == GENERIC_ROOM or module.startswith(GENERIC_ROOM + ".")):
            continue
        for target, line, _ in found:
            if target.split(".")[0] in GENERIC_FORBIDDEN:
                problems.append(
                    f"{module}:{line}: the generic room imports {target} "
                    f"(none of {', '.join(GENERIC_FORBIDDEN)})"
                )
            elif _project(target) and not (
                any(target == a or target.startswith(a + ".") for a in allowed)
                or (_shared_module(target) and target.rpartition(".")[0] == home)
            ):
                problems.append(
                    f"{module}:{line}: the generic room imports {target} "
                    f"(only {', '.join(GENERIC_IMPORTS)} and {home}'s shared modules)"
                )
    return problems


def matplotlib_problems(imports) -> list[str]:
    """A module of the figures room's home, outside that room, importing matplotlib (at
    the top or inside a function)."""
    home = _ordered_room(FIGURES_ROOM)[0]
    return [
        f"{module}:{line} imports {target}: only {FIGURES_ROOM} draws"
        for module, found in imports.items()
        if (module == home or module.startswith(home + "."))
        and not (module == FIGURES_ROOM or module.startswith(FIGURES_ROOM + "."))
        for target, line, _ in found
        if target.split(".")[0] == "matplotlib"
    ]


# The size checks take `{path: line count}` and `{folder: module count}` (paths relative
# to the repository, `/`-separated).
def size_problems(lines) -> list[str]:
    return [
        f"{path} has {count} lines (at most {MAX_LINES})"
        for path, count in sorted(lines.items())
        if count > MAX_LINES
    ]


def folder_problems(modules) -> list[str]:
    return [
        f"{folder}/ has {count} modules (at most {MAX_MODULES})"
        for folder, count in sorted(modules.items())
        if count > MAX_MODULES
    ]


def _public(module: str) -> bool:
    return not any(part.startswith("_") for part in module.split("."))


def _literal_all(tree: ast.Module) -> list[str] | None:
    """The names of a module's `__all__` where it is a literal list or tuple, else None
    (none, or computed: the lazy root `et_ode`)."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            try:
                return list(ast.literal_eval(node.value))
            except ValueError:
                return None
    return None


def _parameter_count(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = node.args
    return len(a.posonlyargs + a.args + a.kwonlyargs) + bool(a.vararg) + bool(a.kwarg)


def _imported_from(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute name of the module that the statement `node` of `module` imports from."""
    base = node.module or ""
    if not node.level:
        return base
    package = module if is_package else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{base}" if base else package


def _definition(trees, packages, module: str, name: str, depth: int = 0):
    """`(module, node)` of the `def` or `class` that `name` is in `module`, following its
    `from ... import name [as name]` statements (those under `if TYPE_CHECKING:` too);
    None for anything else (a constant, a type alias, a module, a third-party name)."""
    tree = trees.get(module)
    if tree is None or depth > 20:
        return None
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    for node in tree.body:
        if isinstance(node, kinds) and node.name == name:
            return module, node
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        for alias in node.names:
            if (alias.asname or alias.name) == name:
                source = _imported_from(module, packages[module], node)
                if f"{source}.{alias.name}" in trees:
                    return None  # a module
                return _definition(trees, packages, source, alias.name, depth + 1)
    return None


def public_functions(trees, packages, paths) -> dict[str, tuple[str, int]]:
    """`{"namespace.name": ("path:line", parameter count)}` of every function named in the
    `__all__` of a public namespace of `trees` (`{module: parsed source}`; `packages`:
    whether each is a package; `paths`: each one's file, relative to the repository)."""
    found = {}
    for module in sorted(trees):
        namespace = _public(module) and _ordered_room(module) is None
        for name in (_literal_all(trees[module]) if namespace else None) or ():
            definition = _definition(trees, packages, module, name)
            if definition is None or isinstance(definition[1], ast.ClassDef):
                continue
            home, node = definition
            found[f"{module}.{name}"] = (f"{paths[home]}:{node.lineno}", _parameter_count(node))
    return found


def parameter_problems(found, exempt=PARAMETER_EXEMPT) -> list[str]:
    """One line per function of more than `MAX_PARAMETERS` parameters, under the first of
    its public names (a function two namespaces export is one problem); none for a
    function one of whose public names is in `exempt`."""
    skipped = {found[name][0] for name in exempt if name in found}
    problems: list[str] = []
    seen: set[str] = set()
    for name, (where, count) in sorted(found.items()):
        if count > MAX_PARAMETERS and where not in skipped | seen:
            seen.add(where)
            problems.append(
                f"{where}: {name} takes {count} parameters (at most {MAX_PARAMETERS}: put "
                "the rest in a settings object, how to solve in one solvers.SolveOptions)"
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


SIZED = [path for folder in SIZE_FOLDERS for path in sorted((ROOT / folder).rglob("*.py"))]
LINES = {path.relative_to(ROOT).as_posix(): len(path.read_text().splitlines()) for path in SIZED}
FOLDER_MODULES = {
    folder: sum(1 for p in SIZED if p.parent.relative_to(ROOT).as_posix() == folder)
    for folder in {path.parent.relative_to(ROOT).as_posix() for path in SIZED}
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


def test_ordered_rooms_import_only_lower_rooms_through_their_packages():
    assert all(room in MODULES for rooms in ORDERED_ROOMS.values() for room in rooms)
    problems = ordered_room_problems(ALL_IMPORTS)
    assert not problems, "\n".join(problems)


def test_the_generic_room_imports_no_energy_transformer_name():
    problems = generic_room_problems(ALL_IMPORTS)
    assert not problems, "\n".join(problems)


def test_only_the_figures_room_imports_matplotlib():
    problems = matplotlib_problems(ALL_IMPORTS)
    assert not problems, "\n".join(problems)


def test_no_module_over_600_lines_nor_folder_over_20_modules():
    assert LINES and FOLDER_MODULES
    problems = size_problems(LINES) + folder_problems(FOLDER_MODULES)
    assert not problems, "\n".join(problems)


LIBRARY = {
    module: path
    for module, path in MODULES.items()
    if path.relative_to(ROOT).parts[0] in PUBLIC_FOLDERS
}
LIBRARY_TREES = {module: ast.parse(path.read_text()) for module, path in LIBRARY.items()}
LIBRARY_PATHS = {module: path.relative_to(ROOT).as_posix() for module, path in LIBRARY.items()}
PUBLIC_FUNCTIONS = public_functions(LIBRARY_TREES, PACKAGES, LIBRARY_PATHS)


def test_no_public_function_over_10_parameters():
    """Every function of every public namespace's `__all__`, `solvers.solve` alone
    exempt (`PARAMETER_EXEMPT`)."""
    namespaces = {name.rpartition(".")[0] for name in PUBLIC_FUNCTIONS}
    assert set(PUBLIC_NAMESPACES) <= namespaces, set(PUBLIC_NAMESPACES) - namespaces
    assert len(PUBLIC_FUNCTIONS) > 100  # 154: the solvers, tasks, studies, plots, jobs, tools
    assert set(PARAMETER_EXEMPT) <= set(PUBLIC_FUNCTIONS)
    problems = parameter_problems(PUBLIC_FUNCTIONS)
    assert not problems, "\n".join(problems)


def test_the_parameter_check_catches_a_planted_signature():
    """Planted beside the project's modules: a function of 11 parameters exported by
    `et_ode.cli` and one by a new public namespace `et_ode.planted` (defined in its private
    module, exported under another name) are reported; one of 10 (a `**kwargs` counted) is
    not, nor one its `__all__` does not name, nor a class, nor a private namespace's; a
    `solve` of its own is no exemption, `solvers.solve` is."""
    wide = "(a, b, c, /, d, *args, e, f, g, h, i, **kwargs)"  # 11
    planted = {
        "et_ode.cli": LIBRARY_PATHS["et_ode.cli"],
        "et_ode.cli._planted": "et_ode/cli/_planted.py",
        "et_ode.planted": "et_ode/planted/__init__.py",
        "et_ode.planted._impl": "et_ode/planted/_impl.py",
        "et_ode.solvers._planted": "solvers/_planted.py",
    }
    cli = LIBRARY["et_ode.cli"].read_text()
    assert cli.count("__all__ = [") == 1
    sources = {
        "et_ode.cli": cli.replace(
            "__all__ = [", 'from ._planted import planted_job\n__all__ = [\n    "planted_job",'
        ),
        "et_ode.cli._planted": f"def planted_job{wide}: ...\n",
        "et_ode.planted": (
            "from ._impl import Thing, fine, hidden, solve\n"
            "from ._impl import wide as planted\n"
            "__all__ = ['planted', 'fine', 'solve', 'Thing']\n"
        ),
        "et_ode.planted._impl": (
            f"def wide{wide}: ...\n"
            "def fine(a, b, *, c, d, e, f, g, h, i, **kwargs): ...\n"
            "def solve(a, b, c, d, e, f, g, h, i, j, k): ...\n"
            "def hidden(a, b, c, d, e, f, g, h, i, j, k): ...\n"
            "class Thing:\n"
            "    def __init__(self, a, b, c, d, e, f, g, h, i, j, k): ...\n"
        ),
        "et_ode.solvers._planted": f"__all__ = ['private']\ndef private{wide}: ...\n",
    }
    trees = dict(LIBRARY_TREES, **{name: ast.parse(text) for name, text in sources.items()})
    packages = dict(
        PACKAGES, **{name: path.endswith("__init__.py") for name, path in planted.items()}
    )
    found = public_functions(trees, packages, dict(LIBRARY_PATHS, **planted))
    assert found["et_ode.planted.fine"][1] == 10 and "et_ode.planted.hidden" not in found
    assert found["et_ode.solvers.solve"][1] > MAX_PARAMETERS  # exempt, so not reported
    project = set(parameter_problems(PUBLIC_FUNCTIONS))
    rule = (
        "(at most 10: put the rest in a settings object, how to solve in one solvers.SolveOptions)"
    )
    assert [p for p in parameter_problems(found) if p not in project] == [
        f"et_ode/cli/_planted.py:1: et_ode.cli.planted_job takes 11 parameters {rule}",
        f"et_ode/planted/_impl.py:1: et_ode.planted.planted takes 11 parameters {rule}",
        f"et_ode/planted/_impl.py:3: et_ode.planted.solve takes 11 parameters {rule}",
    ]


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
            "from et_ode.analysis.energy import _stability\n"  # higher layer, private
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
        "et_ode.analysis.landscape._planted": (
            "from et_ode.core import EnergyTransformer\n"  # an ET name in the generic room
            "import optax\n"  # training code in the generic room
            "from ..energy import stability\n"  # a higher room
            "from .. import _common\n"  # the home's shared module: fine
            "from et_ode.solvers import solve\n"  # fine
            "def draw():\n    import matplotlib.pyplot\n"
        ),  # matplotlib outside the figures room, deferred
        "et_ode.analysis.energy._planted": (
            "from ..landscape import basins\n"  # a lower room's package: fine
            "from ..landscape import _basins\n"  # a module inside a lower room
            "from et_ode.analysis._geometry import require\n"  # a shared module: fine
            "import matplotlib\n"  # matplotlib outside the figures room
            "from ..figures import plot_stability\n"
        ),  # a higher room
        "et_ode.analysis._planted_shared": "from .energy import stability\n",  # a room
        "et_ode.analysis.figures._planted": (
            "import matplotlib.pyplot as plt\n"  # fine: the figures room draws
            "from ..tasks import overshoot\n"
        ),  # a lower room: fine
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
        "et_ode.solvers._planted:2 imports et_ode.analysis.energy._stability from a higher layer"
        in layers
    )
    assert any("solvers must import no model code (et_ode.core" in p for p in layers)
    assert any(p.startswith("et_ode.core._planted:1: the model does not depend") for p in layers)
    assert private_problems(imports, packages) == [
        "et_ode.solvers._planted:2 imports the private module et_ode.analysis.energy._stability",
        "et_ode.tasks.graphs._planted:1 imports the private module et_ode.tasks.images._config",
        "et_ode.core._planted_private:1 imports the private module et_ode.tasks._checkpoint",
        "et_ode.analysis.energy._planted:2 imports the private module "
        "et_ode.analysis.landscape._basins",
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
    assert ordered_room_problems(imports) == [
        "et_ode.analysis.landscape._planted:3: the room et_ode.analysis.landscape imports "
        "the higher room et_ode.analysis.energy (et_ode.analysis.energy)",
        "et_ode.analysis.energy._planted:2: the room et_ode.analysis.energy imports "
        "et_ode.analysis.landscape._basins, a module inside the room "
        "et_ode.analysis.landscape: import it from et_ode.analysis.landscape (no underscore "
        "import between rooms)",
        "et_ode.analysis.energy._planted:5: the room et_ode.analysis.energy imports the "
        "higher room et_ode.analysis.figures (et_ode.analysis.figures)",
        "et_ode.analysis._planted_shared:1: a shared module of et_ode.analysis imports the "
        "room et_ode.analysis.energy (et_ode.analysis.energy)",
    ]
    only = "only et_ode.solvers, et_ode.vocab, et_ode.records and et_ode.analysis's shared modules"
    assert generic_room_problems(imports) == [
        f"et_ode.analysis.landscape._planted:1: the generic room imports et_ode.core ({only})",
        "et_ode.analysis.landscape._planted:2: the generic room imports optax "
        "(none of optax, tqdm, matplotlib)",
        "et_ode.analysis.landscape._planted:3: the generic room imports "
        f"et_ode.analysis.energy ({only})",
        "et_ode.analysis.landscape._planted:7: the generic room imports matplotlib.pyplot "
        "(none of optax, tqdm, matplotlib)",
    ]
    assert matplotlib_problems(imports) == [
        "et_ode.analysis.landscape._planted:7 imports matplotlib.pyplot: only "
        "et_ode.analysis.figures draws",
        "et_ode.analysis.energy._planted:4 imports matplotlib: only et_ode.analysis.figures draws",
    ]


def test_the_size_checks_catch_planted_sizes():
    """A module of 601 lines and a folder of 21 modules, planted beside the project's, are
    reported; one of 600 lines and one of 20 modules are not."""
    lines = dict(LINES, **{"analysis/landscape/_planted.py": 601, "solvers/_planted.py": 600})
    modules = dict(FOLDER_MODULES, **{"analysis/planted": 21, "et_ode/planted": 20})
    project = set(size_problems(LINES) + folder_problems(FOLDER_MODULES))
    assert [p for p in size_problems(lines) + folder_problems(modules) if p not in project] == [
        "analysis/landscape/_planted.py has 601 lines (at most 600)",
        "analysis/planted/ has 21 modules (at most 20)",
    ]


def _loaded_in_a_fresh_interpreter(code: str) -> list[str]:
    """The project's modules and the heavy packages' that `code`, run in a fresh
    interpreter, leaves in `sys.modules`."""
    import subprocess
    import sys

    heavy = "{'optax', 'tqdm', 'tensorflow_datasets', 'matplotlib'}"
    code += (
        f"\nimport sys; print(','.join(m for m in sys.modules "
        f"if m.split('.')[0] in {heavy} or m.startswith('et_ode.')))"
    )
    return (
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


def _among(loaded, forbidden) -> list[str]:
    return sorted({m for m in loaded for f in forbidden if m == f or m.startswith(f + ".")})


@pytest.mark.parametrize("module", ["et_ode.solvers", "et_ode.core"])
def test_light_imports_load_no_training_or_data_code(module):
    """In a fresh interpreter: `import et_ode.solvers` loads no model, task, training or
    data code (optax, tqdm, tfds); `import et_ode.core` no solvers or tasks."""
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
    bad = _among(_loaded_in_a_fresh_interpreter(f"import {module}"), forbidden)
    assert not bad, f"import {module} loaded {bad}"


def test_the_generic_room_follows_a_plain_field_without_the_model():
    """In a fresh interpreter: `import et_ode.analysis.landscape` and a continuation of
    `dx/dt = p + x^2` (its fold at p = 0) load no model, task, training or plotting code."""
    code = (
        "from et_ode.analysis.landscape import ContinuationSettings, continuation\n"
        "import jax.numpy as jnp\n"
        "branch = continuation(lambda x, p, a: p + x**2, jnp.array([-1.0]), -1.0, "
        "p_span=(-1.0, 0.5), settings=ContinuationSettings(ds=0.1))\n"
        "assert [b['kind'] for b in branch['bifurcations']] == ['fold'], branch['bifurcations']"
    )
    forbidden = ["et_ode.core", "et_ode.tasks", "optax", "tqdm", "matplotlib"]
    bad = _among(_loaded_in_a_fresh_interpreter(code), forbidden)
    assert not bad, f"the generic room loaded {bad}"


def test_the_bare_analysis_package_loads_no_room():
    """In a fresh interpreter: `import et_ode.analysis` (lazy, PEP 562) loads its shared
    modules only: no room, no training or plotting code."""
    forbidden = [*ORDERED_ROOMS["et_ode.analysis"], "matplotlib", "optax", "tqdm"]
    bad = _among(_loaded_in_a_fresh_interpreter("import et_ode.analysis"), forbidden)
    assert not bad, f"import et_ode.analysis loaded {bad}"


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
    assert "solver='auto'" in message and str(solvers.DENSE_MAX) in message


def test_dynamics_leave_the_step_cap_to_solve():
    """`Dynamics.max_steps` defaults to None: training and `reconstruct` get `solve`'s exact
    constant-step cap (and every-step checkpoints), not a number of their own."""
    from et_ode.tasks import Dynamics

    assert Dynamics().max_steps is None and Dynamics().solve_options()["max_steps"] is None
