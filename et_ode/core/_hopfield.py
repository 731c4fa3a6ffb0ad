"""The Hopfield network term of the Energy Transformer's energy."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, PRNGKeyArray

from ..vocab import ACTIVATIONS, Activation, check_choice

HopfieldActivation = Activation  # the older name


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
    activation: Activation = eqx.field(static=True)
    softmax_beta: float = eqx.field(static=True)
    power: int = eqx.field(static=True)
    # `[N, K]` booleans or None: which activations count as on, in place of `h > 0`
    # (ReLU only; see `with_pattern`). None in every trained model.
    pattern: Bool[Array, "N K"] | None = None

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
        check_choice("the Hopfield activation", activation, ACTIVATIONS)
        if activation == "power" and (int(power) != power or power < 2):
            raise ValueError(f"power must be an integer >= 2 (got {power}).")
        dtype = dtype or jnp.float32
        self.xi = init_std * jax.random.normal(key, (n_memories, dim), dtype)
        self.activation = activation
        self.softmax_beta = float(softmax_beta)
        self.power = int(power)
        self.pattern = None

    def __check_init__(self):
        check_choice("the Hopfield activation", self.activation, ACTIVATIONS)
        if self.xi.ndim != 2:
            raise ValueError(f"xi must be [K, D] (got shape {self.xi.shape}).")
        if not (math.isfinite(self.softmax_beta) and self.softmax_beta > 0):
            raise ValueError(f"softmax_beta must be positive (got {self.softmax_beta}).")
        if self.power < 2:
            raise ValueError(f"power must be an integer >= 2 (got {self.power}).")

    @property
    def has_kinks(self) -> bool:
        """Whether `E_HN` fails to be twice differentiable where an `h` crosses zero:
        ReLU, and the power activation with `n = 2` (`n >= 3` is C^2)."""
        return self.activation == "relu" or (self.activation == "power" and self.power == 2)

    def kink_distances(self, g: Float[Array, "N D"]) -> Float[Array, "N K"]:
        """Distance in `g` from each token to each switching plane `xi_mu . g_B = 0`:
        `|h_{B,mu}| / |xi_mu|`."""
        norms = jnp.linalg.norm(self.xi, axis=-1)
        return jnp.abs(g @ self.xi.T) / jnp.where(norms > 0, norms, 1.0)

    def with_pattern(self, pattern: Bool[Array, "N K"]) -> "HopfieldNetwork":
        """This network with the activations in `pattern` counted as on and the others
        as off, whatever the sign of `h` (a kinked activation only): its energy is
        `-1/2 sum pattern h^2`, which equals `E_HN` wherever the pattern is the sign of
        `h`, and its Hessian is one side's of a kink where it is not."""
        if not self.has_kinks:
            raise ValueError(f"the {self.activation} activation has no kinks to pin.")
        return eqx.tree_at(lambda m: m.pattern, self, pattern, is_leaf=lambda leaf: leaf is None)

    def __call__(self, g: Float[Array, "N D"]) -> Float[Array, ""]:
        hidden = g @ self.xi.T
        if self.pattern is not None:
            return -0.5 * jnp.sum(jnp.where(self.pattern, hidden, 0.0) ** 2)
        if self.activation == "relu":
            return -0.5 * jnp.sum(jax.nn.relu(hidden) ** 2)
        if self.activation == "softmax":
            b = self.softmax_beta
            return -jnp.sum(jax.nn.logsumexp(b * hidden, axis=-1)) / b
        return -jnp.sum(jax.nn.relu(hidden) ** self.power) / self.power
