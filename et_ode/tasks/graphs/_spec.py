"""What a graph model is (its architecture): the frozen dataclass that graph configs and
checkpoint headers hold, and the names of the models a graph benchmark compares."""

from typing import Annotated, Literal, get_args

from pydantic import Field

from ...vocab import ENERGY_TERMS
from .._core_spec import (
    Beta,
    HeadDim,
    Heads,
    HopfieldActivation,
    InitStd,
    LearnBeta,
    Memories,
    Tau,
    TokenDim,
)
from .._schema import config_section

Positions = Literal["learned", "laplacian", "none"]
POSITIONS = get_args(Positions)
# The models of a benchmark: the Energy Transformer, its two ablations (one energy term
# each), and two baselines of the same width on the same splits; for graph
# classification also the paper's classifier (`PaperGraphClassifierET`), "et_paper".
GraphModelName = Literal["et", "et_attention_only", "et_hopfield_only", "mlp", "gcn", "et_paper"]
GRAPH_MODELS = get_args(GraphModelName)[:5]  # a benchmark's default: all but et_paper
PAPER_CLASSIFIER = "et_paper"
ET_TERMS = {
    "et": ENERGY_TERMS,
    "et_attention_only": ("attention",),
    "et_hopfield_only": ("hopfield",),
}


@config_section
class GraphModelConfig:
    """Architecture of a graph model (the `[model]` section): `NodeAnomalyET`,
    `GraphClassifierET`, `PaperGraphClassifierET` (the only one to read `blocks`,
    `kernel_size` and `noise_temperature`) and the baselines (which read `dim` and
    `head_hidden` only). Attention is restricted to each node's neighbours (the graph's edges)."""

    dim: TokenDim = 32
    n_heads: Heads = 2
    head_dim: HeadDim = 16
    n_memories: Memories = 64
    beta: Beta = None
    learn_beta: LearnBeta = False
    self_attention: Annotated[
        bool,
        Field(
            description=(
                "each node also attends to itself (the paper's sum runs over the neighbours only)"
            )
        ),
    ] = False
    hopfield: HopfieldActivation = "relu"
    tau: Tau = 1.0
    init_std: InitStd = 0.02
    positions: Annotated[
        Positions,
        Field(
            description=(
                "learned (a learnable vector per node, the paper's for node anomalies: the graph "
                "is fixed, so nodes have identities), laplacian (the n_eigenvectors "
                "eigenvectors of the smallest eigenvalues of the normalised Laplacian of the "
                "CLS-padded graph, mapped by a learnable linear layer: the paper's for graph "
                "classification) or none"
            )
        ),
    ] = "learned"
    n_eigenvectors: Annotated[
        int, Field(ge=1, description=("laplacian: eigenvectors per node"))
    ] = 8
    head_hidden: Annotated[
        int, Field(ge=1, description=("width of the readout MLP's hidden layer"))
    ] = 64
    blocks: Annotated[
        int,
        Field(
            ge=1,
            description=(
                "the paper's classifier: stacked blocks S, each its own Energy Transformer and flow"
            ),
        ),
    ] = 1
    kernel_size: Annotated[
        int,
        Field(
            ge=1,
            description=(
                "the paper's classifier: the size of the H filters that make the weighted "
                "adjacency from the tokens' correlation"
            ),
        ),
    ] = 3
    noise_temperature: Annotated[
        float,
        Field(
            ge=0,
            description=(
                "the paper's classifier: the temperature of its blocks' Langevin noise (0: "
                "none; the paper's std 0.02 per step of 0.1 is 2e-4)"
            ),
        ),
    ] = 0.0
