"""mkdocs hook: the key tables of typed results, generated from the types.

A page line `<!-- fields: et_ode.analysis.Branch -->` gets, in its place, a table of
that result's keys (`analysis._results.Result`: a frozen dataclass), one row a field in
declaration order (inherited ones first), each with the docstring written under it in the
source; a field that is a key only where it holds a value says so, and a field that is
no key (what produced a record, in memory only) is left out. So the page cannot drift
from the code (docs/study-outputs.md).
"""

import ast
import dataclasses
import importlib
import inspect
import re
import textwrap
import typing

MARKER = re.compile(r"^<!-- fields: ([\w.]+) -->$", re.M)


def attribute_docstrings(cls) -> dict[str, str]:
    """`{field: docstring}` of the string literals that follow annotated fields in the
    class bodies of `cls` and its bases (the subclass's win)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        body = ast.parse(source).body[0]
        if not isinstance(body, ast.ClassDef):
            continue
        statements = body.body
        for node, after in zip(statements, statements[1:]):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs


def _cell(text: str) -> str:
    """`text` safe in a table cell: a code span holding `|` (a norm, `|A|_F`) becomes an
    HTML `<code>` with the bar as an entity (a bar in a code span would split the cell, and
    an escaped one shows its backslash); other bars are escaped."""

    def code(match: re.Match) -> str:
        inner = match.group(1)
        if "|" not in inner:
            return match.group(0)
        inner = inner.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        return "<code>" + inner.replace("|", "&#124;") + "</code>"

    return re.sub(r"`([^`]+)`", code, text).replace("|", "\\|")


def _nested(annotation) -> list[type]:
    """The typed records a field holds (alone, in a list or by key; in a union)."""
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return [annotation]
    return [record for member in typing.get_args(annotation) for record in _nested(member)]


def _table(cls, path: str) -> tuple[list[str], list[tuple[str, type]]]:
    """The rows of `cls`'s table, and its fields that hold records: `(field, type)`."""
    docs = attribute_docstrings(cls)
    hints = typing.get_type_hints(cls)
    rows = ["| key | meaning |", "|---|---|"]
    nested = []
    for field in dataclasses.fields(cls):
        if field.metadata.get("context"):
            continue
        meaning = _cell(" ".join(docs.get(field.name, "").split()))
        if not meaning:
            raise ValueError(f"{path}: {cls.__name__}.{field.name} has no docstring")
        if field.metadata.get("optional"):
            meaning += " *(only where present)*"
        rows.append(f"| `{field.name}` | {meaning} |")
        nested += [(field.name, record) for record in _nested(hints.get(field.name))]
    return rows, nested


def fields_table(path: str) -> str:
    """The Markdown table of the result type at the dotted `path`, then one for each
    kind of record it holds (by the field that holds it), each once."""
    module, _, name = path.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    if not dataclasses.is_dataclass(cls):
        raise ValueError(f"<!-- fields: {path} -->: {path} is not a typed result")
    rows, pending = _table(cls, path)
    lines, seen = rows, {cls}
    while pending:
        field, record = pending.pop(0)
        if record in seen:
            continue
        seen.add(record)
        rows, more = _table(record, path)
        lines += ["", f"`{field}` holds `{record.__name__}` records:", "", *rows]
        pending += more
    return "\n".join(lines)


def on_page_markdown(markdown, page, config, files):
    return MARKER.sub(lambda match: fields_table(match.group(1)), markdown)
