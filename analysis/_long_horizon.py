"""Long horizons: what the dynamics do far past the trained time, on each flow.

Recorded over log-spaced times up to `t1` (default `1e4 tau`): the energy, RMS G (the
residual), the token scales `s_A` (median, min, max over tokens) where the model has
them, an optional error of the state (the masked MSE of an image model), the solver's
mean accepted step size and its rejected steps per segment, its stiffness switches where
it reports them; and, from the end state, finite-time Lyapunov exponents over several
horizons. From these: one energy reference for all flows, the decay law of RMS G
(exponential or power law, chosen by comparing both fits) and the time each flow
reached a fixed point.

What runs (DESIGN.md, sections 3 and 8): both flows are integrated to `t1`. The native
flow's clock slows like `1/t` (few explicit steps), so it runs with tsit5. The projected
flow converges exponentially and then becomes stiff for an explicit solver (tsit5 to
`1e4` on the shipped core: 71,449 steps held at its stability limit), so it runs with
`solver="auto"`, which switches to a matrix-free implicit step once it detects the
stiffness (docs: benchmarks, `long_horizon` row). `hold_tol` instead stops the projected
solve at a fixed point (`solvers.FixedPointStop`, RMS G below `hold_tol`) and *holds*
it for the later times, not integrated (`held` says which): the cheap way with an
explicit solver.

Any `solvers.EnergySystem` (`energy`, `vector_field`, `residual`) runs: see
`long_horizon` for what is read from the model beyond that.
"""

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float
from matplotlib.figure import Figure

from et_ode import solvers
from et_ode.vocab import FLOWS, Flow

from ._common import cast, log_times
from ._geometry import has, require, tangent_normalise, token_scales
from ._plotting import FLOW_COLOURS, caption, figure, finish, model_name, positive, title
from ._records import metadata, model_dtype
from ._stability import _Variational

# The default solver per flow: the projected flow turns stiff once it has converged, the
# native flow does not (its clock slows instead).
DEFAULT_SOLVERS = {"native": "tsit5", "projected": "auto"}

# The decay laws `fit_decay_laws` compares.
DECAY_LAWS = ("exponential", "power law")


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


def _trajectory(model, x0, args, times, flow, options, hold_tol, error_fn):
    """States' quantities at `times` (one solve per interval, each continuing from the
    previous end), and per interval the solver's statistics. `state_times`: the time
    each recorded state belongs to (a held record's is where the hold began)."""
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
                args=args,
                t0=float(start),
                t1=float(end),
                flow=flow,
                stop=stop,
                throw=False,
                **options,
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


def energy_reference(flows: dict) -> dict:
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
    flow: Flow = "projected",
    horizons: Sequence[float] = (1.0, 10.0, 100.0),
    directions: int = 4,
    segment: float = 2.0,
    seed: int = 0,
    solver: str | diffrax.AbstractSolver = "tsit5",
    rtol: float | None = 1e-10,
    atol: float | None = 1e-12,
    max_steps: int | None = 100_000,
) -> dict[str, Any]:
    """Growth of small perturbations of `x: [N, D]` over several horizons, in float64.

    `model`: any `solvers.EnergySystem` (`energy`, `vector_field`, `residual`; refused
    before solving without them). Where it declares a geometry (`tangent_projection`,
    `clock`: `analysis._geometry`, the ET's LayerNorm manifold) perturbations are tangent
    and measured in the energy's coordinates (`g` for the ET); a model without one is
    flat (every direction of `x` free, measured in `x`).

    `directions` random tangent perturbations (seeded) are carried with the state by the
    variational equation (a JVP of the vector field: the limit `eps -> 0` of perturbing
    `x` by `eps` and integrating both copies), all in one batched solve per piece; the
    pieces are at most `segment` long and end at every horizon, and after each the
    perturbation is renormalised to size 1 (its decay never reaches the solver's
    `atol`). The exponent at horizon `T` is `log(|d(T)| / |d(0)|) / T` (the sum of the
    pieces' logs), per direction.

    **Returns:** a dict: `horizons [H]`, `exponents [directions, H]`, `median [H]`,
    `max [H]`, and the settings (`coordinates`: `"g"` or `"x"`).
    """
    require(model, "finite_time_lyapunov")
    model64, x64, args64 = cast((model, jnp.asarray(x), args), jnp.float64)
    n_tokens = x64.shape[0]
    system = _Variational(model64, n_tokens)
    ends = np.sort(np.asarray(horizons, float))
    edges = [0.0]
    for h in ends:
        pieces = max(1, int(np.ceil((h - edges[-1]) / segment)))
        edges += list(np.linspace(edges[-1], h, pieces + 1)[1:])
    normalise = jax.vmap(tangent_normalise, in_axes=(None, 0, 0, None))
    dx = jax.random.normal(jax.random.key(seed), (directions,) + x64.shape, x64.dtype)
    xs = jnp.broadcast_to(x64, dx.shape)
    dx, _ = normalise(model64, xs, dx, args64)
    total, per_horizon = np.zeros(directions), []
    for start, end in zip(edges[:-1], edges[1:]):
        y = jnp.concatenate([xs, dx], axis=1)
        sol = solvers.solve(
            system,
            y,
            args=args64,
            t0=float(start),
            t1=float(end),
            solver=solver,
            rtol=rtol,
            atol=atol,
            flow=flow,
            max_steps=max_steps,
        )
        xs, dx = sol.x_final[:, :n_tokens], sol.x_final[:, n_tokens:]
        dx, growth = normalise(model64, xs, dx, args64)
        total += np.log(np.asarray(growth))
        if np.any(np.isclose(end, ends)):
            per_horizon.append(total / end)
    exponents = np.stack(per_horizon, axis=1)
    return dict(
        horizons=ends,
        exponents=exponents,
        median=np.median(exponents, axis=0),
        max=exponents.max(axis=0),
        flow=flow,
        directions=int(directions),
        segment=float(segment),
        seed=int(seed),
        solver=solver,
        rtol=rtol,
        atol=atol,
        coordinates="g" if has(model, "energy_coordinates") else "x",
    )


