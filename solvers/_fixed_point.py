"""Direct fixed-point finders on the manifold, without integrating a flow.

- Newton's method on the residual: a reference for the integrating fixed-point stop, and
  a way to reach saddles that a descending flow avoids. It solves, over unconstrained `y`
  with `v(y) = to_manifold(from_manifold(y, x_ref))`, the square system
  `R(y) = F(v(y)) + y - v(y)`: `R = 0` forces `y = v(y)` (on the manifold) and
  `F = G = 0` (a critical point of `E`).
- Anderson acceleration of the flow's Euler map (`._anderson`): one evaluation of G per
  iteration, no energy and no Jacobian; the fastest way to a fixed point of a large
  piecewise-smooth energy (the authors' shapes), after a few plain Euler steps.
- L-BFGS (optimistix) on `f(y) = E(from_manifold(to_manifold(y), x_ref))`: the energy on
  the manifold, in coordinates that reach all of it. `f` is invariant to each token's
  scale and mean in `y`, so its critical points are exactly the manifold's, `G = 0`.
  A descent method: it finds minima (never saddles), one gradient per iteration, with
  curvature learned from the last 10 steps. Like the flow it descends E from `x_init`,
  but along other paths, so in a landscape with several minima it may settle in a
  different one than the flow from the same start. Its line search compares energies,
  so it stalls where a step lowers E by less than E's round-off: RMS G ~ sqrt(eps |E|
  curvature) (1e-7 in float64 at |E| ~ 500; in float32, 1e-3 to 4e-3 after 54-74
  gradients on the shipped core and 8e-5 to 1.3e-4 after 45-64 on a random ET of its
  size, docs: measurement notes, "Fixed points", 2026-11-22), where the flow, which never
  evaluates E, goes on.
"""

import dataclasses
import functools
import warnings
from typing import Any, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import optimistix as optx
from jaxtyping import ArrayLike, Float

from ._anderson import AndersonSettings
from ._anderson import anderson as anderson_iteration
from ._defaults import DENSE_MAX, is_traced
from ._implicit import default_implicit_tol, implicit_fixed_point
from ._protocol import EnergySystem, RealScalar, as_manifold_system
from ._stop import rms


class FixedPointResult(eqx.Module):
    """`x: [N, D]` the fixed point; `residual_rms`: RMS of G there; `energy`: E there;
    `steps`: iterations (Newton or L-BFGS), evaluations of G (Anderson: the warm
    Euler steps included); `success`: optimistix reported convergence
    (for L-BFGS and Anderson: and RMS G at most `tol`); `method`: the method that ran
    (`"auto"` resolved). A PyTree (an equinox Module, `method` static), so that
    `find_fixed_point` can run under `jax.jit` and `jax.vmap` and return it."""

    x: jax.Array
    residual_rms: jax.Array
    energy: jax.Array
    steps: jax.Array
    success: jax.Array
    method: str = eqx.field(default="newton", static=True)


@eqx.filter_jit
def _newton(model, x_init, args, tol, max_steps, linear):
    def v_of(y):
        return model.to_manifold(model.from_manifold(y, x_init, args), args)

    def root_fn(y, _):
        v = v_of(y)
        return model.residual(model.from_manifold(v, x_init, args), args) + y - v

    if linear == "dense":
        linear_solver = lx.AutoLinearSolver(well_posed=None)
    else:
        # Inexact Newton: each linear solve to a relative 1e-4 (the forcing term) keeps
        # Newton convergent at a fraction of the cost of solving to `tol` every step.
        # A long restart: GMRES(50) took 994 restart cycles per step on the shipped core
        # (4096 entries, 42 s), GMRES(200) 3 cycles (0.4 s).
        linear_solver = lx.GMRES(rtol=1e-4, atol=0.1 * tol, restart=200, stagnation_iters=200)
    solver = optx.Newton(rtol=tol, atol=tol, linear_solver=linear_solver)
    y0 = model.to_manifold(x_init, args)
    sol = optx.root_find(root_fn, solver, y0, max_steps=max_steps, throw=False)
    x = model.from_manifold(v_of(sol.value), x_init, args)
    return x, sol.stats["num_steps"], sol.result == optx.RESULTS.successful


@eqx.filter_jit
def _lbfgs(model, x_init, args, tol, max_steps):
    # optimistix's L-BFGS promotes its carry to float64 whenever x64 is enabled, so it
    # works on float64 coordinates then; the energy is still computed in the model's dtype.
    work = jnp.result_type(x_init.dtype, jnp.float64)

    def energy_fn(y, _):
        v = model.to_manifold(y.astype(x_init.dtype), args)
        return model.energy(model.from_manifold(v, x_init, args), args).astype(work)

    # optimistix stops when a step moves y by less than atol + rtol |y| (max norm); near
    # a minimum the step is ~ G / curvature, so tol / 10 leaves RMS G below tol.
    solver = optx.LBFGS(rtol=tol / 10, atol=tol / 10)
    y0 = model.to_manifold(x_init, args).astype(work)
    sol = optx.minimise(energy_fn, solver, y0, max_steps=max_steps, throw=False)
    x = model.from_manifold(model.to_manifold(sol.value.astype(x_init.dtype), args), x_init, args)
    return x, sol.stats["num_steps"], sol.result == optx.RESULTS.successful


