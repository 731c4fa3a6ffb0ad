"""Stability of a fixed point of any energy system: the tangent Hessian's spectrum, a
finite-time Lyapunov exponent, and a verdict that reconciles them.

The operator is the Jacobian of the residual `G` restricted to the tangent space of the
model's geometry (`analysis._geometry`: the manifold a `solvers.ManifoldEnergySystem`
declares, else flat), applied by JVPs of `model.residual`. On the ET the residual is
`G = P_T(g) dE/dg`, and the native field's Jacobian is *not* used: it misses the
curvature term of the constraint and shows positive eigenvalues at true minima
(docs/mathematics.md, "Stability at a fixed point").

Coordinates. With `C` the model's clock (the ET: `gamma / s_A` per token; 1 for a model
without one), a tangent displacement `dx` moves the energy's coordinates by `C dx`; with
`H` the Riemannian Hessian in those coordinates, `dG = H C dx`, and the projected flow
linearises to `tau d(dx)/dt = -H C dx`. So

- `coordinates="g"`: the eigenvalues of `H` (the curvature of `E` on the manifold,
  independent of the clocks);
- `coordinates="x"`: the eigenvalues of `C^(1/2) H C^(1/2)` (similar to `H C`), which
  divided by `tau` are the decay rates of the linearised projected flow.

Both have the same signs (Sylvester's law of inertia), hence the same Morse index.

The normal directions (on the ET per token the mean and the direction of
`x_A - mean_A`, and every direction of a clamped token) are excluded: the dense method
works in an orthonormal basis of the projection's range; Lanczos works on the operator
plus a shift on the normal space that moves those directions past the end of the
spectrum it looks for.

A verdict is only as good as the point it is taken at: `stability` first polishes the
state with Newton's method (`solvers.find_fixed_point`), then says how far the true
critical point can be, which kinks of `E` (ReLU memories) lie that close, and the
one-sided answer there (`analysis._verdict`).
"""

from typing import Any, Literal, Protocol, runtime_checkable

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from et_ode import solvers

from .._common import cast, float64_available, is_count, is_real
from .._geometry import energy_coordinates, has, require
from .._records import metadata
from .._results import build as typed
from ..landscape import (
    GRADIENT_ASYMMETRY,
    Coordinates,
    LyapunovSpectrumSettings,
    flow_eigenvalues,
    hessian_eigenvalues,
    linear_rate_range,
    lyapunov_spectrum,
    smallest_eigenvalue_magnitude,
    verdict,
)
from ._settings import (
    LYAPUNOV_EXPONENT_OPTIONS,
    POLISH_TOL,
    STABILITY_OPTIONS,
    STABILITY_POLISH,
    StabilitySettings,
    constant_step,
    number,
    require_options,
)
from ._stability_records import LyapunovExponent, Stability, StabilityLyapunov

State = Float[Array, "N D"]  # one state, as in `solvers.EnergySystem`


@runtime_checkable
class KinkedSystem(solvers.EnergySystem, Protocol):
    """An energy system whose `E` has kinks (`analysis._geometry`): their distances from
    `x` (`None` where `E` is twice differentiable), and the model with those within
    `within` pinned to one `side` (`"lower"` or `"upper"`)."""

    def kink_distances(self, x: State, args: Any) -> Any: ...

    def one_sided(self, x: State, args: Any, within: float, side: str) -> solvers.EnergySystem: ...


# What a Lyapunov exponent's perturbation is measured in: the energy's coordinates
# (`|C dx|`, `|dg|` on the ET) or the metric `|C^(1/2) dx|` in which the linearised
# projected flow is symmetric, so that its growth rates lie exactly in the Hessian's
# range. The exponent (the limit) is the same; a finite horizon's differs by at most
# `log(c_max / c_min) / T`.
LYAPUNOV_MEASURES = {"g": 1.0, "metric": 0.5}


