"""Steady states followed in a parameter: pseudo-arclength continuation, the leading
eigenvalues at every point, and the bifurcations between points located to a tolerance.

The system is any field `f(x, p, args) -> dx/dt` of a state `x` (any shape) and a scalar
parameter `p`; its steady states are the zeros of `f`. The branch is a curve
`y(s) = (x(s), p(s))` in `n + 1` unknowns, parametrised by arclength `s`, so that it can
be followed through a fold, where `p` turns back (Keller, 1977; Allgower and Georg,
*Introduction to Numerical Continuation Methods*, 1990). Each step:

1. **predict** along the unit tangent `t`: `y_pred = y + ds t` (unit in the
   arclength's metric `ds^2 = state_weight RMS(dx)^2 + dp^2`);
2. **correct** by Newton on `f(y) = 0, t . (y - y_pred) = 0` (the bordered Jacobian
   `[df/dy; t^T]`: formed up to `DENSE_MAX` unknowns, else GMRES on JVPs);
3. accept if Newton converged (RMS f at most `newton_tol`) and the new tangent turned by less
   than `max_turn` radians, or turned more but Newton moved the point by at most half
   the step (a kink of a piecewise-smooth field, where the tangent jumps, rather than a
   jump to another branch); else halve `ds` (the branch stops below `ds_min`). A
   corrector that needed few iterations lengthens the next step (up to `ds_max`).

At every accepted point the `k` eigenvalues of `df/dx` with the largest real parts are
kept (dense `eig`, or Krylov-Schur Arnoldi on JVPs, `_eigen`), or with
`spectrum="nearest_zero"` the `k` nearest zero (shift-and-invert, for stiff fields, with
a `preconditioner` of `df/dx` in every GMRES solve). The steps, caps, eigenvalues and
Newton's settings are one `ContinuationSettings`. Between two points:

- a **fold** where the tangent's `p` component changes sign (`p` turns; an eigenvalue
  passes through 0); located on that component by the Illinois false position (a
  smooth function of `s` with a simple zero there), with bisection as its safeguard;
  a branch point instead where no real eigenvalue crossed zero there, but one touched
  it (`_branch_point_at_turn`: the branch that turns meets another, as the pitchfork's
  parabola at its vertex);
- a **branch point** where a real eigenvalue passes through 0 and `p` does not turn (the
  number of eigenvalues with a positive real part changes by one); located by bisection
  on the number of real ones. Its record carries the tangent of the other branch, from
  the algebraic bifurcation equation in the null space of `df/dy`
  (`_branch_kernels.switch_tangent`): `switch_branch` follows it;
- a **Hopf point** where a complex pair crosses the imaginary axis (that number changes
  by two, the real ones' not at all); located by bisection on the number of complex ones
  (gradient flows such as the ET's have none: their Jacobians are symmetric in the right
  metric). A complex pair that splits into two real eigenvalues changes neither total
  and is not reported.

Each location runs the corrector from the earlier point with a shorter step until the
bracket in `s` is below `locate_tol` (a trial point on the singular point itself, where
there is no tangent, is moved beside it); near a fold `p` varies quadratically in `s`,
so its `p` is located far more precisely still. Where one step holds more than one
branch or Hopf point, the stretches on either side of the first one located are
searched again (`_crossings`).

The branch stops (`stop_reason`, one of `STOP_REASONS`) at its first point outside
`p_span`, after `max_points` points, where the step falls below `ds_min`, or `closed`:
back within half a step of its start and going the same way (a loop; the other side of
a fold passing near the start, going the other way, does not count).
"""

import math
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import DTypeLike
from jaxtyping import Array, ArrayLike, Real

from et_ode import solvers

from .._records import metadata
from ._branch import _Branch, _detect, _trust
from ._branch_kernels import (
    DENSE_MAX,
    FlatField,
)
from ._branch_records import Bifurcation, Branch, BranchPoint, ContinuationSettings, branch_record
from ._continuation_checks import (
    _check,
    _near_tol,
    _stall,
    _warn_if_at_rounding_floor,
    _warn_if_moved,
    _warn_if_singular_start,
    check_field_shape,
    check_linear_algebra,
    check_preconditioner,
    default_tol,
    dtype_of,
    is_dense,
    is_float,
    kept_eigenvalues,
)
from ._energy_field import state_and_residual, system_field
from ._xla_fallback import rescued_kernels

STOP_REASONS = ("p_span", "max_points", "ds_min", "closed")

