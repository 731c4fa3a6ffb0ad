"""What a `MaskedImageET` is (its architecture): the frozen dataclass that configs and
checkpoint headers hold (how its core is run, `Dynamics`, lives in `_dynamics`: the graph
models share it)."""

from typing import Annotated, Literal, get_args

from pydantic import Field

from .._core_spec import (
    Beta,
    HeadDim,
    Heads,
    HopfieldActivation,
    InitStd,
    Memories,
    Tau,
    TokenDim,
)
from .._schema import config_section

PositionInit = Literal["normal", "sincos"]
PatchOrder = Literal["hwc", "chw"]
Decoder = Literal["layernorm", "layernorm_twice"]
POSITION_INITS = get_args(PositionInit)
PATCH_ORDERS = get_args(PatchOrder)
DECODERS = get_args(Decoder)
# Limits beyond which a model cannot be built or run on one accelerator: attention is
# dense over the tokens (an [N, N] matrix per head and image); the authors' ImageNet
# model has 224-pixel images and 196 patches.
MAX_IMAGE_SIZE = 1024
MAX_PATCHES = 4096


@config_section
class ImageModelConfig:
    """Architecture of a `MaskedImageET` (the `[model]` section of an image config).

    Three fields describe the authors' released ImageNet model (`MaskedImageET.load` of
    their `plaindict_ckpt.npz`); their defaults are our own models': `cls_token`,
    `patch_order` (the model's `patches`/`image` are `"hwc"` either way; it reorders for
    its encoder and decoder) and `decoder` (`"layernorm_twice"`: their decoder applies
    its LayerNorm twice, `LN(LN(x)) W + b`, a bug of their code (docs: the authors' checkpoint)
    that their weights were trained with; reproduced to load their file exactly, never
    for a new model: training refuses it)."""

    image_size: Annotated[
        int,
        Field(
            ge=1, le=MAX_IMAGE_SIZE, description=(f"image side (pixels), at most {MAX_IMAGE_SIZE}")
        ),
    ] = 32
    patch: Annotated[
        int,
        Field(
            ge=1,
            le=MAX_IMAGE_SIZE,
            description=(
                f"patch side (pixels); divides image_size, into at most {MAX_PATCHES} patches"
            ),
        ),
    ] = 4
    channels: Annotated[Literal[1, 3], Field(description="1 (grey) or 3 (RGB)")] = 3
    dim: TokenDim = 64
    n_heads: Heads = 4
    head_dim: HeadDim = 16
    n_memories: Memories = 256
    beta: Beta = None
    self_attention: Annotated[bool, Field(description=("a token also attends to its own key"))] = (
        False
    )
    hopfield: HopfieldActivation = "relu"
    tau: Tau = 1.0
    init_std: InitStd = 0.02
    standardise_context: Annotated[
        bool,
        Field(
            description=(
                "express each image per channel in units of the mean and standard deviation of "
                "the patches the model sees before encoding, and undo it after decoding (a zero "
                "prediction is then the mean fill)"
            )
        ),
    ] = True
    position_init: Annotated[
        PositionInit,
        Field(
            description=(
                "sincos (default): a 2-D sine-cosine grid of unit-order values (attention can "
                "find a token's neighbours from the first step); normal: N(0, init_std^2), the "
                "paper's, with which every training run here stalled at the mean fill; learnable "
                "either way"
            )
        ),
    ] = "sincos"
    cls_token: Annotated[
        bool,
        Field(
            description=(
                "a CLS token prepended to the patch tokens, in the dynamics, dropped before "
                "decoding (the authors' model)"
            )
        ),
    ] = False
    patch_order: Annotated[
        PatchOrder,
        Field(
            description=(
                "how the encoder's input and decoder's output flatten a patch: hwc (ours) or "
                "chw (the authors': channel first)"
            )
        ),
    ] = "hwc"
    decoder: Annotated[
        Decoder,
        Field(
            description=(
                "layernorm (ours) or layernorm_twice (the authors' released decoder; loading "
                "their file only)"
            )
        ),
    ] = "layernorm"

    def __post_init__(self):
        if self.image_size % self.patch:
            raise ValueError(
                f"patch size {self.patch} does not divide image size {self.image_size}."
            )
        if self.n_patches > MAX_PATCHES:
            raise ValueError(
                f"image_size {self.image_size} with patch {self.patch} makes "
                f"{self.n_patches} patches, above the limit of {MAX_PATCHES} (dense "
                f"attention over them): use a patch of {_smallest_patch(self.image_size)} "
                "pixels or more (dividing image_size), or a smaller image_size."
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


def _smallest_patch(image_size: int) -> int:
    """The smallest patch size that divides `image_size` into at most `MAX_PATCHES`
    patches."""
    side = int(MAX_PATCHES**0.5)
    return next(p for p in range(-(-image_size // side), image_size + 1) if image_size % p == 0)
