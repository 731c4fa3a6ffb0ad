"""`MaskedImageET`: masked image completion with an Energy Transformer core."""

import dataclasses
import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

import solvers

from ._conditions import Conditions
from ._model import EnergyTransformer
from ._patches import Masking, patchify, unpatchify


@dataclasses.dataclass(frozen=True)
class Dynamics:
    """How the core is run: a `solvers.solve` configuration plus the conditions.

    - `solver`, `dt0`, `t1`, `rtol`, `atol`, `flow`, `adjoint`, `max_steps`: as in
      `solvers.solve`. The paper: euler, dt0 0.1, t1 1.2, native, checkpoint.
    - `fixed_point_atol`: if set, stop at RMS(G) below it (then `t1` is the cap).
    - `clamp_visible`: tokens that show image content (not replaced by MASK) do not move.
    - `external_field`: add `E_ext = -lambda sum_A c_A . g_A` with `c` the encoded
      tokens (MASK plus position for masked ones), `lambda` learnable.
    """

    solver: str = "euler"
    dt0: float | None = 0.1
    t1: float = 1.2
    rtol: float | None = None
    atol: float | None = None
    flow: str = "native"
    adjoint: str = "checkpoint"
    max_steps: int = 4096
    fixed_point_atol: float | None = None
    clamp_visible: bool = False
    external_field: bool = False

    def solve_options(self) -> dict:
        options = dict(solver=self.solver, dt0=self.dt0, t1=self.t1, rtol=self.rtol,
                       atol=self.atol, flow=self.flow, adjoint=self.adjoint,
                       max_steps=self.max_steps)
        if self.fixed_point_atol is not None:
            options["stop"] = solvers.FixedPointStop(atol=self.fixed_point_atol)
        return options


POSITION_INITS = ("normal", "sincos")


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


