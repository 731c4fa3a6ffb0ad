"""Conditions that an Energy Transformer solve carries in `args`."""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float


class Conditions(eqx.Module):
    """What the energy and the flow are conditioned on, passed as `args`.

    Every field is optional; `None` means absent.

    - `key_mask`: `[N, N]` bool (`[B, N, N]` for a batch, and likewise below), `key_mask[C, B]` allows query token `C` to attend to
      key token `B`.
    - `clamped`: `[N]` bool, tokens that do not move (their `dx/dt = 0`); their values
      are those of the initial state. This makes a fixed point depend on them.
    - `field`: `[N, D]` external field `c`, adding `E_ext = -lambda sum_A c_A . g_A`,
      the Hopfield input current. This makes a fixed point depend on `c`.
    - `field_strength`: `lambda` (scalar, default 1).
    """

    # `*batch`: conditions of a batch (`solvers.solve(..., args_batched=True)`) carry the
    # batch axis first; inside the solve each sample sees its own.
    key_mask: Bool[Array, "*batch N N"] | None = None
    clamped: Bool[Array, "*batch N"] | None = None
    field: Float[Array, "*batch N D"] | None = None
    # An array, never a Python float: jit would treat a float as static (a recompile per
    # value, and no gradient).
    field_strength: Float[Array, ""] = eqx.field(default=1.0, converter=jnp.asarray)

    def check(self, n_tokens: int, dim: int, batch: tuple[int, ...] = ()) -> None:
        """Raise `ValueError` unless every present field has its expected shape."""
        expected = {
            "key_mask": batch + (n_tokens, n_tokens),
            "clamped": batch + (n_tokens,),
            "field": batch + (n_tokens, dim),
        }
        for name, shape in expected.items():
            value = getattr(self, name)
            if value is not None and tuple(jnp.shape(value)) != shape:
                raise ValueError(
                    f"Conditions.{name} has shape {tuple(jnp.shape(value))}, expected "
                    f"{shape} for x of {n_tokens} tokens of dimension {dim}"
                    + (" with batched args" if batch else "")
                    + "."
                )
        for name in ("key_mask", "clamped"):
            value = getattr(self, name)
            if value is not None and jnp.asarray(value).dtype != jnp.bool_:
                raise ValueError(f"Conditions.{name} must be a boolean array.")
        field = self.field
        if field is not None and _is_concrete(field) and not np.all(np.isfinite(np.asarray(field))):
            raise ValueError("Conditions.field contains NaN or inf values.")


def _is_concrete(array) -> bool:
    try:
        np.asarray(array)
    except Exception:  # a tracer
        return False
    return True
