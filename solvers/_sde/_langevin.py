"""A solve at a temperature: the flow as the Langevin SDE
`dx = f(x) dt + sqrt(2 T(t) / tau) sigma(x) o dW`, its solvers by name, the checks of
its temperature, key and noise, and its diffrax terms.

`f` is the flow's vector field (`-(1/tau) dE/dg` or its projection); `sigma` the model's
`langevin_noise` (`"isotropic"`: the identity on free tokens; `"tangent"`: the
projection onto the LayerNorm manifold's tangent space scaled by the root of the
mobility). Every solver converges to the Stratonovich SDE written above: an Ito solver
(Euler-Maruyama) gets the drift `(2 T / tau) (1/2) sum_k (D sigma_k) sigma_k`
(`langevin_ito_drift`) added, which is zero for the additive isotropic noise. What each
flow samples: docs, mathematics ("At a temperature")."""

import dataclasses
from collections.abc import Callable
from typing import Any, cast

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np

from et_ode.vocab import NOISES, Noise

from ._brownian import Brownian, BrownianKind, StepPath

# The SDE solvers by name, with the strong orders diffrax documents for additive noise
# and for general (non-commutative) noise, and the drift evaluations of a step.
SDE_SOLVERS: dict[str, type[diffrax.AbstractSolver]] = {
    "euler": diffrax.Euler,  # Euler-Maruyama (Ito)
    "heun": diffrax.Heun,
    "midpoint": diffrax.Midpoint,
    "milstein": diffrax.StratonovichMilstein,
    "euler_heun": diffrax.EulerHeun,
    "sea": diffrax.SEA,
    "shark": diffrax.ShARK,
    "sra1": diffrax.SRA1,
    "general_shark": diffrax.GeneralShARK,
    "spark": diffrax.SPaRK,
}
SDE_SOLVER_NAMES = tuple(SDE_SOLVERS)
# Solvers whose tableaux assume noise that does not depend on the state.
ADDITIVE_ONLY = (diffrax.SEA, diffrax.ShARK, diffrax.SRA1)
# Strong orders (additive noise, general noise) as diffrax documents them; Milstein's 1
# needs commutative noise, which the tangent projection's is not.
STRONG_ORDERS: dict[str, tuple[float, float | None]] = {
    "euler": (1.0, 0.5),
    "heun": (1.0, 0.5),
    "midpoint": (1.0, 0.5),
    "milstein": (1.0, 0.5),
    "euler_heun": (1.0, 0.5),
    "sea": (1.0, None),
    "shark": (1.5, None),
    "sra1": (1.5, None),
    "general_shark": (1.5, 0.5),
    "spark": (1.5, 0.5),
}
DRIFT_EVALS = {
    "euler": 1,
    "heun": 2,
    "midpoint": 2,
    "milstein": 1,
    "euler_heun": 1,
    "sea": 1,
    "shark": 2,
    "sra1": 2,
    "general_shark": 2,
    "spark": 3,
}
SDE_BASES = (diffrax.AbstractItoSolver, diffrax.AbstractStratonovichSolver, diffrax.AbstractSRK)

Temperature = Any  # a real scalar (a tracer allowed) or a function `T(t)`


@dataclasses.dataclass(frozen=True)
class NoiseConfig:
    """What about the noise changes the compiled program (part of `SolveConfig`)."""

    noise: Noise
    ito: bool  # the solver converges to the Ito SDE: the drift gets the correction
    brownian: str  # "step" | "tree" | "key_chain"
    levy_area: type
    schedule: Callable | None  # T(t); None: the constant `numbers["temperature"]`
    steps: int  # key_chain: the grid's step count


@dataclasses.dataclass(frozen=True)
class NoiseRequest:
    """What `solve` was asked for at a temperature: `temperature` (a number, a tracer or
    a schedule `T(t)`), `key`, `noise` (`None`: by flow) and `brownian` (`None`: by
    steps)."""

    temperature: Any
    key: Any
    noise: Noise | None
    brownian: Any

    def configure(self, model, x0, numbers, solver, flow, adaptive, max_steps):
        """The `NoiseConfig`, the per-sample keys and the statistics of the solve; adds the
        temperature and the tree's resolution to `numbers` (in the state's dtype), after
        refusing what cannot run (`check_noise`, `check_schedule`)."""
        noise = self.noise or ("tangent" if flow == "projected" else "isotropic")
        path = default_brownian(self.brownian, adaptive)
        check_noise(model, noise, flow, solver, path, adaptive)
        dtype = x0.dtype
        schedule = self.temperature if callable(self.temperature) else None
        if schedule is not None:
            check_schedule(schedule, numbers["t0"], dtype)
        else:
            numbers["temperature"] = jnp.asarray(self.temperature, dtype)
        if path.kind == "tree":
            tol = path.tol
            if tol is None:
                tol = default_tree_tol(numbers["t0"], numbers["t1"], numbers.get("dt0"), adaptive)
            numbers["brownian_tol"] = jnp.asarray(tol, dtype)
        cfg = NoiseConfig(
            noise=noise,
            ito=isinstance(solver, diffrax.AbstractItoSolver),
            brownian=path.kind,
            levy_area=levy_area_of(solver),
            schedule=schedule,
            steps=max_steps if path.kind == "key_chain" else 0,
        )
        keys = sample_keys(self.key, x0.shape[0]) if x0.ndim == 3 else typed_key(self.key)
        stats = dict(
            temperature="schedule" if schedule is not None else self.temperature,
            noise=noise,
            brownian=path.kind,
        )
        return cfg, keys, stats


