"""How the studies see a model's state space: flat, or the manifold the model declares.

Every study takes any `solvers.EnergySystem`. What a study may assume of it:

- **Required** (`solvers.EnergySystem`): `energy(x, args)`, `vector_field(t, x, args,
  flow)`, `residual(x, args)` (zero exactly at fixed points). A model that lacks a method
  a study needs is refused by `require` before anything is solved, in one line naming the
  method.
- **Geometry** (optional, `solvers.ManifoldEnergySystem`): `tangent_projection(x, w,
  args)` and the manifold coordinates. A model without them is *flat*: every direction of
  `x` is free, the projection is the identity and the tangent space is all of `x`'s
  space. The ET's projected flow keeps each token's mean and scale, so its tangent space
  has `D - 2` directions per free token.
- **Metric** (optional): `clock(x, args)`, an array broadcastable to `x`, constant on each
  block that the projection acts on, such that a tangent displacement `dx` moves the
  energy's coordinates by `clock * dx` (the ET: `gamma / s_A` per token). Default 1.
  `energy_coordinates(x, args)` gives those coordinates (the ET: `g = LayerNorm(x)`;
  default `x`).
- **Kinks** (optional): `kink_distances(x, args)`, the distances, in the energy's
  coordinates, from `x` to every surface where `E` is not twice differentiable (the ET
  with ReLU memories: each activation's plane), or `None` where `E` is C^2; and
  `one_sided(x, args, within, side)`, the model with every kink within `within` pinned
  to the side that gives the smallest (`"lower"`) or largest (`"upper"`) Hessian. A
  model without them is taken to be twice differentiable.
- **ET-only quantities** (optional): `token_scales(x, args)` (each token's `s_A`),
  `tangent_dimension(x, args)`; studies report them only where the model has them.
"""

import dataclasses
import functools
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse.linalg as spla

from et_ode import solvers

# What each study calls on the model, beyond nothing: checked by `require` up front.
STUDY_NEEDS = {
    "stability": ("energy", "residual", "vector_field"),
    "hessian_eigenvalues": ("residual",),
    "lyapunov_exponent": ("energy", "residual", "vector_field"),
    "finite_time_lyapunov": ("energy", "residual", "vector_field"),
    "convergence": ("energy", "residual", "vector_field"),
    "fixed_points": ("energy", "residual", "vector_field"),
    "long_horizon": ("energy", "residual", "vector_field"),
    "basins": ("energy", "residual", "vector_field"),
    "basin_continuation": ("energy", "residual", "vector_field"),
    # ET-only studies: the update's parts, LayerNorm coordinates, image and graph tasks.
    "contributions": ("energy", "vector_field", "update_parts"),
    "gradient_depth": ("energy", "residual", "vector_field", "norm"),
    "overshoot": ("patches", "encode_batch", "decode"),
    "temperature_sweep": ("patches", "encode_batch", "decode"),
    "graph_overshoot": ("encode", "conditions", "scores_of_states"),
}


PROTOCOL_METHODS = ("energy", "vector_field", "residual")
KINK_METHODS = ("kink_distances", "one_sided")


def require(model, study: str, methods=None) -> None:
    """Raise `ValueError`, in one line naming the first missing method, when `model`
    lacks a method that `study` calls (`STUDY_NEEDS[study]`, or `methods`)."""
    for group in (solvers.MANIFOLD_METHODS, KINK_METHODS):  # all of a group, or none
        present = [m for m in group if has(model, m)]
        if present and len(present) < len(group):
            missing = ", ".join(f"model.{m}(...)" for m in group if m not in present)
            raise ValueError(
                f"analysis.{study}: {type(model).__name__} declares {', '.join(present)} "
                f"but not {missing}; give all of {', '.join(group)} or none."
            )
    for method in methods if methods is not None else STUDY_NEEDS[study]:
        if not callable(getattr(model, method, None)):
            where = " (see solvers.EnergySystem)" if method in PROTOCOL_METHODS else ""
            raise ValueError(
                f"analysis.{study} needs model.{method}(...), which "
                f"{type(model).__name__} does not have{where}."
            )


