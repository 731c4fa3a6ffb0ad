"""`validate`: the checks `solve` runs on the model and the initial state on top of
those of its options (`._options`), with their limits (the dense-Jacobian state size, the
steps that the times' round-off resolves) and the warning about backsolve beyond its
stable horizon."""

import math
import warnings

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._defaults import DENSE_MAX, TIME_ULPS, is_traced, time_ulp
from ._options import _check_options
from ._presets import _label
from ._protocol import MANIFOLD_METHODS

# Beyond this many tau backsolve is warned about: its gradient error against the exact
# one grows about tenfold per 0.1 tau past 1.2 tau on the projected flow, and slowly on the
# native flow (whose clock slows like 1/t). The measured table is the committed record of
# `python -m benchmarks.backsolve` (docs/mathematics.md renders it;
# tests/test_gradients.py checks its corners).
BACKSOLVE_STABLE_HORIZON = {"native": 100.0, "projected": 1.2}


def _check_time_resolution(t0, t1, dt0, dtype) -> None:
    """Refuse constant steps `dt0` (concrete) shorter than `TIME_ULPS` units of round-off
    of the times in `dtype` (`default_dtmin`'s floor for adaptive steps): `t + dt0` then
    rounds to `t` or to a step of another length, and the solve runs steps of the wrong
    sizes, silently."""
    if is_traced((t0, t1, dt0)) or dt0 is None:
        return
    try:
        t0, t1, dt0 = float(t0), float(t1), float(dt0)
    except (TypeError, ValueError):
        return
    floor = TIME_ULPS * time_ulp(t0, t1, dtype)
    if math.isfinite(floor) and dt0 < floor:
        raise ValueError(
            f"dt0 = {dt0:g} is below what {jnp.dtype(dtype).name} resolves at t = "
            f"{max(abs(t0), abs(t1)):g} ({TIME_ULPS} units of round-off: {floor:.3g}): the "
            "steps would round to other lengths. Shift the times towards 0 (t0=0; a model "
            "that does not read t is the same), use a longer dt0, or float64."
        )


def validate(
    model,
    x0,
    args,
    *,
    solver,
    flow,
    adjoint,
    t0,
    t1,
    dt0,
    rtol,
    atol,
    stop,
    save,
    save_energy,
    max_steps,
    stepsize_controller,
    dtmin,
    args_batched,
    traced,
    deferred,
    sde=False,
):
    for method in ("energy", "vector_field", "residual"):
        if not callable(getattr(model, method, None)):
            raise ValueError(
                f"model has no {method}() method; solvers.solve needs an object "
                "satisfying solvers.EnergySystem (energy, vector_field, residual)."
            )
    adaptive, preset = _check_options(
        solver=solver,
        flow=flow,
        adjoint=adjoint,
        t0=t0,
        t1=t1,
        dt0=dt0,
        rtol=rtol,
        atol=atol,
        stop=stop,
        save=save,
        save_energy=save_energy,
        max_steps=max_steps,
        stepsize_controller=stepsize_controller,
        dtmin=dtmin,
        deferred=deferred,
        sde=sde,
    )
    if x0.ndim not in (2, 3):
        raise ValueError(f"x0 must have shape [N, D] or [B, N, D]; got shape {tuple(x0.shape)}.")
    if not jnp.issubdtype(x0.dtype, jnp.floating):
        raise ValueError(f"x0 must be a floating-point array (got dtype {x0.dtype}).")
    size = int(np.prod(x0.shape[-2:]))
    if preset.implicit and size > DENSE_MAX:
        raise ValueError(
            f"solver {_label(solver)} is implicit with a dense Jacobian: each Jacobian "
            f"costs N D = {size} JVPs and an (N D)^2 factorisation (on the shipped core, "
            f"N D = 4096: minutes, docs: benchmarks), above the limit of "
            f'{DENSE_MAX} state entries. Use solver="auto" (explicit while '
            "not stiff, matrix-free implicit steps while stiff) with rtol and atol."
        )
    params = jax.tree.leaves(eqx.filter(model, eqx.is_inexact_array))
    if params and jnp.result_type(x0, *params) != x0.dtype:
        raise ValueError(
            f"x0 has dtype {x0.dtype} but the model's parameters promote it to "
            f"{jnp.result_type(x0, *params)}; cast x0 to the model's dtype "
            "(x0.astype(...)) or build the model with dtype=x0.dtype."
        )
    if not adaptive and (
        stepsize_controller is None or isinstance(stepsize_controller, diffrax.ConstantStepSize)
    ):
        _check_time_resolution(t0, t1, dt0, x0.dtype)
    finite = None if traced else jnp.all(jnp.isfinite(x0))
    if not (finite is None or is_traced(finite) or bool(finite)):  # traced inside jit
        raise ValueError("x0 contains NaN or inf values; pass a finite initial state.")
    if hasattr(model, "check_inputs"):
        batch = (x0.shape[0],) if (x0.ndim == 3 and args_batched) else ()
        model.check_inputs(tuple(x0.shape[-2:]), args, batch)
    if args_batched and x0.ndim != 3:
        raise ValueError("args_batched=True needs a batched x0 of shape [B, N, D].")
    tau = getattr(model, "tau", 1.0)
    if not (isinstance(tau, (int, float)) and tau > 0):
        raise ValueError(f"model.tau must be positive (got {tau}).")
    if adjoint == "backsolve" and not is_traced((t0, t1)):  # traced: no warning
        horizon = (float(t1) - float(t0)) / float(tau)
        if horizon > BACKSOLVE_STABLE_HORIZON[flow]:
            warnings.warn(
                f"adjoint='backsolve' on the {flow} flow over {horizon:g} tau: integrating "
                "the flow backwards amplifies the solver's error (exponentially where the flow "
                f"contracts fast), and beyond {BACKSOLVE_STABLE_HORIZON[flow]:g} tau its "
                "gradients were measured to be unreliable (the horizon depends on the "
                "weights). Prefer adjoint='checkpoint' (exact) or 'implicit' (at a fixed "
                "point).",
                stacklevel=3,
            )
    if adjoint == "implicit":
        present = [m for m in MANIFOLD_METHODS if callable(getattr(model, m, None))]
        if present and len(present) < len(MANIFOLD_METHODS):
            raise ValueError(
                f"adjoint='implicit' on a model that declares {', '.join(present)} but not "
                f"all of {', '.join(MANIFOLD_METHODS)} (solvers.ManifoldEnergySystem): give "
                "all three, or none for a flat model."
            )
    return adaptive, preset