def lyapunov_exponent(
    model: solvers.EnergySystem,
    x: Float[ArrayLike, "N D"],
    args: Any = None,
    *,
    options: solvers.SolveOptions = LYAPUNOV_EXPONENT_OPTIONS,
    t1: float = 20.0,
    segments: int = 20,
    seed: int = 0,
    measure: Literal["g", "metric"] = "g",
) -> LyapunovExponent:
    """Finite-time Lyapunov exponent of the flow from `x`, in float64, on any
    `solvers.EnergySystem` with states `[N, D]`: `lyapunov_spectrum`'s top exponent
    (`k=1`, renormalised after each of `segments` pieces).

    A random tangent perturbation `dx` (seeded: `jax.random.normal(key(seed), x.shape)`)
    is carried with the state by the variational equation `d(dx)/dt = J(x) dx` (a JVP of
    the vector field) over `segments` equal pieces of `[0, t1]`, in one compiled loop.
    After each piece `dx` is projected onto the tangent space (on the ET token means and
    scales, which do not change `g`, are dropped; nothing for a flat model) and
    renormalised so that the perturbation of the energy's coordinates, `|C dx|` (`C` the
    clock: `|dg|` on the ET), is 1; the exponent is `sum(log growth) / t1` (units 1/tau).
    `options`: how the pieces are solved and on which flow (default
    `LYAPUNOV_EXPONENT_OPTIONS`: the projected flow, tsit5 at rtol 1e-10; constant
    steps, `rtol = atol = None` with a `dt0`: the exponent of that discrete map; any
    solver but `"auto"`, no `stepsize_controller`, as `lyapunov_spectrum`). `measure`:
    `"g"` (the energy's coordinates, default) or `"metric"` (`|C^(1/2) dx|`, see
    `LYAPUNOV_MEASURES`). A failed piece is refused, and a perturbation that shrinks
    below what `atol` resolves within one piece is warned of, as `lyapunov_spectrum`
    does (its `renormalise` is `t1 / segments`).

    **Protocol:** `energy`, `vector_field`, `residual` (refused up front without them);
    optional: `tangent_projection`, `clock`, `tau`.

    **Returns:** a `LyapunovExponent` (the exponent, the per-segment rates and the
    settings).
    """
    require(model, "lyapunov_exponent")
    options = require_options("lyapunov_exponent", options)
    if measure not in LYAPUNOV_MEASURES:
        raise ValueError(
            f"measure must be one of {', '.join(LYAPUNOV_MEASURES)} (got {measure!r})."
        )
    if not is_count(segments, 1):
        raise ValueError(f"segments must be an integer >= 1 (got {segments!r}).")
    if not (is_real(t1) and 0 < t1 < np.inf):
        raise ValueError(f"t1 must be a finite horizon > 0 (got {t1!r}).")
    t1, segments = float(t1), int(segments)
    spectrum = lyapunov_spectrum(
        model,
        x,
        args=args,
        k=1,
        t1=t1,
        options=options,
        settings=LyapunovSpectrumSettings(renormalise=t1 / segments, measure=measure, seed=seed),
        dtype=jnp.float64 if float64_available() else jnp.float32,
    )
    edges = np.linspace(0.0, t1, segments + 1)
    # each piece's log growth, from the running estimates (their sums over the times)
    growths = np.diff(spectrum.history[:, 0] * spectrum.times, prepend=0.0)
    return LyapunovExponent(
        exponent=float(spectrum.exponents[0] * spectrum.t1 / t1),
        local=growths / np.diff(edges),
        times=edges[1:],
        flow=options.flow,
        t1=t1,
        segments=segments,
        seed=int(seed),
        solver=options.solver,
        rtol=number(options.rtol),
        atol=number(options.atol),
        dt0=constant_step(options),
        coordinates=measure,
    )


# Kinks count as within reach up to this multiple of the distance bound (the bound is a
# linearisation; a margin keeps a kink just past it from being missed).
KINK_REACH_FACTOR = 10.0
# Newton's move counts as a jump to another critical point beyond this multiple of the
# distance its starting residual allows (`|G|_2 / min |lambda|`).
JUMP_FACTOR = 10.0


