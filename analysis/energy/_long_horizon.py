"""Long horizons: what the dynamics do far past the trained time, on each flow.

Recorded over log-spaced times up to `t1` (default `1e4 tau`): the energy, RMS G (the
residual), the token scales `s_A` (median, min, max over tokens) where the model has
them, an optional error of the state (the masked MSE of an image model), the solver's
mean accepted step size and its rejected steps per segment, its stiffness switches where
it reports them; and, from the end state, finite-time Lyapunov exponents over several
horizons. From these: one energy reference for all flows, the decay law of RMS G
(exponential or power law, chosen by comparing both fits) and the time each flow
reached a fixed point.

What runs (docs/mathematics.md, "The two flows"): both flows are integrated to `t1`.
The native flow's clock slows like `1/t` (few explicit steps), so it runs with tsit5. The projected
flow converges exponentially and then becomes stiff for an explicit solver (tsit5 to
`1e4` on the shipped core: tens of thousands of steps held at its stability limit,
docs: benchmarks, `long_horizon` row), so it runs with
`solver="auto"`, which switches to a matrix-free implicit step once it detects the
stiffness (docs: benchmarks, `long_horizon` row). `hold_tol` instead stops the projected
solve at a fixed point (`solvers.FixedPointStop`, RMS G below `hold_tol`) and *holds*
it for the later times, not integrated (`held` says which): the cheap way with an
explicit solver.

Any `solvers.EnergySystem` (`energy`, `vector_field`, `residual`) runs: see
`long_horizon` for what is read from the model beyond that.
"""

from collections.abc import Mapping, Sequence
from typing import Any

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float

from et_ode import solvers
from et_ode.vocab import FLOWS, Flow

from .._common import float64_available, is_count, is_real, log_times
from .._common import short_number as _g
from .._geometry import has, require, token_scales
from .._records import metadata, model_dtype
from .._results import build as typed
from ..landscape import LyapunovSpectrumSettings, lyapunov_spectrum
from ._decay_laws import fit_decay_laws, fixed_point_time
from ._long_horizon_findings import long_horizon_findings
from ._long_horizon_records import FiniteTimeLyapunov, LongHorizon, LongHorizonFlow
from ._settings import (
    FINITE_TIME_LYAPUNOV_OPTIONS,
    LONG_HORIZON_OPTIONS,
    LongHorizonSettings,
    number,
    require_options,
    solver_name,
)

# The default solver per flow (`LONG_HORIZON_OPTIONS`): the projected flow turns stiff
# once it has converged, the native flow does not (its clock slows instead).
DEFAULT_SOLVERS = {flow: options.solver for flow, options in LONG_HORIZON_OPTIONS.items()}


def _slope(ts, values, lower, upper):
    keep = (ts >= lower) & (ts <= upper) & np.isfinite(values)
    if keep.sum() < 2:
        return float("nan")
    return float(np.polyfit(ts[keep], values[keep], 1)[0])


@eqx.filter_jit
def _quantities(model, x, args):
    return dict(
        energy=model.energy(x, args),
        residual_rms=solvers.rms(model.residual(x, args)),
        scales=token_scales(model, x, args),
    )


def _segment_stats(sol) -> dict:
    stats = sol.stats
    switches, implicit = stats.get("num_switches"), stats.get("implicit_steps")
    return dict(
        accepted=int(stats["num_accepted_steps"]),
        rejected=int(stats["num_rejected_steps"]),
        nfe=int(stats["nfe"]),
        stop_reason=stats["stop_reason"],
        switches=None if switches is None else int(np.asarray(switches)),
        implicit=None if implicit is None else int(np.asarray(implicit)),
    )


