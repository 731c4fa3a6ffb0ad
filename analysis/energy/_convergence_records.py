"""The typed results of the studies over time along one solve: `convergence` (a
`Convergence`, a `ConvergenceFlow` per flow) and `contributions` (a `Contributions` of
`TokenGroups`).

Each entry per sample is batched (`[B, ...]`) where the start was a batch `[B, N, D]`,
else one sample's (`batched` says which). Every record is also a read-only mapping of its
keys (`result["times"] is result.times`), with the keys the dicts had.
"""

import dataclasses
from typing import Any

import numpy as np

from .._results import Result, optional


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ConvergenceFlow(Result):
    """One flow of a `convergence` result: traces at the study's `times` (`[T]`, or
    `[B, T]` batched), the time and evaluations to the tolerance, the fitted decay and,
    with `hessian=True`, the Hessian's prediction of it."""

    residual_rms: np.ndarray
    """`[T]` (or `[B, T]`): RMS of the residual G over its `N D` entries."""
    dgdt_rms: np.ndarray
    """`[T]` (or `[B, T]`): RMS of `dg/dt`, the JVP of the energy's coordinates along the
    flow (`g = LayerNorm(x)` on the ET, `x` itself for a model without
    `energy_coordinates`; per tau)."""
    dxdt_rms: np.ndarray
    """`[T]` (or `[B, T]`): RMS of the vector field `dx/dt` (per tau)."""
    abs_dEdt: np.ndarray
    """`[T]` (or `[B, T]`): `|dE/dt|` (the model's closed form `dEdt` where it has one,
    else a JVP of `E` along the flow; energy per tau)."""
    energy: np.ndarray
    """`[T]` (or `[B, T]`): the energy `E`."""
    scales: np.ndarray | None
    """`[T, N]` (or `[B, T, N]`): each token's scale `s_A` (models with `token_scales`,
    else None)."""
    time_to_tolerance: np.ndarray | float
    """When the `FixedPointStop` solve (RMS G below the flow's `fixed_point_atol`, capped
    at `t1`) stopped at a fixed point (tau units; `[B]` batched); NaN where it did not or
    was not run (`fixed_point_atol` None)."""
    nfe_to_tolerance: np.ndarray | int | np.integer
    """That solve's vector-field evaluations (`[B]` batched); -1 where it did not reach
    the tolerance."""
    stop_reason: str | list[str | None] | None
    """That solve's stop reason (a list per sample batched; None where it was not run)."""
    segments: dict
    """The traced solve's statistics per segment (`chunks`): `num_steps`, `nfe`,
    `stop_reason`, `t0`, `t1`, each a list over segments."""
    x_end: np.ndarray
    """`[N, D]` (or `[B, N, D]`): the state at the last time."""
    fit: dict
    """The exponential `log |G| = a - rate t` fitted over the points with
    `fit_floor < |G| < fit_upper |G(0)|` (`fit_exponential_rate`): `rate` (1/tau; NaN
    with fewer than 3 points), `r2`, `n_points`, `t_window` (`[2]`), each per sample
    batched."""
    power_law: dict
    """`|G| ~ t^-exponent` fitted over the last decade of the times (`fit_power_law`):
    `exponent`, `r2`, `n_points`, each per sample batched."""
    lambda_min_x: np.ndarray | float | None = optional()
    """`hessian=True`: the smallest eigenvalue of `C^(1/2) H C^(1/2)` (`H` the Riemannian
    Hessian, `C` the clocks) at the end state, Newton-polished to a fixed point where
    Newton converges from it (`[B]` batched)."""
    lambda_min_g: np.ndarray | float | None = optional()
    """`hessian=True`: the smallest eigenvalue of `H` there."""
    predicted_rate: np.ndarray | float | None = optional()
    """`hessian=True`: `lambda_min_x / tau`, the linearised flow's slowest rate (1/tau)."""
    predicted_rate_scaled: np.ndarray | float | None = optional()
    """`hessian=True`: `lambda_min_g gamma / (tau mean s_A)`, the simple clock scaling
    (1/tau; the ET only, NaN for other models)."""
    predicted_power_exponent: np.ndarray | float | None = optional()
    """`hessian=True`, native flow: `lambda_min_x t1 / tau` (where every clock falls like
    `1/t`, the linearised flow decays like `t^-p` with this `p`; a linearisation, only
    indicative while G is not small); NaN on the projected flow."""
    end_residual_rms: np.ndarray | float | None = optional()
    """`hessian=True`: RMS G at the last time."""
    rate_ratio: np.ndarray | float | None = optional()
    """`hessian=True`: the fitted rate over `predicted_rate`."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Convergence(Result):
    """The result of `convergence`: each flow's traces over time, its time and NFE to a
    residual tolerance, the decay rate of `|G|` and its prediction by the Hessian."""

    times: np.ndarray
    """`[T]`: the sample times (tau units)."""
    flows: dict[str, ConvergenceFlow]
    """Per flow run (`"native"`, `"projected"`), its record."""
    batched: bool
    """Whether `x0` was a batch `[B, N, D]` (every per-sample entry then has `B` first)."""
    metadata: dict
    """What produced it (study, dtype, flows, solver and tolerances, `tolerance` (the
    settings' `fixed_point_atol`),
    `chunks`, `fit_upper`, `fit_floor`, `tau`, `batch`, versions)."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class TokenGroups(Result):
    """One quantity of a `contributions` result on the masked and on the visible tokens,
    at each of its times (`[T]`, or `[B, T]` batched)."""

    masked: np.ndarray
    """`[T]` (or `[B, T]`): over the masked tokens."""
    visible: np.ndarray
    """`[T]` (or `[B, T]`): over the visible tokens."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Contributions(Result):
    """The result of `contributions`: the norms of the attention, Hopfield and external
    parts of the update on masked and visible tokens over time (each the mean over those
    tokens of the L2 norm of the part applied to each token, `tau dx/dt`: `x` units per
    tau; on the projected flow each part's tangent projection)."""

    times: np.ndarray
    """`[T]`: the times (tau units)."""
    attention: TokenGroups
    """The attention part of the update."""
    hopfield: TokenGroups
    """The Hopfield part."""
    external: TokenGroups
    """The external-field part."""
    total: TokenGroups
    """The applied update (`tau dx/dt`), the sum of the parts."""
    attention_fraction: TokenGroups
    """`|att| / (|att| + |hop|)` of those means (dimensionless)."""
    sum_mismatch: np.ndarray
    """`[T]` (or `[B, T]`): max relative difference between the sum of the parts and the
    applied update (a check: rounding)."""
    batched: bool
    """Whether `x0` was a batch `[B, N, D]`."""
    metadata: dict
    """What produced it (study, dtype, flow, solver and steps, `n_masked`, `batch`,
    `units`, versions)."""


# The decay law each flow's RMS G follows near a fixed point (the study's module doc):
# the projected flow's is exponential, the native flow's a power of t (its clocks slow
# like 1/t); a flow of another name is taken as exponential.
DECAY_LAWS = {"native": "power_law", "projected": "exponential"}


def quoted_decay(record: Any, flow: str) -> dict:
    """The fit of one flow's RMS G that a figure and a summary quote, as one statistic:
    `plot_convergence`'s legend and the demo's summary call this, so that both say the
    same numbers. `record`: a `ConvergenceFlow` (or a dict with its `fit` and
    `power_law`); `flow`: its name, which picks the law (`DECAY_LAWS`): the exponential
    `fit` (`log |G| = a - rate t`) or the `power_law` (`|G| ~ t^-exponent`).

    **Returns:** `law` (`"exponential"` or `"power_law"`); `value` (the rate in 1/tau,
    or the exponent): one image's, or the median over the images with a finite fit;
    `low`, `high`: its range over those images; `r2`, `r2_low`, `r2_high`: the fits'
    r^2 (median and range); `images` and `fitted` (how many had a fit); `per_image`,
    `r2_per_image` (lists, NaN where no fit); `windows`: per image the fitted times
    `[t0, t1]` (the exponential's; NaN for the power law, fitted over the last decade
    of the times); and `text`, the phrase both quote: `"rate 0.0898/tau (r^2 0.85)"`,
    `"rate 0.0898/tau: median of 2 images, range 0.0531 to 0.126 (r^2 0.6 to 0.85)"`,
    `"t^-0.52 ..."`, or why there is none."""
    law = DECAY_LAWS.get(flow, "exponential")
    fit = record["power_law"] if law == "power_law" else record["fit"]
    key = "exponent" if law == "power_law" else "rate"
    values = np.atleast_1d(np.asarray(fit[key], float))
    r2 = np.broadcast_to(np.atleast_1d(np.asarray(fit["r2"], float)), values.shape)
    windows = np.full((values.size, 2), np.nan)
    if law == "exponential":
        windows = np.asarray(fit["t_window"], float).reshape(-1, 2)
    finite = np.isfinite(values)
    out: dict[str, Any] = dict(
        law=law,
        images=int(values.size),
        fitted=int(finite.sum()),
        per_image=values.tolist(),
        r2_per_image=r2.tolist(),
        windows=windows.tolist(),
    )
    if not finite.any():
        none = "no power law fitted" if law == "power_law" else "no exponential tail to fit"
        nan = float("nan")
        return dict(out, value=nan, low=nan, high=nan, r2=nan, r2_low=nan, r2_high=nan, text=none)
    got, quality = values[finite], r2[finite]
    out.update(
        value=float(np.median(got)),
        low=float(got.min()),
        high=float(got.max()),
        r2=float(np.median(quality)),
        r2_low=float(quality.min()),
        r2_high=float(quality.max()),
    )
    g = lambda v: f"{v:.3g}"  # noqa: E731
    number = (  # |G| ~ t^-p: a negative p (G grew) shows as t^+...
        f"t^{-out['value']:+.3g}" if law == "power_law" else f"rate {g(out['value'])}/tau"
    )
    if values.size == 1:
        out["text"] = f"{number} (r^2 {out['r2']:.2g})"
        return out
    which = (
        f"{values.size} images"
        if finite.all()
        else f"the {finite.sum()} of {values.size} images with a fit"
    )
    spread = f"range {g(out['low'])} to {g(out['high'])}" if finite.sum() > 1 else "one value"
    out["text"] = (
        f"{number}: median of {which}, {spread} (r^2 {out['r2_low']:.2g} to {out['r2_high']:.2g})"
    )
    return out
