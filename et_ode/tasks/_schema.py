"""Config validation: the config dataclasses are the schema, pydantic checks it.

Every field of a config section is declared once, in its frozen dataclass, as
`name: Annotated[type, Field(description=..., ge=..., ...)] = default`: its type, range,
default and documentation. pydantic (v2) validates a TOML document against those
dataclasses in strict mode: no string for a number, no bool for a number, no number for
a bool, finite floats only, no unknown section or field. Rules that join several fields
live in the dataclasses' `__post_init__` and are reported the same way. The JSON Schema
(`et-ode config-schema`) and the docs page of the config fields are generated from the
same dataclasses. `read_toml` reads a config file (the document validated here).

Why pydantic (and not msgspec, which is also strict and fast): its errors carry the
location, the value and the rule for every problem at once, and its JSON Schema keeps
the ranges and descriptions, which the docs and editors use.
"""

import dataclasses
import datetime
import functools
import json
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, dataclass_transform

from pydantic import ConfigDict, TypeAdapter, ValidationError, with_config
from pydantic_core import ErrorDetails

# strict: no coercion (the TOML value must already have the field's type; JSON mode lets
# a table be a section and an array a tuple); forbid: unknown names are errors.
STRICT = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)

_Section = TypeVar("_Section")


# dataclass_transform: type checkers then see the class as the frozen dataclass it becomes
# (its generated __init__ takes the fields as keyword arguments).
@dataclass_transform(frozen_default=True)
def config_section(cls: type[_Section]) -> type[_Section]:
    """Class decorator: a frozen dataclass validated strictly (see the module docs),
    also when built in Python: `__post_init__` checks every field against its
    annotation (strict, as a config file is) before the class's own rules run."""
    own_rules = cls.__dict__.get("__post_init__")

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            try:
                _field_adapter(field.type).validate_python(value)
            except ValidationError as error:
                first = error.errors(include_url=False)[0]
                raise ValueError(
                    f"{field.name} = {value!r}: {first['msg'][0].lower()}{first['msg'][1:]}"
                ) from None
        if own_rules is not None:
            own_rules(self)

    # before the dataclass: its __init__ then calls it (setattr: the class need not declare it)
    setattr(cls, "__post_init__", __post_init__)  # noqa: B010
    return with_config(STRICT)(dataclasses.dataclass(frozen=True)(cls))


class ConfigDocument:
    """What a whole config file (a `config_section` of sections: the image training
    config, the graph benchmark config) adds: `to_dict` (plain dicts, as written into
    checkpoints) and `from_dict` (validated, with messages naming the source)."""

    if TYPE_CHECKING:  # what `config_section` gives every subclass (for dataclasses.asdict)
        __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, raw: dict, source: str = "config"):
        """Validate `raw` (tables as read from TOML); `ValueError` naming `source`,
        each section and field, the value and what is allowed."""
        return validate_config(cls, raw, source)


@functools.cache
def _field_adapter(annotation) -> TypeAdapter:
    if dataclasses.is_dataclass(annotation):  # a section: its own __post_init__ checks it
        return TypeAdapter(annotation)
    return TypeAdapter(annotation, config=STRICT)


@functools.cache
def _adapter(cls) -> TypeAdapter:
    return TypeAdapter(cls)


def _no_dates(value):
    if isinstance(value, (datetime.date, datetime.time)):
        raise ValueError(f"{value} is a TOML date or time, which no config field takes")
    raise ValueError(f"{value!r} is not a TOML value")


def validate_config(cls, raw, source: str = "config"):
    """An instance of the config dataclass `cls` (its fields the sections) from `raw`,
    a dict of tables as read from TOML or stored in a checkpoint header. Missing
    sections and fields take their defaults. Raises `ValueError` starting with `source`
    and naming, for every problem, the section, the field, the value given and what is
    allowed."""
    if not isinstance(raw, dict):
        raise ValueError(f"{source}: a config is a table of sections.")
    try:
        text = json.dumps(raw, default=_no_dates, allow_nan=True)
    except ValueError as error:
        raise ValueError(f"{source}: {error}.") from None
    try:
        return _adapter(cls).validate_json(text)
    except ValidationError as error:
        problems = [_describe(cls, e) for e in error.errors(include_url=False)]
        raise ValueError(f"{source}: " + "; ".join(problems) + ".") from None


def json_schema(cls) -> dict:
    """The JSON Schema (draft 2020-12) of the config dataclass `cls`."""
    return _adapter(cls).json_schema()


def _names(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def _section_class(cls, name):
    fields = {f.name: f.type for f in dataclasses.fields(cls)}
    return fields.get(name)


def _describe(cls, error: ErrorDetails) -> str:
    """One problem as `[section] field = value: rule`."""
    loc = [str(part) for part in error["loc"]]
    kind, message = error["type"], error["msg"]
    message = message.removeprefix("Value error, ").rstrip(".")
    if not loc:  # a rule of the whole config
        return message
    section, field = loc[0], ".".join(loc[1:])
    if kind == "unexpected_keyword_argument":
        if not field:
            return f"unknown section [{section}]; allowed: {', '.join(_names(cls))}"
        section_class = _section_class(cls, section)
        allowed = ", ".join(_names(section_class)) if section_class else "?"
        return f"[{section}] unknown field {field}; allowed: {allowed}"
    if kind == "value_error":  # a rule of a section's __post_init__
        return f"[{section}] {message}"
    if not field:
        return f"[{section}] must be a table of fields"
    value = json.dumps(error.get("input"))
    return f"[{section}] {field} = {value}: {message[0].lower()}{message[1:]}"


def read_toml(path) -> dict:
    """The tables of a TOML file; a missing file or invalid TOML is a `ValueError`
    naming the file."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(
            f"config file {path} is a folder; give a TOML file (configs/ holds examples)."
        )
    if not path.is_file():
        raise ValueError(f"config file {path} does not exist.")
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as error:
        raise ValueError(
            f"{path}: not UTF-8 text (TOML files are UTF-8): byte "
            f"{error.object[error.start]:#04x} at offset {error.start}."
        ) from None
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"{path}: not valid TOML: {error}") from None
