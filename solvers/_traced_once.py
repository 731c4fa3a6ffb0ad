"""The model's methods as a solve program calls them: each behind its own `jit`, so that
JAX traces it once per program, however many times diffrax calls it.

diffrax calls the vector field from several places of one solve (the step, the initial
step size, the first-same-as-last stage, the implicit solvers' Jacobian products, each
retrace of the loop's body), the residual from the fixed-point stop and the statistics,
the energy from what is saved. Each call would trace the model again, `jax.grad` of its
energy included. A nested `jit` is traced at its first call and found in JAX's cache at
the others (same model structure, shapes and dtypes); XLA inlines it when it compiles, so
the compiled program is the same. `EnergyTransformer`'s own methods are jitted already;
these wrappers give any `EnergySystem` a researcher brings the same. Measured:
docs/lab-notes.md#compile-time-and-xlas-cpu-settings.
"""

import equinox as eqx


@eqx.filter_jit
def vector_field(model, t, x, args, flow):
    """`model.vector_field(t, x, args, flow)`, refused (when traced) unless it has `x`'s
    shape and dtype."""
    return like_state(model.vector_field(t, x, args, flow), x, "vector_field")


@eqx.filter_jit
def residual(model, x, args):
    """`model.residual(x, args)`, refused (when traced) unless it has `x`'s shape and
    dtype."""
    return like_state(model.residual(x, args), x, "residual")


def like_state(out, x, method: str):
    """`out`, checked against the state `x` it was computed from: a field of another
    shape would be broadcast into the state by the solver's arithmetic (a `[N, 1]` or
    scalar field integrates as if every entry had it), another dtype promoted or cut."""
    shape, dtype = getattr(out, "shape", None), getattr(out, "dtype", None)
    if shape != x.shape or dtype != x.dtype:
        got = f"shape {shape}, dtype {dtype}" if shape is not None else type(out).__name__
        raise ValueError(
            f"model.{method} must return an array of the state's shape {tuple(x.shape)} "
            f"and dtype {x.dtype} (got {got}): return one entry per state entry, in the "
            "state's dtype."
        )
    return out


@eqx.filter_jit
def energy(model, x, args):
    """`model.energy(x, args)`."""
    return model.energy(x, args)
