"""Basins of attraction: which fixed point each start flows to, the distinct attractors,
their energies, Morse indices and basin fractions, and the basin entropy of a grid.

Every start is integrated to a fixed point by one batched `solvers.solve` (one compiled
program for all starts, with the fixed-point stop), then the end states are matched into
attractors: two end states are the same attractor when the RMS distance between their
energy coordinates (`model.energy_coordinates`, the ET's `g = LayerNorm(x)`; `x` itself
for a model without them) is at most `distance_tol` (`BasinSettings`). On the ET the
projected flow keeps each start's token scales and means, so two starts that reach the
same memory end at different `x` but at the same `g`: the energy's coordinates are the
ones in which "the same attractor" is meaningful. A start whose solve did not reach the
stop is labelled `-1` and belongs to no basin.

The basin entropy (Daza, Wagemakers, Georgeot, Guery-Odelin and Sanjuan, Sci. Rep. 6,
31416, 2016) of a grid of starts: cover the grid by boxes of `box x box` starts; in box
`i` let `p_ij` be the fraction of its starts in basin `j`; `S_i = -sum_j p_ij log p_ij`.
`S_b` is the mean of `S_i` over all boxes and `S_bb` its mean over the boxes that hold
more than one basin (0 where there is none): `S_bb > log 2` shows fractal boundaries.
"""

import collections
import math
import warnings
from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float, Integer, Real

from et_ode import solvers
from et_ode.vocab import Flow

from .._common import cast, float64_available
from .._geometry import energy_coordinates, require
from .._records import metadata
from ._basin_records import BasinEntropy, Basins, BasinSettings, basins_record
from ._critical_points import polish_near
from ._energy_field import flow_eigenvalues
from ._hessian import hessian_eigenvalues
from ._verdict import GRADIENT_ASYMMETRY, linearly_stable

# The Lanczos tolerance of an attractor's Hessian eigenvalues (`hessian_eigenvalues`'
# `eigen_tol`: a Ritz pair is accepted at a residual below tol |H|, and a symmetric
# operator's Ritz value then lies within that residual of an eigenvalue, so the sign of
# every eigenvalue farther than tol |H| from zero is right; as at any tol, a count of
# negative ones is a lower bound should Lanczos miss one). A loose tolerance matters: at a
# minimum of the shipped `paper` core with a near-degenerate smallest pair (0.458208,
# 0.458209) ARPACK took 15 times longer at 1e-8 than at 1e-6 (docs: benchmarks).
MORSE_LANCZOS_TOL = 1e-6
# How `basins` solves by default: tsit5 at rtol 1e-6 and atol 1e-8 on the projected flow
# (the native one has no fixed points), at most 100,000 steps per start.
BASIN_OPTIONS = solvers.SolveOptions(
    solver="tsit5", dt0=None, rtol=1e-6, atol=1e-8, max_steps=100_000, flow="projected"
)


def _check_boxes(grid_shape: tuple, box: int) -> None:
    """Refuse a grid that `box x box` boxes cannot cover (at least one box)."""
    if (
        len(grid_shape) != 2
        or not isinstance(box, (int, np.integer))
        or box < 1
        or min(grid_shape) < box
    ):
        raise ValueError(
            f"basin_entropy needs a 2-D grid of labels at least {box} x {box} (got shape "
            f"{tuple(grid_shape)}): give a smaller box= (an integer >= 1) or a finer grid."
        )


