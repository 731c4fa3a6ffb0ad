"""The demo's summary: the numbers each job found, in sentences, as JSON and Markdown."""

import math
from typing import Any

import numpy as np

from ..analysis import quoted_decay

SOLVER_TARGETS = (1e-3, 1e-4, 1e-5, 1e-6, 1e-7)


# The landscape studies, named in the summary but not run by the demo: none is quick.
LANDSCAPE_COMMANDS = (
    (
        "continuation --parameter beta",
        "the held-out image's fixed point followed in the attention's inverse temperature, "
        "with its bifurcations",
    ),
    ("basins --images 2", "the basin map of the plane through two held-out images"),
    (
        "basin-continuation",
        "the attractors reached from a held-out image and random starts across two decades of beta",
    ),
    ("lyapunov-spectrum", "the top Lyapunov exponents along the native flow"),
)


def summarise(run: dict, results: dict) -> dict:
    """`{"run", "held_out", "overshoot", "solvers", "convergence", "energy_video",
    "findings", "files"}` from the demo's results; `findings` are sentences."""
    summary: dict[str, Any] = dict(run=run, findings=[])
    if "held_out" in results:
        summary["held_out"] = results["held_out"]
        summary["findings"].append(_held_out_sentence(results["held_out"]))
    summary["overshoot"] = {}
    for key in [k for k in results if k.startswith("overshoot_")]:
        name, found = key.split("_", 1)[1], _overshoot(results[key])
        summary["overshoot"][name] = found
        summary["findings"].append(_overshoot_sentence(name, found))
    if "solvers" in results:
        summary["solvers"] = _solvers(results["solvers"])
        summary["findings"].append(summary["solvers"]["sentence"])
    if "convergence" in results:
        summary["convergence"] = _convergence(results["convergence"])
        summary["findings"] += [c["sentence"] for c in summary["convergence"].values()]
    summary["energy_video"] = {}
    for key in [k for k in results if k.startswith("video_")]:
        name, found = key.split("_", 1)[1], _video(results[key])
        summary["energy_video"][name] = found
        summary["findings"].append(found["sentence"])
    summary["files"] = _files(results)
    load = run.get("load_average", {})
    busy = (
        f"; the machine's load average was {load['start']:.1f} at the start and "
        f"{load['end']:.1f} at the end"
        if load.get("start") is not None
        else ""
    )
    summary["findings"].append(
        f"The whole demo took {run['seconds']:.0f} s ({run['cpu_seconds']:.0f} s of CPU "
        f"time) on {run['devices']['count']} {run['devices']['platform']} device(s), "
        f"{run['devices']['cpu_cores']} CPU cores{', quick mode' if run['quick'] else ''}"
        f"{busy}."
    )
    return summary


def _g(value, digits=3) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.{digits}g}"


def _held_out_sentence(found: dict) -> str:
    parts = []
    for name in (k for k in found if k != "images"):
        row = found[name]
        verdict = (
            "beats the mean fill"
            if row["model"] < row["mean_fill"]
            else "does not beat the mean fill"
        )
        verdict += (
            (" and interpolation" if row["model"] < row["interpolation"] else ", not interpolation")
            if row["model"] < row["mean_fill"]
            else ""
        )
        parts.append(f"{name} {row['model']:.4f} ({verdict})")
    first = found[next(k for k in found if k != "images")]
    return (
        f"Held-out masked-patch MSE on {found['images']} crops (normalised units): "
        + "; ".join(parts)
        + f". Baselines: mean fill {first['mean_fill']:.4f}, "
        f"interpolation {first['interpolation']:.4f}."
    )


def _overshoot(result: dict) -> dict:
    keys = (
        "horizon",
        "horizon_kind",
        "t_max",
        "mse_at_horizon",
        "mse_at_end",
        "best_time",
        "best_mse",
    )
    found = {k: result[k] for k in keys}
    found["images"] = int(np.shape(result["mse_per_image"])[0])
    energies = np.asarray(result["energy"], float).reshape(-1, np.shape(result["times"])[0])
    energy = np.median(energies, axis=0)
    found["median_energy_start"], found["median_energy_end"] = float(energy[0]), float(energy[-1])
    # the figure's band: the interquartile range over the images
    low, high = np.percentile(energies[:, -1], [25, 75])
    found["energy_end_interquartile"] = [float(low), float(high)]
    return found


