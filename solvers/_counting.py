"""Exact work counts for any solver (`solve(..., count_evaluations=True)`): every
evaluation of the vector field and every Jacobian-vector product through it, counted
where it happens, by a host callback.

A solver's tableau gives its evaluations per step, but an implicit solver's Newton
iterations and Jacobians depend on the problem: they can only be counted. A JAX program
has no mutable state that survives diffrax's loops and custom derivative rules (a
`jax.new_ref` counter fails inside them), so each evaluation reports to the host: the
vector field is wrapped in a `custom_jvp` whose primal rule reports one evaluation and
whose JVP rule reports one product per tangent direction (a Jacobian built column by
column with `vmap` reports its batch size). The counts are read back into the program
at the end of the solve, after its result (a data dependency orders the read).

Costs one host round trip per evaluation, and works for forward solves only: reverse-mode
differentiation through a counted solve is refused by JAX (a host callback cannot be
transposed).
"""

import functools
import itertools
import threading

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

_LOCK = threading.Lock()
_COUNTS: dict[int, list[int]] = {}  # counter id -> [evaluations, JVPs]
_IDS = itertools.count(1)


def new_counters(count: int) -> np.ndarray:
    """`count` fresh counter ids (int32), one per sample of a solve."""
    with _LOCK:
        ids = [next(_IDS) for _ in range(count)]
        for i in ids:
            _COUNTS[i] = [0, 0]
    return np.asarray(ids, np.int32)


def _report(kind: int, counter, directions):
    """Host side: add `directions.size` to entry `kind` of each counter."""
    counter, directions = np.asarray(counter), np.asarray(directions)
    with _LOCK:
        if counter.ndim == 0:
            _COUNTS.setdefault(int(counter), [0, 0])[kind] += max(1, directions.size)
        else:  # one report for a batch of counters
            for c in counter.ravel():
                _COUNTS.setdefault(int(c), [0, 0])[kind] += 1
    return np.zeros((), np.int32)


def _tick(kind: int, counter, directions):
    return io_callback(
        functools.partial(_report, kind),
        jax.ShapeDtypeStruct((), jnp.int32),
        counter,
        directions,
        ordered=False,
    )


def _release(counter, after):
    del after
    with _LOCK:
        counts = _COUNTS.pop(int(np.asarray(counter)), [0, 0])
    return np.asarray(counts, np.int32)


def read_counts(counter, after) -> jax.Array:
    """`[evaluations, JVPs]` (int32) of `counter`, read once `after` (any array of the
    solve's result) is computed; the host entry is released."""
    return io_callback(
        _release,
        jax.ShapeDtypeStruct((2,), jnp.int32),
        counter,
        jnp.sum(after).astype(jnp.float32),
        ordered=False,
    )


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def counted_call(field, counter, model, t, y, args):
    """`field(model, t, y, args)` (`field`: a static, hashable function), reported as one
    evaluation to `counter`."""
    token = _tick(0, counter, jnp.zeros((), jnp.float32))
    return jax.tree.map(lambda out: out + jnp.zeros_like(out) * token, field(model, t, y, args))


@counted_call.defjvp
def _counted_call_jvp(field, primals, tangents):
    counter, model, t, y, args = primals
    _, d_model, dt, dy, dargs = tangents
    out, d_out = jax.jvp(functools.partial(field), (model, t, y, args), (d_model, dt, dy, dargs))
    # one report per tangent direction: under vmap (a Jacobian) `direction` is batched
    direction = jnp.sum(jnp.zeros_like(dy))
    token = _tick(1, counter, direction)
    return out, jax.tree.map(lambda d: d + jnp.zeros_like(d) * token, d_out)
