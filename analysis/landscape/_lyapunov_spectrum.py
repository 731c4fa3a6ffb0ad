"""The Lyapunov spectrum of a flow by the QR (Benettin) method, for any vector field.

`k` tangent vectors ride along the state on the variational equation
`dQ/dt = J(x) Q` (each column a Jacobian-vector product of the field: the Jacobian is never
formed). Every `renormalise` units of time the tangent vectors are re-orthonormalised by
a QR factorisation, `Q R = Q(t)`, and `log |R_ii|` is added to the running sum of
exponent `i`; after time `T` the estimates are those sums over `T`. The state and its
tangent vectors move by one diffrax solve per interval, all intervals inside one compiled
loop (`lax.scan`). (Benettin, Galgani, Giorgilli and Strelcyn, Meccanica 15, 1980;
Shimada and Nagashima, Prog. Theor. Phys. 61, 1979.)

Where the tangent vectors are measured (`measure`): in the state's own coordinates
(`"x"`), or, on an energy system, in the energy's coordinates (`"g"`: each vector
projected onto the tangent space `P` and scaled by the model's clock `C`, so that its
length is `|dg|` on the ET) or in the metric of the linearised projected flow
(`"metric"`, `C^(1/2) P`). The QR step then factorises the measured vectors `M W = Q R`
and carries on from `W = M^-1 Q` (`M` is a per-token scale on the tangent space, so it
inverts there); `log |R_ii|` are the growth rates in that measure. In `g`, the token
scales and means that the native flow carries (and inflates) are not measured: these are
the exponents `analysis.lyapunov_exponent` estimates one at a time.

Checks that need no reference: the exponents sum to the time average of the field's
divergence `trace J` (the volume growth rate), which the QR method reproduces exactly up
to the integration error (in `x`, with all exponents); at a stable fixed point they are
the real parts of the Jacobian's eigenvalues, in any measure.
"""

import dataclasses
import math
import warnings
from collections.abc import Callable
from typing import Any, Literal

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

from .._common import cast, float64_available, is_count, is_real
from .._geometry import clock, project
from .._records import metadata
from .._results import Result
from .._settings import Settings, at_least, positive


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class LyapunovSpectrum(Result):
    """The `k` largest Lyapunov exponents of a flow by the QR method
    (`lyapunov_spectrum`), in units of 1/time (1/tau on the ET), with their running
    estimates over `M` averaging intervals and the settings; also a read-only mapping of
    its keys (`out["exponents"] is out.exponents`)."""

    exponents: np.ndarray
    """`[k]`: the exponents, descending."""
    history: np.ndarray
    """`[M, k]`: the running estimates after each averaging interval (columns as
    `exponents`)."""
    times: np.ndarray
    """`[M]`: the averaging time at each."""
    volume_rate: float
    """The exponents' sum (with all of them, in `x`, the mean divergence of the field)."""
    neutral: int | None
    """How many of the measured directions the system carries without change by
    construction, exponent 0: in `x`, two per free token of the ET, its mean and scale,
    on either flow (on the native flow the scale up to LayerNorm's `eps`); 0 in `g` and
    `metric`, which do not measure them; `None` for a plain field."""
    measure: str
    """Where the tangent vectors were measured: `"x"`, `"g"` or `"metric"`."""
    k: int
    """The exponents computed."""
    size: int
    """The state's entries."""
    t1: float
    """The averaging time (whole intervals)."""
    transient: float
    """The time run first, not averaged (whole intervals)."""
    renormalise: float
    """The time between QR steps."""
    solver: str
    """The diffrax solver."""
    rtol: float
    """Its relative tolerance."""
    atol: float
    """Its absolute tolerance."""
    steps: int
    """The solver's steps, in all."""
    growth_spread: float | None
    """The largest spread of one interval's `log |R_ii|` (nats): `inf` where a tangent
    vector vanished or overflowed within one (`None` read back from JSON)."""
    flow: str | None
    """An energy system's flow (`"native"` or `"projected"`); `None` for a plain field."""
    dtype: str
    """The arithmetic."""
    x_final: np.ndarray
    """The state at the end (the start's shape)."""
    metadata: dict
    """What produced it (study, dtype, solver, tolerances, seeds, versions)."""


