"""What each `et-ode study` found, in one sentence with its numbers (`finding(name,
result)`): printed on the terminal and written as the first entry (`finding`) of the
study's JSON. A sentence names the number of images it rests on and any stop short of
what was asked (a branch that ended at `max_points` before its span, a bifurcation that
was not located, a solve that did not reach its end)."""

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..analysis import quoted_decay


def finding(name: str, result: Mapping[str, Any], *, unit: str = "image") -> str:
    """The finding of study `name` (one of `et_ode.cli.STUDIES`) from its `result` (the
    typed result's entries, or the dict the command line writes); `unit`: what one
    sample is (`"graph"` for `et-ode graph study`)."""
    return FINDINGS[name](result, unit)


def _g(value, digits: int = 3) -> str:
    """A number for a sentence; `n/a` for None or a non-finite value."""
    if value is None:
        return "n/a"
    value = float(value)
    return f"{value:.{digits}g}" if math.isfinite(value) else "n/a"


def _spread(values, digits: int = 3) -> str:
    """`v` for one value, `median m (range a to b)` for several (the finite ones)."""
    values = np.atleast_1d(np.asarray(values, float)).ravel()
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return "n/a"
    if finite.size == 1:
        return _g(finite[0], digits)
    return (
        f"median {_g(np.median(finite), digits)} (range {_g(finite.min(), digits)} "
        f"to {_g(finite.max(), digits)} over {finite.size})"
    )


def _images(count: int, unit: str = "image") -> str:
    """`1 image`, `8 images` (or of another `unit`: a graph study's graphs)."""
    return f"1 {unit}" if count == 1 else f"{count} {unit}s"


def _batch(result, key_array) -> int:
    """Images in a result: the leading axis of `key_array` when `batched`, else 1."""
    return int(np.shape(key_array)[0]) if result.get("batched") else 1


# ------------------------------------------------------------------------ studies
def _convergence(result, unit: str = "image") -> str:
    parts = []
    for flow, rec in result["flows"].items():
        g = np.atleast_2d(np.asarray(rec["residual_rms"], float))
        n = g.shape[0]
        part = (
            f"{flow} flow: RMS G {_spread(g[:, 0])} at t = 0, {_spread(g[:, -1])} at "
            f"t = {float(np.asarray(result['times'])[-1]):g}"
        )
        # the fit the figure's legend and the demo's summary quote
        part += f", fitted decay: {quoted_decay(rec, flow)['text']}"
        reached = np.atleast_1d(np.asarray(rec["time_to_tolerance"], float))
        tolerance = result.get("metadata", {}).get("tolerance")
        tolerance = tolerance.get(flow) if isinstance(tolerance, dict) else tolerance
        if tolerance is not None:
            hit = np.isfinite(reached)
            part += (
                f"; RMS G {tolerance:g} reached by {int(hit.sum())} of "
                f"{_images(reached.size, unit)}"
                + (f", at t = {_spread(reached[hit])}" if hit.any() else "")
            )
        parts.append(part)
    return f"Convergence on {_images(n, unit)}: " + "; ".join(parts) + "."


def _energy_descent(result, unit: str = "image") -> str:
    parts, n = [], 1
    for run in result["runs"]:
        # per image: a row of an array, or a list of its own length (adaptive steps)
        per_image = list(run["energies"]) if result.get("batched") else [run["energies"]]
        n = len(per_image)
        start = [float(np.asarray(e, float)[0]) for e in per_image]
        end = [float(np.asarray(e, float)[-1]) for e in per_image]
        rises = run["real_rises"]
        said = (
            "E never rose"
            if rises == 0 and run["roundoff_rises"] == 0
            else f"E rose at {rises} steps beyond round-off (largest {_g(run['max_rise'], 2)})"
            if rises
            else f"E rose only within round-off ({run['roundoff_rises']} steps)"
        )
        parts.append(f"{run['label']}: E {_spread(start, 4)} -> {_spread(end, 4)}, {said}")
    t1 = result.get("metadata", {}).get("t1")
    return f"Energy descent to t = {_g(t1)} on {_images(n, unit)}: " + "; ".join(parts) + "."


