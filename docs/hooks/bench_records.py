"""mkdocs hook: measured numbers rendered from the committed benchmark records.

The records are the JSON files of `benchmarks/records/` (`benchmarks/_records.py` says
what one holds; `make bench` and the measurement scripts write them). A page says where a
measurement goes, and the build fills it in, so a page can only show what a record holds:

- a line `<!-- bench-table: FAMILY [FAMILY ...] -->` becomes, for each machine, the rows
  of those families from that machine's latest record holding any of them, under a line
  naming the record (a link to the file), the machine, the date, the commit and the
  machine's load; rows that carry `cell: [row, column]` are laid out as a two-way table;
- `{{bench: FAMILY | CASE}}` in a sentence becomes the value of the row of FAMILY whose
  name starts with CASE, from the latest record holding it, linked to that record;
  `{{bench: FAMILY | CASE | FIELD}}` another number of that row (`nfe`, say);
- a line `<!-- bench-records -->` becomes the list of every committed record.

An unknown family, a case that no record holds, or a marker left unrendered fails the
build (`mkdocs build --strict` raises), and so `tests/test_docs.py`. The records are
published with the site under `records/`.
"""

import posixpath
import re
import sys
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import _records  # noqa: E402
from benchmarks._report import cell, format_value, table_lines, value_with_unit  # noqa: E402

TABLE = re.compile(r"^<!-- bench-table: ([\w ]+) -->$", re.M)
VALUE = re.compile(r"\{\{bench: *(\w+) *\| *([^|}]+?) *(?:\| *(\w+) *)?\}\}")
INDEX = re.compile(r"^<!-- bench-records -->$", re.M)
SITE_FOLDER = "records"


def _records_loaded() -> list[tuple[Path, dict]]:
    return _records.load_all(_records.RECORDS_DIR)


def _link(page, path: Path) -> str:
    here = posixpath.dirname(page.file.src_uri)
    return posixpath.relpath(f"{SITE_FOLDER}/{path.name}", here or ".")


def _caption(page, path: Path, record: dict) -> str:
    machine = record["machine"]
    load = record.get("load_average")
    load_text = f"; load average at the end {load[0]:.1f}" if load else ""
    seconds = record.get("seconds")
    time_text = f"; {seconds / 60:.0f} min in all" if seconds else ""
    return (
        f"*From the record [`{path.name}`]({_link(page, path)}) (`{record['benchmark']}`): "
        f"{_records.machine_label(machine)}; {record['created'][:10]}; commit "
        f"`{machine.get('git_commit')}`{time_text}{load_text}.*"
    )


PAGE_COLUMNS = ("case", "value", "min - max", "reference", "goal", "", "size", "note")


def _two_way_table(rows: list[dict]) -> list[str]:
    row_labels = list(dict.fromkeys(r["cell"][0] for r in rows))
    column_labels = list(dict.fromkeys(r["cell"][1] for r in rows))
    values = {tuple(r["cell"]): value_with_unit(r) for r in rows}
    lines = [
        "| | " + " | ".join(cell(c) for c in column_labels) + " |",
        "|---" * (len(column_labels) + 1) + "|",
    ]
    for label in row_labels:
        cells = [values.get((label, column), "-") for column in column_labels]
        lines.append(f"| {cell(label)} | " + " | ".join(cell(c) for c in cells) + " |")
    return lines


def render_table(page, families: list[str], records) -> str:
    found = _records.latest_per_machine(records, set(families))
    if not found:
        raise ValueError(
            f"{page.file.src_uri}: no committed record in benchmarks/records/ holds a row "
            f"of {families}: run the command that measures them (see docs/benchmarks.md)"
        )
    blocks = []
    for path, record, rows in found:
        table = (
            _two_way_table(rows)
            if all("cell" in r for r in rows)
            else table_lines(rows, PAGE_COLUMNS)
        )
        blocks.append("\n".join([_caption(page, path, record), "", *table]))
    return "\n\n".join(blocks)


def render_value(page, family: str, case: str, records, field: str | None = None) -> str:
    for path, record in reversed(records):  # the newest first
        for row in record["rows"]:
            if row["family"] == family and row["name"].startswith(case):
                if field is None:
                    text = value_with_unit(row)
                elif isinstance(row.get(field), (int, float)):
                    text = format_value(row[field])
                else:
                    raise ValueError(
                        f"{page.file.src_uri}: {{{{bench: {family} | {case} | {field}}}}}: "
                        f"the row has no number {field!r} (it has {', '.join(row)})"
                    )
                title = f"{_records.machine_label(record['machine'])}, {record['created'][:10]}"
                return f'[{text}]({_link(page, path)} "{title}")'
    raise ValueError(
        f"{page.file.src_uri}: {{{{bench: {family} | {case}}}}}: no committed record has "
        f"a row of {family!r} whose name starts with {case!r}"
    )


def render_index(page, records) -> str:
    lines = ["| record | program | machine | date | commit | rows |", "|---|---|---|---|---|---|"]
    for path, record in reversed(records):
        families = ", ".join(dict.fromkeys(r["family"] for r in record["rows"]))
        lines.append(
            f"| [`{path.name}`]({_link(page, path)}) | `{record['benchmark']}` | "
            f"{cell(_records.machine_label(record['machine']))} | {record['created'][:10]} | "
            f"`{record['machine'].get('git_commit')}` | {families} |"
        )
    return "\n".join(lines)


def on_files(files, config):
    for path, _ in _records_loaded():
        files.append(
            File.generated(config, f"{SITE_FOLDER}/{path.name}", content=path.read_bytes())
        )
    return files


def on_page_markdown(markdown, page, config, files):
    if "bench" not in markdown:
        return markdown
    records = _records_loaded()
    markdown = TABLE.sub(lambda m: render_table(page, m.group(1).split(), records), markdown)
    markdown = VALUE.sub(
        lambda m: render_value(page, m.group(1), m.group(2), records, m.group(3)), markdown
    )
    markdown = INDEX.sub(lambda m: render_index(page, records), markdown)
    return markdown
