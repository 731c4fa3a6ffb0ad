"""Image data for masked image completion: the embedded photographs, and folders of photos.
TensorFlow Datasets are read by `._tfds`; the per-channel normalisation and the checks of
an image batch are in `._normalisation`.

Embedded default (offline, real photographs)
--------------------------------------------
Square crops (32 x 32 by default) of the colour photographs that ship inside the installed
scikit-image 0.26 and matplotlib packages, so that training and the tests need no download:

=====================  =====================================================  ==========
scene                  images                                                  shape
=====================  =====================================================  ==========
astronaut              `skimage.data.astronaut` (Eileen Collins)               512 x 512
chelsea                `skimage.data.chelsea` (a cat)                          300 x 451
coffee                 `skimage.data.coffee` (a cup of coffee)                 400 x 600
rocket                 `skimage.data.rocket` (a launch pad)                    427 x 640
motorcycle             `skimage.data.stereo_motorcycle` left and right views  500 x 741
hubble_deep_field      `skimage.data.hubble_deep_field`                        872 x 1000
immunohistochemistry   `skimage.data.immunohistochemistry`                     512 x 512
retina                 `skimage.data.retina`                                   1411 x 1411
grace_hopper           matplotlib's sample_data/grace_hopper.jpg               600 x 512
=====================  =====================================================  ==========

All ten images are files inside the installed wheels (skimage/data/ and matplotlib's
mpl-data/sample_data/); none of them is fetched with pooch, so none had to be left out. The
two views of the stereo motorcycle show one scene and count as one.

Train and test are split by whole scene, never by crop, so that no pixel of a held-out scene
is ever seen in training. `TEST_SCENES` are "chelsea" and "coffee": two everyday photographs
of different character, a close-up of an animal (fur texture, organic shapes) and an indoor
still life (smooth shading, specular highlights, hard man-made edges). The training scenes
keep the portraits, the outdoor machines and the three scientific images (astronomy,
histology, a fundus photograph), each of which is one of a kind.

Each image is first downscaled (with anti-aliasing) so that its shorter side is `scale`
pixels (160 by default), so that a 32 x 32 crop holds a meaningful part of the scene (a fifth
of the shorter side) rather than a featureless patch of a high-resolution photo; crops are
then taken at uniformly random positions, a fixed number per image, deterministically per
seed. With the defaults, train has 8 images x 400 = 3200 crops and test 2 x 400 = 800. Every
image's crops depend only on the seed and the image's name, so the crops of
`photo_crops("all")` are those of "train" and "test" together. Nothing is cached on disk
(decoded and downscaled images are kept in memory).

Photo folders
-------------
`folder_images` reads the photos of a folder (`.jpg`, `.jpeg`, `.png`), centre cropped and
resized as in the usual ImageNet evaluation.
"""

from __future__ import annotations

import functools
import os
import zlib
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np

__all__ = [
    "SCENES",
    "TEST_SCENES",
    "TRAIN_SCENES",
    "default_scale",
    "folder_images",
    "load_scene_images",
    "photo_crops",
    "read_photos",
    "scene_crops",
    "split_scenes",
]

Split = Literal["train", "test", "all"]

# ----------------------------------------------------------------- embedded photographs


def _skimage(name: str) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        import skimage.data

        return getattr(skimage.data, name)()

    return load


def _motorcycle(view: int) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        import skimage.data

        return skimage.data.stereo_motorcycle()[view]

    return load


def _grace_hopper() -> np.ndarray:
    import matplotlib.cbook
    from PIL import Image

    path = matplotlib.cbook.get_sample_data("grace_hopper.jpg", asfileobj=False)
    with Image.open(path) as image:
        return np.asarray(image.convert("RGB"))


_LOADERS: dict[str, Callable[[], np.ndarray]] = {
    "astronaut": _skimage("astronaut"),
    "chelsea": _skimage("chelsea"),
    "coffee": _skimage("coffee"),
    "rocket": _skimage("rocket"),
    "motorcycle_left": _motorcycle(0),
    "motorcycle_right": _motorcycle(1),
    "hubble_deep_field": _skimage("hubble_deep_field"),
    "immunohistochemistry": _skimage("immunohistochemistry"),
    "retina": _skimage("retina"),
    "grace_hopper": _grace_hopper,
}

