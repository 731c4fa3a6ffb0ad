"""The landscape studies of the command line (`et-ode study continuation`, `et-ode
study basins`, `et-ode study basin-continuation`, `et-ode study lyapunov-spectrum`):
runners `(model, images, masks, settings) -> (result, plot)` like those of
`._study_runners`, on the first held-out image's core problem (basins: the first two
images') in float64 (or `--dtype`)."""

import jax
import jax.numpy as jnp
import numpy as np

from et_ode import solvers as _solvers

from ..analysis import (
    BASIN_OPTIONS,
    LYAPUNOV_OPTIONS,
    BasinContinuationSettings,
    BasinSettings,
    ContinuationSettings,
    LyapunovSpectrumSettings,
    NewtonSettings,
    continuation,
    image_basin_continuation,
    image_basins,
    lyapunov_spectrum,
    model_dtype,
    plot_basin_continuation,
    plot_continuation,
    plot_image_basins,
    plot_lyapunov_spectrum,
    take,
)
from ._study_runners import (
    STABILITY_START,
    _core_problem,
    _first,
    _fixed_point,
    _given,
    start_steps,
)

# Over which range of the parameter continuation follows the fixed point (what it
# follows by default: `COMMANDS["continuation"]`), as multiples of its trained value
# (`trained_value`): beta over a decade around it.
DEFAULT_P_SPANS = {"memory_scale": (0.5, 2.0), "field_strength": (0.5, 2.0), "beta": (0.3, 3.0)}
# basin-continuation: over which range (as multiples of the trained value) it follows
# the attractors: beta over two decades, where one global attractor gives way to one
# per start on the shipped models (docs: the landscape).
BASIN_P_SPANS = {"memory_scale": (0.5, 2.0), "field_strength": (0.5, 2.0), "beta": (0.1, 10.0)}


def trained_value(model, parameter: str) -> float:
    """The value of `parameter` at the trained model: its attention's beta for "beta",
    its external field's strength for "field_strength" (`p` sets both), 1 for
    "memory_scale" (the memories as trained, scaled by `p`)."""
    if parameter == "beta":
        return float(model.core.attention.beta)
    if parameter == "field_strength":
        return float(model.field_strength)
    return 1.0


def _check_trained(parameter: str, p0: float) -> None:
    """Refuse a parameter whose trained value is 0 (a model without an external field
    has field strength 0): the default range is multiples of it."""
    if p0 <= 0:
        raise ValueError(
            f"this model's {parameter} is {p0:g} (a model without an external field has "
            "field strength 0), so it has no range of multiples around it: use "
            "--parameter beta or memory_scale."
        )


def _start(model, images, masks, s):
    """The first image's fixed point of the projected flow, polished by Newton (as the
    stability study's), its core problem and how it was found."""
    core, x0, args, dtype = _core_problem(model, images[:1], _first(masks), s)
    args0 = take(args, 0, True)
    x_star, start = _fixed_point(
        model, core, x0[0], args0, s, dtype, tol=STABILITY_START, steps=start_steps(model, s, dtype)
    )
    polished = _solvers.find_fixed_point(
        core, x_star, args=args0, method="newton", linear="auto", tol=_newton_tol(dtype)
    )
    start["polished_residual_rms"] = float(polished.residual_rms)
    if not bool(polished.success):
        raise ValueError(
            "continuation: Newton did not polish the start into a fixed point "
            f"(RMS G {float(polished.residual_rms):.3g} after "
            f"{int(polished.steps)} iterations); try --solver with tighter "
            "--rtol."
        )
    return core, polished.x, args0, dtype, start


def _newton_tol(dtype) -> float:
    """RMS G to which Newton polishes and continuation corrects: 1e-9 in float64, 1e-4 in
    float32 (its round-off stops Newton above 1e-6)."""
    return 1e-9 if jnp.dtype(dtype) == jnp.float64 else 1e-4


def _without_states(branch: dict) -> dict:
    """A branch without its states (4,096 numbers a point on the shipped models): the
    JSON keeps `p`, eigenvalues, stability and the bifurcations' parameters."""
    kept = {k: v for k, v in branch.items() if k not in ("x", "y")}
    kept["bifurcations"] = [
        {k: v for k, v in b.items() if k not in ("x", "y")} for b in branch["bifurcations"]
    ]
    return kept


