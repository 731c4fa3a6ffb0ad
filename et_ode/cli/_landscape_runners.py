"""The landscape studies of the command line (`et-ode study continuation`, `et-ode
study lyapunov-spectrum`): runners `(model, images, masks, settings) -> (result, plot)`
like those of `._study_runners`, on the first held-out image's core problem in float64
(or `--dtype`)."""

import jax.numpy as jnp
import numpy as np

from et_ode import solvers as _solvers

from ..analysis import (
    continuation,
    lyapunov_spectrum,
    plot_continuation,
    plot_lyapunov_spectrum,
    take,
)
from ._study_runners import (
    STABILITY_START,
    _core_problem,
    _first,
    _fixed_point,
    start_steps,
)

# What continuation follows by default, and over which range of the parameter (the
# trained model sits at p = 1).
DEFAULT_PARAMETER = "memory_scale"
DEFAULT_P_SPAN = (0.5, 2.0)


def _start(model, images, masks, s):
    """The first image's fixed point of the projected flow, polished by Newton (as the
    stability study's), its core problem and how it was found."""
    core, x0, args, dtype = _core_problem(model, images[:1], _first(masks), s)
    args0 = take(args, 0, True)
    x_star, start = _fixed_point(model, core, x0[0], args0, s, dtype, tol=STABILITY_START,
                                 steps=start_steps(model, s, dtype))
    polished = _solvers.find_fixed_point(core, x_star, args=args0, method="newton",
                                         linear="auto", tol=_newton_tol(dtype))
    start["polished_residual_rms"] = float(polished.residual_rms)
    if not bool(polished.success):
        raise ValueError("continuation: Newton did not polish the start into a fixed point "
                         f"(RMS G {float(polished.residual_rms):.3g} after "
                         f"{int(polished.steps)} iterations); try --solver with tighter "
                         "--rtol.")
    return core, polished.x, args0, dtype, start


def _newton_tol(dtype) -> float:
    """RMS G to which Newton polishes and continuation corrects: 1e-9 in float64, 1e-4 in
    float32 (its round-off stops Newton above 1e-6)."""
    return 1e-9 if jnp.dtype(dtype) == jnp.float64 else 1e-4


def _without_states(branch: dict) -> dict:
    """A branch without its states (4,096 numbers a point on the shipped models): the
    JSON keeps `p`, eigenvalues, stability and the bifurcations' parameters."""
    kept = {k: v for k, v in branch.items() if k not in ("x", "y")}
    kept["bifurcations"] = [{k: v for k, v in b.items() if k not in ("x", "y")}
                            for b in branch["bifurcations"]]
    return kept


def _continuation(model, images, masks, s):
    """The first image's fixed point followed in `--parameter` (default the memory scale)
    both ways from its trained value p = 1 across `--p-span` (default 0.5 to 2), with the
    `k` leading eigenvalues (quick: 2, else 6) at every point and the bifurcations; at
    most 8 points each way in quick mode, else 100."""
    core, x_star, args0, dtype, start = _start(model, images, masks, s)
    p_span = s.p_span or DEFAULT_P_SPAN
    if not p_span[0] < 1.0 < p_span[1]:
        raise ValueError(f"--p-span {p_span[0]:g},{p_span[1]:g} must contain the trained "
                         "value 1.")
    parameter = s.parameter or DEFAULT_PARAMETER
    options = dict(args=args0, p_span=tuple(p_span), parameter=parameter, ds=0.05,
                   ds_max=0.2, k=2 if s.quick else 6, max_points=8 if s.quick else 100,
                   tol=_newton_tol(dtype))
    branches = [continuation(core, x_star, 1.0, direction=d, **options) for d in (1, -1)]
    for branch in branches:  # how far the fixed point moves (the states are not kept)
        moved = np.asarray(branch["x"]) - np.asarray(x_star)[None]
        branch["distance"] = np.sqrt(np.mean(moved.reshape(len(moved), -1) ** 2, axis=1))
    p_reached = [float(np.max(branches[0]["p"])), float(np.min(branches[1]["p"]))]
    result = dict(
        branches=[_without_states(b) for b in branches], labels=["p > 1", "p < 1"],
        parameter=parameter, trained_value=1.0, p_span=list(p_span), p_reached=p_reached,
        start=start,
        bifurcations=[dict(kind=b["kind"], p=b["p"]) for branch in branches
                      for b in branch["bifurcations"]],
        largest_residual_rms=float(max(np.max(b["fixed_point_residual_rms"])
                                       for b in branches)),
        metadata=dict(branches[0]["metadata"], flow="projected"))
    return result, _plot_branches


def _plot_branches(result, path=None):
    return plot_continuation(result["branches"], path, labels=result["labels"],
                             observable="distance",
                             observable_label="RMS distance from the trained fixed point")


def _lyapunov_spectrum(model, images, masks, s):
    """The top `k` Lyapunov exponents (quick: 4, else 8) of the first image's core along
    `--flow` (default native) for `--horizon` (quick: 20, else 1000) after a transient
    of a tenth of it, renormalised every unit of time, tsit5 at `tight` tolerances
    unless given."""
    core, x0, args, dtype = _core_problem(model, images[:1], _first(masks), s)
    rtol, atol = s.tight(dtype)
    t1 = s.horizon or (20.0 if s.quick else 1000.0)
    result = lyapunov_spectrum(core, x0[0], take(args, 0, True), k=4 if s.quick else 8,
                               t1=t1, transient=0.1 * t1, renormalise=1.0,
                               flow=s.flow or "native", solver=s.solver or "tsit5",
                               rtol=rtol, atol=atol, seed=s.seed, dtype=jnp.dtype(dtype))
    return result, plot_lyapunov_spectrum


LANDSCAPE_RUNNERS = {"continuation": _continuation,
                     "lyapunov-spectrum": _lyapunov_spectrum}
