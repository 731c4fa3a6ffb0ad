"""The table of results (Markdown, so that it can be pasted as it is)."""


def format_value(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 1e4 or abs(value) < 1e-2:
            return f"{value:.2e}"
        return f"{value:.3g}"
    return str(value)


def format_spread(r: dict) -> str:
    s = r.get("spread")
    if not s or s.get("min") is None:
        return ""
    return f"{format_value(s['min'])} - {format_value(s['max'])}"


def value_with_unit(row: dict) -> str:
    return f"{format_value(row.get('value'))} {row.get('unit', '')}".strip()


def _size(row: dict) -> str:
    size = row.get("size", "")
    return f"{size} ({row['size_why']})" if row.get("size_why") else size


# Every column a table of rows can show, by its header; the runner prints one set, the
# docs hook (docs/hooks/bench_records.py) renders another from the same cells.
CELLS = {
    "row": lambda row: row["family"],
    "case": lambda row: row["name"],
    "value": value_with_unit,
    "min - max": format_spread,
    "reference": lambda row: row.get("reference", ""),
    "goal": lambda row: row.get("goal", ""),
    "": lambda row: {True: "met", False: "**not met**", None: ""}[row.get("met")],
    "size": _size,
    "note": lambda row: row.get("note", ""),
}
PRINTED_COLUMNS = ("row", "case", "value", "min - max", "reference", "goal", "", "note")


def cell(text) -> str:
    """`text` as one Markdown table cell (no column bar, no line break)."""
    return str(text).replace("|", "/").replace("\n", " ")


def table_lines(rows: list[dict], columns=PRINTED_COLUMNS) -> list[str]:
    """The Markdown lines of a table of `rows`, one line per row, with `columns` (headers
    of `CELLS`)."""
    lines = ["| " + " | ".join(columns) + " |", "|---" * len(columns) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(cell(CELLS[c](row)) for c in columns) + " |")
    return lines


def table(rows: list[dict]) -> str:
    return "\n".join(table_lines(rows))


def summary(rows: list[dict]) -> dict:
    goals = [r for r in rows if r.get("met") is not None]
    return {
        "goals": len(goals),
        "met": sum(1 for r in goals if r["met"]),
        "not_met": [f"{r['family']}: {r['name']}" for r in goals if not r["met"]],
        "errors": [f"{r['family']}: {r['note']}" for r in rows if r.get("error")],
    }