def long_horizon(
    model: solvers.EnergySystem,
    x0: Float[ArrayLike, "N D"],
    args: Any = None,
    *,
    flows: Sequence[Flow] = ("native", "projected"),  # FLOWS, as `Flow` literals
    t1: float = 1e4,
    n_times: int = 41,
    t_first: float = 1e-2,
    solver: str | dict | None = None,
    rtol: float = 1e-4,
    atol: float = 1e-6,
    max_steps: int = 200_000,
    hold_tol: float | str | None = None,
    fixed_point_tol: float | str = "auto",
    fit_start: float = 0.8,
    fit_floor: float | None = None,
    error_fn: Callable[[Array], float] | None = None,
    error_name: str = "masked MSE",
    lyapunov_horizons: Sequence[float] = (1.0, 10.0, 100.0),
    lyapunov_directions: int = 4,
    lyapunov_segment: float = 2.0,
    seed: int = 0,
) -> dict[str, Any]:
    """Each flow from `x0: [N, D]` to `t1`, recorded at `n_times` log-spaced times, and
    finite-time Lyapunov exponents of its end state.

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
    - `flows`; `t1` (tau units); `n_times`, `t_first`: the record times, `0` and
      log-spaced from `t_first` to `t1`; one solve per interval, each continuing from
      the previous end (`max_steps` applies per interval).
    - `solver`: a name or diffrax solver for both flows, or a dict per flow (default
      `DEFAULT_SOLVERS`: tsit5 on the native flow, `"auto"` on the projected one);
      `rtol`, `atol`.
    - `hold_tol`: `None` (default) integrates the projected flow to `t1`. A number: RMS
      G at which the **projected** flow's solve stops (`FixedPointStop`); later times
      are that fixed point, held (not integrated), and `held` marks them. `"auto"`:
      `10 rtol` (an explicit solver's residual floor at a tolerance is near `rtol`). The
      native flow is always integrated (it has no fixed point in x).
    - `fixed_point_tol`: RMS G below which a flow counts as having reached a fixed point
      (`t_fixed_point`). `"auto"` (default): `10 rtol`, the same reasoning as `hold_tol`:
      an adaptive solve's RMS G stalls between about `0.1 rtol` and `rtol` once the
      flow has converged (tsit5 at its stability limit), so nothing below `rtol` can be
      told from the solver's noise.
    - `fit_start`, `fit_floor`: the decay law of RMS G is fitted from the first time it
      is at most `fit_start` times its peak (the decay has begun; RMS G can rise first)
      to the last time it is above `fit_floor` (default `fixed_point_tol`: below it an
      explicit solver's residual stalls, and "auto"'s decays at its own implicit steps'
      rate rather than the flow's: measured on the tests' tiny model, exponential to RMS
      G 5e-8 at t = 20, then 10x per doubling of t), on integrated (not held) records;
      see `fit_decay_laws`. The
      default 0.8 leaves a slow power law enough records (the native flow's RMS G falls
      only 2.6-fold from its peak by t = 100 on the tests' tiny model); the chosen law's
      `late` rate, over the window's last three records, is free of the transient that
      an early start takes in. An exponential needs records every few `1/rate`: about
      six per decade of time (`n_times` 25 to `t1 = 100`) resolve one that falls to the
      floor within a decade.
    - `error_fn`: `x -> float`, e.g. the masked MSE of an image model's decoded state
      (`error_name` labels it, units included: the figure's axis is named after it);
      `None` records NaN (and `metadata["error"]` is `None`).
    - `lyapunov_horizons`, `lyapunov_directions`, `lyapunov_segment`, `seed`: see
      `finite_time_lyapunov` (float64, rtol 1e-10); `()` skips them.

    **Returns:** a dict: `times [T]`; `energy_reference` (`energy_reference`: one
    reference for all flows, the lowest energy recorded, and whether it is a fixed
    point's); `flows`: per flow `energy`, `energy_above_reference` (`E(t) - E_ref`),
    `residual_rms`, `error`, `held`, `state_times` (the time each recorded state belongs
    to: a held record's is `t_hold`), `scales_median`, `scales_min`, `scales_max` (each
    `[T]`, or `None` for a model without token scales), `segments` (per interval `t0`,
    `t1`, `accepted`, `rejected`, `nfe`, `mean_step` (the interval over its accepted
    steps), `stop_reason`, `switches` and `implicit` (stiffness switches and
    implicit-mode steps, as `stats["num_switches"]` and `stats["implicit_steps"]` of a
    switching solver such as `"auto"`; `None` where the solver reports none)),
    `t_fixed_point` (when RMS G first fell below `fixed_point_tol`, interpolated linearly
    in log RMS G between the two records around it; `None` if it never did),
    `t_fixed_point_bracket` (those two records' times), `fixed_point_stays` (whether
    every later record stayed below), `t_hold` (where a `hold_tol` stop began, else
    `None`), `decay` (`fit_decay_laws`: the chosen law of RMS G, both fits and their
    residuals, the window), `x_end`, `lyapunov`, `solver`, `total_steps`, `total_nfe`,
    `total_switches`, `scale_growth_per_tau` (slope of the median scale over the last
    decade; `None` without scales); `findings` (sentences); and `metadata` (with
    `fixed_point_tol`, `fit_floor`, `fit_start`, `model_type`).
    """
    require(model, "long_horizon")
    x0 = jnp.asarray(x0)
    if x0.ndim != 2:
        raise ValueError(f"long_horizon takes one state [N, D]; got {tuple(x0.shape)}.")
    unknown = [f for f in flows if f not in FLOWS]
    if unknown:
        raise ValueError(f"unknown flow {unknown[0]!r}: choose from {', '.join(FLOWS)}.")
    dtype = model_dtype(model)
    times = log_times(t_first, t1, n_times - 1, start=0.0)
    per_flow = (
        solver
        if isinstance(solver, dict)
        else {f: (DEFAULT_SOLVERS[f] if solver is None else solver) for f in FLOWS}
    )
    tol = 10.0 * rtol if hold_tol == "auto" else hold_tol
    fp_tol = 10.0 * rtol if fixed_point_tol == "auto" else float(fixed_point_tol)
    floor = fp_tol if fit_floor is None else float(fit_floor)
    out: dict[str, Any] = dict(times=times, flows={})
    for flow in flows:
        options = dict(solver=per_flow[flow], rtol=rtol, atol=atol, max_steps=max_steps)
        rec = _trajectory(
            model, x0, args, times, flow, options, tol if flow == "projected" else None, error_fn
        )
        seg = rec["segments"]
        rec["solver"] = (
            per_flow[flow] if isinstance(per_flow[flow], str) else type(per_flow[flow]).__name__
        )
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
        flow_floor = fp_tol if fit_floor is None else float(fit_floor)
        rec["decay"] = fit_decay_laws(
            rec["state_times"][once], g_once, floor=flow_floor, start=fit_start
        )
        rec["lyapunov"] = None
        if len(lyapunov_horizons) and np.all(np.isfinite(rec["x_end"])):
            rec["lyapunov"] = finite_time_lyapunov(
                model,
                rec["x_end"],
                args,
                flow=flow,
                horizons=lyapunov_horizons,
                directions=lyapunov_directions,
                segment=lyapunov_segment,
                seed=seed,
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
        n_times=n_times,
        max_steps=max_steps,
        hold_tol=tol,
        fixed_point_tol=fp_tol,
        fit_start=fit_start,
        fit_floor=floor,
        error=error_name if error_fn is not None else None,
        model_type=type(model).__name__,
        token_scales=has(model, "token_scales"),
        seeds=dict(lyapunov=seed),
        lyapunov_horizons=list(map(float, lyapunov_horizons)),
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
    return out


def _slope(ts, values, lower, upper):
    keep = (ts >= lower) & (ts <= upper) & np.isfinite(values)
    if keep.sum() < 2:
        return float("nan")
    return float(np.polyfit(ts[keep], values[keep], 1)[0])


def _law_text(decay: dict) -> str:
    """The decay law of RMS G in words, with both fits' residuals."""
    law = decay.get("law")
    if law is None:
        return f"no decay law was fitted to RMS G: {decay.get('reason', '')}"
    window = decay["window"]  # set wherever a law is
    exp, power = decay["exponential"], decay["power_law"]
    span = f" over t = {_g(window[0])} to {_g(window[1])}, {decay['n_points']} records"
    exp_text = f"exponential at rate {_g(exp['rate'])}/tau"
    power_text = f"power law t^-{_g(power['exponent'])}"
    res_e, res_p = _g(exp["rms_log_residual"], 2), _g(power["rms_log_residual"], 2)
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


def long_horizon_findings(result: dict) -> list[str]:
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
            where = f"{_g(above)} above" if above > _energy_noise(reference["value"]) else "at"
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


def _energy_noise(value) -> float:
    """Differences of energies near `value` below this are float64 round-off."""
    return 100 * float(np.finfo(np.float64).eps) * max(1.0, abs(float(value)))


def _g(value, digits=3) -> str:
    if value is None or not np.isfinite(value):
        return "n/a"
    return f"{value:.{digits}g}"


def _figure_caption(result: dict) -> str:
    meta = dict(result.get("metadata", {}))
    if model_name(meta) is None:
        meta["model"] = meta.get("model_type")
    solvers_used = meta.get("solver") or {}
    if isinstance(solvers_used, dict):
        solvers_used = ", ".join(f"{f} {s}" for f, s in solvers_used.items())
    solver_part = f"{solvers_used}; rtol {_g(meta.get('rtol'))}, atol {_g(meta.get('atol'))}"
    extra = [f"fixed point: RMS G < {_g(meta.get('fixed_point_tol'))}"]
    if meta.get("hold_tol") is not None:
        extra.append(f"projected flow held below RMS G {_g(meta['hold_tol'])}")
    return caption(meta, solver=solver_part, extra=extra)


def plot_long_horizon(result: dict, path: Path | str | None = None) -> Figure:
    """Six panels against time (log axes), one colour per flow, under a title and a
    caption line (model, horizon, dtype, flows and solvers, tolerances): E(t) - E_ref
    with the one reference named, RMS G with the chosen decay law dashed and the
    fixed-point tolerance dotted, token scales (median, min-max band; absent for a model
    without them), the error named after `metadata["error"]` (if recorded), the mean
    accepted step size per interval (rejected steps marked), and the finite-time
    Lyapunov exponents against the horizon. Held (not integrated) times are dashed.
    Returns the `Figure`."""
    fig, axes = figure(3, 2, height=3.0)
    meta = result.get("metadata", {})
    times = np.asarray(result["times"], float)
    link = max(times[times > 0].min(), 1e-6)
    reference = result.get("energy_reference") or {}
    ax_energy, ax_g, ax_scales = axes[0]
    ax_error, ax_step, ax_lyap = axes[1]
    has_scales = has_error = False
    for flow, rec in result["flows"].items():
        colour = FLOW_COLOURS.get(flow)
        held = np.asarray(rec["held"], bool)
        live = ~held
        live[1:] |= ~held[:-1]  # draw the live line up to the first held point

        def line(ax, values, **kw):
            values = np.asarray(values, float)
            ax.plot(times[live], values[live], color=colour, **kw)
            if held.any():
                first = max(int(np.argmax(held)) - 1, 0)
                ax.plot(times[first:], values[first:], color=colour, ls="--", lw=0.8)

        above = np.asarray(rec.get("energy_above_reference"), float)
        if reference.get("value") is not None:  # differences below round-off: not shown
            noise = _energy_noise(reference["value"])
            line(ax_energy, np.where(above > noise, above, np.nan), label=flow)
        line(ax_g, positive(rec["residual_rms"]), label=flow)
        decay = rec["decay"]
        window = decay.get("window")
        span = np.geomspace(window[0], window[1], 40) if window else None
        curve = None if span is None else decay_curve(decay, span)
        if curve is not None:  # the chosen law, over the window it was fitted on
            what = (
                f"exp., rate {_g(decay['rate'])}/tau (late {_g(decay['late']['rate'])})"
                if decay["law"] == "exponential"
                else f"t^-{_g(decay['rate'])} (late t^-{_g(decay['late']['rate'])})"
            )
            ax_g.plot(
                span,
                curve,
                ls=(0, (4, 2)),
                lw=1.2,
                color="k" if flow == "projected" else "0.45",
                label=f"{flow} fit: {what}",
            )
        if rec.get("t_fixed_point") is not None:
            ax_g.plot(
                [rec["t_fixed_point"]],
                [meta.get("fixed_point_tol")],
                "o",
                ms=4,
                mfc="none",
                color=colour,
            )
        if rec.get("scales_median") is not None:
            has_scales = True
            line(ax_scales, rec["scales_median"], label=flow)
            ax_scales.fill_between(
                times, rec["scales_min"], rec["scales_max"], color=colour, alpha=0.2, lw=0
            )
        if np.isfinite(np.asarray(rec["error"], float)).any():
            has_error = True
            line(ax_error, positive(rec["error"]), label=flow)
        seg = rec["segments"]
        if len(seg["t1"]):
            ax_step.step(
                seg["t1"], positive(seg["mean_step"]), where="pre", color=colour, label=flow
            )
            mark = np.asarray(seg["rejected"], float) > 0
            ax_step.plot(
                np.asarray(seg["t1"])[mark],
                positive(seg["mean_step"])[mark],
                "x",
                color=colour,
                ms=4,
            )
        lyap = rec["lyapunov"]
        if lyap is not None:
            ax_lyap.plot(lyap["horizons"], lyap["median"], "-o", color=colour, ms=3, label=flow)
    if meta.get("fixed_point_tol") is not None:
        ax_g.axhline(
            meta["fixed_point_tol"],
            color="0.5",
            lw=0.8,
            ls=":",
            label="fixed-point tol (o: reached)",
        )
    value = reference.get("value")
    ax_energy.set_title(
        "energy above one reference\nE_ref = "
        + (f"{_g(value, 6)}: {_short_reference(reference)}" if value is not None else "n/a"),
        fontsize=8,
    )
    ax_g.set_title("RMS residual G, decay law (dashed)", fontsize=8)
    ax_scales.set_title("token scales s_A", fontsize=8)
    ax_error.set_title("error of the state", fontsize=8)
    ax_step.set_title("solver: mean accepted step", fontsize=8)
    ax_lyap.set_title("perturbations: finite-time Lyapunov exp.", fontsize=8)
    panels = [
        (ax_energy, "E(t) - E_ref"),
        (ax_g, "RMS G"),
        (ax_scales, "s_A (median, min-max)"),
        (ax_error, meta.get("error") or "error"),
        (ax_step, "step (tau; x: rejections)"),
    ]
    for ax, label in panels:
        ax.set_xscale("symlog", linthresh=link)
        ax.set_xlim(0, times[-1])
        ax.set_yscale("log")
        ax.set_xlabel("time t (tau)")
        ax.set_ylabel(label)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6.5)
    for ax, present, why in (
        (ax_scales, has_scales, "the model has no token scales"),
        (ax_error, has_error, "no error recorded (error_fn=None)"),
    ):
        if not present:
            ax.set_yscale("linear")
            ax.set_yticks([])
            ax.text(
                0.5,
                0.5,
                why,
                transform=ax.transAxes,
                ha="center",
                va="center",
                fontsize=7,
                color="0.4",
            )
    letter = next(
        (
            rec["lyapunov"]["coordinates"]
            for rec in result["flows"].values()
            if rec["lyapunov"] is not None
        ),
        "x",
    )
    ax_lyap.set_xscale("log")
    ax_lyap.axhline(0.0, color="0.5", lw=0.8)
    ax_lyap.set_xlabel("horizon T (tau)")
    ax_lyap.set_ylabel(f"log(|d{letter}(T)| / |d{letter}(0)|) / T  (1/tau)")
    if ax_lyap.get_legend_handles_labels()[0]:
        ax_lyap.legend(fontsize=6.5)
    else:
        ax_lyap.text(
            0.5,
            0.5,
            "not computed",
            transform=ax_lyap.transAxes,
            ha="center",
            va="center",
            fontsize=7,
            color="0.4",
        )
    title(
        fig,
        "Long horizons: energy, residual, scales, error, steps and perturbation "
        "growth of each flow",
        _figure_caption(result),
    )
    return finish(fig, path)


def _short_reference(reference: dict) -> str:
    if reference.get("at_fixed_point"):
        return f"{reference['flow']} fixed point"
    return f"lowest recorded ({reference['flow']}, t = {_g(reference['time'])})"