def _overshoot(result, unit: str = "image") -> str:
    n = int(np.shape(result["mse_per_image"])[0])
    kind = "the training horizon" if result["horizon_kind"] == "t1" else "the fixed-point stop"
    change = result["mse_at_end"] / result["mse_at_horizon"] - 1
    trend = (
        f"{abs(change):.0%} {'worse' if change > 0 else 'better'} than at {kind}"
        if abs(change) >= 0.005
        else f"the same as at {kind}"
    )
    return (
        f"Overshoot on {_images(n)}: masked MSE {result['mse_at_horizon']:.4g} at {kind} "
        f"t = {result['horizon']:.3g}, {result['mse_at_end']:.4g} at t = "
        f"{result['t_max']:.4g} ({trend}); the lowest, {result['best_mse']:.4g}, at "
        f"t = {result['best_time']:.3g} (mean over the images)."
    )


def _temperature(result, unit: str = "image") -> str:
    n = int(np.shape(result["mse_per_image"])[1])
    temperatures, mse = np.asarray(result["temperatures"]), np.asarray(result["mse"])
    degraded = result["degraded_at"]
    verdict = (
        f"it degrades (masked MSE above {1 + result['tolerance']:.2g} x T = 0's) from T = "
        f"{_g(degraded)}, tolerating T = {_g(result['tolerated'])}"
        if degraded is not None
        else f"no temperature up to {_g(temperatures[-1])} degraded it by {result['tolerance']:.0%}"
    )
    return (
        f"At a temperature, on {_images(n, unit)} x {result['samples']} noise draws "
        f"({result['noise']} noise, t = {_g(result['horizon'])}): masked MSE "
        f"{mse[0]:.4g} at T = 0, {mse[-1]:.4g} at T = {_g(temperatures[-1])}; {verdict}; "
        f"E rose by {result['energy_rise'][-1]:.3g} at the highest T."
    )


def _escape(result, unit: str = "image") -> str:
    escapes = result["escapes"]
    temperatures, escaped = np.asarray(escapes["temperatures"]), np.asarray(escapes["escaped"])
    verdict = {
        "holds": "Kramers' law holds: the barrier lies within the slope's 95 % interval",
        "fails": "Kramers' law fails there: the barrier lies outside the slope's 95 % interval",
        "unresolved": "too few escapes to test Kramers' law (the slope's 95 % interval is "
        "wider than the barrier: more paths, a longer --horizon or lower temperatures)",
    }[result["kramers"]]
    return (
        f"Escapes from 1 image's fixed point ({result['flow']} flow) to its nearest other "
        f"memory ({_g(result['neighbour_distance'], 2)} RMS in g away, "
        f"{result['hops']} hop(s) to an adjacent one): barrier {_g(result['barrier'])} at a "
        f"saddle of Morse index {result['morse_index']}; at T = {_g(temperatures[0])} to "
        f"{_g(temperatures[-1])} {int(escaped.sum())} of {escapes['paths'] * len(escaped)} "
        f"paths escaped by t = {_g(escapes['t1'])}, log mean escape time against 1/T of "
        f"slope {_g(escapes['slope'])} ({_g(escapes['slope_low'])} to "
        f"{_g(escapes['slope_high'])}), {_g(result['slope_over_barrier'], 2)} x the "
        f"barrier: {verdict}."
    )


def _stability(result, unit: str = "image") -> str:
    start = result.get("start", {})
    reached = (
        f" (start: {start['method']}, {start['stop_reason']} at RMS G "
        f"{_g(start['residual_rms'], 2)})"
        if start
        else ""
    )
    return (
        f"Stability of 1 image's fixed point (RMS G {_g(result['residual_rms'], 2)} after "
        f"the polish){reached}: {result['verdict']['sentence']}"
    )


def _fixed_points(result, unit: str = "image") -> str:
    converged = np.asarray(result["converged"], bool)
    n = len(result["labels"])
    return (
        f"Fixed points from {n} starts ({', '.join(result['labels'])}): "
        f"{int(converged.sum())} of {n} converged, {result['n_distinct']} distinct "
        f"fixed point(s); energies {_spread(result['energy'], 5)}; path independence "
        f"{_g(result['path_independence'])}."
    )


