"""Do gradients vanish with depth? Parameter gradients against horizon per adjoint, and
the adjoint state `dL/dx(t)` along a trajectory.

The horizon `T` plays the role of depth (with constant steps, `T / dt0` steps, the
paper's 12 layers at `T = 1.2`). For each adjoint the norm of the gradient of a loss
with respect to every parameter is measured at each horizon:

- `"checkpoint"`: exact gradients of the discrete solve;
- `"backsolve"`: the continuous adjoint, only at horizons up to
  `solvers.BACKSOLVE_STABLE_HORIZON[flow]` (beyond it the backward solve was measured to
  be unreliable; those horizons are recorded as skipped);
- `"implicit"`: the gradient at the fixed point of the projected flow (horizon-free: the
  solve runs to a `FixedPointStop`), compared with the checkpoint gradient at the longest
  horizon (equal once that horizon has converged, on the projected flow).

The adjoint state `dL/dx(s)` is the gradient of the loss with respect to the state at
time `s`, obtained by splitting the solve at `s` (solve `0 -> s` without gradients, then
differentiate `s -> T`); its decay towards `s = 0` is the vanishing of the gradient
with respect to the input.
"""

import dataclasses
import math
import warnings
from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float, Real

from et_ode import solvers
from et_ode.tasks import MaskedImageET, Masking, masked_mse
from et_ode.vocab import ADJOINTS, Adjoint

from .._common import as_batch
from .._geometry import require
from .._records import metadata, model_dtype
from .._settings import Settings, at_least, positive
from ._task_records import GradientDepth, gradient_depth_record

GRADIENT_DEPTH_OPTIONS = solvers.SolveOptions(solver="euler", dt0=0.1, max_steps=20_000)
"""`gradient_depth`'s solves: the paper's Euler steps of 0.1 on the native flow, at most
20,000 steps (a horizon `T` is then `T / 0.1` steps, the paper's 12 layers at 1.2)."""


@dataclasses.dataclass(frozen=True)
class GradientDepthSettings(Settings):
    """What `gradient_depth` measures besides the gradients at each horizon.

    - `split_times`: the times `s` (tau) of the adjoint state `dL/dx(s)` along the
      longest trajectory (`None`: `n_splits` points from 0 to the longest horizon, on
      the step grid for constant steps); those at or past the longest horizon are
      dropped.
    - `n_splits`: how many split times when `split_times` is None (default 7).
    - `implicit_options`: how the `"implicit"` adjoint's solve to the fixed point runs,
      a `solvers.SolveOptions` whose flow is replaced by the projected one (`None`:
      tsit5 at rtol 1e-10, atol 1e-12 in float64, 1e-6 and 1e-8 in float32, first step
      0.1, at most `max(options.max_steps, 20000)` steps).
    - `implicit_t1`: the time cap of that solve (tau, default 1000).
    - `fixed_point_atol`: the RMS of G at which that solve stops at the fixed point
      (`None`: 1e-9 in float64, 1e-4 in float32).
    - `check_implicit`: also differentiate the implicit solve's own trajectory (to twice
      its stop time, without the stop) with the checkpoint adjoint (one more
      compilation).
    - `vanish_threshold`: a gradient counts as vanishing when its norm at the longest
      horizon is below this fraction of its norm at the shortest (default 0.1).
    - `loss_seed`: the seed of the target of an `EnergyTransformer`'s loss (default 0).
    """

    split_times: Sequence[float] | Real[ArrayLike, " splits"] | None = None
    n_splits: int = 7
    implicit_options: solvers.SolveOptions | None = None
    implicit_t1: float = 1000.0
    fixed_point_atol: float | None = None
    check_implicit: bool = False
    vanish_threshold: float = 0.1
    loss_seed: int = 0

    def check(self) -> None:
        at_least(self, "n_splits", 1)
        if self.implicit_options is not None and not isinstance(
            self.implicit_options, solvers.SolveOptions
        ):
            raise ValueError(
                "GradientDepthSettings.implicit_options must be a solvers.SolveOptions or "
                f"None (got {type(self.implicit_options).__name__})."
            )
        positive(self, "implicit_t1")
        positive(self, "fixed_point_atol", allow_none=True)
        if not isinstance(self.check_implicit, bool):
            raise ValueError(
                f"GradientDepthSettings.check_implicit must be True or False (got "
                f"{self.check_implicit!r})."
            )
        positive(self, "vanish_threshold")
        if isinstance(self.loss_seed, bool) or not isinstance(self.loss_seed, int):
            raise ValueError(
                f"GradientDepthSettings.loss_seed must be an integer (got {self.loss_seed!r})."
            )


