"""Escape times at a temperature, and Kramers' law: how long a noisy flow stays in one
basin before it first reaches another, against `1/T`.

Many paths from one start are solved in one batched program (`solvers.solve` with a
temperature and a `solvers.PassageStop`): each stops at the end of the first step where
`condition(x, args)` holds (it has escaped) or runs to `t1` (censored). Escape from a
deep well is a Poisson process to a good approximation (the time spent relaxing in the
well is short against the time to escape), so the mean escape time is estimated by the
exponential maximum-likelihood estimator, censored paths included: `mean = (sum of the
times every path ran) / (paths that escaped)`, its 95 % interval from `2 n mean / mean_hat
~ chi^2(2 n)` for `n` escapes. Kramers: for a barrier `dE` (the energy of the index-1
saddle over that of the well), `log mean ~ log prefactor + dE / T` as `T -> 0`: the
slope of `log mean` against `1/T` estimates the barrier. Tested first on a
one-dimensional double well, whose mean first-passage time is known in closed form
(a double integral, by quadrature) and whose Kramers rate is
`sqrt(U''(a) |U''(b)|) / (2 pi) exp(-dU / T)` (tau = 1, mobility 1).
"""

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from et_ode import solvers
from et_ode.vocab import Noise

from .._records import metadata
from .._results import Result
from .._settings import Settings, positive


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class EscapeTimes(Result):
    """The result of `escape_times`: per temperature (ascending `1/T`), the escapes of
    `paths` noisy paths from one start, the mean escape time with its 95 % interval, and
    the Kramers fit of `log mean` against `1/T`. Times in tau units."""

    temperatures: np.ndarray
    """`[k]`: the temperatures, as given."""
    escaped: np.ndarray
    """`[k]`: paths that escaped before `t1`, per temperature."""
    times: np.ndarray
    """`[k, paths]`: each path's escape time (the end of the step where the condition
    first held), `t1` where it did not escape."""
    mean: np.ndarray
    """`[k]`: the mean escape time, exponential MLE with censoring (NaN: none escaped)."""
    low: np.ndarray
    """`[k]`: the mean's 95 % interval, low end."""
    high: np.ndarray
    """`[k]`: its high end (inf where none escaped)."""
    slope: float
    """The slope of `log mean` against `1/T` over the temperatures with an escape
    (energy units): Kramers' estimate of the barrier."""
    slope_low: float
    """Its 95 % interval (weighted least squares, each `log mean` of variance `1/n` for
    its `n` escapes), low end."""
    slope_high: float
    """High end."""
    intercept: float
    """The fit's `log mean` at `1/T = 0`: the log of the Kramers prefactor (log tau)."""
    barrier: float | None
    """The barrier given to compare with (`E(saddle) - E(well)`), or None."""
    paths: int
    """Paths per temperature."""
    t1: float
    """The horizon of each path (tau units)."""
    dt0: float
    """The constant step."""
    solver: str
    """The SDE solver."""
    metadata: dict
    """Dtype, noise, flow, seed and versions."""


def escape_mle(times: np.ndarray, escaped: np.ndarray) -> tuple[float, float, float]:
    """`(mean, low, high)`: the mean of exponential waiting times `times` (`[n]`), of
    which `escaped` (`[n]`, bool) ended by an escape and the rest were censored at their
    time; the 95 % interval from the chi-square law of the total time. `(nan, 0, inf)`
    where nothing escaped."""
    events = int(np.sum(escaped))
    exposure = float(np.sum(times))
    if events == 0:
        return float("nan"), 0.0, float("inf")
    mean = exposure / events
    low = 2 * exposure / stats.chi2.ppf(0.975, 2 * events)
    high = 2 * exposure / stats.chi2.ppf(0.025, 2 * events)
    return mean, float(low), float(high)


def _fit(inverse_t: np.ndarray, mean, escaped) -> tuple[float, float, float, float]:
    """The slope of `log mean` against `1/T`, weighted least squares with the variance of
    each `log mean`, `1 / n` for `n` escapes (the exponential MLE's), its 95 % interval
    (normal), and the intercept."""
    keep = np.isfinite(mean) & (escaped > 0)
    x, y, w = inverse_t[keep], np.log(mean[keep]), escaped[keep].astype(float)
    if x.size < 2:
        return (float("nan"),) * 4
    centre = np.sum(w * x) / np.sum(w)
    spread = np.sum(w * (x - centre) ** 2)
    slope = np.sum(w * (x - centre) * (y - np.sum(w * y) / np.sum(w))) / spread
    intercept = np.sum(w * y) / np.sum(w) - slope * centre
    half = 1.96 / np.sqrt(spread)
    return float(slope), float(slope - half), float(slope + half), float(intercept)


ESCAPE_OPTIONS = solvers.SolveOptions(solver="euler", dt0=0.01)
"""How `escape_times` solves by default: Euler-Maruyama, constant steps of 0.01 tau, the
native flow (its noise isotropic)."""


