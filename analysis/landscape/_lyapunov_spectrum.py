"""The Lyapunov spectrum of a flow by the QR (Benettin) method, for any vector field: the
one estimator, of which `analysis.lyapunov_exponent` (the top exponent, `k = 1`) and
`analysis.finite_time_lyapunov` (independent directions) are views.

`k` tangent vectors ride along the state on the variational equation `dQ/dt = J(x) Q`
(each column a Jacobian-vector product of the field: the Jacobian is never formed). At
the end of each interval (every `renormalise` units of time, or at given `ends`) they are
re-orthonormalised by a QR factorisation, `Q R = Q(t)`, and `log |R_ii|` is added to the
running sum of exponent `i`; after time `T` the estimates are those sums over `T`. With
`orthonormalise=False` each vector is normalised on its own (`R_ii` its length): `k`
independent estimates of the top exponent. The state and its tangent vectors move by one
diffrax solve per interval, all intervals inside one compiled loop (`lax.scan`).
(Benettin, Galgani, Giorgilli and Strelcyn, Meccanica 15, 1980; Shimada and Nagashima,
Prog. Theor. Phys. 61, 1979.)

Where the tangent vectors are measured (`measure`): in the state's own coordinates
(`"x"`), or, on an energy system, in the energy's coordinates (`"g"`: each vector
projected onto the tangent space `P` and scaled by the model's clock `C`, so that its
length is `|dg|` on the ET) or in the metric of the linearised projected flow
(`"metric"`, `C^(1/2) P`). The QR step then factorises the measured vectors `M W = Q R`
and carries on from `W = M^-1 Q` (`M` is a per-token scale on the tangent space, so it
inverts there); `log |R_ii|` are the growth rates in that measure. In `g`, the token
scales and means that the native flow carries (and inflates) are not measured.

Checks that need no reference: the exponents sum to the time average of the field's
divergence `trace J` (the volume growth rate), which the QR method reproduces exactly up
to the integration error (in `x`, with all exponents); at a stable fixed point they are
the real parts of the Jacobian's eigenvalues, in any measure.
"""

import math
import warnings
from collections.abc import Callable
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.typing import DTypeLike
from jaxtyping import Array, ArrayLike, Real

from et_ode import solvers
from et_ode.vocab import Flow

from .._common import cast, float64_available, is_count
from .._geometry import clock, project
from .._records import metadata
from ._lyapunov_records import (
    LYAPUNOV_OPTIONS,
    MEASURES,
    LyapunovSpectrum,
    LyapunovSpectrumSettings,
)


class _Measure(eqx.Module):
    """The map `M` from tangent vectors at `x` to the measured ones, and its inverse on
    the tangent space: `M w = C^power P w` (`C` the clock, `P` the tangent projection;
    each the identity where the system has none), or the identity (`power=None`)."""

    system: Any
    power: float | None = eqx.field(static=True)

    def apply(self, x, w, args):
        if self.power is None:
            return w
        return clock(self.system, x, args) ** self.power * project(self.system, x, w, args)

    def invert(self, x, w, args):
        if self.power is None:
            return w
        return w / clock(self.system, x, args) ** self.power


class _EnergyField(eqx.Module):
    """An energy system's `vector_field` with its flow, as a PyTree (its arrays are
    arguments of the compiled loop, not constants: one compilation per model structure)."""

    system: Any
    flow: Flow = eqx.field(static=True)

    def __call__(self, t, x, args):
        return self.system.vector_field(t, x, args, self.flow)


def _field_of(system, flow):
    """`field(t, x, args) -> dx/dt` of an energy system (with `flow`) or a callable."""
    if callable(getattr(system, "vector_field", None)):
        return _EnergyField(system, flow)
    if callable(system):
        return system
    raise TypeError(
        "lyapunov_spectrum takes a solvers.EnergySystem or a callable "
        f"field(t, x, args) -> dx/dt (got {type(system).__name__})."
    )


