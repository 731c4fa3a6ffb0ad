"""The fixed-point stop: terminate when the residual G is small."""

import dataclasses

import diffrax
import jax.numpy as jnp


def rms(tree_leaf):
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
    """

    atol: float = 1e-6
    rtol: float = 0.0

    def __post_init__(self):
        if not (self.atol >= 0 and self.rtol >= 0) or (self.atol == 0 and self.rtol == 0):
            raise ValueError(
                "FixedPointStop needs atol >= 0 and rtol >= 0, not both zero "
                f"(got atol={self.atol}, rtol={self.rtol})."
            )


def residual_event(model) -> diffrax.Event:
    """A diffrax event firing when RMS(G) < threshold; diffrax `args` must be
    `(model_args, threshold)`."""

    def converged(t, y, args, **kwargs):
        model_args, threshold = args
        return rms(model.residual(y, model_args)) <= threshold

    return diffrax.Event(converged)
