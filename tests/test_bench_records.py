"""The committed benchmark records and the pages rendered from them.

The benchmarks page's tables and the numbers the pages quote from a record are filled in
at build time from `benchmarks/records/` (docs/hooks/bench_records.py): these tests check
the records' format and privacy, that every marker renders, that the benchmarks page has
no hand-typed table of measurements left, and that a quantity quoted on several pages is
quoted the same everywhere. No JAX: fast.
"""

import getpass
import importlib.util
import json
import re
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `benchmarks` is not installed: it lives in the checkout
    sys.path.insert(0, str(ROOT))

from benchmarks import _records  # noqa: E402
from benchmarks._run import ROWS  # noqa: E402

DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
RECORDS = _records.load_all()


def _hook():
    spec = importlib.util.spec_from_file_location(
        "bench_records", DOCS / "hooks" / "bench_records.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HOOK = _hook()


def _page(path: Path):
    return types.SimpleNamespace(
        file=types.SimpleNamespace(src_uri=path.relative_to(DOCS).as_posix())
    )


def _strings(value):
    if isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


LOCAL_PATH = re.compile(r"(^|[\s'\"(=])(/home/|/work/|/tmp/|/Users/|/root/|[A-Z]:\\)")


def test_records_are_committed_and_hold_the_machine_date_commit_and_rows():
    assert RECORDS, "no record in benchmarks/records/: run `make bench` and commit its record"
    for path, record in RECORDS:
        machine = record["machine"]
        for key in ("cpu", "cpu_cores", "jax_backend", "device_kind", "devices", "git_commit"):
            assert machine.get(key) is not None, f"{path.name}: machine.{key} missing"
        assert machine["versions"]["jax"], path.name
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", record["created"])
        assert record["rows"], path.name
        for row in record["rows"]:
            assert {"family", "name", "value"} <= row.keys(), (path.name, row)
            if record["benchmark"] == "et-ode":
                assert row["size"] in ("full", "quick"), (path.name, row["name"])


def test_records_name_no_host_user_or_local_path():
    user = getpass.getuser()
    for path, record in RECORDS:
        assert "hostname" not in record["machine"], path.name
        for text in _strings(record):
            assert not LOCAL_PATH.search(text), f"{path.name}: a local path in {text!r}"
            if len(user) > 3:
                assert not re.search(rf"\b{re.escape(user)}\b", text), f"{path.name}: {text!r}"


def test_a_make_bench_record_covers_every_row_of_its_machine():
    """`make bench` runs every row (at the sizes its machine allows): the latest full
    record of each machine holds every family, so no table of the page is older than
    the others on that machine."""
    full = [
        (path, record)
        for path, record in RECORDS
        if record["benchmark"] == "et-ode" and record["options"]["rows"] == list(ROWS)
    ]
    assert full, "no `make bench` record with every row: run `make bench` and commit it"
    for path, record in full:
        families = {row["family"] for row in record["rows"]}
        assert families == set(ROWS), (path.name, set(ROWS) - families)
        errors = [row["note"] for row in record["rows"] if row.get("error")]
        assert not errors, (path.name, errors)


def test_every_marker_of_every_page_renders_from_a_record():
    rendered = 0
    for path in PAGES:
        text = path.read_text()
        page = _page(path)
        for match in HOOK.TABLE.finditer(text):
            table = HOOK.render_table(page, match.group(1).split(), RECORDS)
            assert "| " in table and "From the record" in table
            rendered += 1
        for match in HOOK.VALUE.finditer(text):
            value = HOOK.render_value(page, *match.groups()[:2], RECORDS, match.group(3))
            assert value.startswith("[") and "records/" in value
            rendered += 1
    assert rendered >= 10


def test_an_unknown_case_or_family_fails_the_build():
    page = _page(DOCS / "benchmarks.md")
    with pytest.raises(ValueError, match="no committed record"):
        HOOK.render_value(page, "overhead", "no such case", RECORDS)
    with pytest.raises(ValueError, match="no committed record"):
        HOOK.render_table(page, ["no_such_family"], RECORDS)


def _tables(text: str) -> list[str]:
    """The header line of each Markdown table in `text` (outside code blocks)."""
    text = re.sub(r"(?ms)^```.*?^```", "", text)
    lines = text.splitlines()
    return [
        line
        for line, below in zip(lines, lines[1:])
        if line.startswith("|") and re.fullmatch(r"\|(-+\|)+", below.replace(" ", ""))
    ]


def test_the_benchmarks_page_has_no_hand_typed_table_of_measurements():
    """A measured table on the benchmarks page can only come from a record: the only
    typed table left is the description of the rows (what each measures, no numbers)."""
    typed = _tables((DOCS / "benchmarks.md").read_text())
    assert typed == ["| row | measures | reference | goal |"]


def test_a_rendered_table_shows_what_its_record_holds():
    path, record = RECORDS[-1]
    row = record["rows"][0]
    table = HOOK.render_table(_page(DOCS / "benchmarks.md"), [row["family"]], [(path, record)])
    assert path.name in table and record["created"][:10] in table
    assert HOOK.format_value(row["value"]) in table


# ----------------------------------------------- one quantity, one number on every page

# Quantities measured once and quoted on more than one page (or in the Makefile): each
# pattern captures the number a page gives for it. Record-backed numbers need no entry:
# they are rendered from the record ({{bench: ...}}), the same on every page.
QUOTED = {
    "creating .venv with uv, warm cache (s)": [r"(\d+(?:\.\d+)?) s with uv's download cache warm"],
    "creating .venv with pip (s)": [
        r"pip[^.|]{0,40}?fallback: (\d+(?:\.\d+)?) s",
        r"where pip took (\d+) s",
    ],
    "make gpu-compile on 2026-11-27 (min)": [
        r"`make gpu-compile` \| (\d+) min",
        r"on 2026-11-27, they took (\d+) min",
    ],
    "make gpu-compile's tests on 2026-11-27": [
        r"\((\d+) tests that day",
        r"when they were (\d+), on 2026-11-27",
    ],
}


def quoted_values(
    texts: dict[str, str], patterns: dict[str, list[str]]
) -> dict[str, dict[str, set]]:
    """`{quantity: {value: {where}}}` for the matches of each quantity's patterns (the
    ways pages word it) in `texts`."""
    found: dict[str, dict[str, set]] = {}
    for quantity, wordings in patterns.items():
        for pattern in wordings:
            for where, text in texts.items():
                for match in re.finditer(pattern, text):
                    found.setdefault(quantity, {}).setdefault(match.group(1), set()).add(where)
    return found


def _sources() -> dict[str, str]:
    texts = {str(p.relative_to(ROOT)): p.read_text() for p in PAGES}
    for name in ("README.md", "Makefile"):
        texts[name] = (ROOT / name).read_text()
    return texts


def test_a_quantity_quoted_on_several_pages_is_quoted_the_same():
    found = quoted_values(_sources(), QUOTED)
    assert set(found) == set(QUOTED), f"a wording no page uses any more: {set(QUOTED) - set(found)}"
    for quantity, values in found.items():
        assert len(values) == 1, f"{quantity} is quoted differently: {values}"


def test_the_quotation_check_fails_on_two_pages_that_differ():
    texts = {
        "a.md": "creating it takes 11 s with uv's download cache warm, 15.5 s cold "
        "(pip, the fallback: 25 s)",
        "Makefile": "# uv installs all of this in 9 s with uv's download cache warm",
    }
    found = quoted_values(texts, QUOTED)
    assert found["creating .venv with uv, warm cache (s)"] == {"11": {"a.md"}, "9": {"Makefile"}}
    assert found["creating .venv with pip (s)"] == {"25": {"a.md"}}


def test_records_are_valid_json_files_named_by_time_and_commit():
    for path, record in RECORDS:
        assert json.loads(path.read_text()) == record
        assert re.fullmatch(r"\d{8}T\d{6}-[\w-]+\.json", path.name), path.name