# Newton from a point too far from the fixed point wanders across the kinks of a ReLU
# energy: from the shipped `ode` model's own stop at RMS G 1e-3 it failed (100 steps, RMS
# G 0.7); from the `paper` model's projected flow stopped at 1e-4 it converged, but to a
# neighbouring minimum 0.037 (RMS in g) away, not the one the flow reaches (from 1e-6:
# 3e-5 away). So where Newton fails, the projected flow, which descends E from anywhere,
# takes the point `POLISH_TIGHTEN` closer and Newton starts again, at most
# `POLISH_ROUNDS` times; and where it jumps further than its starting residual allows
# (`JUMP_FACTOR`), `stability` starts it again from the point the flow has taken to RMS G
# `NEWTON_START`. (Not always first: from near a saddle the flow runs away from it.)
NEWTON_START, POLISH_TIGHTEN, POLISH_ROUNDS = 1e-6, 1e-2, 3


def _flow_to(model64, x, args64, target):
    """The projected flow (solver `"auto"`, float64) from `x` to RMS G `target`."""
    sol = solvers.solve(
        model64,
        x,
        args=args64,
        flow="projected",
        solver="auto",
        rtol=1e-10,
        atol=1e-12,
        t1=1e4,
        max_steps=100_000,
        stop=solvers.FixedPointStop(atol=target),
        throw=False,
    )
    residual = float(sol.stats["residual_rms"])
    return (
        sol.x_final,
        residual,
        dict(method="projected flow (auto)", residual_rms=residual, t=float(sol.t_final)),
    )


def _newton_tol(newton) -> float:
    """The RMS G the polish aims for: `newton.newton_tol`; `None`, 1e-10 in float64 (1e-5
    where float64 is off); without a polish `POLISH_TOL`, at which a point counts as
    converged."""
    if newton is None:
        return POLISH_TOL
    if newton.newton_tol is not None:
        return float(newton.newton_tol)
    return 1e-10 if float64_available() else 1e-5


def _polish(model64, x64, args64, newton, pre_flow=False):
    """Newton from `x64` (`solvers.find_fixed_point` with the `NewtonSettings` `newton`,
    `None`: no polish; dense Jacobian up to `solvers.DENSE_MAX` entries, GMRES
    above, unless `newton.matrix_free` says which), with `pre_flow` from a point the
    projected flow has brought to RMS G `NEWTON_START` first; where Newton fails, the flow to
    `POLISH_TIGHTEN` times the residual, and Newton again. Returns the point and a
    report: each round's method and residual, and how far Newton moved the point
    (`newton_displacement`, the norm in the energy's coordinates, from where it
    started)."""
    before = float(solvers.rms(model64.residual(x64, args64)))
    tol = _newton_tol(newton)
    if newton is None:
        return x64, dict(
            polished=False,
            residual_rms_before=before,
            residual_rms=before,
            converged=before <= tol,
            steps=0,
            displacement_rms=0.0,
            rounds=[],
            newton_start_residual_rms=before,
            newton_displacement=0.0,
        )
    if newton.matrix_free is None:
        linear = "dense" if x64.size <= solvers.DENSE_MAX else "gmres"
    else:
        linear = "gmres" if newton.matrix_free else "dense"
    max_steps = newton.max_newton
    x, residual, rounds, ok, steps = x64, before, [], False, 0
    if pre_flow and residual > NEWTON_START:
        x, residual, record = _flow_to(model64, x, args64, NEWTON_START)
        rounds.append(record)
    for attempt in range(POLISH_ROUNDS):
        if attempt:  # Newton failed: bring the point closer along the flow
            x, residual, record = _flow_to(model64, x, args64, max(tol, POLISH_TIGHTEN * residual))
            rounds.append(record)
        start, start_residual = x, residual
        found = solvers.find_fixed_point(
            model64, x, args=args64, tol=tol, max_steps=max_steps, linear=linear, method="newton"
        )
        after = float(found.residual_rms)
        steps += int(found.steps)
        rounds.append(dict(method=f"newton ({linear})", residual_rms=after, steps=int(found.steps)))
        if np.isfinite(after) and after < residual:
            x, residual = found.x, after
        ok = bool(found.success) or residual <= tol
        if ok:
            break

    def moved(a, b):
        return energy_coordinates(model64, a, args64) - energy_coordinates(model64, b, args64)

    return x, dict(
        polished=True,
        residual_rms_before=before,
        residual_rms=residual,
        converged=ok,
        steps=steps,
        linear=linear,
        rounds=rounds,
        displacement_rms=float(solvers.rms(moved(x, x64))),
        newton_start_residual_rms=start_residual,
        newton_displacement=float(jnp.linalg.norm(moved(x, start))),
    )


