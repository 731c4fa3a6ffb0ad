"""The typed results of `basins` (`Basins`, each attractor an `Attractor`), of
`basin_entropy` (`BasinEntropy`) and of `basin_continuation` (`BasinContinuation`, each
attractor followed across the parameter a `Track`). Every record is also a read-only
mapping of its keys (`result["labels"] is result.labels`), written to JSON with the keys
the dicts had (`to_json`) and read back typed (`from_json`).

Their settings are here too: `BasinSettings` (what `basins` does with the end states,
and the integration's horizon and stop) and `BasinContinuationSettings` (those at every
value of the parameter, and how `basin_continuation` matches attractors from one value
to the next)."""

import dataclasses
from typing import Literal

import numpy as np

from .._common import is_count, is_real
from .._results import Result, optional
from .._settings import NewtonSettings, Settings, at_least, positive
from ._critical_points import POLISH_NEWTON


@dataclasses.dataclass(frozen=True)
class BasinSettings(Settings):
    """What `basins` (and `basin_continuation` at every value) does beyond the solve
    itself, which is its `options`.

    - `fixed_point_atol`: the solve's stop, RMS G at most this (the model's units,
      default 1e-5).
    - `t1`: the horizon (time units of the model, `tau` on the ET; default 1e4): a start
      that has not reached the stop by then is labelled `-1`.
    - `distance_tol`: the RMS distance in the energy's coordinates within which two end
      states are one attractor (default 1e-3). An end state lies about
      `fixed_point_atol` over the smallest rate of the flow from its fixed point, so a
      loose stop needs a looser `distance_tol`; attractors whose polished points then
      lie within `distance_tol` of each other are merged into one.
    - `polish`: each attractor's representative (its first end state) is polished by
      Newton (`NewtonSettings`; `polish_near`: `solvers.find_fixed_point`, in float64
      where it is available, kept only within 1e-3 of the end state) to RMS G at most
      `newton_tol` (default 1e-10; `None`: 1e-10 with float64, else 1e-5) in at most
      `max_newton` iterations (default 100) before its energy and Hessian are taken;
      `matrix_free`: `None` dense up to `solvers.DENSE_MAX` state entries and
      GMRES above, `True` GMRES, `False` dense (no `preconditioner`: an energy model's
      Newton takes none). Where the polish fails, the attractor has no Morse index.
    - `polish_max`: polish only the representatives of this many attractors (an integer
      >= 0; `None`, the default: all): those of `basins`' `polish_first` starts, then the
      most visited, the lowest energy first among equals. A landscape with a minimum per
      start (the shipped models: see the landscape page) has as many attractors as
      starts, and each polish and Hessian is a Newton-Krylov solve and a Lanczos run.
    - `k`: Hessian eigenvalues computed per attractor (an integer >= 1, default 4:
      `hessian_eigenvalues`, by Lanczos to `MORSE_LANCZOS_TOL` of the Hessian's norm
      above its dense size; its Morse index counts up to `k` negative ones), or, where
      the residual is not a gradient, eigenvalues of the flow's Jacobian (those of
      largest real part).
    - `box`: with a grid of starts, the basin entropy's boxes are `box x box` starts (an
      integer >= 1, default 5).
    """

    fixed_point_atol: float = 1e-5
    t1: float = 1e4
    distance_tol: float = 1e-3
    polish: NewtonSettings = POLISH_NEWTON
    polish_max: int | None = None
    k: int = 4
    box: int = 5

    def check(self) -> None:
        for name in ("fixed_point_atol", "t1", "distance_tol"):
            positive(self, name)
        if not isinstance(self.polish, NewtonSettings):
            raise TypeError(
                "BasinSettings.polish must be an analysis.NewtonSettings (got "
                f"{type(self.polish).__name__}): NewtonSettings(newton_tol=...)."
            )
        if self.polish.preconditioner is not None:
            raise ValueError(
                "BasinSettings.polish takes no preconditioner (an energy model's Newton "
                "has none): drop it."
            )
        if self.polish_max is not None and not is_count(self.polish_max, 0):
            raise ValueError(
                "BasinSettings.polish_max must be an integer >= 0 or None (all) (got "
                f"{self.polish_max!r})."
            )
        for name in ("k", "box"):
            if not is_count(getattr(self, name), 1):
                at_least(self, name, 1)