def _overshoot_sentence(name: str, f: dict) -> str:
    kind = "its training horizon" if f["horizon_kind"] == "t1" else "its fixed-point stop (median)"
    change = f["mse_at_end"] / f["mse_at_horizon"] - 1
    trend = (
        f"{abs(change):.0%} {'worse' if change > 0 else 'better'} than at the horizon"
        if abs(change) >= 0.005
        else "the same as at the horizon"
    )
    return (
        f"{name}: masked MSE {f['mse_at_horizon']:.4f} at {kind} t = {f['horizon']:.3g}, "
        f"{f['mse_at_end']:.4f} at t = {f['t_max']:.4g} ({trend}; lowest "
        f"{f['best_mse']:.4f} at t = {f['best_time']:.3g}) on {f['images']} images; "
        f"median energy over the images {f['median_energy_start']:.4g} -> "
        f"{f['median_energy_end']:.4g}"
        + (
            f" (interquartile range at the end {f['energy_end_interquartile'][0]:.4g} to "
            f"{f['energy_end_interquartile'][1]:.4g})."
            if f["images"] > 1
            else "."
        )
    )


def _solvers(result: dict) -> dict:
    runs = result["runs"]
    best = min(
        (
            r["error_exact"]
            for r in runs
            if r["kind"] == "adaptive" and np.isfinite(r["error_exact"])
        ),
        default=float("nan"),
    )
    target = next((t for t in reversed(SOLVER_TARGETS) if best <= t), SOLVER_TARGETS[0])
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in runs:
        groups.setdefault((r["solver"], r["kind"]), []).append(r)
    per_solver = []
    for (name, kind), group in groups.items():
        ok = [r for r in group if np.isfinite(r["error_exact"])]
        hit = [r for r in ok if r["error_exact"] <= target]
        low = min(ok, key=lambda r: r["error_exact"]) if ok else None
        per_solver.append(
            dict(
                solver=name,
                kind=kind,
                nfe_to_target=min((r["nfe"] for r in hit), default=None),
                best_error=low and low["error_exact"],
                best_nfe=low and low["nfe"],
                best_setting=low
                and (f"rtol {low['rtol']:g}" if kind == "adaptive" else f"dt {low['dt0']:g}"),
            )
        )
    meta = result["metadata"]
    phrases = []
    for s in sorted(
        per_solver, key=lambda s: (s["nfe_to_target"] is None, s["nfe_to_target"] or 0)
    ):
        name = f"{s['solver']} ({'tolerances' if s['kind'] == 'adaptive' else 'constant steps'})"
        if s["nfe_to_target"] is not None:
            phrases.append(f"{name} reached it with {s['nfe_to_target']} NFE")
        else:
            phrases.append(
                f"{name} did not (best {_g(s['best_error'], 2)} with "
                f"{s['best_nfe']} NFE at {s['best_setting']})"
            )
    sentence = (
        f"Solvers on the paper model's core ({meta['flow']} flow, t1 = {meta['t1']:g}, "
        f"{meta['dtype']} weights; error: max relative difference from a float64 "
        f"{result['reference']['solver']} solve at rtol {result['reference']['rtol']:g}): "
        f"the paper's Euler map (dt 0.1) is {_g(result['paper']['error_exact'], 2)} from "
        f"the exact flow; to reach error {target:g}, " + "; ".join(phrases) + "."
    )
    return dict(
        target_error=target,
        paper_error_exact=result["paper"]["error_exact"],
        per_solver=per_solver,
        flow=meta["flow"],
        t1=meta["t1"],
        sentence=sentence,
    )