def _flat(tree) -> np.ndarray:
    return np.concatenate(
        [np.ravel(np.asarray(a)) for a in jax.tree.leaves(eqx.filter(tree, eqx.is_inexact_array))]
    )


def _norm(tree) -> float:
    leaves = [jnp.ravel(leaf) for leaf in jax.tree.leaves(eqx.filter(tree, eqx.is_inexact_array))]
    return float(jnp.sqrt(sum(jnp.sum(leaf**2) for leaf in leaves))) if leaves else 0.0


@dataclasses.dataclass
class _CoreProblem:
    """An `EnergyTransformer` from `x0 [B, N, D]`; loss `0.5 mean((g(T) - target)^2)`."""

    x0: jax.Array
    args: object
    target: jax.Array
    args_batched: bool

    def core(self, model):
        return model

    def initial(self, model):
        return self.x0, self.args

    def loss(self, model, x_final):
        return 0.5 * jnp.mean((jax.vmap(model.norm)(x_final) - self.target) ** 2)


@dataclasses.dataclass
class _ImageProblem:
    """A `MaskedImageET` on normalised patches; loss: its masked-patch MSE."""

    patches: jax.Array
    masking: object
    args_batched: bool = True

    def core(self, model):
        return model.core

    def initial(self, model):
        x0, conditions, _, _ = model.encode_batch(self.patches, self.masking)
        return x0, conditions

    def loss(self, model, x_final):
        _, _, mean, std = model.encode_batch(self.patches, self.masking)
        prediction = model.decode_batch(x_final, mean, std)
        return masked_mse(prediction, self.patches, self.masking.occluded)


def _problem(model, x0, args, images, masking, loss_seed):
    if hasattr(model, "core") and hasattr(model, "encode"):
        if images is None or masking is None:
            raise ValueError("a MaskedImageET needs images (normalised units) and masking.")
        patches = jax.vmap(model.patches)(jnp.asarray(images))
        return _ImageProblem(patches, masking)
    if x0 is None:
        raise ValueError("an EnergyTransformer needs x0 ([N, D] or [B, N, D]).")
    xb, _ = as_batch(x0)
    target = model.norm(jax.random.normal(jax.random.key(loss_seed), xb.shape, xb.dtype))
    return _CoreProblem(xb, args, target, False)


@dataclasses.dataclass
class _StartAt:
    """`problem` started from a given state (the adjoint state at a split time)."""

    problem: object
    x: jax.Array
    args: object

    def core(self, model):
        return self.problem.core(model)

    def initial(self, model):
        return self.x, self.args

    def loss(self, model, x_final):
        return self.problem.loss(model, x_final)

    @property
    def args_batched(self):
        return self.problem.args_batched


def _gradients(problem, model, options):
    """Loss, gradient with respect to every parameter, with respect to the initial state
    (`dL/dx0`, the encoder's output for an image model), and `(t_final, residual_rms,
    x_final)`. The same compiled solve serves every horizon and start time."""

    def loss(inputs):
        m, dx = inputs
        x0, args = problem.initial(m)
        sol = solvers.solve(
            problem.core(m), x0 + dx, args=args, args_batched=problem.args_batched, **options
        )
        return problem.loss(m, sol.x_final), (sol.t_final, sol.stats["residual_rms"], sol.x_final)

    x0, _ = problem.initial(model)
    (value, aux), (g_model, g_x) = eqx.filter_value_and_grad(loss, has_aux=True)(
        (model, jnp.zeros_like(x0))
    )
    return float(value), g_model, g_x, aux