@dataclasses.dataclass(frozen=True)
class BasinContinuationSettings(Settings):
    """How `basin_continuation` finds the basins at each value of the parameter
    (`basins`, the same `BasinSettings` at every value) and matches the attractors at one
    value to those at the value before (its module docstring).

    - `match`: `"distance"` (default: follow the attractors' states) or `"overlap"`
      (follow the inputs: basins sharing starts).
    - `distance_tol`: with `"distance"`, the largest RMS distance (energy coordinates)
      between an attractor at one value and its continuation at the next; `None`, the
      default: no limit (as Attractors.jl's default), the assignment of least total
      distance decides. Refused with `"overlap"`. (Not `basins.distance_tol`, within
      which two end states at one value are one attractor.)
    - `min_overlap`: with `"overlap"`, the least Jaccard index (0 to 1) of the two basins
      of a matched pair; 0, the default: any shared start. Only 0 with `"distance"`.
    - `basins`: `basins`' settings at every value (`BasinSettings`).
    """

    match: Literal["distance", "overlap"] = "distance"
    distance_tol: float | np.floating | None = None
    min_overlap: float | np.floating = 0.0
    basins: BasinSettings = BasinSettings()

    def check(self) -> None:
        name, tol = "BasinContinuationSettings", self.distance_tol
        if self.match not in ("distance", "overlap"):
            raise ValueError(f'{name}.match must be "distance" or "overlap" ({self.match!r}).')
        if tol is not None and not (is_real(tol) and 0 < float(tol) < np.inf):
            raise ValueError(f"{name}.distance_tol must be a distance > 0 or None ({tol!r}).")
        if not (is_real(self.min_overlap) and 0 <= float(self.min_overlap) <= 1):
            raise ValueError(
                f"{name}.min_overlap must be a fraction in [0, 1] (got {self.min_overlap!r})."
            )
        if self.match == "overlap" and tol is not None:
            raise ValueError(
                f'{name}.distance_tol is a distance for match="distance": drop it, or use '
                "min_overlap."
            )
        if self.match == "distance" and float(self.min_overlap) != 0:
            raise ValueError(
                f'{name}.min_overlap is for match="overlap": drop it, or use distance_tol.'
            )
        if not isinstance(self.basins, BasinSettings):
            raise TypeError(
                f"{name}.basins must be an analysis.BasinSettings (got "
                f"{type(self.basins).__name__})."
            )


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class BasinEntropy(Result):
    """The basin entropy of a grid of labels (`basin_entropy`; Daza et al., Sci. Rep. 6,
    31416, 2016): the Shannon entropy of the basins in each `box x box` box of starts,
    averaged (nats)."""

    S_b: float
    """The mean entropy over all boxes."""
    S_bb: float
    """The mean entropy over the boxes that hold more than one basin (0 where there is
    none): above `log 2`, fractal boundaries."""
    boxes: int
    """The boxes that cover the grid (a remainder at its edge left out)."""
    boundary_boxes: int
    """The boxes that hold more than one basin."""
    box: int
    """The side of a box, in starts."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Attractor(Result):
    """A fixed point that starts of `basins` reach, and its basin. Its stability is known
    where it was polished (the verdict is taken at a fixed point, not where the flow's
    stop fired): `gradient`, `asymmetry`, `morse_index`, `smallest_eigenvalues`,
    `flow_eigenvalues` and `stable` are all `None` where it was not (`polish_max`) or
    the polish failed."""

    x: np.ndarray
    """`[N, D]`: its state, polished (`polished`), else the end state of its first start."""
    polished: bool
    """Whether Newton polished it (to `BasinSettings.polish.newton_tol`)."""
    residual_rms: float
    """RMS G at `x`."""
    energy: float
    """E at `x`."""
    count: int
    """The starts in its basin."""
    fraction: float
    """Its basin's share of all the starts (`count / B`)."""
    gradient: bool | None
    """Whether the residual's Jacobian at `x` is symmetric, as the gradient of an
    energy's is (`hessian_eigenvalues`' `asymmetry` at most `GRADIENT_ASYMMETRY`)."""
    asymmetry: float | None
    """`hessian_eigenvalues`' `asymmetry` at `x` (`|A - A^T|_F / |A|_F`)."""
    morse_index: int | None
    """The tangent Hessian's negative eigenvalues among the `k` smallest (`None` where the
    residual is no gradient)."""
    smallest_eigenvalues: np.ndarray | None
    """`[k]`: the tangent Hessian's smallest eigenvalues, ascending (`None` where the
    residual is no gradient)."""
    flow_eigenvalues: np.ndarray | None
    """`[k]` complex: only where the residual is no gradient, the eigenvalues of largest
    real part of the Jacobian of `flow` (on a model with a manifold, of its projected
    flow in the manifold's coordinates: `flow_eigenvalues`); else `None`."""
    stable: bool | None
    """Morse index 0, or (no gradient) every real part of `flow_eigenvalues` negative."""
    start: int
    """The start whose end state represents it (an index into the starts)."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Basins(Result):
    """Which fixed point each of `B` starts flows to (`basins`): the `A` distinct
    attractors, in order of first appearance, and their basins."""

    labels: np.ndarray
    """`[B]`: the attractor each start reached (an index into `attractors`; `-1`: its
    solve did not reach the fixed-point stop)."""
    attractors: list[Attractor]
    """The `A` attractors, in order of first appearance."""
    fractions: np.ndarray
    """`[A]`: each attractor's basin fraction."""
    not_converged: int
    """The starts labelled `-1`."""
    entropy: float
    """The Shannon entropy of `fractions` (nats)."""
    batched_iterations: int
    """The compiled program's sequential steps: the largest step count of any start."""
    one_by_one_iterations: int
    """Their sum: what solving the starts one by one would run in sequence."""
    stop_reasons: list[str]
    """`[B]`: why each start's solve stopped (`"fixed_point"` where it reached the stop)."""
    x_final: np.ndarray
    """`[B, N, D]`: each start's end state."""
    token_structure: dict
    """`token_structure` of the polished attractors (within `distance_tol`): `token_states`,
    `tokens`, `permutations` (pairs of attractor indices), `tol`."""
    metadata: dict
    """What produced it (study, dtype, flow, solver, tolerances, versions)."""
    labels_grid: np.ndarray | None = optional()
    """With `grid_shape`: `[G1, G2]`, `labels` on the grid."""
    basin_entropy: BasinEntropy | None = optional()
    """With `grid_shape`: the basin entropy of `labels_grid` (boxes of `box x box`)."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class TrackSummary(Result):
    """An attractor of `basin_continuation` followed across the parameter, without its
    states: its entries at each of the `n` values where it is present, in order of `p`
    (lists; numpy arrays where they are read back from JSON). Its energy, fraction and
    stability are those of `basins`' `Attractor` there."""

    id: int
    """The track's number (its column in `BasinContinuation.fractions`), in order of
    first appearance."""
    index: list | np.ndarray
    """`[n]`: where it is present, as indices into `BasinContinuation.p`."""
    p: list | np.ndarray
    """`[n]`: the parameter there."""
    jump: list | np.ndarray
    """`[n]`: the RMS distance (energy coordinates) from its state at the value before;
    `nan` where it appears."""
    energy: list | np.ndarray
    """`[n]`: E there."""
    fraction: list | np.ndarray
    """`[n]`: its basin fraction."""
    stable: list | np.ndarray
    """`[n]`: `Attractor.stable` (`None` where unknown)."""
    morse_index: list | np.ndarray
    """`[n]`: `Attractor.morse_index` (`None` where unknown)."""
    smallest_eigenvalues: list | np.ndarray
    """`[n, k]`: `Attractor.smallest_eigenvalues` (`None` where unknown)."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Track(TrackSummary):
    """A `TrackSummary` with its states: what `basin_continuation` returns per track."""

    x: list | np.ndarray
    """`[n, N, D]`: its polished state."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class BasinContinuation(Result):
    """The basins of `B` starts at each of `P` parameter values (`basin_continuation`),
    their attractors matched into `T` tracks across `p`."""

    p: np.ndarray
    """`[P]`: the parameter values."""
    counts: np.ndarray
    """`[P]`: the attractors found at each value."""
    labels: np.ndarray
    """`[P, B]`: the track each start reached (`-1`: it did not reach the fixed-point
    stop)."""
    fractions: np.ndarray
    """`[P, T]`: each track's basin fraction (0 where it is absent)."""
    entropy: np.ndarray
    """`[P]`: the Shannon entropy of the fractions (nats)."""
    tracks: list[Track]
    """The `T` tracks, in order of first appearance."""
    events: list[dict]
    """`{"kind": "appears" or "vanishes", "track", "p", "between"}` in order of `p`:
    `between` the two values the change lies between, `p` the first value where it
    shows."""
    steps: list[dict]
    """`[P]`: `basins`' summaries at each value (`not_converged`, `entropy`,
    `batched_iterations`, `one_by_one_iterations`, `token_structure`, and
    `basin_entropy` for a grid)."""
    metadata: dict
    """What produced it (with `basins`' solve settings, `parameter`, `match`,
    `track_tol` (the tracking's `distance_tol`), `min_overlap`)."""


def basins_record(result: dict) -> Basins:
    """The typed `Basins` from the dict that `basins` built."""
    return Basins(**dict(result, attractors=[Attractor(**a) for a in result["attractors"]]))


def basin_continuation_record(result: dict) -> BasinContinuation:
    """The typed `BasinContinuation` from the dict that `basin_continuation` built."""
    return BasinContinuation(**dict(result, tracks=[Track(**t) for t in result["tracks"]]))
