"""The orders of the SDE solvers, measured: `sde_orders` solves a batch of noisy copies of
one start with each solver at several constant steps, all on the same Brownian paths
(`solvers.Brownian("tree")`), against a fine-step reference on those paths, and fits
the strong order (with a bootstrap confidence interval over paths) and the weak error of
the mean energy. Its settings (`SdeOrderSettings`) and typed results (`SdeOrders`, one
`SdeOrder` per solver) live here too.

Which reference: a solver reads either the Brownian increment alone or also the
space-time Levy area, and diffrax's `VirtualBrownianTree` draws a different path for
each (same key, other numbers), so a solver is only ever compared with a reference that
reads the same (`reference="auto"`: heun for the increment; shark, or general_shark for
state-dependent noise, for the Levy area), or with itself (`reference="self"`).
"""

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, Literal

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float, PRNGKeyArray

from et_ode import solvers as _solvers
from et_ode.vocab import NOISES, Flow, Noise

from .._records import metadata, model_dtype
from .._results import Result
from .._settings import Settings, at_least, positive

Reference = Literal["auto", "self"]
# `reference="auto"`: the solver whose fine solve is the reference, by the Levy area the
# measured solver reads (its Brownian path) and the noise (the additive-noise solvers do
# not apply to state-dependent noise).
AUTO_REFERENCE = {
    ("increment", "isotropic"): "heun",
    ("increment", "tangent"): "heun",
    ("space-time", "isotropic"): "shark",
    ("space-time", "tangent"): "general_shark",
}


@dataclasses.dataclass(frozen=True)
class SdeOrderSettings(Settings):
    """How `sde_orders` measures (the solvers, flow, noise and temperature are its
    question).

    - `paths`: noisy copies of the start (path `i` draws its noise with
      `jax.random.fold_in(key, i)`); at least 2, 200 for a confidence interval worth
      quoting.
    - `t1`: the horizon at which the errors are taken (tau units; from `t0 = 0`).
    - `dts`: the constant steps measured (tau units), at least two distinct ones, each
      dividing `t1` into whole steps.
    - `reference_dt`: the reference's step, dividing every step of `dts` into whole
      steps. Its own error enters the fit at the smallest step by about
      `(reference_dt / dt)^(2 p)` of the squared error, for order `p`: a ratio of 8 is
      ample for order 1 and above, and biases an order 0.5 by about +0.03.
    - `reference`: `"auto"` (the solver reading the same Brownian path with the highest
      order: `AUTO_REFERENCE`) or `"self"` (each solver at `reference_dt`).
    - `brownian_tol`: the resolution of the tree (tau units; `None`: `reference_dt` where
      `t1 / reference_dt` is a power of two, every step's end then a node of the tree,
      exact, else `reference_dt / 16`).
    - `bootstrap`, `seed`: resamples of the paths for the confidence interval, and
      NumPy's seed for them.
    """

    paths: int = 200
    t1: float = 0.5
    dts: tuple[float, ...] = (2.0**-3, 2.0**-4, 2.0**-5, 2.0**-6)
    reference_dt: float = 2.0**-9
    reference: Reference = "auto"
    brownian_tol: float | None = None
    bootstrap: int = 1000
    seed: int = 0

    def check(self) -> None:
        at_least(self, "paths", 2)
        positive(self, "t1")
        positive(self, "reference_dt")
        positive(self, "brownian_tol", allow_none=True)
        at_least(self, "bootstrap", 1)
        at_least(self, "seed", 0)
        dts = tuple(self.dts)
        if len(set(dts)) < 2 or not all(isinstance(dt, int | float) and dt > 0 for dt in dts):
            raise ValueError(
                f"SdeOrderSettings.dts must hold at least two distinct steps > 0 (got {dts!r})."
            )
        for dt in dts:
            whole = _whole(self.t1, dt) and _whole(dt, self.reference_dt)
            if not (whole and dt >= 2 * self.reference_dt):
                raise ValueError(
                    f"SdeOrderSettings: each step must divide t1={self.t1:g} into whole steps, "
                    f"and reference_dt={self.reference_dt:g} each step, with at least two "
                    f"reference steps to one step (got dt={dt:g})."
                )
        if self.reference not in ("auto", "self"):
            raise ValueError(
                f"SdeOrderSettings.reference must be 'auto' or 'self' (got {self.reference!r})."
            )

    @property
    def tol(self) -> float:
        """The tree's resolution used (`brownian_tol` or its default)."""
        if self.brownian_tol is not None:
            return float(self.brownian_tol)
        steps = round(self.t1 / self.reference_dt)
        dyadic = steps & (steps - 1) == 0
        return float(self.reference_dt) if dyadic else float(self.reference_dt) / 16


