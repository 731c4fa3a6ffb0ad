"""The decay law of RMS G along a long run: exponential or power law, chosen by
comparing both least-squares fits in log space (`fit_decay_laws`), the fitted curve
(`decay_curve`), and the time a run first met a fixed-point tolerance
(`fixed_point_time`). Used by `long_horizon` and its figure."""

from typing import Any

import numpy as np

# The decay laws `fit_decay_laws` compares.
DECAY_LAWS = ("exponential", "power law")


def fixed_point_time(times, values, tol: float) -> dict:
    """When a recorded `values` (RMS G) trace first fell below `tol`.

    `times [T]` are the times the recorded states belong to. The first record below
    `tol` and the one before it bracket the crossing; the time is interpolated linearly
    in `log values` between them (the record's own time when it is the first).

    **Returns:** a dict: `t` (`None` when no record is below `tol`), `bracket`
    (`[t_before, t_first_below]`, or `None`), `stays_below` (whether every later record
    is below `tol` too; `None` without a crossing)."""
    t, g = np.asarray(times, float), np.asarray(values, float)
    ok = np.isfinite(t) & np.isfinite(g)
    below = ok & (g < tol)
    if not below.any():
        return dict(t=None, bracket=None, stays_below=None)
    k = int(np.argmax(below))
    stays = bool(np.all(below[k:] | ~ok[k:]))
    before = np.flatnonzero(ok[:k])
    if not before.size:
        return dict(t=float(t[k]), bracket=[float(t[k]), float(t[k])], stays_below=stays)
    j = int(before[-1])
    if g[j] > 0 and g[k] > 0:
        fraction = (np.log(g[j]) - np.log(tol)) / (np.log(g[j]) - np.log(g[k]))
    else:
        fraction = 1.0
    crossing = t[j] + float(np.clip(fraction, 0.0, 1.0)) * (t[k] - t[j])
    return dict(t=float(crossing), bracket=[float(t[j]), float(t[k])], stays_below=stays)


def _line(u, y) -> dict:
    slope, intercept = np.polyfit(u, y, 1)
    resid = y - (slope * u + intercept)
    return dict(
        slope=float(slope),
        intercept=float(intercept),
        rms_log_residual=float(np.sqrt(np.mean(resid**2))),
        r2=float(1.0 - resid.var() / max(y.var(), 1e-300)),
    )


