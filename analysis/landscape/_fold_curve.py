"""Folds followed in two parameters: the curve in `(p, q)` along which a steady state of
`f(x, p, args)` is a fold, with its cusps located and their normal form.

The fold curve is the branch of zeros of the minimally augmented system (Govaerts,
*Numerical Methods for Bifurcations of Dynamical Equilibria*, SIAM 2000, ch. 4)

    G(x, p; q) = (f(x, p, args(q)), g(x, p, q)),

in the `n + 1` unknowns `(x, p)`, where `args(q) = second(args, q)` sets the second
parameter and `g` is the last entry of the solution of the bordered system

    [ J    b ] [v]   [0]
    [ c^T  0 ] [g] = [1],        J = df/dx at (x, p, q),

with `b` and `c` fixed vectors, the unit left and right null vectors of `J` at the start.
The bordered matrix stays regular while `c . v` and `b . w` stay away from zero (`v`, `w`
the right and left null vectors along the curve), and `g = 0` exactly where `J` is
singular. Where either cosine falls below `RESEED_COSINE` (the null vectors have turned
far from the borders: on a gradient field, where `w = v`, the bordered matrix would turn
singular at a right angle) the curve is followed on from that point with its own null
vectors as the borders. `continuation` follows `G`'s zeros in `q` as it follows any
field's, so the curve is traced by pseudo-arclength through its turns in `p` or in `q`.
Along it one test function, smooth where the bordered matrix is regular:
`cusp = w . d^2f[v, v] / (|w| |v|^2)`, the fold's quadratic coefficient: where it
passes through zero two folds of the one-parameter branches meet and vanish (a
**cusp**, normal form `y' = b1 + b2 y + c y^3`). The codimension-two points that need a
Jordan block or a complex pair (Bogdanov-Takens, zero-Hopf) are not looked for: no
energy system has them (the landscape page says where to go for them).

Here `v` solves the bordered system above and `w` its transpose (`[J^T c; b^T 0] [w; h]
= [0; 1]`); normalised, they are `J`'s own null vectors up to a sign that the borders
set, which flips where the bordered solution passes through infinity or the borders are
re-seeded. The signs are aligned from point to point (`_aligned_tests`), so that the
test function changes sign only at its zero. Each crossing is located by Newton on
`(f, g, cusp) = 0` in the `n + 2` unknowns `(x, p, q)` (dense Jacobians), started where
the test function interpolates to zero, and the normal-form coefficient computed there
(Kuznetsov, *Elements of Applied Bifurcation Theory*, 3rd ed., 2004, section 8.2; the
vectors normalised as in Kuznetsov, SIAM J. Numer. Anal. 36, 1999): the cusp's
`c = <p0, C(q0, q0, q0) + 3 B(q0, h2)> / 6` (`|q0| = 1`, `<p0, q0> = 1`,
`J h2 = -B(q0, q0)` with `<p0, h2> = 0`; `c < 0`: the three steady states on the
bistable side are stable, unstable, stable). Dense only: `J` is formed in every
evaluation of `G` and differentiated again by the corrector, so the cost grows as `n^2`
field evaluations per Newton step; states of more than `FOLD_DENSE_MAX` entries are
refused.
"""

import warnings
from collections.abc import Callable, Mapping
from typing import Any, cast

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import DTypeLike

from et_ode import solvers

from .._records import metadata
from . import _eigen as eigen
from ._branch_records import (
    Bifurcation,
    ContinuationSettings,
    Cusp,
    Fold,
    FoldCurve,
    fold_curve_record,
)
from ._continuation import Field, Parameter, continuation
from ._continuation_checks import check_field_shape, default_tol, dtype_of, is_float
from ._energy_field import parameter_function, state_and_residual, system_field
from ._fold_system import _At, _augmented, _locate, _null, _point_data, _Problem, cusp_coefficient

