"""What a failed solve can say about a blow-up in finite time.

A solution that reaches infinity at a finite time `T` ends in `"max_steps"` or
`"dt_underflow"` with a finite state, its steps shrinking towards `T`; more steps, another
solver or other tolerances do not pass it. It is told from other growth by its rate
`|f| / |x|` (RMS over RMS), which grows with the state: `x' = x^2` has rate `x`. An
oscillation or an attractor reached from a small start keeps a bounded rate (a frequency),
a linear growth (the ET's native flow inflating its tokens) a falling one, `1/t`, and an
exponential one a constant one.
"""

import jax
import jax.numpy as jnp
import numpy as np

from ._protocol import batched_args_axes
from ._stop import rms

# Blowing up: the state's RMS grew at least this factor from its start, and its rate at
# the end is at least this factor above the larger of its rate at the start and one over
# the time elapsed.
BLOWUP_GROWTH = 1e4


def growth_note(rms_start, rms_end, speed_start, speed_end, elapsed, t_end) -> str:
    """A sentence for failed solves (any matching shapes, one entry per sample) whose
    state's RMS went from `rms_start` to `rms_end` in the time `elapsed`, ending at
    `t_end`, with the field's RMS `speed_start` and `speed_end` there, where one is
    blowing up (module docstring): the one that grew most is named; empty where none
    is."""
    start, end, v_start, v_end, elapsed, when = (
        np.broadcast_to(np.asarray(v, np.float64), np.shape(rms_start)).ravel()
        for v in (rms_start, rms_end, speed_start, speed_end, elapsed, t_end)
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        growth = end / start
        rate_rise = (v_end / end) / np.maximum(v_start / start, 1.0 / elapsed)
    blowing_up = (growth >= BLOWUP_GROWTH) & (rate_rise >= BLOWUP_GROWTH) & np.isfinite(growth)
    if not blowing_up.any():
        return ""
    worst = int(np.argmax(np.where(blowing_up, growth, -np.inf)))
    return (
        f" The state's RMS grew from {start[worst]:.3g} to {end[worst]:.3g} by t = "
        f"{when[worst]:.6g}, ever faster (its rate |f|/|x| rose {rate_rise[worst]:.2g}-fold): "
        "a solution that blows up in finite time ends this way, and no max_steps, solver "
        "or tolerance takes it further; check the field and x0."
    )


def blowup_note(model, x_start, x_end, t_start, t_end, args, flow, failed, args_batched=False):
    """`growth_note` over the `failed` samples (a mask of the batch, or a scalar) of
    solves of `model` with `flow` from `x_start` at `t_start` to `x_end` at `t_end`
    (one sample `[N, D]`, times scalars; or a batch `[B, N, D]`, times `[B]` or scalars;
    `args` shared, or batched as `batched_args_axes` says)."""
    batched = np.ndim(x_start) == 3
    t_end = np.asarray(t_end, np.float64)
    t_start = np.broadcast_to(np.asarray(t_start, np.float64), t_end.shape)

    def speed(x, t, a):
        return rms(model.vector_field(t, x, a, flow))

    if batched:
        speed = jax.vmap(speed, in_axes=(0, 0, batched_args_axes(args) if args_batched else None))
    sample_rms = lambda x: np.sqrt(np.mean(np.square(np.asarray(x, np.float64)), axis=(-2, -1)))  # noqa: E731
    dtype = jnp.asarray(x_start).dtype
    speeds = [
        np.asarray(speed(jnp.asarray(x), jnp.asarray(t, dtype), args), np.float64)
        for x, t in ((x_start, t_start), (x_end, t_end))
    ]
    failed = np.broadcast_to(failed, t_end.shape)
    return growth_note(
        sample_rms(x_start)[failed],
        sample_rms(x_end)[failed],
        speeds[0][failed],
        speeds[1][failed],
        (t_end - t_start)[failed],
        t_end[failed],
    )
