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


def _met(met) -> str:
    return {True: "met", False: "NOT met", None: ""}[met]


def table(rows: list[dict]) -> str:
    lines = [
        "| row | case | value | min - max | reference | goal | | note |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        value = f"{format_value(r.get('value'))} {r.get('unit', '')}".strip()
        cells = [
            r["family"],
            r["name"],
            value,
            format_spread(r),
            r.get("reference", ""),
            r.get("goal", ""),
            _met(r.get("met")),
            r.get("note", ""),
        ]
        lines.append("| " + " | ".join(str(c).replace("|", "/") for c in cells) + " |")
    return "\n".join(lines)


def summary(rows: list[dict]) -> dict:
    goals = [r for r in rows if r.get("met") is not None]
    return {
        "goals": len(goals),
        "met": sum(1 for r in goals if r["met"]),
        "not_met": [f"{r['family']}: {r['name']}" for r in goals if not r["met"]],
        "errors": [f"{r['family']}: {r['note']}" for r in rows if r.get("error")],
    }