# The largest state (entries) whose fold curve is followed: every evaluation of the
# augmented system forms the n x n Jacobian, and the corrector differentiates it again.
FOLD_DENSE_MAX = 400
# At a fold the smallest singular value of df/dx is this far below the next one at most:
# else the record is not a (simple) fold of this field at q0.
FOLD_GAP = 1e-3
# A start whose field residual exceeds this multiple of tol is not a steady state of the
# field at q0 (another field, other args, another q0).
RECORD_RESIDUAL = 1e3
# Where a cosine between the null vectors and the borders falls below this, the bordered
# matrix is on its way to singular: the curve is followed on from there with new borders.
RESEED_COSINE = 0.3
# The curve is followed in stretches of at most this many points (each a `continuation`
# call that goes on from the last point of the one before): the borders are checked at
# the end of each, so that a stretch past where they should have been re-seeded is short.
SEGMENT_POINTS = 40
# A codimension-two point found within this fraction of the first step from the start
# (or the square root of the dtype's epsilon, if larger) is the start itself (the record
# the curve started from), and is not reported.
START_FRACTION = 1e-6
# The records a fold curve starts from: continuation's folds, and a fold curve's cusps.
FOLD_START_KINDS = ("fold", "cusp")
# The test functions' order in `tests`, and the kind of the point where each is zero.
TEST_FUNCTIONS = ("cusp",)


def _closing_index(points: list[dict], new: list[dict]) -> tuple[int, float] | None:
    """`(index, fraction)`: the index in `new` (the points that follow `points` on the
    curve) of the first point whose step from the one before passes the curve's first
    point, going its way (the curve is closed, and has been followed once round), and
    where along that step the start lies. A step passes the start where the start
    projects inside it and lies within a quarter of its length from it."""
    whole = points + new
    if len(whole) < 2:
        return None
    start = whole[0]["u"]
    heading = whole[1]["u"] - start
    for j in range(max(len(points), 4), len(whole)):
        before = whole[j - 1]["u"]
        step = whole[j]["u"] - before
        length2 = float(step @ step)
        if length2 == 0 or step @ heading <= 0:
            continue
        along = float((start - before) @ step) / length2
        if 0 < along <= 1 and np.linalg.norm(before + along * step - start) < 0.25 * np.sqrt(
            length2
        ):
            return j - len(points), along
    return None


def _check_fold(fold, field, second, parameter) -> None:
    energy_model = callable(getattr(field, "vector_field", None))
    if not (callable(field) or energy_model):
        raise TypeError(
            "fold_continuation takes a field f(x, p, args) -> dx/dt or an energy model "
            f"(got {type(field).__name__})."
        )
    if energy_model and parameter is None:
        raise ValueError(
            "fold_continuation of an energy model needs parameter= (what p is, as for "
            "continuation; second= says what q is): each one of beta, memory_scale, "
            "field_strength or a function (model, args, value) -> (model, args)."
        )
    if not energy_model and parameter is not None:
        raise ValueError("parameter= is for energy models; a field takes p itself.")
    if not (callable(second) or (energy_model and isinstance(second, str))):
        raise TypeError(
            "second must be a function (args, q) -> args that sets the second parameter "
            f"(got {type(second).__name__})."
        )
    if not isinstance(fold, Mapping) or fold.get("kind") not in FOLD_START_KINDS:
        kind = fold.get("kind") if isinstance(fold, Mapping) else type(fold).__name__
        raise ValueError(
            "fold_continuation starts from a 'fold' record of continuation's bifurcations "
            f"or a fold curve's 'cusp' (got {kind!r})."
        )
    for key in ("x", "p"):
        if key not in fold:
            raise ValueError(f"the fold record has no {key!r}: pass continuation's record.")
    if not np.all(np.isfinite(np.asarray(fold["x"], float))) or not np.isfinite(float(fold["p"])):
        raise ValueError("the fold record holds NaN or inf: pass continuation's record.")


