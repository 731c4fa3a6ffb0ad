"""What `solvers` needs of a model: the energy-system protocols.

`solvers` integrates any object with these methods; it never imports a model package.
`args` is a PyTree of conditions defined by the model and passed through diffrax
untouched. All methods act on one sample `x: [N, D]`; batches are `jax.vmap`-ed.
"""

from typing import Any, Protocol, TypeGuard, runtime_checkable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Real

from et_ode.vocab import Flow

State = Float[Array, "N D"]
# What `solve` takes as its initial state: one sample `[N, D]` or a batch `[B, N, D]`.
# Real, not only floating: an integer array reaches solve's own check, whose message
# asks for a floating-point one.
InitialState = Real[ArrayLike, "N D"] | Real[ArrayLike, "B N D"]
# A real number that may be traced: a Python or NumPy number, or a 0-d array (a tracer
# when `solve` runs under `jax.jit` or `jax.vmap`: a horizon or a tolerance swept by one
# compiled program). `ArrayLike` without its complex and NumPy bool scalars, which `Real`
# refuses at run time anyway: so that a type checker knows `float(value)` is defined.
RealScalar = Real[Array | np.ndarray | np.integer | np.floating | int | float, ""]


@runtime_checkable
class EnergySystem(Protocol):
    """The minimal protocol for `solvers.solve`.

    - `energy(x, args) -> scalar`: the energy `E` at state `x`.
    - `vector_field(t, x, args, flow) -> dx/dt`: `flow` is `"native"` or
      `"projected"`.
    - `residual(x, args) -> G`: zero exactly at fixed points; the fixed-point stop tests
      its RMS, never `|dx/dt|` (which need not vanish at a fixed point).

    Optional: `check_inputs(x_shape, args, args_batch)` raising `ValueError` for a
    sample shape or conditions the model cannot take; `tau` (default 1). The studies of
    `et_ode.analysis` use further optional methods where a model has them (its clock,
    its kinks, token scales: see `et_ode.analysis`'s geometry module).

    A model without the `ManifoldEnergySystem` methods is flat: `find_fixed_point` and
    the implicit adjoint then see it through `_protocol.FlatManifold` (the state
    itself is the manifold).
    """

    def energy(self, x: State, args: Any) -> Float[Array, ""]: ...

    def vector_field(self, t, x: State, args: Any, flow: Flow) -> State: ...

    def residual(self, x: State, args: Any) -> State: ...


@runtime_checkable
class ManifoldEnergySystem(EnergySystem, Protocol):
    """Adds the constraint manifold that the projected flow keeps, needed by the
    implicit adjoint and the direct fixed-point finder.

    - `to_manifold(x, args) -> v`: coordinates of `x` on the manifold (for the ET, each
      token's unit direction of mean zero).
    - `from_manifold(v, x_ref, args) -> x`: the state with coordinates `v` and the
      invariants of the projected flow (for the ET, each token's mean and variance, and
      clamped tokens) of `x_ref`. `from_manifold(to_manifold(x), x) == x`.
    - `tangent_projection(x, w, args) -> P w`: projection onto the tangent space of
      free coordinates at `x` (zero on clamped coordinates). `residual(x) =
      P dE/dg` lies in its range and vanishes exactly at fixed points.
    """

    def to_manifold(self, x: State, args: Any) -> State: ...

    def from_manifold(self, v: State, x_ref: State, args: Any) -> State: ...

    def tangent_projection(self, x: State, w: State, args: Any) -> State: ...


MANIFOLD_METHODS = ("to_manifold", "from_manifold", "tangent_projection")


def has_manifold(model: object) -> TypeGuard[ManifoldEnergySystem]:
    """Whether `model` declares a constraint manifold (all of `MANIFOLD_METHODS`)."""
    return all(callable(getattr(model, m, None)) for m in MANIFOLD_METHODS)


class FlatManifold(eqx.Module):
    """A flat (Euclidean) `EnergySystem` seen as a `ManifoldEnergySystem`: every
    direction free, coordinates the state itself, the projection the identity.

    Lets the implicit adjoint and `find_fixed_point` run on a model that declares no
    manifold; `residual` must then vanish exactly at fixed points (for a gradient system,
    `residual = dE/dx`). Energy, field and residual are the wrapped model's."""

    model: Any

    def energy(self, x, args):
        return self.model.energy(x, args)

    def vector_field(self, t, x, args, flow):
        return self.model.vector_field(t, x, args, flow)

    def residual(self, x, args):
        return self.model.residual(x, args)

    def to_manifold(self, x, args):
        return x

    def from_manifold(self, v, x_ref, args):
        return v

    def tangent_projection(self, x, w, args):
        return w

    @property
    def tau(self):
        return getattr(self.model, "tau", 1.0)


def as_manifold_system(model: EnergySystem) -> ManifoldEnergySystem:
    """`model` itself when it declares a manifold (`has_manifold`), else
    `FlatManifold(model)`: a model without one is flat."""
    return model if has_manifold(model) else FlatManifold(model)


def batched_args_axes(args: Any) -> Any:
    """`vmap` axes for batched args: array leaves carry the batch axis; scalar leaves
    (such as `Conditions.field_strength`, a Python float by default) are shared."""
    return jax.tree.map(lambda leaf: 0 if jnp.ndim(leaf) > 0 else None, args)