def _orthonormalise(measure, x, q, args, qr: bool = True):
    """Tangent vectors `q [k, *x.shape]` -> `(W, diag R)`: `M W` orthonormal, `M q = Q R`
    with `R`'s diagonal positive (the columns keep their order); `qr=False`: each `M W_i`
    of length 1, `diag R` the lengths of `M q_i`."""
    measured = jax.vmap(lambda w: measure.apply(x, w, args))(q).reshape(q.shape[0], -1)
    if qr:
        basis, r = jnp.linalg.qr(measured.T)  # [n, k], [k, k]
        diag = jnp.diagonal(r)
        basis = (basis * jnp.where(diag < 0, -1.0, 1.0).astype(basis.dtype)).T
    else:
        diag = jnp.linalg.norm(measured, axis=1)
        basis = measured / diag[:, None]
    basis = basis.reshape(q.shape)
    return jax.vmap(lambda w: measure.invert(x, w, args))(basis), jnp.abs(diag)


_orthonormalise_compiled = eqx.filter_jit(_orthonormalise)

# Where a solve failed, the field is tried this fraction of the interval ahead along it.
AHEAD = 1e-6

# Up to this many tangent vectors, each one's JVP is written out in the program rather
# than batched by `vmap`: on a CPU XLA runs the batched products slower than the same
# products one by one (the shipped core, 8 vectors: 2.6 ms against 1.9 ms per evaluation
# with the field; docs/benchmarks.md#the-landscape). Above it, `vmap` keeps the program
# small.
UNROLLED_TANGENTS = 16


@eqx.filter_jit
def _spectrum(field, measure, x0, q0, args, edges, solver, controller, dt0, max_steps: int, qr):
    """From `x0` and tangent vectors `q0 [k, *x.shape]` (orthonormal in `measure`, or
    each normalised with `qr=False`): one solve over each interval `edges[i]` to
    `edges[i + 1]`, each followed by a QR (or normalising) step. Returns the final state
    and vectors, the per-interval `log |R_ii|` (`[M, k]`) and the solves' step counts,
    their success, whether the state and the field at each interval's end are finite,
    and the time, the state's RMS and the field's RMS where each solve ended (where a
    failed one stopped)."""

    def augmented(t, y, a):
        x, q = y
        dx, tangent = jax.linearize(lambda s: field(t, s, a), x)
        if q.shape[0] <= UNROLLED_TANGENTS:
            return dx, jnp.stack([tangent(w) for w in q])
        return dx, jax.vmap(tangent)(q)

    term = diffrax.ODETerm(augmented)

    def step(carry, interval):
        (x, q), (t0, t1) = carry, interval
        sol = diffrax.diffeqsolve(
            term,
            solver,
            t0,
            t1,
            dt0,
            (x, q),
            args,
            stepsize_controller=controller,
            max_steps=max_steps,
            throw=False,
        )
        x, q = jax.tree.map(lambda leaf: leaf[-1], sol.ys)
        q, growth = _orthonormalise(measure, x, q, args, qr)
        ok = sol.result == diffrax.RESULTS.successful
        # where a solve fails: whether the state or the field there is NaN or inf
        # (an adaptive step rejects a non-finite field until max_steps)
        dx = field(sol.ts[-1], x, args)
        finite = jnp.all(jnp.isfinite(x)) & jnp.all(jnp.isfinite(dx))
        # a field that turns NaN a hair ahead along the flow (beyond a boundary the
        # state reaches) shows no NaN state: every step past it is rejected
        ahead = jnp.all(jnp.isfinite(field(sol.ts[-1], x + AHEAD * (t1 - t0) * dx, args)))
        ended = (sol.ts[-1], solvers.rms(x), solvers.rms(dx))
        return (x, q), (jnp.log(growth), sol.stats["num_steps"], ok, finite, ahead, ended)

    (x, q), out = lax.scan(step, (x0, q0), (edges[:-1], edges[1:]))
    return (x, q, *out)