SOLVERS = {"tsit5": diffrax.Tsit5, "dopri5": diffrax.Dopri5, "dopri8": diffrax.Dopri8}
# Measures of the tangent vectors: the power of the clock (None: the state's coordinates).
MEASURES = {"x": None, "g": 1.0, "metric": 0.5}
# How `lyapunov_spectrum` solves by default: tsit5 at rtol 1e-8 and atol 1e-10 on the
# projected flow, at most 100,000 steps per renormalise interval.
LYAPUNOV_OPTIONS = solvers.SolveOptions(
    solver="tsit5", dt0=None, rtol=1e-8, atol=1e-10, max_steps=100_000, flow="projected"
)


@dataclasses.dataclass(frozen=True)
class LyapunovSpectrumSettings(Settings):
    """How `lyapunov_spectrum` runs the QR method (module docstring).

    - `transient`: the time run first (state and tangent vectors, no averaging) so that
      the tangent vectors align (>= 0, default 0; rounded to whole intervals).
    - `renormalise`: the time between QR steps (> 0, default 1; each interval one
      diffrax solve).
    - `measure`: where the tangent vectors are measured: `"x"` (default) the state's
      coordinates (any system); on an energy system `"g"`, the energy's coordinates
      (`|dg|` on the ET: token means and scales dropped, as `lyapunov_exponent`
      measures), or `"metric"` (`|C^(1/2) P dx|`).
    - `seed`: the random start of the tangent vectors (an integer, default 0).
    """

    transient: float = 0.0
    renormalise: float = 1.0
    measure: Literal["x", "g", "metric"] = "x"
    seed: int = 0

    def check(self) -> None:
        positive(self, "renormalise")
        transient = self.transient
        if not (is_real(transient) and math.isfinite(transient) and transient >= 0):
            raise ValueError(
                "LyapunovSpectrumSettings.transient must be a finite time >= 0 (got "
                f"{self.transient!r})."
            )
        if self.measure not in MEASURES:
            raise ValueError(
                f"LyapunovSpectrumSettings.measure must be one of {', '.join(MEASURES)} "
                f"(got {self.measure!r})."
            )
        at_least(self, "seed", 0)


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


def _orthonormalise(measure, x, q, args):
    """Tangent vectors `q [k, *x.shape]` -> `(W, diag R)`: `M W` orthonormal, `M q = Q R`
    with `R`'s diagonal positive (the columns keep their order)."""
    shape = x.shape
    measured = jax.vmap(lambda w: measure.apply(x, w, args))(q)
    basis, r = jnp.linalg.qr(measured.reshape(q.shape[0], -1).T)  # [n, k], [k, k]
    diag = jnp.diagonal(r)
    sign = jnp.where(diag < 0, -1.0, 1.0).astype(basis.dtype)
    basis = (basis * sign).T.reshape((-1,) + shape)
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
def _spectrum(
    field,
    measure,
    x0,
    q0,
    args,
    t_start,
    interval,
    n_intervals: int,
    solver,
    steps: tuple,
    max_steps: int,
):
    """From `x0` and tangent vectors `q0 [k, *x.shape]` (orthonormal in `measure`):
    `n_intervals` solves of length `interval`, each followed by a QR step. Returns the
    final state and vectors, the per-interval `log |R_ii|` (`[n_intervals, k]`) and the
    solves' step counts, their success, whether the state and the field at each
    interval's end are finite, and the time, the state's RMS and the field's RMS where
    each solve ended (where a failed one stopped). `steps`: `(rtol, atol, dt0)`."""
    rtol, atol, dt0 = steps

    def augmented(t, y, a):
        x, q = y
        dx, tangent = jax.linearize(lambda s: field(t, s, a), x)
        if q.shape[0] <= UNROLLED_TANGENTS:
            return dx, jnp.stack([tangent(w) for w in q])
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
            dt0,
            (x, q),
            args,
            stepsize_controller=controller,
            max_steps=max_steps,
            throw=False,
        )
        x, q = jax.tree.map(lambda leaf: leaf[-1], sol.ys)
        q, growth = _orthonormalise(measure, x, q, args)
        ok = sol.result == diffrax.RESULTS.successful
        # where a solve fails: whether the state or the field there is NaN or inf
        # (an adaptive step rejects a non-finite field until max_steps)
        dx = field(sol.ts[-1], x, args)
        finite = jnp.all(jnp.isfinite(x)) & jnp.all(jnp.isfinite(dx))
        # a field that turns NaN a hair ahead along the flow (beyond a boundary the
        # state reaches) shows no NaN state: every step past it is rejected
        ahead = jnp.all(jnp.isfinite(field(sol.ts[-1], x + AHEAD * interval * dx, args)))
        ended = (sol.ts[-1], solvers.rms(x), solvers.rms(dx))
        return (x, q), (jnp.log(growth), sol.stats["num_steps"], ok, finite, ahead, ended)

    (x, q), (logs, steps, ok, finite, ahead, ended) = lax.scan(
        step, (x0, q0), jnp.arange(n_intervals)
    )
    return x, q, logs, steps, ok, finite, ahead, ended


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


