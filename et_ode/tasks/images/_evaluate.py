"""Held-out evaluation of masked image completion, and the two baselines, all through
one function so that their numbers are comparable."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._model import masked_mse
from ._patches import Masking, patchify, random_masking, unpatchify

EVAL_KEY = 20230213  # fixed: every model and baseline sees the same masks


def evaluation_masks(
    n_patches: int, n_images: int, seed: int = EVAL_KEY, ratio: float = 0.5, fraction: float = 0.9
) -> Masking:
    """The paper's exact-count masking for `n_images` images of `n_patches` patches,
    with keys `jax.random.split(jax.random.key(seed), n_images)`: `[n_images, N]` fields.
    With the default seed, these are the masks every evaluation uses."""
    return _masks(int(seed), int(n_images), int(n_patches), float(ratio), float(fraction))


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3, 4))
def _masks(seed, n_images, n_patches, ratio, fraction):
    keys = jax.random.split(jax.random.key(seed), n_images)
    return jax.vmap(lambda k: random_masking(k, n_patches, ratio, fraction))(keys)


def eval_masks(config, n_images: int, seed: int = EVAL_KEY) -> Masking:
    """The evaluation masks `[n_images, N]` of a training config (its image and patch
    size, mask ratio and fraction), keyed by `seed` (the default, `EVAL_KEY`, gives the
    masks of every evaluation)."""
    return evaluation_masks(
        config.model.n_patches,
        n_images,
        seed,
        config.data.mask_ratio,
        config.data.mask_fraction,
    )


def evaluate_fill(fill, images, masks: Masking, patch: int, batch_size: int = 64) -> float:
    """Masked-patch MSE of `fill(patches [B, N, P], masking) -> [B, N, P]` over
    `images [M, H, W, C]` (normalised units), averaged over all occluded patches."""
    total, count = 0.0, 0
    for start in range(0, len(images), batch_size):
        chunk = jnp.asarray(images[start : start + batch_size])
        patches = jax.vmap(lambda im: patchify(im, patch))(chunk)
        mask = jax.tree.map(lambda a: a[start : start + batch_size], masks)
        prediction = fill(patches, mask)
        n = int(jnp.sum(mask.occluded))
        total += float(masked_mse(prediction, patches, mask.occluded)) * n
        count += n
    return total / count


@eqx.filter_jit
def _model_fill(model, patches, masking, overrides):
    return model.reconstruct(patches, masking, **dict(overrides))[0]


def evaluate_model(model, images, masks, batch_size=64, **overrides) -> float:
    """Masked-patch MSE of a `MaskedImageET` (its own dynamics, or `overrides`)."""
    if model.dynamics.fixed_point_atol is not None:
        # Images whose fixed-point solve reaches the time cap count with their end state.
        overrides = dict(throw=False) | overrides
    frozen = tuple(sorted(overrides.items()))
    return evaluate_fill(
        lambda p, m: _model_fill(model, p, m, frozen), images, masks, model.config.patch, batch_size
    )


def mean_fill(patches, masking: Masking):
    """Baseline: every MASK-replaced patch becomes the mean of the patches the model
    would see (those not replaced), per image; shown patches are copied."""
    seen = ~masking.replaced[..., None]
    mean = jnp.sum(jnp.where(seen, patches, 0.0), axis=1, keepdims=True) / jnp.maximum(
        jnp.sum(seen, axis=1, keepdims=True), 1
    )
    return jnp.where(seen, patches, mean)


def interpolation_fill(patches, masking: Masking, image_size: int, patch: int, channels: int = 3):
    """Baseline: MASK-replaced pixels linearly interpolated (scipy `griddata`) from the
    pixels of the patches the model sees, nearest-neighbour outside their hull."""
    from scipy.interpolate import griddata  # a second's import: only when used

    patches = np.asarray(patches)
    out = patches.copy()
    grid = np.stack(np.meshgrid(np.arange(image_size), np.arange(image_size), indexing="ij"), -1)
    for b in range(patches.shape[0]):
        replaced = np.asarray(masking.replaced[b])
        pixel_mask = (
            np.asarray(
                unpatchify(
                    jnp.asarray(np.repeat(replaced[:, None], patches.shape[-1], axis=1), float),
                    image_size,
                    patch,
                    channels,
                )
            )[..., 0]
            > 0.5
        )
        image = np.asarray(unpatchify(jnp.asarray(patches[b]), image_size, patch, channels))
        known, unknown = grid[~pixel_mask], grid[pixel_mask]
        filled = image.copy()
        for c in range(channels):
            values = griddata(known, image[~pixel_mask][:, c], unknown, method="linear")
            nearest = griddata(known, image[~pixel_mask][:, c], unknown, method="nearest")
            filled[pixel_mask, c] = np.where(np.isnan(values), nearest, values)
        out[b] = np.asarray(patchify(jnp.asarray(filled), patch))
    return jnp.asarray(out)


def evaluate_baselines(images, masks, image_size, patch, channels=3) -> dict:
    """`{"mean_fill": mse, "interpolation": mse}` on the same images and masks."""
    return {
        "mean_fill": evaluate_fill(mean_fill, images, masks, patch),
        "interpolation": evaluate_fill(
            lambda p, m: interpolation_fill(p, m, image_size, patch, channels), images, masks, patch
        ),
    }
