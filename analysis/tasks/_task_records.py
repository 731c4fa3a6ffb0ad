"""The typed results of the image and graph studies: `Overshoot`, `GraphOvershoot`,
`GradientDepth` (per adjoint an `AdjointGradients`, the fixed point's
`ImplicitGradient`, the `AdjointState`), `ImageBasins` (its `ImageAttractor`s, the
`ImagePlane`, the `ImageRandomStarts`) and `ImageBasinContinuation` (a
`BasinContinuation` whose tracks are `ImageTrack`s, without states). Every record is
also a read-only mapping of its keys (`result["mse"] is result.mse`), written to JSON
with the keys the dicts had (`to_json`) and read back typed (`from_json`).

Read back from JSON, a number that was `nan` (JSON has none: `None`) is `nan` again, and
an array is an array even where every entry was `nan`.
"""

import dataclasses
from typing import Any

import numpy as np

from et_ode import solvers

from .._results import Result, optional
from ..landscape import BasinContinuation, BasinEntropy, TrackSummary

# ------------------------------------------------------------------------ overshoot


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Overshoot(Result):
    """A masked-image model's error and energy from the start to far past its horizon
    (`overshoot`), at `T` sample times, over `B` images."""

    times: np.ndarray
    """`[T]`: the sample times (tau): 0, log-spaced times to `t_max`, the horizon among
    them."""
    mse: np.ndarray
    """`[T]`: the masked-patch MSE over all occluded patches of all images (normalised
    pixel units)."""
    mse_per_image: np.ndarray
    """`[B, T]`: each image's masked-patch MSE."""
    energy: np.ndarray
    """`[B, T]`: the core's energy of each image's state."""
    horizon: float
    """The horizon (tau): the model's `dynamics.t1`, or for a fixed-point model the
    median time at which its own stop fired on these images."""
    horizon_kind: str
    """`"t1"` or `"fixed_point"` (which of the two `horizon` is)."""
    t_max: float
    """The last time (`t_max_factor` times the horizon)."""
    mse_at_horizon: float
    """`mse` at the sample time nearest the horizon."""
    mse_at_end: float
    """`mse` at `t_max`."""
    best_time: float
    """The sample time of the lowest `mse`."""
    best_mse: float
    """The lowest `mse` over the sample times."""
    solve_options: dict
    """The `solvers.solve` options of the run past the horizon (without its `t1` and its
    stop)."""
    metadata: dict
    """What produced it (study, dtype, `t_max_factor`, the horizon, images, solve
    options, the fixed-point stop of the horizon, units, versions)."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class GraphOvershoot(Result):
    """A node anomaly detector's test AUC and energy from the start to far past its
    training horizon (`graph_overshoot`), at `T` sample times."""

    times: np.ndarray
    """`[T]`: the sample times (tau): 0, log-spaced times to `t_max`, the horizon among
    them."""
    auc: np.ndarray
    """`[T]`: the ROC AUC of the readout on the scored nodes at each time."""
    energy: np.ndarray
    """`[T]`: the core's energy of the graph's state."""
    horizon: float
    """The training horizon, the model's `dynamics.t1` (tau)."""
    t_max: float
    """The last time (`t_max_factor` times the horizon)."""
    auc_at_horizon: float
    """`auc` at the sample time nearest the horizon."""
    auc_at_end: float
    """`auc` at `t_max`."""
    best_time: float
    """The sample time of the highest `auc`."""
    best_auc: float
    """The highest `auc` over the sample times."""
    solve_options: dict
    """The `solvers.solve` options of the run (without its `save`)."""
    metadata: dict
    """What produced it (study, dtype, `t_max_factor`, horizon, `t_max`, node counts,
    solve options, versions)."""


