"""Image data for masked image completion: embedded photographs and TensorFlow Datasets.

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

TensorFlow Datasets (optional extra `tfds`)
-------------------------------------------
`tfds_images` reads any prepared TFDS image dataset (CIFAR-10 by default in the command line)
through `tfds.data_source`, which reads ArrayRecord (or Parquet) files without TensorFlow.
It never downloads: a dataset that is not prepared in `data_dir` fails at once with a message
that says how to prepare it, instead of the ~200 s of network retries that an offline
`tfds.load` takes. Datasets prepared in the default TFRecord format need TensorFlow to read,
so they have to be prepared (or converted) with `file_format="array_record"`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import numpy as np

__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "SCENES",
    "TEST_SCENES",
    "TRAIN_SCENES",
    "ChannelNormalisation",
    "check_images",
    "default_scale",
    "folder_images",
    "load_scene_images",
    "photo_crops",
    "scene_crops",
    "split_scenes",
    "tfds_images",
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
    from PIL import Image, ImageOps

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
    out = np.empty((len(names), size, size, 3), np.float32)
    for i, name in enumerate(names):
        try:
            with Image.open(os.path.join(folder, name)) as opened:
                image = ImageOps.exif_transpose(opened).convert("RGB")
        except (OSError, ValueError) as exc:  # PIL's UnidentifiedImageError is an OSError
            raise ValueError(
                f"{os.path.join(folder, name)} is not a readable image ({exc})."
            ) from None
        width, height = image.size
        side = min(width, height)
        left, top = (width - side) // 2, (height - side) // 2
        image = image.crop((left, top, left + side, top + side))
        if side != size:
            image = image.resize((size, size), Image.Resampling.BICUBIC)
        out[i] = np.asarray(image, np.float32) / 255.0
    return out, names


# ------------------------------------------------------------- TensorFlow Datasets


def _prepare_help(name: str, data_dir: str) -> str:
    return (
        f"To prepare it, on a machine with internet access run\n"
        f"    pip install tensorflow tensorflow-datasets\n"
        f'    python -c "import tensorflow_datasets as tfds; tfds.builder({name!r}, '
        f"data_dir='DIR', file_format='array_record').download_and_prepare()\"\n"
        f"(or: tfds build {name} --data_dir DIR --file_format array_record), copy DIR here "
        f"if needed, and pass --data-dir DIR (data_dir=DIR in Python). It is looked for in "
        f"{data_dir}. Reading needs only tensorflow-datasets (pip install 'et-ode[tfds]'), "
        f"not TensorFlow, but the files must be in ArrayRecord format."
    )


def _import_tfds():
    try:
        import tensorflow_datasets as tfds
    except ImportError as exc:
        raise ImportError(
            "Reading TensorFlow Datasets needs the optional extra: pip install 'et-ode[tfds]' "
            "(tensorflow-datasets and importlib_resources; TensorFlow itself is not needed)."
        ) from exc
    return tfds


def _to_square_rgb(image: np.ndarray, size: int) -> np.ndarray:
    """One image -> float32 [size, size, 3] in [0, 1]: channels to RGB, center crop, resize."""
    from skimage.transform import resize
    from skimage.util import img_as_float32

    image = np.asarray(image)
    if image.ndim == 2:
        image = image[..., None]
    if image.ndim != 3 or image.shape[-1] not in (1, 2, 3, 4):
        raise ValueError(f"expected an image [H, W, C] with C in 1..4, got shape {image.shape}.")
    if image.shape[-1] in (1, 2):  # grayscale (with alpha)
        image = np.repeat(image[..., :1], 3, axis=-1)
    image = img_as_float32(image[..., :3])
    h, w = image.shape[:2]
    side = min(h, w)
    top, left = (h - side) // 2, (w - side) // 2
    image = image[top : top + side, left : left + side]
    if side != size:
        image = resize(image, (size, size), order=1, anti_aliasing=side > size)
    return np.clip(image, 0.0, 1.0).astype(np.float32, copy=False)


def tfds_images(
    name: str,
    *,
    split: str = "train",
    data_dir: str | os.PathLike | None = None,
    size: int = 32,
    limit: int | None = None,
) -> np.ndarray:
    """The "image" feature of a prepared TFDS dataset as `float32 [M, size, size, 3]` in [0, 1].

    Reads through `tfds.data_source` (no TensorFlow) and never downloads. Images are
    converted to RGB (grayscale repeated, alpha dropped), center-cropped to a square and
    resized to `size` when needed. `split` is any TFDS split string ("train", "test[:10%]",
    ...); `limit` keeps the first `limit` examples. `data_dir` defaults to `$TFDS_DATA_DIR`,
    else `~/tensorflow_datasets`.

    Raises `RuntimeError` at once, with instructions, when the dataset is not prepared in
    `data_dir` or was prepared in a format that needs TensorFlow (TFRecord); `ValueError`
    for an unknown dataset or split, or a dataset without an "image" feature.
    """
    size = _positive_int(size, "size")
    if limit is not None:
        limit = _positive_int(limit, "limit")
    tfds = _import_tfds()
    if data_dir is None:
        data_dir = os.environ.get("TFDS_DATA_DIR") or os.path.join(
            os.path.expanduser("~"), "tensorflow_datasets"
        )
    data_dir = os.fspath(data_dir)

    # Local only: resolving a registered name reads code and `data_dir`, no network.
    try:
        builder = tfds.builder(name, data_dir=data_dir, try_gcs=False)
    except Exception as exc:  # DatasetNotFoundError and friends
        raise ValueError(
            f"TensorFlow Datasets has no dataset {name!r} and none is prepared under "
            f"{data_dir} ({type(exc).__name__}). See "
            "https://www.tensorflow.org/datasets/catalog/overview for names."
        ) from exc
    # Whether the dataset is prepared is decided from the files in `data_dir` alone, before
    # any reading. `data_source` is still asked to read (so that read-only and mocked
    # builders work), but with `download=False` it cannot touch the network: offline, a
    # download retries for minutes before failing. An unprepared dataset fails at once.
    prepared = builder.is_prepared()
    try:
        source = tfds.data_source(name, split=split, data_dir=data_dir, download=False)
    except Exception as exc:
        if not prepared:
            raise RuntimeError(
                f"Dataset {name!r} is not prepared in {data_dir} (nothing at "
                f"{builder.data_dir}), and et-ode does not download.\n"
                + _prepare_help(name, data_dir)
            ) from exc
        if not isinstance(exc, NotImplementedError):
            splits = sorted(getattr(builder.info, "splits", {}) or {})
            raise ValueError(
                f"Could not read split {split!r} of dataset {name!r} from {builder.data_dir} "
                f"({type(exc).__name__}: {exc}). Available splits: {splits}."
            ) from exc
        # Prepared, but as TFRecord only: no random access without TensorFlow.
        raise RuntimeError(
            f"Dataset {name!r} in {builder.data_dir} was prepared in the TFRecord format, "
            "which only TensorFlow can read. Prepare it again with "
            "file_format='array_record' (below), or convert it where TensorFlow is "
            f"installed: tfds convert_format --dataset_version_dir {builder.data_dir} "
            "--out_file_format array_record.\n" + _prepare_help(name, data_dir)
        ) from exc
    if isinstance(source, Mapping):
        raise ValueError(f"split must name one split, got {split!r}.")

    n = len(source)
    if limit is not None:
        n = min(n, limit)
    out = np.empty((n, size, size, 3), np.float32)
    for i in range(n):
        # One by one: decoding dominates, and the `tfds.testing.mock_data` source does not
        # implement the batched `__getitems__` correctly.
        example = source[i]
        if not isinstance(example, Mapping) or "image" not in example:
            found = sorted(example) if isinstance(example, Mapping) else type(example).__name__
            raise ValueError(
                f"Dataset {name!r} has no 'image' feature (its examples have {found})."
            )
        out[i] = _to_square_rgb(example["image"], size)
    return out
