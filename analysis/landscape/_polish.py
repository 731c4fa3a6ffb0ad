"""A flow's end polished onto the critical point beside it by Newton
(`solvers.find_fixed_point`), kept only where it lands close (`polish_near`)."""

from typing import Literal

import jax.numpy as jnp

from et_ode import solvers

from .._common import cast, float64_available
from .._geometry import energy_coordinates
from .._settings import NewtonSettings

# The polish's Newton by default: to RMS G 1e-10 in at most 100 iterations (those of
# `solvers.find_fixed_point`), dense up to `solvers.DENSE_MAX` entries, GMRES above.
POLISH_NEWTON = NewtonSettings(newton_tol=1e-10, max_newton=100)
# `NewtonSettings.matrix_free` -> `find_fixed_point`'s `linear`.
LINEAR: dict[bool | None, Literal["auto", "dense", "gmres"]] = {
    None: "auto",
    True: "gmres",
    False: "dense",
}


def polish_near(model, x, args, *, newton: NewtonSettings = POLISH_NEWTON, within=1e-3):
    """`x` polished by Newton (`solvers.find_fixed_point`, in float64 when it is
    available: above float32's floor), or None where Newton fails or lands farther than
    `within` (RMS, in the energy's coordinates) from `x`: Newton converges to the nearest
    critical point, which may be a saddle beside the flow's end. `newton`: its RMS G
    `newton_tol` (`None`: 1e-10 with float64, else 1e-5), `max_newton` iterations and
    `matrix_free` (`None`: dense up to `solvers.DENSE_MAX` entries); an energy
    model's Newton takes no `preconditioner`. Returns the `FixedPointResult` (its `x` in
    the model's dtype)."""
    if newton.preconditioner is not None:
        raise ValueError("polish_near: an energy model's Newton takes no preconditioner.")
    wide = jnp.float64 if float64_available() else jnp.asarray(x).dtype
    tol = newton.newton_tol
    if tol is None:
        tol = 1e-10 if wide == jnp.float64 else 1e-5
    m64, x64, a64 = cast((model, jnp.asarray(x), args), wide)
    found = solvers.find_fixed_point(
        m64,
        x64,
        args=a64,
        linear=LINEAR[newton.matrix_free],
        method="newton",
        tol=tol,
        max_steps=newton.max_newton,
    )
    moved = energy_coordinates(
        model, jnp.asarray(found.x, jnp.asarray(x).dtype), args
    ) - energy_coordinates(model, jnp.asarray(x), args)
    if not (bool(found.success) and float(jnp.sqrt(jnp.mean(moved**2))) < within):
        return None
    return found