def has(model, method: str) -> bool:
    """Whether `model` has the optional method `method`."""
    return callable(getattr(model, method, None))


def project(model, x, w, args):
    """`P w`: the tangent projection at `x`, the identity for a flat model."""
    if has(model, "tangent_projection"):
        return model.tangent_projection(x, w, args)
    return w


def clock(model, x, args):
    """The model's clock at `x` (broadcastable to `x`), 1 for a model without one."""
    if has(model, "clock"):
        return model.clock(x, args)
    return jnp.ones((), x.dtype)


def energy_coordinates(model, x, args):
    """The coordinates the energy is a function of (`x` for a model without them)."""
    if has(model, "energy_coordinates"):
        return model.energy_coordinates(x, args)
    return x


def token_scales(model, x, args):
    """Each token's scale, or `None` for a model that has none."""
    return model.token_scales(x, args) if has(model, "token_scales") else None


@eqx.filter_jit
def tangent_normalise(model, x, dx, args, power: float = 1.0):
    """Project `dx` onto the tangent space at `x` and scale it so that `|clock^power P dx|`
    is 1: with `power=1` the displacement of the energy's coordinates (`|dg|` on the ET),
    with `power=0.5` the metric in which the linearised projected flow is symmetric
    (`C^(1/2) dx`). Returns it and that size before scaling."""
    dx = project(model, x, dx, args)
    size = jnp.linalg.norm(clock(model, x, args) ** power * dx)
    return dx / size, size


class _Hashable:
    """The non-array part of a pytree as a static argument of `jax.jit`: compared and
    hashed by its flattened leaves and structure (what `eqx.filter_jit` does on every
    call, done here once)."""

    def __init__(self, tree):
        leaves, self.treedef = jax.tree.flatten(tree)
        self.leaves = tuple(leaves)
        self._hash = hash((self.treedef, self.leaves))

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        return (
            isinstance(other, _Hashable)
            and self._hash == other._hash
            and self.treedef == other.treedef
            and self.leaves == other.leaves
        )

    def tree(self):
        return jax.tree.unflatten(self.treedef, self.leaves)


@functools.partial(jax.jit, static_argnames=("static", "squared"))
def _shifted_apply(dynamic, static, w, shift, squared):
    """`A w + shift (w - P w)`, or `A (A w) + shift (w - P w)` with `squared`: `A` the
    tangent operator, `P` the tangent projection."""
    model, x, args, pre, post = eqx.combine(dynamic, static.tree())
    w = jnp.reshape(w, x.shape).astype(x.dtype)
    out = _apply(model, x, args, pre, post, w)
    if squared:
        out = _apply(model, x, args, pre, post, out)
    return (out + shift * (w - project(model, x, w, args))).reshape(-1)


@functools.partial(jax.jit, static_argnames=("static", "squared", "arnoldi_steps"))
def _krylov_steps(dynamic, static, shift, squared, arnoldi_steps, basis, projected, first):
    """`arnoldi_steps` on `_shifted_apply`'s operator (`TangentOperator.krylov_steps`)."""
    linear = lambda w: _shifted_apply(dynamic, static, w, shift, squared)  # noqa: E731
    return arnoldi_steps(linear, basis, projected, first)