def _trajectory(model, x0, args, times, options, hold_tol, error_fn):
    """States' quantities at `times` (one solve per interval with `options`, each
    continuing from the previous end), and per interval the solver's statistics.
    `state_times`: the time each recorded state belongs to (a held record's is where the
    hold began)."""
    records = dict(energy=[], residual_rms=[], scales=[], error=[], held=[], state_times=[])
    seg = dict(
        t0=[],
        t1=[],
        accepted=[],
        rejected=[],
        nfe=[],
        stop_reason=[],
        switches=[],
        implicit=[],
        mean_step=[],
    )
    x, held, t_stop, t_state = x0, False, None, float(times[0])

    def record(x, is_held, t_state):
        q = _quantities(model, x, args)
        records["energy"].append(float(q["energy"]))
        records["residual_rms"].append(float(q["residual_rms"]))
        records["scales"].append(None if q["scales"] is None else np.asarray(q["scales"]))
        records["error"].append(float(error_fn(x)) if error_fn is not None else np.nan)
        records["held"].append(is_held)
        records["state_times"].append(t_state)

    record(x, False, t_state)
    for start, end in zip(times[:-1], times[1:]):
        if not held:
            stop = None if hold_tol is None else solvers.FixedPointStop(atol=hold_tol)
            sol = solvers.solve(
                model,
                x,
                options=options,
                args=args,
                t0=float(start),
                t1=float(end),
                stop=stop,
                throw=False,
            )
            s = _segment_stats(sol)
            ok = s["stop_reason"] in ("t1", "fixed_point", "not_converged")  # last: t1, no stop
            for key in ("accepted", "rejected", "nfe", "stop_reason", "switches", "implicit"):
                seg[key].append(s[key])
            span = float(sol.t_final) - float(start)
            seg["mean_step"].append(span / s["accepted"] if s["accepted"] else np.nan)
            seg["t0"].append(float(start))
            seg["t1"].append(float(sol.t_final))
            t_state = float(sol.t_final)
            if not ok:  # max_steps or a failure: stop here, later times are not known
                x = jnp.full_like(x, jnp.nan)
                held, t_state = True, np.nan
            else:
                x = sol.x_final
                if s["stop_reason"] == "fixed_point":
                    held, t_stop = True, float(sol.t_final)
        record(x, held, t_state)
    scales = records.pop("scales")
    out = {k: np.asarray(v) for k, v in records.items()}
    if scales[0] is None:  # a model without token scales
        out.update(scales_median=None, scales_min=None, scales_max=None)
    else:
        scales = np.asarray(scales)
        out.update(
            scales_median=np.median(scales, axis=-1),
            scales_min=scales.min(axis=-1),
            scales_max=scales.max(axis=-1),
        )
    out.update(x_end=np.asarray(x), t_hold=t_stop)
    out["segments"] = {
        k: (np.asarray(v, float) if k in ("t0", "t1", "mean_step") else v) for k, v in seg.items()
    }
    return out


def energy_reference(flows: Mapping[str, Any]) -> dict:
    """One energy reference for every flow of a `long_horizon` result: the lowest energy
    recorded over all flows and times. Returns `value`, the `flow` and `time` it was
    recorded at, `at_fixed_point` (whether that flow had reached its fixed point by then,
    `t_fixed_point`) and `label`, the reference in words."""
    best = None
    for flow, rec in flows.items():
        energy = np.asarray(rec["energy"], float)
        if not np.isfinite(energy).any():
            continue
        k = int(np.nanargmin(np.where(np.isfinite(energy), energy, np.nan)))
        if best is None or energy[k] < best[0]:
            best = (float(energy[k]), flow, float(rec["state_times"][k]))
    if best is None:
        return dict(
            value=None,
            flow=None,
            time=None,
            at_fixed_point=False,
            label="no finite energy recorded",
        )
    value, flow, time = best
    t_fp = flows[flow].get("t_fixed_point")
    at_fixed_point = t_fp is not None and time >= t_fp
    if at_fixed_point:
        label = f"E at the {flow} flow's fixed point"
    else:
        label = f"the lowest E recorded (the {flow} flow at t = {_g(time)}, not a fixed point)"
    return dict(value=value, flow=flow, time=time, at_fixed_point=bool(at_fixed_point), label=label)


