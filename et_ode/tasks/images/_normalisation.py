"""Image batches as the model takes them: the per-channel normalisation
(`ChannelNormalisation`, with ImageNet's numbers for the authors' model) and the checks
of a batch (`check_images`), with the messages a user sees."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "ChannelNormalisation",
    "check_images",
]

# ------------------------------------------------------------------- normalisation

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
"""ImageNet's per-channel RGB mean and standard deviation, for pixels in [0, 1] (the
authors' code uses them times 255 on pixels 0..255: the same map)."""


@dataclasses.dataclass(frozen=True)
class ChannelNormalisation:
    """Per-channel affine normalisation `(x - mean) / std` over the last axis.

    Fit it on the training images, store it with the model (`to_dict` / `from_dict`), apply
    it to inputs and invert it on outputs. Works on NumPy and JAX arrays of floats.
    """

    mean: tuple[float, ...]
    std: tuple[float, ...]

    def __post_init__(self):
        mean = tuple(float(m) for m in np.ravel(np.asarray(self.mean, dtype=np.float64)))
        std = tuple(float(s) for s in np.ravel(np.asarray(self.std, dtype=np.float64)))
        if not mean or len(mean) != len(std):
            raise ValueError(
                f"mean and std must have one value per channel and the same length "
                f"(got {len(mean)} and {len(std)})."
            )
        if not all(math.isfinite(v) for v in mean + std):
            raise ValueError(f"mean and std must be finite (got mean={mean}, std={std}).")
        if not all(s > 0 for s in std):
            raise ValueError(f"std must be positive in every channel (got {std}).")
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "std", std)

    @classmethod
    def fit(cls, images, *, min_std: float = 1e-3) -> ChannelNormalisation:
        """Mean and standard deviation of each channel over all images and pixels of a
        `[B, H, W, C]` batch; a channel's std is floored at `min_std`."""
        images = np.asarray(images)
        check_images(images, channels=None)
        x = images.astype(np.float64).reshape(-1, images.shape[-1])
        return cls(tuple(x.mean(axis=0)), tuple(np.maximum(x.std(axis=0), min_std)))

    @classmethod
    def imagenet(cls) -> ChannelNormalisation:
        """The fixed ImageNet normalisation (`IMAGENET_MEAN`, `IMAGENET_STD`) that the
        authors' released model expects."""
        return cls(IMAGENET_MEAN, IMAGENET_STD)

    @property
    def channels(self) -> int:
        return len(self.mean)

    def _params(self, images):
        shape = getattr(images, "shape", None)
        dtype = getattr(images, "dtype", None)
        if shape is None or len(shape) == 0 or shape[-1] != self.channels:
            raise ValueError(
                f"expected images with {self.channels} channels on the last axis, got shape "
                f"{None if shape is None else tuple(shape)}."
            )
        if not np.issubdtype(np.dtype(dtype), np.floating):
            raise ValueError(
                f"expected floating-point images, got dtype {dtype}; convert uint8 images "
                "to float in [0, 1] first (images / 255)."
            )
        return np.asarray(self.mean, dtype), np.asarray(self.std, dtype)

    def apply(self, images):
        """`(images - mean) / std`, channel by channel (last axis); keeps the dtype."""
        mean, std = self._params(images)
        return (images - mean) / std

    def invert(self, images):
        """`images * std + mean`: undoes `apply`."""
        mean, std = self._params(images)
        return images * std + mean

    def to_dict(self) -> dict[str, list[float]]:
        """Plain-JSON form for checkpoints."""
        return {"mean": list(self.mean), "std": list(self.std)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ChannelNormalisation:
        """Inverse of `to_dict`; raises `ValueError` on missing, extra or bad fields."""
        if not isinstance(data, Mapping):
            raise ValueError(f"expected a mapping with 'mean' and 'std', got {type(data)}.")
        keys = set(data)
        if keys != {"mean", "std"}:
            raise ValueError(
                f"normalisation must have exactly the fields 'mean' and 'std' (got {sorted(keys)})."
            )
        try:
            return cls(tuple(data["mean"]), tuple(data["std"]))
        except TypeError as exc:
            raise ValueError(f"bad normalisation {dict(data)!r}: {exc}") from exc


# ------------------------------------------------------------------- validation


def check_images(
    images, *, size: int | None = None, channels: int | None = 3, unit_range: bool = False
):
    """Raise `ValueError` naming the problem and the fix unless `images` is a batch
    `[B, H, W, C]` of square images with `channels` channels (`None`: any), of side `size`
    (when given), with finite values and, for integer dtypes, values in 0..255.
    Returns `images` unchanged. Float images are range-checked only with `unit_range`
    (values in [0, 1]); otherwise they may be normalised. Under `jax.jit` only the shape
    and dtype are checked."""
    shape = getattr(images, "shape", None)
    dtype = getattr(images, "dtype", None)
    if shape is None or dtype is None:
        try:
            array = np.asarray(images)
        except Exception as exc:  # noqa: BLE001
            raise ValueError(f"images must be an array, got {type(images).__name__}.") from exc
        shape, dtype = array.shape, array.dtype
    shape = tuple(int(d) for d in shape)
    dtype = np.dtype(dtype)
    want = "[B, H, W, C]" if channels is None else f"[B, H, W, {channels}]"

    if len(shape) != 4:
        hint = ""
        if len(shape) == 3:
            hint = " For a single image add a batch axis: images[None]."
        elif len(shape) == 2:
            hint = " For one grayscale image use np.repeat(image[None, :, :, None], 3, -1)."
        raise ValueError(
            f"images must be a 4-D batch {want} (batch, height, width, channels); got shape "
            f"{shape}.{hint}"
        )
    b, h, w, c = shape
    if b == 0:
        raise ValueError(f"images is an empty batch (shape {shape}); pass at least one image.")
    if channels is not None and c != channels:
        if shape[1] == channels:
            hint = " This looks channels-first [B, C, H, W]: use images.transpose(0, 2, 3, 1)."
        elif c == 1 and channels == 3:
            hint = " For grayscale repeat the channel: np.repeat(images, 3, axis=-1)."
        elif c == 4 and channels == 3:
            hint = " For RGBA drop the alpha channel: images[..., :3]."
        else:
            hint = ""
        raise ValueError(
            f"images must have {channels} channels on the last axis, got {c} (shape {shape}).{hint}"
        )
    if h != w:
        raise ValueError(
            f"images must be square, got {h} x {w} (shape {shape}); center-crop them to a "
            "square first."
        )
    if size is not None and h != size:
        raise ValueError(
            f"images must be {size} x {size}, got {h} x {w}; resize them (e.g. "
            "skimage.transform.resize with anti_aliasing=True) or crop them to "
            f"{size} x {size}, or build the model for {h} x {w} images."
        )
    if not (np.issubdtype(dtype, np.floating) or np.issubdtype(dtype, np.integer)):
        raise ValueError(
            f"images must hold real numbers (float in [0, 1] or uint8), got dtype {dtype}."
        )

    try:
        values = np.asarray(images)
    except Exception:  # noqa: BLE001  (a JAX tracer: values unknown at trace time)
        return images
    if np.issubdtype(dtype, np.floating):
        bad = ~np.isfinite(values)
        if bad.any():
            n_bad = int(bad.any(axis=(1, 2, 3)).sum())
            first = int(np.flatnonzero(bad.any(axis=(1, 2, 3)))[0])
            raise ValueError(
                f"images contain NaN or infinite pixels ({int(bad.sum())} values in {n_bad} "
                f"image(s), the first at batch index {first}); remove or repair those images."
            )
        if unit_range and values.size and (values.min() < 0 or values.max() > 1):
            raise ValueError(
                f"images must be floats in [0, 1], got values in {float(values.min()):g}.."
                f"{float(values.max()):g}; divide 0..255 pixels by 255 (or pass uint8 "
                "arrays), undo any normalisation, and clip resampling overshoot to [0, 1]."
            )
    elif values.size and (values.min() < 0 or values.max() > 255):
        raise ValueError(
            f"integer images must have values in 0..255, got {int(values.min())}.."
            f"{int(values.max())} (dtype {dtype}); rescale them to uint8, or pass floats in "
            "[0, 1]."
        )
    return images
