"""Errors raised by `solvers`, and what a failure can add about why."""

import numpy as np

# A solve that failed before t1 is said to be blowing up (`growth_note`) where both its
# state's RMS grew by at least this factor from the start and its growth rate at the end
# (RMS of the field over RMS of the state) times the time elapsed is at least this: a
# solution that reaches infinity at a finite time T grows ever faster (`x' = x^2`: rate
# x, 1/(T - t)), one that grows linearly (the ET's native flow inflating its tokens) has
# rate times time near 1, and an exponential one has it near log(growth), about 10.
BLOWUP_GROWTH = 1e4


class SolveError(RuntimeError):
    """A solve that did not finish as asked. `reason` is one of `"max_steps"`,
    `"dt_underflow"`, `"nonfinite"`, `"not_converged"`; `stats` holds the solve's
    statistics (per sample for a batch)."""

    def __init__(self, reason: str, message: str, stats: dict):
        super().__init__(message)
        self.reason = reason
        self.stats = stats


def growth_note(rms_start, rms_end, speed_end, elapsed, t_end) -> str:
    """A sentence for failed solves (any matching shapes, one entry per sample) whose
    state's RMS went from `rms_start` to `rms_end` in the time `elapsed`, ending at
    `t_end` with the field's RMS `speed_end`, where one is blowing up in finite time
    (`BLOWUP_GROWTH`): the one that grew most is named; empty where none is."""
    start, end, speed, elapsed, when = (
        np.broadcast_to(np.asarray(v, np.float64), np.shape(rms_start)).ravel()
        for v in (rms_start, rms_end, speed_end, elapsed, t_end)
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        growth, rate_time = end / start, speed / end * elapsed
    blowing_up = (growth >= BLOWUP_GROWTH) & (rate_time >= BLOWUP_GROWTH) & np.isfinite(growth)
    if not blowing_up.any():
        return ""
    worst = int(np.argmax(np.where(blowing_up, growth, -np.inf)))
    return (
        f" The state's RMS grew from {start[worst]:.3g} to {end[worst]:.3g} by t = "
        f"{when[worst]:.6g}, ever faster (its rate there times the time elapsed: "
        f"{rate_time[worst]:.2g}): a solution that blows up in finite time ends this way, "
        "and no max_steps, solver or tolerance takes it further; check the field and x0."
    )
