"""Images to patch tokens and back, and the paper's masking (appendix A)."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, PRNGKeyArray


def patchify(image: Float[Array, "H W C"], patch: int) -> Float[Array, "N P"]:
    """Split an image into non-overlapping `patch x patch` patches, row-major:
    `[H, W, C] -> [(H/patch) (W/patch), patch * patch * C]`."""
    height, width, channels = image.shape
    if height % patch or width % patch:
        raise ValueError(
            f"patch size {patch} does not divide the image size {height}x{width}; "
            "choose a patch size that divides both sides."
        )
    grid = image.reshape(height // patch, patch, width // patch, patch, channels)
    return grid.transpose(0, 2, 1, 3, 4).reshape(-1, patch * patch * channels)


def unpatchify(
    patches: Float[Array, "N P"], image_size: int, patch: int, channels: int = 3
) -> Float[Array, "H W C"]:
    """Inverse of `patchify` for a square image of side `image_size`."""
    side = image_size // patch
    grid = patches.reshape(side, side, patch, patch, channels)
    return grid.transpose(0, 2, 1, 3, 4).reshape(image_size, image_size, channels)


class Masking(eqx.Module):
    """Which patches of one image are occluded, and which of those show MASK.

    `occluded: [N]` bool (the loss is over these); `replaced: [N]` bool, a subset of
    `occluded` whose tokens are replaced by the MASK token. Occluded but not replaced
    patches are left visible, as in the paper."""

    occluded: Bool[Array, "*batch N"]
    replaced: Bool[Array, "*batch N"]


def random_masking(
    key: PRNGKeyArray, n_patches: int, ratio: float = 0.5, mask_fraction: float = 0.9
) -> Masking:
    """The paper's masking in exact counts: `round(ratio N)` occluded patches chosen
    uniformly, of which `round(mask_fraction n)` are replaced by MASK and the rest left
    visible. Deterministic per key; every position equally likely."""
    if not 0 < ratio <= 1:
        raise ValueError(f"mask ratio must be in (0, 1] (got {ratio}).")
    if not 0 <= mask_fraction <= 1:
        raise ValueError(f"mask fraction must be in [0, 1] (got {mask_fraction}).")
    n_occluded = round(ratio * n_patches)
    n_replaced = round(mask_fraction * n_occluded)
    order = jax.random.permutation(key, n_patches)
    rank = jnp.empty(n_patches, jnp.int32).at[order].set(jnp.arange(n_patches, dtype=jnp.int32))
    return Masking(occluded=rank < n_occluded, replaced=rank < n_replaced)
