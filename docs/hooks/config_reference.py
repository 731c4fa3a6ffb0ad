"""mkdocs hook: render the fields of the TOML configs from their schema.

A page containing `<!-- et-ode-config train -->` or `<!-- et-ode-config graph -->` gets,
in its place, one table per section of that config: each field's type, default, allowed
values and meaning, read from the JSON Schema that `et-ode config-schema` prints (itself
generated from the config dataclasses), so the page cannot drift from the validation.
"""

import json
import re

MARKER = re.compile(r"<!-- et-ode-config (train|graph) -->")
BOUNDS = (
    ("minimum", ">= {}"),
    ("exclusiveMinimum", "> {}"),
    ("maximum", "<= {}"),
    ("exclusiveMaximum", "< {}"),
    ("minLength", "at least {} long"),
    ("minItems", "at least {} item(s)"),
)


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _kind(spec: dict) -> tuple[str, list[str]]:
    """`(type, rules)` of one JSON Schema property (nullable: "optional")."""
    options = spec.get("anyOf", [spec])
    nullable = any(o.get("type") == "null" for o in options)
    spec = next((o for o in options if o.get("type") != "null"), spec)
    rules = [text.format(spec[key]) for key, text in BOUNDS if key in spec]
    if "enum" in spec:
        return "one of " + ", ".join(f"`{json.dumps(v)}`" for v in spec["enum"]), rules
    kind = spec.get("type", "?")
    if kind == "array":
        inner, inner_rules = _kind(spec.get("items", {}))
        rules += [f"each {rule}" for rule in inner_rules]
        kind = f"array of {inner}"
    return kind + (" (optional)" if nullable else ""), rules


def _section(name: str, schema: dict) -> list[str]:
    lines = [
        f"### `[{name}]`",
        "",
        _cell(schema.get("description", "")),
        "",
        "| field | type | default | allowed | meaning |",
        "|---|---|---|---|---|",
    ]
    for field, spec in schema["properties"].items():
        kind, rules = _kind(spec)
        default = spec.get("default")
        shown = "" if default is None else f"`{json.dumps(default)}`"
        lines.append(
            f"| `{field}` | {kind} | {shown} | {_cell('; '.join(rules))} | "
            f"{_cell(spec.get('description', ''))} |"
        )
    return lines + [""]


def render(kind: str) -> str:
    from et_ode.tasks import GraphTrainConfig, TrainConfig, config_json_schema

    schema = config_json_schema(GraphTrainConfig if kind == "graph" else TrainConfig)
    lines = []
    for name, spec in schema["properties"].items():
        reference = spec.get("$ref") or spec["allOf"][0]["$ref"]
        lines += _section(name, schema["$defs"][reference.split("/")[-1]])
    return "\n".join(lines)


def on_page_markdown(markdown, page, config, files):
    return MARKER.sub(lambda match: render(match.group(1)), markdown)
