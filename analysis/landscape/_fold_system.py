"""The fold curve's extended system: the field with its second parameter (`_Problem`), the
bordered null vectors and the cusp test function, the minimally augmented field that
`continuation` follows (`_augmented`), Newton on the extended system at a cusp
(`_locate`) and the cusp's normal-form coefficient (`cusp_coefficient`)."""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._branch_kernels import newton


class _Problem(eqx.Module):
    """The user's field and how the second parameter enters it: `f(y, p, q)` of a flat
    state `y` (`[n]`), and the pieces of the bordered systems."""

    field: Callable = eqx.field(static=True)
    second: Callable = eqx.field(static=True)
    shape: tuple[int, ...] = eqx.field(static=True)

    def f(self, y, p, q, args):
        """`f` flat (`[n]`) at the flat state `y`, `p` and `q`."""
        value = self.field(y.reshape(self.shape), p, self.second(args, q))
        return jnp.ravel(value).astype(y.dtype)

    def jacobian(self, y, p, q, args):
        """`df/dx` (`[n, n]`) at `(y, p, q)`."""
        return jax.jacfwd(lambda z: self.f(z, p, q, args))(y)

    def null_vectors(self, y, p, q, args, b, c):
        """`(v, g, w)`: the bordered solutions (module docstring) at `(y, p, q)`."""
        jac = self.jacobian(y, p, q, args)
        n = y.size
        last = jnp.zeros(n + 1, y.dtype).at[-1].set(1.0)
        bordered = jnp.block([[jac, b[:, None]], [c[None, :], jnp.zeros((1, 1), y.dtype)]])
        right = jnp.linalg.solve(bordered, last)
        left = jnp.linalg.solve(bordered.T, last)
        return right[:n], right[n], left[:n]

    def second_derivative(self, y, p, q, args, u, v):
        """`d^2 f/dx^2 [u, v]` (`[n]`), a JVP of a JVP."""
        f = lambda z: self.f(z, p, q, args)  # noqa: E731
        return jax.jvp(lambda z: jax.jvp(f, (z,), (u,))[1], (y,), (v,))[1]

    def tests(self, y, p, q, args, v, w):
        """The test functions (`[1]`: the cusp's) at `(y, p, q)`, whose bordered
        solutions are `v` and `w`."""
        nv, nw = jnp.linalg.norm(v), jnp.linalg.norm(w)
        cusp = jnp.dot(w, self.second_derivative(y, p, q, args, v, v)) / (nw * nv * nv)
        return jnp.stack([cusp])


def _augmented(z, q, packed):
    """`G(z; q)` (module docstring) of `z = (x flat, p)`: the field followed by
    `continuation`; `packed = (problem, args, b, c)`."""
    problem, args, b, c = packed
    y, p = z[:-1], z[-1]
    _, g, _ = problem.null_vectors(y, p, q, args, b, c)
    return jnp.concatenate([problem.f(y, p, q, args), g[None]])


@eqx.filter_jit
def _point_data(problem, y, p, q, args, b, c):
    """At a point of the curve: `df/dx`, the test functions, the cosines between the
    null vectors and the borders (`c . v / |v|`, `b . w / |w|`, the borders unit), and
    the unit null vectors `v / |v|`, `w / |w|` (their signs set by the borders)."""
    jac = problem.jacobian(y, p, q, args)
    v, _, w = problem.null_vectors(y, p, q, args, b, c)
    nv, nw = jnp.linalg.norm(v), jnp.linalg.norm(w)
    cosines = jnp.stack([jnp.dot(c, v) / nv, jnp.dot(b, w) / nw])
    return jac, problem.tests(y, p, q, args, v, w), cosines, v / nv, w / nw


@eqx.filter_jit
def _locate(problem, u0, args, b, c, which: int, tol, max_steps: int):
    """Newton (`_branch_kernels.newton`, dense) on `(f, g, test_which) = 0` in `u = (x
    flat, p, q)` from `u0`: `(u, RMS of the system there, converged: that RMS within
    `tol`)`."""

    def system(u, _):
        y, p, q = u[:-2], u[-2], u[-1]
        v, g, w = problem.null_vectors(y, p, q, args, b, c)
        test = problem.tests(y, p, q, args, v, w)[which]
        return jnp.concatenate([problem.f(y, p, q, args), g[None], test[None]])

    def step(u, it, res):  # dense: the extended system has `n + 2` unknowns
        return jnp.linalg.solve(jax.jacfwd(lambda v: system(v, None))(u), -system(u, None))

    u, _, residual = newton(lambda u: system(u, None), step, u0, tol, max_steps)
    return u, residual, residual <= tol


@eqx.filter_jit
def _bilinear(problem, y, p, q, args, u, v):
    """`B(u, v) = d^2f/dx^2 [u, v]` (`[n]`) at `(y, p, q)`."""
    return problem.second_derivative(y, p, q, args, u, v)


@eqx.filter_jit
def _trilinear(problem, y, p, q, args, u):
    """`C(u, u, u) = d^3f/dx^3 [u, u, u]` (`[n]`) at `(y, p, q)`."""
    return jax.jvp(lambda z: problem.second_derivative(z, p, q, args, u, u), (y,), (u,))[1]


def _null(matrix):
    """Unit right and left null vectors of a singular `[n, n]` matrix (float64)."""
    u, _, vt = np.linalg.svd(matrix)
    return vt[-1], u[:, -1]


class _At:
    """The multilinear forms of `f` at one point, in float64 numpy."""

    def __init__(self, problem, y, p, q, args):
        self.call = (problem, y, p, q, args)
        self.dtype = y.dtype

    def B(self, u, v):
        as_array = lambda a: jnp.asarray(a, self.dtype)  # noqa: E731
        return np.asarray(_bilinear(*self.call, as_array(u), as_array(v)), np.float64)

    def C(self, u):
        return np.asarray(_trilinear(*self.call, jnp.asarray(u, self.dtype)), np.float64)


def cusp_coefficient(forms: _At, jac) -> float:
    """The cusp's `c` (module docstring) where `jac = df/dx` has the simple zero
    eigenvalue of a cusp."""
    q0, p0 = _null(jac)
    p0 = p0 / float(p0 @ q0)
    bqq = forms.B(q0, q0)
    # J h2 = -B(q0, q0) with <p0, h2> = 0; at a cusp <p0, B(q0, q0)> = 0 makes it solvable
    n = q0.size
    bordered = np.block([[jac, p0[:, None]], [p0[None, :], np.zeros((1, 1))]])
    h2 = np.linalg.solve(bordered, np.concatenate([-bqq, [0.0]]))[:n]
    return float(p0 @ (forms.C(q0) + 3.0 * forms.B(q0, h2))) / 6.0
