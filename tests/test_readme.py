"""The README: its Python example runs and prints what it says, it stays short, and its
links into the repository (docs/ pages, paper_figures/README.md) resolve."""

import contextlib
import io
import pathlib
import re

import jax
import jax.numpy as jnp

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def test_readme_example_runs():
    text = README.read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    out = io.StringIO()
    namespace: dict = {}
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(README), "exec"), namespace)
    # Robust facts only: the time at which the fixed-point stop fires is a step end and
    # moves by a whole step with CPU rounding (14.6 vs 14.72), so it is not printed.
    assert out.getvalue().splitlines() == [
        "(6, 16) 12",  # the paper's 12 Euler steps cost 12 evaluations
        "True",  # E never rises along the accurate solve
        "fixed_point True",  # the stop fired, and RMS G at the stop < 1e-8
        "(24, 16) (2, 8, 16)",  # implicit gradients of every parameter
    ]
    fp = namespace["fp"]
    assert float(fp.stats["residual_rms"]) < 1e-8 < float(fp.stats["residual_rms_initial"])
    assert 5.0 < float(fp.t_final) < 100.0  # converged, well before the cap t1 = 1000
    leaves = jax.tree_util.tree_leaves(namespace["grads"])
    assert leaves and all(bool(jnp.all(jnp.isfinite(leaf))) for leaf in leaves)
    assert float(jnp.abs(namespace["grads"].norm.log_gamma)) > 0  # gamma is differentiated


def test_readme_is_short_and_its_links_resolve():
    text = README.read_text()
    assert len(text) <= 10_000, f"README.md has {len(text)} characters (at most 10,000)"
    assert "`chelsea`" in text and "`coffee`" in text  # the held-out scenes are named
    targets = re.findall(r"\]\(((?!https?://)[^)#]+)(?:#[^)]*)?\)", text)
    assert any(target.startswith("docs/") for target in targets)
    missing = [target for target in targets if not (ROOT / target).exists()]
    assert not missing, f"README links to missing files: {missing}"
