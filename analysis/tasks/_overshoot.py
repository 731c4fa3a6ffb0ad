"""Beyond the training horizon: masked-patch error and energy against time.

The paper's model is trained through 12 Euler steps (`t1 = 1.2 tau`) and its answer is
a transient; run on, the dynamics keep descending the energy and the reconstruction may
get worse (the paper's "overshoot"). This study decodes the state at log-spaced times
from the start to `t_max_factor` times the training horizon, using the pieces of
`MaskedImageET.reconstruct` (context statistics, `encode`, `solvers.solve` with
`save=times`, `decode`).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float

from et_ode import solvers
from et_ode.tasks import MaskedImageET, Masking

from .._common import log_times, shard, solve_in_chunks
from .._geometry import require
from .._records import metadata, model_dtype
from ._task_records import Overshoot, recorded_options


@eqx.filter_jit
def _encode(model, patches, masking):
    return model.encode_batch(patches, masking)


@eqx.filter_jit
def _errors_and_energies(model, xs, conditions, patches, occluded, mean, std):
    """`xs: [B, T, N, D]` -> per image and time the summed squared error over occluded
    patches (mean over pixels of a patch) `[B, T]`, and the energy `[B, T]`."""

    def per_image(x_t, cond, target, occ, m, s):
        def per_time(x):
            prediction = model.decode(x) * s + m
            err = jnp.mean((prediction - target) ** 2, axis=-1)
            return jnp.sum(jnp.where(occ, err, 0.0)), model.core.energy(x, cond)

        return jax.vmap(per_time)(x_t)

    return jax.vmap(per_image, in_axes=(0, solvers.batched_args_axes(conditions), 0, 0, 0, 0))(
        xs, conditions, patches, occluded, mean, std
    )


def overshoot(
    model: MaskedImageET,
    images: Float[ArrayLike, "B H W C"],
    masking: Masking,
    *,
    t_max_factor: float = 100.0,
    n_times: int = 40,
    t_first: float | None = None,
    batch_size: int = 64,
    chunks: int = 1,
    normalised: bool = True,
    options: solvers.SolveOptions | None = None,
) -> Overshoot:
    """Masked-patch MSE and energy against time, from the start to `t_max_factor` times
    the training horizon.

    **Arguments:**

    - `model`: an `et_ode.MaskedImageET`; `images: [B, H, W, C]` in the model's
      normalised units (`normalised=False`: in [0, 1], normalised here with the model's
      stored normalisation); `masking`: an `et_ode.Masking` with `[B, N]` fields.
    - `t_max_factor`: how far past the horizon to go. The horizon is the model's
      `dynamics.t1`; for a fixed-point model (`dynamics.fixed_point_atol` set) it is the
      median time at which its own fixed-point stop fired on these images, and the run
      past it is without the stop.
    - `n_times`, `t_first`: log-spaced times from `t_first` (default horizon / 100) to
      the end, plus 0 and the horizon itself.
    - `batch_size`: images per solve (each batch placed over every device with
      `solvers.shard_batch`); `chunks`: segments of the horizon per solve.
    - `options`: how to solve, a `solvers.SolveOptions` (None: the model's own,
      `model.dynamics.options`; e.g. `model.dynamics.options.replace(solver="tsit5",
      rtol=..., atol=...)`); with constant steps its cap is raised to the steps of a
      chunk.

    **Returns:** an `Overshoot` (its fields say what each holds).

    **Protocol:** a `MaskedImageET` (`patches`, `encode_batch`, `decode`, `dynamics`,
    `core`); another model is refused up front, before any solve.
    """
    require(model, "overshoot")
    images = jnp.asarray(images)
    if not normalised:
        if model.normalisation is None:
            raise ValueError("normalised=False needs a model with a stored normalisation.")
        images = jnp.asarray(model.normalisation.apply(images))
    patches = jax.vmap(model.patches)(images)
    dynamics = model.dynamics
    options = dynamics.options if options is None else options
    if not isinstance(options, solvers.SolveOptions):
        raise TypeError(
            f"options must be a solvers.SolveOptions or None (got {type(options).__name__})."
        )
    stop = dynamics.solve_options().get("stop")
    n_images = patches.shape[0]
    x0, conditions, mean, std = _encode(model, patches, masking)
    if stop is not None:
        own = solvers.solve(
            model.core,
            x0,
            args=conditions,
            args_batched=True,
            options=options,
            t1=dynamics.t1,
            stop=stop,
            throw=False,
        )
        horizon, horizon_kind = float(np.median(np.asarray(own.t_final))), "fixed_point"
    else:
        horizon, horizon_kind = float(dynamics.t1), "t1"
    t_max = t_max_factor * horizon
    if not options.adaptive:  # a chunk starts at a saved time: allow for its partial steps
        per_chunk = solvers.constant_step_count(0.0, t_max / max(chunks, 1), options.dt0) or 0
        options = options.replace(max_steps=max(int(options.max_steps or 0), per_chunk + 16))
    first = horizon / 100 if t_first is None else t_first
    times = log_times(first, t_max, n_times, include=[horizon], start=0.0)
    sq_err_parts, energy_parts = [], []
    for start in range(0, n_images, batch_size):
        sl = slice(start, start + batch_size)
        part = jax.tree.map(lambda a: a[sl], (x0, conditions))
        xb, args_b, count = shard(part[0], part[1], True)
        xs, _ = solve_in_chunks(
            model.core, xb, args_b, times, chunks=chunks, args_batched=True, options=options
        )
        err, e = _errors_and_energies(
            model, xs[:count], part[1], patches[sl], masking.occluded[sl], mean[sl], std[sl]
        )
        sq_err_parts.append(np.asarray(err))
        energy_parts.append(np.asarray(e))
    sq_err, energy = np.concatenate(sq_err_parts), np.concatenate(energy_parts)
    occluded = np.asarray(masking.occluded).sum(axis=-1)  # [B]
    mse = sq_err.sum(axis=0) / max(int(occluded.sum()), 1)
    per_image = sq_err / np.maximum(occluded, 1)[:, None]
    at = int(np.argmin(np.abs(times - horizon)))
    best = int(np.argmin(mse))
    return Overshoot(
        times=times,
        mse=mse,
        mse_per_image=per_image,
        energy=energy,
        horizon=horizon,
        horizon_kind=horizon_kind,
        t_max=t_max,
        mse_at_horizon=float(mse[at]),
        mse_at_end=float(mse[-1]),
        best_time=float(times[best]),
        best_mse=float(mse[best]),
        solve_options=recorded_options(options),
        metadata=metadata(
            study="overshoot",
            dtype=model_dtype(model.core),
            t_max_factor=t_max_factor,
            horizon=horizon,
            horizon_kind=horizon_kind,
            n_images=n_images,
            solve_options=recorded_options(options),
            stop_for_horizon=None if stop is None else stop.atol,
            units="MSE over occluded patches in normalised pixel units; energy of the core",
        ),
    )
