"""Small helpers shared by the studies: dtype casts, batches, sharding, time grids."""

import numbers
from collections.abc import Sequence
from typing import Any, TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import DTypeLike
from jaxtyping import ArrayLike

from et_ode import solvers

PyTree = TypeVar("PyTree")


def cast(tree: PyTree, dtype: DTypeLike) -> PyTree:
    """`tree` with every floating array cast to `dtype` (integer and boolean arrays and
    non-arrays unchanged). Used to run a float32 model in float64 for references."""

    def one(leaf):
        if eqx.is_inexact_array(leaf) and jnp.issubdtype(leaf.dtype, jnp.floating):
            return leaf.astype(dtype)
        return leaf

    return jax.tree.map(one, tree)


def is_count(value, least: int) -> bool:
    """Whether `value` is an integer (Python's or NumPy's, not a bool) of at least
    `least`."""
    return (
        isinstance(value, (int, np.integer)) and not isinstance(value, bool) and int(value) >= least
    )


def is_real(value) -> bool:
    """Whether `value` is a real number (Python's, NumPy's or a 0-d array's), not a
    bool."""
    if isinstance(value, (bool, np.bool_)):
        return False
    if isinstance(value, numbers.Real):
        return True
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    return shape == () and dtype is not None and np.issubdtype(dtype, np.number)


def float64_available() -> bool:
    """Whether `jax_enable_x64` is on (without it float64 arrays silently become float32)."""
    return bool(jax.config.read("jax_enable_x64"))


def as_batch(x):
    """`(x as [B, N, D], whether x was batched)` for `x: [N, D]` or `[B, N, D]`."""
    x = jnp.asarray(x)
    if x.ndim == 2:
        return x[None], False
    if x.ndim == 3:
        return x, True
    raise ValueError(f"x must have shape [N, D] or [B, N, D]; got {tuple(x.shape)}.")


def take(args: Any, index: int, args_batched: bool) -> Any:
    """The conditions of sample `index` (all of `args` when they are shared)."""
    if not args_batched or args is None:
        return args
    return jax.tree.map(lambda leaf: leaf[index] if jnp.ndim(leaf) > 0 else leaf, args)


def shard(xb, args, args_batched):
    """Place a batch `xb: [B, N, D]` (and batched `args`) over every device with
    `solvers.shard_batch` (a no-op on one device). Returns `(xb, args, B)`; results
    are sliced with `[:B]` to drop the padding."""
    if args_batched and args is not None:
        array_args = eqx.filter(args, lambda leaf: eqx.is_array(leaf) and jnp.ndim(leaf) > 0)
        (xb, array_args), batch = solvers.shard_batch((xb, array_args))
        args = eqx.combine(array_args, args)
        return xb, args, batch
    xb, batch = solvers.shard_batch(xb)
    return xb, args, batch


def log_times(
    t_first: float,
    t_last: float,
    n: int,
    *,
    include: ArrayLike | Sequence[float] = (),
    start: float | None = None,
) -> np.ndarray:
    """`n` log-spaced times from `t_first` to `t_last`, merged with `include` (and with
    `start` prepended when given), sorted and unique."""
    times = np.geomspace(t_first, t_last, n)
    times = np.concatenate([times, np.asarray(include, float).ravel()])
    if start is not None:
        times = np.concatenate([[start], times])
    return np.unique(times)


def solve_in_chunks(model, xb, args, times, *, chunks=1, args_batched=False, t0=0.0, **options):
    """States of a batch at `times`, solving `t0 -> times[-1]` in `chunks` segments, each
    continuing from the previous end state, so that at most `len(times) / chunks` states
    per sample are held by one solve and `max_steps` applies per segment.

    **Arguments:** `xb: [B, N, D]` (already sharded if wanted), `times: [T]`
    non-decreasing and `>= t0`, and `solvers.solve` options (no `save`).

    **Returns:** `(xs [B, T, N, D], stats)` with `stats` the per-segment
    `num_steps`, `nfe` and `stop_reason` lists.
    """
    times = np.asarray(times, float)
    groups = [g for g in np.array_split(times, max(1, min(int(chunks), times.size))) if g.size]
    size = max(g.size for g in groups)
    out, stats = [], dict(num_steps=[], nfe=[], stop_reason=[], t0=[], t1=[])
    x, start = xb, float(t0)
    for group in groups:
        padded = np.concatenate([group, np.full(size - group.size, group[-1])])
        end = float(group[-1])
        if end <= start:  # every time of this group is the current time
            out.append(jnp.repeat(x[:, None], group.size, axis=1))
            continue
        sol = solvers.solve(
            model, x, args=args, t0=start, t1=end, save=padded, args_batched=args_batched, **options
        )
        out.append(sol.xs[:, : group.size])
        for key in ("num_steps", "nfe"):
            stats[key].append(np.asarray(sol.stats[key]))
        stats["stop_reason"].append(sol.stats["stop_reason"])
        stats["t0"].append(start)
        stats["t1"].append(end)
        x, start = sol.x_final, end
    return jnp.concatenate(out, axis=1), stats


def energy_noise(value) -> float:
    """Differences of energies near `value` below this are float64 round-off."""
    return 100 * float(np.finfo(np.float64).eps) * max(1.0, abs(float(value)))


def short_number(value, digits=3) -> str:
    """`value` to `digits` significant digits, `"n/a"` where it is None or not finite."""
    if value is None or not np.isfinite(value):
        return "n/a"
    return f"{value:.{digits}g}"
