"""The Lyapunov spectrum of a flow by the QR (Benettin) method, for any vector field.

`k` tangent vectors ride along the state on the variational equation
`dQ/dt = J(x) Q` (each column a Jacobian-vector product of the field: the Jacobian is never
formed). Every `renormalise` units of time the tangent vectors are re-orthonormalised by
a QR factorisation, `Q R = Q(t)`, and `log |R_ii|` is added to the running sum of
exponent `i`; after time `T` the estimates are those sums over `T`. The state and its
tangent vectors move by one diffrax solve per interval, all intervals inside one compiled
loop (`lax.scan`). (Benettin, Galgani, Giorgilli and Strelcyn, Meccanica 15, 1980;
Shimada and Nagashima, Prog. Theor. Phys. 61, 1979.)

Checks that need no reference: the exponents sum to the time average of the field's
divergence `trace J` (the volume growth rate), which the QR method reproduces exactly up
to the integration error; at a stable fixed point they are the real parts of the
Jacobian's eigenvalues.
"""

import math
from collections.abc import Callable
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.typing import DTypeLike
from jaxtyping import Array, ArrayLike, Float

from et_ode import solvers
from et_ode.vocab import Flow

from ._common import cast, float64_available
from ._records import metadata

SOLVERS = {"tsit5": diffrax.Tsit5, "dopri5": diffrax.Dopri5, "dopri8": diffrax.Dopri8}


def _field_of(system, flow):
    """`field(t, x, args) -> dx/dt` of an energy system (with `flow`) or a callable."""
    if callable(getattr(system, "vector_field", None)):
        return lambda t, x, args: system.vector_field(t, x, args, flow)
    if callable(system):
        return system
    raise TypeError(
        "lyapunov_spectrum takes a solvers.EnergySystem or a callable "
        f"field(t, x, args) -> dx/dt (got {type(system).__name__})."
    )


@eqx.filter_jit
def _spectrum(
    field, x0, q0, args, t_start, interval, n_intervals: int, solver, rtol, atol, max_steps: int
):
    """From `x0` and orthonormal tangent vectors `q0 [k, *x.shape]`: `n_intervals` solves
    of length `interval`, each followed by a QR step. Returns the final state, the
    per-interval `log |R_ii|` (`[n_intervals, k]`) and the solves' step counts."""
    shape = x0.shape

    def augmented(t, y, a):
        x, q = y
        dx, tangent = jax.linearize(lambda s: field(t, s, a), x)
        return dx, jax.vmap(tangent)(q)

    term = diffrax.ODETerm(augmented)
    controller = diffrax.PIDController(rtol=rtol, atol=atol)

    def step(carry, i):
        x, q = carry
        t0 = t_start + i * interval
        sol = diffrax.diffeqsolve(
            term,
            solver,
            t0,
            t0 + interval,
            None,
            (x, q),
            args,
            stepsize_controller=controller,
            max_steps=max_steps,
            throw=False,
        )
        x, q = jax.tree.map(lambda leaf: leaf[-1], sol.ys)
        flat = q.reshape(q.shape[0], -1).T  # [n, k]
        basis, r = jnp.linalg.qr(flat)
        diag = jnp.diagonal(r)
        sign = jnp.where(diag < 0, -1.0, 1.0).astype(flat.dtype)  # keep the columns' order
        q = (basis * sign).T.reshape((-1,) + shape)
        ok = sol.result == diffrax.RESULTS.successful
        return (x, q), (jnp.log(jnp.abs(diag)), sol.stats["num_steps"], ok)

    (x, q), (logs, steps, ok) = lax.scan(step, (x0, q0), jnp.arange(n_intervals))
    return x, q, logs, steps, ok


