"""The authors' released ImageNet model: reading their `plaindict_ckpt.npz`.

Hoover et al. publish the Energy Transformer they trained on ImageNet as
`plaindict_ckpt.npz` in the repository `bhoov/energy-transformer-jax`: a NumPy `.npz` of
plain arrays (no pickles). Its keys and shapes, and how each becomes a parameter of a
`MaskedImageET`:

==============  ==============  ==============================================
key             shape           parameter
==============  ==============  ==============================================
`Wq`, `Wk`      `[H, Y, D]`     `core.attention.Wq`, `.Wk`
`Xi`            `[D, M]`        `core.hopfield.xi` (transposed: `[K, D]`)
`Wenc`, `Benc`  `[P, D]`, `[D]`  `encoder.weight` (transposed), `encoder.bias`
`Wdec`, `Bdec`  `[D, P]`, `[P]`  `decoder.weight` (transposed), `decoder.bias`
`LNORM_gamma`   scalar          `core.norm.log_gamma` (its log), and
                                `decoder_norm.weight` (gamma in every channel)
`LNORM_bias`    `[D]`           `core.norm.delta` and `decoder_norm.bias`
`MASK_token`    `[D]`           `mask_token`
`CLS_token`     `[D]`           `cls_token` (plus row 0 of `POS_embed`); optional
`POS_embed`     `[1 + N, D]`    `positions` (rows 1..N; row 0 belongs to CLS)
==============  ==============  ==============================================

`P = 3 p^2` gives the patch side `p`, `N = (S/p)^2` the image side `S` (224 and 16 for
the released file: `N = 196`, 197 tokens). Their pipeline, which the model built here
reproduces: RGB pixels normalised per channel with the ImageNet mean and standard
deviation; patches flattened channel first `(c, h, w)`; 100 of the 196 patches replaced
by MASK and none left visible; CLS prepended; positions added to every token; 12 steps
`x <- x - 0.1 dE/dg` (explicit Euler, dt 0.1, `t1` 1.2, native flow), self-attention
included, `beta = 1/sqrt(Y)`, ReLU memories; CLS dropped; each token decoded as
`LN(LN(x)) Wdec + Bdec` with the core's LayerNorm (their decoder applies it twice).

The file is read with `np.load(path, allow_pickle=False)`: an object array is refused,
never unpickled. Missing keys, shapes that disagree, non-finite values and a gamma that
is not positive are refused with a `ValueError` naming the key.
"""

import hashlib
import math
import zipfile
import zlib
from pathlib import Path
from typing import Final

import jax
import numpy as np

from .._dynamics import Dynamics
from ._config import DataConfig, TrainConfig, TrainingConfig
from ._normalisation import ChannelNormalisation
from ._spec import ImageModelConfig

REPOSITORY = "bhoov/energy-transformer-jax"
FILE_NAME = "plaindict_ckpt.npz"
REQUIRED_KEYS = (
    "Wq",
    "Wk",
    "Xi",
    "Wenc",
    "Benc",
    "Wdec",
    "Bdec",
    "LNORM_gamma",
    "LNORM_bias",
    "MASK_token",
    "POS_embed",
)
OPTIONAL_KEYS = ("CLS_token",)
KEYS = REQUIRED_KEYS + OPTIONAL_KEYS
MASKED, PATCHES = 100, 196
MASK_RATIO = MASKED / PATCHES
"""Their masking: 100 of 196 patches replaced by MASK (`round(MASK_RATIO N)` of `N`)."""
CHANNELS: Final = 3
EVAL_IMAGES = 32  # held-out images of `et-ode eval` (each costs ~36 GFLOP at full size)


# What reading a damaged zip archive raises (zipfile: a bad CRC, an unknown compression
# method, a flag saying "encrypted"; zlib: bad deflate data).
ZIP_ERRORS = (OSError, EOFError, zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError)


def is_npz(path) -> bool:
    """Whether `path` is a zip archive (the container of `.npz` files)."""
    return zipfile.is_zipfile(path)


def _refuse(path, message: str):
    raise ValueError(f"{path}: {message}")


