"""The implicit adjoint: gradients at a fixed point of the residual, on the manifold.

At a fixed point the state has coordinates `v*` on the manifold of the projected flow
(`model.to_manifold`), with `F(v, theta) = G(from_manifold(v, x0))` zero at `v*`. With
`P` the tangent projection at `v*` and `J = dF/dv`, the operator
`A = P J P + (I - P)` is non-singular; the implicit function theorem gives, for a loss
`l(v*)`, the adjoint `A^T lam = P dl/dv`, `lam <- P lam`, and
`dl/dtheta = -lam^T dF/dtheta`. `theta` is everything `F` depends on: the model's
parameters, the conditions in `args`, and `x0` (through the invariants it fixes:
each token's scale, and clamped tokens). The explicit dependence of the state on `x0`
and on the LayerNorm's parameters through `from_manifold` is differentiated by JAX
outside this function. `A` is applied by JVPs/VJPs and solved matrix-free with GMRES
(lineax): the `(N D)^2` Jacobian is never built. In a lenient solve (`throw=False`) a
GMRES run that stops short of its tolerance (stagnation or its step cap, as on a sample
that reached the time cap before its fixed point) gives its last iterate, the
least-squares solution over its Krylov space, instead of raising; a non-finite one
gives a zero gradient for that sample. diffrax's `ImplicitAdjoint` does not
apply here: it assumes `dx/dt = 0` at the end, which is false on the native flow and
on the manifold normal directions.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx

from ._protocol import batched_args_axes


def _residual_on_manifold(v, diff_args):
    model, args, x0 = diff_args
    return model.residual(model.from_manifold(v, x0, args), args)


@eqx.filter_custom_vjp
def _fixed_point_coordinates(diff_args, v_star, tol, lenient):
    del diff_args, tol, lenient
    return v_star


@_fixed_point_coordinates.def_fwd
def _fixed_point_fwd(perturbed, diff_args, v_star, tol, lenient):
    del perturbed, tol, lenient
    return v_star, None


@_fixed_point_coordinates.def_bwd
def _fixed_point_bwd(residuals, v_bar, perturbed, diff_args, v_star, tol, lenient):
    del residuals, perturbed
    model, args, x0 = diff_args
    x_star = model.from_manifold(v_star, x0, args)
    project = lambda w: model.tangent_projection(x_star, w, args)  # noqa: E731
    _, vjp_v = jax.vjp(lambda v: _residual_on_manifold(v, diff_args), v_star)

    def a_transpose(lam):
        p_lam = project(lam)
        return project(vjp_v(p_lam)[0]) + lam - p_lam

    operator = lx.FunctionLinearOperator(a_transpose, jax.eval_shape(lambda: v_star))
    gmres = lx.GMRES(rtol=tol, atol=tol, restart=40, stagnation_iters=40, max_steps=2000)
    lam = project(lx.linear_solve(operator, project(v_bar), gmres, throw=not lenient).value)
    if lenient:
        lam = jnp.where(jnp.all(jnp.isfinite(lam)), lam, 0.0)
    _, vjp_theta = eqx.filter_vjp(lambda d: _residual_on_manifold(v_star, d), diff_args)
    (grads,) = vjp_theta(-lam)
    return grads


def default_implicit_tol(dtype) -> float:
    """The GMRES tolerance of the implicit gradient unless one is given: 1e-10 in
    float64, 1e-5 otherwise."""
    return 1e-10 if jnp.dtype(dtype) == jnp.float64 else 1e-5


def implicit_fixed_point(model, x0, args, x_star, *, tol, batched, args_batched, lenient=False):
    """`x_star` (a converged fixed point, computed without gradients) with gradients
    attached by the implicit function theorem. Shapes as `x0`. `lenient`: an
    unconverged GMRES solve gives its last iterate instead of raising."""

    def one(x0_, args_, x_star_):
        v_star = jax.lax.stop_gradient(model.to_manifold(x_star_, args_))
        v = _fixed_point_coordinates((model, args_, x0_), v_star, tol, bool(lenient))
        return model.from_manifold(v, x0_, args_)

    if batched:
        one = jax.vmap(one, in_axes=(0, batched_args_axes(args) if args_batched else None, 0))
    return one(x0, args, x_star)