# A field `f(x, p, args) -> dx/dt`: `x` a state of any shape, `p` the (traced) scalar
# parameter, `args` its conditions; returns an array of the state's shape.
Field = Callable[[Array, Array, Any], Array]
# What `p` is for an energy model: the name of one of its `lenses`, or a function
# (model, args, p) -> (model, args).
Parameter = str | Callable[..., tuple[Any, Any]]
# A preconditioner of a field's Jacobian `df/dx`: `preconditioner(v, x, p, args)`, `v` and
# `x` of the state's shape, returns an approximation of `(df/dx)^-1 v` at `(x, p)`, linear
# in `v` (a fast solve with the stiff part of `df/dx`, such as a discrete Laplacian's).
Preconditioner = Callable[[Array, Array, Array, Any], Array]


def continuation(
    system: solvers.EnergySystem | Field,
    x0: Real[ArrayLike, "..."],
    p0: float,
    *,
    p_span: tuple[float, float],
    args: Any = None,
    parameter: Parameter | None = None,
    settings: ContinuationSettings = ContinuationSettings(),
    tangent_start: Real[ArrayLike, " n_plus_1"] | None = None,
    dtype: DTypeLike | None = None,
) -> Branch:
    """Follow the branch of steady states of `system` through `(x0, p0)` in `p`, with
    the `k` leading eigenvalues at every point and the bifurcations located (module
    docstring).

    **Arguments:**

    - `system`: a field `f(x, p, args) -> dx/dt`, `x` of any shape, `p` a scalar
      (traced: one compilation serves the branch and every later call with the same
      `field`); or an energy model (`solvers.EnergySystem`: `energy`, `vector_field`,
      `residual`), whose fixed points of the projected flow are followed in its
      manifold coordinates (`analysis._system_branch`) with `parameter`.
    - `x0`: a state at or near a steady state at `p0`; it is first corrected at fixed
      `p0` (Newton), and refused, naming the residual, if that fails; a
      `RuntimeWarning` where the correction exceeds `START_MOVED` of the state's RMS
      and the first step (Newton from far may reach another steady state than meant),
      and where the corrected start has a real eigenvalue that is zero to rounding (a
      start on a bifurcation: start beside it; `_warn_if_singular_start`).
    - `p_span`: `(low, high)`: the branch stops at its first point outside.
    - `args`: the field's conditions (a pytree).
    - `parameter`: for an energy model, what `p` is: the name of one of its `lenses`
      (on the ET `"beta"`, `"memory_scale"`: the Hopfield memories scaled by `p`,
      `"field_strength"`: the external field's strength), or a function
      `(model, args, p) -> (model, args)` of the model's arrays.
    - `settings`: how the branch is followed (`ContinuationSettings`: the steps and
      `direction`, `max_points`, `max_turn`, `locate_tol`, `state_weight`, the `k`
      eigenvalues kept and which (`spectrum`), and the Newton corrector, `newton`).
      With `spectrum="nearest_zero"` (shift-and-invert: Arnoldi on `(df/dx)^-1`, each
      product a GMRES solve; dense, the `k` nearest zero of all) a stiff spectrum's
      eigenvalues that cross zero come in a few restarts, where Arnoldi finds the
      rightmost ones, clustered beside far larger ones, only after thousands of
      products. Matrix-free, `unstable` and `stable` then count the `k` kept only: an
      unstable eigenvalue farther from zero than the `k`-th nearest is not seen (nor a
      Hopf pair crossing at a frequency beyond them); where one leaves the kept ones
      along the branch a `RuntimeWarning` says so (`unstable_left_kept`). A stiff field
      (a discretised PDE: `|df/dx| ~ 4/h^2`) needs a `newton.preconditioner`
      matrix-free (`preconditioner(v, x, p, args) -> ~(df/dx)^-1 v`, linear in `v`,
      applied on the right of every GMRES solve and of the solves of
      `"nearest_zero"`): unpreconditioned, GMRES stalls there. It is for a field only
      (an energy model's manifold coordinates are internal); pass the same function on
      every call: it is part of the compiled programs' key.
    - `tangent_start`: the first tangent (`[n + 1]`: the state's entries, then `p`)
      instead of the branch's own; `switch_branch` passes the other branch's here.
    - `dtype`: the arithmetic (default: `x0`'s; float64 needs `jax_enable_x64`).

    **Returns:** a `Branch` (its fields are documented there): the points, their
    eigenvalues and stability, and the special points between them (`branch.folds`,
    `branch.branch_points`, `branch.hopf_points`, each carrying the system so that
    `switch_branch(point, ...)` and `fold_continuation(fold, q0, ...)` take it alone).
    For an energy model `x` holds its own states (`[m, N, D]`) and `y` the manifold
    coordinates that were followed; the eigenvalues are the linearised projected flow's
    on the manifold (rates in 1/time: on the ET minus the `coordinates="x"` Hessian
    eigenvalues over `tau`).
    """
    produced_by = dict(system=system, args=args, parameter=parameter)
    lo, hi = _check(system, x0, p0, p_span, settings)
    ds, ds_min, ds_max = settings.ds, settings.ds_min, settings.ds_max
    direction, max_points, max_turn = settings.direction, settings.max_points, settings.max_turn
    k, spectrum, state_weight = settings.k, settings.spectrum, settings.state_weight
    newton = settings.newton
    max_newton, matrix_free = newton.max_newton, newton.matrix_free
    preconditioner = newton.preconditioner
    check_linear_algebra(system, spectrum, preconditioner, matrix_free)
    dtype = dtype_of(x0, dtype)
    tol = default_tol(dtype) if newton.newton_tol is None else newton.newton_tol
    # the same floors as Newton's: steps resolved to a few ulps
    locate_tol = default_tol(dtype) if settings.locate_tol is None else settings.locate_tol
    x0 = jnp.asarray(x0, dtype)
    energy_model = callable(getattr(system, "vector_field", None))
    if energy_model:
        system, args = jax.tree.map(
            lambda v: jnp.asarray(v, dtype) if is_float(v) else v, (system, args)
        )
        field, y_start, args = system_field(system, x0, p0, args, parameter)
        x0 = jnp.asarray(y_start)  # the manifold coordinates that are followed
    else:
        if parameter is not None:
            raise ValueError("parameter= is for energy models; a field takes p itself.")
        field = system
    n = x0.size
    dense = is_dense(n, matrix_free, preconditioner)
    k = kept_eigenvalues(k, n, dense)
    F = FlatField(field, tuple(x0.shape), preconditioner)
    if not energy_model:
        args = jax.tree.map(lambda v: jnp.asarray(v, dtype) if is_float(v) else v, args)
        check_field_shape(field, x0, p0, args)
        check_preconditioner(preconditioner, x0, p0, args)
    weights = jnp.full(n + 1, state_weight / n, dtype).at[-1].set(1.0)
    branch = _Branch(F, args, tol, max_newton, k, dense, dtype, weights, spectrum)

    y0 = jnp.concatenate([jnp.ravel(x0), jnp.asarray([p0], dtype)])
    e_p = jnp.zeros(n + 1, dtype).at[-1].set(1.0)
    y, it, res = branch.correct(y0, e_p)
    if not res <= tol:
        raise ValueError(
            f"x0 is not near a steady state at p0 = {float(p0):g}: Newton at "
            f"fixed p ended at RMS f = {res:.3g} after {it} iterations "
            f"(newton_tol {tol:g}); start closer, e.g. from the end of a solve."
        )
    if tangent_start is None:
        t = branch.tangent(y, e_p)
        if not bool(jnp.all(jnp.isfinite(t))):
            raise ValueError(
                f"df/dx is singular at the start (p0 = {float(p0):g}): start "
                "next to the bifurcation, or pass tangent_start."
            )
    else:
        t = jnp.asarray(tangent_start, dtype).ravel()
        if t.size != n + 1 or not (
            bool(jnp.all(jnp.isfinite(t))) and float(jnp.linalg.norm(t)) > 0
        ):
            raise ValueError(
                f"tangent_start needs {n + 1} finite entries (the state's, "
                f"then p), not all zero; got {t.size} entries."
            )
        t = t / jnp.sqrt(branch.inner(t, t))
    if (direction * float(t[-1]) < 0) if tangent_start is None else direction < 0:
        t = -t
    start = dict(y=y, t=t, iterations=it, residual=res, s=0.0, displacement=0.0)
    points = [branch.finish(start)]
    if points[0] is None and tangent_start is not None:
        # switch_branch starts on its branch point, where df/dx is singular and
        # shift-and-invert cannot start: a thousandth of the first step along instead
        points = [branch.along(start, 1e-3 * ds)]
    if points[0] is None:
        raise ValueError(
            "the eigen-solver failed at the start ("
            + (branch.failure or {}).get("message", "?")
            + "); if the start is on a bifurcation (df/dx singular), start next to it, "
            "or pass tangent_start; else keep other eigenvalues (k=, spectrum=), or "
            "for a small system solve densely (matrix_free=False)."
        )
    start_correction = _warn_if_moved(jnp.ravel(x0), y, ds, state_weight)
    if tangent_start is None:  # switch_branch starts on its branch point by design
        _warn_if_singular_start(points[0])
    bifurcations, stop_reason, step = [], "max_points", float(ds)
    skip_first = tangent_start is not None  # started on a bifurcation: nothing to find
    while len(points) < max_points:
        a = points[-1]
        b = branch.along(a, step, spectrum=False)
        # A turn beyond max_turn with a large Newton correction is a jump to another
        # branch; with a small one (at most half the step) it is the branch's own kink:
        # where the field is only piecewise smooth (ReLU memories) the tangent jumps.
        turned = b is not None and branch.inner(a["t"], b["t"]) < math.cos(max_turn)
        if b is not None and (not turned or b["displacement"] <= 0.5 * step):
            b = branch.finish(b)
        elif b is not None:
            branch.refuse("turn", b["y"], b["residual"], b["iterations"], step=step)
            b = None
        if b is None:
            failure = branch.failure or {}
            cause = "newton_near_tol" if _near_tol(failure, tol) else failure.get("cause", "?")
            branch.refused[cause] += 1
            step *= 0.5
            if step < ds_min:
                stop_reason = "ds_min"
                break
            continue
        if not skip_first:
            found = _detect(branch, a, b, len(points) - 1, locate_tol)
            bifurcations += [_trust(record, locate_tol) for record in found]
            branch.check_unseen(a, b, found)
        skip_first = False
        points.append(b)
        if b["iterations"] <= 3:
            step = min(1.5 * step, ds_max)
        elif b["iterations"] >= max(6, max_newton - 2):
            step = max(0.5 * step, ds_min)
        p = float(b["y"][-1])
        if not lo <= p <= hi:
            stop_reason = "p_span"
            break
        # Closed: back at the start, going the same way (tangents in the same half-space).
        # Near in the metric alone is not enough: past a fold the other side of a
        # hairpin can pass within half a step of the start, going the other way (the
        # shipped core's beta branch does).
        back = b["y"] - points[0]["y"]
        if (
            len(points) > 3
            and math.sqrt(branch.inner(back, back)) < 0.5 * step
            and branch.inner(b["t"], points[0]["t"]) > 0
        ):
            stop_reason = "closed"
            break
    result = _result(
        points,
        bifurcations,
        stop_reason,
        _stall(branch.failure, tol) if stop_reason == "ds_min" else None,
        F,
        dense,
        dtype,
        dict(
            p_span=(lo, hi),
            ds=ds,
            ds_min=ds_min,
            ds_max=ds_max,
            k=k,
            tol=tol,
            max_newton=max_newton,
            max_turn=max_turn,
            locate_tol=locate_tol,
            state_weight=state_weight,
            spectrum=spectrum,
            preconditioner=None
            if preconditioner is None
            else getattr(preconditioner, "__name__", type(preconditioner).__name__),
            parameter=None
            if not energy_model
            else (
                parameter
                if isinstance(parameter, str)
                else getattr(parameter, "__name__", "function")
            ),
        ),
    )
    result["start_correction_rms"] = start_correction
    result["spectrum"] = spectrum
    result["refused_steps"] = dict(branch.refused)
    _warn_if_at_rounding_floor(branch.refused, len(points), tol)
    result["unstable_left_kept"] = branch.unseen
    if branch.unseen:
        warnings.warn(
            f"continuation: an unstable eigenvalue left the k = {k} eigenvalues nearest "
            f"zero that each point keeps, at p = {', '.join(f'{q:.6g}' for q in branch.unseen)}"
            " (without crossing zero): after it, 'unstable' and 'stable' do not count it. "
            "Raise k, or check stability with spectrum='rightmost'.",
            RuntimeWarning,
            stacklevel=2,
        )
    if energy_model:
        _to_model_coordinates(result, args)
    return branch_record(result, **produced_by)