def gradient_depth(
    model: solvers.EnergySystem | MaskedImageET,
    x0: Float[ArrayLike, "*batch N D"] | None = None,
    args: Any = None,
    *,
    images: Float[ArrayLike, "B H W C"] | None = None,
    masking: Masking | None = None,
    horizons: Sequence[float] | Real[ArrayLike, " horizons"] = (1.2, 2.4, 4.8, 9.6),
    adjoints: Sequence[Adjoint] = ADJOINTS,
    options: solvers.SolveOptions = GRADIENT_DEPTH_OPTIONS,
    settings: GradientDepthSettings = GradientDepthSettings(),
) -> GradientDepth:
    """Gradient norms against horizon for each adjoint, and the adjoint state along the
    longest trajectory.

    **Arguments:**

    - `model`: an `et_ode.EnergyTransformer` (with `x0`, `args`; loss
      `0.5 mean((g(T) - target)^2)`, `target = LayerNorm(noise)` seeded by
      `settings.loss_seed`) or an `et_ode.MaskedImageET` (with `images [B, H, W, C]` in
      normalised units and `masking`; loss: its masked-patch MSE; every parameter,
      encoder included).
    - `horizons`: the horizons `T` (tau units). With constant steps (`dt0`, no `rtol`)
      the step counts are `T / dt0`.
    - `adjoints`: of `"checkpoint"`, `"backsolve"`, `"implicit"`.
    - `options`: how every solve to a horizon runs, a `solvers.SolveOptions` (default
      `GRADIENT_DEPTH_OPTIONS`: Euler steps of 0.1 on the native flow, at most 20,000
      steps); its `max_steps` must reach the longest horizon.
    - `settings`: the split times of the adjoint state, the implicit adjoint's solve,
      the vanishing threshold and the loss's seed (`GradientDepthSettings`).

    **Returns:** a `GradientDepth` (its fields, and those of its `AdjointGradients`,
    `ImplicitGradient` and `AdjointState`, say what each holds): with `"implicit"`
    among the adjoints, its `implicit` too.

    **Protocol:** an image model needs `core` and `encode`; any other model the
    `solvers.EnergySystem` methods and the ET's LayerNorm `norm` (the loss is measured
    in its coordinates); refused up front, before any solve, without them.
    """
    if not isinstance(options, solvers.SolveOptions):
        raise TypeError(f"options must be a solvers.SolveOptions (got {type(options).__name__}).")
    if not isinstance(settings, GradientDepthSettings):
        raise TypeError(
            f"settings must be a GradientDepthSettings (got {type(settings).__name__})."
        )
    if not (hasattr(model, "core") and hasattr(model, "encode")):
        require(model, "gradient_depth")
    problem = _problem(model, x0, args, images, masking, settings.loss_seed)
    core = problem.core(model)
    dtype = model_dtype(core)
    horizons = np.asarray(horizons, float)
    constant = not options.adaptive
    dt0, flow = options.dt0, options.flow
    base = dict(options=options, throw=False)
    out: dict[str, Any] = dict(
        horizons=horizons,
        steps=np.round(horizons / dt0).astype(int) if constant and dt0 else None,
        adjoints={},
    )
    tau = float(getattr(core, "tau", 1.0))
    for adjoint in [a for a in adjoints if a != "implicit"]:
        rec: dict[str, Any] = dict(grad_norm=[], x0_grad_norm=[], loss=[], skipped=[])
        last = None
        for horizon in horizons:
            reason = None
            if adjoint == "backsolve" and horizon / tau > solvers.BACKSOLVE_STABLE_HORIZON[flow]:
                reason = (
                    f"beyond the measured stable backsolve horizon "
                    f"({solvers.BACKSOLVE_STABLE_HORIZON[flow]:g} tau on the {flow} flow)"
                )
            if reason is None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    value, g_model, g_x, _ = _gradients(
                        problem, model, dict(base, t1=float(horizon), adjoint=adjoint)
                    )
                rec["grad_norm"].append(_norm(g_model))
                last = _flat(g_model)
                rec["x0_grad_norm"].append(_norm(g_x))
                rec["loss"].append(value)
            else:
                for key in ("grad_norm", "x0_grad_norm", "loss"):
                    rec[key].append(float("nan"))
            rec["skipped"].append(reason)
        rec = {k: (np.asarray(v) if k != "skipped" else v) for k, v in rec.items()}
        done = np.flatnonzero(np.isfinite(rec["grad_norm"]))
        ratio = (
            rec["grad_norm"][done[-1]] / rec["grad_norm"][done[0]]
            if done.size >= 2
            else float("nan")
        )
        rec["ratio"] = float(ratio)
        rec["x0_ratio"] = (
            float(rec["x0_grad_norm"][done[-1]] / rec["x0_grad_norm"][done[0]])
            if done.size >= 2
            else float("nan")
        )
        rec["vanishes"] = bool(ratio < settings.vanish_threshold) if math.isfinite(ratio) else None
        rec["last_grad"] = last  # flat gradient at the longest horizon computed
        out["adjoints"][adjoint] = rec

    if "implicit" in adjoints:
        implicit, recorded = _implicit_solve(settings, options, dtype == np.float64)
        value, g_model, g_x, (t_final, residual, _) = _gradients(
            problem, model, dict(implicit, adjoint="implicit")
        )
        imp_flat = _flat(g_model)
        extra: dict[str, Any] = {}
        ref = out["adjoints"].get("checkpoint", {}).get("last_grad")
        if ref is not None:
            extra["relative_difference_to_checkpoint"] = float(
                np.linalg.norm(imp_flat - ref) / max(float(np.linalg.norm(ref)), 1e-300)
            )
        if settings.check_implicit:
            # Checkpoint (exact discrete) gradients through the same solve run to twice
            # the stop time without the stop.
            t_check = 2.0 * float(np.max(np.asarray(t_final)))
            _, g_check, _, _ = _gradients(
                problem, model, dict(implicit, stop=None, t1=t_check, adjoint="checkpoint")
            )
            ref = _flat(g_check)
            extra.update(
                checkpoint_grad_norm=_norm(g_check),
                checkpoint_t1=t_check,
                relative_difference=float(
                    np.linalg.norm(imp_flat - ref) / max(float(np.linalg.norm(ref)), 1e-300)
                ),
            )
        out["implicit"] = dict(
            grad_norm=_norm(g_model),
            x0_grad_norm=_norm(g_x),
            loss=value,
            t_final=np.asarray(t_final),
            residual_rms=np.asarray(residual),
            options=recorded,
            **extra,
        )

    out["adjoint_state"] = _adjoint_state(
        problem,
        model,
        base,
        float(horizons.max()),
        settings.split_times,
        settings.n_splits,
        dt0 if constant else None,
    )
    out["avoids_vanishing"] = [
        name for name, rec in out["adjoints"].items() if rec["vanishes"] is False
    ]
    summary = []
    verdict = {True: "vanishes", False: "does not vanish", None: "not measured"}
    for name, rec in out["adjoints"].items():
        summary.append(
            f"{name}: parameter gradient norm x{rec['ratio']:.3g} and dL/dx0 x"
            f"{rec['x0_ratio']:.3g} from T = {horizons[0]:g} to the longest horizon "
            f"computed ({verdict[rec['vanishes']]} at threshold "
            f"{settings.vanish_threshold:g})"
        )
    if "implicit" in out:
        imp = out["implicit"]
        line = (
            f"implicit: parameter gradient norm {imp['grad_norm']:.3g} at the fixed point "
            f"(no depth), dL/dx0 {imp['x0_grad_norm']:.3g}"
        )
        if "relative_difference_to_checkpoint" in imp:
            line += (
                f"; checkpoint at T = {horizons.max():g} differs by "
                f"{imp['relative_difference_to_checkpoint']:.2g} (relative)"
            )
        summary.append(line)
    state = out["adjoint_state"]
    summary.append(
        f"adjoint state |dL/dx(s)|: {state['grad_norm'][0]:.3g} at s = 0, "
        f"{state['grad_norm'][-1]:.3g} at s = {state['times'][-1]:g}; scaled by "
        f"s_A / gamma: {state['scaled_grad_norm'][0]:.3g} and "
        f"{state['scaled_grad_norm'][-1]:.3g}"
    )
    out["summary"] = summary
    out["metadata"] = metadata(
        study="gradient_depth",
        dtype=dtype,
        seeds=dict(loss_target=settings.loss_seed),
        solver=options.solver,
        dt0=dt0,
        rtol=options.rtol,
        atol=options.atol,
        flow=flow,
        max_steps=options.max_steps,
        adjoints=list(adjoints),
        vanish_threshold=settings.vanish_threshold,
        model=type(model).__name__,
        batch=int((problem.x0 if isinstance(problem, _CoreProblem) else problem.patches).shape[0]),
        norms="L2 over every parameter array; dL/dx over every entry of the batch",
    )
    return gradient_depth_record(out)