METHODS = ("auto", "newton", "lbfgs", "anderson")
# `max_steps` when not given: Newton and L-BFGS iterations, Anderson evaluations of G.
DEFAULT_MAX_STEPS = {"newton": 100, "lbfgs": 100, "anderson": 3000}


def find_fixed_point(
    model: EnergySystem,
    x_init: Float[ArrayLike, "N D"],
    *,
    args: Any = None,
    tol: RealScalar = 1e-10,
    max_steps: int | None = None,
    linear: Literal["auto", "dense", "gmres"] = "dense",
    method: Literal["auto", "newton", "lbfgs", "anderson"] = "auto",
    anderson: AndersonSettings = AndersonSettings(),
    implicit_tol: float | None = None,
    **anderson_fields: Any,
) -> FixedPointResult:
    """A critical point of `E` on the manifold through `x_init` (`x_init: [N, D]`, one
    sample). `model` is a `solvers.ManifoldEnergySystem`, or any `solvers.EnergySystem`,
    then flat (the state itself is the manifold: its `residual` is zero exactly at fixed
    points).

    - `method="auto"` (default): `"newton"` up to `DENSE_MAX` state entries (with
      `linear` as given), `"anderson"` above, where a Newton step needs a Krylov solve:
      at the authors' shapes Newton-GMRES failed from the starts where Anderson needed
      0.17x Euler's evaluations (docs: benchmarks, "Non-smooth dynamics").
      `FixedPointResult.method` says which ran.
    - `method="newton"`: converges to the critical point nearest `x_init`, a minimum or
      a saddle. `linear`: `"dense"` (materialise the Jacobian: small problems),
      `"gmres"` (matrix-free, by JVPs) or `"auto"` (dense up to `DENSE_MAX`
      state entries).
    - `method="lbfgs"`: L-BFGS descent of E on the manifold to a minimum, one gradient
      per iteration (module docstring); `max_steps` counts iterations.
    - `method="anderson"`: `warm_steps` Euler steps of size `dt` (units of `tau`) on
      the flow `dx/dt = -G/tau`, then Anderson acceleration of that Euler map with the
      last `memory` steps (`solvers._anderson`; the three are the fields of `anderson`,
      an `AndersonSettings`), on the manifold of the point the warm
      steps reach (a plain Euler step grows each token's scale at second order, at the
      authors' shapes up to 100-fold over the warm steps: unlike Newton's and L-BFGS's,
      its `x` is not on the manifold through `x_init`, though its `g = LayerNorm(x)`
      is); `max_steps` counts evaluations of G (default 3000), warm steps included.
      For large piecewise-smooth energies, where it needs a fraction of Euler's
      evaluations (docs: benchmarks, "Non-smooth
      dynamics"). In float32 the tolerance must stay above the state's resolution
      (about 1e-6 times the field's scale).

    `max_steps` defaults to 100 for Newton and L-BFGS (iterations). A start, model or
    `args` holding NaN or inf is refused with a `ValueError` that names the array
    (where they are concrete; inside `jax.jit` they are not checked). `dt`, `memory`
    and `warm_steps` given as keywords (`anderson_fields`, the form before
    `AndersonSettings`) still work, with a `DeprecationWarning`; not beside `anderson`.

    **Gradients.** `x` (and `energy`, `residual_rms`) can be differentiated with respect
    to the model's parameters, `args` and `x_init` (through the manifold it fixes: each
    token's mean and scale for the ET), by the implicit function theorem at the fixed
    point; the search itself is never differentiated. Newton and L-BFGS: optimistix's
    implicit adjoint (forward and reverse mode). Anderson: reverse mode only, as
    `solve(..., adjoint="implicit")` after integrating (`solvers._implicit`), on the
    manifold of the warm point, differentiated through the warm steps; this is the
    implicit adjoint's forward solve at the authors' shapes, where integrating to the
    fixed point crawls (docs: benchmarks, "Non-smooth dynamics"). `implicit_tol`: the
    GMRES tolerance of that backward solve (default 1e-10 in float64, 1e-5 otherwise).

    **Returns:** a `FixedPointResult`.
    """
    x_init = jnp.asarray(x_init)
    if x_init.ndim != 2:
        raise ValueError(f"find_fixed_point takes one sample [N, D]; got shape {x_init.shape}.")
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)} (got {method!r}).")
    if linear not in ("auto", "dense", "gmres"):
        raise ValueError(f"linear must be 'auto', 'dense' or 'gmres' (got {linear!r}).")
    _refuse_nonfinite(x_init=x_init, args=args, model=model)
    anderson = _anderson_settings(anderson, anderson_fields)
    if method == "auto":
        method = "newton" if x_init.size <= DENSE_MAX else "anderson"
    if max_steps is None:
        max_steps = DEFAULT_MAX_STEPS[method]
    if method == "anderson":
        _check_anderson(anderson, max_steps)
    model = as_manifold_system(model)
    if linear == "auto":
        linear = "dense" if x_init.size <= DENSE_MAX else "gmres"
    tol_ = jnp.asarray(tol, x_init.dtype)
    if method != "anderson":
        # Differentiable as optimistix differentiates a root or a minimum (its implicit
        # adjoint: forward and reverse mode).
        find = _lbfgs if method == "lbfgs" else functools.partial(_newton, linear=linear)
        x, steps, ok = find(model, x_init, args, tol_, max_steps)
        residual_rms = rms(model.residual(x, args))
        if method != "newton":  # L-BFGS: optimistix's own stop is on the step, not on G
            ok = ok & (residual_rms <= tol_)
    else:
        options = (
            int(max_steps),
            float(anderson.dt),
            int(anderson.memory),
            int(anderson.warm_steps),
        )
        x_star, steps, best_rms, _, x_warm = anderson_iteration(model, x_init, args, tol_, *options)
        ok = best_rms <= tol_
        # The same point, with the implicit function theorem's derivatives on the manifold
        # of the warm point (`solvers._implicit`, reverse mode): the iteration itself is
        # not differentiated.
        x = implicit_fixed_point(
            model,
            x_warm,
            args,
            jax.lax.stop_gradient(x_star),
            tol=default_implicit_tol(x_init.dtype) if implicit_tol is None else implicit_tol,
            batched=False,
            args_batched=False,
        )
        residual_rms = rms(model.residual(x, args))
    return FixedPointResult(
        x=x,
        residual_rms=residual_rms,
        energy=model.energy(x, args),
        steps=steps,
        success=ok,
        method=method,
    )


