"""Typed study results: `Result`, the base of every typed result and record.

A result is a frozen dataclass whose fields are documented where it is defined, and a
read-only `Mapping` of its keys (`result["p"] is result.p`), so that code written for
the plain dicts the studies returned before keeps working. A field declared with
`optional()` is a key only where it holds a value (an energy model's branch has `y`, a
field's has none), so that `to_json()` writes exactly the keys the dicts had.

`to_json()` is the JSON the command line writes (`_records.to_json` of the mapping);
`from_json(data)` reads it back: lists become numpy arrays where the field is an array,
`{"real", "imag"}` pairs complex numbers, and nested records their own type.
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
    """A JSON value with its complex pairs made complex numbers (in lists too), and
    lists of numbers numpy arrays (complex where their entries are)."""
    if _is_complex_pair(value):
        real, imag = value["real"], value["imag"]
        return complex(np.nan if real is None else real, np.nan if imag is None else imag)
    if isinstance(value, dict):
        return {key: decode(item) for key, item in value.items()}
    if isinstance(value, list):
        items = [decode(item) for item in value]
        if items and all(
            isinstance(item, (int, float, complex, np.ndarray)) or item is None for item in items
        ):
            shapes = {np.shape(item) for item in items if item is not None}
            if len(shapes) == 1:
                return np.asarray([np.nan if item is None else item for item in items])
        return items
    return value


def _record_types(annotation: Any) -> tuple[type["Result"], ...]:
    """The `Result` subclasses that a field's annotation holds (itself, in a list or an
    optional), or none."""
    if isinstance(annotation, type) and issubclass(annotation, Result):
        return (annotation,)
    if typing.get_origin(annotation) in (list, types.UnionType, typing.Union):
        return tuple(t for arg in typing.get_args(annotation) for t in _record_types(arg))
    return ()


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
        """The result from its `to_json()` (or from a dict with its keys): arrays as
        numpy arrays, complex numbers complex, nested records typed."""
        kind = data.get("kind")
        target: type[R] = cls.KINDS.get(kind, cls) if isinstance(kind, str) else cls  # type: ignore[assignment]
        hints = typing.get_type_hints(target)
        values = {}
        for f in dataclasses.fields(target):
            if f.metadata.get(CONTEXT) or f.name not in data:
                continue
            value = data[f.name]
            records = _record_types(hints.get(f.name))
            if records and isinstance(value, list):
                value = [records[0].from_json(item) for item in value]
            elif records and isinstance(value, Mapping):
                value = records[0].from_json(value)
            elif not isinstance(value, np.ndarray):
                value = decode(value)
            values[f.name] = value
        return target(**values)