def _whole(span: float, step: float) -> bool:
    """Whether `step` divides `span` into at least one whole number of steps (two for the
    reference's ratio), to round-off."""
    ratio = span / step
    return round(ratio) >= 1 and abs(ratio - round(ratio)) < 1e-9 * max(1.0, ratio)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class SdeOrder(Result):
    """One solver's measured orders (`sde_orders`)."""

    solver: str
    """The solver's name (`solvers.SDE_SOLVER_NAMES`)."""
    expected: float
    """The strong order diffrax documents (`solvers.STRONG_ORDERS`): the additive entry
    for isotropic noise, the general one for tangent noise."""
    reference: str
    """The solver whose solve at `reference_dt` was the reference."""
    dts: np.ndarray
    """`[S]`: the steps (tau units), largest first."""
    strong_errors: np.ndarray
    """`[S]`: the mean over paths of the RMS over entries of `x(t1) - x_ref(t1)` (the
    state's units)."""
    order: float
    """The least-squares slope of log strong error against log dt."""
    ci_low: float
    """The 2.5 % point of the slope over bootstrap resamples of the paths."""
    ci_high: float
    """The 97.5 % point."""
    weak_errors: np.ndarray
    """`[S]`: `|mean E(x(t1)) - mean E(x_ref(t1))|` over the same paths (energy units):
    the discretisation's weak error of the mean energy, the paths' Monte-Carlo error
    cancelling in the difference."""
    weak_standard_errors: np.ndarray
    """`[S]`: the standard error of that difference (the standard deviation over paths
    of `E(x) - E(x_ref)` over `sqrt(paths)`): a weak error below about twice it is not
    resolved."""
    weak_order: float
    """The least-squares slope of log weak error against log dt (NaN where a weak error
    is zero)."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class SdeOrders(Result):
    """The result of `sde_orders`: each solver's strong order with its confidence
    interval, and the weak error of the mean energy, on one flow and noise."""

    runs: list[SdeOrder]
    """One per solver, in the order given."""
    flow: str
    """The flow (`"native"` or `"projected"`)."""
    noise: str
    """The noise (`"isotropic"`: additive; `"tangent"`: multiplicative)."""
    temperature: float
    """The temperature `T` (energy units)."""
    paths: int
    """The noisy copies of the start (the Brownian paths)."""
    t1: float
    """The horizon of every solve (tau units)."""
    reference_dt: float
    """The reference's step (tau units)."""
    metadata: dict
    """What produced it (study, dtype, the settings, the tree's resolution, the key's
    data, the bootstrap's seed and resamples, the error definitions, versions)."""

    def run(self, solver: str) -> SdeOrder:
        """The run of `solver` (by name)."""
        for record in self.runs:
            if record.solver == solver:
                return record
        raise KeyError(f"no run of {solver!r}; measured: {[r.solver for r in self.runs]}")


def _levy(name: str) -> str:
    """`"space-time"` if the solver reads the space-time Levy area, else `"increment"`."""
    solver = _solvers.get_preset(name, sde=True).make()
    wanted = getattr(solver, "minimal_levy_area", diffrax.BrownianIncrement)
    return (
        "space-time"
        if issubclass(diffrax.SpaceTimeLevyArea, wanted)
        and not issubclass(diffrax.BrownianIncrement, wanted)
        else "increment"
    )


def _key_data(key):
    typed = jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)
    return jax.random.key_data(key) if typed else key


def _expected(name: str, noise: Noise) -> float:
    if name not in _solvers.SDE_SOLVER_NAMES:
        raise ValueError(
            f"sde_orders measures the SDE solvers by name ({', '.join(_solvers.SDE_SOLVER_NAMES)}"
            f"; got {name!r})."
        )
    expected = _solvers.STRONG_ORDERS[name][0 if noise == "isotropic" else 1]
    if expected is None:
        raise ValueError(
            f"solver {name} assumes additive noise, and noise={noise!r} depends on the state: "
            "leave it out of solvers (it has no order there)."
        )
    return float(expected)


def slopes(dts: np.ndarray, errors: np.ndarray) -> np.ndarray | float:
    """The least-squares slopes of `log errors` against `log dts` (`errors`: `[..., S]`;
    a number for `[S]`)."""
    x = np.log(np.asarray(dts, np.float64))
    x = x - x.mean()
    y = np.log(np.asarray(errors, np.float64))
    y = y - y.mean(axis=-1, keepdims=True)
    return (y @ x) / (x @ x)


def strong_fit(dts, per_path: np.ndarray, bootstrap: int, seed: int) -> tuple[float, float, float]:
    """The strong order of `per_path` errors `[P, S]` (the slope of their mean over paths)
    and the 95 % bootstrap interval: paths resampled with replacement, refitted."""
    order = float(slopes(dts, per_path.mean(axis=0)))
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, per_path.shape[0], (bootstrap, per_path.shape[0]))
    resampled = slopes(dts, per_path[picks].mean(axis=1))
    low, high = np.percentile(resampled, [2.5, 97.5])
    return order, float(low), float(high)