# ------------------------------------------------------------------ gradient depth


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class AdjointGradients(Result):
    """One adjoint's gradients at each of the `H` horizons of `gradient_depth` (`nan`
    where the horizon was skipped)."""

    grad_norm: np.ndarray
    """`[H]`: the L2 norm of the loss's gradient with respect to every parameter."""
    x0_grad_norm: np.ndarray
    """`[H]`: the norm of `dL/dx0` (the gradient with respect to the initial state: the
    encoder's output for an image model)."""
    loss: np.ndarray
    """`[H]`: the loss."""
    skipped: list
    """`[H]`: why the horizon was skipped (backsolve beyond
    `solvers.BACKSOLVE_STABLE_HORIZON`), or `None` where it was computed."""
    ratio: float
    """`grad_norm` at the longest horizon computed over that at the shortest (`nan`
    with fewer than two computed)."""
    x0_ratio: float
    """The same ratio of `x0_grad_norm`."""
    vanishes: bool | None
    """Whether `ratio` is below `vanish_threshold` (`None` where it is `nan`)."""
    last_grad: np.ndarray | None
    """`[n_params]`: the flat parameter gradient at the longest horizon computed (`None`
    where none was); left out of the command line's files."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ImplicitGradient(Result):
    """The implicit adjoint's gradient at the fixed point of the projected flow
    (`gradient_depth`, horizon-free: the solve runs to a `FixedPointStop`)."""

    grad_norm: float
    """The norm of the parameter gradient there."""
    x0_grad_norm: float
    """The norm of `dL/dx0` there (small: the fixed point forgets its start)."""
    loss: float
    """The loss there."""
    t_final: np.ndarray
    """`[B]` (or a scalar): the time at which the fixed-point stop fired."""
    residual_rms: np.ndarray
    """`[B]` (or a scalar): RMS G where it fired."""
    options: dict
    """The fixed-point solve's options (its `stop` as a dict)."""
    relative_difference_to_checkpoint: float | None = optional()
    """With the checkpoint adjoint among those measured: the relative distance from its
    gradient at the longest horizon (small once that horizon has converged)."""
    checkpoint_grad_norm: float | None = optional()
    """With `check_implicit`: the norm of the checkpoint gradient through the same solve
    run without the stop to `checkpoint_t1`."""
    checkpoint_t1: float | None = optional()
    """With `check_implicit`: that run's end, twice the stop time."""
    relative_difference: float | None = optional()
    """With `check_implicit`: the relative distance between the implicit gradient and
    that checkpoint gradient."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class AdjointState(Result):
    """The adjoint state `dL/dx(s)` at `S` split times `s` of the checkpoint solve to the
    longest horizon (`gradient_depth`): its decay towards `s = 0` is the vanishing of
    the gradient with respect to the input."""

    times: np.ndarray
    """`[S]`: the split times `s` (tau)."""
    grad_norm: np.ndarray
    """`[S]`: the norm of `dL/dx(s)`."""
    scaled_grad_norm: np.ndarray
    """`[S]`: the norm of `(s_A / gamma) dL/dx_A(s)`, which removes the `1 / s_A` that
    the growth of x on the native flow alone puts into `dL/dx`."""
    horizon: float
    """The horizon the loss is taken at (the longest)."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class GradientDepth(Result):
    """Gradient norms against horizon (the depth) for each adjoint, and the adjoint state
    along the longest trajectory (`gradient_depth`), at `H` horizons."""

    horizons: np.ndarray
    """`[H]`: the horizons `T` (tau)."""
    steps: np.ndarray | None
    """`[H]`: the step counts `T / dt0` with constant steps; `None` with adaptive ones."""
    adjoints: dict[str, AdjointGradients]
    """Per adjoint measured against horizon (`"checkpoint"`, `"backsolve"`), its
    gradients."""
    adjoint_state: AdjointState
    """`dL/dx(s)` along the checkpoint solve to the longest horizon."""
    avoids_vanishing: list[str]
    """The adjoints whose parameter gradient did not vanish, as measured here."""
    summary: list[str]
    """One sentence per adjoint (and the adjoint state), from the numbers."""
    metadata: dict
    """What produced it (study, dtype, seeds, the solve, adjoints, `vanish_threshold`,
    model, batch, norms, versions)."""
    implicit: ImplicitGradient | None = optional()
    """With `"implicit"` among the adjoints: the gradient at the fixed point."""


def gradient_depth_record(result: dict) -> GradientDepth:
    """The typed `GradientDepth` from the dict that `gradient_depth` built."""
    typed = dict(
        result,
        adjoints={name: AdjointGradients(**rec) for name, rec in result["adjoints"].items()},
        adjoint_state=AdjointState(**result["adjoint_state"]),
    )
    if "implicit" in result:
        typed["implicit"] = ImplicitGradient(**result["implicit"])
    return GradientDepth(**typed)


