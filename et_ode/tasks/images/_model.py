"""`MaskedImageET`: masked image completion with an Energy Transformer core."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, PRNGKeyArray

from et_ode import solvers

from ...core import Conditions, EnergyTransformer
from .._checkpoint import fill, read_checkpoint
from .._dynamics import Dynamics, solve_keywords
from .._zoo import resolve_model_path
from ._authors import is_npz, read_authors_checkpoint
from ._config import TrainConfig, config_from_header
from ._normalisation import ChannelNormalisation, check_images
from ._patches import Masking, patchify, unpatchify
from ._spec import ImageModelConfig


def sincos_positions(side: int, dim: int) -> Float[Array, "N D"]:
    """2-D sine-cosine position codes for a `side x side` grid of patches, row-major:
    a quarter of the `dim` channels each for sin and cos of the row and of the column,
    at geometrically spaced frequencies (period 2 pi to about 2 pi side)."""
    if dim % 4:
        raise ValueError(f"sincos positions need dim divisible by 4 (got {dim}).")
    n_freq = dim // 4
    freqs = side ** (-jnp.arange(n_freq) / max(n_freq - 1, 1))
    rows, cols = jnp.meshgrid(jnp.arange(side), jnp.arange(side), indexing="ij")
    angles = [a.reshape(-1, 1) * freqs for a in (rows, cols)]
    return jnp.concatenate([f(a) for a in angles for f in (jnp.sin, jnp.cos)], axis=1)


class MaskedImageET(eqx.Module):
    """Encoder (affine, patch -> D) + position embedding + MASK token (+ an optional
    CLS token), an `EnergyTransformer` core run by `solvers.solve`, and a decoder (its
    own LayerNorm, then affine D -> patch) applied once to the final tokens.

    Images are `[H, W, C]` float arrays in normalised units (see the data
    normalisation stored with a trained model); `complete` takes them in [0, 1].
    The authors' released ImageNet model loads as one of these
    (`MaskedImageET.load("plaindict_ckpt.npz")`): a CLS token, channel-first patch
    flattening, the ImageNet normalisation and their double-LayerNorm decoder (see
    `ImageModelConfig`).
    """

    encoder: eqx.nn.Linear
    positions: Float[Array, "N D"]
    mask_token: Float[Array, " D"]
    cls_token: Float[Array, " D"] | None  # the CLS token's start, position included
    core: EnergyTransformer
    decoder_norm: eqx.nn.LayerNorm
    decoder: eqx.nn.Linear
    field_strength: Float[Array, ""]
    config: ImageModelConfig = eqx.field(static=True)
    dynamics: Dynamics = eqx.field(static=True)
    normalisation: ChannelNormalisation | None = eqx.field(static=True)

    def __init__(
        self,
        config: ImageModelConfig,
        dynamics: Dynamics = Dynamics(),
        *,
        key: PRNGKeyArray,
        normalisation: ChannelNormalisation | None = None,
    ):
        k_enc, k_pos, k_mask, k_core, k_dec = jax.random.split(key, 5)
        dim, std = config.dim, config.init_std
        dtype = jnp.float32  # also under jax_enable_x64, so that checkpoints always fit
        self.encoder = eqx.nn.Linear(config.patch_dim, dim, key=k_enc, dtype=dtype)
        if config.position_init == "sincos":
            side = config.image_size // config.patch
            self.positions = sincos_positions(side, dim).astype(dtype)
        else:
            self.positions = std * jax.random.normal(k_pos, (config.n_patches, dim), dtype)
        self.mask_token = std * jax.random.normal(k_mask, (dim,), dtype)
        self.cls_token = (
            std * jax.random.normal(jax.random.fold_in(k_mask, 1), (dim,), dtype)
            if config.cls_token
            else None
        )
        self.core = EnergyTransformer(
            dim,
            config.n_heads,
            config.head_dim,
            config.n_memories,
            key=k_core,
            beta=config.beta,
            self_attention=config.self_attention,
            hopfield=config.hopfield,
            tau=config.tau,
            init_std=std,
            dtype=dtype,
        )
        self.decoder_norm = eqx.nn.LayerNorm(dim, dtype=dtype)
        self.decoder = eqx.nn.Linear(dim, config.patch_dim, key=k_dec, dtype=dtype)
        if config.standardise_context:  # untrained, the model is exactly the mean fill
            self.decoder = eqx.tree_at(
                lambda d: (d.weight, d.bias), self.decoder, replace_fn=jnp.zeros_like
            )
        self.field_strength = jnp.asarray(1.0 if dynamics.external_field else 0.0, jnp.float32)
        self.config = config
        self.dynamics = dynamics
        self.normalisation = normalisation  # ChannelNormalisation of the training data

    @classmethod
    def load(cls, name_or_path) -> "MaskedImageET":
        """A trained model: a shipped one by name (`"paper"`, `"ode"`), a checkpoint
        file written by `et-ode train`, or the authors' released ImageNet model, their
        `plaindict_ckpt.npz` (recognised by its keys; see `et_ode.tasks` and the how-to
        page "The authors' ImageNet model"): ready to run as they ran it (ImageNet
        normalisation, 224 x 224 images, 16 x 16 patches, a CLS token, 100 of 196
        patches masked, 12 Euler steps of 0.1)."""
        return load_model_and_config(name_or_path)[0]

    # ------------------------------------------------------------ pieces
    # Behind `eqx.filter_jit`, as the core's methods: one compiled program per method and
    # shape when called outside `jax.jit` (the command line, the studies), not one per
    # operation.
    @eqx.filter_jit
    def patches(self, image: Float[Array, "H W C"]) -> Float[Array, "N P"]:
        """`image [H, W, C]` -> its patches `[N, P]` (row-major, each flattened `(h, w, c)`
        whatever the encoder's own `patch_order`)."""
        return patchify(image, self.config.patch)

    @eqx.filter_jit
    def image(self, patches: Float[Array, "N P"]) -> Float[Array, "H W C"]:
        """Patches `[N, P]` -> the image `[H, W, C]` (inverse of `patches`)."""
        return unpatchify(patches, self.config.image_size, self.config.patch, self.config.channels)

    def _patch_order(self, patches, to_model: bool):
        """Patches `[..., P]` between the `(h, w, c)` flattening of `patches` and the
        encoder's/decoder's `config.patch_order`."""
        if self.config.patch_order == "hwc":
            return patches
        p, c = self.config.patch, self.config.channels
        lead = patches.shape[:-1]
        if to_model:  # (h, w, c) -> (c, h, w)
            return jnp.moveaxis(patches.reshape(lead + (p, p, c)), -1, -3).reshape(patches.shape)
        return jnp.moveaxis(patches.reshape(lead + (c, p, p)), -3, -1).reshape(patches.shape)

    def token_mask(self, mask: Bool[Array, "*batch N"]) -> Bool[Array, "*batch T"]:
        """A per-patch mask `[..., N]` (e.g. `masking.replaced`) as a per-token one
        `[..., T]` for the core's tokens: False for the CLS token, if any."""
        if self.cls_token is None:
            return mask
        return jnp.concatenate([jnp.zeros(mask.shape[:-1] + (1,), bool), mask], axis=-1)

    @eqx.filter_jit
    def encode(self, patches: Float[Array, "N P"], masking: Masking):
        """Initial tokens `x0: [T, D]` and the `Conditions` of the dynamics: a patch's
        token is its encoded content, or MASK where `masking.replaced`, plus its
        position; with a CLS token, `T = N + 1` and the CLS token comes first (it is
        never clamped)."""
        content = jax.vmap(self.encoder)(self._patch_order(patches, to_model=True))
        tokens = jnp.where(masking.replaced[:, None], self.mask_token, content) + self.positions
        if self.cls_token is not None:
            tokens = jnp.concatenate([self.cls_token[None], tokens])
        field = tokens if self.dynamics.external_field else None
        clamped = self.token_mask(~masking.replaced) if self.dynamics.clamp_visible else None
        return tokens, Conditions(clamped=clamped, field=field, field_strength=self.field_strength)

    def decode_token(self, token: Float[Array, " D"]) -> Float[Array, " P"]:
        """One core state `[D]` -> a patch `[P]` (`(h, w, c)` flattening): the decoder's
        LayerNorm (twice for the authors' `decoder = "layernorm_twice"`), then affine.
        Decodes any vector of the token space, memories included."""
        normed = self.decoder_norm(token)
        if self.config.decoder == "layernorm_twice":
            normed = self.decoder_norm(normed)
        return self._patch_order(self.decoder(normed), to_model=False)

    @eqx.filter_jit
    def decode(self, tokens: Float[Array, "T D"]) -> Float[Array, "N P"]:
        """Core states `[T, D]` -> patches `[N, P]`: the CLS token, if any, dropped;
        each patch token through `decode_token`."""
        if self.cls_token is not None:
            tokens = tokens[1:]
        return jax.vmap(self.decode_token)(tokens)

    # ------------------------------------------------------------ forward
    def context_statistics(self, patches: Float[Array, "N P"], masking: Masking):
        """Per-channel mean and standard deviation (floored at 0.05) of the patches the
        model sees, each `[P]` (tiled over the pixels of a patch); zeros and ones without
        `standardise_context`."""
        if not self.config.standardise_context:
            # in the patches' dtype: a float64 default under x64 would make a float32
            # model's loss float64 and break the backsolve and implicit adjoints' VJPs
            return (
                jnp.zeros(patches.shape[1:], patches.dtype),
                jnp.ones(patches.shape[1:], patches.dtype),
            )
        channels = self.config.channels
        pixels = patches.reshape(patches.shape[0], -1, channels)
        seen = ~masking.replaced[:, None, None]
        count = jnp.maximum(jnp.sum(seen) * pixels.shape[1], 1)
        mean = jnp.sum(jnp.where(seen, pixels, 0.0), axis=(0, 1)) / count
        var = jnp.sum(jnp.where(seen, (pixels - mean) ** 2, 0.0), axis=(0, 1)) / count
        std = jnp.maximum(jnp.sqrt(var), 0.05)
        tile = patches.shape[1] // channels
        return jnp.tile(mean, tile), jnp.tile(std, tile)

    @eqx.filter_jit
    def encode_batch(self, patches: Float[Array, "B N P"], masking: Masking):
        """The core's initial state for a batch, as `reconstruct` builds it: each image
        standardised by the statistics of the patches it shows, then encoded.

        **Arguments:** `patches: [B, N, P]` (normalised units), `masking` with `[B, N]`
        fields.

        **Returns:** `(x0 [B, T, D], conditions, mean [B, 1, P], std [B, 1, P])` (`T = N`,
        or `N + 1` with a CLS token), where `decode_batch(x, mean, std)` maps core states
        back to patches.
        """
        mean, std = jax.vmap(self.context_statistics)(patches, masking)
        mean, std = mean[:, None], std[:, None]
        x0, conditions = jax.vmap(self.encode)((patches - mean) / std, masking)
        return x0, conditions, mean, std

    @eqx.filter_jit
    def decode_batch(self, x: Float[Array, "B T D"], mean, std) -> Float[Array, "B N P"]:
        """Patches `[B, N, P]` (normalised units) from core states `x: [B, T, D]` (with a
        CLS token, `T = N + 1`) and the context statistics `encode_batch` returned."""
        return jax.vmap(self.decode)(x) * std + mean

    def reconstruct(
        self,
        patches,
        masking: Masking,
        *,
        options: solvers.SolveOptions | None = None,
        **overrides,
    ):
        """Run the dynamics on a batch and decode the end state.

        **Arguments:** `patches: [B, N, P]`, `masking` with `[B, N]` fields;
        `options`: a `solvers.SolveOptions` that replaces the solver, step, tolerances,
        cap and flow of `self.dynamics` (None: the dynamics' own), its `max_steps` taken
        as given (`options.covering(0, t1)` is a cap that reaches `t1`); `overrides`: any
        other `solvers.solve` keyword replacing the dynamics' (e.g. `t1=12.0`,
        `adjoint="checkpoint"`, `stop=None`, `throw=False`), and without `options` the
        solver's keywords too, a stored `max_steps` too small for a longer
        constant-step horizon then raised to its step count. A field of `options` given
        as a keyword too is refused.

        **Returns:** `(reconstruction [B, N, P], solution)`.
        """
        x0, conditions, mean, std = self.encode_batch(patches, masking)
        keywords = solve_keywords(self.dynamics, options, overrides)
        if options is None and "max_steps" not in overrides and keywords["max_steps"] is not None:
            needed = solvers.constant_step_count(
                keywords.get("t0", 0.0),
                keywords["t1"],
                keywords["dt0"],
                keywords["rtol"],
                keywords["atol"],
            )
            keywords["max_steps"] = max(int(keywords["max_steps"]), needed or 0)
        sol = solvers.solve(self.core, x0, args=conditions, args_batched=True, **keywords)
        return self.decode_batch(sol.x_final, mean, std), sol

    def complete(
        self,
        images,
        masking: Masking,
        *,
        options: solvers.SolveOptions | None = None,
        **overrides,
    ):
        """Masked image completion for users.

        **Arguments:** `images: [B, H, W, C]`, floats in [0, 1] or `uint8` pixels 0..255
        (converted here: divided by 255; other integer dtypes are refused), checked:
        size, channels, finite values in range (0..255 floats are refused, not
        guessed); `masking` with `[B, N]` fields; `options` and `overrides` as in
        `reconstruct`.

        **Returns:** the completed images `[B, H, W, C]` in [0, 1] units (occluded
        patches predicted, the rest as given; predictions are not clipped) and the
        solution of the dynamics.
        """
        if not hasattr(images, "dtype"):
            images = np.asarray(images)
        dtype = np.dtype(images.dtype)
        if np.issubdtype(dtype, np.integer) and dtype != np.uint8:
            raise ValueError(
                f"integer images must be uint8 (0..255), got {dtype}; convert "
                "them, or pass floats in [0, 1]."
            )
        if dtype == np.uint8:
            check_images(images, size=self.config.image_size, channels=self.config.channels)
            images = jnp.asarray(images, self.positions.dtype) / 255.0
        else:
            check_images(
                images, size=self.config.image_size, channels=self.config.channels, unit_range=True
            )
        if self.normalisation is None:
            raise ValueError("this model has no data normalisation: load a trained model.")
        normalised = jnp.asarray(self.normalisation.apply(images))
        patches = jax.vmap(self.patches)(normalised)
        reconstruction, sol = self.reconstruct(patches, masking, options=options, **overrides)
        merged = jnp.where(masking.occluded[..., None], reconstruction, patches)
        completed = self.normalisation.invert(jax.vmap(self.image)(merged))
        return completed, sol

    def loss(
        self,
        patches,
        masking: Masking,
        *,
        options: solvers.SolveOptions | None = None,
        **overrides,
    ) -> Float[Array, ""]:
        """MSE over all occluded patches of the batch (normalised pixel units); `options`
        and `overrides` as in `reconstruct`."""
        reconstruction, _ = self.reconstruct(patches, masking, options=options, **overrides)
        return masked_mse(reconstruction, patches, masking.occluded)


def masked_mse(prediction, target, occluded) -> Float[Array, ""]:
    """Mean squared error over occluded patches: `[B, N, P]` arrays, `[B, N]` mask."""
    err = jnp.mean((prediction - target) ** 2, axis=-1)
    return jnp.sum(jnp.where(occluded, err, 0.0)) / jnp.maximum(jnp.sum(occluded), 1)


def load_model_and_config(name_or_path) -> tuple[MaskedImageET, TrainConfig, dict]:
    """`(model, train_config, header)` of a shipped model name (`"paper"`, `"ode"`), a
    checkpoint file written by `et-ode train` / `et-ode export` (training or model-only),
    or the authors' `plaindict_ckpt.npz` (any `.npz` is read as one: see
    `et_ode.tasks._authors`; its `train_config` describes their pipeline and masking,
    with our held-out photos as evaluation data, and its header has kind
    `"authors_npz"`, the file's SHA-256, and no training step).

    The model is built from the config by shapes only (initialising the
    parameters just to overwrite them costs seconds) and filled from the file."""
    path = resolve_model_path(name_or_path)
    if is_npz(path):
        config, header, normalisation, parameters, dtype = read_authors_checkpoint(path)
        skeleton = eqx.filter_eval_shape(
            MaskedImageET,
            config.model,
            config.dynamics,
            key=jax.random.key(0),
            normalisation=normalisation,
        )
        return _with_parameters(skeleton, parameters, dtype, path), config, header
    header, blobs = read_checkpoint(path)
    config = config_from_header(header, path)
    normalisation = ChannelNormalisation.from_dict(header["normalisation"])
    skeleton = eqx.filter_eval_shape(
        MaskedImageET,
        config.model,
        config.dynamics,
        key=jax.random.key(0),
        normalisation=normalisation,
    )
    return fill(skeleton, blobs[0], path), config, header


def _with_parameters(skeleton, parameters: dict, dtype, path):
    """`skeleton` (a model of `jax.ShapeDtypeStruct` leaves) with every leaf replaced by
    `parameters[name]` (names: attribute paths such as `"core.attention.Wq"`), in
    `dtype`; each shape checked, no leaf left out and no name unused."""
    leaves, treedef = jax.tree_util.tree_flatten_with_path(skeleton)
    names = [".".join(getattr(k, "name", str(k)) for k in key_path) for key_path, _ in leaves]
    if sorted(names) != sorted(parameters):
        raise ValueError(
            f"{path}: the model's parameters {sorted(names)} and those read "
            f"{sorted(parameters)} differ."
        )
    values = []
    for name, (_, leaf) in zip(names, leaves):
        value = np.asarray(parameters[name])
        if value.shape != leaf.shape:
            raise ValueError(
                f"{path}: {name} has shape {value.shape}, the model needs {leaf.shape}."
            )
        values.append(jnp.asarray(value, dtype))
    return jax.tree_util.tree_unflatten(treedef, values)
