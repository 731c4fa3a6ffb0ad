"""mkdocs hook: show mkdocstrings the installed layout of `et_ode`.

`et_ode.solvers` and `et_ode.analysis` live in the root folders `solvers/` and
`analysis/` (pyproject.toml's `[tool.setuptools.package-dir]`). griffe reads source
files and cannot follow that mapping, so this hook builds the installed tree in a
temporary folder (symbolic links to the source: `et_ode/*`, `et_ode/solvers`,
`et_ode/analysis`) and makes it the python handler's only search path.
"""

import atexit
import shutil
import tempfile
import tomllib
from pathlib import Path

from mkdocs.plugins import event_priority


@event_priority(100)  # before mkdocstrings reads its handlers' configuration
def on_config(config):
    root = Path(config.config_file_path).parent
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    mapping = pyproject["tool"]["setuptools"].get("package-dir", {})
    stage = Path(tempfile.mkdtemp(prefix="et-ode-docs-"))
    atexit.register(shutil.rmtree, stage, ignore_errors=True)
    package = stage / "et_ode"
    package.mkdir()
    for entry in (root / "et_ode").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for name, folder in mapping.items():
        parent, _, child = name.rpartition(".")
        if parent == "et_ode":
            (package / child).symlink_to(root / folder)
    handlers = config.plugins["mkdocstrings"].config.handlers
    handlers.setdefault("python", {})["paths"] = [str(stage)]
    return config
