"""Which energy term moves the tokens: attention against Hopfield over time.

The update `-dE/dg` is the sum of the gradients of the attention, Hopfield and external
terms (`model.update_parts`). On the native flow each part moves `x` as it is; on the
projected flow its tangent projection does (each part projected separately, so that the
parts still sum to the applied update). Clamped tokens do not move.
"""

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Bool, Float, Real

from et_ode import solvers

from .._common import as_batch, shard
from .._geometry import require
from .._records import metadata, model_dtype
from .._results import build as typed
from ._convergence_records import Contributions, TokenGroups
from ._settings import CONTRIBUTIONS_OPTIONS, require_options, solver_name

PARTS = ("attention", "hopfield", "external")


def _parts_one(model, x, args, flow, masked):
    """Per-token norms of each applied part and of the total; sum check."""
    parts = model.update_parts(x, args)
    if flow == "projected":
        parts = {k: model.tangent_projection(x, v, args) for k, v in parts.items()}
    else:
        clamped = getattr(args, "clamped", None)
        if clamped is not None:
            parts = {k: jnp.where(clamped[:, None], 0.0, v) for k, v in parts.items()}
    total = model.tau * model.vector_field(0.0, x, args, flow)
    summed = sum(parts.values())
    mismatch = jnp.max(jnp.abs(summed - total)) / jnp.maximum(jnp.max(jnp.abs(total)), 1e-300)

    def mean_norm(v, where):
        norms = jnp.linalg.norm(v, axis=-1)
        return jnp.sum(jnp.where(where, norms, 0.0)) / jnp.maximum(jnp.sum(where), 1)

    out = {}
    for name, value in dict(parts, total=total).items():
        out[name] = dict(masked=mean_norm(value, masked), visible=mean_norm(value, ~masked))
    out["sum_mismatch"] = mismatch
    return out


@eqx.filter_jit
def _parts_trace(model, xs, args, flow, masked, args_batched):
    over_t = jax.vmap(_parts_one, in_axes=(None, 0, None, None, None))
    axes = solvers.batched_args_axes(args) if args_batched else None
    return jax.vmap(over_t, in_axes=(None, 0, axes, None, 0))(model, xs, args, flow, masked)


def contributions(
    model: solvers.EnergySystem,
    x0: Float[ArrayLike, "*batch N D"],
    args: Any = None,
    ts: Real[ArrayLike, " T"] | None = None,
    masked: Bool[ArrayLike, "*mask_batch N"] | None = None,
    *,
    options: solvers.SolveOptions = CONTRIBUTIONS_OPTIONS,
    args_batched: bool = False,
) -> Contributions:
    """Norms of the attention and Hopfield (and external-field) parts of the update on
    masked and visible tokens at times `ts` along a solve.

    **Arguments:**

    - `model`, `x0` (`[N, D]` or `[B, N, D]`), `args`: as in `solvers.solve`.
    - `ts`: `[T]` times in `[0, t1]` (default: 0 to 1.2 in steps of 0.1, the paper's).
    - `masked`: `[N]` (or `[B, N]`) boolean, the tokens that were replaced by MASK
      (default: none).
    - `options`: the solve and its flow (a `solvers.SolveOptions`; default
      `CONTRIBUTIONS_OPTIONS`, the paper's Euler steps of 0.1 on the native flow).

    **Returns:** a `Contributions`: the `times`, and per part (`attention`, `hopfield`,
    `external`, `total`) and for `attention_fraction` a `TokenGroups` of its means on
    the masked and the visible tokens; `sum_mismatch` (a check) and `metadata` (each
    entry documented on its field).

    **Protocol:** `energy`, `vector_field` and `update_parts(x, args)` (the ET's split
    of the update into named parts); refused up front, before any solve, without them.
    """
    require(model, "contributions")
    options = require_options("contributions", options)
    flow = options.flow
    xb, batched = as_batch(x0)
    batch, n_tokens = xb.shape[0], xb.shape[1]
    ts = np.round(np.arange(13) * 0.1, 12) if ts is None else np.asarray(ts, float)
    masked = np.zeros((n_tokens,), bool) if masked is None else np.asarray(masked, bool)
    masked = np.broadcast_to(masked, (batch, n_tokens))
    t1 = float(ts[-1]) if ts[-1] > 0 else 1.0
    if ts[-1] > 0:
        x_in, args_in, _ = shard(xb, args, args_batched)
        sol = solvers.solve(
            model, x_in, options=options, args=args_in, t1=t1, save=ts, args_batched=args_batched
        )
        xs = sol.xs[:batch]
    else:
        xs = xb[:, None]
    trace = jax.tree.map(
        np.asarray, _parts_trace(model, xs, args, flow, jnp.asarray(masked), args_batched)
    )
    strip = (lambda a: a) if batched else (lambda a: a[0])
    out: dict[str, Any] = dict(times=ts)
    for name in PARTS + ("total",):
        out[name] = TokenGroups(**{k: strip(v) for k, v in trace[name].items()})
    out["attention_fraction"] = TokenGroups(
        **{
            k: strip(
                trace["attention"][k]
                / np.maximum(trace["attention"][k] + trace["hopfield"][k], 1e-300)
            )
            for k in ("masked", "visible")
        }
    )
    out["sum_mismatch"] = strip(trace["sum_mismatch"])
    out["batched"] = batched
    out["metadata"] = metadata(
        study="contributions",
        dtype=model_dtype(model),
        flow=flow,
        solver=solver_name(options),
        dt0=options.dt0,
        rtol=options.rtol,
        atol=options.atol,
        n_masked=int(masked[0].sum()),
        batch=int(batch),
        units="mean per-token L2 norm of each part of tau dx/dt",
    )
    return typed(Contributions, out)
