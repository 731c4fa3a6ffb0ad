"""How much noise a trained image model tolerates: the masked-patch error and the energy
of its completion against the temperature of its dynamics.

Each image's completion is solved with the model's own discretisation (for the paper's
model 12 Euler-Maruyama steps of 0.1) at each temperature, `samples` times, each with
its own noise (`solvers.solve(..., temperature=T, key=...)`; isotropic noise on the
native flow, the authors' kind; tangent noise on the projected flow); `T = 0` is the
deterministic completion every other temperature is compared with.
"""

import dataclasses
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float

from et_ode import solvers
from et_ode.tasks import MaskedImageET, Masking

from .._geometry import require
from .._records import metadata, model_dtype
from .._results import Result
from ._overshoot import _encode, _errors_and_energies
from ._task_records import recorded_options


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class TemperatureSweep(Result):
    """The result of `temperature_sweep`: per temperature (ascending, 0 first) the masked
    MSE (normalised pixel units, over the occluded patches of every image) and the
    energy at the end of the model's horizon, over `samples` noise draws per image."""

    temperatures: np.ndarray
    """`[k]`: the temperatures, 0 (the deterministic completion) first."""
    mse: np.ndarray
    """`[k]`: masked MSE, mean over images and draws."""
    mse_low: np.ndarray
    """`[k]`: the lowest of the draws' masked MSEs (each over every image)."""
    mse_high: np.ndarray
    """`[k]`: the highest."""
    mse_per_image: np.ndarray
    """`[k, B]`: each image's masked MSE, mean over its draws."""
    energy: np.ndarray
    """`[k]`: the end state's energy, mean over images and draws."""
    energy_std: np.ndarray
    """`[k]`: its standard deviation over images and draws."""
    energy_rise: np.ndarray
    """`[k]`: `E(T) - E(0)` of the same image's end state, mean over images and draws."""
    energy_rise_std: np.ndarray
    """`[k]`: its standard deviation over images and draws."""
    tolerance: float
    """The relative rise of the masked MSE over `T = 0` that counts as degraded."""
    tolerated: float
    """The highest temperature before the first one whose masked MSE exceeds
    `(1 + tolerance)` times that at `T = 0` (the highest swept if none does)."""
    degraded_at: float | None
    """That first degraded temperature (None: none degraded)."""
    horizon: float
    """The end time of each solve (the model's `dynamics.t1`, tau)."""
    samples: int
    """Noise draws per image and temperature."""
    noise: str
    """The noise (`"isotropic"` on the native flow, `"tangent"` on the projected)."""
    solve_options: dict
    """How each solve ran (solver, steps, flow)."""
    metadata: dict
    """Dtype, seed, counts, units and versions."""


def temperature_sweep(
    model: MaskedImageET,
    images: Float[ArrayLike, "B H W C"],
    masking: Masking,
    temperatures: Sequence[float],
    *,
    samples: int = 4,
    tolerance: float = 0.1,
    seed: int = 0,
    options: solvers.SolveOptions | None = None,
) -> TemperatureSweep:
    """The masked MSE and the energy of the model's completion at each temperature.

    **Arguments:**

    - `model`: an `et_ode.MaskedImageET`; `images: [B, H, W, C]` in its normalised
      units; `masking`: an `et_ode.Masking` with `[B, N]` fields.
    - `temperatures`: positive temperatures (energy units), swept in ascending order;
      `0` is added as the reference.
    - `samples`: noise draws per image and temperature (each sample its own noise).
    - `tolerance`: the relative rise of the masked MSE over `T = 0` that counts as
      degraded (`tolerated` is the last temperature below it).
    - `seed`: the noise's seed (temperature `i` draws with `fold_in(key(seed), i)`).
    - `options`: how to solve (default the model's own, `model.dynamics.options`;
      constant steps, or an adaptive SDE solver such as `spark` with tolerances).

    **Returns:** a `TemperatureSweep`.
    """
    require(model, "temperature_sweep")
    values = np.asarray(temperatures, dtype=float).ravel()
    if values.size == 0 or not np.all(np.isfinite(values)) or np.any(values < 0):
        raise ValueError(
            f"temperatures must be finite numbers >= 0 (got {np.asarray(temperatures).tolist()})."
        )
    if not (isinstance(samples, int) and samples >= 1):
        raise ValueError(f"samples must be an integer >= 1 (got {samples!r}).")
    if not tolerance > 0:
        raise ValueError(f"tolerance must be positive (got {tolerance!r}).")
    values = np.unique(np.concatenate([[0.0], values]))
    options = model.dynamics.options if options is None else options
    images = jnp.asarray(images)
    patches = jax.vmap(model.patches)(images)
    n_images = patches.shape[0]
    x0, conditions, mean, std = _encode(model, patches, masking)
    repeat = lambda a: jnp.repeat(a, samples, axis=0)  # noqa: E731  image i: rows i*S...
    x_rep, cond_rep = (
        repeat(x0),
        jax.tree.map(lambda leaf: repeat(leaf) if jnp.ndim(leaf) > 0 else leaf, conditions),
    )
    occluded = np.asarray(masking.occluded).sum(axis=-1)
    noise = "tangent" if options.flow == "projected" else "isotropic"
    key = jax.random.key(seed)
    per_image, draws, energies = [], [], []
    for i, temperature in enumerate(values):
        sol = solvers.solve(
            model.core,
            x_rep,
            args=cond_rep,
            args_batched=True,
            options=options,
            t1=model.dynamics.t1,
            temperature=float(temperature),
            key=jax.random.fold_in(key, i),
        )
        err, energy = _errors_and_energies(
            model,
            sol.x_final[:, None],
            cond_rep,
            repeat(patches),
            repeat(masking.occluded),
            repeat(mean),
            repeat(std),
        )
        sq = np.asarray(err)[:, 0].reshape(n_images, samples)
        per_image.append(sq.mean(axis=1) / np.maximum(occluded, 1))
        draws.append(sq.sum(axis=0) / max(int(occluded.sum()), 1))  # [S]
        energies.append(np.asarray(energy)[:, 0])
    mse = np.asarray([d.mean() for d in draws])
    cold = energies[0].reshape(n_images, samples)[:, :1]  # T = 0: every draw the same
    rises = [e.reshape(n_images, samples) - cold for e in energies]
    degraded = np.flatnonzero(mse > (1 + tolerance) * mse[0])
    first = int(degraded[0]) if degraded.size else None
    return TemperatureSweep(
        temperatures=values,
        mse=mse,
        mse_low=np.asarray([d.min() for d in draws]),
        mse_high=np.asarray([d.max() for d in draws]),
        mse_per_image=np.asarray(per_image),
        energy=np.asarray([e.mean() for e in energies]),
        energy_std=np.asarray([e.std() for e in energies]),
        energy_rise=np.asarray([r.mean() for r in rises]),
        energy_rise_std=np.asarray([r.std() for r in rises]),
        tolerance=float(tolerance),
        tolerated=float(values[-1] if first is None else values[first - 1]),
        degraded_at=None if first is None else float(values[first]),
        horizon=float(model.dynamics.t1),
        samples=samples,
        noise=noise,
        solve_options=recorded_options(options),
        metadata=metadata(
            study="temperature",
            dtype=model_dtype(model.core),
            seeds={"noise": seed},
            n_images=n_images,
            units="MSE over occluded patches in normalised pixel units; energy of the core",
        ),
    )