def finite_time_lyapunov(
    model: solvers.EnergySystem,
    x: Float[ArrayLike, "N D"],
    args: Any = None,
    *,
    options: solvers.SolveOptions = FINITE_TIME_LYAPUNOV_OPTIONS,
    horizons: Sequence[float] = (1.0, 10.0, 100.0),
    directions: int = 4,
    segment: float = 2.0,
    seed: int = 0,
) -> FiniteTimeLyapunov:
    """Growth of small perturbations of `x: [N, D]` over several horizons, in float64:
    `lyapunov_spectrum` with `directions` tangent vectors each normalised on its own
    (`orthonormalise=False`), its intervals ending at every horizon (`ends`).

    `model`: any `solvers.EnergySystem` (`energy`, `vector_field`, `residual`; refused
    before solving without them). Where it declares a geometry (`tangent_projection`,
    `clock`: `analysis._geometry`, the ET's LayerNorm manifold) perturbations are tangent
    and measured in the energy's coordinates (`g` for the ET); a model without one is
    flat (every direction of `x` free, measured in `x`).

    `directions` random tangent perturbations (seeded: the rows of
    `jax.random.normal(key(seed), (directions, *x.shape))`) are carried with the state by
    the variational equation (a JVP of the vector field: the limit `eps -> 0` of
    perturbing `x` by `eps` and integrating both copies), all in one solve per piece; the
    pieces are at most `segment` long and end at every horizon, and after each every
    perturbation is renormalised to size 1 on its own (its decay never reaches the
    solver's `atol`; they are not orthogonalised). The exponent at horizon `T` is
    `log(|d(T)| / |d(0)|) / T` (the sum of the pieces' logs), per direction. `options`:
    how each piece is solved, on which flow (default `FINITE_TIME_LYAPUNOV_OPTIONS`: the
    projected flow, tsit5 at rtol 1e-10; any solver but `"auto"`, as
    `lyapunov_spectrum`).

    **Returns:** a `FiniteTimeLyapunov` (the exponents per direction and horizon, their
    median and largest, and the settings).
    """
    require(model, "finite_time_lyapunov")
    options = require_options("finite_time_lyapunov", options)
    ends = np.sort(np.asarray(horizons, float).ravel())
    if not (ends.size and np.all(np.isfinite(ends)) and ends[0] > 0):
        raise ValueError(f"horizons must be one or more finite times > 0 (got {horizons!r}).")
    if not is_count(directions, 1):
        raise ValueError(f"directions must be an integer >= 1 (got {directions!r}).")
    if not (is_real(segment) and 0 < segment < np.inf):
        raise ValueError(f"segment must be a finite time > 0 (got {segment!r}).")
    spectrum = lyapunov_spectrum(
        model,
        x,
        args=args,
        k=int(directions),
        t1=float(ends[-1]),
        options=options,
        settings=LyapunovSpectrumSettings(
            renormalise=segment,
            measure="g",  # |C P dx|: |dx| on a flat model
            seed=seed,
            orthonormalise=False,
            ends=tuple(map(float, ends)),
        ),
        dtype=jnp.float64 if float64_available() else jnp.float32,
    )
    # the running estimates at the horizons: the sums of the logs up to each over it
    exponents = spectrum.history[np.searchsorted(spectrum.times, ends)].T
    return FiniteTimeLyapunov(
        horizons=ends,
        exponents=exponents,
        median=np.median(exponents, axis=0),
        max=exponents.max(axis=0),
        flow=options.flow,
        directions=int(directions),
        segment=float(segment),
        seed=int(seed),
        solver=options.solver,
        rtol=number(options.rtol),
        atol=number(options.atol),
        coordinates="g" if has(model, "energy_coordinates") else "x",
    )


def _options_per_flow(options, flows) -> dict:
    """`{flow: SolveOptions}` for `long_horizon`: one `SolveOptions` for every flow, or a
    mapping with one per flow of `flows` (sharing `rtol` and `atol`: the fixed-point
    tolerance and the record are the study's); each flow replaces its options' `flow`."""
    if isinstance(options, solvers.SolveOptions):
        return {f: options.replace(flow=f) for f in FLOWS}
    if not isinstance(options, Mapping):
        raise TypeError(
            "long_horizon's options must be a solvers.SolveOptions (every flow) or a mapping "
            f"of flows to them (got {type(options).__name__})."
        )
    missing = [f for f in flows if f not in options]
    if missing:
        raise ValueError(
            f"long_horizon's options have none for the {missing[0]} flow: give one per flow "
            "of flows, or one solvers.SolveOptions for all."
        )
    per_flow = {}
    for f, value in options.items():
        if f not in FLOWS:
            raise ValueError(
                f"long_horizon's options name a flow {f!r}: choose from {', '.join(FLOWS)}."
            )
        per_flow[f] = require_options("long_horizon", value).replace(flow=f)
    steps = {(per_flow[f].rtol, per_flow[f].atol) for f in flows}
    if len(steps) > 1:
        raise ValueError(
            "long_horizon's options per flow must share rtol and atol (the fixed-point "
            "tolerance and the record are the study's): give them the same, or run the "
            "flows in two calls."
        )
    return per_flow