def _refuse_nonfinite(**trees) -> None:
    """A `ValueError` naming the first floating-point array of `trees` (where none is
    traced) that holds a NaN or an inf: the search would end with `success=False` and
    a NaN state, and no word of why."""
    for name, tree in trees.items():
        leaves = jax.tree_util.tree_flatten_with_path(eqx.filter(tree, eqx.is_inexact_array))[0]
        if is_traced([leaf for _, leaf in leaves]):
            continue
        for path, leaf in leaves:
            if not bool(jnp.all(jnp.isfinite(leaf))):
                where = name + jax.tree_util.keystr(path)
                raise ValueError(
                    f"{where} holds NaN or inf values: find_fixed_point needs a finite "
                    "start, model and args (a NaN there would end the search with "
                    "success=False and a NaN state)."
                )


def _anderson_settings(settings: AndersonSettings, fields: dict) -> AndersonSettings:
    """`settings`, or the `AndersonSettings` of the keywords `dt`, `memory`, `warm_steps`
    given the way `find_fixed_point` took them before (warned as deprecated; refused
    beside settings of one's own, and any other keyword as Python refuses one)."""
    if not fields:
        return settings
    names = [f.name for f in dataclasses.fields(AndersonSettings)]
    unknown = sorted(set(fields) - set(names))
    if unknown:
        raise TypeError(f"find_fixed_point() got an unexpected keyword argument {unknown[0]!r}")
    given = ", ".join(f"{name}=" for name in fields)
    if settings != AndersonSettings():
        raise ValueError(
            f"find_fixed_point got anderson= and {given} beside it: give each choice once, "
            f"e.g. anderson=dataclasses.replace(anderson, {next(iter(fields))}=...)."
        )
    replacement = ", ".join(f"{name}={value!r}" for name, value in fields.items())
    warnings.warn(
        f"find_fixed_point's keywords {given} are deprecated: pass "
        f"anderson=solvers.AndersonSettings({replacement}) (issue 48).",
        DeprecationWarning,
        stacklevel=3,
    )
    return AndersonSettings(**fields)


def _check_anderson(settings: AndersonSettings, max_steps) -> None:
    """Refuse a step cap that is no integer >= 1 or leaves no evaluation after the warm
    steps (the settings' own fields were checked when they were made)."""
    warm_steps = settings.warm_steps
    if isinstance(max_steps, bool) or int(max_steps) != max_steps or max_steps < 1:
        raise ValueError(f"max_steps must be an integer >= 1 (got {max_steps!r}).")
    if warm_steps >= max_steps:
        raise ValueError(
            f"warm_steps ({warm_steps}) must be below max_steps ({max_steps}): "
            "both count evaluations of G."
        )