def _gradient_depth(result, unit: str = "image") -> str:
    horizons = np.asarray(result["horizons"], float)
    images = result.get("metadata", {}).get("images")
    on = f" on {_images(int(images))}" if images else ""
    parts = []
    for name, rec in result["adjoints"].items():
        verdict = {True: "vanishes", False: "does not vanish", None: "not measured"}
        parts.append(
            f"{name}: parameter gradient x{_g(rec['ratio'])} from T = {horizons[0]:g} to "
            f"T = {horizons.max():g} ({verdict[rec['vanishes']]})"
        )
    return f"Gradient depth{on}: " + "; ".join(parts) + "."


def _contributions(result, unit: str = "image") -> str:
    share = result["attention_fraction"]
    n = _batch(result, share["masked"])
    masked = np.asarray(share["masked"], float)
    visible = np.asarray(share["visible"], float)
    if result.get("batched"):
        masked, visible = np.nanmedian(masked, axis=0), np.nanmedian(visible, axis=0)
    times = np.asarray(result["times"], float)
    return (
        f"Contributions on {_images(n, unit)} (median over {unit}s): the attention's share of "
        f"the update on masked tokens {masked[0]:.0%} at t = 0, {masked[-1]:.0%} at "
        f"t = {times[-1]:.3g}; on visible tokens {visible[0]:.0%} and {visible[-1]:.0%}; "
        f"the parts add up to the update within {_g(np.max(result['sum_mismatch']), 2)}."
    )


def _long_horizon(result, unit: str = "image") -> str:
    return f"Long horizon of 1 {unit}: " + " ".join(result["findings"])


def _continuation(result, unit: str = "image") -> str:
    name, p0 = result["parameter"], result["trained_value"]
    low, high = result["p_span"]
    reached_high, reached_low = result["p_reached"]
    parts = [
        f"Continuation of 1 image's fixed point in {name} from its trained value {p0:.4g}: "
        f"reached p = {reached_low:.4g} to {reached_high:.4g} of the asked {low:.4g} to "
        f"{high:.4g}"
    ]
    for branch, label in zip(result["branches"], result["labels"]):
        reason = branch.get("stop_reason")
        if reason and reason != "p_span":
            why = {
                "max_points": f"at max_points ({len(branch['p'])} points)",
                "ds_min": "where the step fell below ds_min",
                "closed": "where it closed on itself",
            }.get(reason, reason)
            end = float(np.max(branch["p"]) if "> " in label else np.min(branch["p"]))
            parts.append(f"the branch {label} stopped {why} at p = {end:.4g}, short of its span")
    parts.append(_bifurcations(result["bifurcations"]))
    parts.append(f"every point a fixed point to RMS G {_g(result['largest_residual_rms'], 2)}")
    return "; ".join(parts) + "."


def _bifurcations(found) -> str:
    """The bifurcations of a continuation by kind: how many, where (the first few), how
    many were not located."""
    if not found:
        return "no bifurcation on the branches"
    kinds: dict[str, list] = {}
    for b in found:
        kinds.setdefault(b["kind"], []).append(b)
    said = []
    for kind, points in kinds.items():
        name = kind.replace("_", " ") + ("s" if len(points) > 1 else "")
        where = ", ".join(f"{b['p']:.4g}" for b in points[:5]) + (
            ", ..." if len(points) > 5 else ""
        )
        missed = sum(1 for b in points if not b["located"])
        said.append(
            f"{len(points)} {name} (p = {where})"
            + (
                f", {missed} of them not located (bracketed, not bisected to the tolerance)"
                if missed
                else ""
            )
        )
    return "bifurcations: " + "; ".join(said)