SCENES: dict[str, tuple[str, ...]] = {
    "astronaut": ("astronaut",),
    "chelsea": ("chelsea",),
    "coffee": ("coffee",),
    "rocket": ("rocket",),
    "motorcycle": ("motorcycle_left", "motorcycle_right"),
    "hubble_deep_field": ("hubble_deep_field",),
    "immunohistochemistry": ("immunohistochemistry",),
    "retina": ("retina",),
    "grace_hopper": ("grace_hopper",),
}
"""Scene name -> names of its images (the stereo pair is one scene of two images)."""

TEST_SCENES: tuple[str, ...] = ("chelsea", "coffee")
"""Held-out scenes: never seen in training (see the module docstring for the choice)."""

TRAIN_SCENES: tuple[str, ...] = tuple(s for s in SCENES if s not in TEST_SCENES)
"""All other scenes."""

DEFAULT_CROPS_PER_IMAGE = 400
DEFAULT_SCALE = 160


def default_scale(size: int) -> int:
    """The shorter side images are scaled to before crops of `size` are cut: 160 (a 32
    crop is a fifth of it), or 8/7 of the crop for crops over 140 (ImageNet's resize to
    256 and centre crop of 224), so that large crops still see a downscaled scene."""
    return max(DEFAULT_SCALE, round(size * 8 / 7))


def split_scenes(split: Split) -> tuple[str, ...]:
    """The scene names of a split: "train", "test" or "all"."""
    if split == "train":
        return TRAIN_SCENES
    if split == "test":
        return TEST_SCENES
    if split == "all":
        return tuple(SCENES)
    raise ValueError(f"Unknown split {split!r}; use 'train', 'test' or 'all'.")


def _as_rgb_uint8(image: np.ndarray, name: str) -> np.ndarray:
    image = np.asarray(image)
    if image.dtype != np.uint8:
        raise ValueError(f"image {name!r} has dtype {image.dtype}, expected uint8")
    if image.ndim == 2:
        image = image[..., None]
    if image.ndim != 3 or image.shape[-1] not in (1, 3, 4):
        raise ValueError(f"image {name!r} has shape {image.shape}, expected H x W x 3")
    if image.shape[-1] == 1:
        image = np.repeat(image, 3, axis=-1)
    return np.ascontiguousarray(image[..., :3])


def load_scene_images(scene: str) -> list[np.ndarray]:
    """The full-resolution images of one scene, each `uint8 [H, W, 3]` (alpha dropped)."""
    if scene not in SCENES:
        raise ValueError(f"Unknown scene {scene!r}; the scenes are {sorted(SCENES)}.")
    return [_as_rgb_uint8(_LOADERS[name](), name) for name in SCENES[scene]]


@functools.lru_cache(maxsize=32)
def _scaled_image(name: str, scale: int | None) -> np.ndarray:
    """One image as float32 in [0, 1], its shorter side downscaled to `scale` pixels
    (anti-aliased; never upscaled). Read-only, cached in memory."""
    from skimage.transform import resize

    image = _as_rgb_uint8(_LOADERS[name](), name)
    h, w = image.shape[:2]
    if scale is not None and min(h, w) > scale:
        factor = scale / min(h, w)
        shape = (max(scale, round(h * factor)), max(scale, round(w * factor)))
        out = resize(image, shape, order=1, anti_aliasing=True, preserve_range=False)
        out = np.clip(out, 0.0, 1.0).astype(np.float32)
    else:
        out = image.astype(np.float32) / 255.0
    out.setflags(write=False)
    return out


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer (got {value!r}).")
    return int(value)