def _implicit_solve(settings, options, tight) -> tuple[dict, dict]:
    """The keywords of the `"implicit"` adjoint's solve to the fixed point (the projected
    flow, to `settings.implicit_t1` with a fixed-point stop), and what the result records
    of them (the keys it always had; `dt0` too when the options are given)."""
    stop = solvers.FixedPointStop(atol=settings.fixed_point_atol or (1e-9 if tight else 1e-4))
    given = settings.implicit_options
    if given is None:
        solve = solvers.SolveOptions(
            solver="tsit5",
            rtol=1e-10 if tight else 1e-6,
            atol=1e-12 if tight else 1e-8,
            max_steps=max(int(options.max_steps or 0), 20000),
            flow="projected",
        )
        first = dict(solver=solve.solver, rtol=solve.rtol, atol=solve.atol)
    else:
        solve = given.replace(flow="projected")
        first = dict(solver=solve.solver, dt0=solve.dt0, rtol=solve.rtol, atol=solve.atol)
    run = dict(t1=float(settings.implicit_t1), stop=stop)
    recorded = dict(
        first,
        t1=run["t1"],
        stop=dataclasses.asdict(stop),
        max_steps=solve.max_steps,
        flow=solve.flow,
        throw=False,
    )
    for name in ("stepsize_controller", "dtmin"):
        if getattr(solve, name) is not None:
            recorded[name] = getattr(solve, name)
    return dict(run, options=solve, throw=False), recorded