def _continuation(model, images, masks, s):
    """The first image's fixed point followed in `--parameter` (default the memory scale)
    both ways from its trained value (`trained_value`) across
    `--p-span` (default 0.5 to 2 times the trained value, 0.3 to 3 for beta), with the
    `k` leading eigenvalues (quick: 2, else 6) at every point and the bifurcations; at
    most 8 points each way in quick mode, else 100."""
    parameter = _given(s, "continuation", "parameter")
    p0 = trained_value(model, parameter)
    _check_trained(parameter, p0)
    p_span = s.p_span or tuple(p0 * f for f in DEFAULT_P_SPANS[parameter])
    if not p_span[0] < p0 < p_span[1]:
        raise ValueError(
            f"--p-span {p_span[0]:g},{p_span[1]:g} must contain the trained "
            f"value of {parameter}, {p0:g}."
        )
    core, x_star, args0, dtype, start = _start(model, images, masks, s)
    step = 0.05 * p0
    settings = ContinuationSettings(
        ds=step,
        ds_max=4 * step,
        k=2 if s.quick else 6,
        max_points=8 if s.quick else 100,
        newton=NewtonSettings(newton_tol=_newton_tol(dtype)),
    )
    branches = []
    for d in (1, -1):  # how far the fixed point moves (the states are not kept)
        branch = continuation(
            core,
            x_star,
            p0,
            p_span=tuple(p_span),
            args=args0,
            parameter=parameter,
            settings=settings.replace(direction=d),
        )
        moved = np.asarray(branch.x) - np.asarray(x_star)[None]
        distance = np.sqrt(np.mean(moved.reshape(len(moved), -1) ** 2, axis=1))
        branches.append(dict(branch, distance=distance))
    p_reached = [float(np.max(branches[0]["p"])), float(np.min(branches[1]["p"]))]
    result = dict(
        branches=[_without_states(b) for b in branches],
        labels=[f"p > {p0:.3g}", f"p < {p0:.3g}"],
        parameter=parameter,
        trained_value=p0,
        p_span=list(p_span),
        p_reached=p_reached,
        start=start,
        bifurcations=[
            dict(
                kind=b["kind"],
                p=b["p"],
                located=b["located"],
                eigenvalue_jump=b.get("eigenvalue_jump"),
            )
            for branch in branches
            for b in branch["bifurcations"]
        ],
        largest_residual_rms=float(max(np.max(b["fixed_point_residual_rms"]) for b in branches)),
        metadata=dict(branches[0]["metadata"], flow="projected"),
    )
    return result, _plot_branches


def _plot_branches(result, path=None):
    return plot_continuation(
        result["branches"],
        path,
        labels=result["labels"],
        observable="distance",
        observable_label="RMS distance from the trained fixed point",
    )


def _basins_dtype(model, s) -> str:
    """The basin studies' dtype: `--dtype`, else float64, or the model's own (with its
    own steps, `StudySettings.steps`) at the authors' size with `--quick`."""
    return s.dtype or (str(model_dtype(model.core)) if s.economical(model) else "float64")


def _basins(model, images, masks, s):
    """The basins of the first image's core problem (`analysis.image_basins`): a plane
    through the first two held-out images (quick: 8 x 8 starts, else 64 x 64) and
    random starts (quick: 16, else 1,000), integrated together to fixed points of the
    projected flow in float64 (or `--dtype`; at the authors' size with `--quick`, the
    model's own dtype) with the studies' steps (`StudySettings.steps`) to RMS G
    `fixed_point_tol`, attractors matched within 1e-2 (quick) or 1e-3 in g, the 4
    (quick) or 16 most visited polished by Newton (the shipped models have about one
    minimum per start), each decoded as an image."""
    if len(images) < 2:
        raise ValueError(
            "study basins needs two held-out images (the plane goes through "
            "both): pass --images 2 or more."
        )
    dtype = _basins_dtype(model, s)
    result = image_basins(
        model,
        images[:2],
        jax.tree.map(lambda a: a[:2], masks),
        resolution=8 if s.quick else 64,
        random_starts=16 if s.quick else 1000,
        seed=s.seed,
        dtype=jnp.dtype(dtype),
        options=BASIN_OPTIONS.replace(**s.steps(model, dtype)),
        settings=BasinSettings(
            fixed_point_atol=s.fixed_point_tol(dtype),
            distance_tol=1e-2 if s.quick else 1e-3,
            polish_max=4 if s.quick else 16,
            t1=_given(s, "basins", "horizon"),
            k=2 if s.quick else 4,
        ),
    )
    return result, plot_image_basins


