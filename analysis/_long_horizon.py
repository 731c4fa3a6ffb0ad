"""Long horizons: what the dynamics do far past the trained time, on each flow.

Recorded over log-spaced times up to `t1` (default `1e4 tau`): the energy, RMS G, the
token scales `s_A` (median, min, max over tokens), an optional error of the state (the
masked MSE of an image model), the solver's mean accepted step size and its rejected
steps per segment, its stiffness switches where it reports them; and, from the end
state, finite-time Lyapunov exponents over several horizons.

What runs (DESIGN.md, sections 3 and 8): both flows are integrated to `t1`. The native
flow's clock slows like `1/t` (few explicit steps), so it runs with tsit5. The projected
flow converges exponentially and then becomes stiff for an explicit solver (tsit5 to
`1e4` on the shipped core: 71,449 steps held at its stability limit), so it runs with
`solver="auto"`, which switches to a matrix-free implicit step once it detects the
stiffness (docs: benchmarks, `long_horizon` row). `hold_tol` instead stops the projected
solve at a fixed point (`solvers.FixedPointStop`, RMS G below `hold_tol`) and *holds*
it for the later times, not integrated (`held` says which): the cheap way with an
explicit solver.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from et_ode import solvers
from et_ode.vocab import FLOWS

from ._common import cast, log_times
from ._plotting import FLOW_COLOURS, figure, finish, positive
from ._records import metadata, model_dtype
from ._stability import _tangent_normalise, _Variational

# The default solver per flow: the projected flow turns stiff once it has converged, the
# native flow does not (its clock slows instead).
DEFAULT_SOLVERS = {"native": "tsit5", "projected": "auto"}


@eqx.filter_jit
def _quantities(model, x, args):
    return dict(energy=model.energy(x, args), residual_rms=solvers.rms(model.residual(x, args)),
                scales=model.norm.scale(x))


def _segment_stats(sol) -> dict:
    stats = sol.stats
    switches, implicit = stats.get("num_switches"), stats.get("implicit_steps")
    return dict(accepted=int(stats["num_accepted_steps"]),
                rejected=int(stats["num_rejected_steps"]), nfe=int(stats["nfe"]),
                stop_reason=stats["stop_reason"],
                switches=None if switches is None else int(np.asarray(switches)),
                implicit=None if implicit is None else int(np.asarray(implicit)))


def _trajectory(model, x0, args, times, flow, options, hold_tol, error_fn):
    """States' quantities at `times` (one solve per interval, each continuing from the
    previous end), and per interval the solver's statistics."""
    records = dict(energy=[], residual_rms=[], scales=[], error=[], held=[])
    seg = dict(t0=[], t1=[], accepted=[], rejected=[], nfe=[], stop_reason=[], switches=[],
               implicit=[], mean_step=[])
    x, held, t_stop = x0, False, None

    def record(x, is_held):
        q = _quantities(model, x, args)
        records["energy"].append(float(q["energy"]))
        records["residual_rms"].append(float(q["residual_rms"]))
        records["scales"].append(np.asarray(q["scales"]))
        records["error"].append(float(error_fn(x)) if error_fn is not None else np.nan)
        records["held"].append(is_held)

    record(x, False)
    for start, end in zip(times[:-1], times[1:]):
        if not held:
            stop = None if hold_tol is None else solvers.FixedPointStop(atol=hold_tol)
            sol = solvers.solve(model, x, args=args, t0=float(start), t1=float(end), flow=flow,
                                stop=stop, throw=False, **options)
            s = _segment_stats(sol)
            ok = s["stop_reason"] in ("t1", "fixed_point", "not_converged")  # last: t1, no stop
            for key in ("accepted", "rejected", "nfe", "stop_reason", "switches", "implicit"):
                seg[key].append(s[key])
            span = float(sol.t_final) - float(start)
            seg["mean_step"].append(span / s["accepted"] if s["accepted"] else np.nan)
            seg["t0"].append(float(start))
            seg["t1"].append(float(sol.t_final))
            if not ok:  # max_steps or a failure: stop here, later times are not known
                x = jnp.full_like(x, jnp.nan)
                held = True
            else:
                x = sol.x_final
                if s["stop_reason"] == "fixed_point":
                    held, t_stop = True, float(sol.t_final)
        record(x, held)
    scales = np.asarray(records.pop("scales"))
    out = {k: np.asarray(v) for k, v in records.items()}
    out.update(scales_median=np.median(scales, axis=-1), scales_min=scales.min(axis=-1),
               scales_max=scales.max(axis=-1), x_end=np.asarray(x), t_fixed_point=t_stop)
    out["segments"] = {k: (np.asarray(v, float) if k in ("t0", "t1", "mean_step") else v)
                       for k, v in seg.items()}
    return out