def check_settings(q0, q_span, settings) -> None:
    """A curve's `q_span` holds `q0`; `settings` is a `ContinuationSettings` without the
    matrix-free linear algebra that a fold curve cannot use (it is dense only)."""
    if np.shape(q_span) != (2,) or not float(q_span[0]) <= float(q0) <= float(q_span[1]):
        raise ValueError(
            f"q_span must be a pair (low, high) that holds q0 = {float(q0):g} (got {q_span!r})."
        )
    if not isinstance(settings, ContinuationSettings):
        raise TypeError(
            "settings must be an analysis.ContinuationSettings (got "
            f"{type(settings).__name__}): ContinuationSettings(ds=..., ...)."
        )
    if settings.newton.matrix_free or settings.newton.preconditioner is not None:
        raise ValueError(
            "fold_continuation forms df/dx densely (at most FOLD_DENSE_MAX entries): "
            "drop settings.newton.matrix_free=True and its preconditioner."
        )


def curve_settings(settings: ContinuationSettings, tol: float) -> ContinuationSettings:
    """`continuation`'s settings for a curve of codimension-one points: the user's steps,
    caps and Newton tolerance, one eigenvalue kept (each point's are computed densely),
    dense Newton, the default location bracket."""
    newton = settings.newton.replace(newton_tol=tol, matrix_free=False)
    return settings.replace(k=1, spectrum="rightmost", locate_tol=None, newton=newton)


class _OnModel(eqx.Module):
    """`second` for an energy model: the packed conditions of `manifold_field` with the
    model and its conditions set to `q` by `function(model, args, q)`."""

    function: Callable = eqx.field(static=True)

    def __call__(self, packed, q):
        model, x_ref, args, y_ref, pinned, parameter = packed
        model, args = self.function(model, args, q)
        return (model, x_ref, args, y_ref, pinned, parameter)


