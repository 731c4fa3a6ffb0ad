"""Basins followed in a parameter: at each value of `p` the same starts are integrated to
their attractors (`basins`), and the attractors are matched from one value to the next,
so that each is one *track* across `p` with its basin fraction, energy and stability.

This is the global counterpart of `continuation` (after Attractors.jl's
`global_continuation`: Datseris, Rossi and Wagemakers, "Framework for global stability
analysis of dynamical systems", Chaos 33, 073151, 2023): `continuation`
follows one steady state, stable or not, and finds where it folds or branches;
`basin_continuation` asks which attractors the inputs actually reach at each `p` and how
much of the input space flows to each, so it sees attractors that appear away from any
branch being followed (a saddle-node pair born elsewhere), and how basins shrink before
an attractor vanishes. What it cannot see: an attractor that no start reaches, and where
exactly between two values of `p` a change happens (for that, `continuation` from a
track's state, whose bisection locates it).

Matching (`BasinContinuationSettings.match`). The attractors at `p[k]` are matched
one-to-one to those present at `p[k - 1]` by one of two rules, each solved as an
assignment problem
(`scipy.optimize.linear_sum_assignment`; after Attractors.jl's `MatchBySSSetDistance`
and `MatchByBasinOverlap`, which match greedily, measure overlap relative to the earlier
basin, and may revive a vanished attractor: here a track that vanished stays ended):

- `"distance"` follows *states*: the pairs of least total RMS distance between energy
  coordinates (the ET's `g = LayerNorm(x)`, where "the same attractor" is meaningful:
  see `basins`); a pair further apart than `distance_tol` is not matched;
- `"overlap"` follows *inputs*: the pairs whose basins share the most starts, by the
  Jaccard index `|A & B| / |A | B|` of the two sets of starts (most total overlap); a
  pair whose index is below `min_overlap` (or that shares no start) is not matched.
  Where every start has an attractor of its own (the shipped ET models), each track is
  then the attractor that one input reaches, however far it moves.

An attractor at `p[k]` left unmatched starts a new track (it *appears* between `p[k -
1]` and `p[k]`); a track left unmatched ends (it *vanishes* there). Where one attractor
splits into two (a pitchfork), one of the two continues its track (the nearer, or the
one sharing more starts; the first in order on a tie) and the other appears. Each
matched step records its `jump`, the RMS distance moved in energy coordinates: a jump
much larger than the track's others means the match joined two different attractors
(set `BasinContinuationSettings.distance_tol`, or take a finer grid of `p`). The
assignment is made first and pairs beyond `distance_tol` dropped after, so a tolerance
can end a track that another assignment would have kept within it.

A value at which no start reaches the fixed-point stop ends the run with
`solvers.SolveError` naming that value (`basins` has nothing to match there); where some
starts fail, `basins`' warning is repeated with the value.
"""

import math
import warnings
from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float

from et_ode import solvers

from .._geometry import energy_coordinates, require
from .._records import metadata
from ._basin_records import (
    BasinContinuation,
    BasinContinuationSettings,
    Basins,
    basin_continuation_record,
)
from ._basins import BASIN_OPTIONS, basins, check_basin_options
from ._continuation import Parameter
from ._energy_field import parameter_function

# What a track keeps of `basins`' attractor at each value where it is present.
ATTRACTOR_KEYS = ("x", "energy", "fraction", "stable", "morse_index", "smallest_eigenvalues")
# The entries of `basins`' metadata kept in the result's (the same at every value).
SOLVE_KEYS = (
    "flow",
    "solver",
    "rtol",
    "atol",
    "fixed_point_atol",
    "t1",
    "match_tol",
    "polish_max",
    "starts",
)
# Per-value summaries of `basins` kept in `steps` (its arrays of per-start data are not:
# the labels are kept as track ids in `labels`).
STEP_KEYS = (
    "not_converged",
    "entropy",
    "batched_iterations",
    "one_by_one_iterations",
    "basin_entropy",
    "token_structure",
)


def _check_values(ps) -> np.ndarray:
    """`ps` as a float array, refused unless it holds at least two finite values in
    strictly increasing or strictly decreasing order."""
    try:
        values = np.asarray(ps, dtype=np.float64) if not isinstance(ps, str) else np.array([])
    except (TypeError, ValueError):
        values = np.array([])
    steps = np.diff(values) if values.ndim == 1 else np.array([])
    if (
        values.ndim != 1
        or values.size < 2
        or not np.all(np.isfinite(values))
        or not (np.all(steps > 0) or np.all(steps < 0))
    ):
        raise ValueError(
            "basin_continuation needs ps, at least two finite parameter values in strictly "
            f"increasing or decreasing order (got {ps!r}): the attractors at each value "
            "are matched to those at the one before."
        )
    return values


