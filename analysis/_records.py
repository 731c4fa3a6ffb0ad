"""What produced a result, and writing results as JSON.

Every study returns a plain dict (numpy arrays, numbers, strings, nested dicts and lists)
with a `"metadata"` entry from `metadata(...)`. `to_json` turns such a dict into pure JSON
types; `save_json` writes it atomically.
"""

import datetime
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import numpy as np
import numpy.typing as npt

from et_ode.records import atomic_write_text, versions

from ._common import float64_available

# What `to_json` returns: a JSON value (containers hold JSON values in turn).
JSONValue = dict[str, Any] | list[Any] | str | int | float | bool | None


def metadata(
    *,
    study: str,
    dtype: npt.DTypeLike | None = None,
    seeds: Mapping[str, int] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The record of what produced a result.

    **Arguments:**

    - `study`: the study's name (e.g. `"convergence"`).
    - `dtype`: the floating dtype the numbers were computed in.
    - `seeds`: a dict of the PRNG seeds used (empty if none).
    - `**extra`: anything else worth recording (flow, solver, tolerances, ...): values are
      kept as given and converted by `to_json`.

    **Returns:** a dict with `study`, `dtype`, `seeds`, `versions` (see `versions()`),
    `x64` (whether `jax_enable_x64` was on), `devices` (platform and count),
    `xla_flags` (the `XLA_FLAGS` environment variable: compiler settings change wall
    times, see the benchmarks page), `created` (UTC, ISO 8601) and the extra entries.
    """
    devices = jax.devices()
    record = dict(
        study=study,
        dtype=None if dtype is None else str(np.dtype(dtype)),
        seeds=dict(seeds or {}),
        versions=versions(),
        x64=float64_available(),
        devices=dict(platform=devices[0].platform, count=len(devices)),
        xla_flags=os.environ.get("XLA_FLAGS", ""),
        created=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    )
    record.update(extra)
    return record


def model_dtype(model: object) -> np.dtype:
    """The floating dtype of a model's parameters (float32 if it has none)."""
    leaves = jax.tree.leaves(eqx.filter(model, eqx.is_inexact_array))
    return np.dtype(leaves[0].dtype) if leaves else np.dtype(np.float32)


def to_json(result: object) -> JSONValue:
    """A copy of `result` made of JSON types only.

    numpy and JAX arrays become (nested) lists, numpy scalars Python numbers, tuples lists,
    complex numbers `{"real": ..., "imag": ...}` (eigenvalues), dtypes and other objects
    their `str`. JSON has no NaN or infinity: non-finite floats become `None` (diffrax pads
    unreached save slots with `inf`).
    """
    if isinstance(result, Mapping):  # dicts and the typed results (`_results.Result`)
        return {str(key): to_json(value) for key, value in result.items()}
    if isinstance(result, (list, tuple)):
        return [to_json(value) for value in result]
    if isinstance(result, (jax.Array, np.ndarray)):
        return to_json(np.asarray(result).tolist())
    if isinstance(result, (bool, np.bool_)):
        return bool(result)
    if isinstance(result, (int, np.integer)):
        return int(result)
    if isinstance(result, (float, np.floating)):
        value = float(result)
        return value if math.isfinite(value) else None
    if isinstance(result, (complex, np.complexfloating)):
        return {"real": to_json(result.real), "imag": to_json(result.imag)}
    if result is None or isinstance(result, str):
        return result
    return str(result)


def save_json(path: Path | str, result: object, *, indent: int | None = 1) -> str:
    """Write `to_json(result)` to `path` atomically (`et_ode.records.atomic_path`),
    creating the folder if needed. `indent=None` writes compactly (no spaces or newlines: for
    results holding large arrays;
    `python -m json.tool FILE` shows them indented).

    **Returns:** the path written.
    """
    separators = (",", ":") if indent is None else None
    text = json.dumps(to_json(result), indent=indent, separators=separators, allow_nan=False)
    return str(atomic_write_text(path, text))
