"""Convergence to a fixed point on each flow: residual, rates and scales over time.

On the native flow each token's scale `s_A` grows (about linearly in t), its clock
`gamma / s_A` slows like `1/t`, and `|G|` decays as a power of t; on the projected flow
the scales are constant and `|G|` decays exponentially near a stable fixed point, at the
smallest decay rate of the linearised flow, `lambda_min(C^(1/2) H C^(1/2)) / tau`
(`H` the Riemannian Hessian, `C` the clocks; see `stability`). This study
measures both and reports the rate fitted to `log |G|` beside that prediction.
"""

from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float, Real

from et_ode import solvers
from et_ode.vocab import FLOWS, Flow

from .._common import as_batch, cast, float64_available, log_times, shard, solve_in_chunks, take
from .._geometry import energy_coordinates, has, require, token_scales
from .._records import metadata, model_dtype
from .._results import build as typed
from ..landscape import hessian_eigenvalues
from ._convergence_records import Convergence, ConvergenceFlow
from ._settings import (
    CONVERGENCE_OPTIONS,
    ConvergenceSettings,
    constant_step,
    number,
    require_options,
    solver_name,
)


def _quantities_one(model, x, args, flow):
    """Scalars (and per-token scales, where the model has them) of one state `x`."""
    v = model.vector_field(0.0, x, args, flow)
    dg = jax.jvp(lambda x_: energy_coordinates(model, x_, args), (x,), (v,))[1]
    # dE/dt: the model's closed form where it has one, else the JVP of E along the flow
    dEdt = (
        model.dEdt(x, args, flow)
        if has(model, "dEdt")
        else jax.jvp(lambda x_: model.energy(x_, args), (x,), (v,))[1]
    )
    out = dict(
        residual_rms=solvers.rms(model.residual(x, args)),
        dgdt_rms=solvers.rms(dg),
        dxdt_rms=solvers.rms(v),
        dEdt=dEdt,
        energy=model.energy(x, args),
    )
    scales = token_scales(model, x, args)
    if scales is not None:
        out["scales"] = scales
    return out


@eqx.filter_jit
def trace_quantities(model, xs, args, flow, args_batched=False):
    """Along saved states `xs: [B, T, N, D]`: `residual_rms`, `dgdt_rms` (RMS of
    `dg/dt`, the JVP of the energy's coordinates along the flow: `g = LayerNorm(x)` on
    the ET, `x` itself for a model without `energy_coordinates`), `dxdt_rms`, `dEdt`
    (the model's closed form `model.dEdt` where it has one, else a JVP of `E`),
    `energy`, each `[B, T]`, and, for models with `token_scales`, `scales` (`s_A`,
    `[B, T, N]`)."""
    over_t = jax.vmap(_quantities_one, in_axes=(None, 0, None, None))
    axes = solvers.batched_args_axes(args) if args_batched else None
    return jax.vmap(over_t, in_axes=(None, 0, axes, None))(model, xs, args, flow)


def fit_exponential_rate(
    ts: Real[ArrayLike, " T"],
    values: Real[ArrayLike, " T"],
    lower: float | np.floating,
    upper: float | np.floating,
) -> dict:
    """Least-squares fit of `log(values) = a - rate * t` over the points with `lower <
    values < upper`. Returns `rate` (1/time units; `nan` with fewer than 3 points),
    `r2`, `n_points`, `t_window`."""
    ts, values = np.asarray(ts, float), np.asarray(values, float)
    keep = np.isfinite(values) & (values > lower) & (values < upper) & np.isfinite(ts)
    if keep.sum() < 3:
        return dict(
            rate=float("nan"),
            r2=float("nan"),
            n_points=int(keep.sum()),
            t_window=[float("nan"), float("nan")],
        )
    t, y = ts[keep], np.log(values[keep])
    slope, intercept = np.polyfit(t, y, 1)
    resid = y - (slope * t + intercept)
    r2 = 1.0 - resid.var() / max(y.var(), 1e-300)
    return dict(
        rate=float(-slope),
        r2=float(r2),
        n_points=int(keep.sum()),
        t_window=[float(t.min()), float(t.max())],
    )


def fit_power_law(
    ts: Real[ArrayLike, " T"],
    values: Real[ArrayLike, " T"],
    t_lower: float | np.floating,
    t_upper: float | np.floating,
    floor: float | np.floating = 0.0,
) -> dict:
    """Fit `log(values) = a - exponent * log(t)` over `t_lower <= t <= t_upper` (points
    above `floor`). Returns `exponent`, `r2`, `n_points`."""
    ts, values = np.asarray(ts, float), np.asarray(values, float)
    keep = (ts >= t_lower) & (ts <= t_upper) & (ts > 0) & np.isfinite(values) & (values > floor)
    if keep.sum() < 3:
        return dict(exponent=float("nan"), r2=float("nan"), n_points=int(keep.sum()))
    lt, y = np.log(ts[keep]), np.log(values[keep])
    slope, intercept = np.polyfit(lt, y, 1)
    resid = y - (slope * lt + intercept)
    return dict(
        exponent=float(-slope),
        r2=float(1.0 - resid.var() / max(y.var(), 1e-300)),
        n_points=int(keep.sum()),
    )