def sde_orders(
    model: _solvers.EnergySystem,
    x0: Float[ArrayLike, "N D"],
    args: Any = None,
    *,
    solvers: Sequence[str] = _solvers.SDE_SOLVER_NAMES,
    flow: Flow = "native",
    noise: Noise | None = None,
    temperature: float,
    key: PRNGKeyArray,
    settings: SdeOrderSettings = SdeOrderSettings(),
) -> SdeOrders:
    """The strong order of each SDE solver on the Langevin SDE of `model`'s flow
    (`solvers.solve` at a temperature), and the weak error of the mean energy.

    Each solver solves `settings.paths` copies of `x0` (copy `i` its own noise, keyed
    `fold_in(key, i)`) to `settings.t1` at every step of `settings.dts`, on the same
    Brownian paths (a `VirtualBrownianTree` at `settings.tol`), and is compared with a
    reference solved at `settings.reference_dt` on those paths (`settings.reference`).

    **Arguments:**

    - `model`, `x0` (`[N, D]`, one start), `args`: as in `solvers.solve`.
    - `solvers`: SDE solver names; with `noise="tangent"` not `sea`, `shark`, `sra1`
      (additive noise only). `spark` takes constant steps here.
    - `flow`, `noise`: as in `solvers.solve` (`noise=None`: isotropic on the native flow,
      tangent on the projected one).
    - `temperature`: `T > 0` (energy units): the noise's size, `sqrt(2 T / tau)`. Large
      enough that the noise's error terms, not the drift's, set the errors at the steps
      measured (else a solver of high deterministic order shows a slope above its
      strong order).
    - `key`: the noise's seed (`jax.random.key(0)`).
    - `settings`: an `SdeOrderSettings` (paths, `t1`, steps, the reference, the tree's
      resolution, the bootstrap).

    **Returns:** an `SdeOrders`: per solver an `SdeOrder` (expected and fitted strong
    order, its 95 % interval, the errors at each step, the weak errors of the mean
    energy with their standard errors), the settings and `metadata`.
    """
    noise = noise or ("tangent" if flow == "projected" else "isotropic")
    if noise not in NOISES:
        raise ValueError(f"noise must be one of {', '.join(map(repr, NOISES))} (got {noise!r}).")
    if not (
        isinstance(temperature, int | float) and math.isfinite(temperature) and temperature > 0
    ):
        raise ValueError(f"temperature must be a finite number > 0 (got {temperature!r}).")
    x0 = jnp.asarray(x0)
    if x0.ndim != 2:
        raise ValueError(f"x0 must be one start [N, D] (got shape {x0.shape}).")
    names = list(solvers)
    expected = {name: _expected(name, noise) for name in names}
    s = settings
    dts = np.sort(np.asarray(s.dts, np.float64))[::-1]
    xb = jnp.broadcast_to(x0, (s.paths, *x0.shape))
    cap = round(s.t1 / s.reference_dt) + 1  # one cap: a solver's steps share its program
    path = _solvers.Brownian("tree", tol=s.tol)
    energy = jax.jit(jax.vmap(lambda x: model.energy(x, args)))

    def solve(name: str, dt: float) -> np.ndarray:
        return np.asarray(
            _solvers.solve(
                model,
                xb,
                args=args,
                t1=s.t1,
                solver=name,
                dt0=dt,
                flow=flow,
                max_steps=cap,
                temperature=temperature,
                key=key,
                noise=noise,
                brownian=path,
            ).x_final
        )

    references: dict[str, np.ndarray] = {}
    runs = []
    for name in names:
        ref_name = name if s.reference == "self" else AUTO_REFERENCE[(_levy(name), noise)]
        if ref_name not in references:
            references[ref_name] = solve(ref_name, s.reference_dt)
        x_ref = references[ref_name]
        e_ref = np.asarray(energy(x_ref))
        per_path, weak_diff = [], []
        for dt in dts:
            x = solve(name, float(dt))
            per_path.append(np.sqrt(np.mean((x - x_ref) ** 2, axis=(1, 2))))
            weak_diff.append(np.asarray(energy(x)) - e_ref)
        errors = np.stack(per_path, axis=1)  # [P, S]
        diffs = np.stack(weak_diff, axis=1)
        order, low, high = strong_fit(dts, errors, s.bootstrap, s.seed)
        weak = np.abs(diffs.mean(axis=0))
        runs.append(
            SdeOrder(
                solver=name,
                expected=expected[name],
                reference=ref_name,
                dts=dts,
                strong_errors=errors.mean(axis=0),
                order=order,
                ci_low=low,
                ci_high=high,
                weak_errors=weak,
                weak_standard_errors=diffs.std(axis=0, ddof=1) / math.sqrt(s.paths),
                weak_order=float(slopes(dts, weak)) if np.all(weak > 0) else float("nan"),
            )
        )
    return SdeOrders(
        runs=runs,
        flow=flow,
        noise=noise,
        temperature=float(temperature),
        paths=s.paths,
        t1=float(s.t1),
        reference_dt=float(s.reference_dt),
        metadata=metadata(
            study="sde_orders",
            dtype=model_dtype(model),
            seeds=dict(bootstrap=s.seed),
            key=np.asarray(_key_data(key)).tolist(),
            settings=s.to_json(),
            brownian_tol=s.tol,
            strong_error="mean over paths of the RMS over entries of x(t1) - x_ref(t1)",
            weak_error="|mean over paths of E(x(t1)) - E(x_ref(t1))|, same paths",
            interval="2.5 and 97.5 % points of the slope over bootstrap resamples of paths",
        ),
    )