def read_arrays(path) -> tuple[dict[str, np.ndarray], list[str]]:
    """The arrays of an authors' checkpoint, checked one by one (present, not a pickled
    object array, real-valued, finite), and the names of any other keys in the file
    (ignored). Their shapes are checked by `read_authors_checkpoint`."""
    if zipfile.is_zipfile(path):  # every member's CRC-32 first: no damaged value read
        try:
            with zipfile.ZipFile(path) as container:
                damaged = container.testzip()
        except ZIP_ERRORS as error:
            _refuse(path, f"not a readable .npz file ({error}).")
        if damaged is not None:
            _refuse(path, f"the array {damaged!r} is damaged (its CRC-32 does not match).")
    try:
        archive = np.load(path, allow_pickle=False)
    except ZIP_ERRORS + (ValueError,) as error:
        _refuse(path, f"not a readable .npz file ({error}).")
    if not hasattr(archive, "files"):  # a bare .npy
        _refuse(path, "a single .npy array, not an .npz of named arrays.")
    with archive:
        names = set(archive.files)
        missing = [key for key in REQUIRED_KEYS if key not in names]
        if missing:
            if not names & set(KEYS):
                _refuse(
                    path,
                    f"an .npz without the keys of the authors' {FILE_NAME} "
                    f"({', '.join(KEYS)}); its keys are {sorted(names)}.",
                )
            _refuse(
                path,
                f"missing key(s) {', '.join(missing)} of the authors' "
                f"{FILE_NAME} (from {REPOSITORY}).",
            )
        arrays = {}
        for key in KEYS:
            if key not in names:
                continue
            try:
                value = archive[key]
            except ValueError as error:
                if "allow_pickle" in str(error):  # object arrays need pickle: never loaded
                    _refuse(
                        path,
                        f"key {key!r} holds a pickled object array, which is "
                        f"never unpickled ({error}).",
                    )
                _refuse(path, f"key {key!r} cannot be read: the file is damaged ({error}).")
            except ZIP_ERRORS as error:
                _refuse(path, f"key {key!r} cannot be read: the file is damaged ({error}).")
            if not (
                np.issubdtype(value.dtype, np.floating) or np.issubdtype(value.dtype, np.integer)
            ):
                _refuse(path, f"key {key!r} has dtype {value.dtype}; expected real numbers.")
            if not np.all(np.isfinite(value)):
                bad = int(np.size(value) - np.count_nonzero(np.isfinite(value)))
                _refuse(path, f"key {key!r} holds {bad} NaN or infinite value(s).")
            arrays[key] = value
    return arrays, sorted(names - set(KEYS))