def convergence(
    model: solvers.EnergySystem,
    x0: Float[ArrayLike, "*batch N D"],
    args: Any = None,
    *,
    flows: Sequence[Flow] = FLOWS,
    t1: float = 1e4,
    times: Real[ArrayLike, " T"] | None = None,
    options: solvers.SolveOptions = CONVERGENCE_OPTIONS,
    settings: ConvergenceSettings = ConvergenceSettings(),
    args_batched: bool = False,
) -> Convergence:
    """Traces over time of the residual, `|dg/dt|`, `|dE/dt|` and each token's scale on
    each flow, the time and NFE to reach a residual tolerance, and the observed decay
    rate of `|G|` against the Riemannian Hessian's prediction.

    Memory stays flat in the horizon: states are kept only at `times` (log-spaced by
    default), and the horizon is solved in `settings.chunks` segments, each continuing
    from the previous end state (so `options.max_steps` applies per segment).

    **Arguments:**

    - `model`: any `solvers.EnergySystem` (an `et_ode.EnergyTransformer`, say; the
      token scales, `dgdt_rms` in `g` and the clock-scaled prediction are the ET's,
      reported for models that have them); `x0`: `[N, D]` or a batch `[B, N, D]`
      (placed over every device with `solvers.shard_batch`); `args`: its `Conditions`
      (shared, or per sample with `args_batched=True`).
    - `flows`: which flows to run, of `"native"` and `"projected"`; each replaces
      `options.flow`.
    - `t1`: the horizon (tau units); `times`: the sample times (default `0` and
      `settings.n_times` log-spaced times from `settings.t_first` to `t1`).
    - `options`: how every solve runs (`solvers.SolveOptions`; default
      `CONVERGENCE_OPTIONS`, tsit5 at rtol 1e-10, atol 1e-12; constant steps, as the
      paper's Euler map, with `rtol = atol = None` and a `dt0`).
    - `settings`: a `ConvergenceSettings`: the sample times, the fixed-point tolerance
      of the time-and-NFE-to-tolerance solve (`fixed_point_atol`, one per flow in a
      mapping, `None` to skip it), `chunks`, the fit's window (`fit_upper`,
      `fit_floor`) and the Hessian's prediction (`hessian`, `hessian_method`). A power
      law `|G| ~ t^-p` is fitted over the last decade of `times`.

    **Protocol:** `energy`, `vector_field`, `residual` (refused up front without them);
    optional: `energy_coordinates` (`dgdt_rms`), `token_scales` (`scales`), `dEdt` (else a
    JVP of `E`), a `norm` with `gamma` (the ET: `predicted_rate_scaled`), `tau`.

    **Returns:** a `Convergence`: the `times`, and per flow a `ConvergenceFlow` (its
    traces, time and NFE to the tolerance, fits and, with `hessian`, the predicted
    rates; each entry documented on its field).
    """
    require(model, "convergence")
    options = require_options("convergence", options)
    n_times, t_first, chunks = settings.n_times, settings.t_first, settings.chunks
    fit_upper, fit_floor, hessian = settings.fit_upper, settings.fit_floor, settings.hessian
    rtol, atol = number(options.rtol), number(options.atol)
    xb, batched = as_batch(x0)
    dtype = model_dtype(model)
    if times is None:
        times = log_times(t_first, t1, n_times, start=0.0)
    times = np.asarray(times, float)
    if times[-1] > t1 or times[0] < 0:
        raise ValueError("times must lie in [0, t1].")
    xs_sharded, args_sharded, batch = shard(xb, args, args_batched)
    tau = float(getattr(model, "tau", 1.0))
    norm = getattr(model, "norm", None)  # the ET's LayerNorm: the simple clock scaling
    gamma = float(norm.gamma) if norm is not None else None
    # The solver's noise floor; constant steps have none of their own: float epsilon.
    floor = (
        fit_floor
        if fit_floor is not None
        else 100.0
        * ((rtol or float(jnp.finfo(dtype).eps)) * float(solvers.rms(xb)) + (atol or 0.0))
    )
    out: dict[str, Any] = dict(times=times, flows={})
    for flow in flows:
        xs, chunk_stats = solve_in_chunks(
            model,
            xs_sharded,
            args_sharded,
            times,
            chunks=chunks,
            args_batched=args_batched,
            options=options.replace(flow=flow),
        )
        q = jax.tree.map(
            lambda a: np.asarray(a)[:batch],
            trace_quantities(model, xs, args_sharded, flow, args_batched),
        )
        tol = settings.fixed_point_atol_for(flow)
        if tol is not None:
            stop = solvers.solve(
                model,
                xs_sharded,
                options=options.replace(flow=flow),
                args=args_sharded,
                t1=t1,
                stop=solvers.FixedPointStop(atol=tol),
                args_batched=args_batched,
                throw=False,
            )
            reasons = list(np.atleast_1d(stop.stats["stop_reason"]))[:batch]
            t_stop = np.asarray(stop.t_final)[:batch]
            nfe = np.asarray(stop.stats["nfe"])[:batch]
        else:
            reasons, t_stop, nfe = [None] * batch, np.full(batch, np.nan), np.full(batch, -1)
        hit = np.array([r == "fixed_point" for r in reasons])
        record = dict(
            residual_rms=q["residual_rms"],
            dgdt_rms=q["dgdt_rms"],
            dxdt_rms=q["dxdt_rms"],
            abs_dEdt=np.abs(q["dEdt"]),
            energy=q["energy"],
            scales=q.get("scales"),
            time_to_tolerance=np.where(hit, t_stop, np.nan),
            nfe_to_tolerance=np.where(hit, nfe, -1),
            stop_reason=reasons,
            segments=chunk_stats,
            x_end=np.asarray(xs[:batch, -1]),
        )
        fits, powers, hess = [], [], []
        x_end = record["x_end"]
        for b in range(batch):
            g = q["residual_rms"][b]
            fits.append(fit_exponential_rate(times, g, floor, fit_upper * g[0]))
            powers.append(fit_power_law(times, g, times[-1] / 10, times[-1], floor))
            if hessian:
                args_b = take(args, b, args_batched)
                # The prediction belongs to the fixed point: Newton-polish the end state
                # (a ReLU energy's Hessian jumps across kinks near a loosely met point).
                # (in float64 where x64 is on: a float32 model's residual floor is above
                # Newton's tolerance)
                wide = jnp.float64 if float64_available() else jnp.asarray(x_end).dtype
                m64, x64, a64 = cast((model, jnp.asarray(x_end[b]), args_b), wide)
                found = solvers.find_fixed_point(m64, x64, args=a64, linear="auto", method="newton")
                at = found.x if bool(found.success) else x_end[b]
                method = settings.hessian_method
                hx = hessian_eigenvalues(model, at, args_b, coordinates="x", k=1, method=method)
                hg = hessian_eigenvalues(model, at, args_b, coordinates="g", k=1, method=method)
                scaled = float("nan")  # the ET only: lambda_min(H) gamma / (tau mean s_A)
                if gamma is not None and "scales" in q:
                    mean_scale = float(np.mean(q["scales"][b, -1]))
                    scaled = float(hg["smallest"][0]) * gamma / (tau * mean_scale)
                hess.append(
                    dict(
                        lambda_min_x=float(hx["smallest"][0]),
                        lambda_min_g=float(hg["smallest"][0]),
                        predicted_rate=float(hx["smallest"][0]) / tau,
                        predicted_rate_scaled=scaled,
                        predicted_power_exponent=(
                            float(hx["smallest"][0]) * times[-1] / tau
                            if flow == "native"
                            else float("nan")
                        ),
                        end_residual_rms=float(g[-1]),
                    )
                )
        record["fit"] = _stack_dicts(fits)
        record["power_law"] = _stack_dicts(powers)
        if hessian:
            record.update(_stack_dicts(hess))
            record["rate_ratio"] = record["fit"]["rate"] / record["predicted_rate"]
        if not batched:
            record = _unbatch(record)
        out["flows"][flow] = typed(ConvergenceFlow, record)
    out["batched"] = batched
    out["metadata"] = metadata(
        study="convergence",
        dtype=dtype,
        flows=list(flows),
        solver=solver_name(options),
        rtol=rtol,
        atol=atol,
        dt0=constant_step(options),
        t1=t1,
        tolerance=settings.fixed_point_atol,
        chunks=chunks,
        max_steps=options.max_steps,
        fit_upper=fit_upper,
        fit_floor=floor,
        tau=tau,
        batch=batch,
        coordinates="residual G in g (RMS over N D entries); scales s_A of x",
    )
    return typed(Convergence, out)


def _stack_dicts(items):
    if not items:
        return {}
    return {key: np.asarray([item[key] for item in items]) for key in items[0]}


def _unbatch(record):
    skip = ("segments", "stop_reason")
    out = {}
    for key, value in record.items():
        if key in skip:
            out[key] = value[0] if key == "stop_reason" else value
        elif isinstance(value, dict):
            out[key] = _unbatch(value)
        elif isinstance(value, np.ndarray) and value.ndim >= 1:
            out[key] = value[0]
        else:
            out[key] = value
    return out