def scene_crops(
    scenes: Sequence[str],
    *,
    size: int = 32,
    crops_per_image: int = DEFAULT_CROPS_PER_IMAGE,
    seed: int = 0,
    scale: int | None | Literal["auto"] = "auto",
) -> np.ndarray:
    """Random square crops of the named scenes, `float32 [M, size, size, 3]` in [0, 1].

    `M = crops_per_image x` (number of images in the scenes). Each image is downscaled so
    that its shorter side is `scale` pixels (`"auto"`: `default_scale(size)`, 160 for
    crops up to 140; `None`: full resolution; smaller images are kept as they are),
    then cropped at uniformly random positions. The crops of one image
    depend only on `seed`, the image's name and the arguments, not on the other scenes.
    """
    if isinstance(scenes, str):
        scenes = (scenes,)
    unknown = [s for s in scenes if s not in SCENES]
    if unknown:
        raise ValueError(f"Unknown scene(s) {unknown}; the scenes are {sorted(SCENES)}.")
    size = _positive_int(size, "size")
    crops_per_image = _positive_int(crops_per_image, "crops_per_image")
    if isinstance(scale, str) and scale == "auto":
        scale = default_scale(size)
    if scale is not None:
        scale = _positive_int(scale, "scale")
        if scale < size:
            raise ValueError(f"scale ({scale}) must be at least the crop size ({size}).")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer (got {seed!r}).")

    out = []
    for scene in scenes:
        for name in SCENES[scene]:
            image = _scaled_image(name, scale)
            h, w = image.shape[:2]
            if min(h, w) < size:
                raise ValueError(
                    f"image {name!r} is {h} x {w} after scaling, smaller than the crop size "
                    f"{size}; use a larger `scale`."
                )
            rng = np.random.default_rng([int(seed), zlib.crc32(name.encode())])
            ys = rng.integers(0, h - size + 1, crops_per_image)
            xs = rng.integers(0, w - size + 1, crops_per_image)
            out.append(np.stack([image[y : y + size, x : x + size] for y, x in zip(ys, xs)]))
    if not out:
        return np.zeros((0, size, size, 3), np.float32)
    return np.concatenate(out).astype(np.float32, copy=False)


def photo_crops(
    split: Split = "train",
    *,
    size: int = 32,
    crops_per_image: int = DEFAULT_CROPS_PER_IMAGE,
    seed: int = 0,
    scale: int | None | Literal["auto"] = "auto",
) -> np.ndarray:
    """Crops of the embedded photographs of a split, `float32 [M, size, size, 3]` in [0, 1].

    `split` is "train" (`TRAIN_SCENES`), "test" (`TEST_SCENES`) or "all". With the defaults,
    train has 3200 crops and test 800. Deterministic per `seed`. See `scene_crops`.
    """
    return scene_crops(
        split_scenes(split),
        size=size,
        crops_per_image=crops_per_image,
        seed=seed,
        scale=scale,
    )


# ------------------------------------------------------------------ photo folders

PHOTO_SUFFIXES = (".jpg", ".jpeg", ".png")


def folder_images(folder, size: int, *, limit: int | None = None):
    """The photos of a folder (`.jpg`, `.jpeg`, `.png`, any case; not its subfolders) in
    name order, each turned upright by its EXIF orientation, converted to RGB, centre
    cropped to a square and resized to `size x size` (Pillow, bicubic, antialiased when
    shrinking), as in the usual ImageNet evaluation (resize, centre crop).

    **Returns:** `(images float32 [M, size, size, 3] in [0, 1] (k / 255), names)`; `limit`
    keeps the first `limit` photos. Raises `ValueError` for a missing folder, a folder
    without photos, or a file that cannot be read as an image."""
    size = _positive_int(size, "size")
    if limit is not None:
        limit = _positive_int(limit, "limit")
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise ValueError(f"--images-dir {folder} is not a folder.")
    names = sorted(
        name
        for name in os.listdir(folder)
        if name.lower().endswith(PHOTO_SUFFIXES) and os.path.isfile(os.path.join(folder, name))
    )
    if not names:
        raise ValueError(f"{folder} holds no photos ({', '.join(PHOTO_SUFFIXES)}).")
    names = names[:limit]
    return read_photos([os.path.join(folder, name) for name in names], size), names


def read_photos(paths: Sequence[str], size: int) -> np.ndarray:
    """The image files `paths`, in their order, as `folder_images` reads each one:
    `float32 [M, size, size, 3]` in [0, 1]. Raises `ValueError` for a file that cannot be
    read as an image."""
    from PIL import Image, ImageOps

    out = np.empty((len(paths), size, size, 3), np.float32)
    for i, path in enumerate(paths):
        try:
            with Image.open(path) as opened:
                image = ImageOps.exif_transpose(opened).convert("RGB")
        except (OSError, ValueError) as exc:  # PIL's UnidentifiedImageError is an OSError
            raise ValueError(f"{path} is not a readable image ({exc}).") from None
        width, height = image.size
        side = min(width, height)
        left, top = (width - side) // 2, (height - side) // 2
        image = image.crop((left, top, left + side, top + side))
        if side != size:
            image = image.resize((size, size), Image.Resampling.BICUBIC)
        out[i] = np.asarray(image, np.float32) / 255.0
    return out