def _auto_tol(value, options, name):
    """`value`, or for `"auto"` 10 times `options.rtol` (None without options)."""
    if value != "auto":
        return None if value is None else float(value)
    if options is None:
        return None
    if options.rtol is None:
        raise ValueError(
            f"LongHorizonSettings.{name}='auto' is 10 rtol, and these options have none "
            "(constant steps or a step-size controller): give a number."
        )
    return 10.0 * float(options.rtol)


def _shared(values: dict):
    """One value where every flow has the same (as the metadata recorded it), else the
    mapping per flow."""
    distinct = list(dict.fromkeys(values.values()))
    return distinct[0] if len(distinct) == 1 else dict(values)


def long_horizon(
    model: solvers.EnergySystem,
    x0: Float[ArrayLike, "N D"],
    args: Any = None,
    *,
    flows: Sequence[Flow] = FLOWS,
    t1: float = 1e4,
    options: solvers.SolveOptions | Mapping[str, solvers.SolveOptions] = LONG_HORIZON_OPTIONS,
    settings: LongHorizonSettings = LongHorizonSettings(),
) -> LongHorizon:
    """Each flow from `x0: [N, D]` to `t1`, recorded at `settings.n_times` log-spaced
    times, and finite-time Lyapunov exponents of its end state.

    **What it needs of the model:** any `solvers.EnergySystem`: `energy(x, args)`,
    `vector_field(t, x, args, flow)` for each flow in `flows`, `residual(x, args)` (RMS G
    is its RMS; zero exactly at fixed points). A model lacking one is refused before any
    solve. Optional: `token_scales(x, args)` (the ET's `s_A`: without it the `scales_*`
    entries are `None` and the figure says so), and the geometry of
    `analysis._geometry` (tangent projection, clock) for the Lyapunov exponents (without
    it the model is flat). ET-only by nature: the token scales and a masked-image
    `error_fn`.

    **Arguments:**

    - `model`, `x0`, `args`: the model, one state, its conditions (`None` for none).
      Run it in float64 for `t1` near `1e4` (float32 resolves times there to ~0.016).
    - `flows`; `t1` (tau units).
    - `options`: how each flow is solved: one `solvers.SolveOptions` for every flow (each
      flow replaces `options.flow`), or a mapping of flows to them (default
      `LONG_HORIZON_OPTIONS`: tsit5 on the native flow, `"auto"` on the projected one,
      rtol 1e-4, atol 1e-6, at most 200,000 steps per recorded interval). The records
      are `0` and log-spaced times from `settings.t_first`; one solve per interval,
      each continuing from the previous end.
    - `settings`: a `LongHorizonSettings`: the record times, the projected flow's hold
      (`hold_tol`), the fixed-point tolerance (`fixed_point_atol`, default `10 rtol`: an
      adaptive solve's RMS G stalls between about `0.1 rtol` and `rtol` once the flow
      has converged, so nothing below `rtol` can be told from the solver's noise), the
      decay-law fit, the error of the state and the Lyapunov exponents (each field
      documented there).

    The decay law of RMS G is fitted from the first time it is at most `fit_start` times
    its peak (the decay has begun; RMS G can rise first) to the last time it is above
    `fit_floor` (default the fixed-point tolerance: below it an explicit solver's
    residual stalls, and "auto"'s decays at its own implicit steps' rate rather than the
    flow's), on integrated (not held) records; see `fit_decay_laws`. The default 0.8
    leaves a slow power law enough records (the native flow's RMS G falls only 2.6-fold
    from its peak by t = 100 on the tests' tiny model); the chosen law's `late` rate,
    over the window's last three records, is free of the transient that an early start
    takes in. An exponential needs records every few `1/rate`: the default ten per
    decade (`n_times` 41 from `t_first` 0.01 to `t1` 100) resolve one that falls to the
    floor within a decade.

    **Returns:** a `LongHorizon`: the `times`, one `energy_reference` for all flows,
    per flow a `LongHorizonFlow` (its records, solver statistics, fixed-point time, decay
    law and Lyapunov exponents; each entry documented on its field), the `findings`
    (sentences) and `metadata` (with `fixed_point_tol`, `fit_floor`, `fit_start`,
    `model_type`).
    """
    require(model, "long_horizon")
    x0 = jnp.asarray(x0)
    if x0.ndim != 2:
        raise ValueError(f"long_horizon takes one state [N, D]; got {tuple(x0.shape)}.")
    unknown = [f for f in flows if f not in FLOWS]
    if unknown:
        raise ValueError(f"unknown flow {unknown[0]!r}: choose from {', '.join(FLOWS)}.")
    per_flow = _options_per_flow(options, flows)
    dtype = model_dtype(model)
    times = log_times(settings.t_first, t1, settings.n_times - 1, start=0.0)
    tol = _auto_tol(settings.hold_tol, per_flow.get("projected"), "hold_tol")
    first = per_flow[flows[0]] if len(flows) else next(iter(per_flow.values()))
    rtol, atol = first.rtol, first.atol  # shared by every flow run
    fp_tol = _auto_tol(settings.fixed_point_atol, first, "fixed_point_atol")
    floor = fp_tol if settings.fit_floor is None else float(settings.fit_floor)
    horizons = settings.lyapunov_horizons
    error_fn = settings.error_fn
    out: dict[str, Any] = dict(times=times, flows={})
    for flow in flows:
        rec = _trajectory(
            model, x0, args, times, per_flow[flow], tol if flow == "projected" else None, error_fn
        )
        seg = rec["segments"]
        rec["solver"] = solver_name(per_flow[flow])
        rec["total_steps"] = int(sum(seg["accepted"]) + sum(seg["rejected"]))
        rec["total_nfe"] = int(sum(seg["nfe"]))
        rec["total_switches"] = (
            None if any(s is None for s in seg["switches"]) else int(sum(seg["switches"]))
        )
        rec["scale_growth_per_tau"] = (
            None
            if rec["scales_median"] is None
            else _slope(times, rec["scales_median"], t1 / 10, t1)
        )
        crossing = fixed_point_time(rec["state_times"], rec["residual_rms"], fp_tol)
        rec.update(
            t_fixed_point=crossing["t"],
            t_fixed_point_bracket=crossing["bracket"],
            fixed_point_stays=crossing["stays_below"],
        )
        # each integrated state once: the live records and the state a hold began at
        once = ~rec["held"]
        if rec["held"].any():
            once[int(np.argmax(rec["held"]))] = True
        g_once = rec["residual_rms"][once]
        rec["decay"] = fit_decay_laws(
            rec["state_times"][once], g_once, floor=floor, start=settings.fit_start
        )
        rec["lyapunov"] = None
        if len(horizons) and np.all(np.isfinite(rec["x_end"])):
            rec["lyapunov"] = finite_time_lyapunov(
                model,
                rec["x_end"],
                args,
                options=FINITE_TIME_LYAPUNOV_OPTIONS.replace(flow=flow),
                horizons=horizons,
                directions=settings.lyapunov_directions,
                segment=settings.lyapunov_segment,
                seed=settings.seed,
            )
        out["flows"][flow] = rec
    reference = energy_reference(out["flows"])
    out["energy_reference"] = reference
    for rec in out["flows"].values():
        rec["energy_above_reference"] = (
            rec["energy"] - reference["value"]
            if reference["value"] is not None
            else np.full_like(rec["energy"], np.nan)
        )
    out["metadata"] = metadata(
        study="long_horizon",
        dtype=dtype,
        flows=list(flows),
        solver={f: out["flows"][f]["solver"] for f in flows},
        rtol=rtol,
        atol=atol,
        t1=t1,
        n_times=settings.n_times,
        max_steps=_shared({f: per_flow[f].max_steps for f in flows}),
        hold_tol=tol,
        fixed_point_tol=fp_tol,
        fit_start=settings.fit_start,
        fit_floor=floor,
        error=settings.error_name if error_fn is not None else None,
        model_type=type(model).__name__,
        token_scales=has(model, "token_scales"),
        seeds=dict(lyapunov=settings.seed),
        lyapunov_horizons=list(map(float, horizons)),
        energy_reference=reference["label"],
        coordinates=(
            "RMS G over the N D entries of the residual; s_A of x; FTLE of |dg|"
            if has(model, "energy_coordinates")
            else "RMS G over the N D entries of the residual; FTLE of |dx|"
        ),
        step_sizes="mean accepted step per recorded interval",
        fixed_point_time="first crossing of fixed_point_tol, interpolated linearly in "
        "log RMS G between the two records around it",
    )
    out["findings"] = long_horizon_findings(out)
    return typed(
        LongHorizon,
        dict(out, flows={f: typed(LongHorizonFlow, r) for f, r in out["flows"].items()}),
    )
