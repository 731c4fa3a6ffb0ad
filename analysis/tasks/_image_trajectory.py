"""The trajectories behind the image figures and the energy video: the held-out images
and their patches, one solve of a batch decoded at every saved time (how to solve: a
`solvers.SolveOptions`, by default the model's `dynamics.options`), and where video
frames fall against the solver's steps. Computation only; the drawing is in the
figures room (`analysis.figures`).

Units: images in [0, 1]; "normalised" means the model's per-channel data normalisation
(`model.normalisation`), the units of its loss; time in units of the model's `tau`.
"""

from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Int, Real

from et_ode import solvers
from et_ode.tasks import MaskedImageET, Masking, held_out_indices, masked_mse, photo_crops

from ._task_records import recorded_options

# ----------------------------------------------------------------------------- data


def held_out_images(
    n_images: int, *, image_size: int = 32, crops_seed: int = 0
) -> tuple[Float[np.ndarray, "n S S 3"], Int[np.ndarray, " n"]]:
    """`n_images` held-out crops spread evenly over the test crops (all of
    `et_ode.TEST_SCENES`, in the order of `photo_crops("test")`, the crops the evaluation
    uses for `crops_seed` = the training seed), so that every held-out scene appears.

    **Returns:** `(images [n, S, S, 3] float32 in [0, 1], indices [n])`, the indices into
    `photo_crops("test", size=image_size, seed=crops_seed)`.
    """
    crops = photo_crops("test", size=image_size, seed=crops_seed)
    indices = held_out_indices(len(crops), n_images)
    return crops[indices], indices


def normalised_patches(
    model: MaskedImageET, images: Float[ArrayLike, "B H W C"]
) -> Float[Array, "B N P"]:
    """`images [B, S, S, C]` in [0, 1] -> patches `[B, N, P]` in normalised units."""
    if model.normalisation is None:  # as `MaskedImageET.complete` refuses it
        raise ValueError("this model has no data normalisation: load a trained model.")
    return jax.vmap(model.patches)(jnp.asarray(model.normalisation.apply(images)))


# ----------------------------------------------------- trajectories (figures 4 and 8)


def reference_time(
    model: MaskedImageET,
    images: Float[ArrayLike, "B H W C"] | None = None,
    masking: Masking | None = None,
) -> tuple[float, str]:
    """The time the model was trained to reach, in tau, and its label: `dynamics.t1`
    ("training horizon") for a fixed-horizon model; for a model with a fixed-point stop
    (`t1` is then only a cap), the mean stop time of its own solve on `images`
    ("fixed-point stop (mean)"), which needs `images [B, S, S, C]` and `masking`."""
    if model.dynamics.fixed_point_atol is None:
        return float(model.dynamics.t1), "training horizon"
    if images is None or masking is None:
        raise ValueError(
            "a fixed-point model's stop time depends on the data: pass images and masking."
        )
    _, sol = model.reconstruct(
        normalised_patches(model, images), masking, adjoint="checkpoint", throw=False
    )  # a sample stopped by the cap counts at the cap
    return float(np.mean(np.asarray(sol.t_final))), "fixed-point stop (mean)"


@eqx.filter_jit
def _decode_and_energy(model, xs, conditions, mean, std):
    """`xs [B, T, N, D]` -> reconstructions `[B, T, N, P]` (normalised units) and
    energies `[B, T]`."""
    decode = jax.vmap(jax.vmap(model.decode))
    energy = jax.vmap(lambda x, c: jax.vmap(lambda xt: model.core.energy(xt, c))(x))
    return decode(xs) * std[:, None, None] + mean[:, None, None], energy(xs, conditions)