def fit_decay_laws(
    times,
    values,
    *,
    floor: float,
    start: float = 0.8,
    min_points: int = 4,
    late_points: int = 3,
    decide: float = 1.5,
) -> dict:
    """Which law a decaying trace (RMS G) follows: exponential, `log g = a - rate t`, or
    a power law, `log g = a - exponent log t`, both least-squares fits to the same points,
    the one with the smaller RMS residual of `log g` chosen when the other's is more
    than `decide` times larger (else `"undecided"`: neither describes the trace better).

    The window is the final descent above the noise floor: from the first time after
    its peak that `values` is at most `start` times the peak, to the last time it is
    above `floor`; the points in it above `floor` (`t > 0`, finite) are fitted. The peak
    is the largest value, or, where the trace rises again later by more than `1/start`
    from its lowest since (it left a saddle's neighbourhood, say), the top of the last
    such rise. With fewer than `min_points` in the window, no law is chosen (`law` is
    `None`, `reason` says why).

    **Returns:** a dict: `law` (`"exponential"`, `"power law"`, `"undecided"`, `"not
    decaying"` when the better fit rises, or `None`), `rate` (the chosen law's: `1/tau`
    for exponential, the exponent for a power law; `None` unless one was chosen),
    `exponential` (`rate`, `log_amplitude`, `rms_log_residual`, `r2`), `power_law`
    (`exponent`, `log_amplitude`, `rms_log_residual`, `r2`), `residual_ratio` (the
    worse fit's residual over the better one's), `late` (the chosen law refitted over
    the window's last `late_points` records: its `rate` (or exponent), `window`,
    `n_points`; the asymptotic rate, which near a stable fixed point is the slowest
    mode's, where `rate` averages over the transient too), `window` (`[t_first,
    t_last]`), `n_points`, `floor`, `start`, `decide`, `reason`."""
    t, g = np.asarray(times, float), np.asarray(values, float)
    out: dict[str, Any] = dict(
        law=None,
        rate=None,
        exponential=None,
        power_law=None,
        residual_ratio=None,
        late=None,
        window=None,
        n_points=0,
        floor=float(floor),
        start=float(start),
        decide=float(decide),
        reason="",
    )
    ok = np.isfinite(t) & np.isfinite(g) & (g > 0) & (t > 0)
    if not ok.any():
        return dict(out, reason="no positive RMS G recorded after t = 0")
    index = np.arange(len(g))
    peak = highest = int(np.argmax(np.where(ok, g, -np.inf)))
    lowest = g[peak]
    for k in np.flatnonzero(ok & (index > peak) & (g > floor)):
        # a rise by more than 1/start from the lowest since the peak restarts the
        # descent; the top of that rise is the new peak
        if g[k] >= g[peak] or g[k] * start > lowest:
            peak, lowest = int(k), g[k]
        lowest = min(lowest, g[k])
    rebound = peak != highest
    descent = f"the final descent from RMS G {g[peak]:.3g} at t = {t[peak]:.3g}" + (
        " (where it had risen again)" if rebound else ""
    )
    falling = ok & (index >= peak) & (g <= start * g[peak])
    if not falling.any():
        return dict(out, reason=f"RMS G never fell to {start:g} x its peak in {descent}")
    first = int(np.argmax(falling))
    keep = ok & (index >= first) & (g > floor)
    last = int(np.flatnonzero(keep)[-1]) if keep.any() else first
    keep &= index <= last
    out.update(
        window=[float(t[first]), float(t[last])] if keep.any() else None, n_points=int(keep.sum())
    )
    if keep.sum() < min_points:
        advice = (
            "RMS G is not monotone here (it rose again), so no single law may hold"
            if rebound
            else "record more times"
        )
        return dict(
            out,
            reason=f"only {int(keep.sum())} records of {descent} lie between "
            f"{start:g} x its peak and the floor {floor:.3g}, at least {min_points} "
            f"needed: {advice}",
        )
    y = np.log(g[keep])
    exp, power = _line(t[keep], y), _line(np.log(t[keep]), y)
    out["exponential"] = dict(
        rate=-exp["slope"],
        log_amplitude=exp["intercept"],
        rms_log_residual=exp["rms_log_residual"],
        r2=exp["r2"],
    )
    out["power_law"] = dict(
        exponent=-power["slope"],
        log_amplitude=power["intercept"],
        rms_log_residual=power["rms_log_residual"],
        r2=power["r2"],
    )
    chosen, other = (
        (exp, power) if exp["rms_log_residual"] <= power["rms_log_residual"] else (power, exp)
    )
    out["residual_ratio"] = float(
        other["rms_log_residual"] / max(chosen["rms_log_residual"], 1e-300)
    )
    if out["residual_ratio"] < decide:
        return dict(
            out,
            law="undecided",
            reason=(f"the two fits' residuals are within {decide:g}x of each other"),
        )
    if chosen["slope"] >= 0:
        return dict(out, law="not decaying", reason="the better fit rises")
    out["law"] = "exponential" if chosen is exp else "power law"
    out["rate"] = -chosen["slope"]
    # the same law over the window's last `late_points` records: the asymptotic rate
    # (near a stable fixed point, the slowest mode's), free of the early transient
    late = np.flatnonzero(keep)[-late_points:]
    u = t[late] if chosen is exp else np.log(t[late])
    fit = _line(u, np.log(g[late]))
    out["late"] = dict(
        rate=-fit["slope"], window=[float(t[late[0]]), float(t[late[-1]])], n_points=int(late.size)
    )
    return out


def decay_curve(decay: dict, ts):
    """The chosen law of a `fit_decay_laws` result evaluated at `ts` (for plotting);
    `None` without a decaying law."""
    ts = np.asarray(ts, float)
    if decay.get("law") == "exponential":
        fit = decay["exponential"]
        return np.exp(fit["log_amplitude"] - fit["rate"] * ts)
    if decay.get("law") == "power law":
        fit = decay["power_law"]
        return np.exp(fit["log_amplitude"] - fit["exponent"] * np.log(ts))
    return None