def _check_field(field, x0, args, energy_system: bool) -> None:
    """Refuse a field whose output is not `dx/dt` of `x0`'s shape (found by shapes
    alone, nothing run)."""
    try:
        out = jax.eval_shape(lambda t, x: field(t, x, args), jnp.zeros((), x0.dtype), x0)
    except Exception as error:  # the user's function, called as the spectrum will
        raise ValueError(
            f"calling the field as field(t, x, args) with x of shape {x0.shape} failed: "
            f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        ) from error
    shape = getattr(out, "shape", None)
    if shape != x0.shape:
        hint = (
            ""
            if energy_system
            else " (a plain field is called as field(t, x, args), time first: a "
            "continuation field f(x, p, args) takes its arguments in another order)"
        )
        raise ValueError(
            f"the field must return dx/dt of x0's shape {x0.shape} (got "
            f"{shape if shape is not None else type(out).__name__}){hint}."
        )


def _check_intervals(ok, finite, ahead, ended, start, edges, max_steps: int) -> None:
    """Refuse a spectrum any of whose interval solves (over `edges`) failed, saying why
    and when: a NaN or inf state or field where it stopped, a field undefined `AHEAD` of
    it, a state that grew as a blow-up does (`solvers.growth_note` from `start()`, the
    RMS of the state and field at `x0`, to where the failed solve `ended`: per interval,
    its time, the state's RMS and the field's), else max_steps."""
    if ok.all():
        return
    first = int(np.argmin(ok))
    when = f"the interval from t = {edges[first]:g} to {edges[first + 1]:g}"
    count = f"{int(np.sum(~ok))} of {ok.size} interval solves failed, the first over {when}"
    if not finite[first]:
        raise ValueError(
            f"lyapunov_spectrum: {count}: the state or the field there is NaN or inf (a "
            "field undefined at that state, or a flow that blows up in finite time); "
            "check the field and x0."
        )
    time, scale, speed = (np.asarray(v)[first] for v in ended)
    if not ahead[first]:
        raise ValueError(
            f"lyapunov_spectrum: {count}: the field is NaN or inf just ahead of where the "
            f"solve stopped, at t = {time:.6g} (state RMS {scale:.3g}): every step past it "
            "was rejected until max_steps (a field undefined beyond a boundary the flow "
            "reaches, as the square root of a negative); check the field there."
        )
    rms_start, speed_start = start()
    note = solvers.growth_note(rms_start, scale, speed_start, speed, time, time)
    if note:
        raise ValueError(f"lyapunov_spectrum: {count}.{note}")
    raise ValueError(
        f"lyapunov_spectrum: {count}, at max_steps={max_steps}: raise max_steps, shorten "
        "renormalise or loosen rtol/atol."
    )


# The error a renormalise interval may let into the exponents (1/time), from two floors
# of each exponent's log-growth per interval: rounding, where the growth of the tangent
# vectors within one interval spreads over `spread` nats (the slower ones carry the
# faster ones' growth times the dtype's epsilon, relative: `exp(spread) eps`; not with
# `orthonormalise=False`, where no vector carries another); and the solver's `atol`,
# where a vector shrinks to `R` within one interval (it is then resolved only to
# `atol / R`; not with constant steps); divided by the interval. Above `EXPONENT_ERROR`
# a warning asks for a shorter `renormalise`, one that keeps either floor at 1e-5 per
# interval.
EXPONENT_ERROR = 1e-3


