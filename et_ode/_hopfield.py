"""The Hopfield network term of the Energy Transformer's energy."""

from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

HopfieldActivation = Literal["relu", "softmax", "power"]


class HopfieldNetwork(eqx.Module):
    """Dense associative memory over each token, `h_{B,mu} = xi_mu . g_B`:

    - `"relu"` (the paper): `E_HN = -1/2 sum_B sum_mu relu(h)^2`. The vector field is
      only Lipschitz where some `h` crosses zero.
    - `"softmax"`: `E_HN = -(1/b) sum_B log sum_mu exp(b h)`, smooth (`b = softmax_beta`).
    - `"power"`: `E_HN = -(1/n) sum_B sum_mu relu(h)^n`, `n = power` (C^{n-1}).

    **Arguments:**

    - `dim`: token dimension `D`.
    - `n_memories`: number of memories `K`.
    - `key`: PRNG key for `xi` (normal, std 0.02).
    - `activation`: one of the three above.
    - `softmax_beta`, `power`: their parameters.
    """

    xi: Float[Array, "K D"]
    activation: str = eqx.field(static=True)
    softmax_beta: float = eqx.field(static=True)
    power: int = eqx.field(static=True)

    def __init__(
        self,
        dim: int,
        n_memories: int,
        *,
        key: PRNGKeyArray,
        activation: HopfieldActivation = "relu",
        softmax_beta: float = 1.0,
        power: int = 3,
        init_std: float = 0.02,
        dtype=None,
    ):
        if activation not in ("relu", "softmax", "power"):
            raise ValueError(
                f"Unknown Hopfield activation {activation!r}; "
                "use 'relu' (the paper's), 'softmax' or 'power'."
            )
        if activation == "power" and (int(power) != power or power < 2):
            raise ValueError(f"power must be an integer >= 2 (got {power}).")
        dtype = dtype or jnp.float32
        self.xi = init_std * jax.random.normal(key, (n_memories, dim), dtype)
        self.activation = activation
        self.softmax_beta = float(softmax_beta)
        self.power = int(power)

    def __call__(self, g: Float[Array, "N D"]) -> Float[Array, ""]:
        hidden = g @ self.xi.T
        if self.activation == "relu":
            return -0.5 * jnp.sum(jax.nn.relu(hidden) ** 2)
        if self.activation == "softmax":
            b = self.softmax_beta
            return -jnp.sum(jax.nn.logsumexp(b * hidden, axis=-1)) / b
        return -jnp.sum(jax.nn.relu(hidden) ** self.power) / self.power
