"""The Python examples of docs/how-to/compare-solvers.md run as written and print what the
page says they print (issue 11: "the docs show a solver comparison with diffrax objects
and a vmapped horizon sweep").

The blocks run in this process, one after another in fresh namespaces, as a reader runs
them in one session (x64 is on, as after the page's first block; each block gives its
dtypes explicitly). The `work_precision` block is not run here: about 10 s of compilation
for a call whose options `tests/test_analysis.py` checks against scipy. Float32 step
counts move with the CPU's rounding, so they are checked within ranges, not digit for
digit.
"""

import contextlib
import io
import pathlib
import re

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "how-to" / "compare-solvers.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)


def _block(marker: str) -> str:
    found = [code for code in BLOCKS if marker in code]
    assert len(found) == 1, f"expected one Python block with {marker!r} in {PAGE.name}"
    return found[0]


def _run(code: str) -> tuple[list[str], dict]:
    namespace: dict = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(PAGE), "exec"), namespace)
    return out.getvalue().splitlines(), namespace


def test_every_block_is_checked():
    markers = (
        "analysis.work_precision",
        "diffrax.Tsit5()",
        "count_evaluations=True",
        'solver in ("tsit5", "auto")',
    )
    assert len(BLOCKS) == len(markers)
    assert all(any(m in code for code in BLOCKS) for m in markers)


def test_diffrax_objects_and_the_vmapped_horizon_sweep():
    lines, ns = _run(_block("diffrax.Tsit5()"))
    steps_name, steps_object = map(int, lines[0].split())
    assert 50 <= steps_name <= 95 and 45 <= steps_object <= 90  # printed 71 62
    name, obj = np.asarray(ns["by_name"].x_final), np.asarray(ns["by_object"].x_final)
    assert name.dtype == np.float32
    # same problem, same tolerances, other PID coefficients: equal to the tolerance
    assert np.max(np.abs(name - obj)) / np.max(np.abs(name)) < 1e-4
    shape, difference = re.fullmatch(r"(\(8, 6, 16\)) (\S+)", lines[1]).groups()
    assert float(difference) <= 1e-6 * float(np.max(np.abs(np.asarray(ns["alone"].x_final))))
    assert len(lines) == 2


def test_exact_work_counts():
    lines, ns = _run(_block("count_evaluations=True"))
    f_evals, jvp_evals, nfe, tableau = map(int, lines[0].split())
    assert f_evals + jvp_evals == nfe and jvp_evals > 0
    assert 1.5 < nfe / tableau < 3.5  # printed 3240 against 1387: 2.3 times
    stats = ns["sol"].stats
    assert stats["nfe_is_estimate"] is False and int(stats["num_steps"]) * 5 < f_evals


def test_auto_on_a_long_stiff_horizon():
    lines, ns = _run(_block('solver in ("tsit5", "auto")'))
    tsit5, auto = (line.split() for line in lines)
    assert tsit5[0] == "tsit5" and tsit5[3] == "None"
    assert auto[0] == "auto" and int(auto[3]) >= 1  # printed one switch
    assert int(tsit5[1]) > 3000 and int(auto[1]) < 200  # printed 4226 and 92 steps
    ratio = int(tsit5[2]) / int(auto[2])
    print(
        f"\nauto: {auto[1]} steps, nfe {auto[2]}; tsit5 {tsit5[1]} steps, nfe {tsit5[2]}: "
        f"{ratio:.1f}x"
    )
    assert ratio > 15  # "about 20 times fewer evaluations" (22.5 and 23.7 measured)
    stats = ns["sol"].stats  # auto's, the last solve
    assert float(stats["residual_rms"]) < 1e-5  # converged
    assert bool(stats["nfe_is_estimate"])  # "steps were rejected after the switch"


def test_solve_page_documents_the_real_signature():
    """docs/how-to/solve.md shows `solvers.solve`'s signature (names and defaults, in
    order) and has a row in its options table for every option."""
    import ast
    import inspect

    from et_ode import solvers

    text = (ROOT / "docs" / "how-to" / "solve.md").read_text()
    shown = re.search(r"sol = solvers\.solve\((model, x0, \*, .*?)\)\n```", text, re.S).group(1)
    shown_signature = ast.parse(f"def f({shown}): pass").body[0].args
    documented = [
        (a.arg, ast.literal_eval(d))
        for a, d in zip(shown_signature.kwonlyargs, shown_signature.kw_defaults)
    ]
    real = [
        (name, p.default)
        for name, p in inspect.signature(solvers.solve).parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    ]
    assert documented == real
    rows = {
        name
        for cell in re.findall(r"^\| (`[^|]*) \|", text, re.M)
        for name in re.findall(r"`(\w+)`", cell)
    }
    assert {name for name, _ in real} - {"model", "x0"} <= rows, {name for name, _ in real} - rows