def _interval_precision(logs, renormalise: float, dtype, atol, qr: bool) -> float:
    """The largest spread `max_i - min_i log |R_ii|` over the intervals (nats), with a
    `RuntimeWarning` where rounding or `atol` lets more than `EXPONENT_ERROR` into the
    exponents (see above)."""
    if not np.all(np.isfinite(logs)):
        warnings.warn(
            "lyapunov_spectrum: a tangent vector vanished or overflowed within one "
            f"renormalise interval ({renormalise:g}): its exponent is not resolved; "
            "shorten renormalise.",
            RuntimeWarning,
            stacklevel=3,
        )
        return math.inf
    spread = float(np.max(np.ptp(logs, axis=1)))
    eps = float(jnp.finfo(dtype).eps)
    shrink = max(-float(np.min(logs)), 0.0)  # nats a vector lost in one interval
    errors = {"rounding": (math.exp(min(spread, 700.0)) * eps if qr else 0.0, spread, eps)}
    if atol is not None:
        errors["atol"] = (math.exp(min(shrink, 700.0)) * atol, shrink, atol)
    worst = max(errors, key=lambda name: errors[name][0])
    error, nats, floor = errors[worst]
    allowed = math.log(1e-5 / floor)
    if error / renormalise > EXPONENT_ERROR:
        cause = (
            f"the tangent vectors' growth spread over {spread:.1f} nats, so rounding "
            f"({jnp.dtype(dtype).name})"
            if worst == "rounding"
            else f"a tangent vector shrank by e^{shrink:.1f}, below what atol={atol:g} "
            "resolves, so the solver"
        )
        remedy = (
            f"renormalise at most {renormalise * allowed / nats:.2g}"
            if allowed > 0 and nats > 0
            else "a tighter atol"
        )
        warnings.warn(
            f"lyapunov_spectrum: within one renormalise interval ({renormalise:g}) {cause} "
            f"leaves the smaller exponents off by up to about {error / renormalise:.2g}: "
            f"{remedy}.",
            RuntimeWarning,
            stacklevel=3,
        )
    return spread


def _solve_settings(options) -> tuple[Any, str, Any, Any, Any, int | None]:
    """`(solver, its name, rtol, atol, dt0, max_steps)` of `options` (`rtol = atol = None`:
    constant steps), refused in one line for `"auto"` or a `stepsize_controller`."""
    if not isinstance(options, solvers.SolveOptions):
        raise TypeError(
            f"options must be a solvers.SolveOptions (got {type(options).__name__}): "
            "LYAPUNOV_OPTIONS.replace(rtol=..., atol=...), for example."
        )
    preset = solvers.get_preset(options.solver)
    if preset.self_counting:
        raise ValueError(
            f"lyapunov_spectrum's options.solver cannot be {options.solver!r} (its "
            "stiffness switch works on one array, not a state with its tangent vectors): "
            "choose a diffrax solver such as 'tsit5', or 'kvaerno5' for a stiff flow."
        )
    if options.stepsize_controller is not None:
        raise ValueError(
            "lyapunov_spectrum builds its own step-size controller from rtol and atol (a "
            "PID controller per interval; neither: constant steps of dt0): leave "
            "options.stepsize_controller None."
        )
    rtol, atol, dt0 = (
        None if v is None else float(v) for v in (options.rtol, options.atol, options.dt0)
    )
    return preset.make(), preset.name, rtol, atol, dt0, options.max_steps


def _averaging_ends(t1: float, renormalise: float, ends) -> np.ndarray:
    """The ends of the averaging intervals, `[M]` times after the transient: whole
    intervals of `renormalise` to about `t1`, or with `ends` each of them and `t1`,
    those between two equal and at most `renormalise` long."""
    if not ends:
        if t1 < 0.5 * renormalise:
            raise ValueError(
                f"t1={t1:g} is shorter than one renormalise interval ({renormalise:g}), to "
                "which it would round: give a shorter renormalise or a longer t1."
            )
        return renormalise * np.arange(1, max(1, int(round(t1 / renormalise))) + 1)
    if max(ends) > t1:
        raise ValueError(f"settings.ends must lie within (0, t1={t1:g}] (got {max(ends):g}).")
    times: list[float] = []
    last = 0.0
    for end in sorted({*map(float, ends), float(t1)}):
        pieces = max(1, math.ceil((end - last) / renormalise))
        times.extend(np.linspace(last, end, pieces + 1)[1:])
        last = end
    return np.asarray(times)