def _check_intervals(ok, finite, ahead, ended, start, renormalise: float, max_steps: int) -> None:
    """Refuse a spectrum any of whose interval solves failed, saying why and when: a
    NaN or inf state or field where it stopped, a field undefined just `ahead` of it
    (`AHEAD` of the interval along the field), a state that grew as a blow-up does
    (`solvers.growth_note` from `start()`, the RMS of the state and of the field at
    `x0`, to where the failed solve `ended`: per interval, its time, the state's RMS and
    the field's), else max_steps."""
    if ok.all():
        return
    first = int(np.argmin(ok))
    when = f"the interval from t = {first * renormalise:g} to {(first + 1) * renormalise:g}"
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
# faster ones' growth times the dtype's epsilon, relative: `exp(spread) eps`); and the
# solver's `atol`, where a vector shrinks to `R` within one interval (it is then
# resolved only to `atol / R`); divided by the interval. Above `EXPONENT_ERROR` a
# warning asks for a shorter `renormalise`, one that keeps either floor at 1e-5 per
# interval.
EXPONENT_ERROR = 1e-3


def _interval_precision(logs, renormalise: float, dtype, atol: float) -> float:
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
    errors = {
        "rounding": (
            math.exp(min(spread, 700.0)) * eps,
            spread,
            math.log(1e-5 / eps),
        ),
        "atol": (
            math.exp(min(shrink, 700.0)) * atol,
            shrink,
            math.log(1e-5 / atol),
        ),
    }
    worst = max(errors, key=lambda name: errors[name][0])
    error, nats, allowed = errors[worst]
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