@dataclasses.dataclass
class TangentOperator:
    """The Jacobian of the residual at `x`, restricted to the tangent space and made
    symmetric by the clock, as a matrix-free map on flat float64 vectors of `x`'s size.

    With `J = d residual / dx` and `C` the clock, `coordinates="g"` applies `P J C^-1 P`
    (the Riemannian Hessian of `E` in the energy's coordinates) and `"x"` applies
    `P C^(1/2) J C^(-1/2) P` (`C^(1/2) H C^(1/2)`: its eigenvalues over tau are the decay
    rates of the linearised projected flow). Normal directions map to zero.

    Lanczos calls the operator hundreds to thousands of times: `linear_operator` calls
    one `jax.jit` program whose non-array part is hashed once here, not per call.
    """

    model: Any
    x: jax.Array
    args: Any
    coordinates: str

    def __post_init__(self):
        if self.coordinates not in ("g", "x"):
            raise ValueError(f"coordinates must be 'g' or 'x' (got {self.coordinates!r}).")
        c = jnp.broadcast_to(clock(self.model, self.x, self.args), self.x.shape)
        self.clock = np.asarray(c, np.float64)
        self.pre = 1.0 / c if self.coordinates == "g" else c**-0.5
        self.post = jnp.ones_like(c) if self.coordinates == "g" else c**0.5
        self.size = int(self.x.size)
        self.flat = not has(self.model, "tangent_projection")
        dynamic, static = eqx.partition(
            (self.model, self.x, self.args, self.pre, self.post), eqx.is_array
        )
        self._dynamic, self._static = dynamic, _Hashable(static)

    def linear_operator(self, shift: float = 0.0, squared: bool = False):
        """A scipy `LinearOperator` on flat float64 vectors: `A v + shift (v - P v)`
        (`A A v + ...` with `squared`), the normal directions (eigenvalue 0 of `A`)
        moved to `shift`."""
        shift_array = jnp.asarray(shift, self.x.dtype)

        def matvec(v):
            out = _shifted_apply(self._dynamic, self._static, np.ravel(v), shift_array, squared)
            return np.asarray(out, np.float64).reshape(np.shape(v))

        return spla.LinearOperator((self.size, self.size), matvec=matvec, dtype=np.float64)

    def krylov_steps(self, arnoldi_steps, shift: float = 0.0, squared: bool = False):
        """`steps(basis, projected, first)` for a Krylov eigen-solver: the traceable
        `arnoldi_steps(linear, basis, projected, first)` with `linear` the operator as in
        `linear_operator` (shifted on the normal space, squared where asked), all steps
        of a call in one compiled program (one compilation per shapes)."""
        shift_array = jnp.asarray(shift, self.x.dtype)
        return functools.partial(
            _krylov_steps, self._dynamic, self._static, shift_array, squared, arnoldi_steps
        )

    def dense(self) -> tuple[np.ndarray, np.ndarray]:
        """`(matrix, basis)`: the operator in an orthonormal basis of the tangent space
        (`[m, m]`) and that basis (`[size, m]`, columns in flattened `x`)."""
        eye = jnp.eye(self.size, dtype=self.x.dtype).reshape((self.size,) + self.x.shape)
        if self.flat:
            basis = np.eye(self.size)
        else:
            p = np.asarray(_project_columns(self.model, self.x, self.args, eye), np.float64)
            p = p.reshape(self.size, self.size).T
            values, vectors = np.linalg.eigh(0.5 * (p + p.T))
            basis = vectors[:, values > 0.5]
        rows = _apply_columns(self.model, self.x, self.args, self.pre, self.post, eye)
        full = np.asarray(rows, np.float64).reshape(self.size, self.size).T
        return basis.T @ full @ basis, basis


def _apply(model, x, args, pre, post, w):
    dx = project(model, x, w, args) * pre
    jx = jax.jvp(lambda x_: model.residual(x_, args), (x,), (dx,))[1]
    return project(model, x, jx * post, args)


@eqx.filter_jit
def _apply_columns(model, x, args, pre, post, columns):
    return jax.vmap(lambda w: _apply(model, x, args, pre, post, w))(columns)


@eqx.filter_jit
def _project_columns(model, x, args, columns):
    return jax.vmap(lambda w: project(model, x, w, args))(columns)


def tangent_dimension(model, x, args) -> int | None:
    """The tangent space's dimension: `x.size` for a flat model, the model's
    `tangent_dimension` where it has one, else `None` (counted by the dense method)."""
    if not has(model, "tangent_projection"):
        return int(np.size(x))
    if has(model, "tangent_dimension"):
        return int(model.tangent_dimension(x, args))
    return None