@dataclasses.dataclass(frozen=True)
class EscapeSettings(Settings):
    """What `escape_times` runs besides how it solves.

    - `paths`: noisy paths per temperature, one batch (at least 2).
    - `t1`: each path's horizon (tau): a path that has not escaped by then is censored.
    - `noise`: `"isotropic"` or `"tangent"` (None: by flow, as `solvers.solve`).
    - `seed`: the noise's seed when no `key` is given.
    """

    paths: int = 200
    t1: float = 100.0
    noise: Noise | None = None
    seed: int = 0

    def check(self) -> None:
        if not (isinstance(self.paths, int) and self.paths >= 2):
            raise ValueError(f"EscapeSettings.paths must be an integer >= 2 (got {self.paths!r}).")
        positive(self, "t1")


def escape_times(
    model: solvers.EnergySystem,
    start: Any,
    condition: Callable,
    temperatures: Sequence[float],
    *,
    options: solvers.SolveOptions = ESCAPE_OPTIONS,
    settings: EscapeSettings = EscapeSettings(),
    barrier: float | None = None,
    args: Any = None,
    key: Any = None,
) -> EscapeTimes:
    """Escape times of `settings.paths` noisy paths from `start` (`[N, D]`) at each
    temperature: each path stops at the end of the first step where `condition(x, args)`
    holds.

    **Arguments:**

    - `model`, `args`: the energy system and its conditions.
    - `start`: the state the paths leave (a point of the well, `[N, D]`).
    - `condition`: `(x, args) -> bool`, true once a path has escaped (closer to the
      other attractor than to this one, past a plane beyond the saddle...).
    - `temperatures`: at least two, where escapes happen before `t1` and the barrier is
      several `T` high (Kramers' law is the limit `T -> 0`).
    - `options`: how each temperature's batched solve runs (`ESCAPE_OPTIONS`: Euler-
      Maruyama, dt 0.01; constant steps: the escape time is resolved to the step).
    - `settings`: an `EscapeSettings` (paths, horizon, noise, seed).
    - `barrier`: the energy barrier to compare the slope with (from the landscape's
      index-1 saddle), recorded beside it.
    - `key`: the noise (temperature `i` draws with `fold_in(key, i)`; default
      `jax.random.key(settings.seed)`).

    **Returns:** an `EscapeTimes`.
    """
    values = np.asarray(temperatures, dtype=float)
    if values.ndim != 1 or values.size < 2 or not np.all(values > 0):
        raise ValueError(
            "escape_times needs at least two positive temperatures, to fit log(mean) "
            f"against 1/T (got {values.tolist()})."
        )
    start = jnp.asarray(start)
    if start.ndim != 2:
        raise ValueError(f"start must be one state [N, D] (got shape {start.shape}).")
    if options.adaptive or options.dt0 is None:
        raise ValueError(
            "escape_times takes constant steps (options with dt0, no rtol/atol): the "
            "passage is checked at the end of each step."
        )
    paths, t1 = settings.paths, settings.t1
    key = jax.random.key(settings.seed) if key is None else key
    batch = jnp.broadcast_to(start, (paths, *start.shape))
    steps = solvers.constant_step_count(0.0, t1, options.dt0) or 0
    stop = solvers.PassageStop(condition)
    all_times, escaped = [], []
    for i, temperature in enumerate(values):
        sol = solvers.solve(
            model,
            batch,
            args=args,
            options=options.replace(max_steps=max(int(options.max_steps or 0), steps + 1)),
            t1=t1,
            noise=settings.noise,
            temperature=float(temperature),
            key=jax.random.fold_in(key, i),
            stop=stop,
            throw=False,
        )
        reasons = sol.stats["stop_reason"]
        failed = sorted({r for r in reasons if r not in ("passage", "t1")})
        if failed:
            raise RuntimeError(
                f"escape_times at T = {temperature:g}: {len(failed)} kind(s) of failed solve "
                f"({', '.join(failed)}); reduce dt0 or the temperature."
            )
        all_times.append(np.asarray(sol.t_final, dtype=float))
        escaped.append(np.asarray([r == "passage" for r in reasons]))
    estimates = np.asarray([escape_mle(t, e) for t, e in zip(all_times, escaped)])
    mean, low, high = estimates.T
    counts = np.asarray([int(np.sum(e)) for e in escaped])
    slope, slope_low, slope_high, intercept = _fit(1 / values, mean, counts)
    return EscapeTimes(
        temperatures=values,
        escaped=counts,
        times=np.asarray(all_times),
        mean=mean,
        low=low,
        high=high,
        slope=slope,
        slope_low=slope_low,
        slope_high=slope_high,
        intercept=intercept,
        barrier=None if barrier is None else float(barrier),
        paths=paths,
        t1=float(t1),
        dt0=float(options.dt0),
        solver=str(options.solver),
        metadata=metadata(
            study="escape_times",
            dtype=start.dtype,
            seeds={"noise": settings.seed},
            noise=settings.noise,
            flow=options.flow,
            condition=getattr(condition, "__name__", "condition"),
        ),
    )