def _solve_settings(options) -> tuple[str, float, float, float | None, int]:
    """`(solver, rtol, atol, dt0, max_steps)` of `options`, refused in one line unless they
    name one of `SOLVERS` with adaptive steps by `rtol` and `atol` (a PID controller per
    interval: no `stepsize_controller` or `dtmin`); `max_steps=None`: 100,000."""
    if not isinstance(options, solvers.SolveOptions):
        raise TypeError(
            f"options must be a solvers.SolveOptions (got {type(options).__name__}): "
            "LYAPUNOV_OPTIONS.replace(rtol=..., atol=...), for example."
        )
    if not (isinstance(options.solver, str) and options.solver in SOLVERS):
        raise ValueError(
            f"lyapunov_spectrum's options.solver must be one of {', '.join(SOLVERS)} (got "
            f"{options.solver!r})."
        )
    if options.rtol is None or options.atol is None:
        raise ValueError(
            "lyapunov_spectrum steps adaptively: options need rtol and atol (got rtol="
            f"{options.rtol}, atol={options.atol})."
        )
    for name in ("stepsize_controller", "dtmin"):
        if getattr(options, name) is not None:
            raise ValueError(
                f"lyapunov_spectrum builds its own PID controller from rtol and atol: "
                f"leave options.{name} None."
            )
    cap = options.max_steps or LYAPUNOV_OPTIONS.max_steps or 100_000
    dt0 = None if options.dt0 is None else float(options.dt0)
    return options.solver, float(options.rtol), float(options.atol), dt0, int(cap)


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
      tangent space's dimension).
    - `t1`: averaging time after the transient (rounded to whole renormalise intervals).
    - `options`: the integration (`solvers.SolveOptions`; default `LYAPUNOV_OPTIONS`):
      `solver` one of `tsit5`, `dopri5`, `dopri8`, with adaptive steps by `rtol` and
      `atol` (`dt0`: the first step of each interval, `None` automatic), `max_steps`
      per interval (`None`: 100,000), and an energy system's `flow` (`"native"` or
      `"projected"`; a plain field has none). A `stepsize_controller` or `dtmin` is
      refused.
    - `settings`: the QR method's (`LyapunovSpectrumSettings`: `transient`,
      `renormalise`, `measure`, `seed`).
    - `dtype`: the arithmetic (float64 needs `jax_enable_x64`).

    **Returns:** a `LyapunovSpectrum` (its fields say what each holds).
    """
    if not isinstance(settings, LyapunovSpectrumSettings):
        raise TypeError(
            "settings must be an analysis.LyapunovSpectrumSettings (got "
            f"{type(settings).__name__})."
        )
    solver, rtol, atol, dt0, max_steps = _solve_settings(options)
    flow, transient, renormalise = options.flow, settings.transient, settings.renormalise
    measure, seed = settings.measure, settings.seed
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
            "float64 needs jax_enable_x64: call "
            "jax.config.update('jax_enable_x64', True) first, or pass "
            "dtype=jnp.float32."
        )
    if t1 < 0.5 * renormalise:
        raise ValueError(
            f"t1={t1:g} is shorter than one renormalise interval ({renormalise:g}), to which "
            "it would round: give a shorter renormalise or a longer t1."
        )
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
    if not 1 <= k <= measured:
        where = "the state's size" if measure == "x" else "the tangent space's dimension"
        raise ValueError(f"k must be between 1 and {where} {measured} (got {k}).")
    gauge = _Measure(system, MEASURES[measure])
    start_vectors = jax.random.normal(jax.random.key(seed), (n, k), dtype).T.reshape(
        (k,) + x0.shape
    )
    q0, _ = _orthonormalise_compiled(gauge, x0, start_vectors, args)
    make = SOLVERS[solver]()
    r, a = jnp.asarray(rtol, dtype), jnp.asarray(atol, dtype)
    interval = jnp.asarray(renormalise, dtype)
    warm = int(round(transient / renormalise))
    averaged = max(1, int(round(t1 / renormalise)))
    # the transient and the averaging in one loop (one compilation); the transient's
    # growth rates are dropped
    x, q, logs, steps, ok, finite, ahead, ended = _spectrum(
        field,
        gauge,
        x0,
        q0,
        args,
        jnp.asarray(0.0, dtype),
        interval,
        warm + averaged,
        make,
        (r, a, None if dt0 is None else jnp.asarray(dt0, dtype)),
        int(max_steps),
    )
    steps_total = int(np.sum(steps))
    start = lambda: (solvers.rms(x0), solvers.rms(field(jnp.zeros((), dtype), x0, args)))  # noqa: E731
    _check_intervals(
        np.asarray(ok), np.asarray(finite), np.asarray(ahead), ended, start, renormalise, max_steps
    )
    spread = _interval_precision(np.asarray(logs, np.float64), renormalise, dtype, atol)
    logs = logs[warm:]
    logs = np.asarray(logs, np.float64)
    times = renormalise * np.arange(1, averaged + 1)
    history = np.cumsum(logs, axis=0) / times[:, None]
    exponents = history[-1]
    order = np.argsort(-exponents)
    neutral = None
    if energy_system:
        neutral = manifold if measure == "x" else 0
    return LyapunovSpectrum(
        exponents=exponents[order],
        history=history[:, order],
        times=times,
        volume_rate=float(np.sum(exponents)),
        neutral=neutral,
        measure=measure,
        k=k,
        size=n,
        t1=float(averaged * renormalise),
        transient=float(warm * renormalise),
        renormalise=float(renormalise),
        solver=solver,
        rtol=rtol,
        atol=atol,
        steps=steps_total,
        growth_spread=spread,
        flow=flow if energy_system else None,
        dtype=str(jnp.dtype(dtype)),
        x_final=np.asarray(x),
        metadata=metadata(
            study="lyapunov_spectrum",
            dtype=dtype,
            solver=solver,
            rtol=rtol,
            atol=atol,
            k=k,
            renormalise=renormalise,
            transient=float(warm * renormalise),
            seeds={"tangent_vectors": seed},
            flow=flow if energy_system else None,
            measure=measure,
        ),
    )
