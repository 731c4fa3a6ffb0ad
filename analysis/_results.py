"""Typed study results: `Result`, the base of every typed result and record.

A result is a frozen dataclass whose fields are documented where it is defined, and a
read-only `Mapping` of its keys (`result["p"] is result.p`), so that code written for
the plain dicts the studies returned before keeps working. A field declared with
`optional()` is a key only where it holds a value (an energy model's branch has `y`, a
field's has none), so that `to_json()` writes exactly the keys the dicts had.

`to_json()` is the JSON the command line writes (`_records.to_json` of the mapping);
`from_json(data)` reads it back by the fields' annotations (`read_field`): nested
records their own type (alone, in a list, or by key), `{"real", "imag"}` pairs complex
numbers, and in a field of numbers JSON's `null` NaN again and lists numpy arrays.
`build(kind, values)` makes a record of the dict a study built, refusing a key the type
does not declare.
"""

import dataclasses
import types
import typing
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, TypeVar

import numpy as np

from ._records import JSONValue, to_json

OPTIONAL = "optional"
CONTEXT = "context"


def optional(**kwargs: Any) -> Any:
    """A dataclass field that is a key of the result only where it is not None."""
    return dataclasses.field(default=None, metadata={OPTIONAL: True}, **kwargs)


def context() -> Any:
    """A dataclass field that is no key at all: what produced the record (the system and
    its conditions), kept in memory so that the next call can take the record alone;
    never written to JSON (`from_json` leaves it None)."""
    return dataclasses.field(default=None, repr=False, metadata={CONTEXT: True})


def _is_complex_pair(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"real", "imag"}


def decode(value: Any) -> Any:
    """A JSON value with its complex pairs (`{"real", "imag"}`) made complex numbers, at
    every depth; lists stay lists (`Result.from_json` makes arrays of the fields that
    hold them)."""
    if _is_complex_pair(value):
        real, imag = value["real"], value["imag"]
        return complex(np.nan if real is None else real, np.nan if imag is None else imag)
    if isinstance(value, dict):
        return {key: decode(item) for key, item in value.items()}
    if isinstance(value, list):
        return [decode(item) for item in value]
    return value


def _numbers(value: Any) -> Any:
    """A decoded JSON number, or list of them, as a field of numbers holds it: `null`
    (JSON's NaN) NaN again, a list an array where its entries have one shape (else a list
    of arrays, one per entry, with None where an entry has none)."""
    if value is None:
        return np.nan
    if isinstance(value, list):
        try:
            return np.asarray([_numbers(item) for item in value])
        except ValueError:  # ragged: one array per entry, and None where an entry has none
            return [None if item is None else _numbers(item) for item in value]
    return value


def _members(annotation: Any) -> tuple[Any, ...]:
    """The types a field's annotation admits (a union's members, else itself)."""
    if typing.get_origin(annotation) in (types.UnionType, typing.Union):
        return typing.get_args(annotation)
    return (annotation,)


def _record_type(annotation: Any, container: type) -> type["Result"] | None:
    """The `Result` subclass of an annotation `R`, `list[R]` or `dict[str, R]` (by
    `container`: `object`, `list` or `dict`), or of a union holding one; else None."""
    for member in _members(annotation):
        origin = typing.get_origin(member)
        if container is object and isinstance(member, type) and issubclass(member, Result):
            return member
        if origin is container and container is not object:
            inner = typing.get_args(member)[-1] if typing.get_args(member) else None
            if isinstance(inner, type) and issubclass(inner, Result):
                return inner
    return None


def read_field(annotation: Any, value: Any, optional_field: bool) -> Any:
    """A field's JSON value as the field holds it: records typed (alone, in a list, or
    by key in a dict), complex pairs complex, and for a field of numbers (a `float` or an
    array, never None, or `optional()`, absent rather than None) JSON's `null` NaN again
    and lists arrays."""
    if isinstance(value, np.ndarray):
        return value
    record = _record_type(annotation, object)
    if record is not None and isinstance(value, Mapping):
        return record.from_json(value)
    record = _record_type(annotation, list)
    if record is not None and isinstance(value, list):
        return [record.from_json(item) for item in value]
    record = _record_type(annotation, dict)
    if record is not None and isinstance(value, Mapping):
        return {key: record.from_json(item) for key, item in value.items()}
    value = decode(value)
    members = _members(annotation)
    if np.ndarray in members and isinstance(value, list):
        return _numbers(value)
    if value is None and (float in members or np.ndarray in members):
        # None where the field cannot hold it (or an optional one, absent when None)
        return np.nan if type(None) not in members or optional_field else None
    return value


R = TypeVar("R", bound="Result")


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Result(Mapping[str, Any]):
    """The base of typed results (module docstring). Subclasses are frozen dataclasses
    (`@dataclasses.dataclass(frozen=True, eq=False, repr=False)`: compared by identity,
    their arrays having no single truth value, and shown by `Result.__repr__`);
    a subclass whose records come in kinds sets `KINDS` (kind -> subclass) on the base of
    those kinds, so that `from_json` builds each record as its kind."""

    KINDS: ClassVar[dict[str, type["Result"]]] = {}

    def _keys(self) -> list[str]:
        return [
            f.name
            for f in dataclasses.fields(self)
            if not f.metadata.get(CONTEXT)
            and not (f.metadata.get(OPTIONAL) and getattr(self, f.name) is None)
        ]

    def __getitem__(self, key: str) -> Any:
        if key in self._keys():
            return getattr(self, key)
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{key}={type(value).__name__}{list(np.shape(value))}"
            if isinstance(value, np.ndarray)
            else f"{key}={value!r}"
            for key, value in self.items()
            if key != "metadata" and not isinstance(value, (list, dict))
        )
        return f"{type(self).__name__}({shown})"

    def to_json(self) -> JSONValue:
        """The result made of JSON types only (`analysis.to_json` of its keys)."""
        return to_json(dict(self))

    @classmethod
    def from_json(cls: type["R"], data: Mapping[str, Any]) -> "R":
        """The result from its `to_json()` (or from a dict with its keys), each field as
        `read_field` reads it: records typed, complex numbers complex, NaN and arrays
        restored in fields of numbers."""
        kind = data.get("kind")
        target: type[R] = cls.KINDS.get(kind, cls) if isinstance(kind, str) else cls  # type: ignore[assignment]
        hints = typing.get_type_hints(target)
        values = {
            f.name: read_field(hints.get(f.name), data[f.name], bool(f.metadata.get(OPTIONAL)))
            for f in dataclasses.fields(target)
            if not f.metadata.get(CONTEXT) and f.name in data
        }
        return target(**values)


def build(kind: type[R], values: Mapping[str, Any], **context_values: Any) -> R:
    """The typed record `kind` of the dict a study built (and the `context()` fields):
    refused, as a bug rather than a user's error, where the dict has a key `kind` does
    not declare."""
    names = {f.name for f in dataclasses.fields(kind)}
    unknown = set(values) - names
    if unknown:
        raise AssertionError(f"{kind.__name__} has no field for {sorted(unknown)}")
    return kind(**values, **context_values)
