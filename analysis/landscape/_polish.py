"""A flow's end polished onto the critical point beside it by Newton
(`solvers.find_fixed_point`), kept only where it lands close (`polish_near`)."""

import jax.numpy as jnp

from et_ode import solvers

from .._common import cast, float64_available
from .._geometry import energy_coordinates


def polish_near(model, x, args, *, tol=1e-10, within=1e-3):
    """`x` polished by Newton (`solvers.find_fixed_point`, in float64 when it is
    available: above float32's floor), or None where Newton fails or lands farther than
    `within` (RMS, in the energy's coordinates) from `x`: Newton converges to the nearest
    critical point, which may be a saddle beside the flow's end. Returns the
    `FixedPointResult` (its `x` in the model's dtype)."""
    wide = jnp.float64 if float64_available() else jnp.asarray(x).dtype
    m64, x64, a64 = cast((model, jnp.asarray(x), args), wide)
    found = solvers.find_fixed_point(m64, x64, args=a64, linear="auto", method="newton", tol=tol)
    moved = energy_coordinates(
        model, jnp.asarray(found.x, jnp.asarray(x).dtype), args
    ) - energy_coordinates(model, jnp.asarray(x), args)
    if not (bool(found.success) and float(jnp.sqrt(jnp.mean(moved**2))) < within):
        return None
    return found