def _distances(previous: list[np.ndarray], current: list[np.ndarray]) -> np.ndarray:
    """RMS distances `[len(previous), len(current)]` between energy coordinates."""
    return np.array([[math.sqrt(np.mean((a - b) ** 2)) for b in current] for a in previous])


def _match_distance(previous: list[np.ndarray], current: list[np.ndarray], track_tol: float):
    """`{current index: previous index}` for the one-to-one assignment of least total
    distance, pairs further apart than `track_tol` left out."""
    from scipy.optimize import linear_sum_assignment

    if not previous or not current:
        return {}
    distance = _distances(previous, current)
    rows, columns = linear_sum_assignment(distance)
    return {int(j): int(i) for i, j in zip(rows, columns) if distance[i, j] <= track_tol}


def _match_overlap(previous: np.ndarray, current: np.ndarray, sizes, min_overlap: float):
    """`{current index: previous index}` for the one-to-one assignment of most total
    Jaccard overlap between basins, from the labels per start at the two values
    (`previous`, `current`: attractor indices, `-1` for none; `sizes`: the number of
    attractors at each), pairs below `min_overlap` or sharing no start left out."""
    from scipy.optimize import linear_sum_assignment

    n_previous, n_current = sizes
    if not n_previous or not n_current:
        return {}
    both = (previous >= 0) & (current >= 0)
    shared = np.zeros((n_previous, n_current))
    np.add.at(shared, (previous[both], current[both]), 1)
    size_previous = np.bincount(previous[previous >= 0], minlength=n_previous)
    size_current = np.bincount(current[current >= 0], minlength=n_current)
    jaccard = shared / (size_previous[:, None] + size_current[None, :] - shared)
    rows, columns = linear_sum_assignment(-jaccard)
    return {
        int(j): int(i)
        for i, j in zip(rows, columns)
        if shared[i, j] > 0 and jaccard[i, j] >= min_overlap
    }


def _set(set_parameter, model, args, p):
    """`set_parameter(model, args, p)`, refused in one line unless it returns a pair."""
    result = set_parameter(model, args, p)
    if not (isinstance(result, tuple) and len(result) == 2):
        raise ValueError(
            "parameter must be a function (model, args, p) -> (model, args): a pair; this "
            f"one returned {type(result).__name__}"
            + (f" of length {len(result)}" if isinstance(result, tuple) else "")
            + "."
        )
    return result


