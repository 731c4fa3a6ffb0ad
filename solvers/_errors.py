"""Errors raised by `solvers`, and what a failure can add about why."""

import numpy as np

# A failed solve whose state's RMS grew by at least this factor from its start is said
# so in the error (`growth_note`): a solution blowing up in finite time ends in
# `max_steps` or `dt_underflow` with a finite state, and more steps will not pass it.
BLOWUP_GROWTH = 1e4


class SolveError(RuntimeError):
    """A solve that did not finish as asked. `reason` is one of `"max_steps"`,
    `"dt_underflow"`, `"nonfinite"`, `"not_converged"`; `stats` holds the solve's
    statistics (per sample for a batch)."""

    def __init__(self, reason: str, message: str, stats: dict):
        super().__init__(message)
        self.reason = reason
        self.stats = stats


def growth_note(rms_start, rms_end, t_end) -> str:
    """A sentence for a failure where the state's RMS grew from `rms_start` to `rms_end`
    (per sample, any matching shapes) by at least `BLOWUP_GROWTH` by the times `t_end`:
    the largest growth is named; empty where none grew that much or none is finite."""
    start = np.asarray(rms_start, np.float64).ravel()
    end = np.broadcast_to(np.asarray(rms_end, np.float64), np.shape(rms_start)).ravel()
    when = np.broadcast_to(np.asarray(t_end, np.float64), np.shape(rms_start)).ravel()
    growth = np.where(np.isfinite(end) & (start > 0), end / np.where(start > 0, start, 1), 0.0)
    worst = int(np.argmax(growth))
    if not growth[worst] >= BLOWUP_GROWTH:
        return ""
    return (
        f" The state's RMS grew from {start[worst]:.3g} to {end[worst]:.3g} by t = "
        f"{when[worst]:.6g}: a solution that blows up in finite time (there) ends this way, "
        "and no max_steps, solver or tolerance takes it further; check the field and x0."
    )
