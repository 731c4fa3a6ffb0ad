"""The energy LayerNorm: per-token normalisation that is the gradient of a Lagrangian."""

import math

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float


class EnergyLayerNorm(eqx.Module):
    """Per-token LayerNorm `g = gamma (x - mean) / s + delta`, `s = sqrt(var + eps)`.

    It is the gradient of the per-token Lagrangian `L = D gamma s + delta . x`, which is
    what makes the Energy Transformer's dynamics descend its energy. `gamma` is a
    positive scalar, stored as its logarithm so that gradient steps keep it positive
    (a negative gamma would make `dg/dx` indefinite and the energy could rise).

    **Arguments:**

    - `dim`: token dimension `D`.
    - `gamma`: initial (positive) scale.
    - `eps`: variance regulariser.
    """

    log_gamma: Float[Array, ""]
    delta: Float[Array, " D"]
    eps: float = eqx.field(static=True)

    def __init__(self, dim: int, gamma: float = 1.0, eps: float = 1e-5, *, dtype=None):
        if dim < 2:
            raise ValueError(f"EnergyLayerNorm needs dim >= 2 (got {dim}).")
        if not gamma > 0:
            raise ValueError(f"gamma must be positive (got {gamma}).")
        dtype = dtype or jnp.float32
        self.log_gamma = jnp.log(jnp.asarray(gamma, dtype))
        self.delta = jnp.zeros((dim,), dtype)
        self.eps = float(eps)

    def __check_init__(self):
        if not (math.isfinite(self.eps) and self.eps > 0):
            raise ValueError(f"eps must be positive and finite (got {self.eps}).")
        if self.delta.ndim != 1 or self.delta.shape[0] < 2:
            raise ValueError(f"delta must be [D] with D >= 2 (got shape {self.delta.shape}).")

    @property
    def gamma(self) -> Float[Array, ""]:
        """The positive scale `gamma`."""
        return jnp.exp(self.log_gamma)

    @property
    def dim(self) -> int:
        return self.delta.shape[-1]

    def __call__(self, x: Float[Array, "... D"]) -> Float[Array, "... D"]:
        """`g = LayerNorm(x)`, token by token over the last axis."""
        mean = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.var(x, axis=-1, keepdims=True)
        return self.gamma * (x - mean) / jnp.sqrt(var + self.eps) + self.delta

    def lagrangian(self, x: Float[Array, " D"]) -> Float[Array, ""]:
        """`L = D gamma s + delta . x` for one token; `jax.grad(L)(x) == self(x)`."""
        s = jnp.sqrt(jnp.var(x) + self.eps)
        return x.shape[-1] * self.gamma * s + self.delta @ x

    def scale(self, x: Float[Array, "N D"]) -> Float[Array, " N"]:
        """Per-token `s_A = sqrt(var_A + eps)`: the native flow's clock is `gamma / s_A`."""
        return jnp.sqrt(jnp.var(x, axis=-1) + self.eps)

    def tangent_projection(
        self, x: Float[Array, "N D"], w: Float[Array, "N D"]
    ) -> Float[Array, "N D"]:
        """`P_T w`: removes from each token of `w` its mean and its component along
        `g_A - delta` (equivalently along `x_A - mean_A`)."""
        centred = x - jnp.mean(x, axis=-1, keepdims=True)
        norm = jnp.linalg.norm(centred, axis=-1, keepdims=True)
        u = centred / jnp.where(norm > 0, norm, 1.0)
        w = w - jnp.mean(w, axis=-1, keepdims=True)
        return w - jnp.sum(w * u, axis=-1, keepdims=True) * u

    def jacobian_quadratic_form(
        self, x: Float[Array, "N D"], w: Float[Array, "N D"]
    ) -> Float[Array, " N"]:
        """Per token `w_A^T M_A w_A` with `M_A = dg_A/dx_A`, from the closed form
        `M = (gamma/s) (I - 11^T/D - (var/(var+eps)) u u^T)`."""
        var = jnp.var(x, axis=-1)
        centred = x - jnp.mean(x, axis=-1, keepdims=True)
        norm = jnp.linalg.norm(centred, axis=-1)
        w_centred = w - jnp.mean(w, axis=-1, keepdims=True)
        along_u = jnp.sum(w * centred, axis=-1) / jnp.where(norm > 0, norm, 1.0)
        quad = jnp.sum(w_centred**2, axis=-1) - var / (var + self.eps) * along_u**2
        return self.gamma / jnp.sqrt(var + self.eps) * quad

    def tangent_noise(self, x: Float[Array, "N D"], w: Float[Array, "N D"]) -> Float[Array, "N D"]:
        """Per token `sqrt(s_A / gamma) P_T w_A`: white noise `w` in the tangent space of
        the token's sphere, scaled by the square root of the projected flow's mobility
        `s_A / gamma` (a tangent `dx_A` moves `g_A` by `(gamma / s_A) dx_A`). With the
        coefficient `sqrt(2 T / tau)` it is the noise whose Langevin dynamics samples
        `exp(-E(g) / T)` on the manifold (docs: mathematics, "At a temperature")."""
        mobility = jnp.sqrt(self.scale(x) / self.gamma)[:, None]
        return mobility * self.tangent_projection(x, w)

    def tangent_noise_ito_drift(self, x: Float[Array, "N D"]) -> Float[Array, "N D"]:
        """`(1/2) sum_k (D sigma_k) sigma_k` for `sigma = tangent_noise(x, .)`: the drift
        an Ito solver adds so that its solution is the Stratonovich one (the noise then
        keeps each token on its sphere). Each token's centred part `c_A = x_A - mean_A`
        lies on a sphere of dimension `D - 2` and radius `r_A = |c_A|` in the hyperplane
        orthogonal to `1`, and the mobility is constant on it, so the sum is
        `-(s_A / (2 gamma)) (D - 2) c_A / r_A^2`."""
        centred = x - jnp.mean(x, axis=-1, keepdims=True)
        r2 = jnp.sum(centred**2, axis=-1, keepdims=True)
        mobility = (self.scale(x) / self.gamma)[:, None]
        return -0.5 * mobility * (x.shape[-1] - 2) * centred / jnp.where(r2 > 0, r2, 1.0)