def finite_time_lyapunov(model, x, args=None, *, flow="projected", horizons=(1.0, 10.0, 100.0),
                         directions=4, segment=2.0, seed=0, solver="tsit5", rtol=1e-10,
                         atol=1e-12, max_steps=100_000) -> dict:
    """Growth of small perturbations of `x: [N, D]` over several horizons, in float64.

    `directions` random tangent perturbations (seeded) are carried with the state by the
    variational equation (a JVP of the vector field: the limit `eps -> 0` of perturbing
    `x` by `eps` and integrating both copies), all in one batched solve per piece; the
    pieces are at most `segment` long and end at every horizon, and after each the
    perturbation is renormalised so that `|dg| = 1` (its decay never reaches the
    solver's `atol`). The exponent at horizon `T` is `log(|dg(T)| / |dg(0)|) / T`
    (the sum of the pieces' logs), per direction.

    **Returns:** a dict: `horizons [H]`, `exponents [directions, H]`, `median [H]`,
    `max [H]`, and the settings.
    """
    model64, x64, args64 = cast((model, jnp.asarray(x), args), jnp.float64)
    n_tokens = x64.shape[0]
    system = _Variational(model64, n_tokens)
    horizons = np.sort(np.asarray(horizons, float))
    edges = [0.0]
    for h in horizons:
        pieces = max(1, int(np.ceil((h - edges[-1]) / segment)))
        edges += list(np.linspace(edges[-1], h, pieces + 1)[1:])
    normalise = jax.vmap(_tangent_normalise, in_axes=(None, 0, 0, None))
    dx = jax.random.normal(jax.random.key(seed), (directions,) + x64.shape, x64.dtype)
    xs = jnp.broadcast_to(x64, dx.shape)
    dx, _ = normalise(model64, xs, dx, args64)
    total, exponents = np.zeros(directions), []
    for start, end in zip(edges[:-1], edges[1:]):
        y = jnp.concatenate([xs, dx], axis=1)
        sol = solvers.solve(system, y, args=args64, t0=float(start), t1=float(end),
                            solver=solver, rtol=rtol, atol=atol, flow=flow,
                            max_steps=max_steps)
        xs, dx = sol.x_final[:, :n_tokens], sol.x_final[:, n_tokens:]
        dx, growth = normalise(model64, xs, dx, args64)
        total += np.log(np.asarray(growth))
        if np.any(np.isclose(end, horizons)):
            exponents.append(total / end)
    exponents = np.stack(exponents, axis=1)
    return dict(horizons=horizons, exponents=exponents, median=np.median(exponents, axis=0),
                max=exponents.max(axis=0), flow=flow, directions=int(directions),
                segment=float(segment), seed=int(seed), solver=solver, rtol=rtol, atol=atol,
                coordinates="g")


