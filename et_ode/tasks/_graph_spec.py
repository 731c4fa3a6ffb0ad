"""What a graph model is (its architecture): the frozen dataclass that graph configs and
checkpoint headers hold, and the names of the models a graph benchmark compares."""

import dataclasses

from ..vocab import ENERGY_TERMS, Activation

POSITIONS = ("learned", "laplacian", "none")
# The models of a benchmark: the Energy Transformer, its two ablations (one energy term
# each), and two baselines of the same width on the same splits.
GRAPH_MODELS = ("et", "et_attention_only", "et_hopfield_only", "mlp", "gcn")
ET_TERMS = {"et": ENERGY_TERMS, "et_attention_only": ("attention",),
            "et_hopfield_only": ("hopfield",)}


@dataclasses.dataclass(frozen=True)
class GraphModelConfig:
    """Architecture of a graph model (`NodeAnomalyET`, `GraphClassifierET` and the
    baselines, which read `dim` and `head_hidden` only).

    - `dim`, `n_heads`, `head_dim`, `n_memories`, `beta`, `self_attention`, `hopfield`,
      `tau`, `init_std`: the `EnergyTransformer` core (`D`, `H`, `Y`, `K`, ...). Attention
      is restricted to each node's neighbours (the graph's edges); `self_attention`
      adds each node's own key (the paper's sum runs over the neighbours only).
    - `positions`: `"learned"` (a learnable vector per node, the paper's for node
      anomaly detection: the graph is fixed, so nodes have identities), `"laplacian"`
      (the `n_eigenvectors` eigenvectors of the smallest eigenvalues of the normalised
      Laplacian, mapped by a learnable linear layer: the paper's for graph
      classification) or `"none"`.
    - `head_hidden`: width of the hidden layer of the readout MLP.
    """

    dim: int = 32
    n_heads: int = 2
    head_dim: int = 16
    n_memories: int = 64
    beta: float | None = None
    self_attention: bool = False
    hopfield: Activation = "relu"
    tau: float = 1.0
    init_std: float = 0.02
    positions: str = "learned"
    n_eigenvectors: int = 8
    head_hidden: int = 64

    def __post_init__(self):
        if self.positions not in POSITIONS:
            raise ValueError(f"positions must be one of {', '.join(POSITIONS)} "
                             f"(got {self.positions!r}).")
        for name in ("dim", "n_heads", "head_dim", "n_memories", "n_eigenvectors",
                     "head_hidden"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer (got {value!r}).")
        if not (isinstance(self.tau, (int, float)) and self.tau > 0):
            raise ValueError(f"tau must be positive (got {self.tau!r}).")
