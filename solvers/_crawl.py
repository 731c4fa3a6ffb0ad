"""An early word when an adaptive solve is going to crawl.

At the authors' shapes (N D = 151,296) every adaptive solver takes steps near 2e-3 tau
on the projected flow (the encoded tokens are small, so their clocks are fast: docs,
benchmarks, "Non-smooth dynamics"): a fixed-point solve with the default caps then ends
after minutes in `"max_steps"` or `"dt_underflow"`. Before an adaptive solve of a large
state, `solve` therefore takes `PROBE_STEPS` steps of the same problem (one sample, the
same solver, tolerances and stop) and, where the mean step would not reach `t1` within
`max_steps`, warns once with the measured step and the advice.
"""

import warnings

import numpy as np

from ._solution import STOP_REASONS, stop_code

# State entries of one sample (N D) from which an adaptive solve is probed: the probe
# costs a compilation and PROBE_STEPS steps, small beside a solve at that size.
PROBE_MIN_STATE = 32_768
PROBE_STEPS = 50


class SlowSolveWarning(UserWarning):
    """An adaptive solve whose steps, measured over its first `PROBE_STEPS`, would not
    reach `t1` within `max_steps`."""


def warn_if_crawling(probe, *, t0, t1, max_steps, entries, solver, rtol) -> float | None:
    """Run `probe()` (a solve of `PROBE_STEPS` steps returning `t_final`,
    `num_accepted_steps` and `stop`) and warn (`SlowSolveWarning`) when its mean accepted
    step would need more than `max_steps` steps from `t0` to `t1`. Returns the mean step
    (`None` when the probe reached its stop within its steps)."""
    out = probe()
    accepted = int(np.asarray(out["num_accepted_steps"]))
    if int(np.asarray(stop_code(out["stop"]))) == STOP_REASONS.index("fixed_point"):
        return None
    advanced = float(np.asarray(out["t_final"])) - float(t0)
    step = advanced / accepted if accepted else 0.0
    span = float(t1) - float(t0)
    if step > 0 and span / step <= max_steps:
        return step
    reach = float(t0) + max_steps * step
    warnings.warn(
        f"solve: {solver} (rtol {float(rtol):g}) advanced by steps of {step:.2g} tau on "
        f"average over its first {PROBE_STEPS} steps of this {entries:,}-entry state: at "
        f"that rate max_steps={max_steps:,} reaches t = {reach:.3g}, short of t1 = "
        f"{float(t1):g}. On a large ReLU model adaptive steps stay small while the token "
        f"scales are small (docs: benchmarks, 'Non-smooth dynamics'): for a fixed point "
        f"use solvers.find_fixed_point (Anderson steps at this size; its x carries the "
        f"implicit gradient, as adjoint='implicit' does), for the paper's map "
        f"solver='euler' with dt0=0.1.",
        SlowSolveWarning,
        stacklevel=4,
    )  # the caller of solve
    return step