def fold_continuation(
    system: solvers.EnergySystem | Field | Fold | Cusp,
    fold: Fold | Cusp | Mapping | float,
    q0: float | None = None,
    *,
    second: Callable[..., Any] | str,
    q_span: tuple[float, float],
    args: Any = None,
    parameter: Parameter | None = None,
    settings: ContinuationSettings = ContinuationSettings(),
    dtype: DTypeLike | None = None,
) -> FoldCurve:
    """Follow the fold `fold` of `system`'s steady states in a second parameter `q`: the
    curve in `(p, q)` where the steady state is a fold, with its cusps located and their
    normal form (module docstring).

    **Arguments:**

    - `system`: a `Fold` of `continuation`'s branch (`branch.folds[0]`), which carries
      its system, conditions and parameter: then `fold_continuation(fold, q0, second=...,
      q_span=...)`. Or `f(x, p, args) -> dx/dt`, the field `continuation` found the fold
      on (`x` of any shape, at most `FOLD_DENSE_MAX` entries); or an energy model
      (`solvers.EnergySystem`) with `parameter` naming `p` as for `continuation`: its
      fold curve is followed in the model's manifold coordinates (at most
      `FOLD_DENSE_MAX` of them).
    - `fold`: a `"fold"` record of `continuation(system, ...)["bifurcations"]` (also read
      back from JSON): its `x` and `p` start the curve. Or a fold curve's `"cusp"`
      (with its `q` as `q0`).
    - `q0`: the second parameter's value on that branch; `second(args, q) -> args` sets it
      in the field's conditions (for example `lambda a, q: {**a, "h": q}`). For an
      energy model `second` is a parameter as `parameter` is (`"beta"`,
      `"memory_scale"`, `"field_strength"`, or a function `(model, args, q) -> (model,
      args)`), and `q0` the model's own value of it (1 for `"memory_scale"`). `q` is
      traced: one compilation serves the curve.
    - `q_span`: `(low, high)`; the curve stops at its first point outside.
    - `args`: the field's conditions as `continuation` had them (at `q0`).
    - `settings`: a `ContinuationSettings`, as for `continuation` in the unknowns
      `(x, p)` with `q` the parameter: its `ds`, `ds_min`, `ds_max`, `direction` (`+1`:
      towards larger `q`), `max_points`, `max_turn`, `state_weight` (the arclength is
      `ds^2 = state_weight RMS(dx)^2 + dp^2 + dq^2` with `dp` counted as a state entry)
      and `newton`'s `newton_tol` and `max_newton` (the corrector's, and the cusps'
      Newton on the extended system's). `k`, `spectrum` and `locate_tol` are not used
      (every point's eigenvalues are computed densely, and a cusp is located by Newton);
      `newton.matrix_free=True` and a `preconditioner` are refused (dense only).
    - `dtype`: as for `continuation`.

    **Returns:** a `FoldCurve` (its fields are documented there; `curve.cusps` the
    cusps, each carrying the system so that `fold_continuation(cusp, cusp.q, ...)`
    starts from it). For an energy model `x` holds its own states and `y` the manifold
    coordinates followed; the eigenvalues are the linearised projected flow's on the
    manifold (as `continuation`'s, with the directions off it at `-NORMAL_RATE`).
    """
    field = system
    if isinstance(field, (Bifurcation, Cusp)):  # fold_continuation(branch.folds[0], q0, ...)
        if field.system is None:
            raise ValueError(
                "fold_continuation(fold, q0, ...) takes a fold that carries its system (one "
                "of continuation's branch.folds); a record read back from JSON has none: "
                "fold_continuation(system, record, q0, ...)."
            )
        start: Mapping[str, Any] = field
        q0 = cast(float, fold)
        args = field.args if args is None else args
        parameter = field.parameter if parameter is None else parameter
        field, fold = field.system, start
    if q0 is None:
        raise TypeError("fold_continuation needs q0, the second parameter's value at the fold.")
    _check_fold(fold, field, second, parameter)
    produced_by = dict(system=field, args=args, parameter=parameter)
    fold = cast(Mapping[str, Any], fold)  # _check_fold: a record of a fold
    check_settings(q0, q_span, settings)
    x_fold = np.asarray(fold["x"])
    dtype = dtype_of(x_fold, dtype)
    args = jax.tree.map(lambda v: jnp.asarray(v, dtype) if is_float(v) else v, args)
    energy_model = callable(getattr(field, "vector_field", None))
    function: Callable[..., Any] = cast(Callable[..., Any], field)
    set_q: Callable[..., Any] = cast(Callable[..., Any], second)
    if energy_model:  # followed in the model's manifold coordinates, as by continuation
        model = jax.tree.map(lambda v: jnp.asarray(v, dtype) if is_float(v) else v, field)
        function, y_ref, args = system_field(
            model, jnp.asarray(x_fold, dtype), float(fold["p"]), args, parameter
        )
        x_fold, set_q = np.asarray(y_ref), _OnModel(parameter_function(model, second))
    shape, n = x_fold.shape, x_fold.size
    if n > FOLD_DENSE_MAX:
        raise ValueError(
            f"fold_continuation forms df/dx densely: the state has {n} entries, above "
            f"FOLD_DENSE_MAX = {FOLD_DENSE_MAX}; matrix-free fold curves are not built."
        )
    newton_tol = settings.newton.newton_tol
    tol = default_tol(dtype) if newton_tol is None else float(newton_tol)
    check_field_shape(function, jnp.asarray(x_fold, dtype), float(fold["p"]), args)
    problem = _Problem(field=function, second=set_q, shape=shape)
    y0 = jnp.asarray(x_fold.ravel(), dtype)
    p0, q0_ = jnp.asarray(float(fold["p"]), dtype), jnp.asarray(float(q0), dtype)
    residual = float(jnp.sqrt(jnp.mean(problem.f(y0, p0, q0_, args) ** 2)))
    if not residual <= RECORD_RESIDUAL * tol:
        raise ValueError(
            f"the fold at p = {float(p0):.6g} is not a steady state of this field at "
            f"q0 = {float(q0):g} (RMS of f there {residual:.3g}, newton_tol {tol:.3g}): pass the "
            "fold record of continuation on this field, with its args and q0."
        )
    jac = np.asarray(problem.jacobian(y0, p0, q0_, args), np.float64)
    sigma = np.linalg.svd(jac, compute_uv=False)
    if n > 1 and not sigma[-1] <= FOLD_GAP * sigma[-2]:
        raise ValueError(
            f"df/dx at the fold at p = {float(p0):.6g} is not singular (its smallest "
            f"singular values {sigma[-1]:.3g} and {sigma[-2]:.3g}): not a fold of this "
            f"field at q0 = {float(q0):g}, or not a located one."
        )
    z0 = jnp.concatenate([y0, p0[None]])
    curve = _Curve(problem, args, dtype, tol, settings.newton.max_newton)
    points, stop = curve.follow(
        np.asarray(z0), float(q0), curve.borders(jac), q_span, curve_settings(settings, tol)
    )
    result = _result(curve, points, stop)
    if energy_model:
        _to_model_coordinates(result, problem, args)
    return fold_curve_record(result, **produced_by)