def lyapunov_spectrum(
    system: solvers.EnergySystem | Callable[[Any, Array, Any], Array],
    x0: Float[ArrayLike, "..."],
    args: Any = None,
    *,
    k: int | None = None,
    t1: float,
    transient: float = 0.0,
    renormalise: float = 1.0,
    flow: Flow = "projected",
    solver: str = "tsit5",
    rtol: float = 1e-8,
    atol: float = 1e-10,
    max_steps: int = 100_000,
    seed: int = 0,
    dtype: DTypeLike = jnp.float64,
) -> dict[str, Any]:
    """The `k` largest Lyapunov exponents of the flow through `x0` (all when `k` is None)
    by the QR method (module docstring), in units of 1/time (1/tau on the ET).

    **Arguments:**

    - `system`: a `solvers.EnergySystem` (its `vector_field` with `flow`) or any
      callable `field(t, x, args) -> dx/dt` with `x` of any shape.
    - `x0`: the start; `args`: the system's conditions.
    - `k`: how many exponents (at most `x0.size`).
    - `t1`: averaging time after the transient; `transient`: time run first (state
      and tangent vectors, no averaging) so that the tangent vectors align.
    - `renormalise`: time between QR steps (each one diffrax solve; `t1` and
      `transient` are rounded to whole intervals).
    - `solver` (`tsit5`, `dopri5`, `dopri8`), `rtol`, `atol`, `max_steps` (per
      interval): the integration; `seed`: the random start of the tangent vectors;
      `dtype`: the arithmetic (float64 needs `jax_enable_x64`).

    **Returns:** a dict: `exponents [k]` (descending), `history [M, k]` (the running
    estimates after each of the `M` averaging intervals) and `times [M]` (the averaging
    time at each), `volume_rate` (their sum: the mean divergence of the field);
    `neutral` (the number of directions the system keeps by construction, e.g. two per
    free token for the ET's projected flow, whose exponents are 0; `None` for a plain
    field), `steps` (the solver's steps), and the settings.
    """
    _field_of(system, flow)  # refuses anything else before any work
    if not (
        math.isfinite(t1)
        and t1 > 0
        and math.isfinite(renormalise)
        and renormalise > 0
        and math.isfinite(transient)
        and transient >= 0
    ):
        raise ValueError(
            "t1 and renormalise must be positive and transient >= 0 "
            f"(got t1={t1}, renormalise={renormalise}, transient={transient})."
        )
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {', '.join(SOLVERS)} (got {solver!r}).")
    if jnp.dtype(dtype) == jnp.float64 and not float64_available():
        raise ValueError(
            "float64 needs jax_enable_x64: call "
            "jax.config.update('jax_enable_x64', True) first, or pass "
            "dtype=jnp.float32."
        )
    system, x0, args = cast((system, jnp.asarray(x0), args), dtype)
    field = _field_of(system, flow)
    n = x0.size
    k = n if k is None else int(k)
    if not 1 <= k <= n:
        raise ValueError(f"k must be between 1 and the state's size {n} (got {k}).")
    basis = jnp.linalg.qr(jax.random.normal(jax.random.key(seed), (n, k), dtype))[0]
    q0 = basis.T.reshape((k,) + x0.shape)
    make = SOLVERS[solver]()
    r, a = jnp.asarray(rtol, dtype), jnp.asarray(atol, dtype)
    interval = jnp.asarray(renormalise, dtype)
    warm = int(round(transient / renormalise))
    averaged = max(1, int(round(t1 / renormalise)))
    x, q, steps_total, failed = x0, q0, 0, 0
    if warm:
        x, q, _, steps, ok = _spectrum(
            field, x, q, args, jnp.asarray(0.0, dtype), interval, warm, make, r, a, int(max_steps)
        )
        steps_total += int(np.sum(steps))
        failed += int(np.sum(~np.asarray(ok)))
    start = jnp.asarray(warm * renormalise, dtype)
    x, q, logs, steps, ok = _spectrum(
        field, x, q, args, start, interval, averaged, make, r, a, int(max_steps)
    )
    steps_total += int(np.sum(steps))
    failed += int(np.sum(~np.asarray(ok)))
    if failed:
        raise ValueError(
            f"lyapunov_spectrum: {failed} of {warm + averaged} interval solves "
            f"failed (max_steps={max_steps} per interval of {renormalise:g}): "
            "raise max_steps, shorten renormalise or loosen rtol/atol."
        )
    logs = np.asarray(logs, np.float64)
    times = renormalise * np.arange(1, averaged + 1)
    history = np.cumsum(logs, axis=0) / times[:, None]
    exponents = history[-1]
    order = np.argsort(-exponents)
    neutral = None
    tangent_dimension = getattr(system, "tangent_dimension", None)
    if callable(tangent_dimension):
        neutral = int(n - tangent_dimension(x0, args)) if flow == "projected" else 0
    return {
        "exponents": exponents[order],
        "history": history[:, order],
        "times": times,
        "volume_rate": float(np.sum(exponents)),
        "neutral": neutral,
        "k": k,
        "size": n,
        "t1": float(averaged * renormalise),
        "transient": float(warm * renormalise),
        "renormalise": float(renormalise),
        "solver": solver,
        "rtol": rtol,
        "atol": atol,
        "steps": steps_total,
        "flow": flow if callable(getattr(system, "vector_field", None)) else None,
        "dtype": str(jnp.dtype(dtype)),
        "x_final": np.asarray(x),
        "metadata": metadata(
            study="lyapunov_spectrum",
            dtype=dtype,
            solver=solver,
            rtol=rtol,
            atol=atol,
            k=k,
            renormalise=renormalise,
            transient=float(warm * renormalise),
            seeds={"tangent_vectors": seed},
            flow=flow if callable(getattr(system, "vector_field", None)) else None,
        ),
    }
