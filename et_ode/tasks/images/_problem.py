"""From photo files (or image arrays) to the problem the core integrates: `image_problem`
and the `ImageProblem` it returns, the path of the command line's jobs too."""

import os
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ...core import Conditions, EnergyTransformer
from ._config import TrainConfig
from ._data import _positive_int, folder_images, read_photos
from ._evaluate import EVAL_KEY, eval_masks, evaluation_masks
from ._model import MaskedImageET, load_model_and_config
from ._model import masked_mse as _masked_mse
from ._normalisation import check_images
from ._patches import Masking

FilePath = str | os.PathLike


class ImageProblem(eqx.Module):
    """The core's problem for a batch of `B` images, as `MaskedImageET.reconstruct`
    builds it: each image normalised by the model's data normalisation, cut into `N`
    patches of `P` values, standardised by the statistics of the patches it shows and
    encoded into `T` tokens of dimension `D` (`T = N`, or `N + 1` with a CLS token).

    Fields: `model`; `images [B, S, S, C]` in [0, 1] (as read, before normalisation);
    `masking` (`Masking`, `[B, N]` fields); `patches [B, N, P]` (normalised units, the
    units of the model's loss); `mean`, `std [B, 1, P]` (the context statistics);
    `x0 [B, T, D]` (the initial state); `args` (the `Conditions`, batched: every array
    field has the batch axis first); `names` (the files read: a folder's file names, or
    the paths as given; None for an array).

    The batch: `solvers.solve(problem.core, problem.x0, args=problem.args,
    args_batched=True, ...)`. One sample: `x0, args = problem.sample(i)` (`x0 [T, D]`,
    un-batched conditions), then `solvers.solve(problem.core, x0, args=args, ...)`.
    `decode`, `masked_mse` and `complete` read a solved state back as patches, their
    error and images.
    """

    model: MaskedImageET
    images: Float[Array, "B S S C"]
    masking: Masking
    patches: Float[Array, "B N P"]
    mean: Float[Array, "B 1 P"]
    std: Float[Array, "B 1 P"]
    x0: Float[Array, "B T D"]
    args: Conditions
    names: tuple[str, ...] | None = eqx.field(static=True, default=None)

    @property
    def core(self) -> EnergyTransformer:
        """The model's core: the energy `solvers.solve` integrates."""
        return self.model.core

    def _index(self, index: int) -> int:
        return range(len(self.x0))[index]  # an IndexError out of range (JAX would clip)

    def sample(self, index: int = 0) -> tuple[Float[Array, "T D"], Conditions]:
        """`(x0 [T, D], conditions)` of sample `index`: the un-batched problem of one
        image, for `solvers.solve(problem.core, x0, args=conditions, ...)`."""
        i = self._index(index)
        conditions = jax.tree.map(lambda leaf: leaf[i] if jnp.ndim(leaf) > 0 else leaf, self.args)
        return self.x0[i], conditions

    def decode(self, x: Float[Array, "*B T D"], index: int | None = None) -> Float[Array, "*B N P"]:
        """Core states as patches in normalised units, the context standardisation undone:
        `x [B, T, D]` -> `[B, N, P]` (the batch), or with `index`, the state `x [T, D]` of
        that sample -> `[N, P]`."""
        if index is None:
            return self.model.decode_batch(x, self.mean, self.std)
        i = self._index(index)
        return self.model.decode(x) * self.std[i] + self.mean[i]

    def _rows(self, index: int | None) -> slice:
        if index is None:
            return slice(None)
        i = self._index(index)
        return slice(i, i + 1)

    def masked_mse(self, x: Float[Array, "*B T D"], index: int | None = None) -> float:
        """The masked-patch MSE of the decoded states (over the occluded patches,
        normalised units, as the evaluation computes it): of the batch `x [B, T, D]`, or
        with `index`, of that sample's state `x [T, D]`."""
        rows = self._rows(index)
        prediction = self.decode(x, index).reshape(self.patches[rows].shape)
        return float(_masked_mse(prediction, self.patches[rows], self.masking.occluded[rows]))

    def complete(
        self, x: Float[Array, "*B T D"], index: int | None = None
    ) -> Float[Array, "*B S S C"]:
        """The completed images in [0, 1] units (occluded patches decoded from `x`, the
        rest as given; not clipped): `[B, S, S, C]` for `x [B, T, D]`, or with `index`,
        `[S, S, C]` for that sample's state `x [T, D]`."""
        rows = self._rows(index)
        prediction = self.decode(x, index).reshape(self.patches[rows].shape)
        occluded = self.masking.occluded[rows, :, None]
        merged = jnp.where(occluded, prediction, self.patches[rows])
        assert self.model.normalisation is not None  # `image_problem` refuses a model without
        images = self.model.normalisation.invert(jax.vmap(self.model.image)(merged))
        return images if index is None else images[0]


