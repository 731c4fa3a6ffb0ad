"""What a `long_horizon` result says, in sentences (`long_horizon_findings`): reads the
result only (a `LongHorizon`, or a dict with its keys), computes nothing new."""

from collections.abc import Mapping
from typing import Any

import numpy as np

from .._common import energy_noise
from .._common import short_number as _g


def _law_text(decay: Mapping[str, Any]) -> str:
    """The decay law of RMS G in words, with both fits' residuals."""
    law = decay.get("law")
    if law is None:
        return f"no decay law was fitted to RMS G: {decay.get('reason', '')}"
    window = decay["window"]  # set wherever a law is
    exp, power = decay["exponential"], decay["power_law"]
    span = f" over t = {_g(window[0])} to {_g(window[1])}, {decay['n_points']} records"
    exp_text = f"exponential at rate {_g(exp['rate'])}/tau"
    power_text = f"power law t^-{_g(power['exponent'])}"
    res_e, res_p = (
        _g(exp["rms_log_residual"], 2),
        _g(power["rms_log_residual"], 2),
    )
    late = decay.get("late") or {}
    if law == "exponential":
        return (
            f"RMS G decayed exponentially at rate {_g(exp['rate'])}/tau (RMS log "
            f"residual {res_e}; {power_text}: {res_p}){span}; over the last "
            f"{late['n_points']} (from t = {_g(late['window'][0])}) at "
            f"{_g(late['rate'])}/tau"
        )
    if law == "power law":
        return (
            f"RMS G decayed like a power of t, t^-{_g(power['exponent'])} (RMS log "
            f"residual {res_p}; {exp_text}: {res_e}){span}; over the last "
            f"{late['n_points']} (from t = {_g(late['window'][0])}) like "
            f"t^-{_g(late['rate'])}"
        )
    if law == "undecided":
        return (
            f"RMS G's decay law is undecided{span}: {exp_text} and {power_text} fit "
            f"about equally (RMS log residuals {res_e} and {res_p})"
        )
    return (
        f"RMS G did not decay{span} (the better fit rises: {exp_text}, residual "
        f"{res_e}; {power_text}, residual {res_p})"
    )


def long_horizon_findings(result: Mapping[str, Any]) -> list[str]:
    """A few sentences per flow of a `long_horizon` result: how far it ran, at what
    cost, whether and when it reached a fixed point, the decay law of RMS G, the energy
    against the one reference, the scales, the error and the perturbations."""
    t1 = float(result["times"][-1])
    meta = result["metadata"]
    error_name = meta.get("error") or "error"
    fp_tol = meta.get("fixed_point_tol")
    reference = result.get("energy_reference") or {}
    out = []
    for flow, rec in result["flows"].items():
        g = np.asarray(rec["residual_rms"], float)
        reached = rec["segments"]["t1"][-1] if len(rec["segments"]["t1"]) else 0.0
        if rec.get("t_hold") is not None:
            end = (
                f"stopped at a fixed point (RMS G {_g(g[-1])}, hold_tol "
                f"{_g(meta.get('hold_tol'))}) at t = {_g(rec['t_hold'])} and was held "
                f"from there to {_g(t1)}"
            )
        else:
            end = f"ran to t = {_g(reached)}"
        switches = (
            "" if rec["total_switches"] is None else f", {rec['total_switches']} stiffness switches"
        )
        text = (
            f"The {flow} flow ({rec['solver']}) {end} in {rec['total_steps']} steps "
            f"({rec['total_nfe']} evaluations{switches}); RMS G went {_g(g[0])} -> "
            f"{_g(g[-1])}"
        )
        if rec.get("t_fixed_point") is not None:
            lo, hi = rec["t_fixed_point_bracket"]
            text += (
                f" and reached a fixed point (RMS G < {_g(fp_tol)}) at t = "
                f"{_g(rec['t_fixed_point'])} (interpolated between the records at "
                f"{_g(lo)} and {_g(hi)})"
            )
            if rec.get("fixed_point_stays") is False:
                text += ", but rose above that tolerance again later"
        else:
            text += f" and reached no fixed point (RMS G stayed above {_g(fp_tol)})"
        law = _law_text(rec["decay"])
        text += ". " + law[0].upper() + law[1:] + "."
        if reference.get("value") is not None:
            above = np.asarray(rec["energy_above_reference"], float)[-1]
            where = f"{_g(above)} above" if above > energy_noise(reference["value"]) else "at"
            text += (
                f" Its energy ended {where} E_ref = {_g(reference['value'], 6)} "
                f"({reference['label']})."
            )
        if rec.get("scales_median") is not None:
            s = np.asarray(rec["scales_median"], float)
            text += f" The median token scale went {_g(s[0])} -> {_g(s[-1])}."
        err = np.asarray(rec["error"], float)
        if np.isfinite(err).any():
            text += (
                f" The {error_name} went {_g(err[0])} -> {_g(np.nanmin(err))} (min) -> "
                f"{_g(err[-1])}."
            )
        lyap = rec["lyapunov"]
        if lyap is not None:
            parts = ", ".join(
                f"{_g(m, 2)}/tau over {_g(h)}" for h, m in zip(lyap["horizons"], lyap["median"])
            )
            text += (
                f" Perturbations of its end state grew at {parts} (median of "
                f"{lyap['directions']} directions; negative: they shrink)."
            )
        out.append(text)
    return out