# ------------------------------------------------------------------- image basins


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ImageAttractor(Result):
    """An attractor of `image_basins`: `basins`' `Attractor` without its state, count and
    fraction, with its fractions of the plane and of the random starts, and its image
    where it was polished."""

    polished: bool
    """Whether Newton polished it (`Attractor.polished`)."""
    residual_rms: float
    """RMS G at its state."""
    energy: float
    """E at its state."""
    gradient: bool | None
    """`Attractor.gradient`: whether the residual's Jacobian is symmetric there (`None`
    where it was not polished)."""
    asymmetry: float | None
    """`Attractor.asymmetry`."""
    morse_index: int | None
    """`Attractor.morse_index`: the tangent Hessian's negative eigenvalues among the `k`
    smallest."""
    smallest_eigenvalues: np.ndarray | None
    """`[k]`: `Attractor.smallest_eigenvalues`, ascending."""
    flow_eigenvalues: np.ndarray | None
    """`[k]` complex: `Attractor.flow_eigenvalues` (only where the residual is no
    gradient)."""
    stable: bool | None
    """`Attractor.stable`."""
    start: int
    """The start whose end state represents it (an index into the plane's starts, then
    the random ones)."""
    plane_fraction: float
    """Its basin's share of the plane's starts."""
    random_fraction: float
    """Its basin's share of the random starts."""
    decoded_image: np.ndarray | None
    """`[S, S, C]` in [0, 1]: its state decoded as an image, where it was polished (a
    polished attractor is a fixed point; decoding only those bounds the result's size
    when every start has its own); else `None`."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ImagePlane(Result):
    """The basins on the plane through the two images' encodings (`image_basins`), an
    `R x R` grid of `(a, b)`."""

    labels_grid: np.ndarray
    """`[R, R]`: the attractor each start reached (an index into `attractors`; `-1`: no
    fixed point), `a` down the rows."""
    a: np.ndarray
    """`[R]`: the coordinate along `u` (the rows)."""
    b: np.ndarray
    """`[R]`: the coordinate along `v` (the columns)."""
    image_points: dict
    """The two images' `(a, b)`: `{"image 0": [1, 0], "image 1": [-1, 0]}`."""
    fractions: np.ndarray
    """`[A]`: each attractor's share of the plane's starts."""
    not_converged: int
    """The plane's starts that reached no fixed point."""
    basin_entropy: BasinEntropy
    """The basin entropy of `labels_grid`."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ImageRandomStarts(Result):
    """The basins of `image_basins`' `M` random starts."""

    labels: np.ndarray
    """`[M]`: the attractor each reached (`-1`: no fixed point)."""
    fractions: np.ndarray
    """`[A]`: each attractor's share of the random starts."""
    distinct: int
    """The attractors they reached."""
    not_converged: int
    """The random starts that reached no fixed point."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ImageBasins(Result):
    """The basins of a `MaskedImageET`'s core on the plane through two images and on
    random starts (`image_basins`): the `A` attractors, in order of first appearance."""

    attractors: list[ImageAttractor]
    """The `A` attractors."""
    plane: ImagePlane
    """The plane's basins."""
    random: ImageRandomStarts
    """The random starts' basins."""
    token_structure: dict
    """`basins`' `token_structure`: the polished attractors' token states and token
    permutations (indices into `attractors`)."""
    batched_iterations: int
    """The batched solve's sequential steps (the largest step count of any start)."""
    one_by_one_iterations: int
    """Their sum: what solving the starts one by one would run in sequence."""
    stop_reasons: dict[str, int]
    """How many starts stopped for each reason (`"fixed_point"`, ...)."""
    metadata: dict
    """What produced it (`basins`' solve settings, resolution, random starts, extent,
    seed, versions)."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ImageTrack(TrackSummary):
    """A track of `image_basin_continuation`: `basin_continuation`'s `Track` without its
    states (`x`), at each of the `n` values where it is present."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ImageBasinContinuation(BasinContinuation):
    """`basin_continuation` from one held-out image's start and random starts
    (`image_basin_continuation`): its tracks without their states, and the track the
    image's own start reaches at each of the `P` values."""

    tracks: list[ImageTrack]  # type: ignore[assignment]
    """The `T` tracks, in order of first appearance, without their states."""
    image_track: np.ndarray
    """`[P]`: the track the image's start reaches at each value (`-1` where it reached
    no fixed point); the metadata also has `random_starts` and `seed`."""


def image_basin_continuation_record(
    result: BasinContinuation, **added: Any
) -> ImageBasinContinuation:
    """The typed `ImageBasinContinuation` from `basin_continuation`'s result: its tracks
    without their states, and `added` (`image_track`, `metadata`)."""
    tracks = [ImageTrack(**{k: v for k, v in t.items() if k != "x"}) for t in result.tracks]
    return ImageBasinContinuation(**dict(result, tracks=tracks, **added))


def recorded_options(options: solvers.SolveOptions, **extra: Any) -> dict[str, Any]:
    """The solve options as a task study's result and files record them: `solver`, `dt0`,
    `t1` where given, `rtol`, `atol`, `flow`, `adjoint` where given, `max_steps`, `stop`
    where given (the keys and the order the results always had), then a step-size
    controller and `dtmin` only when set."""
    unknown = set(extra) - {"t1", "adjoint", "stop"}
    if unknown:
        raise TypeError(f"recorded_options takes t1, adjoint and stop (got {sorted(unknown)}).")
    keywords = dict(solver=options.solver, dt0=options.dt0)
    if "t1" in extra:
        keywords["t1"] = extra["t1"]
    keywords.update(rtol=options.rtol, atol=options.atol, flow=options.flow)
    if "adjoint" in extra:
        keywords["adjoint"] = extra["adjoint"]
    keywords["max_steps"] = options.max_steps
    if "stop" in extra:
        keywords["stop"] = extra["stop"]
    for name in ("stepsize_controller", "dtmin"):
        if getattr(options, name) is not None:
            keywords[name] = getattr(options, name)
    return keywords