@dataclasses.dataclass(frozen=True)
class ImageModelConfig:
    """Architecture of a `MaskedImageET`: image side, patch side, channels, the core
    (`dim`, `n_heads`, `head_dim`, `n_memories`, `beta`, `self_attention`, `hopfield`,
    `tau`, `init_std`), `position_init` (`"normal"`: N(0, init_std^2), the paper's;
    `"sincos"`: a 2-D sine-cosine grid of unit-order values, so that attention can find
    a token's neighbours from the first step; learnable either way), and
    `standardise_context`: express each image per channel in
    units of the mean and standard deviation of the patches the model sees (those not
    replaced by MASK) before encoding, and undo it after decoding. A zero prediction is
    then the mean fill, and the model learns structure rather than each scene's colour
    level."""

    image_size: int = 32
    patch: int = 4
    channels: int = 3
    dim: int = 64
    n_heads: int = 4
    head_dim: int = 16
    n_memories: int = 256
    beta: float | None = None
    self_attention: bool = False
    hopfield: str = "relu"
    tau: float = 1.0
    init_std: float = 0.02
    standardise_context: bool = True
    position_init: str = "normal"


    def __post_init__(self):
        if self.position_init not in POSITION_INITS:
            raise ValueError(
                f"position_init must be one of {', '.join(POSITION_INITS)} "
                f"(got {self.position_init!r})."
            )
        if self.image_size % self.patch:
            raise ValueError(
                f"patch size {self.patch} does not divide image size {self.image_size}."
            )

    @property
    def n_patches(self) -> int:
        return (self.image_size // self.patch) ** 2

    @property
    def patch_dim(self) -> int:
        return self.patch * self.patch * self.channels


class MaskedImageET(eqx.Module):
    """Encoder (affine, patch -> D) + position embedding + MASK token, an
    `EnergyTransformer` core run by `solvers.solve`, and a decoder (its own LayerNorm,
    then affine D -> patch) applied once to the final tokens.

    Images are `[H, W, C]` float arrays in normalised units (see the data
    normalisation stored with a trained model).
    """

    encoder: eqx.nn.Linear
    positions: Float[Array, "N D"]
    mask_token: Float[Array, " D"]
    core: EnergyTransformer
    decoder_norm: eqx.nn.LayerNorm
    decoder: eqx.nn.Linear
    field_strength: Float[Array, ""]
    config: ImageModelConfig = eqx.field(static=True)
    dynamics: Dynamics = eqx.field(static=True)
    normalisation: object = eqx.field(static=True)

    def __init__(self, config: ImageModelConfig, dynamics: Dynamics = Dynamics(), *,
                 key: PRNGKeyArray, normalisation=None):
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
        self.core = EnergyTransformer(
            dim, config.n_heads, config.head_dim, config.n_memories, key=k_core,
            beta=config.beta, self_attention=config.self_attention,
            hopfield=config.hopfield, tau=config.tau, init_std=std, dtype=dtype,
        )
        self.decoder_norm = eqx.nn.LayerNorm(dim, dtype=dtype)
        self.decoder = eqx.nn.Linear(dim, config.patch_dim, key=k_dec, dtype=dtype)
        if config.standardise_context:  # untrained, the model is exactly the mean fill
            self.decoder = eqx.tree_at(
                lambda d: (d.weight, d.bias), self.decoder,
                (jnp.zeros_like(self.decoder.weight), jnp.zeros_like(self.decoder.bias)),
            )
        self.field_strength = jnp.asarray(1.0 if dynamics.external_field else 0.0, jnp.float32)
        self.config = config
        self.dynamics = dynamics
        self.normalisation = normalisation  # ChannelNormalisation of the training data

    @classmethod
    def load(cls, name_or_path) -> "MaskedImageET":
        """A trained model: a shipped one by name (`"paper"`, `"ode"`) or a checkpoint
        file written by `et-ode train`."""
        from ._zoo import load_model

        return load_model(name_or_path)

    # ------------------------------------------------------------ pieces
    def patches(self, image: Float[Array, "H W C"]) -> Float[Array, "N P"]:
        return patchify(image, self.config.patch)

    def image(self, patches: Float[Array, "N P"]) -> Float[Array, "H W C"]:
        return unpatchify(patches, self.config.image_size, self.config.patch, self.config.channels)

    def encode(self, patches: Float[Array, "N P"], masking: Masking):
        """Initial tokens `x0: [N, D]` and the `Conditions` of the dynamics."""
        content = jax.vmap(self.encoder)(patches)
        tokens = jnp.where(masking.replaced[:, None], self.mask_token, content) + self.positions
        field = tokens if self.dynamics.external_field else None
        clamped = ~masking.replaced if self.dynamics.clamp_visible else None
        return tokens, Conditions(clamped=clamped, field=field,
                                  field_strength=self.field_strength)

    def decode(self, tokens: Float[Array, "N D"]) -> Float[Array, "N P"]:
        return jax.vmap(lambda t: self.decoder(self.decoder_norm(t)))(tokens)

    # ------------------------------------------------------------ forward
    def context_statistics(self, patches: Float[Array, "N P"], masking: Masking):
        """Per-channel mean and standard deviation (floored at 0.05) of the patches the
        model sees, each `[P]` (tiled over the pixels of a patch); zeros and ones without
        `standardise_context`."""
        if not self.config.standardise_context:
            return jnp.zeros(patches.shape[1:]), jnp.ones(patches.shape[1:])
        channels = self.config.channels
        pixels = patches.reshape(patches.shape[0], -1, channels)
        seen = ~masking.replaced[:, None, None]
        count = jnp.maximum(jnp.sum(seen) * pixels.shape[1], 1)
        mean = jnp.sum(jnp.where(seen, pixels, 0.0), axis=(0, 1)) / count
        var = jnp.sum(jnp.where(seen, (pixels - mean) ** 2, 0.0), axis=(0, 1)) / count
        std = jnp.maximum(jnp.sqrt(var), 0.05)
        tile = patches.shape[1] // channels
        return jnp.tile(mean, tile), jnp.tile(std, tile)

    def reconstruct(self, patches, masking: Masking, **overrides):
        """Run the dynamics on a batch and decode the end state.

        **Arguments:** `patches: [B, N, P]`, `masking` with `[B, N]` fields, and any
        `solvers.solve` options overriding `self.dynamics` (e.g. `t1=12.0`).

        **Returns:** `(reconstruction [B, N, P], solution)`.
        """
        mean, std = jax.vmap(self.context_statistics)(patches, masking)
        mean, std = mean[:, None], std[:, None]
        x0, conditions = jax.vmap(self.encode)((patches - mean) / std, masking)
        options = self.dynamics.solve_options() | overrides
        if "max_steps" not in overrides and options["rtol"] is None and options["dt0"]:
            # A longer constant-step horizon than trained for needs more steps.
            needed = math.ceil(float(options["t1"]) / float(options["dt0"]) * (1 + 1e-9)) + 1
            options["max_steps"] = max(int(options["max_steps"]), needed)
        sol = solvers.solve(self.core, x0, args=conditions, args_batched=True, **options)
        return jax.vmap(self.decode)(sol.x_final) * std + mean, sol

    def complete(self, images, masking: Masking, **overrides):
        """Masked image completion for users: `images: [B, H, W, C]` in [0, 1] (checked:
        size, channels, finite values), `masking` with `[B, N]` fields. Returns the
        completed images `[B, H, W, C]` in [0, 1] units (occluded patches predicted,
        the rest as given) and the solution of the dynamics."""
        from ._data import check_images

        check_images(images, size=self.config.image_size, channels=self.config.channels)
        if self.normalisation is None:
            raise ValueError("this model has no data normalisation: load a trained model.")
        normalised = jnp.asarray(self.normalisation.apply(images))
        patches = jax.vmap(self.patches)(normalised)
        reconstruction, sol = self.reconstruct(patches, masking, **overrides)
        merged = jnp.where(masking.occluded[..., None], reconstruction, patches)
        completed = self.normalisation.invert(jax.vmap(self.image)(merged))
        return completed, sol

    def loss(self, patches, masking: Masking, **overrides) -> Float[Array, ""]:
        """MSE over all occluded patches of the batch (normalised pixel units)."""
        reconstruction, _ = self.reconstruct(patches, masking, **overrides)
        return masked_mse(reconstruction, patches, masking.occluded)


def masked_mse(prediction, target, occluded) -> Float[Array, ""]:
    """Mean squared error over occluded patches: `[B, N, P]` arrays, `[B, N]` mask."""
    err = jnp.mean((prediction - target) ** 2, axis=-1)
    return jnp.sum(jnp.where(occluded, err, 0.0)) / jnp.maximum(jnp.sum(occluded), 1)
