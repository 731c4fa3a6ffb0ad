"""The stops of a solve: at a fixed point (`FixedPointStop`, when the residual G is small)
and at a first passage (`PassageStop`, when a condition on the state first holds)."""

import dataclasses
from collections.abc import Callable

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Real

from . import _traced_once as traced_once
from ._protocol import RealScalar


def rms(tree_leaf: Real[ArrayLike, "..."]) -> Float[Array, ""]:
    """Root mean square of one array."""
    return jnp.sqrt(jnp.mean(tree_leaf**2))


@dataclasses.dataclass(frozen=True)
class FixedPointStop:
    """Stop a solve at a fixed point: when the RMS of the residual `G` of a sample falls
    below `max(atol, rtol * RMS(G at t0))`.

    `G = P_T dE/dg` vanishes exactly at critical points of `E` on the LayerNorm
    manifold. Neither `|dx/dt|` nor `|dg/dt|` is tested: on the native flow `x` keeps
    growing and its clock slows, so both shrink or stall for reasons other than
    convergence. With this stop, `solve`'s `t1` is the time cap and `max_steps` the
    step cap; reaching either without convergence is a failed solve.

    **Arguments:**

    - `atol`: absolute tolerance on RMS G (default 1e-6).
    - `rtol`: tolerance relative to RMS G at `t0` (default 0: absolute only).

    Both may be JAX tracers (`jax.jit`, `jax.vmap` over a tolerance): they are then
    checked when the solve runs, with the same message. A `FixedPointStop` is a PyTree
    (its two tolerances are the leaves), so it can be passed to jitted functions.
    """

    atol: RealScalar = 1e-6
    rtol: RealScalar = 0.0

    def __post_init__(self):
        for name in ("atol", "rtol"):
            value = getattr(self, name)
            if _concrete(value) is None and not _is_tracer(value) and not _real_array(value):
                raise ValueError(f"FixedPointStop's {name} must be a real number (got {value!r}).")
        atol, rtol = _concrete(self.atol), _concrete(self.rtol)
        if atol is None or rtol is None:  # traced: checked by solve at run time
            return
        if not stop_tolerances_ok(np, atol, rtol):
            raise ValueError(stop_message(self.atol, self.rtol))


def stop_tolerances_ok(xp, atol, rtol):
    """Whether fixed-point tolerances are valid, computed with `xp` (numpy or jax.numpy)."""
    return (atol >= 0) & (rtol >= 0) & ((atol > 0) | (rtol > 0))


def stop_message(atol, rtol) -> str:
    show = lambda v: "<traced>" if isinstance(v, jax.core.Tracer) else v  # noqa: E731
    return (
        "FixedPointStop needs atol >= 0 and rtol >= 0, not both zero "
        f"(got atol={show(atol)}, rtol={show(rtol)})."
    )


def _is_tracer(value) -> bool:
    return isinstance(value, jax.core.Tracer)


def _real_array(value) -> bool:
    """An array of real numbers (a batch of tolerances for `jax.vmap`)."""
    return (
        isinstance(value, (np.ndarray, jax.Array))
        and value.dtype != np.bool_
        and (np.issubdtype(value.dtype, np.floating) or np.issubdtype(value.dtype, np.integer))
    )


def _concrete(value):
    """`value` as a float, or `None` when it is traced or not a real number."""
    if isinstance(value, jax.core.Tracer) or isinstance(value, bool):
        return None
    if isinstance(value, (int, float, np.number)) or (
        isinstance(value, (np.ndarray, jax.Array)) and value.shape == ()
    ):
        return float(value)
    return None


def _flatten_with_keys(stop: FixedPointStop):
    return (
        (jax.tree_util.GetAttrKey("atol"), stop.atol),
        (jax.tree_util.GetAttrKey("rtol"), stop.rtol),
    ), None


def _flatten(stop: FixedPointStop):
    return (stop.atol, stop.rtol), None


def _unflatten(_, leaves) -> FixedPointStop:
    """The PyTree rebuilt without `__init__` (as equinox does for its modules): JAX
    rebuilds it with leaves that are no tolerances (`None`, `vmap`'s `in_axes`, a batch
    of tolerances, placeholders), which neither the checks nor the annotations fit."""
    stop = object.__new__(FixedPointStop)
    object.__setattr__(stop, "atol", leaves[0])
    object.__setattr__(stop, "rtol", leaves[1])
    return stop


jax.tree_util.register_pytree_with_keys(
    FixedPointStop, _flatten_with_keys, _unflatten, flatten_func=_flatten
)


@dataclasses.dataclass(frozen=True)
class PassageStop:
    """Stop each sample of a solve at the end of the first step where
    `condition(x, args)` is true: a first passage (the escape from a basin at a
    temperature, a crossing of a plane, a token scale reached). Its `t_final` is that
    step's end (resolved to the step: an upper bound on the crossing time, within one
    step of it) and its stop reason `"passage"`; a sample whose condition never held
    ends at `t1` with the reason `"t1"`, not a failure (read `sol.stats["stop_reason"]`).

    **Arguments:**

    - `condition`: `(x: [N, D], args) -> bool` (a JAX boolean scalar), traceable; `args`
      are the solve's `args`. The same function object reuses a compilation (a new
      closure compiles anew).

    Works with and without a temperature, with every solver and with the checkpoint
    adjoint (not with `"backsolve"`, whose diffrax adjoint refuses events, nor
    `"implicit"`, which needs a fixed point).
    """

    condition: Callable

    def __post_init__(self):
        if not callable(self.condition):
            raise ValueError(
                "PassageStop needs a condition: a function (x, args) -> bool "
                f"(got {self.condition!r})."
            )


def passage_event(condition) -> diffrax.Event:
    """A diffrax event firing where `condition(y, model_args)` holds; diffrax `args`
    start with the model's."""

    def crossed(t, y, args, **kwargs):
        return jnp.asarray(condition(y, args[0]), bool)

    return diffrax.Event(crossed)


def residual_event(model) -> diffrax.Event:
    """A diffrax event firing when RMS(G) < threshold; diffrax `args` must be
    `(model_args, threshold)`."""

    def converged(t, y, args, **kwargs):
        model_args, threshold = args
        return rms(traced_once.residual(model, y, model_args)) <= threshold

    return diffrax.Event(converged)
