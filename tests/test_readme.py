"""The README's Python example runs and prints what the README says it prints."""

import contextlib
import io
import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_runs():
    text = README.read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    out = io.StringIO()
    namespace: dict = {}
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(README), "exec"), namespace)
    lines = out.getvalue().splitlines()
    assert lines[0] == "(6, 16) 12"
    assert lines[1] == "True"
    assert lines[2].startswith("fixed_point 14.6")
    assert namespace["grads"].hopfield.xi.shape == (24, 16)
