"""Image data from TensorFlow Datasets (optional extra `tfds`).

`tfds_images` reads any prepared TFDS image dataset (CIFAR-10 by default in the command line)
through `tfds.data_source`, which reads ArrayRecord (or Parquet) files without TensorFlow.
It never downloads: a dataset that is not prepared in `data_dir` fails at once with a message
that says how to prepare it, instead of the ~200 s of network retries that an offline
`tfds.load` takes. Datasets prepared in the default TFRecord format need TensorFlow to read,
so they have to be prepared (or converted) with `file_format="array_record"`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np

from ._data import _positive_int

__all__ = ["tfds_images"]


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