def _kinks(model64, x64, args64, within) -> dict:
    """Which kinks of `E` lie within `within` (energy coordinates) of `x64`."""
    distances = model64.kink_distances(x64, args64) if has(model64, "kink_distances") else None
    if distances is None:
        return dict(
            declared=has(model64, "kink_distances"),
            twice_differentiable=True,
            n_within=0,
            nearest=None,
            within=float(within),
        )
    distances = np.asarray(distances, np.float64)
    n_within = int(np.sum(distances <= within))
    finite = distances[np.isfinite(distances)]
    return dict(
        declared=True,
        twice_differentiable=n_within == 0,
        n_within=n_within,
        nearest=float(finite.min()) if finite.size else None,
        within=float(within),
    )


def stability(
    model: solvers.EnergySystem,
    x_star: Float[ArrayLike, "N D"],
    args: Any = None,
    *,
    options: solvers.SolveOptions = STABILITY_OPTIONS,
    coordinates: Coordinates = "g",
    settings: StabilitySettings = StabilitySettings(),
) -> Stability:
    """Stability of a fixed point near `x_star` (one state, `[N, D]` on the ET) of any
    `solvers.EnergySystem`, with a verdict.

    1. **Polish** (`settings.polish`, a `NewtonSettings`; `None` skips it): Newton's
       method on the residual (`solvers.find_fixed_point`, in float64; a dense Jacobian
       up to `solvers.DENSE_MAX` state entries, matrix-free GMRES above) to RMS G
       below `newton_tol`, at most `max_newton` steps per round; where Newton fails
       from too far away, the projected flow brings the point `POLISH_TIGHTEN` closer in
       RMS G and Newton starts again (`POLISH_ROUNDS` rounds); where Newton moved the
       point further than `JUMP_FACTOR` times the distance its starting residual allows
       (it may have reached a neighbouring critical point), the polish starts again from
       the point the flow has taken to RMS G `NEWTON_START`, and if Newton still jumps
       the verdict is refused. A point stopped at a loose tolerance can sit on the other
       side of a kink of a ReLU energy from the fixed point, where the Hessian differs.
    2. **Spectrum** of the tangent Hessian at the polished point (`hessian_eigenvalues`:
       dense for small problems, Lanczos otherwise); the distance to the true critical
       point is at most `|G|_2 / min|lambda|` (in the energy's coordinates).
    3. **Kinks** (models with `kink_distances`, such as the ET with ReLU memories):
       those within `KINK_REACH_FACTOR` times that distance make the Hessian one-sided;
       then the spectra of the two extreme sides (`model.one_sided`) bound every side's.
    4. **Lyapunov exponent** of `options.flow` from the point
       (`settings.lyapunov_time=None` skips it).
    5. **Verdict** (`analysis._verdict`): "stable minimum", "saddle of index k", "local
       maximum", or a refusal: "not converged", "degenerate", "at a kink" (the sides
       disagree), "not called" (the exponent falls outside the linearised flow's range),
       "no gradient flow" (the residual's Jacobian is not symmetric, `asymmetry` above
       `GRADIENT_ASYMMETRY`: the sentence gives the linear stability from the flow's
       eigenvalues, `flow_eigenvalues`, instead).

    **Protocol:** `energy`, `residual`, `vector_field` (refused up front without them);
    optional: the geometry and metric of `analysis._geometry`, `kink_distances` and
    `one_sided`, `tau`.

    **Arguments:**

    - `model`, `x_star`, `args`: the system, the point, its conditions.
    - `options`: the flow whose Lyapunov exponent is measured (only the projected
      flow's, or a flat model's, is compared with the Hessian) and how that exponent is
      solved (default `STABILITY_OPTIONS`: the projected flow, tsit5 at rtol 1e-10, as
      `lyapunov_exponent`'s).
    - `coordinates`: `"g"` (the eigenvalues of `H`) or `"x"` (those of
      `C^(1/2) H C^(1/2)`), as in `hessian_eigenvalues`.
    - `settings`: a `StabilitySettings`: the spectrum (`k`, `method`, `dense_max`,
      `eigen_tol`, `seed`), the Lyapunov exponent's horizon and pieces
      (`lyapunov_time`, `lyapunov_segments`) and the polish of step 1 (`polish`).

    **Returns:** a `Stability`: the `hessian_eigenvalues` entries at the polished
    point, the point, the polish, the distance bound, the kinks and sides, the rates,
    the Lyapunov exponent (a `StabilityLyapunov`) and the verdict
    (each entry documented on its field).
    """
    require(model, "stability")
    options = require_options("stability", options)
    flow, k, seed = options.flow, settings.k, settings.seed
    x_star = jnp.asarray(x_star)
    if x_star.ndim != 2:
        raise ValueError(f"stability takes one state [N, D]; got shape {tuple(x_star.shape)}.")
    model64, x_given, args64 = cast((model, x_star, args), jnp.float64)
    spectrum: dict[str, Any] = dict(
        coordinates=coordinates,
        k=k,
        method=settings.method,
        dense_max=settings.dense_max,
        eigen_tol=settings.eigen_tol,
        seed=seed,
    )
    tau = float(getattr(model, "tau", 1.0))

    def polished_spectrum(pre_flow):
        x, report = _polish(model64, x_given, args64, settings.polish, pre_flow=pre_flow)
        # a dict of its entries: stability adds its own (the typed result is read-only)
        spec = dict(hessian_eigenvalues(model64, x, args64, **spectrum))
        known = (
            spec["all"]
            if spec["all"] is not None
            else np.concatenate([spec["smallest"], spec["largest"]])
        )
        magnitude = float(np.min(np.abs(known)))
        if spec["morse_index_is_lower_bound"]:  # the eigenvalue nearest 0 is not known
            magnitude = smallest_eigenvalue_magnitude(model64, x, args64, coordinates, seed)
            spec["smallest_magnitude"] = magnitude
        if coordinates == "x":  # H = C^-1/2 S C^-1/2: |H^-1| <= c_max / min |lambda(S)|
            magnitude /= spec["clock_range"][1]
        magnitude = max(magnitude, 1e-300)
        # Newton may move the point about as far as its starting residual allows; a
        # longer move may have reached another critical point than the flow's
        report["newton_jump_bound"] = float(
            JUMP_FACTOR * (report["newton_start_residual_rms"] * np.sqrt(x.size) / magnitude)
        )
        jump = report["newton_displacement"] > report["newton_jump_bound"] + 1e-12
        distance = float(jnp.linalg.norm(model64.residual(x, args64))) / magnitude
        return x, report, spec, distance, jump

    x64, polished, result, distance, jumped = polished_spectrum(pre_flow=False)
    if jumped and polished["newton_start_residual_rms"] > NEWTON_START:
        # Newton from a loose point jumped: start it again where the flow has taken the
        # point to RMS G `NEWTON_START`
        first = dict(
            newton_displacement=polished["newton_displacement"],
            newton_jump_bound=polished["newton_jump_bound"],
            residual_rms=polished["residual_rms"],
        )
        x64, polished, result, distance, jumped = polished_spectrum(pre_flow=True)
        polished["first_attempt_jumped"] = first
    kinks = _kinks(model64, x64, args64, KINK_REACH_FACTOR * distance)
    sides, index_range = None, (result["morse_index"], result["morse_index"])
    extremes = (float(result["smallest"][0]), float(result["largest"][-1]))
    if kinks["n_within"]:
        assert isinstance(model64, KinkedSystem)  # `require`: no kink_distances without one_sided
        sides = {}
        for side in ("lower", "upper"):
            pinned = model64.one_sided(x64, args64, kinks["within"], side)
            r = hessian_eigenvalues(pinned, x64, args64, **spectrum)
            sides[side] = dict(
                smallest=r["smallest"],
                largest=r["largest"],
                morse_index=r["morse_index"],
                morse_index_is_lower_bound=r["morse_index_is_lower_bound"],
            )
        index_range = (sides["upper"]["morse_index"], sides["lower"]["morse_index"])
        extremes = (float(sides["lower"]["smallest"][0]), float(sides["upper"]["largest"][-1]))
    rates = linear_rate_range(*extremes, coordinates, result["clock_range"], tau)
    result.update(
        x=np.asarray(x64),
        polish=polished,
        residual_rms=polished["residual_rms"],
        distance_bound=distance,
        kinks=kinks,
        sides=sides,
        morse_index_range=list(index_range),
        linear_rates=rates,
        rates_smallest=result["smallest"] / tau if coordinates == "x" else None,
        energy=float(model64.energy(x64, args64)),
        lyapunov=None,
    )
    lyapunov_time = settings.lyapunov_time
    if lyapunov_time is not None:
        horizon, capped = float(lyapunov_time), None
        own = linear_rate_range(
            result["smallest"][0], result["largest"][-1], coordinates, result["clock_range"], tau
        )[1]  # the point's own Hessian
        if own > 0:  # unstable: the state leaves x* once the residual's error grows to
            # ~1e-3, after log(1e-3 / distance) / rate; measure no longer than that
            drift = np.log(1e-3 / max(distance, 1e-15)) / own
            if drift < horizon:
                horizon, capped = max(drift, 1e-3), float(lyapunov_time)
        exponent = lyapunov_exponent(
            model64,
            x64,
            args64,
            options=options,
            t1=horizon,
            segments=settings.lyapunov_segments,
            seed=seed,
            measure="metric",
        )
        result["lyapunov"] = StabilityLyapunov(**exponent, capped_from=capped)
    compared_flow = "projected" if result["geometry"] == "flat" else flow
    result["flow_eigenvalues"] = (
        flow_eigenvalues(model64, x64, args64, k, flow)
        if result["asymmetry"] > GRADIENT_ASYMMETRY
        else None
    )
    result["verdict"] = verdict(
        converged=polished["converged"],
        jumped=jumped,
        newton_displacement=polished["newton_displacement"],
        jump_bound=polished["newton_jump_bound"],
        residual_rms=polished["residual_rms"],
        distance=distance,
        index_range=index_range,
        index_is_lower_bound=result["morse_index_is_lower_bound"],
        n_near_zero=result["n_near_zero"],
        dimension=result["dimension"],
        smallest=extremes[0],
        kinks=kinks,
        lyapunov=result["lyapunov"],
        rates=rates,
        clock_range=result["clock_range"],
        flow=compared_flow,
        asymmetry=result["asymmetry"],
        flow_eigenvalues=result["flow_eigenvalues"],
    )
    result.update(
        flow=flow,
        tau=tau,
        metadata=metadata(
            study="stability",
            dtype=np.float64 if float64_available() else np.float32,
            model_type=type(model).__name__,
            seeds=dict(lanczos_and_lyapunov=seed),
            flow=flow,
            coordinates=coordinates,
            method=result["method"],
            k=k,
            float64=float64_available(),
            polish=dict(
                tol=_newton_tol(settings.polish),
                max_steps=(settings.polish or STABILITY_POLISH).max_newton,
                enabled=settings.polish is not None,
            ),
            geometry=result["geometry"],
        ),
    )
    return typed(Stability, result)
