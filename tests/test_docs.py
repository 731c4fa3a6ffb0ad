"""The documentation site builds with `mkdocs build --strict`: every `::: et_ode...`
API reference, cross-reference and link (anchors included) resolves, and the
command-line page is generated from `et_ode.cli.build_parser()`. Needs the `docs` extra
(`pip install -e ".[docs]"`); skipped without it."""

import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS_MODULES = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")


def _missing_docs_modules() -> list[str]:
    missing = []
    for name in DOCS_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:  # a parent package is missing
            found = False
        if not found:
            missing.append(name)
    return missing


def test_docs_build_strict(tmp_path):
    missing = _missing_docs_modules()
    if missing:
        pytest.skip(
            f"the docs extra is not installed ({', '.join(missing)} missing): "
            "pip install -e '.[docs]'"
        )
    site = tmp_path / "site"
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stderr[-6000:]}"

    solvers_page = (site / "api" / "solvers" / "index.html").read_text()
    assert 'id="et_ode.solvers.solve"' in solvers_page  # found through the package-dir map
    analysis_page = (site / "api" / "analysis" / "index.html").read_text()
    assert 'id="et_ode.analysis.convergence"' in analysis_page

    # the math renders offline: MathJax and its fonts are in the site, no page loads a
    # script or a style sheet from another host
    mathjax = site / "javascripts" / "mathjax"
    assert (mathjax / "tex-chtml.js").stat().st_size > 500_000
    assert len(list((mathjax / "output" / "chtml" / "fonts" / "woff-v2").glob("*.woff"))) >= 20
    remote = re.compile(r'<(?:script|link)[^>]+(?:src|href)="(?:https?:)?//[^"]+"')
    for page in site.rglob("*.html"):
        assert not remote.findall(page.read_text()), f"{page} loads from another host"
    # the study outputs' key tables are generated from the typed results' fields
    outputs = (site / "study-outputs" / "index.html").read_text()
    assert "<!-- fields:" not in outputs and "<code>&#124;A - A^T&#124;_F" in outputs
    assert "<td><code>smallest</code></td>" in outputs  # Stability's first field
    maths = (site / "mathematics" / "index.html").read_text()
    assert maths.count('class="arithmatex"') > 20 and "mathjax/tex-chtml.js" in maths

    from et_ode.cli import build_parser

    commands = next(
        action
        for action in build_parser()._actions
        if hasattr(action, "choices") and isinstance(action.choices, dict)
    )
    cli_page = (site / "cli" / "index.html").read_text()
    for name, parser in commands.choices.items():
        assert f'id="et-ode-{name}"' in cli_page, f"et-ode {name} is missing from cli.md"
        for action in parser._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert flag in cli_page, f"et-ode {name} {flag} is missing from cli.md"