def image_trajectory(
    model: MaskedImageET,
    images: Float[ArrayLike, "B H W C"],
    masking: Masking,
    times: Real[ArrayLike, " T"] | Sequence[float],
    *,
    options: solvers.SolveOptions | None = None,
    temperature: float = 0.0,
    seed: int = 0,
) -> dict[str, Any]:
    """Run the model's dynamics on `images` once, saving the state at every one of
    `times`, and decode every saved state.

    One `solvers.solve` through `model.reconstruct(..., save=times)` (so the encoding,
    the conditions and the context standardisation are the model's own), from t = 0 to
    `times[-1]`, without the model's fixed-point stop (the trajectory passes every saved
    time) and with the checkpoint adjoint (nothing is differentiated).

    **Arguments:** `images [B, S, S, C]` in [0, 1]; `masking` with `[B, N]` fields;
    `times [T]` non-decreasing in `[0, times[-1]]` (tau); `options`: how to solve, a
    `solvers.SolveOptions` (None: the model's own, `model.dynamics.options`), its step
    cap raised to reach `times[-1]` (`SolveOptions.covering`: enough constant steps, or
    at least 4096 adaptive ones). `temperature`: solve at that temperature (Langevin
    noise, `solvers.solve(..., temperature=...)`; 0: the deterministic dynamics), the
    noise drawn from `jax.random.key(seed)` (each image its own).

    **Returns:** a dict: `times [T]`; `states [B, T, N, D]`; `reconstructions
    [B, T, N, P]` (every patch decoded, normalised units); `patches [B, N, P]` (the
    originals, normalised); `energies [B, T]` (E of the core with the model's
    conditions); `mse [T]` (masked-patch MSE over all occluded patches of the batch,
    normalised units, as the evaluation computes it) and `mse_per_image [B, T]`;
    `conditions`, `context_mean`, `context_std` (`[B, P]`); `options` (the solve's
    keywords: `solver`, `dt0`, `t1`, `rtol`, `atol`, `flow`, `adjoint`, `max_steps`,
    `stop`) and `stats` (the solve's statistics).
    """
    times = np.asarray(times, np.float64)
    if (
        times.ndim != 1
        or times.size < 1
        or times[0] < 0
        or times[-1] <= 0
        or np.any(np.diff(times) < 0)
    ):
        raise ValueError(
            "times must be a non-empty, non-decreasing 1-D array in [0, t_end], t_end > 0."
        )
    t_end = float(times[-1])
    solve = (model.dynamics.options if options is None else options).covering(0.0, t_end)
    run: dict[str, Any] = dict(t1=t_end, adjoint="checkpoint", stop=None)
    if temperature:
        run.update(temperature=float(temperature), key=jax.random.key(seed))
    patches = normalised_patches(model, images)
    _, sol = model.reconstruct(patches, masking, save=times, options=solve, **run)
    mean, std = jax.vmap(model.context_statistics)(patches, masking)
    _, conditions = jax.vmap(model.encode)((patches - mean[:, None]) / std[:, None], masking)
    reconstructions, energies = _decode_and_energy(model, sol.xs, conditions, mean, std)
    occluded = masking.occluded
    per_image = jax.vmap(
        lambda r, p, o: jax.vmap(lambda rt: masked_mse(rt[None], p[None], o[None]))(r)
    )(reconstructions, patches, occluded)
    pooled = jax.vmap(lambda r: masked_mse(r, patches, occluded), in_axes=1)(reconstructions)
    return {
        "times": times,
        "states": np.asarray(sol.xs),
        "reconstructions": np.asarray(reconstructions),
        "patches": np.asarray(patches),
        "energies": np.asarray(energies),
        "mse": np.asarray(pooled),
        "mse_per_image": np.asarray(per_image),
        "conditions": conditions,
        "context_mean": np.asarray(mean),
        "context_std": np.asarray(std),
        "options": recorded_options(solve, t1=run["t1"], adjoint=run["adjoint"], stop=run["stop"])
        | ({"temperature": float(temperature), "noise_seed": seed} if temperature else {}),
        "stats": sol.stats,
    }


def completed_patches(trajectory: dict, masking: Masking) -> np.ndarray:
    """`[B, T, N, P]`: each saved reconstruction on the occluded patches, the original
    elsewhere (what `model.complete` returns at that time), normalised units."""
    occluded = np.asarray(masking.occluded)[:, None, :, None]
    return np.where(occluded, trajectory["reconstructions"], trajectory["patches"][:, None])


# ------------------------------------------------------------------ video frames


def frame_times(horizon: float, frames: int) -> np.ndarray:
    """`frames` equally spaced times from 0 to `horizon` (inclusive), `[frames]`."""
    if int(frames) != frames or frames < 2:
        raise ValueError(f"frames must be an integer >= 2 (got {frames}).")
    return np.linspace(0.0, float(horizon), int(frames))


def frame_steps(options: dict, times) -> dict:
    """Where the frames at `times` fall against the solver's steps (`options`: the solve
    options of the trajectory): with constant steps (`rtol` None), a frame at a multiple
    of `dt0` (or at the last time, where the last step ends) is a step end, every other
    frame an interpolated state (diffrax's dense output between two step ends); with
    adaptive steps every frame but the first and last is interpolated.

    **Returns:** `{"interpolated": count, "frames": count, "sentence": ...}`."""
    times = np.asarray(times, np.float64)
    ends = np.zeros(times.shape, bool)
    ends[0] = ends[-1] = True
    dt0 = options.get("dt0")
    if options.get("rtol") is None and dt0:
        steps = times / float(dt0)
        ends |= np.abs(steps - np.round(steps)) <= 1e-6 * np.maximum(1.0, np.abs(steps))
        how = f"constant steps of {float(dt0):g}"
    else:
        how = "adaptive steps"
    count = int((~ends).sum())
    if count == 0:
        sentence = f"every frame at a step end ({how})"
    else:
        sentence = (
            f"{count} of {times.size} frames lie between step ends ({how}): "
            "interpolated states (diffrax dense output)"
        )
    return {"interpolated": count, "frames": int(times.size), "sentence": sentence}


def still_frame(times, reference: float, label: str) -> tuple[int, str]:
    """The frame shown as the video's still: the one nearest `reference` (the time the
    model was trained to reach), and a sentence saying which it is, and why when the
    reference lies outside the frames' times (the nearest is then the first or last)."""
    times = np.asarray(times, np.float64)
    index = int(np.argmin(np.abs(times - reference)))
    at = f"t = {times[index]:.3g}"
    if reference > times[-1] * (1 + 1e-9):
        return index, (
            f"still: the last frame ({at}): the {label} t = {reference:.3g} lies "
            "beyond the video's horizon"
        )
    if reference < times[0]:
        return index, f"still: the first frame ({at}), after the {label} t = {reference:.3g}"
    return index, f"still: the frame nearest the {label} t = {reference:.3g} ({at})"


def to_display(model, patches) -> np.ndarray:
    """Patches `[..., N, P]` in normalised units -> images `[..., S, S, C]` in [0, 1]
    (normalisation undone, clipped)."""
    patches = jnp.asarray(patches)
    flat = patches.reshape((-1,) + patches.shape[-2:])
    images = model.normalisation.invert(jax.vmap(model.image)(flat))
    images = np.clip(np.asarray(images), 0.0, 1.0)
    return images.reshape(patches.shape[:-2] + images.shape[1:])
