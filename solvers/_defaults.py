"""The defaults of `solve` that depend on its options (the step cap, `dtmin`,
checkpoints), the step-count and round-off limits they follow, and the step-size
controller's numbers in the state's dtype."""

import math

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._protocol import RealScalar


def is_traced(tree) -> bool:
    """Whether any leaf of `tree` is a JAX tracer (inside `jax.jit`, `vmap`, `grad`)."""
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(tree))


# Steps shorter than this many units of round-off of the times do not advance t as asked:
# an adaptive solve fails there (`default_dtmin`), constant steps are refused.
TIME_ULPS = 16


def time_ulp(t0: RealScalar, t1: RealScalar, dtype) -> float:
    """A unit of round-off of the times from `t0` to `t1` (concrete) in `dtype` (an
    upper bound: eps times the larger of `|t0|`, `|t1|`)."""
    return float(jnp.finfo(dtype).eps) * max(abs(float(t0)), abs(float(t1)))


def default_dtmin(t0, t1, dtype):
    # A step of a few ulps of t no longer advances t: fail as dt_underflow, not max_steps.
    if is_traced((t0, t1)):  # the same rule in jnp arithmetic
        eps = float(jnp.finfo(dtype).eps)
        t0, t1 = jnp.asarray(t0, dtype), jnp.asarray(t1, dtype)
        return jnp.maximum(
            1e-12 * (t1 - t0), TIME_ULPS * eps * jnp.maximum(jnp.abs(t0), jnp.abs(t1))
        )
    return max(1e-12 * (float(t1) - float(t0)), TIME_ULPS * time_ulp(t0, t1, dtype))


DEFAULT_MAX_STEPS = 4096
# The largest step cap: diffrax counts steps in an int32 (a cap of 2**31 is an
# OverflowError without jax_enable_x64), and a constant-step solve needs (t1 - t0) / dt0
# steps plus one. Anything beyond it could only crash, or run for days.
MAX_STEPS_LIMIT = 2**31 - 1
# State entries (N D) up to which dense linear algebra is the default, everywhere one
# method or the other is chosen by size: Newton's Jacobian (`find_fixed_point`, the
# polishes), diffrax's implicit solvers (which build the dense (N D)^2 Jacobian, N D JVPs,
# and factorise it: refused above), continuation's bordered Jacobians and eigenvalues,
# and the tangent Hessian's spectrum (`hessian_eigenvalues`, `stability`). Above it,
# Krylov methods on Jacobian-vector products: GMRES, Krylov-Schur, Lanczos.
DENSE_MAX = 1024
EVERY_STEP_CHECKPOINTS_UP_TO = 64


def constant_step_count(
    t0: RealScalar,
    t1: RealScalar,
    dt0: RealScalar | None,
    rtol: RealScalar | None = None,
    atol: RealScalar | None = None,
) -> int | None:
    """The number of steps a constant-step solve from `t0` to `t1` takes (the last one
    may be shorter), plus one for diffrax's final bookkeeping step: the exact `max_steps`
    it needs. `None` when the steps are adaptive (`rtol` or `atol` given), `dt0` is
    missing, or the values are traced or invalid (then `check_options` names the
    problem)."""
    if rtol is not None or atol is not None or dt0 is None:
        return None
    try:
        ratio = (float(t1) - float(t0)) / float(dt0)
    except (TypeError, ValueError, ZeroDivisionError, jax.errors.ConcretizationTypeError):
        return None
    if not (math.isfinite(ratio) and ratio > 0):
        return None
    return math.ceil(ratio * (1 - 1e-9)) + 1


def default_cap(t0, t1, dt0, rtol, atol, stop, adjoint, checkpoints, controller=None):
    """`(max_steps, checkpoints)` when the caller gave no `max_steps` (see `solve`)."""
    constant = controller is None or isinstance(controller, diffrax.ConstantStepSize)
    steps = (
        None if stop is not None or not constant else constant_step_count(t0, t1, dt0, rtol, atol)
    )
    if steps is None:
        return DEFAULT_MAX_STEPS, checkpoints
    if adjoint == "checkpoint" and checkpoints is None and steps <= EVERY_STEP_CHECKPOINTS_UP_TO:
        checkpoints = steps
    return steps, checkpoints


# PIDController fields that are plain numbers: made arrays of the solve's dtype, so that
# new values reuse the compiled program (Python floats would be static) and a float32
# solve is not promoted by float64 tolerances.
_PID_NUMBERS = (
    "rtol",
    "atol",
    "pcoeff",
    "icoeff",
    "dcoeff",
    "dtmin",
    "dtmax",
    "factormin",
    "factormax",
    "safety",
)


def controller_in_dtype(controller, dtype):
    """The caller's controller with its numbers (and `jump_ts`/`step_ts`) as arrays of
    `dtype`; other controllers unchanged."""

    def number(value):
        return (
            not isinstance(value, bool)
            and isinstance(value, (int, float, np.number))
            or (
                isinstance(value, (np.ndarray, jax.Array))
                and value.ndim == 0
                and jnp.issubdtype(value.dtype, jnp.floating)
            )
        )

    if isinstance(controller, diffrax.ClipStepSizeController):
        names = [n for n in ("step_ts", "jump_ts") if getattr(controller, n) is not None]
        controller = eqx.tree_at(
            lambda c: [c.controller] + [getattr(c, n) for n in names],
            controller,
            [controller_in_dtype(controller.controller, dtype)]
            + [jnp.asarray(getattr(controller, n), dtype) for n in names],
        )
    elif isinstance(controller, diffrax.PIDController):
        names = [n for n in _PID_NUMBERS if number(getattr(controller, n))]
        controller = eqx.tree_at(
            lambda c: [getattr(c, n) for n in names],
            controller,
            [jnp.asarray(getattr(controller, n), dtype) for n in names],
        )
    return controller


def controller_name(controller, adaptive) -> str:
    if controller is None:
        return "PIDController" if adaptive else "ConstantStepSize"
    if isinstance(controller, diffrax.ClipStepSizeController):
        return f"ClipStepSizeController({type(controller.controller).__name__})"
    return type(controller).__name__
