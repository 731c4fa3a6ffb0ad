"""Checks of the graph data functions' arguments: an integer or a number in its range,
or a `ValueError` naming the argument, the value given and what is allowed."""

from __future__ import annotations

import math

import numpy as np


def describe(value) -> str:
    """What `value` is, for an error message: an array's dtype and shape, else its type."""
    if isinstance(value, np.ndarray):
        return f"{value.dtype} array of shape {value.shape}"
    return type(value).__name__


def integer(name: str, value, minimum: int) -> int:
    """`value` as an `int` if it is an integer (not a bool) >= `minimum`."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum} (got {value!r}).")
    return int(value)


def real(
    name: str,
    value,
    *,
    low: float,
    high: float = math.inf,
    low_open: bool = True,
    high_open: bool = True,
) -> float:
    """`value` as a finite `float` in the interval from `low` to `high`, each end open
    or closed."""
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if ok:
        value = float(value)
        ok = (
            math.isfinite(value)
            and (value > low if low_open else value >= low)
            and (value < high if high_open else value <= high)
        )
    if not ok:
        bounds = f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
        raise ValueError(f"{name} must be a number in {bounds} (got {value!r}).")
    return value
