"""What `continuation` checks before and after it follows a branch: its settings, the
field's shape and the linear algebra asked for (`_check`, `check_field_shape`,
`check_linear_algebra`, `check_preconditioner`), the dtype and default tolerances, and
the warnings about a start that moved or is singular, steps refused at the rounding
floor, and a stall."""

import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from .._common import float64_available
from ._branch import _nearest_zero
from ._branch_kernels import (
    DENSE_MAX,
    SPECTRA,
)
from ._branch_records import ContinuationSettings

# A start whose RMS correction by Newton (at fixed p0) exceeds this fraction of the
# state's RMS (and the first step) is warned of: Newton from far may reach another
# steady state than meant.
START_MOVED = 0.1


# A corrector that ends within this factor of `tol` stalled near a steady state (`_stall`).
STALL_FACTOR = 100.0


def _check(field, x0, p0, p_span, settings):
    if not (callable(field) or callable(getattr(field, "vector_field", None))):
        raise TypeError(
            "continuation takes a solvers.EnergySystem or a callable "
            f"field(x, p, args) -> dx/dt (got {type(field).__name__})."
        )
    if not isinstance(settings, ContinuationSettings):
        raise TypeError(
            "settings must be an analysis.ContinuationSettings (got "
            f"{type(settings).__name__}): ContinuationSettings(ds=..., k=..., ...)."
        )
    if np.shape(p_span) != (2,):
        raise ValueError(f"p_span must be a pair (low, high) (got {p_span!r}).")
    lo, hi = (float(v) for v in p_span)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"p_span must be (low, high) with low < high (got {p_span}).")
    if not lo <= float(p0) <= hi:
        raise ValueError(
            f"p0 = {float(p0):g} (the start's p: for switch_branch, the branch point's) "
            f"lies outside p_span = ({lo:g}, {hi:g}): give a p_span that holds it."
        )
    if not np.all(np.isfinite(np.asarray(x0))):
        raise ValueError("x0 holds NaN or inf: start from a finite state.")
    return lo, hi


def default_tol(dtype) -> float:
    """Newton's default RMS of `f`: 1e-10 in float64, 1e-5 in float32 (whose round-off
    stops Newton above 1e-10)."""
    return 1e-10 if dtype == jnp.float64 else 1e-5


def dtype_of(x0, dtype):
    """The branch's dtype: `dtype`, else `x0`'s (a floating one); float64 only with
    `jax_enable_x64`, refused in one line without it."""
    dtype = jnp.asarray(x0).dtype if dtype is None else jnp.dtype(dtype)
    if not jnp.issubdtype(dtype, jnp.floating):
        dtype = jnp.float64 if float64_available() else jnp.float32
    if dtype == jnp.float64 and not float64_available():
        raise ValueError(
            "float64 needs jax_enable_x64: call "
            "jax.config.update('jax_enable_x64', True) first, or pass "
            "dtype=jnp.float32."
        )
    return dtype


def _warn_if_moved(x0, y, ds: float, state_weight: float) -> float:
    """The RMS of the start's correction from `x0` (flat) to the steady state `y`
    (`[n + 1]`), with a `RuntimeWarning` where it exceeds both `START_MOVED` of the
    state's RMS and the first step `ds` (in the arclength's metric: a correction
    within one step of the branch is no other start)."""
    x0, x = np.asarray(x0, np.float64), np.asarray(y[:-1], np.float64)
    moved = float(np.sqrt(np.mean(np.square(x - x0))))
    scale = max(float(np.sqrt(np.mean(np.square(x0)))), float(np.sqrt(np.mean(np.square(x)))))
    if moved > START_MOVED * scale and math.sqrt(state_weight) * moved > ds:
        warnings.warn(
            f"continuation: x0 is not a steady state at p0 = {float(y[-1]):g}: Newton moved "
            f"it by RMS {moved:.3g} ({moved / scale:.0%} of the state's RMS {scale:.3g}), to "
            "the steady state the branch starts from (result['x'][0]); from far, Newton may "
            "reach another one than meant: start from the end of a solve to be sure.",
            RuntimeWarning,
            stacklevel=3,
        )
    return moved