def _adjoint_state(problem, model, base, horizon, split_times, n_splits, dt0):
    """`|dL/dx(s)|` at split times `s` of the checkpoint solve to `horizon`: `x(s)` from
    the solve `0 -> s`, then the gradient of the loss after `s -> horizon` with respect
    to its start (both by the compiled checkpoint gradient of `gradient_depth`)."""
    if split_times is None:
        split_times = np.linspace(0.0, horizon, n_splits)
        if dt0:
            split_times = np.unique(np.round(split_times / dt0) * dt0)
    split_times = np.asarray([s for s in split_times if s < horizon], float)
    x0, args = problem.initial(model)
    core = problem.core(model)
    options = dict(base, adjoint="checkpoint")
    norms, scaled = [], []
    for s in split_times:
        x_s = x0
        if s > 0:
            x_s = _gradients(problem, model, dict(options, t1=float(s)))[3][2]
        split = _StartAt(problem, jax.lax.stop_gradient(x_s), args)
        g_x = _gradients(split, model, dict(options, t0=float(s), t1=horizon))[2]
        norms.append(float(jnp.linalg.norm(g_x)))
        # dL/dx_A scales like gamma / s_A: on the native flow x grows, so the raw norm
        # falls for that reason alone; (s_A / gamma) dL/dx_A removes it.
        clock = core.norm.gamma / jax.vmap(core.norm.scale)(x_s)  # [B, N]
        scaled.append(float(jnp.linalg.norm(g_x / clock[..., None])))
    return dict(
        times=split_times,
        grad_norm=np.asarray(norms),
        scaled_grad_norm=np.asarray(scaled),
        horizon=horizon,
    )
