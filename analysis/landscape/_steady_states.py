"""Several steady states at one parameter value by deflated Newton.

Newton from a start converges to one zero of `f(x, p)`; run again from the same start it
would find the same one. Deflation (Farrell, Birkisson and Funke, SIAM J. Sci. Comput.
37, 2015) solves instead `M(x) f(x) = 0` with
`M(x) = prod_i (|x - r_i|^-power + shift)` over the zeros `r_i` found so far: `M` grows
without bound at each of them, so Newton is pushed away from every known zero, and the
deflated Newton step is the plain one scaled (`analysis._branch_kernels.deflated_newton`).
Each start is retried until deflated Newton fails from it (a start that lies on a known
zero is moved off it by a small seeded random step first); every zero found is checked
on the undeflated `f` and kept once. A degenerate (multiple) zero is accepted where
`|f| <= newton_tol`, which may lie some way from it in `x`, so it can be reported twice.
"""

import dataclasses
import warnings
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import DTypeLike
from jaxtyping import ArrayLike, Real

from .._common import is_count
from .._records import metadata
from .._results import Result
from .._settings import NewtonSettings, Settings, positive
from ._branch_kernels import SPECTRA, FlatField, deflated_newton, leading_eigen
from ._continuation import Field
from ._continuation_checks import (
    check_field_shape,
    check_linear_algebra,
    check_preconditioner,
    default_tol,
    dtype_of,
    is_dense,
    is_float,
    kept_eigenvalues,
)
from ._xla_fallback import rescued_kernels


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class SteadyStates(Result):
    """The `m` distinct steady states that deflated Newton reached at one parameter value
    (`steady_states`), in the order found, with the eigenvalues of `df/dx` at each; also
    a read-only mapping of its keys (`found["states"] is found.states`)."""

    states: np.ndarray
    """`[m, *shape]`: the steady states."""
    residual_rms: np.ndarray
    """`[m]`: RMS of the field at each."""
    eigenvalues: np.ndarray
    """`[m, k]`: the kept eigenvalues of `df/dx` at each (complex, largest real part
    first; which `k`: `spectrum`)."""
    unstable: np.ndarray
    """`[m]`: eigenvalues with a positive real part (all of them dense, among the `k`
    matrix-free)."""
    stable: np.ndarray
    """`[m]`: every kept eigenvalue's real part negative."""
    start_index: np.ndarray
    """`[m]`: which start reached each (an index into `starts`)."""
    tries: int
    """The deflated Newton runs made."""
    capped: bool
    """`max_states` were found: there may be more."""
    dense: bool
    """Whether the Jacobians were formed (else GMRES and Arnoldi on JVPs)."""
    metadata: dict
    """What produced it (study, dtype, `p`, the deflation's and Newton's settings,
    versions)."""


@dataclasses.dataclass(frozen=True)
class SteadyStateSettings(Settings):
    """How `steady_states` searches by deflated Newton (module docstring).

    - `max_states`: the most states sought (an integer >= 1, default 16; one
      compilation holds this many).
    - `power`, `shift`: the deflation operator's exponent (> 0, default 2) and shift
      (> 0, default 1: it keeps Newton's behaviour far from the known states).
    - `distance_tol`: the RMS distance (the state's units, default 1e-6) below which two
      states are the same one.
    - `k`: eigenvalues of `df/dx` kept per state (an integer >= 1, default 6);
      `spectrum`: which (`"rightmost"` or `"nearest_zero"`, as for `continuation`).
    - `newton`: each try's Newton (`NewtonSettings`): `newton_tol`, the RMS of `f` at
      which a state is accepted (`None`: 1e-10 in float64, 1e-5 in float32, as for
      `continuation`), `max_newton` iterations per try (default 50), `matrix_free` and
      the field's `preconditioner` (as for `continuation`).
    """

    max_states: int = 16
    power: float = 2.0
    shift: float = 1.0
    distance_tol: float = 1e-6
    k: int = 6
    spectrum: Literal["rightmost", "nearest_zero"] = "rightmost"
    newton: NewtonSettings = NewtonSettings(max_newton=50)

    def check(self) -> None:
        for name in ("power", "shift", "distance_tol"):
            positive(self, name)
        for name in ("max_states", "k"):
            if not is_count(getattr(self, name), 1):
                raise ValueError(
                    f"SteadyStateSettings.{name} must be an integer >= 1 (got "
                    f"{getattr(self, name)!r})."
                )
        if self.spectrum not in SPECTRA:
            raise ValueError(
                f"SteadyStateSettings.spectrum must be one of {SPECTRA} (got {self.spectrum!r})."
            )
        if not isinstance(self.newton, NewtonSettings):
            raise TypeError(
                "SteadyStateSettings.newton must be an analysis.NewtonSettings (got "
                f"{type(self.newton).__name__})."
            )