def is_active(temperature) -> bool:
    """Whether a `temperature` makes the solve an SDE: not `None` and not a concrete zero
    (`temperature=0` is the ODE itself, bit for bit)."""
    if temperature is None:
        return False
    if callable(temperature) or isinstance(temperature, jax.core.Tracer):
        return True
    try:
        value = np.asarray(temperature)
    except Exception:  # noqa: BLE001  refused with its message by check_temperature
        return True
    return not (value.shape == () and np.issubdtype(value.dtype, np.number) and value == 0)


def check_temperature(temperature, key, deferred) -> None:
    """Refuse, in one line, a temperature that is negative, NaN, infinite or not a
    scalar, a schedule that does not give one at `t0`, and a temperature without a key."""
    if key is None:
        raise ValueError(
            "temperature needs key: the seed of the noise, such as key=jax.random.key(0) "
            "(each sample of a batch draws its own noise from it)."
        )
    if not _is_key(key):
        raise ValueError(
            f"key must be a JAX PRNG key, such as jax.random.key(0) (got {_describe(key)})."
        )
    if callable(temperature):
        return
    if isinstance(temperature, jax.core.Tracer):
        if temperature.shape != ():
            raise ValueError(f"temperature must be a scalar (got shape {temperature.shape}).")
        deferred.append(
            (
                jnp.isfinite(temperature) & (temperature >= 0),
                "temperature must be a finite number >= 0 (got a traced value that is not).",
            )
        )
        return
    value = np.asarray(temperature) if not isinstance(temperature, bool) else None
    if value is None or value.dtype == np.bool_ or not np.issubdtype(value.dtype, np.number):
        raise ValueError(
            f"temperature must be a real number >= 0 or a function T(t) (got {temperature!r})."
        )
    if value.shape != ():
        raise ValueError(
            f"temperature must be a scalar (got shape {value.shape}); for a schedule pass a "
            "function T(t), for several temperatures run jax.vmap over solve."
        )
    if not (np.isfinite(value) and value >= 0):
        raise ValueError(f"temperature must be a finite number >= 0 (got {temperature!r}).")


def check_schedule(schedule, t0, dtype) -> None:
    """A schedule `T(t)` must give a finite scalar >= 0 at `t0` (checked once, concretely
    where `t0` is a number)."""
    try:
        value = jax.eval_shape(schedule, jax.ShapeDtypeStruct((), dtype))
    except Exception as error:  # noqa: BLE001  a user function: say which call failed
        raise ValueError(
            f"the temperature schedule T(t) failed on a scalar t: {type(error).__name__}: {error}"
        ) from None
    if getattr(value, "shape", None) != ():
        raise ValueError(
            "the temperature schedule T(t) must return a scalar "
            f"(got {getattr(value, 'shape', type(value).__name__)})."
        )
    if isinstance(t0, jax.core.Tracer):
        return
    at_t0 = float(np.asarray(schedule(jnp.asarray(t0, dtype))))
    if not (np.isfinite(at_t0) and at_t0 >= 0):
        raise ValueError(
            f"the temperature schedule gives T(t0) = {at_t0:g}: it must be a finite number >= 0."
        )


def _is_key(key) -> bool:
    if isinstance(key, jax.Array | jax.core.Tracer):
        if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
            return key.shape == ()
        return key.dtype == jnp.uint32 and key.shape == (2,)  # a raw key
    return False


def _describe(value) -> str:
    shape = getattr(value, "shape", None)
    return f"{type(value).__name__} of shape {shape}" if shape is not None else repr(value)


def sample_keys(key, batch: int):
    """One key per sample: sample `i` gets `jax.random.fold_in(key, i)`, whatever the
    batch size (a padded or sharded batch gives each sample the same noise)."""
    if not jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.wrap_key_data(key)
    return jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(batch))


def typed_key(key):
    return (
        key
        if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)
        else (jax.random.wrap_key_data(key))
    )


