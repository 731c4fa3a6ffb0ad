"""What a finished solve reports: `EnergySolution.stats` (counts, stop reason, the
options), the failure raised with those statistics, and the trimmed saved arrays."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._auto import EXPLICIT_EVALS
from ._plumbing import SolveConfig
from ._presets import SolverPreset
from ._solution import FAILURES, STOP_REASONS, EnergySolution, stop_code


class SolveError(RuntimeError):
    """A solve that did not finish as asked. `reason` is one of `"max_steps"`,
    `"dt_underflow"`, `"nonfinite"`, `"not_converged"`; `stats` holds the solve's
    statistics (per sample for a batch)."""

    def __init__(self, reason: str, message: str, stats: dict):
        super().__init__(message)
        self.reason = reason
        self.stats = stats


def finish_solution(
    out,
    cfg: SolveConfig,
    preset: SolverPreset,
    locals_for_stats: dict,
    jumps: bool,
    throw: bool,
    traced: bool,
    failure_note=None,
):
    stop = locals_for_stats.pop("stop")
    stats = dict(locals_for_stats)
    stats["fixed_point_stop"] = None if stop is None else dict(atol=stop.atol, rtol=stop.rtol)
    for key in (
        "num_steps",
        "num_accepted_steps",
        "num_rejected_steps",
        "residual_rms",
        "residual_rms_initial",
        "stop",
    ):
        stats[key] = out[key]
    stats["stop_code"] = stop_code(out["stop"])
    stats["fixed_point_threshold"] = out["threshold"] if stop is not None else None
    stats["nfe"] = preset.nfe(out["num_steps"])
    stats["nfe_is_estimate"] = preset.implicit or not preset.nfe_exact
    stats["nfe_note"] = preset.nfe_note
    if cfg.adaptive and preset.fsal and preset.nfe_exact and not preset.self_counting:
        # Counted (count_evaluations=True): under adaptive step control diffrax's FSAL
        # solvers make a few evaluations beyond the tableau's count (tsit5, dopri5 +1,
        # bosh3 +2 per solve, 0.3 to 5 tau); constant steps match the tableau exactly.
        stats["nfe_is_estimate"] = True
        stats["nfe_note"] = (
            stats["nfe_note"].replace("exact: ", "lower bound: ", 1)
            + "; under adaptive steps diffrax makes a few more (count them "
            "with count_evaluations=True)"
        )
    if jumps and preset.fsal and preset.nfe_exact:  # FSAL re-evaluates after each jump
        stats["nfe_is_estimate"] = True
        stats["nfe_note"] = (
            stats["nfe_note"].replace("exact: ", "lower bound: ", 1)
            + "; the extra evaluation after each time in jump_ts crossed is not counted"
        )
    if preset.self_counting:  # "auto": the solver's own counts, JVPs included
        own = out["own_counts"]
        rejected = out["num_rejected_steps"]
        stats["jvp_evals"] = own["jvp_evals"]
        stats["num_switches"] = own["num_switches"]
        stats["implicit_steps"] = own["implicit_steps"]
        stats["nfe"] = own["f_evals"] + own["jvp_evals"] + EXPLICIT_EVALS * rejected
        # Rejected steps before any switch are explicit (6 evaluations each, exact);
        # after one, a rejected step's mode (and cost) is not known.
        if traced:
            stats["nfe_is_estimate"] = jnp.any((rejected > 0) & (own["num_switches"] > 0))
        else:
            stats["nfe_is_estimate"] = bool(
                np.any((np.asarray(rejected) > 0) & (np.asarray(own["num_switches"]) > 0))
            )
    if cfg.counted:  # counted where they happened: exact for any solver
        counts = out["counted"]
        stats["f_evals"], stats["jvp_evals"] = counts[..., 0], counts[..., 1]
        stats["nfe"] = counts[..., 0] + counts[..., 1]
        stats["nfe_is_estimate"] = False
        stats["nfe_note"] = (
            "exact: counted during the solve (count_evaluations=True): "
            "f_evals vector-field evaluations plus jvp_evals "
            "Jacobian-vector products"
        )
    stats["residual_evals"] = out["num_steps"] + 1 if stop is not None else 0
    stats["energy_evals"] = out["num_accepted_steps"] + 1 if cfg.save_energy else 0

    ts, xs = out["ts"], out["xs"]
    energy_ts, energies = out["energy_ts"], out["energies"]
    if traced and throw:  # no Python-side check possible: fail inside the program
        failure_codes = jnp.asarray([STOP_REASONS.index(r) for r in FAILURES])
        any_failed = jnp.any(jnp.isin(stats["stop_code"], failure_codes))
        out["x_final"] = eqx.error_if(
            out["x_final"],
            any_failed,
            "solvers.solve failed inside jax.jit/grad (max steps, step size underflow, "
            "non-finite state, or a fixed-point stop that reached its cap); run it outside "
            "jit for the reason and statistics, or pass throw=False and read "
            "stats['stop_code'] (indices into solvers.STOP_REASONS).",
        )
    if not traced:
        codes = np.asarray(stats["stop_code"])
        stats["stop_reason"] = (
            STOP_REASONS[int(codes)] if codes.ndim == 0 else [STOP_REASONS[int(c)] for c in codes]
        )
        if cfg.save == "steps":
            ts, xs = _trim(ts, xs)
        if cfg.save_energy:
            energy_ts, energies = _trim(energy_ts, energies)
        if throw:
            failed = [STOP_REASONS[c] for c in np.unique(codes) if STOP_REASONS[c] in FAILURES]
            if failed:
                reason = failed[0]
                n_bad = int(np.sum(codes == STOP_REASONS.index(reason)))
                where = f" ({n_bad} of {codes.size} samples)" if codes.ndim else ""
                summary = _summary(stats)
                note = (
                    failure_note(out, codes == STOP_REASONS.index(reason))
                    if failure_note is not None and reason in ("max_steps", "dt_underflow")
                    else ""  # ended before t1: perhaps a blow-up
                )
                raise SolveError(
                    reason,
                    f"Solve failed{where}: {FAILURES[reason]}.{note} Statistics: {summary}",
                    stats,
                )
    return EnergySolution(
        ts=ts,
        xs=xs,
        energy_ts=energy_ts,
        energies=energies,
        x_final=out["x_final"],
        t_final=out["t_final"],
        stats=stats,
    )


def _trim(ts, values):
    """Drop the trailing `inf` padding shared by every sample of a batch."""
    finite = np.isfinite(np.asarray(ts))
    count = int(finite.reshape(-1, finite.shape[-1]).sum(axis=-1).max())
    return ts[..., :count], values[..., :count] if values.ndim == ts.ndim else values[
        ..., :count, :, :
    ]


def _summary(stats: dict) -> str:
    keys = (
        "solver",
        "flow",
        "t1",
        "dt0",
        "rtol",
        "atol",
        "max_steps",
        "num_steps",
        "num_accepted_steps",
        "num_rejected_steps",
        "nfe",
        "residual_rms",
    )
    parts = []
    for key in keys:
        value = stats.get(key)
        if isinstance(value, jax.Array):
            value = np.asarray(value)
            value = value.item() if value.ndim == 0 else f"max {value.max():.4g}"
        parts.append(f"{key}={value}")
    return ", ".join(parts)
