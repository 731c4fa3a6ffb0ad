"""What a `MaskedImageET` is (its architecture): the frozen dataclass that configs and
checkpoint headers hold (how its core is run, `Dynamics`, lives in `_dynamics`: the graph
models share it)."""

import dataclasses

from ..vocab import Activation

POSITION_INITS = ("normal", "sincos")
PATCH_ORDERS = ("hwc", "chw")
DECODERS = ("layernorm", "layernorm_twice")


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
    level.

    Three fields describe the authors' released ImageNet model (`MaskedImageET.load`
    of their `plaindict_ckpt.npz`); their defaults are our own models':

    - `cls_token`: a CLS token is prepended to the patch tokens; it takes part in the
      dynamics (attention, memories) and is dropped before decoding (default off).
    - `patch_order`: how the encoder's input and the decoder's output flatten one
      patch, `"hwc"` (ours: row, column, channel) or `"chw"` (the authors': channel
      first). The model's `patches`/`image` are `"hwc"` either way; the model reorders
      for its encoder and decoder.
    - `decoder`: `"layernorm"` (ours: the decoder's LayerNorm once, then affine) or
      `"layernorm_twice"`: the authors' released decoder applies its LayerNorm twice,
      `LN(LN(x)) W + b`, a bug of their code (DESIGN.md section 3) that their weights
      were trained with. Reproduced to load their file exactly; never for a new model
      (training refuses it)."""

    image_size: int = 32
    patch: int = 4
    channels: int = 3
    dim: int = 64
    n_heads: int = 4
    head_dim: int = 16
    n_memories: int = 256
    beta: float | None = None
    self_attention: bool = False
    hopfield: Activation = "relu"
    tau: float = 1.0
    init_std: float = 0.02
    standardise_context: bool = True
    position_init: str = "normal"
    cls_token: bool = False
    patch_order: str = "hwc"
    decoder: str = "layernorm"

    def __post_init__(self):
        for name, choices in (("position_init", POSITION_INITS),
                              ("patch_order", PATCH_ORDERS), ("decoder", DECODERS)):
            if getattr(self, name) not in choices:
                raise ValueError(
                    f"{name} must be one of {', '.join(choices)} "
                    f"(got {getattr(self, name)!r})."
                )
        if self.image_size % self.patch:
            raise ValueError(
                f"patch size {self.patch} does not divide image size {self.image_size}."
            )

    @property
    def n_patches(self) -> int:
        return (self.image_size // self.patch) ** 2

    @property
    def n_tokens(self) -> int:
        """Tokens the core runs on: the patches, plus one with `cls_token`."""
        return self.n_patches + int(self.cls_token)

    @property
    def patch_dim(self) -> int:
        return self.patch * self.patch * self.channels