class _Curve:
    """The fold curve's problem and settings: how it is followed (`continuation` on `G`,
    the borders re-seeded where the null vectors turn from them), each point measured,
    and a cusp located."""

    augmented = staticmethod(_augmented)

    def __init__(self, problem, args, dtype, tol: float, max_newton: int):
        self.problem, self.args = problem, args
        self.dtype, self.tol, self.max_newton = dtype, tol, int(max_newton)

    def cast(self, *values):
        return tuple(jnp.asarray(v, self.dtype) for v in values)

    def borders(self, jac):
        """`(b, c)`: the unit left and right null vectors of `jac`."""
        right, left = _null(np.asarray(jac, np.float64))
        return self.cast(left, right)

    def packed(self, borders) -> tuple:
        """`continuation`'s `args` for `augmented` with these borders."""
        return (self.problem, self.args, *borders)

    def reseed(self, point: dict):
        """The borders taken afresh at a measured point."""
        return self.borders(point["jac"])

    def measure(self, u, borders) -> dict:
        """A point `u = (x flat, p, q)` of the curve, measured with the borders `(b, c)`."""
        b, c = borders
        y, p, q = self.cast(u[:-2], u[-2], u[-1])
        jac, tests, cosines, v, w = _point_data(self.problem, y, p, q, self.args, b, c)
        return dict(
            u=np.asarray(u, np.float64),
            jac=np.asarray(jac, np.float64),
            tests=np.asarray(tests, np.float64),
            cosines=np.asarray(cosines, np.float64),
            v=np.asarray(v, np.float64),
            w=np.asarray(w, np.float64),
        )

    def follow(self, z0, q0: float, borders, q_span, settings: ContinuationSettings):
        """The points of the curve from `(z0, q0)` with the start's `borders`, and
        `(stop_reason, stall)`. Where a cosine between the borders and the null vectors
        falls below `RESEED_COSINE` the curve is cut there and followed on from that
        point with borders taken afresh (`reseed`, along the secant of the last step),
        so the bordered matrix stays regular however far the null vectors turn."""
        points: list[dict] = []
        self.lap_end: float | None = None  # the arclength once round a closed curve
        direction, max_points = settings.direction, settings.max_points
        s0, z, q, tangent = 0.0, z0, q0, None
        while True:
            remaining = max_points - len(points) + (1 if points else 0)
            budget = min(SEGMENT_POINTS, remaining)
            # continuation's warnings are kept for the stretch that is kept: one that is
            # cut was past where the borders were re-seeded (a stall there is theirs)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                branch = continuation(
                    self.augmented,
                    jnp.asarray(z, self.dtype),
                    q,
                    p_span=q_span,
                    args=self.packed(borders),
                    settings=settings.replace(
                        direction=direction if tangent is None else 1, max_points=budget
                    ),
                    tangent_start=tangent,
                    dtype=self.dtype,
                )
            zs, qs = np.asarray(branch["x"], np.float64), np.asarray(branch["p"], np.float64)
            new = [self.measure(np.append(zi, qi), borders) for zi, qi in zip(zs, qs)]
            for point, s, it, res in zip(
                new, branch["s"], branch["newton_iterations"], branch["residual_rms"]
            ):
                point.update(s=s0 + float(s), iterations=int(it), residual=float(res))
            low = [
                i
                for i, point in enumerate(new)
                if i > 0 and np.min(np.abs(point["cosines"])) < RESEED_COSINE
            ]
            more = branch["stop_reason"] == "max_points" and budget < remaining
            if points:  # the first point is the last one kept, measured again
                new = new[1:]
                low = [i - 1 for i in low]
            kept = new[: low[0] + 1] if low else new
            closing = _closing_index(points, kept)
            if closing is not None:  # a closed curve, once round: its last step passes
                index, along = closing
                points += kept[: index + 1]
                self.lap_end = (1 - along) * points[-2]["s"] + along * points[-1]["s"]
                return points, ("closed", None)
            points += kept
            if branch["stop_reason"] == "closed" and tangent is None and not low:
                # continuation's own rule (back within half a step of its start, which is
                # the curve's) stopped short of it: the start closes the loop
                back = dict(points[0])
                back["s"] = points[-1]["s"] + float(
                    np.linalg.norm(points[0]["u"] - points[-1]["u"])
                )
                self.lap_end = back["s"]
                return points + [back], ("closed", None)
            if not low and not more:
                for warning in caught:
                    warnings.warn(warning.message, warning.category, stacklevel=4)
                return points, (branch["stop_reason"], branch["stall"])
            cut = points[-1]
            if low:
                borders = self.reseed(cut)
            secant = cut["u"] - points[-2]["u"]
            s0, z, q, tangent = cut["s"], cut["u"][:-1], float(cut["u"][-1]), secant

    def summary(self, points: list[dict], stop, codim2: list[dict], study: str) -> dict:
        """What a curve's result holds besides its coordinates and test functions: `s`,
        `eigenvalues`, `border_cosines`, `residual_rms`, `newton_iterations`, `codim2`
        (in arclength order), `stop_reason`, `stall`, `metadata`."""
        stop_reason, stall = stop
        return dict(
            s=np.array([point["s"] for point in points]),
            eigenvalues=np.stack([_sorted_eigenvalues(point["jac"]) for point in points]),
            border_cosines=np.stack([point["cosines"] for point in points]),
            residual_rms=np.array([point["residual"] for point in points]),
            newton_iterations=np.array([point["iterations"] for point in points]),
            codim2=self.distinct(points, codim2),
            stop_reason=stop_reason,
            stall=stall,
            metadata=metadata(
                study=study,
                dtype=self.dtype,
                tol=self.tol,
                fold_dense_max=FOLD_DENSE_MAX,
                reseed_cosine=RESEED_COSINE,
            ),
        )

    def distinct(self, points: list[dict], codim2: list[dict]) -> list[dict]:
        """The codimension-two points in arclength order, without: one at the start (the
        record the curve started from, a cusp), one past the start once round
        a closed curve (found again), and a second record of one point (found from two
        brackets where a point of the curve lies on it)."""
        eps = float(jnp.finfo(self.dtype).eps)
        first_step = points[1]["s"] if len(points) > 1 else 0.0
        near_start = max(START_FRACTION, np.sqrt(eps)) * first_step
        kept: list[dict] = []
        for record in sorted(codim2, key=lambda r: r["s"]):
            if record["index"] == 0 and record["s"] <= near_start:
                continue
            if self.lap_end is not None and record["s"] > self.lap_end:
                continue
            scale = 1.0 + abs(record["p"]) + abs(record["q"])
            if any(
                other["kind"] == record["kind"]
                and other["located"]
                and record["located"]
                and abs(other["p"] - record["p"]) + abs(other["q"] - record["q"])
                <= np.sqrt(eps) * scale
                for other in kept
            ):
                continue
            kept.append(record)
        return kept

    def record(self, kind: str, at, i: int, weight: float, points, located: bool, residual):
        """A codimension-two point's record at `at = (x flat, p, q)`, found between
        points `i` and `i + 1` at the fraction `weight` of the step."""
        return dict(
            kind=kind,
            p=float(at[-2]),
            q=float(at[-1]),
            x=np.asarray(at[:-2]).reshape(self.problem.shape),
            index=int(i),
            located=located,
            residual_rms=float(residual),
            s=float((1 - weight) * points[i]["s"] + weight * points[i + 1]["s"]),
        )

    def codim2(self, which: int, i: int, points: list[dict], tests) -> dict:
        """The zero of test function `which` between points `i` and `i + 1` (`tests`:
        that function along the curve, signs aligned), located by Newton on the
        extended system (borders: the null vectors at point `i`) from where the test
        function interpolates to zero, with its normal form."""
        weight = tests[i] / (tests[i] - tests[i + 1])
        ends = points[i]["u"], points[i + 1]["u"]
        guess = (1 - weight) * ends[0] + weight * ends[1]
        b, c = self.borders(points[i]["jac"])
        u0, tol = self.cast(guess, self.tol)
        u, residual, converged = _locate(
            self.problem, u0, self.args, b, c, which, tol, self.max_newton
        )
        u = np.asarray(u, np.float64)
        # converged, and no farther from the guess than the step that bracketed the zero
        located = bool(
            converged
            and np.all(np.isfinite(u))
            and np.linalg.norm(u - guess) <= np.linalg.norm(ends[1] - ends[0])
        )
        record = self.record(
            TEST_FUNCTIONS[which], u if located else guess, i, weight, points, located, residual
        )
        if not located:
            return record
        y, p, q = self.cast(u[:-2], u[-2], u[-1])
        jac = np.asarray(self.problem.jacobian(y, p, q, self.args), np.float64)
        record["eigenvalues"] = _sorted_eigenvalues(jac)
        record["c"] = cusp_coefficient(_At(self.problem, y, p, q, self.args), jac)
        return record