def steady_states(
    system: Field,
    starts: Real[ArrayLike, " S *shape"],
    p: float,
    *,
    args: Any = None,
    known: Real[ArrayLike, " K *shape"] | None = None,
    settings: SteadyStateSettings = SteadyStateSettings(),
    dtype: DTypeLike | None = None,
) -> SteadyStates:
    """The distinct steady states of `system` at parameter `p` that deflated Newton
    reaches from `starts` (module docstring).

    **Arguments:**

    - `system`: a field `f(x, p, args) -> dx/dt` (as for `continuation`).
    - `starts`: `[S, *shape]`, the starting states (one or more).
    - `p`: the parameter value; `args`: the field's conditions.
    - `known`: `[K, *shape]` steady states to deflate from the outset (not returned).
    - `settings`: the search (`SteadyStateSettings`: `max_states`, the deflation's
      `power` and `shift`, `distance_tol`, the `k` eigenvalues kept and which, and
      each try's Newton).
    - `dtype`: as for `continuation`.

    **Returns:** a `SteadyStates` (its fields say what each holds). A `RuntimeWarning`
    where none is found (with the residual the last try ended at) or the cap is
    reached.
    """
    field = system
    if not callable(field):
        raise TypeError(
            "steady_states takes a callable field(x, p, args) -> dx/dt "
            f"(got {type(field).__name__})."
        )
    if not isinstance(settings, SteadyStateSettings):
        raise TypeError(
            f"settings must be an analysis.SteadyStateSettings (got {type(settings).__name__})."
        )
    starts = np.asarray(starts)
    if starts.ndim < 1 or starts.shape[0] < 1 or not np.all(np.isfinite(starts)):
        raise ValueError("starts must be a finite array [S, *shape] with S >= 1.")
    if not np.isfinite(p):
        raise ValueError(f"p must be a finite number (got {p}).")
    max_states, power, shift = settings.max_states, settings.power, settings.shift
    min_distance, k, spectrum = settings.distance_tol, settings.k, settings.spectrum
    max_newton, matrix_free = settings.newton.max_newton, settings.newton.matrix_free
    preconditioner, tol = settings.newton.preconditioner, settings.newton.newton_tol
    dtype = dtype_of(starts, dtype)
    if tol is None:
        tol = default_tol(dtype)
    shape = starts.shape[1:]
    n = int(np.prod(shape, dtype=int))
    check_linear_algebra(field, spectrum, preconditioner, matrix_free)
    dense = is_dense(n, matrix_free, preconditioner)
    k = kept_eigenvalues(k, n, dense)
    F = FlatField(field, tuple(shape), preconditioner)
    args = jax.tree.map(lambda v: jnp.asarray(v, dtype) if is_float(v) else v, args)
    check_field_shape(field, jnp.asarray(starts[0], dtype), p, args)
    check_preconditioner(preconditioner, jnp.asarray(starts[0], dtype), p, args)
    rng = np.random.default_rng(0)
    known = np.zeros((0, n)) if known is None else np.asarray(known).reshape(-1, n)
    capacity = max_states + known.shape[0]
    roots = np.zeros((capacity, n))
    roots[: known.shape[0]] = known
    count = known.shape[0]
    found: list[np.ndarray] = []
    residuals: list[float] = []
    origin: list[int] = []
    tries, last_residual = 0, float("nan")
    p_entry = np.full((1,), float(p))
    kernel = (
        jnp.asarray(tol, dtype),
        int(max_newton),
        jnp.asarray(power, dtype),
        jnp.asarray(shift, dtype),
        dense,
    )
    for index, start in enumerate(starts.reshape(starts.shape[0], n)):
        while len(found) < max_states:
            if (
                count
                and np.min(np.sqrt(np.mean((roots[:count] - start) ** 2, axis=1)))
                < 1e3 * min_distance
            ):
                # the deflation operator is infinite at a known state: start beside it
                start = start + 1e-2 * (1.0 + np.sqrt(np.mean(start**2))) * (rng.standard_normal(n))
            y0 = jnp.asarray(np.concatenate([start, p_entry]), dtype)
            active = jnp.asarray(np.arange(capacity) < count)
            y, _, res = deflated_newton(
                F,
                y0,
                jnp.asarray(roots, dtype),
                active,
                args,
                *kernel,
            )
            tries, last_residual = tries + 1, float(res)
            x = np.asarray(y[:-1], np.float64)
            if not (float(res) <= tol and np.all(np.isfinite(x))):
                break
            distances = np.sqrt(np.mean((roots[:count] - x) ** 2, axis=1))
            if count and np.min(distances) < min_distance:
                break
            roots[count], count = x, count + 1
            found.append(x)
            residuals.append(float(res))
            origin.append(index)
    capped = len(found) >= max_states
    if not found:
        nan = "" if np.isfinite(last_residual) else ": the field is not finite where it went"
        warnings.warn(
            f"steady_states: no steady state found at p = {float(p):g}: deflated Newton "
            f"from each of the {starts.shape[0]} starts ended above newton_tol = {tol:g} (the "
            f"last at RMS f = {last_residual:.3g}{nan}); give starts nearer steady "
            "states, more max_newton, or a looser newton_tol (settings.newton).",
            RuntimeWarning,
            stacklevel=2,
        )
    elif capped:
        warnings.warn(
            f"steady_states: max_states = {max_states} states found at p = {float(p):g}; "
            "there may be more: raise max_states.",
            RuntimeWarning,
            stacklevel=2,
        )
    spectra = [
        leading_eigen(
            F,
            jnp.asarray(np.concatenate([x, p_entry]), dtype),
            args,
            k,
            dense,
            spectrum=spectrum,
        )
        for x in found
    ]
    values = np.stack([s[0] for s in spectra]) if spectra else np.zeros((0, k), np.complex128)
    return SteadyStates(
        states=np.asarray(found).reshape((len(found),) + tuple(shape)),
        residual_rms=np.asarray(residuals),
        eigenvalues=values,
        unstable=np.array([sum(s[2]) for s in spectra], dtype=int),
        stable=np.max(values.real, axis=1) < 0 if spectra else np.zeros(0, bool),
        start_index=np.asarray(origin, dtype=int),
        tries=tries,
        capped=capped,
        dense=dense,
        metadata=metadata(
            study="steady_states",
            dtype=dtype,
            p=float(p),
            power=power,
            shift=shift,
            tol=tol,
            max_newton=max_newton,
            min_distance=min_distance,
            k=k,
            spectrum=spectrum,
            preconditioned=preconditioner is not None,
            xla_passes_off=rescued_kernels(),
        ),
    )