def _shapes(path, a: dict) -> dict:
    """The sizes `H, Y, D, K, P, p, N, side` implied by the arrays, every key checked
    against them."""

    def need(key, condition, expected):
        if not condition:
            _refuse(path, f"key {key!r} has shape {tuple(np.shape(a[key]))}; expected {expected}.")

    need("Wq", a["Wq"].ndim == 3 and min(a["Wq"].shape) >= 1, "[H, Y, D]")
    heads, head_dim, dim = a["Wq"].shape
    need("Wq", dim >= 2, "[H, Y, D] with D >= 2")
    need("Wk", a["Wk"].shape == a["Wq"].shape, f"[H, Y, D] = {a['Wq'].shape}, as Wq")
    need(
        "Xi",
        a["Xi"].ndim == 2 and a["Xi"].shape[0] == dim and a["Xi"].shape[1] >= 1,
        f"[D, M] with Wq's D = {dim}",
    )
    need("Wenc", a["Wenc"].ndim == 2 and a["Wenc"].shape[1] == dim, f"[P, D] with Wq's D = {dim}")
    patch_dim = a["Wenc"].shape[0]
    patch = math.isqrt(patch_dim // CHANNELS)
    need(
        "Wenc",
        patch_dim == CHANNELS * patch * patch and patch >= 1,
        "[P, D] with P = 3 p^2 (RGB patches of side p)",
    )
    for key, shape, text in (
        ("Benc", (dim,), "[D]"),
        ("Wdec", (dim, patch_dim), "[D, P]"),
        ("Bdec", (patch_dim,), "[P]"),
        ("LNORM_bias", (dim,), "[D]"),
        ("MASK_token", (dim,), "[D]"),
        ("CLS_token", (dim,), "[D]"),
    ):
        if key in a:
            need(key, a[key].shape == shape, f"{text} = {shape} (D from Wq, P from Wenc)")
    need("LNORM_gamma", np.size(a["LNORM_gamma"]) == 1, "a scalar")
    if not float(np.ravel(a["LNORM_gamma"])[0]) > 0:
        _refuse(
            path,
            f"key 'LNORM_gamma' is {float(np.ravel(a['LNORM_gamma'])[0])}; the "
            "energy LayerNorm needs a positive gamma.",
        )
    cls = int("CLS_token" in a)
    need(
        "POS_embed",
        a["POS_embed"].ndim == 2 and a["POS_embed"].shape[1] == dim,
        f"[{'1 + ' if cls else ''}N, D] with Wq's D = {dim}",
    )
    n_patches = a["POS_embed"].shape[0] - cls
    side = math.isqrt(max(n_patches, 0))
    need(
        "POS_embed",
        n_patches >= 1 and side * side == n_patches,
        f"{'1 (CLS) + ' if cls else ''}N rows, N = (image side / patch side)^2 a square "
        f"number of patches",
    )
    return dict(
        heads=heads,
        head_dim=head_dim,
        dim=dim,
        memories=a["Xi"].shape[1],
        patch_dim=patch_dim,
        patch=patch,
        n_patches=n_patches,
        side=side,
        cls=cls,
    )


def authors_config(
    *,
    image_size: int = 224,
    patch: int = 16,
    dim: int = 768,
    n_heads: int = 12,
    head_dim: int = 64,
    n_memories: int = 3072,
    cls_token: bool = True,
) -> TrainConfig:
    """The `TrainConfig` of an authors' model (defaults: the released ImageNet sizes,
    197 tokens): their architecture and pipeline (self-attention, beta = 1/sqrt(Y), ReLU
    memories, no context standardisation, channel-first patches, the double-LayerNorm
    decoder), the paper's dynamics (euler, dt0 0.1, t1 1.2, native flow, checkpoint
    adjoint), their masking (`round(100/196 N)` patches replaced by MASK, none left
    visible), and our held-out photos as evaluation data (`EVAL_IMAGES` of them)."""
    model = ImageModelConfig(
        image_size=image_size,
        patch=patch,
        channels=CHANNELS,
        dim=dim,
        n_heads=n_heads,
        head_dim=head_dim,
        n_memories=n_memories,
        beta=None,
        self_attention=True,
        hopfield="relu",
        tau=1.0,
        standardise_context=False,
        position_init="normal",
        cls_token=cls_token,
        patch_order="chw",
        decoder="layernorm_twice",
    )
    data = DataConfig(
        source="photos",
        mask_ratio=MASK_RATIO,
        mask_fraction=1.0,
        eval_images=EVAL_IMAGES,
        augment=False,
    )
    config = TrainConfig(
        model=model, dynamics=Dynamics(), data=data, training=TrainingConfig(seed=0)
    )
    return TrainConfig.from_dict(config.to_dict(), source="the authors' checkpoint")


def _dtype(arrays) -> np.dtype:
    """float64 when the file holds float64 arrays and JAX has x64 on; else float32 (the
    released file's)."""
    wide = np.result_type(*arrays.values()) == np.float64
    return np.dtype(np.float64 if wide and jax.config.read("jax_enable_x64") else np.float32)


def read_authors_checkpoint(path):
    """Read and check an authors' `.npz`.

    **Returns:** `(config, header, normalisation, parameters, dtype)`: the model's
    `TrainConfig` (`authors_config`), a header like a checkpoint's (kind `authors_npz`,
    the file's SHA-256, ignored keys, no training step or metrics), the ImageNet
    normalisation, the parameters by their attribute path in a `MaskedImageET`
    (`"encoder.weight"`, ...) as NumPy arrays of `dtype`, and `dtype`."""
    path = Path(path)
    arrays, ignored = read_arrays(path)
    sizes = _shapes(path, arrays)
    config = authors_config(
        image_size=sizes["side"] * sizes["patch"],
        patch=sizes["patch"],
        dim=sizes["dim"],
        n_heads=sizes["heads"],
        head_dim=sizes["head_dim"],
        n_memories=sizes["memories"],
        cls_token=bool(sizes["cls"]),
    )
    dtype = _dtype(arrays)
    a = {k: np.asarray(v, dtype) for k, v in arrays.items()}
    gamma = float(np.ravel(arrays["LNORM_gamma"])[0])
    cls = sizes["cls"]
    parameters = {
        "encoder.weight": a["Wenc"].T,
        "encoder.bias": a["Benc"],
        "positions": a["POS_embed"][cls:],
        "mask_token": a["MASK_token"],
        "core.norm.log_gamma": np.asarray(np.log(np.float64(gamma)), dtype),
        "core.norm.delta": a["LNORM_bias"],
        "core.attention.Wq": a["Wq"],
        "core.attention.Wk": a["Wk"],
        "core.hopfield.xi": a["Xi"].T,
        "decoder_norm.weight": np.full(sizes["dim"], gamma, dtype),
        "decoder_norm.bias": a["LNORM_bias"],
        "decoder.weight": a["Wdec"].T,
        "decoder.bias": a["Bdec"],
        "field_strength": np.zeros((), dtype),
    }
    if cls:  # the CLS token's start: its embedding plus its position (row 0)
        parameters["cls_token"] = a["CLS_token"] + a["POS_embed"][0]
    normalisation = ChannelNormalisation.imagenet()
    header = {
        "kind": "authors_npz",
        "source": f"{REPOSITORY}: {FILE_NAME} format",
        "path": str(path),
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "dtype": str(dtype),
        "ignored_keys": ignored,
        "step": None,
        "metrics": {},
        "config": config.to_dict(),
        "normalisation": normalisation.to_dict(),
    }
    return config, header, normalisation, parameters, dtype