def long_horizon(model, x0, args=None, *, flows=FLOWS, t1: float = 1e4, n_times: int = 41,
                 t_first: float = 1e-2, solver: str | dict | None = None, rtol: float = 1e-4,
                 atol: float = 1e-6, max_steps: int = 200_000,
                 hold_tol: float | str | None = None,
                 error_fn=None, error_name: str = "masked MSE",
                 lyapunov_horizons=(1.0, 10.0, 100.0), lyapunov_directions: int = 4,
                 lyapunov_segment: float = 2.0, seed: int = 0) -> dict:
    """Each flow from `x0: [N, D]` to `t1`, recorded at `n_times` log-spaced times, and
    finite-time Lyapunov exponents of its end state.

    **Arguments:**

    - `model`, `x0`, `args`: an `et_ode.EnergyTransformer`, one state, its `Conditions`.
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
    - `error_fn`: `x -> float`, e.g. the masked MSE of an image model's decoded state
      (`error_name` labels it); `None` records NaN.
    - `lyapunov_horizons`, `lyapunov_directions`, `lyapunov_segment`, `seed`: see
      `finite_time_lyapunov` (float64, rtol 1e-10); `()` skips them.

    **Returns:** a dict: `times [T]`; `flows`: per flow `energy`, `residual_rms`,
    `error`, `held`, `scales_median`, `scales_min`, `scales_max` (each `[T]`),
    `segments` (per interval `t0`, `t1`, `accepted`, `rejected`, `nfe`, `mean_step`
    (the interval over its accepted steps), `stop_reason`, `switches` and `implicit`
    (stiffness switches and implicit-mode steps, as `stats["num_switches"]` and
    `stats["implicit_steps"]` of a switching solver such as `"auto"`; `None` where the
    solver reports none)), `t_fixed_point` (where the hold began, else `None`),
    `x_end`, `lyapunov`, `solver`, `total_steps`, `total_nfe`, `scale_growth_per_tau`
    (slope of the median scale over the last decade), `residual_power` (exponent `p`
    of `RMS G ~ t^-p` over the last decade, integrated times only); `findings`
    (sentences); and `metadata`.
    """
    x0 = jnp.asarray(x0)
    if x0.ndim != 2:
        raise ValueError(f"long_horizon takes one state [N, D]; got {tuple(x0.shape)}.")
    dtype = model_dtype(model)
    times = log_times(t_first, t1, n_times - 1, start=0.0)
    per_flow = solver if isinstance(solver, dict) else {
        f: (DEFAULT_SOLVERS[f] if solver is None else solver) for f in FLOWS}
    tol = 10.0 * rtol if hold_tol == "auto" else hold_tol
    out = dict(times=times, flows={})
    for flow in flows:
        options = dict(solver=per_flow[flow], rtol=rtol, atol=atol, max_steps=max_steps)
        rec = _trajectory(model, x0, args, times, flow, options,
                          tol if flow == "projected" else None, error_fn)
        seg = rec["segments"]
        rec["solver"] = per_flow[flow] if isinstance(per_flow[flow], str) else type(
            per_flow[flow]).__name__
        rec["total_steps"] = int(sum(seg["accepted"]) + sum(seg["rejected"]))
        rec["total_nfe"] = int(sum(seg["nfe"]))
        rec["total_switches"] = (None if any(s is None for s in seg["switches"])
                                 else int(sum(seg["switches"])))
        rec["scale_growth_per_tau"] = _slope(times, rec["scales_median"], t1 / 10, t1)
        live = ~rec["held"]
        rec["residual_power"] = _power(times[live], rec["residual_rms"][live], t1 / 10, t1)
        rec["lyapunov"] = None
        if len(lyapunov_horizons) and np.all(np.isfinite(rec["x_end"])):
            rec["lyapunov"] = finite_time_lyapunov(
                model, rec["x_end"], args, flow=flow, horizons=lyapunov_horizons,
                directions=lyapunov_directions, segment=lyapunov_segment, seed=seed)
        out["flows"][flow] = rec
    out["metadata"] = metadata(
        study="long_horizon", dtype=dtype, flows=list(flows),
        solver={f: out["flows"][f]["solver"] for f in flows}, rtol=rtol, atol=atol, t1=t1,
        n_times=n_times, max_steps=max_steps, hold_tol=tol, error=error_name,
        seeds=dict(lyapunov=seed), lyapunov_horizons=list(map(float, lyapunov_horizons)),
        coordinates="RMS G over N D entries of g; s_A of x; FTLE of |dg|",
        step_sizes="mean accepted step per recorded interval",
    )
    out["findings"] = long_horizon_findings(out)
    return out


def _slope(ts, values, lower, upper):
    keep = (ts >= lower) & (ts <= upper) & np.isfinite(values)
    if keep.sum() < 2:
        return float("nan")
    return float(np.polyfit(ts[keep], values[keep], 1)[0])


def _power(ts, values, lower, upper):
    keep = (ts >= lower) & (ts <= upper) & np.isfinite(values) & (values > 0)
    if keep.sum() < 3:
        return float("nan")
    return float(-np.polyfit(np.log(ts[keep]), np.log(values[keep]), 1)[0])