def basin_entropy(labels: Integer[ArrayLike, "G1 G2"], box: int = 5) -> BasinEntropy:
    """`S_b` and `S_bb` (module docstring) of `labels [G1, G2]` (integer basin labels on
    a grid; `-1`, no basin, counts as a basin of its own), with boxes of `box x box`
    starts (a remainder at the grid's edge is left out). Returns a `BasinEntropy`."""
    labels = np.asarray(labels)
    _check_boxes(labels.shape, box)
    g1, g2 = (size // box for size in labels.shape)
    tiles = (
        labels[: g1 * box, : g2 * box]
        .reshape(g1, box, g2, box)
        .swapaxes(1, 2)
        .reshape(g1 * g2, box * box)
    )
    entropies, boundary = [], 0
    for tile in tiles:
        _, counts = np.unique(tile, return_counts=True)
        p = counts / counts.sum()
        entropies.append(float(-np.sum(p * np.log(p))))
        boundary += counts.size > 1
    total = float(np.sum(entropies))
    return BasinEntropy(
        S_b=total / len(entropies),
        S_bb=total / boundary if boundary else 0.0,
        boxes=len(entropies),
        boundary_boxes=int(boundary),
        box=int(box),
    )


def grid_starts(
    center: Real[ArrayLike, "*shape"],
    u: Real[ArrayLike, "*shape"],
    v: Real[ArrayLike, "*shape"],
    *,
    extent: tuple[float, float] = (-1.0, 1.0),
    resolution: int = 32,
) -> tuple[Float[np.ndarray, " S *shape"], Float[np.ndarray, " R"], Float[np.ndarray, " R"]]:
    """Starts on the plane `center + a u + b v`, `a` and `b` on `resolution` points of
    `extent` each. Returns `(starts [resolution^2, *center.shape], a [R], b [R])`, the
    starts in row-major order (`b` fastest), so that a result's `labels` reshape to
    `[R, R]` with `a` down the rows."""
    center, u, v = (np.asarray(w, np.float64) for w in (center, u, v))
    if not center.shape == u.shape == v.shape:
        raise ValueError(
            f"center, u and v must have one shape (got {center.shape}, {u.shape}, {v.shape})."
        )
    a = np.linspace(*extent, resolution)
    b = np.linspace(*extent, resolution)
    ones = (1,) * center.ndim
    starts = center + a.reshape(-1, 1, *ones) * u + b.reshape(1, -1, *ones) * v
    return starts.reshape((resolution * resolution,) + center.shape), a, b


def _match(coordinates, distance_tol):
    """Greedy matching: each end state joins the first attractor whose representative
    lies within `distance_tol` (RMS), else starts a new one. Returns labels and the
    representatives' indices."""
    labels = np.full(len(coordinates), -1)
    representatives = []
    for i, point in enumerate(coordinates):
        if point is None:
            continue
        for label, j in enumerate(representatives):
            if np.sqrt(np.mean((coordinates[j] - point) ** 2)) <= distance_tol:
                labels[i] = label
                break
        else:
            labels[i] = len(representatives)
            representatives.append(i)
    return labels, representatives


@eqx.filter_jit
def _energies(model, xs, args):
    return jax.vmap(model.energy, in_axes=(0, None))(xs, args)


def _polish_choice(labels, representatives, energies, polish_max, polish_first):
    """The attractors whose representatives are polished: those of the starts
    `polish_first`, then the most visited, the lowest energy first among equals; at
    most `polish_max` (all when None)."""
    counts = np.bincount(labels[labels >= 0], minlength=len(representatives))
    ranked = sorted(range(len(representatives)), key=lambda i: (-counts[i], energies[i]))
    first = [int(labels[i]) for i in polish_first if labels[i] >= 0]
    order = list(dict.fromkeys(first + ranked))
    return set(order if polish_max is None else order[:polish_max])


def _merge_polished(model, x_final, args, labels, representatives, polish, distance_tol, chosen):
    """Polish the representatives of the attractors `chosen` (the verdict is taken at a
    fixed point, not where the flow's stop fired) and merge attractors whose polished
    points lie within `distance_tol` of an earlier one's. Returns the new labels
    (consecutive, in order of first appearance) and `(representative index, polish
    result or None)` per attractor."""
    kept, polished_points, relabel = [], [], {}
    for label, index in enumerate(representatives):
        polished = (
            polish_near(model, x_final[index], args, newton=polish) if label in chosen else None
        )
        point = None
        if polished is not None:
            point = np.asarray(
                energy_coordinates(model, jnp.asarray(polished.x, x_final.dtype), args)
            )
            same = [
                j
                for j, other in enumerate(kept)
                if other is not None and np.sqrt(np.mean((other - point) ** 2)) <= distance_tol
            ]
            if same:
                relabel[label] = same[0]
                continue
        relabel[label] = len(kept)
        kept.append(point)
        polished_points.append((index, polished))
    merged = np.array([relabel[label] if label >= 0 else -1 for label in labels])
    return merged, polished_points


def check_basin_options(options, settings) -> None:
    """Refuse `options` that are not a `solvers.SolveOptions` and `settings` that are not
    a `BasinSettings`, in one line each."""
    if not isinstance(options, solvers.SolveOptions):
        raise TypeError(
            f"options must be a solvers.SolveOptions (got {type(options).__name__}): "
            "BASIN_OPTIONS.replace(rtol=..., atol=...), for example."
        )
    if not isinstance(settings, BasinSettings):
        raise TypeError(
            f"settings must be an analysis.BasinSettings (got {type(settings).__name__})."
        )


def token_structure(points, tol: float = 1e-3) -> dict:
    """How attractors are built from their tokens (the rows of states `[N, D]`).

    `points`: the attractors' energy coordinates (`g` on the ET), `{index: [N, D]}`.
    Tokens within `tol` (RMS over the row) of a first one are one *token state*; two
    attractors are *token permutations* of each other when the best one-to-one
    matching of their tokens (`scipy.optimize.linear_sum_assignment` on the RMS
    distances) pairs every token within `tol` and is not the identity. An energy that
    does not see token order (the ET's core: positions enter through the start only)
    has every reordering of a minimum's tokens as another minimum.

    **Returns:** a dict: `token_states` (distinct states among all the tokens),
    `tokens` (their number), `permutations` (pairs `[i, j]` of the given indices), `tol`.
    """
    from scipy.optimize import linear_sum_assignment

    states: list[np.ndarray] = []
    count = 0
    for point in points.values():
        for token in np.asarray(point).reshape(len(point), -1):
            count += 1
            if not any(np.sqrt(np.mean((token - s) ** 2)) <= tol for s in states):
                states.append(token)
    indices, pairs = list(points), []
    for n, i in enumerate(indices):
        for j in indices[n + 1 :]:
            a = np.asarray(points[i]).reshape(len(points[i]), -1)
            b = np.asarray(points[j]).reshape(len(points[j]), -1)
            distance = np.sqrt(np.mean((a[:, None] - b[None]) ** 2, axis=-1))
            rows, columns = linear_sum_assignment(distance)
            if np.max(distance[rows, columns]) <= tol and np.any(rows != columns):
                pairs.append([int(i), int(j)])
    return dict(token_states=len(states), tokens=count, permutations=pairs, tol=float(tol))


def _stability_at(model, x, args, k: int, flow: Flow) -> dict:
    """An attractor's Morse index and stability at its polished point `x` (the entries
    of `basins`' attractors): from the tangent Hessian where the residual is a gradient,
    else from the projected flow's Jacobian (`flow_eigenvalues`), which a
    non-symmetric residual Jacobian's symmetric part does not give (a damped oscillator's
    well: eigenvalues -0.15 +- 1.41i, yet a symmetric part with one negative
    eigenvalue)."""
    spectrum = hessian_eigenvalues(model, x, args, k=k, eigen_tol=MORSE_LANCZOS_TOL)
    asymmetry = float(spectrum["asymmetry"])
    if asymmetry <= GRADIENT_ASYMMETRY:
        return dict(
            gradient=True,
            asymmetry=asymmetry,
            morse_index=int(spectrum["morse_index"]),
            smallest_eigenvalues=np.asarray(spectrum["smallest"]),
            flow_eigenvalues=None,
            stable=int(spectrum["morse_index"]) == 0,
        )
    dtype = jnp.float64 if float64_available() else x.dtype  # as the Hessian's
    values = flow_eigenvalues(*cast((model, x, args), dtype), k, flow)
    return dict(
        gradient=False,
        asymmetry=asymmetry,
        morse_index=None,
        smallest_eigenvalues=None,
        flow_eigenvalues=values,
        stable=linearly_stable(values),
    )


def _report_failures(reasons: list[str], model, starts, args, flow, sol) -> None:
    """Refuse a run in which no start reached the fixed-point stop (no basin to report),
    and warn, with the reasons counted, where some did not (they are labelled -1); a
    start whose state grew as a blow-up does is named (`solvers.growth_note`)."""
    failed = collections.Counter(reason for reason in reasons if reason != "fixed_point")
    if not failed:
        return
    cut_short = np.isin(reasons, ("max_steps", "dt_underflow"))  # ended before t1
    note = (
        solvers.blowup_note(model, starts, sol.x_final, 0.0, sol.t_final, args, flow, cut_short)
        if cut_short.any()
        else ""
    )
    (first, _), n_failed = failed.most_common(1)[0], sum(failed.values())
    # mypy cannot index StopReason (solvers._solution.reason_item says why)
    why = solvers.StopReason[getattr(solvers.StopReason, first)]  # type: ignore[misc,valid-type]
    what = (
        f"basins: {n_failed} of {len(reasons)} starts did not reach the fixed-point stop ("
        + ", ".join(f"{reason}: {n}" for reason, n in failed.most_common())
        + ")"
    )
    if n_failed == len(reasons):
        raise solvers.SolveError(
            first, f"{what}: no basin to report. {first}: {why}.{note}", {"stop_reason": reasons}
        )
    warnings.warn(
        f"{what}; they are labelled -1, in no basin. {first}: {why}.{note}",
        RuntimeWarning,
        stacklevel=3,
    )


def basins(
    model: solvers.EnergySystem,
    starts: Float[ArrayLike, "B N D"],
    *,
    args: Any = None,
    grid_shape: tuple[int, int] | None = None,
    polish_first: Sequence[int] = (),
    options: solvers.SolveOptions = BASIN_OPTIONS,
    settings: BasinSettings = BasinSettings(),
) -> Basins:
    """Integrate every start to a fixed point and group the end states into attractors
    (module docstring).

    **Arguments:**

    - `model`: a `solvers.EnergySystem` (needs `energy`, `residual`, `vector_field`;
      refused in one line, before any solve, without them).
    - `starts`: `[B, N, D]`, the starts (`grid_starts` builds a plane of them).
    - `args`: the model's conditions, shared by every start.
    - `grid_shape`: `(G1, G2)` when the starts are a grid (`grid_starts`): then the
      result has `labels_grid` and the basin entropy with boxes of `settings.box`.
    - `polish_first`: the starts (indices) whose attractors are polished first, before
      the most visited (`BasinSettings.polish_max`).
    - `options`: how the batched solve runs (`solvers.SolveOptions`: solver, steps,
      tolerances, `max_steps`, flow; default `BASIN_OPTIONS`, tsit5 at rtol 1e-6, atol
      1e-8 on the projected flow, at most 100,000 steps; `max_steps=None`: `solve`'s own
      cap). The flow is also the one whose Jacobian gives a non-gradient attractor's
      stability.
    - `settings`: the rest (`BasinSettings`: the stop `fixed_point_atol` and horizon
      `t1`, the `distance_tol` within which end states are one attractor, the Newton
      `polish` and how many attractors get one, `k` eigenvalues per attractor, the
      entropy's `box`).

    **Returns:** a `Basins` (its fields, and its `Attractor`s', say what each holds):
    with `grid_shape`, its `labels_grid` and `basin_entropy` too.
    """
    require(model, "basins")
    starts = jnp.asarray(starts)
    if starts.ndim != 3 or starts.shape[0] < 1:
        raise ValueError(f"starts must be [B, N, D] with B >= 1 (got {starts.shape}).")
    check_basin_options(options, settings)
    flow, distance_tol, box = options.flow, settings.distance_tol, settings.box
    if grid_shape is not None:
        if math.prod(grid_shape) != starts.shape[0]:
            raise ValueError(
                f"grid_shape {tuple(grid_shape)} does not hold the {starts.shape[0]} starts."
            )
        _check_boxes(tuple(grid_shape), box)  # before the solves, not after them
    sol = solvers.solve(
        model,
        starts,
        args=args,
        options=options,
        t1=settings.t1,
        stop=solvers.FixedPointStop(atol=settings.fixed_point_atol),
        throw=False,
    )
    reasons = list(sol.stats["stop_reason"])
    _report_failures(reasons, model, starts, args, flow, sol)
    x_final = np.asarray(sol.x_final)
    coordinates = [
        np.asarray(energy_coordinates(model, jnp.asarray(x), args))
        if reason == "fixed_point"
        else None
        for x, reason in zip(x_final, reasons)
    ]
    labels, representatives = _match(coordinates, distance_tol)
    energies = np.asarray(
        _energies(model, jnp.asarray(x_final[representatives]), args) if representatives else []
    )
    chosen = _polish_choice(labels, representatives, energies, settings.polish_max, polish_first)
    labels, polished_points = _merge_polished(
        model, x_final, args, labels, representatives, settings.polish, distance_tol, chosen
    )
    attractors = []
    for label, (index, polished) in enumerate(polished_points):
        x = jnp.asarray(x_final[index] if polished is None else polished.x, x_final.dtype)
        count = int(np.sum(labels == label))
        attractor = dict(
            x=np.asarray(x),
            polished=polished is not None,
            residual_rms=float(solvers.rms(model.residual(x, args))),
            energy=float(model.energy(x, args)),
            count=count,
            fraction=count / len(labels),
            gradient=None,
            asymmetry=None,
            morse_index=None,
            smallest_eigenvalues=None,
            flow_eigenvalues=None,
            stable=None,
            start=int(index),
        )
        if polished is not None:  # a Morse index is only right at a fixed point
            attractor.update(_stability_at(model, x, args, settings.k, flow))
        attractors.append(attractor)
    fractions = np.array([a["fraction"] for a in attractors])
    steps = np.asarray(sol.stats["num_steps"])
    result = dict(
        labels=labels,
        attractors=attractors,
        fractions=fractions,
        not_converged=int(np.sum(labels < 0)),
        entropy=float(-np.sum(fractions * np.log(fractions))) if fractions.size else 0.0,
        batched_iterations=int(np.max(steps)),
        one_by_one_iterations=int(np.sum(steps)),
        stop_reasons=reasons,
        x_final=x_final,
        token_structure=token_structure(
            {
                i: np.asarray(energy_coordinates(model, jnp.asarray(att["x"]), args))
                for i, att in enumerate(attractors)
                if att["polished"]
            },
            distance_tol,
        ),
        metadata=metadata(
            study="basins",
            dtype=x_final.dtype,
            flow=flow,
            solver=options.solver,
            rtol=options.rtol,
            atol=options.atol,
            fixed_point_atol=settings.fixed_point_atol,
            t1=settings.t1,
            match_tol=distance_tol,
            polish_max=settings.polish_max,
            starts=int(len(labels)),
        ),
    )
    if grid_shape is not None:
        result["labels_grid"] = labels.reshape(tuple(grid_shape))
        result["basin_entropy"] = basin_entropy(result["labels_grid"], box)
    return basins_record(result)