def _to_model_coordinates(result, packed):
    """An energy model's branch in its own coordinates: `x` (and each bifurcation's)
    from the manifold coordinates, which move to `y`; `fixed_point_residual_rms [m]`,
    the model's RMS residual at each point."""
    dtype = np.asarray(result["x"]).dtype
    pairs = [
        state_and_residual(jnp.asarray(y), jnp.asarray(p, dtype), packed)
        for y, p in zip(result["x"], result["p"])
    ]
    result["y"], result["x"] = result["x"], np.stack([np.asarray(x) for x, _ in pairs])
    result["fixed_point_residual_rms"] = np.array([float(r) for _, r in pairs])
    for b in result["bifurcations"]:
        x, res = state_and_residual(jnp.asarray(b["x"]), jnp.asarray(b["p"], dtype), packed)
        b["y"], b["x"], b["fixed_point_residual_rms"] = b["x"], np.asarray(x), float(res)


def _result(points, bifurcations, stop_reason, stall, F, dense, dtype, settings):
    ys = np.stack([np.asarray(q["y"]) for q in points])
    values = np.stack([np.asarray(q["eigenvalues"]) for q in points])
    unstable = np.array([sum(q["unstable"]) for q in points])
    return dict(
        p=ys[:, -1],
        x=ys[:, :-1].reshape((len(points),) + F.shape),
        s=np.array([q["s"] for q in points]),
        eigenvalues=values,
        unstable=unstable,
        stable=np.max(values.real, axis=1) < 0,
        tangent_p=np.array([float(q["t"][-1]) for q in points]),
        newton_iterations=np.array([q["iterations"] for q in points]),
        residual_rms=np.array([q["residual"] for q in points]),
        bifurcations=bifurcations,
        stop_reason=stop_reason,
        stall=stall,
        dense=dense,
        metadata=metadata(
            study="continuation",
            dtype=dtype,
            dense_max=DENSE_MAX,
            xla_passes_off=rescued_kernels(),
            **settings,
        ),
    )