def _basins(result, unit: str = "image") -> str:
    attractors = result["attractors"]
    plane, random = result["plane"], result["random"]
    stable = sum(1 for a in attractors if a.get("stable"))
    plane_starts = int(np.size(plane["labels_grid"]))
    random_starts = int(np.size(random["labels"]))
    return (
        f"Basins of 1 image's conditions on the plane through 2 images' encodings "
        f"({plane_starts} starts) and from {random_starts} random starts: "
        f"{len(attractors)} attractors, {stable} of them found stable; the most visited "
        f"takes {_largest(plane['fractions'])} of the plane and "
        f"{_largest(random['fractions'])} of the random starts; {random['distinct']} "
        f"distinct from the random starts; {plane['not_converged'] + random['not_converged']} "
        "starts did not converge."
    )


def _largest(fractions) -> str:
    fractions = np.asarray(fractions, float)
    return f"{float(fractions.max()):.0%}" if fractions.size else "none"


def _basin_continuation(result, unit: str = "image") -> str:
    values = np.asarray(result["p"], float)
    counts = np.asarray(result["counts"], int)
    events = result["events"]
    changes = "; ".join(
        f"track {e['track']} {e['kind']} at p = {e['p']:.4g}" for e in events[:4]
    ) + (f"; {len(events) - 4} more changes" if len(events) > 4 else "")
    return (
        f"Basin continuation of 1 image's conditions in {result['parameter']} over "
        f"{values.size} values from {values.min():.4g} to {values.max():.4g} (trained "
        f"{result['trained_value']:.4g}): {int(counts.min())} to {int(counts.max())} "
        f"attractors per value in {len(result['tracks'])} tracks; "
        + (changes if events else "no attractor appears or vanishes")
        + "."
    )


def _lyapunov_spectrum(result, unit: str = "image") -> str:
    exponents = np.asarray(result["exponents"], float)
    meta = result.get("metadata", {})
    top = ", ".join(f"{e:.3g}" for e in exponents[: min(4, exponents.size)])
    return (
        f"Lyapunov spectrum of 1 image along the {meta.get('flow', 'given')} flow over "
        f"{_g(result['t1'])} tau after a transient of {_g(result['transient'])}, measured "
        f"in {result['measure']}: the top "
        f"{exponents.size} exponents begin {top} (1/tau); the largest is "
        f"{'positive' if exponents[0] > 0 else 'not positive'}; their sum "
        f"{_g(result['volume_rate'])}."
    )


def _work_precision(result, unit: str = "image") -> str:
    meta = result.get("metadata", {})
    runs = result["runs"]
    ok = [r for r in runs if np.isfinite(r["error_exact"])]
    n = meta.get("images")
    on = f" on {_images(int(n))}" if n else ""

    def setting(r):
        return f"{r['solver']} at " + (
            f"rtol {r['rtol']:g}" if r["kind"] == "adaptive" else f"dt {r['dt0']:g}"
        )

    said = "no run reached t1"
    if ok:
        best = min(ok, key=lambda r: r["error_exact"])
        cheapest = min(ok, key=lambda r: r["nfe"])
        said = (
            f"the most accurate {setting(best)} (error {_g(best['error_exact'], 2)}, "
            f"{best['nfe']} NFE), the cheapest {setting(cheapest)} ({cheapest['nfe']} NFE, "
            f"error {_g(cheapest['error_exact'], 2)})"
        )
    failed = len(runs) - len(ok)
    return (
        f"Work-precision{on} at t1 = {_g(meta.get('t1'))}: {len(runs)} runs, {said}; the "
        f"paper's Euler map is {_g(result['paper']['error_exact'], 2)} from the exact flow"
        + (f"; {failed} runs did not reach t1" if failed else "")
        + "."
    )


FINDINGS: dict[str, Callable[[Mapping[str, Any], str], str]] = {
    "convergence": _convergence,
    "energy-descent": _energy_descent,
    "overshoot": _overshoot,
    "temperature": _temperature,
    "escape": _escape,
    "stability": _stability,
    "fixed-points": _fixed_points,
    "gradient-depth": _gradient_depth,
    "contributions": _contributions,
    "long-horizon": _long_horizon,
    "continuation": _continuation,
    "basins": _basins,
    "basin-continuation": _basin_continuation,
    "lyapunov-spectrum": _lyapunov_spectrum,
    "work-precision": _work_precision,
}
