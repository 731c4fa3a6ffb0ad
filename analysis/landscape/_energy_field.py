"""An energy model's fixed points as the zeros of a field that `continuation` can follow:
manifold coordinates, the parameter, and the states back in the model's own coordinates.

In ambient coordinates every fixed point of the ET is singular: the projected flow keeps
each token's scale and mean, so the Jacobian has a zero eigenvalue along each of them,
and Newton's bordered system is singular at every point of the branch. The branch is
therefore followed in the manifold coordinates `y` of the model
(`solvers.ManifoldEnergySystem`; a model without them is flat, `y = x`), with

    v(y) = to_manifold(from_manifold(y, x_ref)),   x(y) = from_manifold(v(y), x_ref),
    f(y, p) = D to_manifold(x) [dx/dt] - NORMAL_RATE (y - v(y)),

where `dx/dt` is the model's projected field at `x(y)` and parameter `p` (the
projected flow: the native one inflates the tokens and has no fixed points). The first term is the
flow's velocity in manifold coordinates (so on the manifold the linearisation of `f` is
the linearised flow, with its rates); the second pins the directions off the manifold
(each token's scale of `y`, for the ET) with the rate `-NORMAL_RATE`, far below the
flow's slowest rates, so they never cross zero and never rank among the leading
eigenvalues. Coordinates that `from_manifold` ignores (the ET's clamped tokens) are
pinned to their start the same way. The zeros of `f` are exactly the fixed points on
the manifold through `x_ref`.

The parameter is a function `(model, args, p) -> (model, args)` applied inside the
compiled field (so `p` is traced: one compilation serves the branch), or the name of one
of the model's `lenses` (the ET's: `et_ode.core` names them).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from et_ode import solvers
from et_ode.vocab import Flow

from .._geometry import has, require
from ._branch_kernels import DENSE_MAX, FlatField, leading_eigen

# The rate (1/time) given to the directions off the manifold and to pinned coordinates.
NORMAL_RATE = 1e3


def parameter_function(model, parameter):
    """`parameter` as a function `(model, args, p) -> (model, args)`: itself, or the lens
    of that name in `model.lenses` (the parameters the model names, as the ET's
    `"beta"`, `"memory_scale"` and `"field_strength"`)."""
    if callable(parameter):
        return parameter
    lenses = getattr(model, "lenses", None) or {}
    if parameter not in lenses:
        names = ", ".join(repr(name) for name in lenses) or "none"
        raise ValueError(
            f"parameter={parameter!r} is not a lens of this model ({type(model).__name__}: "
            f"{names}); pass one of them or a function (model, args, p) -> (model, args)."
        )
    return lenses[parameter]


def _parts(model, x_ref, args, y, p, parameter):
    model_p, args_p = parameter(model, args, p)
    system = solvers.as_manifold_system(model_p)
    v = system.to_manifold(system.from_manifold(y, x_ref, args_p), args_p)
    x = system.from_manifold(v, x_ref, args_p)
    return model_p, args_p, system, v, x


def manifold_field(y, p, packed):
    """`f(y, p)` (module docstring) on the projected flow; `packed = (model, x_ref,
    args, y_ref, pinned, parameter)`, the last one static."""
    model, x_ref, args, y_ref, pinned, parameter = packed
    model_p, args_p, system, v, x = _parts(model, x_ref, args, y, p, parameter)
    dx = model_p.vector_field(0.0, x, args_p, "projected")
    dv = jax.jvp(lambda z: system.to_manifold(z, args_p), (x,), (dx,))[1]
    return jnp.where(pinned, -NORMAL_RATE * (y - y_ref), dv - NORMAL_RATE * (y - v))


@eqx.filter_jit
def state_and_residual(y, p, packed):
    """The ambient state `x(y)` of the point `y` at `p`, and the RMS of the model's
    residual there (zero at a fixed point). One point per call: one compilation serves
    every branch, whatever its length."""
    model, x_ref, args, _, _, parameter = packed
    model_p, args_p, _, _, x = _parts(model, x_ref, args, y, p, parameter)
    return x, solvers.rms(model_p.residual(x, args_p))


@eqx.filter_jit
def _pinned(model, x_ref, args, parameter, p):
    """Coordinates of `y` that `x(y)` does not depend on (a JVP in a direction with no
    zero entry)."""
    y_ref = solvers.as_manifold_system(model).to_manifold(x_ref, args)
    # Uniform in [1, 2): a normal draw's inverse error function, fused into the JVP,
    # took XLA 30 s to compile for an H100 (0.5 s with this; docs/how-to/devices.md).
    direction = 1.0 + jax.random.uniform(jax.random.key(0), x_ref.shape, x_ref.dtype)
    moved = jax.jvp(
        lambda y: _parts(model, x_ref, args, y, p, parameter)[4], (y_ref,), (direction,)
    )[1]
    return y_ref, moved == 0


def system_field(model, x0, p0, args, parameter):
    """The field, the start `y0` and the packed arguments for `continuation` on an
    energy model (module docstring)."""
    require(model, "continuation", ("energy", "vector_field", "residual"))
    if parameter is None:
        names = ", ".join(getattr(model, "lenses", None) or {}) or "none named"
        raise ValueError(
            "continuation of an energy model needs parameter=: one of its lenses "
            f"({names}) or a function (model, args, p) -> (model, args)."
        )
    function = parameter_function(model, parameter)
    x0 = jnp.asarray(x0)
    y_ref, pinned = _pinned(model, x0, args, function, jnp.asarray(p0, x0.dtype))
    return manifold_field, y_ref, (model, x0, args, y_ref, pinned, function)


def _unchanged(model, args, p):
    return model, args


def _flat_field(x, p, packed):
    """A flat model's field with its flow, as `f(x, p, args)` (`p` unused)."""
    model, args, flow = packed
    return model.vector_field(0.0, x, args, flow)


def flow_eigenvalues(model, x, args, k: int, flow: Flow = "projected") -> np.ndarray:
    """The `k` eigenvalues of largest real part (descending, complex, `[k]`) of the
    flow's Jacobian at the fixed point `x`: on a flat model (no manifold) that of its
    `vector_field` with `flow`; on a model with a manifold, that of its projected flow in
    the manifold's coordinates, `df/dy` (module docstring, no parameter), whose
    directions off the manifold and pinned coordinates sit at `-NORMAL_RATE`, below the
    flow's own (the native flow leaves the manifold and has no fixed points on the
    ET). Dense up to `DENSE_MAX` unknowns, else Krylov-Schur on JVPs. For a field that
    is not a gradient, where the residual's Jacobian is no Hessian: `x` is linearly
    stable when every real part is negative."""
    x = jnp.asarray(x)
    if has(model, "tangent_projection"):  # `require`: all manifold methods or none
        field, y_ref, packed = system_field(model, x, 0.0, args, _unchanged)
    else:
        field, y_ref, packed = _flat_field, x, (model, args, flow)
    y = jnp.concatenate([jnp.ravel(y_ref), jnp.zeros(1, y_ref.dtype)])
    values, _, _ = leading_eigen(
        FlatField(field, tuple(x.shape)), y, packed, k, dense=y.size <= DENSE_MAX
    )
    return np.asarray(values)