def _warn_if_singular_start(point) -> None:
    """A `RuntimeWarning` where the start sits on a bifurcation: among the `k` leading
    eigenvalues of `df/dx` there (as every point keeps), a real one is zero to rounding
    (within `1e3 eps` of the largest in size) and apart from the others (within
    `sqrt(eps)` of the next nearest zero: a stiff spectrum's smallest eigenvalue is
    small beside its largest, not beside its neighbours). There the direction the
    branch leaves in is not defined, and the bifurcation at `s = 0` may go unreported
    (or be reported going one way only)."""
    values = np.asarray(point["eigenvalues"]).astype(complex)
    nearest = _nearest_zero(values, real=True)
    if nearest is None:
        return
    eps = float(jnp.finfo(point["y"].dtype).eps)
    size = abs(values[nearest].real)
    others = np.abs(np.delete(values, nearest))
    if size <= 1e3 * eps * np.max(np.abs(values)) and (
        not others.size or size <= math.sqrt(eps) * others.min()
    ):
        warnings.warn(
            f"continuation: the start (p0 = {float(point['y'][-1]):g}) is on a bifurcation: "
            f"df/dx has the eigenvalue {values[nearest].real:.3g}, zero to rounding; the "
            "branch's direction there is not defined, and a bifurcation at the start may "
            "go unreported or be reported one way only: start a little to one side of it, "
            "or from a located branch point with switch_branch.",
            RuntimeWarning,
            stacklevel=3,
        )


def check_linear_algebra(system, spectrum, preconditioner, matrix_free) -> None:
    """Refuse an unknown `spectrum`, a `preconditioner` that is not callable, given with
    `matrix_free=False` (a dense solve has no use for it) or for an energy model (its
    manifold coordinates are internal)."""
    if spectrum not in SPECTRA:
        raise ValueError(f"spectrum must be one of {SPECTRA} (got {spectrum!r}).")
    if preconditioner is None:
        return
    if not callable(preconditioner):
        raise TypeError(
            "preconditioner must be a function (v, x, p, args) -> ~(df/dx)^-1 v; got "
            f"{type(preconditioner).__name__}."
        )
    if matrix_free is False:
        raise ValueError(
            "preconditioner is for matrix-free solves; with matrix_free=False every "
            "solve is a dense LU: drop one of the two."
        )
    if callable(getattr(system, "vector_field", None)):
        raise ValueError(
            "preconditioner is for a field f(x, p, args); an energy model's branch is "
            "followed in internal manifold coordinates, where none can be given."
        )


def is_dense(n: int, matrix_free: bool | None, preconditioner) -> bool:
    """Whether `n` unknowns are solved with formed Jacobians: up to `DENSE_MAX` unless
    `matrix_free` says otherwise or a `preconditioner` is given (matrix-free)."""
    if matrix_free is None:
        dense = n + 1 <= DENSE_MAX and preconditioner is None
    else:
        dense = not matrix_free
    if not dense and n < 4:
        raise ValueError(
            f"a state of {n} entries is solved dense: matrix-free (Arnoldi) needs at least "
            "4; drop matrix_free=True and the preconditioner."
        )
    return dense


def kept_eigenvalues(k: int, n: int, dense: bool) -> int:
    """The eigenvalues each point keeps: `k`, at most `n` dense (all of them) and
    `n - 2` matrix-free (Arnoldi's limit)."""
    return min(k, n if dense else n - 2)