def check_noise(model, noise, flow, solver, brownian: Brownian, adaptive: bool) -> None:
    """Refuse the combinations of noise, flow, solver and path that cannot run."""
    if noise not in NOISES:
        raise ValueError(f"noise must be one of {', '.join(map(repr, NOISES))} (got {noise!r}).")
    if noise == "tangent" and not callable(getattr(model, "langevin_noise", None)):
        raise ValueError(
            "noise='tangent' needs a model with langevin_noise(x, w, args, noise) and "
            "langevin_ito_drift(x, args, noise) (the ET has both); use noise='isotropic'."
        )
    if flow == "projected" and noise == "isotropic":
        raise ValueError(
            "isotropic noise leaves the LayerNorm manifold that the projected flow keeps: "
            "use noise='tangent' (the default with flow='projected')."
        )
    name = type(solver).__name__
    if noise == "tangent" and isinstance(solver, ADDITIVE_ONLY):
        raise ValueError(
            f"solver {name} assumes additive noise, but noise='tangent' depends on the state; "
            "use heun, milstein, general_shark or spark (or noise='isotropic')."
        )
    if adaptive and brownian.kind != "tree":
        raise ValueError(
            f"adaptive steps need brownian='tree' (a rejected step re-queries the path; "
            f"got brownian={brownian.kind!r})."
        )


def default_brownian(brownian, adaptive: bool) -> Brownian:
    if brownian is None:
        return Brownian("tree" if adaptive else "step")
    if isinstance(brownian, Brownian):
        return brownian
    if isinstance(brownian, str):
        return Brownian(cast(BrownianKind, brownian))  # checked by Brownian
    raise ValueError(
        f"brownian must be 'step', 'tree', 'key_chain' or a solvers.Brownian (got {brownian!r})."
    )


class _Drift(eqx.Module):
    """The drift: the flow's field, plus the Ito correction for an Ito solver.
    diffrax `args`: `(model_args, threshold, temperature)`."""

    model: Any
    flow: str = eqx.field(static=True)
    cfg: NoiseConfig = eqx.field(static=True)

    def __call__(self, t, y, args):
        field = self.model.vector_field(t, y, args[0], self.flow)
        if self.cfg.ito and self.cfg.noise == "tangent":
            tau = getattr(self.model, "tau", 1.0)
            correction = self.model.langevin_ito_drift(y, args[0], self.cfg.noise)
            field = field + (2 * temperature_at(self.cfg, t, args) / tau) * correction
        return field


class _Diffusion(eqx.Module):
    """`sqrt(2 T(t) / tau) sigma(x)` as a lineax operator on the noise `[N, D]`: diagonal
    for the isotropic noise (independent of `x`: the additive-noise solvers take it), a
    function of `x` for the tangent noise."""

    model: Any
    cfg: NoiseConfig = eqx.field(static=True)

    def __call__(self, t, y, args):
        tau = getattr(self.model, "tau", 1.0)
        coefficient = jnp.sqrt(2 * temperature_at(self.cfg, t, args) / tau).astype(y.dtype)
        model_args = args[0]
        if self.cfg.noise == "isotropic":
            ones = jnp.ones_like(y)
            free = (
                self.model.langevin_noise(y, ones, model_args, "isotropic")
                if callable(getattr(self.model, "langevin_noise", None))
                else ones
            )
            if free is ones:  # no token clamped: a multiple of the identity, one product
                return coefficient * lx.IdentityLinearOperator(
                    jax.ShapeDtypeStruct(y.shape, y.dtype)
                )
            return lx.DiagonalLinearOperator(coefficient * free)
        structure = jax.ShapeDtypeStruct(y.shape, y.dtype)
        return lx.FunctionLinearOperator(
            lambda w: coefficient * self.model.langevin_noise(y, w, model_args, "tangent"),
            structure,
        )


def temperature_at(cfg: NoiseConfig, t, args):
    return cfg.schedule(t) if cfg.schedule is not None else args[2]


def terms(model, flow, cfg: NoiseConfig, key, numbers, shape) -> diffrax.MultiTerm:
    """The drift and diffusion terms of one sample, its Brownian path built from `key`."""
    path: diffrax.AbstractBrownianPath
    if cfg.brownian == "tree":
        path = diffrax.VirtualBrownianTree(
            numbers["t0"],
            numbers["t1"],
            numbers["brownian_tol"],
            shape,
            key,
            levy_area=cfg.levy_area,
        )
    else:
        path = StepPath(
            shape,
            key,
            numbers["t0"],
            numbers["dt0"],
            cfg.steps,
            chain=cfg.brownian == "key_chain",
            levy_area=cfg.levy_area,
        )
    return diffrax.MultiTerm(
        diffrax.ODETerm(_Drift(model, flow, cfg)),
        diffrax.ControlTerm(_Diffusion(model, cfg), path),
    )


def default_tree_tol(t0, t1, dt0, adaptive: bool):
    """The resolution of a `"tree"` path: `dt0 / 16` for constant steps (a solve refined
    up to 16 times shares the path exactly on a dyadic grid), `(t1 - t0) 2^-16` else."""
    if adaptive or dt0 is None:
        return (t1 - t0) * 2.0**-16
    return dt0 / 16


def levy_area_of(solver) -> type:
    """The Levy area the solver reads (an SRK's `minimal_levy_area`), as the concrete
    class a path draws; the increment alone for the others."""
    wanted = getattr(solver, "minimal_levy_area", diffrax.BrownianIncrement)
    concrete = (diffrax.BrownianIncrement, diffrax.SpaceTimeLevyArea, diffrax.SpaceTimeTimeLevyArea)
    return next(kind for kind in concrete if issubclass(kind, wanted))
