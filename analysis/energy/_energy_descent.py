"""Energy descent along a trajectory: where did E rise, and was it real?"""

from collections.abc import Sequence
from typing import Any

import numpy as np
from jaxtyping import ArrayLike, Float

from et_ode import solvers
from et_ode.vocab import Flow

from .._common import as_batch, shard
from .._records import metadata, model_dtype
from ._solver_run_records import EnergyDescent, EnergyDescentRun, EnergyRises


def energy_rises(energies: Float[ArrayLike, " S"], *, roundoff_ulps: float = 64.0) -> EnergyRises:
    """Count the steps along an energy trace where `E` rose.

    The exact flow cannot raise `E` (`dE/dt <= 0`); a discrete step can, and so can
    floating-point round-off. A rise counts as round-off when it is below
    `roundoff_ulps * eps(dtype) * |E|` (the error of evaluating E, which sums many
    terms of magnitude about |E|), and as real otherwise.

    **Arguments:**

    - `energies`: `[S]` energies along a trajectory (`inf` padding is ignored).
    - `roundoff_ulps`: round-off allowance in units of the dtype's machine epsilon.

    **Returns:** an `EnergyRises`: the counts of rises, real and round-off, the largest,
    and the steps and sizes of the real ones.
    """
    energies = np.asarray(energies)
    if energies.ndim != 1:
        raise ValueError(f"energies must be one trace [S]; got shape {energies.shape}.")
    energies = energies[np.isfinite(energies)]
    delta = np.diff(energies)
    scale = np.maximum(np.abs(energies[:-1]), np.finfo(energies.dtype).tiny)
    allowance = roundoff_ulps * np.finfo(energies.dtype).eps * scale
    rose = delta > 0
    real = delta > allowance
    return EnergyRises(
        steps=int(delta.size),
        rises=int(rose.sum()),
        real_rises=int(real.sum()),
        roundoff_rises=int((rose & ~real).sum()),
        max_rise=float(delta.max(initial=0.0)),
        max_relative_rise=float((delta / scale).max(initial=0.0)),
        real_rise_steps=np.flatnonzero(real),
        real_rise_sizes=delta[real],
        roundoff_allowance=float(allowance.max(initial=0.0)),
        dtype=str(energies.dtype),
    )


def _entry(spec) -> dict:
    """Normalise one solver specification: `(solver, dt0)` (constant steps),
    `(solver, rtol, atol)` (PID steps), a dict of `solvers.solve` options with
    `solver`, or a `solvers.SolveOptions` (its solver and steps: the study's `flow` and
    `max_steps` replace its own)."""
    if isinstance(spec, solvers.SolveOptions):
        given = spec.keywords()
        own = {k: given[k] for k in ("solver", "dt0", "rtol", "atol")}
        own.update({k: given[k] for k in ("stepsize_controller", "dtmin") if given[k] is not None})
        return own
    if isinstance(spec, dict):
        if "solver" not in spec:
            raise ValueError(f"a solver specification needs 'solver': got {spec}.")
        return dict(spec)
    spec = tuple(spec)
    if len(spec) == 2:
        return dict(solver=spec[0], dt0=float(spec[1]))
    if len(spec) == 3:
        return dict(solver=spec[0], rtol=float(spec[1]), atol=float(spec[2]))
    raise ValueError(
        f"a solver specification is (solver, dt0), (solver, rtol, atol) or a dict; got {spec}."
    )


def _label(spec: dict) -> str:
    if spec.get("rtol") is not None:
        return f"{spec['solver']} rtol {spec['rtol']:g}"
    return f"{spec['solver']} dt {spec.get('dt0', 0.1):g}"


def energy_descent(
    model: solvers.EnergySystem,
    x0: Float[ArrayLike, "*batch N D"],
    args: Any = None,
    solvers_and_steps: Sequence[
        tuple[str, float] | tuple[str, float, float] | dict[str, Any] | solvers.SolveOptions
    ] = (
        ("euler", 0.1),
        ("euler", 0.5),
        ("tsit5", 1e-10, 1e-12),
    ),
    *,
    t1: float = 12.0,
    flow: Flow = "native",
    roundoff_ulps: float = 64.0,
    max_steps: int = 20000,
    args_batched: bool = False,
) -> EnergyDescent:
    """Energy along each solver's trajectory (`save_energy=True`: no states stored) and
    the steps where it rose, real rises told apart from round-off (`energy_rises`).

    **Arguments:**

    - `model`, `x0` (`[N, D]` or `[B, N, D]`), `args`: as in `solvers.solve`.
      **Protocol:** any `solvers.EnergySystem` (`energy`, `vector_field`, `residual`).
    - `solvers_and_steps`: each item `(solver, dt0)` for constant steps,
      `(solver, rtol, atol)` for PID step control, a dict of `solvers.solve` options
      (`solver`, `dt0`, `rtol`, `atol`, ...), or a `solvers.SolveOptions` (its solver and
      steps; `flow` and `max_steps` below replace its own: every run solves the same
      flow).
    - `t1`, `flow`, `max_steps`: the solve (every run to the same `t1`).
    - `roundoff_ulps`: the round-off allowance (see `energy_rises`).

    **Returns:** an `EnergyDescent`: per solver an `EnergyDescentRun` (its energy trace,
    `EnergyRises` and totals over samples; each entry documented on its field), and
    `metadata`.
    """
    xb, batched = as_batch(x0)
    x_in, args_in, batch = shard(xb, args, args_batched)
    runs = []
    for spec in solvers_and_steps:
        options = _entry(spec)
        sol = solvers.solve(
            model,
            x_in,
            args=args_in,
            t1=t1,
            flow=flow,
            save_energy=True,
            max_steps=max_steps,
            args_batched=args_batched,
            throw=False,
            **options,
        )
        ts = np.asarray(sol.energy_ts)[:batch]
        energies = np.asarray(sol.energies)[:batch]
        rises = [energy_rises(e, roundoff_ulps=roundoff_ulps) for e in energies]
        per_sample = lambda v: v if batched else v[0]  # noqa: E731
        runs.append(
            EnergyDescentRun(
                label=_label(options),
                options=options,
                energy_ts=per_sample([t[np.isfinite(t)] for t in ts]),
                energies=per_sample([e[np.isfinite(e)] for e in energies]),
                rises=per_sample(rises),
                real_rises=int(sum(r["real_rises"] for r in rises)),
                roundoff_rises=int(sum(r["roundoff_rises"] for r in rises)),
                max_rise=float(max(r["max_rise"] for r in rises)),
                num_steps=per_sample(np.asarray(sol.stats["num_steps"])[:batch]),
                nfe=per_sample(np.asarray(sol.stats["nfe"])[:batch]),
                stop_reason=per_sample(list(sol.stats["stop_reason"])[:batch]),
            )
        )
    return EnergyDescent(
        runs=runs,
        batched=batched,
        metadata=metadata(
            study="energy_descent",
            dtype=model_dtype(model),
            flow=flow,
            t1=t1,
            roundoff_ulps=roundoff_ulps,
            max_steps=max_steps,
            batch=int(batch),
            solvers=[run["options"] for run in runs],
        ),
    )