def _convergence(result: dict) -> dict:
    """Per flow: RMS G at the start and the end, the time to the tolerance, the token
    scales' growth, and the decay law's fit as the convergence figure's legend quotes it
    (`analysis.quoted_decay`: one image's value, or the median with its range and
    the fits' r^2), each over the images stated."""
    times = np.asarray(result["times"], float)
    out = {}
    for flow, rec in result["flows"].items():
        g = np.asarray(rec["residual_rms"], float).reshape(-1, times.size)
        scales = np.asarray(rec["scales"], float)
        scales = scales.reshape((-1,) + scales.shape[-2:])  # [B, T, N]
        growths = scales[:, -1].mean(-1) / scales[:, 0].mean(-1)
        growth = float(np.median(growths))
        reached = np.atleast_1d(np.asarray(rec["time_to_tolerance"], float))
        decay = quoted_decay(rec, flow)
        f: dict[str, Any] = dict(
            images=int(g.shape[0]),
            rms_g_start=float(np.median(g[:, 0])),
            rms_g_end=float(np.median(g[:, -1])),
            rms_g_end_per_image=g[:, -1].tolist(),
            t_end=float(times[-1]),
            scale_growth=growth,
            time_to_tolerance=float(np.nanmedian(reached)) if np.isfinite(reached).any() else None,
            tolerance=_per_flow(result["metadata"]["tolerance"], flow),
            exponential_rate=_median(rec["fit"]["rate"]),
            power_law_exponent=_median(rec["power_law"]["exponent"]),
            decay=decay,
        )
        if f["tolerance"] is None:
            tol = "time to a tolerance not measured"
        elif f["time_to_tolerance"] is not None:
            hit = reached[np.isfinite(reached)]
            tol = f"RMS G {f['tolerance']:g} reached at t = " + (
                _g(hit[0])
                if reached.size == 1
                else f"{_g(f['time_to_tolerance'])} (median of the {hit.size} of "
                f"{reached.size} images that reached it, range {_g(hit.min())} to "
                f"{_g(hit.max())})"
            )
        else:
            tol = f"RMS G {f['tolerance']:g} not reached by t = {f['t_end']:g}"
        shape = (
            f"fitted exponential {decay['text']}"
            if decay["law"] == "exponential" and decay["fitted"]
            else f"over the last decade RMS G ~ {decay['text']}"
            if decay["fitted"]
            else decay["text"]
        )
        scale_change = (
            f"token scales s_A grew {_spread(growths)}-fold"
            if abs(growth - 1) > 1e-3
            else f"token scales s_A unchanged (x{growth:.4f})"
        )
        images = f"{g.shape[0]} images" if g.shape[0] > 1 else "one image"
        f["sentence"] = (
            f"{flow.capitalize()} flow (paper core in float64, {images}): RMS G went from "
            f"{_spread(g[:, 0])} to {_spread(g[:, -1])} by t = {f['t_end']:g} ({shape}); "
            f"{tol}; {scale_change}."
        )
        out[flow] = f
    return out


def _spread(values) -> str:
    """One image's value, or the median of several with their range, as a sentence
    quotes it: `"4.06e-06"`, `"4.06e-06 (median of 2 images, range 3.1e-06 to
    5.02e-06)"`."""
    values = np.atleast_1d(np.asarray(values, float))
    finite = values[np.isfinite(values)]
    if values.size == 1 or finite.size == 0:
        return _g(float(values[0]))
    return (
        f"{_g(float(np.median(finite)))} (median of {values.size} images, range "
        f"{_g(float(finite.min()))} to {_g(float(finite.max()))})"
    )


def _median(values) -> float:
    values = np.atleast_1d(np.asarray(values, float))
    finite = values[np.isfinite(values)]
    return float(np.median(finite)) if finite.size else float("nan")


def _per_flow(value, flow):
    return value.get(flow) if isinstance(value, dict) else value


