"""The Energy Transformer's parameters that a study can follow, as lenses: functions
`(model, args, p) -> (model, args)` that set one scalar `p` in the model or its
conditions, traced (so one compiled program serves every value of `p`).

`EnergyTransformer.lenses` maps their names to them; the generic tools of
`et_ode.analysis` (continuation, fold curves, basins across a parameter) look a name up
there and know no model of their own.
"""

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax.numpy as jnp

Lens = Callable[[Any, Any, Any], tuple[Any, Any]]


def memory_scale(model, args, p):
    """The Hopfield memories `xi` scaled by `p` (the trained model at `p = 1`)."""
    return eqx.tree_at(lambda m: m.hopfield.xi, model, p * model.hopfield.xi), args


def field_strength(model, args, p):
    """`Conditions.field_strength` set to `p` (every token's)."""
    if getattr(args, "field", None) is None:
        raise ValueError(
            "parameter='field_strength' needs conditions with an external "
            "field: args=et_ode.Conditions(field=..., ...)."
        )
    return model, eqx.tree_at(
        lambda a: a.field_strength, args, p * jnp.ones_like(args.field_strength)
    )


def _attention_of(model, parameter: str):
    """`model.attention`, refusing a model whose energy has no attention term (where
    `parameter` would change nothing)."""
    attention = getattr(model, "attention", None)
    if (
        attention is None
        or not hasattr(attention, "with_beta")
        or "attention" not in getattr(model, "terms", ("attention",))
    ):
        raise ValueError(
            f"parameter={parameter!r} needs a model whose energy has an attention "
            "term (model.attention, an EnergyAttention, in model.terms); "
            f"this one has none, so {parameter} changes nothing."
        )
    return attention


def beta(model, args, p):
    """The attention's inverse temperature set to `p` (`EnergyAttention.with_beta`)."""
    attention = _attention_of(model, "beta")
    return eqx.tree_at(lambda m: m.attention, model, attention.with_beta(p)), args


def head_beta(head: int) -> Lens:
    """The lens of head `head`'s inverse temperature: set to `p`, the other heads' as
    they are (`EnergyAttention.with_beta` with one value per head)."""

    def lens(model, args, p):
        attention = _attention_of(model, f"beta_{head}")
        betas = attention.head_betas
        value = jnp.asarray(p, betas.dtype)  # the heads' dtype, not p's (no promotion)
        return eqx.tree_at(
            lambda m: m.attention, model, attention.with_beta(betas.at[head].set(value))
        ), args

    lens.__name__ = f"beta_{head}"
    return lens


# The Energy Transformer's lenses by name (`EnergyTransformer.lenses` adds `beta_<h>`).
LENSES: dict[str, Lens] = {
    "beta": beta,
    "memory_scale": memory_scale,
    "field_strength": field_strength,
}
