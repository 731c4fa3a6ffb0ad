"""The package as users get it: the wheel that `pip wheel .` builds, installed without
`-e` (`pip install --target`, conftest's `installed_wheel`) and run from a working folder
that holds its own `analysis.py` and `solvers.py` (each leaves a marker and raises if
imported, conftest's `shadowed_folder`).

- The wheel holds `et_ode/...` with `et_ode/solvers/...` and `et_ode/analysis/...`
  (the root folders `solvers/` and `analysis/` mapped by `package-dir`), the shipped
  models, the console script, and no other top-level package.
- In the shadowed folder, `from et_ode import solvers, analysis` resolves inside the
  install, and `python -m et_ode.cli demo --quick` completes there and writes its
  summary. That demo run is conftest's `installed_demo`, the session's only demo run:
  test_cli.py checks the files it wrote (under `make test` the two modules are one unit
  of work of one xdist worker, so it runs once).

That `import et_ode.solvers` loads no model, training or data code is test_layout.py's.
"""

import json
import subprocess
import sys
import zipfile
from pathlib import Path

from conftest import SHADOWS, installed_env


def _inside(path, folder) -> bool:
    return Path(path).resolve().is_relative_to(Path(folder).resolve())


def _no_shadow_imported(folder):
    assert sorted(p.name for p in folder.glob("IMPORTED-*")) == []


def test_wheel_holds_one_package_with_the_mapped_layers(installed_wheel):
    wheel, _, source = installed_wheel
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = next(
            archive.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt")
        )
    dist_info = {n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info")}
    assert len(dist_info) == 1
    top_level = {n.split("/")[0] for n in names} - dist_info
    assert top_level == {"et_ode"}, f"top-level names besides et_ode: {top_level - {'et_ode'}}"
    assert not any(n.startswith(("solvers/", "analysis/")) for n in names)
    # Every module of the three source folders, at its installed name.
    expected = set()
    for folder, installed in (
        ("et_ode", "et_ode"),
        ("solvers", "et_ode/solvers"),
        ("analysis", "et_ode/analysis"),
    ):
        for path in (source / folder).rglob("*.py"):
            expected.add(f"{installed}/{path.relative_to(source / folder).as_posix()}")
    assert {
        "et_ode/solvers/__init__.py",
        "et_ode/analysis/__init__.py",
        "et_ode/cli/__main__.py",
    } <= expected
    missing = sorted(expected - names)
    assert missing == [], f"source modules missing from the wheel: {missing}"
    models = {f"et_ode/models/{p.name}" for p in (source / "et_ode" / "models").glob("*.eqx")}
    assert {"et_ode/models/paper.eqx", "et_ode/models/ode.eqx"} <= models <= names
    assert "et-ode = et_ode.cli:main" in entry_points.splitlines()


def test_imports_resolve_inside_the_install(installed_wheel, shadowed_folder):
    """Not the checkout (the editable install) and not the working folder's modules."""
    wheel, target, _ = installed_wheel
    code = (
        "import json, sys\n"
        "import et_ode\n"
        "from et_ode import solvers, analysis\n"
        "print(json.dumps(dict(et_ode=et_ode.__file__, solvers=solvers.__file__,\n"
        "    analysis=analysis.__file__, version=et_ode.__version__,\n"
        f"    top_level=[n for n in {SHADOWS!r} if n in sys.modules])))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=shadowed_folder,
        env=installed_env(target),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    found = json.loads(done.stdout.splitlines()[-1])
    for name in ("et_ode", "solvers", "analysis"):
        assert _inside(found[name], target), (name, found[name], target)
    assert Path(found["solvers"]).parent.name == "solvers"
    assert Path(found["analysis"]).parent.name == "analysis"
    assert found["top_level"] == []
    assert found["version"] == wheel.name.split("-")[1]  # et_ode-<version>-py3-...whl
    _no_shadow_imported(shadowed_folder)


def test_demo_runs_from_the_install(installed_demo, installed_wheel, shadowed_folder):
    """`python -m et_ode.cli demo --quick --no-progress --out OUT` in the shadowed folder
    exits 0 and writes summary.json; the code that ran is the install's (its modules,
    installed without bytecode, now have theirs)."""
    done, out = installed_demo
    _, target, _ = installed_wheel
    assert done.returncode == 0, done.stderr[-4000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["quick"] and summary["files"]
    ran = {p.name.split(".")[0] for p in (target / "et_ode" / "cli" / "__pycache__").glob("*.pyc")}
    assert {"__main__", "_demo"} <= ran, ran
    _no_shadow_imported(shadowed_folder)