def lyapunov_spectrum(
    system: solvers.EnergySystem | Callable[[Any, Array, Any], Array],
    x0: Real[ArrayLike, "..."],
    *,
    args: Any = None,
    k: int | None = None,
    t1: float,
    options: solvers.SolveOptions = LYAPUNOV_OPTIONS,
    settings: LyapunovSpectrumSettings = LyapunovSpectrumSettings(),
    dtype: DTypeLike = jnp.float64,
) -> LyapunovSpectrum:
    """The `k` largest Lyapunov exponents of the flow through `x0` (all when `k` is None)
    by the QR method (module docstring), in units of 1/time (1/tau on the ET).

    **Arguments:**

    - `system`: a `solvers.EnergySystem` (its `vector_field` with `options.flow`) or any
      callable `field(t, x, args) -> dx/dt` with `x` of any shape.
    - `x0`: the start; `args`: the system's conditions.
    - `k`: how many exponents (at most `x0.size`; in `g` or `metric`, at most the
      tangent space's dimension; any with `orthonormalise=False`).
    - `t1`: averaging time after the transient (rounded to whole renormalise intervals
      unless `settings.ends` are given).
    - `options`: the integration (`solvers.SolveOptions`; default `LYAPUNOV_OPTIONS`):
      any `solver` but `"auto"`, with adaptive steps by `rtol` and `atol` (`dt0`: the
      first step of each interval, `None` automatic; `dtmin` as in `solvers.solve`) or
      constant steps of `dt0` (`rtol = atol = None`: the exponents of that discrete
      map), `max_steps` per interval (`None`: 100,000, or as many constant steps as the
      longest interval needs), and an energy system's `flow` (`"native"` or
      `"projected"`; a plain field has none). A `stepsize_controller` is refused.
    - `settings`: the QR method's (`LyapunovSpectrumSettings`: `transient`,
      `renormalise`, `measure`, `seed`, `orthonormalise`, `ends`).
    - `dtype`: the arithmetic (float64 needs `jax_enable_x64`).

    **Returns:** a `LyapunovSpectrum` (its fields say what each holds).
    """
    if not isinstance(settings, LyapunovSpectrumSettings):
        raise TypeError(
            "settings must be an analysis.LyapunovSpectrumSettings (got "
            f"{type(settings).__name__})."
        )
    solver, name, rtol, atol, dt0, max_steps = _solve_settings(options)
    flow, transient, renormalise = options.flow, settings.transient, settings.renormalise
    measure, seed, qr = settings.measure, settings.seed, settings.orthonormalise
    _field_of(system, flow)  # refuses anything else before any work
    energy_system = callable(getattr(system, "vector_field", None))
    if measure != "x" and not energy_system:
        raise ValueError(
            f"measure={measure!r} needs an energy system (its clock and tangent "
            "projection); a plain field is measured in its own coordinates: measure='x'."
        )
    if not (math.isfinite(t1) and t1 > 0):
        raise ValueError(f"t1 must be a positive averaging time (got t1={t1}).")
    if jnp.dtype(dtype) == jnp.float64 and not float64_available():
        raise ValueError(
            "float64 needs jax_enable_x64: call jax.config.update('jax_enable_x64', True) "
            "first, or pass dtype=jnp.float32."
        )
    times = _averaging_ends(t1, renormalise, settings.ends)
    x0 = jnp.asarray(x0)
    if not (jnp.issubdtype(x0.dtype, jnp.floating) or jnp.issubdtype(x0.dtype, jnp.integer)):
        raise ValueError(f"x0 must be a real array (got dtype {x0.dtype}).")
    if not bool(jnp.all(jnp.isfinite(x0))):
        raise ValueError("x0 holds NaN or inf: the spectrum needs a finite start.")
    system, x0, args = cast((system, x0.astype(dtype), args), dtype)
    field = _field_of(system, flow)
    _check_field(field, x0, args, energy_system)
    n = x0.size
    tangent_dimension = getattr(system, "tangent_dimension", None)
    manifold = n - int(tangent_dimension(x0, args)) if callable(tangent_dimension) else 0
    measured = n if measure == "x" else n - manifold
    if not (k is None or is_count(k, 1)):
        raise ValueError(f"k must be an integer or None (got {k!r}).")
    k = measured if k is None else int(k)
    if not 1 <= k <= (measured if qr else k):
        where = "the state's size" if measure == "x" else "the tangent space's dimension"
        raise ValueError(f"k must be between 1 and {where} {measured} (got {k}).")
    gauge = _Measure(system, MEASURES[measure])
    draw = jax.random.normal(jax.random.key(seed), (n, k) if qr else (k, n), dtype)
    start_vectors = (draw.T if qr else draw).reshape((k,) + x0.shape)
    q0, _ = _orthonormalise_compiled(gauge, x0, start_vectors, args, qr)
    # the transient and the averaging in one loop (one compilation); the transient's
    # growth rates are dropped
    warm = int(round(transient / renormalise))
    edges = np.concatenate([renormalise * np.arange(warm + 1), warm * renormalise + times])
    controller: diffrax.AbstractStepSizeController
    if rtol is None:  # constant steps: as many as the longest interval needs
        controller = diffrax.ConstantStepSize()
        needed = solvers.constant_step_count(0.0, float(np.max(np.diff(edges))), dt0)
        max_steps = int(max_steps or max(LYAPUNOV_OPTIONS.max_steps or 0, needed or 0))
    else:
        r, a = jnp.asarray(rtol, dtype), jnp.asarray(atol, dtype)
        dtmin = None if options.dtmin is None else jnp.asarray(options.dtmin, dtype)
        controller = diffrax.PIDController(rtol=r, atol=a, dtmin=dtmin, force_dtmin=False)
        max_steps = int(max_steps or LYAPUNOV_OPTIONS.max_steps or 100_000)
    grid, first = jnp.asarray(edges, dtype), None if dt0 is None else jnp.asarray(dt0, dtype)
    out = _spectrum(field, gauge, x0, q0, args, grid, solver, controller, first, max_steps, qr)
    x, q, logs, steps, ok, finite, ahead, ended = out
    start = lambda: (solvers.rms(x0), solvers.rms(field(jnp.zeros((), dtype), x0, args)))  # noqa: E731
    _check_intervals(
        np.asarray(ok), np.asarray(finite), np.asarray(ahead), ended, start, edges, max_steps
    )
    logs = np.asarray(logs, np.float64)
    spread = _interval_precision(logs, renormalise, dtype, atol, qr)
    history = np.cumsum(logs[warm:], axis=0) / times[:, None]
    exponents = history[-1]
    order = np.argsort(-exponents) if qr else np.arange(k)
    neutral = (manifold if measure == "x" else 0) if energy_system else None
    return LyapunovSpectrum(
        exponents=exponents[order],
        history=history[:, order],
        times=times,
        volume_rate=float(np.sum(exponents)),
        neutral=neutral,
        measure=measure,
        k=k,
        size=n,
        t1=float(times[-1]),
        transient=float(warm * renormalise),
        renormalise=float(renormalise),
        solver=name,
        rtol=rtol,
        atol=atol,
        steps=int(np.sum(steps)),
        growth_spread=spread,
        flow=flow if energy_system else None,
        dtype=str(jnp.dtype(dtype)),
        x_final=np.asarray(x),
        metadata=metadata(
            study="lyapunov_spectrum",
            dtype=dtype,
            solver=name,
            rtol=rtol,
            atol=atol,
            k=k,
            renormalise=renormalise,
            transient=float(warm * renormalise),
            seeds={"tangent_vectors": seed},
            flow=flow if energy_system else None,
            measure=measure,
            **({} if qr else {"orthonormalise": False}),
            **({"ends": sorted(map(float, settings.ends))} if settings.ends else {}),
        ),
    )