def _basin_continuation(model, images, masks, s):
    """The attractors reached from the first image's own start and from random starts
    (quick: 8, else 64) under its conditions (`analysis.image_basin_continuation`),
    followed across `--parameter` (default beta) at values spaced evenly in `log p`
    over `--p-span` (default 0.1 to 10 times the trained value for beta, 0.5 to 2 for
    the others; quick: 7 values, else 25), the trained value among them; tracks
    matched by basin overlap (the shipped models have about one minimum per start);
    the solves as `study basins`' (float64 unless `--dtype`, the studies' steps to RMS
    G `fixed_point_tol`, attractors matched within 1e-2 (quick) or 1e-3 in g); without
    `--quick` the image's own attractor is polished by Newton at each value and its
    Morse index taken (with `--quick` none is: energies at the end states, stability
    not known)."""
    parameter = _given(s, "basin-continuation", "parameter")
    p0 = trained_value(model, parameter)
    _check_trained(parameter, p0)
    p_span = s.p_span or tuple(p0 * f for f in BASIN_P_SPANS[parameter])
    if not (0 < p_span[0] < p0 < p_span[1]):
        raise ValueError(
            f"--p-span {p_span[0]:g},{p_span[1]:g} must be positive and contain the trained "
            f"value of {parameter}, {p0:g} (its values are spaced evenly in log p)."
        )
    values = np.geomspace(p_span[0], p_span[1], 7 if s.quick else 25)
    nearest = int(np.argmin(np.abs(values - p0)))
    if abs(values[nearest] - p0) <= 1e-9 * p0:  # the trained value itself, not a rounding
        values[nearest] = p0
    values = np.unique(np.append(values, p0))  # sorted, the trained value one of them
    dtype = _basins_dtype(model, s)
    result = image_basin_continuation(
        model,
        images[:1],
        jax.tree.map(lambda a: a[:1], masks),
        values,
        parameter=parameter,
        random_starts=8 if s.quick else 64,
        seed=s.seed,
        dtype=jnp.dtype(dtype),
        options=BASIN_OPTIONS.replace(**s.steps(model, dtype)),
        settings=BasinContinuationSettings(
            match="overlap",
            basins=BasinSettings(
                fixed_point_atol=s.fixed_point_tol(dtype),
                distance_tol=1e-2 if s.quick else 1e-3,
                # each polish takes a Lanczos run for the Morse index (seconds to minutes)
                polish_max=0 if s.quick else 1,
                t1=_given(s, "basin-continuation", "horizon"),
                k=2 if s.quick else 4,
            ),
        ),
    )
    # a new dict: the typed result is read-only
    result = dict(result, parameter=parameter, trained_value=p0, p_span=[float(p) for p in p_span])
    return result, _plot_basin_tracks


def _plot_basin_tracks(result, path=None):
    return plot_basin_continuation(
        result, path, reference=result["trained_value"], reference_label="trained"
    )


def _lyapunov_spectrum(model, images, masks, s):
    """The top `k` Lyapunov exponents (quick: 4, else 8) of the first image's core along
    `--flow` (default native) for `--horizon` (quick: 20, else 1000) after a transient
    of a tenth of it, renormalised every unit of time, measured in `--measure` (default
    `g`: the energy's coordinates, as the stability study's exponent), tsit5 at `tight`
    tolerances unless given."""
    core, x0, args, dtype = _core_problem(model, images[:1], _first(masks), s)
    rtol, atol = s.tight(dtype)
    t1 = _given(s, "lyapunov-spectrum", "horizon")
    result = lyapunov_spectrum(
        core,
        x0[0],
        args=take(args, 0, True),
        k=4 if s.quick else 8,
        t1=t1,
        options=LYAPUNOV_OPTIONS.replace(
            solver=s.solver or "tsit5",
            rtol=rtol,
            atol=atol,
            flow=_given(s, "lyapunov-spectrum", "flow"),
        ),
        settings=LyapunovSpectrumSettings(
            transient=0.1 * t1,
            renormalise=1.0,
            measure=_given(s, "lyapunov-spectrum", "measure"),
            seed=s.seed,
        ),
        dtype=jnp.dtype(dtype),
    )
    return result, plot_lyapunov_spectrum


LANDSCAPE_RUNNERS = {
    "continuation": _continuation,
    "basins": _basins,
    "basin-continuation": _basin_continuation,
    "lyapunov-spectrum": _lyapunov_spectrum,
}