def _basins_at(p: float, model, starts, keywords: dict) -> Basins:
    """`basins` at the value `p` (with `keywords`: `args`, `grid_shape`, `polish_first`,
    `options`, `settings`), its failure and warnings naming `p`."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = basins(model, starts, **keywords)
        except solvers.SolveError as error:
            raise solvers.SolveError(
                error.reason, f"basin_continuation at p = {p:g}: {error}", error.stats
            ) from error
    for warning in caught:
        warnings.warn(
            f"basin_continuation at p = {p:g}: {warning.message}", warning.category, stacklevel=3
        )
    return result


def _new_track(track_id: int) -> dict:
    keys = ("index", "p", "jump") + ATTRACTOR_KEYS
    return dict(id=track_id, **{key: [] for key in keys})


def basin_continuation(
    model: solvers.EnergySystem,
    starts: Float[ArrayLike, "B N D"],
    ps: Sequence[float] | Float[ArrayLike, " P"],
    *,
    args: Any = None,
    parameter: Parameter,
    grid_shape: tuple[int, int] | None = None,
    polish_first: Sequence[int] = (),
    options: solvers.SolveOptions = BASIN_OPTIONS,
    settings: BasinContinuationSettings = BasinContinuationSettings(),
) -> BasinContinuation:
    """The basins of `starts` at each parameter value of `ps`, their attractors matched
    into tracks across `p` (module docstring).

    **Arguments:**

    - `model`: a `solvers.EnergySystem` (as for `basins`), at any parameter value:
      `parameter` sets it.
    - `starts`: `[B, N, D]`, the same starts at every `p` (`grid_starts` builds a
      plane of them; fractions are over these).
    - `ps`: `[P]`, at least two parameter values, strictly increasing or decreasing.
    - `args`: the model's conditions.
    - `parameter`: `"beta"` (the attention's inverse temperature), `"memory_scale"`
      (the Hopfield memories scaled by `p`), `"field_strength"` (the conditions'
      external field), or a function `(model, args, p) -> (model, args)`; `p` is
      passed as a 0-d array of the starts' dtype, so a parameter stored as an array
      leaf of the model is traced and every value reuses one compiled solve.
    - `grid_shape`, `polish_first`, `options`: `basins`', the same at every `p`.
    - `settings`: `BasinContinuationSettings`: `basins`' own settings at every `p`
      (`settings.basins`, a `BasinSettings`), and how attractors are matched from one
      value to the next (`match`, `"distance"` or `"overlap"`, module docstring; the
      `distance_tol` of `"distance"`, the `min_overlap` of `"overlap"`).

    **Returns:** a `BasinContinuation` (its fields, and its `Track`s', say what each
    holds).
    """
    require(model, "basin_continuation")
    values = _check_values(ps)
    if not isinstance(settings, BasinContinuationSettings):
        raise TypeError(
            "settings must be an analysis.BasinContinuationSettings (got "
            f"{type(settings).__name__})."
        )
    check_basin_options(options, settings.basins)
    match, track_tol, min_overlap = settings.match, settings.distance_tol, settings.min_overlap
    limit = math.inf if track_tol is None else float(track_tol)
    keywords: dict[str, Any] = dict(grid_shape=grid_shape, polish_first=polish_first)
    keywords.update(options=options, settings=settings.basins)
    set_parameter = parameter_function(model, parameter)
    starts = jnp.asarray(starts)
    if starts.ndim != 3 or starts.shape[0] < 1:
        raise ValueError(f"starts must be [B, N, D] with B >= 1 (got {starts.shape}).")
    dtype = starts.dtype if jnp.issubdtype(starts.dtype, jnp.floating) else jnp.float64
    labels = np.full((values.size, starts.shape[0]), -1)
    tracks: list[dict] = []
    previous: list[tuple[int, np.ndarray]] = []  # (track id, coordinates) at p[k - 1]
    previous_labels = np.full(starts.shape[0], -1)  # attractor index per start there
    steps, counts, events = [], [], []
    last_meta: dict = {}
    for k, p in enumerate(values):
        model_p, args_p = _set(set_parameter, model, args, jnp.asarray(p, dtype))
        result = _basins_at(float(p), model_p, starts, dict(keywords, args=args_p))
        coordinates = [
            np.asarray(energy_coordinates(model_p, jnp.asarray(att["x"]), args_p))
            for att in result["attractors"]
        ]
        found = np.asarray(result["labels"])
        if match == "distance":
            matched = _match_distance([c for _, c in previous], coordinates, limit)
        else:
            sizes = (len(previous), len(coordinates))
            matched = _match_overlap(previous_labels, found, sizes, float(min_overlap))
        current, ids = [], []
        for j, (attractor, point) in enumerate(zip(result["attractors"], coordinates)):
            if j in matched:
                track_id, before = previous[matched[j]]
                jump = math.sqrt(np.mean((before - point) ** 2))
            else:
                track_id, jump = len(tracks), math.nan
                tracks.append(_new_track(track_id))
                if k > 0:
                    events.append(_event("appears", track_id, values, k))
            track = tracks[track_id]
            track["index"].append(k)
            track["p"].append(float(p))
            track["jump"].append(jump)
            for key in ATTRACTOR_KEYS:
                track[key].append(attractor[key])
            current.append((track_id, point))
            ids.append(track_id)
        for track_id, _ in previous:
            if track_id not in ids:
                events.append(_event("vanishes", track_id, values, k))
        labels[k] = np.where(found >= 0, np.asarray(ids + [-1])[found], -1)
        counts.append(len(result["attractors"]))
        steps.append({key: result[key] for key in STEP_KEYS if key in result})
        previous, previous_labels = current, found
        last_meta = result["metadata"]
    fractions = np.zeros((values.size, len(tracks)))
    for track in tracks:
        fractions[track["index"], track["id"]] = track["fraction"]
    # (+ 0.0: one attractor's -0.0 shown as 0)
    entropy = [float(-np.sum(row[row > 0] * np.log(row[row > 0])) + 0.0) for row in fractions]
    record = dict(
        p=values,
        counts=np.asarray(counts),
        labels=labels,
        fractions=fractions,
        entropy=np.asarray(entropy),
        tracks=tracks,
        events=events,
        steps=steps,
        metadata=metadata(
            study="basin_continuation",
            dtype=last_meta["dtype"],
            **{key: last_meta[key] for key in SOLVE_KEYS},
            parameter=parameter if isinstance(parameter, str) else "function",
            p_range=[float(values.min()), float(values.max())],
            values=int(values.size),
            match=match,
            track_tol=None if track_tol is None else float(track_tol),
            min_overlap=float(min_overlap),
        ),
    )
    return basin_continuation_record(record)


def _event(kind: str, track_id: int, values: np.ndarray, k: int) -> dict:
    """A track that appears at `values[k]` or vanishes there (its last value `k - 1`)."""
    return dict(
        kind=kind,
        track=track_id,
        p=float(values[k]),
        between=[float(values[k - 1]), float(values[k])],
    )