def image_problem(
    model: MaskedImageET | FilePath,
    images: FilePath | Sequence[FilePath] | Float[ArrayLike, "B S S C"],
    masks: Masking | None = None,
    *,
    seed: int = EVAL_KEY,
    config: TrainConfig | None = None,
    limit: int | None = None,
) -> ImageProblem:
    """The core's problem for your own images: photo files, a folder of photos, or an
    array, to the core, its initial state `x0` and its conditions, for the batch and for
    each sample (`ImageProblem.sample`).

    **Arguments:**

    - `model`: a `MaskedImageET`, or a name or path for `load_model_and_config` (a
      shipped model, `"paper"`, `"ode"`, a checkpoint, the authors' `.npz`).
    - `images`: a folder (its `.jpg`, `.jpeg` and `.png` files in name order), one image
      file, a sequence of image files (in their order), each read as `folder_images`
      reads it (upright by its EXIF orientation, RGB, centre-cropped to a square,
      resized to the model's `S x S`); or an array `[B, S, S, C]` of floats in [0, 1].
    - `masks`: a `Masking` with `[B, N]` fields (one per image) or `[N]` fields (the same
      for every image); None: the evaluation masks keyed by `seed` (the default seed
      gives the masks of `et-ode eval`), with the mask ratio and fraction of `config`
      (`eval_masks`), of the model's training config when `model` is a name or path, or
      else `evaluation_masks`' 0.5 and 0.9 (the paper's).
    - `limit`: keep the first `limit` images.

    **Returns:** an `ImageProblem`, in the model's dtype (cast it, say with
    `analysis.cast((problem.core, x0, args), jnp.float64)`, for float64). Raises
    `ValueError` for a path that is neither a folder nor a file, a file that is not an
    image, images of the wrong size or channels, or masks of the wrong shape.
    """
    if not isinstance(model, MaskedImageET):
        model, trained, _ = load_model_and_config(model)
        config = trained if config is None else config
    if model.normalisation is None:  # as `MaskedImageET.complete` refuses it
        raise ValueError("this model has no data normalisation: load a trained model.")
    pixels, names = _read(images, model.config.image_size, limit)
    check_images(
        pixels, size=model.config.image_size, channels=model.config.channels, unit_range=True
    )
    masking = _masking(model, config, masks, len(pixels), seed)
    patches = jax.vmap(model.patches)(jnp.asarray(model.normalisation.apply(pixels)))
    x0, args, mean, std = model.encode_batch(patches, masking)
    return ImageProblem(model, jnp.asarray(pixels), masking, patches, mean, std, x0, args, names)


def _read(images, size: int, limit: int | None):
    """`(pixels [B, S, S, C], names)` of a folder, a file, files, or an array."""
    if limit is not None:
        limit = _positive_int(limit, "limit")
    if isinstance(images, (str, os.PathLike)):
        if os.path.isdir(images):
            pixels, names = folder_images(images, size, limit=limit)
            return pixels, tuple(names)
        paths = [images]
    elif isinstance(images, (list, tuple)) and all(
        isinstance(p, (str, os.PathLike)) for p in images
    ):
        paths = list(images)
        if not paths:
            raise ValueError("no image files given: pass a folder, files or an array.")
    else:
        return np.asarray(images)[:limit], None
    files = [str(os.fspath(p)) for p in paths[:limit]]
    for path in files:
        if not os.path.isfile(path):
            raise ValueError(f"{path} is neither a folder nor an image file.")
    return read_photos(files, size), tuple(files)


def _masking(model, config, masks, n_images: int, seed: int) -> Masking:
    """The masks of `n_images` images: given (`[N]` fields broadcast), or the
    evaluation's."""
    n_patches = model.config.n_patches
    if masks is None:
        if config is None:
            return evaluation_masks(n_patches, n_images, seed)
        if config.model.n_patches != n_patches:
            raise ValueError(
                f"config has {config.model.n_patches} patches per image, the model {n_patches}."
            )
        return eval_masks(config, n_images, seed)
    shape = tuple(jnp.shape(masks.occluded))
    if shape == (n_patches,):
        return jax.tree.map(lambda a: jnp.broadcast_to(a, (n_images, n_patches)), masks)
    if shape != (n_images, n_patches):
        raise ValueError(
            f"masks must have [N] = [{n_patches}] fields (the same for every image) or "
            f"[B, N] = [{n_images}, {n_patches}] (one per image); got {list(shape)}."
        )
    return masks
