"""The Energy Transformer: one energy, its native and projected flows, its residual."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from ..vocab import (
    ENERGY_TERMS,
    FLOWS,
    NOISES,
    Activation,
    EnergyTerm,
    Flow,
    Noise,
    check_choice,
)
from ._attention import EnergyAttention
from ._conditions import Conditions
from ._hopfield import HopfieldNetwork
from ._layernorm import EnergyLayerNorm
from ._lenses import LENSES, Lens, head_beta


def _conditions(args) -> Conditions:
    if args is None:
        return Conditions()
    if not isinstance(args, Conditions):
        raise TypeError(f"args must be an et_ode.Conditions or None, got {type(args).__name__}.")
    return args


class EnergyTransformer(eqx.Module):
    """The Energy Transformer block as an energy-based dynamical system.

    Tokens `x: [N, D]` evolve by `tau dx/dt = -dE/dg` with `g = LayerNorm(x)` and
    `E = E_ATT(g) + E_HN(g) [+ E_ext(g)]`. `energy` is the single source of truth:
    every vector field is `jax.grad` of it.

    **Arguments:**

    - `dim`, `n_heads`, `head_dim`, `n_memories`: `D`, `H`, `Y`, `K`.
    - `key`: PRNG key.
    - `beta`: attention inverse temperature (default `1/sqrt(Y)`).
    - `self_attention`: let a token attend to itself.
    - `hopfield`: Hopfield activation, `"relu"` (paper), `"softmax"` or `"power"`.
    - `tau`: time constant (> 0).
    - `gamma`, `eps`: LayerNorm scale (> 0) and regulariser.
    - `init_std`: std of the normal initialisation of `Wq`, `Wk`, `xi`.
    - `dtype`: parameter dtype (default float32; pass `jnp.float64` with x64 enabled).
    - `terms`: the learned energy terms, `("attention", "hopfield")` (the default, the
      paper's model) or one of them alone: an ablation whose other term is zero (its
      parameters stay in the model, unused).
    - `learn_beta`: one learned inverse temperature per head, started at `beta`
      (`EnergyAttention`'s `log_beta`: positive by construction).

    Satisfies the `solvers.EnergySystem` and `solvers.ManifoldEnergySystem` protocols.
    `lenses`: the parameters a study can follow by name (`"beta"`, every head's together;
    `"beta_0"`, `"beta_1"`, ...: one head's; `"memory_scale"`, `"field_strength"`), each
    `(model, args, p) -> (model, args)`.
    """

    norm: EnergyLayerNorm
    attention: EnergyAttention
    hopfield: HopfieldNetwork
    tau: float = eqx.field(static=True)
    terms: tuple[EnergyTerm, ...] = eqx.field(static=True)

    def __init__(
        self,
        dim: int,
        n_heads: int,
        head_dim: int,
        n_memories: int,
        *,
        key: PRNGKeyArray,
        beta: float | None = None,
        self_attention: bool = False,
        hopfield: Activation = "relu",
        tau: float = 1.0,
        gamma: float = 1.0,
        eps: float = 1e-5,
        init_std: float = 0.02,
        hopfield_options: dict | None = None,
        dtype=None,
        terms: tuple[EnergyTerm, ...] = ENERGY_TERMS,
        learn_beta: bool = False,
    ):
        for name, value in dict(
            dim=dim, n_heads=n_heads, head_dim=head_dim, n_memories=n_memories
        ).items():
            if int(value) != value or value < 1:
                raise ValueError(f"{name} must be a positive integer (got {value}).")
        k_att, k_hop = jax.random.split(key)
        self.norm = EnergyLayerNorm(dim, gamma=gamma, eps=eps, dtype=dtype)
        self.attention = EnergyAttention(
            dim,
            n_heads,
            head_dim,
            key=k_att,
            beta=beta,
            self_attention=self_attention,
            init_std=init_std,
            dtype=dtype,
            learn_beta=learn_beta,
        )
        self.hopfield = HopfieldNetwork(
            dim,
            n_memories,
            key=k_hop,
            activation=hopfield,
            init_std=init_std,
            dtype=dtype,
            **(hopfield_options or {}),
        )
        self.tau = float(tau)
        self.terms = tuple(terms)

    def __check_init__(self):
        if not self.terms or len(set(self.terms)) != len(self.terms):
            raise ValueError(f"terms must name distinct energy terms (got {self.terms}).")
        for term in self.terms:
            check_choice("an energy term", term, ENERGY_TERMS)
        if not (math.isfinite(self.tau) and self.tau > 0):
            raise ValueError(f"tau must be positive and finite (got {self.tau}).")
        dims = {
            "norm": self.norm.dim,
            "attention": self.attention.Wq.shape[-1],
            "hopfield": self.hopfield.xi.shape[-1],
        }
        if len(set(dims.values())) != 1:
            raise ValueError(f"the modules disagree on the token dimension D: {dims}.")

    @property
    def dim(self) -> int:
        return self.norm.dim

    @property
    def lenses(self) -> dict[str, Lens]:
        """The parameters a study can follow by name (class docstring)."""
        heads = self.attention.Wq.shape[0]
        return {**LENSES, **{f"beta_{h}": head_beta(h) for h in range(heads)}}

    # ------------------------------------------------------------------ energy
    # The methods that compute run behind `eqx.filter_jit`: called outside `jax.jit`, a
    # method is one compiled program rather than one per operation (`jax.grad` of the
    # energy alone is dozens); inside a program, JAX traces it once however often it is
    # called (solvers/_traced_once.py). XLA inlines nested programs: same numbers.
    def energy_parts_of_g(self, g: Float[Array, "N D"], args=None) -> dict:
        """`{"attention", "hopfield", "external"}` energies at normalised tokens `g`."""
        cond = _conditions(args)
        zero = jnp.zeros((), g.dtype)
        parts = {
            "attention": (
                self.attention(g, cond.key_mask, cond.edges, cond.pair_weights)
                if "attention" in self.terms
                else zero
            ),
            "hopfield": self.hopfield(g) if "hopfield" in self.terms else zero,
            "external": zero,
        }
        if cond.field is not None:
            parts["external"] = -cond.field_strength * jnp.sum(cond.field * g)
        return parts

    @eqx.filter_jit
    def energy_of_g(self, g: Float[Array, "N D"], args=None) -> Float[Array, ""]:
        """`E(g)`, the total energy as a function of the normalised tokens."""
        return sum(self.energy_parts_of_g(g, args).values())

    @eqx.filter_jit
    def energy(self, x: Float[Array, "N D"], args=None) -> Float[Array, ""]:
        """`E(LayerNorm(x))`, a scalar."""
        return self.energy_of_g(self.norm(x), args)

    @eqx.filter_jit
    def energy_parts(self, x: Float[Array, "N D"], args=None) -> dict:
        """The energy's attention, Hopfield and external-field terms at state `x`."""
        return self.energy_parts_of_g(self.norm(x), args)

    @eqx.filter_jit
    def energy_gradient(self, x: Float[Array, "N D"], args=None) -> Float[Array, "N D"]:
        """`dE/dg` at `g = LayerNorm(x)`, by autodiff of `energy_of_g`."""
        return jax.grad(self.energy_of_g)(self.norm(x), args)

    @eqx.filter_jit
    def update_parts(self, x: Float[Array, "N D"], args=None) -> dict:
        """`-dE/dg` split into its attention, Hopfield and external-field parts."""
        g = self.norm(x)
        return {
            name: -jax.grad(lambda g_, n=name: self.energy_parts_of_g(g_, args)[n])(g)
            for name in ("attention", "hopfield", "external")
        }

    # ------------------------------------------------------------------- flows
    def _free(self, args, w: Float[Array, "N D"]) -> Float[Array, "N D"]:
        clamped = _conditions(args).clamped
        return w if clamped is None else jnp.where(clamped[:, None], 0.0, w)

    def tangent_projection(
        self, x: Float[Array, "N D"], w: Float[Array, "N D"], args=None
    ) -> Float[Array, "N D"]:
        """`P_T(g) w` on free tokens, zero on clamped ones."""
        return self._free(args, self.norm.tangent_projection(x, w))

    @eqx.filter_jit
    def residual(self, x: Float[Array, "N D"], args=None) -> Float[Array, "N D"]:
        """`G = P_T(g) dE/dg`: zero exactly at fixed points (critical points of E on
        the LayerNorm manifold). Clamped tokens have `G = 0`."""
        return self.tangent_projection(x, self.energy_gradient(x, args), args)

    def vector_field(
        self, t, x: Float[Array, "N D"], args=None, flow: Flow = "native"
    ) -> Float[Array, "N D"]:
        """`dx/dt`: `-(1/tau) dE/dg` (native, the paper's) or `-(1/tau) P_T dE/dg`
        (projected: keeps each token's mean and scale). Clamped tokens do not move."""
        return self._flow_field(x, args, flow)  # the time `t` does not enter

    @eqx.filter_jit
    def _flow_field(self, x: Float[Array, "N D"], args, flow: Flow) -> Float[Array, "N D"]:
        if flow == "native":
            return self._free(args, -self.energy_gradient(x, args) / self.tau)
        if flow == "projected":
            return -self.residual(x, args) / self.tau
        check_choice("flow", flow, FLOWS)

    @eqx.filter_jit
    def dEdt(self, x: Float[Array, "N D"], args=None, flow: Flow = "native"):
        """`dE/dt` along the flow from the closed form, not by differentiating E in time:
        native `-(1/tau) sum_A (dE/dg_A)^T M_A (dE/dg_A)`; projected
        `-(1/tau) sum_A (gamma/s_A) |G_A|^2`. Clamped tokens contribute nothing."""
        if flow == "native":
            grad = self._free(args, self.energy_gradient(x, args))
            return -jnp.sum(self.norm.jacobian_quadratic_form(x, grad)) / self.tau
        if flow == "projected":
            g_res = self.residual(x, args)
            clock = self.norm.gamma / self.norm.scale(x)
            return -jnp.sum(clock * jnp.sum(g_res**2, axis=-1)) / self.tau
        check_choice("flow", flow, FLOWS)

    # ------------------------------------------------ noise (a solve at a temperature)
    def langevin_noise(
        self, x: Float[Array, "N D"], w: Float[Array, "N D"], args=None, noise: Noise = "isotropic"
    ) -> Float[Array, "N D"]:
        """The diffusion of a solve at a temperature applied to white noise `w: [N, D]`,
        before the coefficient `sqrt(2 T / tau)`: `"isotropic"` is `w` itself (the
        authors' graph code), `"tangent"` is `sqrt(s_A / gamma) P_T w_A`
        (`EnergyLayerNorm.tangent_noise`). Clamped tokens get none."""
        if noise == "isotropic":
            return self._free(args, w)
        if noise == "tangent":
            return self._free(args, self.norm.tangent_noise(x, w))
        check_choice("noise", noise, NOISES)

    def langevin_ito_drift(
        self, x: Float[Array, "N D"], args=None, noise: Noise = "isotropic"
    ) -> Float[Array, "N D"]:
        """`(1/2) sum_k (D sigma_k) sigma_k` of `langevin_noise` (per unit of `2 T / tau`):
        zero for the additive `"isotropic"` noise; for `"tangent"`,
        `EnergyLayerNorm.tangent_noise_ito_drift`. An Ito solver (Euler-Maruyama) adds it
        to the drift, so that every solver converges to the same (Stratonovich) SDE."""
        if noise == "isotropic":
            return jnp.zeros_like(x)
        if noise == "tangent":
            return self._free(args, self.norm.tangent_noise_ito_drift(x))
        check_choice("noise", noise, NOISES)

    # --------------------------------------------- manifold (implicit gradient)
    def to_manifold(self, x: Float[Array, "N D"], args=None) -> Float[Array, "N D"]:
        """Per-token unit vector `v_A` of mean zero along `x_A - mean_A`, so that
        `g_A = delta + rho_A v_A` with `rho_A = gamma sqrt(D var_A / (var_A + eps))`."""
        centred = x - jnp.mean(x, axis=-1, keepdims=True)
        return centred / jnp.linalg.norm(centred, axis=-1, keepdims=True)

    def from_manifold(
        self, v: Float[Array, "N D"], x_ref: Float[Array, "N D"], args=None
    ) -> Float[Array, "N D"]:
        """The state with directions `v` and the invariants of the projected flow
        (each token's mean and variance, and clamped tokens whole) taken from `x_ref`."""
        mean = jnp.mean(x_ref, axis=-1, keepdims=True)
        spread = jnp.sqrt(x_ref.shape[-1] * jnp.var(x_ref, axis=-1, keepdims=True))
        x = mean + spread * v
        clamped = _conditions(args).clamped
        return x if clamped is None else jnp.where(clamped[:, None], x_ref, x)

    # ---------------------------------------- geometry for the studies (analysis)
    def energy_coordinates(self, x: Float[Array, "N D"], args=None) -> Float[Array, "N D"]:
        """The coordinates the energy is a function of: `g = LayerNorm(x)`."""
        return self.norm(x)

    def clock(self, x: Float[Array, "N D"], args=None) -> Float[Array, "N 1"]:
        """Per token `gamma / s_A`: a tangent displacement `dx_A` moves `g_A` by exactly
        `clock_A dx_A` (1/tau units of the projected flow's rates)."""
        return (self.norm.gamma / self.norm.scale(x))[:, None]

    def token_scales(self, x: Float[Array, "N D"], args=None) -> Float[Array, " N"]:
        """Per token `s_A = sqrt(var_A + eps)` (the native flow inflates them)."""
        return self.norm.scale(x)

    def tangent_dimension(self, x: Float[Array, "N D"], args=None) -> int:
        """Dimension of the projected flow's tangent space: `D - 2` per free token."""
        clamped = _conditions(args).clamped
        free = x.shape[0] if clamped is None else int(x.shape[0] - jnp.sum(clamped))
        return free * (x.shape[-1] - 2)

    def kink_distances(self, x: Float[Array, "N D"], args=None):
        """Distances in `g` from `x` to every surface where `E` is not twice
        differentiable: per free token and memory, `|xi_mu . g_B| / |xi_mu|` (`[N, K]`,
        `inf` on clamped tokens), or `None` where `E` is C^2 (softmax, power >= 3, or no
        Hopfield term)."""
        if "hopfield" not in self.terms or not self.hopfield.has_kinks:
            return None
        distances = self.hopfield.kink_distances(self.norm(x))
        clamped = _conditions(args).clamped
        return distances if clamped is None else jnp.where(clamped[:, None], jnp.inf, distances)

    def one_sided(self, x: Float[Array, "N D"], args, within, side: str):
        """This model with every kink within distance `within` of `x` pinned to one side:
        `side="lower"` counts those activations as on (each adds `-xi xi^T` to the
        Hessian: the smallest Hessian over the sides), `"upper"` as off (the largest).
        Elsewhere the pattern is `h > 0`, so energy, field and residual at `x` change by
        at most `within` times the memories' norms."""
        if side not in ("lower", "upper"):
            raise ValueError(f"side must be 'lower' or 'upper' (got {side!r}).")
        hidden = self.norm(x) @ self.hopfield.xi.T
        near = self.kink_distances(x, args) <= within
        pattern = (hidden > 0) | near if side == "lower" else (hidden > 0) & ~near
        return eqx.tree_at(lambda m: m.hopfield, self, self.hopfield.with_pattern(pattern))

    # -------------------------------------------------------------- validation
    def check_inputs(self, x_shape: tuple[int, ...], args, args_batch: tuple = ()):
        """Raise `ValueError` if a single state of shape `x_shape` or `args` do not fit."""
        if len(x_shape) != 2 or x_shape[-1] != self.dim:
            raise ValueError(
                f"x must have shape [N, {self.dim}] (or [B, N, {self.dim}] batched); "
                f"a sample has shape {list(x_shape)}."
            )
        if x_shape[0] < 1:
            raise ValueError("x must hold at least one token.")
        conditions = _conditions(args)
        conditions.check(x_shape[0], self.dim, args_batch)
        heads = self.attention.Wq.shape[0]
        if conditions.pair_weights is not None:
            shape = tuple(jnp.shape(conditions.pair_weights))
            given = shape[-1] if conditions.edges is not None else shape[-3]
            if given != heads:
                raise ValueError(
                    f"Conditions.pair_weights has {given} heads (shape {shape}); this model's "
                    f"attention has {heads}: one weight per pair and head."
                )