def check_preconditioner(preconditioner, x0, p0, args) -> None:
    """Refuse a `preconditioner` that fails on a state-shaped `v`, returns another
    shape, is not linear and transposable in `v` (JAX's GMRES transposes its operator
    when it is traced, and the left null vector needs the transpose), or returns NaN or
    inf at `(x0, p0)`: each would fail deep inside JAX or pass NaN on."""
    if preconditioner is None:
        return
    x = jnp.asarray(x0)
    p = jnp.asarray(p0, x.dtype)

    def apply(v):
        return preconditioner(v, x, p, args)

    name = getattr(preconditioner, "__name__", type(preconditioner).__name__)
    try:
        out = jax.eval_shape(apply, x)
    except Exception as error:  # noqa: BLE001 (the user's function: any error)
        raise ValueError(
            f"preconditioner {name}(v, x, p, args) failed on v of the state's shape "
            f"{tuple(x.shape)}: {type(error).__name__}: {str(error).splitlines()[0]}"
        ) from None
    if getattr(out, "shape", None) != x.shape:
        raise ValueError(
            f"preconditioner {name} returned shape {getattr(out, 'shape', type(out))}; it "
            f"must return an array of v's shape {tuple(x.shape)}."
        )
    try:
        jax.eval_shape(lambda v: jax.linear_transpose(apply, x)(v), x)
    except Exception as error:  # noqa: BLE001
        raise ValueError(
            f"preconditioner {name} must be linear in v and transposable by "
            "jax.linear_transpose (GMRES transposes it; so does the left null vector's "
            "solve): no nonlinear operation on v, no jax.pure_callback (write the solve "
            "in jax.numpy / jax.lax.linalg). JAX said: "
            f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        ) from None
    probe = 1.0 + jnp.arange(x.size, dtype=x.dtype).reshape(x.shape) / x.size
    if not bool(jnp.all(jnp.isfinite(apply(probe)))):
        raise ValueError(
            f"preconditioner {name} returned NaN or inf at the start (x0, p0); it must "
            "return a finite approximation of (df/dx)^-1 v."
        )


def check_field_shape(field, x0, p, args) -> None:
    """Refuse a field whose output does not have the state's shape, before any solve."""
    try:
        out = jax.eval_shape(lambda x: field(x, jnp.asarray(p, x.dtype), args), x0)
    except Exception as error:  # the user's function, called as continuation will
        raise ValueError(
            f"calling field(x, p, args) with x of shape {x0.shape} failed with "
            f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''} "
            "(the state comes first: a field(t, x, args) of lyapunov_spectrum takes time "
            "first; args is None unless given)."
        ) from error
    if getattr(out, "shape", None) != x0.shape:
        raise ValueError(
            f"field(x, p, args) returned shape {getattr(out, 'shape', None)} for a state of "
            f"shape {x0.shape}: it must return dx/dt, the state's shape."
        )


def is_float(leaf) -> bool:
    """Whether a leaf is a floating array or a Python float (cast to the branch's
    dtype: a Python float would be a static, recompiling argument)."""
    if isinstance(leaf, float):
        return True
    return hasattr(leaf, "dtype") and jnp.issubdtype(leaf.dtype, jnp.floating)


def _warn_if_at_rounding_floor(refused, points: int, tol: float) -> None:
    """A `RuntimeWarning` where at least `max(3, points / 4)` steps were refused with
    Newton ending within `STALL_FACTOR` of `tol` (steps shrink there): `tol` at the
    field's rounding floor (about `eps |df/dx| |x|`: a fine grid's Laplacian has a large
    `|df/dx|`), or a piecewise-smooth field's kinks (ReLU memories) under Newton's
    iterates."""
    near = refused.get("newton_near_tol", 0)
    if near >= max(3, points / 4):
        warnings.warn(
            f"continuation: {near} steps were refused with Newton ending within "
            f"{STALL_FACTOR:g}x of newton_tol = {tol:g} and no lower ({points} points kept): it "
            "is near the field's rounding floor (a large Jacobian, such as a fine grid's "
            "Laplacian, rounds f at about eps |df/dx| |x|: a looser newton_tol goes on), or "
            "Newton meets kinks of a piecewise-smooth field (ReLU memories); "
            "result['refused_steps'] counts the refusals by cause.",
            RuntimeWarning,
            stacklevel=3,
        )


def _stall(failure, tol):
    """The last refused step before the step fell below `ds_min`, with `near_tol`:
    Newton ended within `STALL_FACTOR` of `tol` and could not lower its residual
    further (a kink of a piecewise-smooth field, such as ReLU memories make, where the
    Jacobian jumps under Newton's iterates, or `tol` at the field's rounding floor)
    rather than far from any steady state."""
    if failure is None:
        return None
    return dict(failure, near_tol=_near_tol(failure, tol))


def _near_tol(failure, tol) -> bool:
    """Whether a refused step's Newton ended within `STALL_FACTOR` of `tol`."""
    return failure.get("cause") == "newton" and failure["residual_rms"] <= STALL_FACTOR * tol