def long_horizon_findings(result: dict) -> list[str]:
    """One or two sentences per flow of a `long_horizon` result: how far it ran, at what
    cost, what G, the scales, the error and the perturbations did."""
    t1 = float(result["times"][-1])
    error_name = result["metadata"].get("error", "error")
    out = []
    for flow, rec in result["flows"].items():
        g, s = rec["residual_rms"], rec["scales_median"]
        reached = rec["segments"]["t1"][-1] if len(rec["segments"]["t1"]) else 0.0
        if rec["t_fixed_point"] is not None:
            end = (f"stopped at a fixed point (RMS G {_g(g[-1])}) at "
                   f"t = {_g(rec['t_fixed_point'])} and was held from there to {_g(t1)}")
        else:
            end = f"ran to t = {_g(reached)} (RMS G {_g(g[0])} -> {_g(g[-1])})"
        switches = ("" if rec["total_switches"] is None
                    else f", {rec['total_switches']} stiffness switches")
        text = (f"The {flow} flow ({rec['solver']}) {end} in {rec['total_steps']} steps "
                f"({rec['total_nfe']} evaluations{switches}); the median token scale went "
                f"{_g(s[0])} -> {_g(s[-1])}")
        power = rec["residual_power"]
        if np.isfinite(power):
            trend = (f"decayed like t^-{_g(power, 2)}" if power > 0
                     else f"rose like t^{_g(-power, 2)}")
            text += f", and RMS G {trend} over the last decade"
        text += "."
        err = rec["error"]
        if np.isfinite(err).any():
            text += (f" The {error_name} went {_g(err[0])} -> {_g(np.nanmin(err))} (min) -> "
                     f"{_g(err[-1])}.")
        lyap = rec["lyapunov"]
        if lyap is not None:
            parts = ", ".join(f"{_g(m, 2)}/tau over {_g(h)}" for h, m in
                              zip(lyap["horizons"], lyap["median"]))
            text += (f" Perturbations of its end state grew at {parts} (median of "
                     f"{lyap['directions']} directions; negative: they shrink).")
        out.append(text)
    return out


def _g(value, digits=3) -> str:
    if value is None or not np.isfinite(value):
        return "n/a"
    return f"{value:.{digits}g}"


def plot_long_horizon(result: dict, path=None):
    """Six panels against time (log axes), one colour per flow: E, RMS G, token scales
    (median, min-max band), the error (if recorded), the mean accepted step size per
    interval (rejected steps marked), and the finite-time Lyapunov exponents against
    the horizon. Held (not integrated) times are dashed. Returns the `Figure`."""
    fig, axes = figure(3, 2)
    times = np.asarray(result["times"], float)
    link = max(times[times > 0].min(), 1e-6)
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

        energy = np.asarray(rec["energy"], float)
        line(axes[0, 0], energy - np.nanmin(energy) + 1e-12 * max(1.0, abs(np.nanmin(energy))),
             label=flow)
        line(axes[0, 1], positive(rec["residual_rms"]), label=flow)
        line(axes[0, 2], rec["scales_median"], label=flow)
        axes[0, 2].fill_between(times, rec["scales_min"], rec["scales_max"], color=colour,
                                alpha=0.2, lw=0)
        line(axes[1, 0], positive(rec["error"]), label=flow)
        seg = rec["segments"]
        if len(seg["t1"]):
            axes[1, 1].step(seg["t1"], positive(seg["mean_step"]), where="pre", color=colour,
                            label=flow)
            rejected = np.asarray(seg["rejected"], float)
            mark = rejected > 0
            axes[1, 1].plot(np.asarray(seg["t1"])[mark], positive(seg["mean_step"])[mark],
                            "x", color=colour, ms=4)
        lyap = rec["lyapunov"]
        if lyap is not None:
            axes[1, 2].plot(lyap["horizons"], lyap["median"], "-o", color=colour, ms=3,
                            label=flow)
    labels = [("E(t) - min E", axes[0, 0]), ("RMS G", axes[0, 1]),
              ("token scale s_A (median, min-max)", axes[0, 2]), ("error", axes[1, 0]),
              ("mean accepted step (x: rejections)", axes[1, 1])]
    for label, ax in labels:
        ax.set_xscale("symlog", linthresh=link)
        ax.set_yscale("log")
        ax.set_xlabel("time t (tau)")
        ax.set_ylabel(label)
        ax.legend(fontsize=7)
    ax = axes[1, 2]
    ax.set_xscale("log")
    ax.axhline(0.0, color="0.5", lw=0.8)
    ax.set_xlabel("horizon T (tau)")
    ax.set_ylabel("FTLE log(|dg(T)|/|dg(0)|)/T")
    ax.legend(fontsize=7)
    return finish(fig, path)