def _sorted_eigenvalues(jac) -> np.ndarray:
    """Every eigenvalue of the formed `jac`, by descending real part."""
    return eigen.dense_eigenpairs(np.asarray(jac, np.float64), which="real")[0]


def _aligned_tests(points: list[dict]) -> np.ndarray:
    """The test functions along the curve (`[m, 1]`) with the null vectors' signs made
    continuous: the unit null vectors are the Jacobian's own up to a sign, which the
    borders set (and which flips where a border is re-seeded, or where the bordered
    solution passes through infinity); aligned with the previous point's, the test
    functions change sign only at their zeros."""
    tests = np.stack([point["tests"] for point in points])
    flip_w = 1.0
    for i in range(1, len(points)):
        previous, point = points[i - 1], points[i]
        flip_w *= np.sign(point["w"] @ previous["w"]) or 1.0
        # cusp = w . B(v, v): w's sign
        tests[i] *= flip_w
    return tests


def _result(curve: _Curve, points: list[dict], stop) -> dict:
    """`fold_continuation`'s result from the curve's measured points."""
    u = np.stack([point["u"] for point in points])
    tests = _aligned_tests(points)
    codim2 = [
        curve.codim2(which, int(i), points, tests[:, which])
        for which in range(len(TEST_FUNCTIONS))
        for i in np.flatnonzero(np.sign(tests[:-1, which]) * np.sign(tests[1:, which]) < 0)
    ]
    shape = curve.problem.shape
    return dict(
        p=u[:, -2].astype(curve.dtype),
        q=u[:, -1].astype(curve.dtype),
        x=u[:, :-2].reshape((len(u),) + shape).astype(curve.dtype),
        tests=tests,
        **curve.summary(points, stop, codim2, "fold_continuation"),
    )


def _to_model_coordinates(result: dict, problem: _Problem, packed) -> None:
    """An energy model's fold curve in its own coordinates: `x` (and each codimension-two
    point's) from the manifold coordinates, which move to `y`; `fixed_point_residual_rms
    [m]`, the model's RMS residual at each point (`q` applied as `second` applies it)."""

    def model_state(y, p, q):
        at_q = problem.second(packed, jnp.asarray(q))
        dtype = np.asarray(y).dtype
        x, residual = state_and_residual(
            jnp.asarray(y).reshape(problem.shape), jnp.asarray(p, dtype), at_q
        )
        return np.asarray(x), float(residual)

    pairs = [model_state(y, p, q) for y, p, q in zip(result["x"], result["p"], result["q"])]
    result["y"], result["x"] = result["x"], np.stack([x for x, _ in pairs])
    result["fixed_point_residual_rms"] = np.array([r for _, r in pairs])
    for point in result["codim2"]:
        x, residual = model_state(point["x"], point["p"], point["q"])
        point["y"], point["x"], point["fixed_point_residual_rms"] = point["x"], x, residual