def switch_branch(
    point: BranchPoint | dict | solvers.EnergySystem | Field,
    bifurcation: BranchPoint | dict | None = None,
    *,
    p_span: tuple[float, float],
    args: Any = None,
    parameter: Parameter | None = None,
    settings: ContinuationSettings = ContinuationSettings(),
    dtype: DTypeLike | None = None,
) -> Branch:
    """Follow the other branch through a branch point found by `continuation`:
    `continuation` from that point along its `switch_tangent`, towards
    `settings.direction` (`+1` or `-1`) along it.

    **Arguments:**

    - `point`: a `BranchPoint` of `continuation`'s branch (`branch.branch_points[0]`),
      which carries its system, conditions and parameter; or, for a record read back from
      JSON (`BranchPoint.from_json`, or its dict), the system, with the record as
      `bifurcation` (`switch_branch(field, record, ...)`, as before).
    - `p_span`, `settings`, `dtype`: as for `continuation` (`settings.direction`: along
      the switch tangent, `+1`, or against it); `args`, `parameter` (an energy model's):
      default the point's own.

    **Returns:** the other `Branch`.
    """
    if bifurcation is None:
        if not isinstance(point, Bifurcation) or point.system is None:
            raise ValueError(
                "switch_branch(point) takes a branch point that carries its system (one "
                "of continuation's branch.branch_points); a record read back from JSON "
                "has none: switch_branch(system, record, p_span=...)."
            )
        system, bifurcation = point.system, point
        args = point.args if args is None else args
        parameter = point.parameter if parameter is None else parameter
    else:
        system = point
    if "switch_error" in bifurcation:
        raise ValueError(
            "this branch point has no switch tangent: its left null vector was not "
            f"found ({bifurcation['switch_error']})."
        )
    if bifurcation.get("kind") != "branch_point" or "switch_tangent" not in bifurcation:
        raise ValueError(
            "switch_branch needs a branch point of continuation's "
            "bifurcations (kind 'branch_point'); got kind "
            f"{bifurcation.get('kind')!r}."
        )
    if not bifurcation.get("located", True):
        warnings.warn(
            f"switch_branch: this branch point (p = {bifurcation['p']:g}) was not located "
            f"(its bracket in s is {bifurcation.get('s_bracket', float('nan')):.3g}): the "
            "switch starts away from it and may follow the same branch again; continue "
            "with a smaller ds or locate_tol to locate it first.",
            RuntimeWarning,
            stacklevel=2,
        )
    return continuation(
        system,
        bifurcation["x"],
        bifurcation["p"],
        p_span=p_span,
        args=args,
        parameter=parameter,
        settings=settings,
        tangent_start=bifurcation["switch_tangent"],
        dtype=dtype,
    )
