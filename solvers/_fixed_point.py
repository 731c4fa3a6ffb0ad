"""A direct fixed-point finder: Newton's method on the residual over the manifold.

A reference for the integrating fixed-point stop, and a way to reach saddles that a
descending flow avoids. It solves, over unconstrained `y` with `v(y) =
to_manifold(from_manifold(y, x_ref))`, the square system `R(y) = F(v(y)) + y - v(y)`:
`R = 0` forces `y = v(y)` (on the manifold) and `F = G = 0` (a critical point of `E`).
"""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import optimistix as optx

from ._stop import rms


@dataclasses.dataclass(frozen=True)
class FixedPointResult:
    """`x: [N, D]` the fixed point; `residual_rms`: RMS of G there; `energy`: E there;
    `steps`: Newton iterations; `success`: optimistix reported convergence."""

    x: jax.Array
    residual_rms: jax.Array
    energy: jax.Array
    steps: jax.Array
    success: jax.Array


@eqx.filter_jit
def _newton(model, x_init, args, tol, max_steps, linear):
    def v_of(y):
        return model.to_manifold(model.from_manifold(y, x_init, args), args)

    def root_fn(y, _):
        v = v_of(y)
        return model.residual(model.from_manifold(v, x_init, args), args) + y - v

    if linear == "dense":
        linear_solver = lx.AutoLinearSolver(well_posed=None)
    else:
        linear_solver = lx.GMRES(rtol=tol, atol=tol, restart=50, stagnation_iters=50)
    solver = optx.Newton(rtol=tol, atol=tol, linear_solver=linear_solver)
    y0 = model.to_manifold(x_init, args)
    sol = optx.root_find(root_fn, solver, y0, max_steps=max_steps, throw=False)
    x = model.from_manifold(v_of(sol.value), x_init, args)
    return x, sol.stats["num_steps"], sol.result == optx.RESULTS.successful


def find_fixed_point(model, x_init, *, args=None, tol=1e-10, max_steps=100, linear="dense"):
    """Newton's method for a critical point of `E` on the manifold through `x_init`
    (a `solvers.ManifoldEnergySystem`; `x_init: [N, D]`, one sample). It converges to
    the critical point nearest `x_init`: a minimum, or a saddle. `linear`: `"dense"`
    (materialise the Jacobian: small problems) or `"gmres"` (matrix-free).

    **Returns:** a `FixedPointResult`.
    """
    x_init = jnp.asarray(x_init)
    if x_init.ndim != 2:
        raise ValueError(f"find_fixed_point takes one sample [N, D]; got shape {x_init.shape}.")
    if linear not in ("dense", "gmres"):
        raise ValueError(f"linear must be 'dense' or 'gmres' (got {linear!r}).")
    x, steps, ok = _newton(model, x_init, args, jnp.asarray(tol, x_init.dtype), max_steps, linear)
    return FixedPointResult(
        x=x, residual_rms=rms(model.residual(x, args)), energy=model.energy(x, args),
        steps=steps, success=ok,
    )