def _video(job: dict) -> dict:
    data = job["data"]
    times, energy, mse = (np.asarray(data[k], float) for k in ("times", "mean_energy", "mse"))
    ref = float(data["reference_time"])
    at = int(np.argmin(np.abs(times - ref)))
    rises = int(np.sum(np.diff(energy) > 1e-6 * np.abs(energy[:-1])))
    f = dict(
        video=str(job["video"].name),
        frames=len(times),
        horizon=float(times[-1]),
        reference_time=ref,
        reference_label=data["reference_label"],
        energy_start=float(energy[0]),
        energy_end=float(energy[-1]),
        mse_start=float(mse[0]),
        mse_at_reference=float(mse[at]),
        mse_end=float(mse[-1]),
        energy_rises=rises,
    )
    name = job["metadata"].get("checkpoint", "model")
    f["sentence"] = (
        f"Energy video ({name}, {len(np.asarray(data['energies']))} images, "
        f"{f['frames']} frames to t = {f['horizon']:.3g}, "
        f"{job['video'].name}): mean E {f['energy_start']:.4g} -> {f['energy_end']:.4g} "
        f"({'never rose' if rises == 0 else f'rose between {rises} frames'}); masked MSE "
        f"{f['mse_start']:.4f} at t = 0, {f['mse_at_reference']:.4f} at the "
        f"{f['reference_label']} t = {ref:.3g}, {f['mse_end']:.4f} at the end."
    )
    return f


def _files(results: dict) -> list[dict]:
    files = []
    for key, result in results.items():
        paths = result.get("files") if isinstance(result, dict) else None
        if key.startswith("video_"):
            still = result["still"]
            paths = {
                "video": result["video"],
                still.suffix.lstrip("."): still,
                "json": result["json"],
                "frames": result["frames"][0].parent,
            }
        for kind, path in (paths or {}).items():
            files.append(dict(job=key, kind=kind, path=path.name))
    if "held_out" in results:
        files.append(dict(job="held_out", kind="json", path="held_out_mse.json"))
    return files + [
        dict(job="summary", kind=kind, path=f"summary.{kind}") for kind in ("json", "md")
    ]


def summary_markdown(summary: dict) -> str:
    """The summary as Markdown: findings, stage times, files."""
    run = summary["run"]
    lines = [
        "# et-ode demo",
        "",
        f"Written by `et-ode demo{' --quick' if run['quick'] else ''}` on {run['created']} "
        f"into `{run['folder']}` in {run['seconds']:.0f} s ({run['devices']['count']} "
        f"{run['devices']['platform']} device(s), {run['devices']['cpu_cores']} CPU cores).",
        "Models: the shipped "
        + ", ".join(
            f"`{name}` ({m['solver']}, {m['flow']} flow, t1 {m['t1']:g}"
            + (f", fixed-point stop {m['fixed_point_atol']:g}" if m["fixed_point_atol"] else "")
            + f"; trained {m['step']} steps)"
            for name, m in run["models"].items()
        )
        + f". Data: held-out crops of the test scenes, {run['sizes']['images']} for the "
        f"studies, {run['sizes']['eval_images']} for the MSE table, evaluation masks.",
        "",
        "## What was found",
        "",
    ]
    lines += [f"- {sentence}" for sentence in summary["findings"]]
    lines += ["", "## The landscape (not run here)", ""]
    lines += [
        f"- `et-ode study {command} --checkpoint paper --quick`: {what}"
        for command, what in LANDSCAPE_COMMANDS
    ]
    lines += [
        "",
        "Each takes minutes on a 2-core CPU (the docs' benchmarks page, "
        "'Run times of the commands'); the landscape how-to page shows their figures.",
    ]
    lines += ["", "## Stages", "", "| stage | wall s | CPU s |", "|---|---|---|"]
    lines += [
        f"| {name} | {sec:.1f} | {run['stage_cpu_seconds'][name]:.1f} |"
        for name, sec in run["stage_seconds"].items()
    ]
    lines += ["", "## Files", "", "| job | kind | file |", "|---|---|---|"]
    lines += [f"| {f['job']} | {f['kind']} | `{f['path']}` |" for f in summary["files"]]
    lines += [
        "",
        "`summary.json` holds every number above; each study's JSON holds its data "
        "and what produced it (model, flow, solver, tolerances, dtype, seeds, versions).",
    ]
    return "\n".join(lines) + "\n"
