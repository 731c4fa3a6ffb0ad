"""The typed results of the studies that compare discrete solves run by run:
`energy_descent` (an `EnergyDescent` of `EnergyDescentRun`s, each with its
`EnergyRises`; `energy_rises` returns one alone) and `work_precision` (a
`WorkPrecision` of `WorkPrecisionRun`s).

Every record is also a read-only mapping of its keys (`run["nfe"] is run.nfe`), with the
keys the dicts had.
"""

import dataclasses

import numpy as np

from .._results import Result, optional


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class EnergyRises(Result):
    """The steps of one energy trace where `E` rose (`energy_rises`), a rise counted as
    round-off below `roundoff_ulps * eps(dtype) * |E|`, as real otherwise."""

    steps: int
    """The number of steps compared (the finite energies less one)."""
    rises: int
    """The steps where `E` rose at all."""
    real_rises: int
    """Those above the round-off allowance."""
    roundoff_rises: int
    """Those within it."""
    max_rise: float
    """The largest rise (energy units; 0 if none)."""
    max_relative_rise: float
    """The largest rise relative to `|E|` at that step (0 if none)."""
    real_rise_steps: np.ndarray
    """`[R]`: the indices `i` of the steps `i -> i + 1` with a real rise."""
    real_rise_sizes: np.ndarray
    """`[R]`: their sizes (energy units)."""
    roundoff_allowance: float
    """The largest allowance along the trace (energy units)."""
    dtype: str
    """The dtype of the energies (whose epsilon sets the allowance)."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class EnergyDescentRun(Result):
    """One solver's run of `energy_descent`: the energy at every step and where it rose;
    per sample a list where the start was a batch."""

    label: str
    """The run in words (`"euler dt 0.1"`, `"tsit5 rtol 1e-10"`)."""
    options: dict
    """Its `solvers.solve` options (`solver`, `dt0` or `rtol` and `atol`, ...)."""
    energy_ts: np.ndarray | list
    """`[S]`: the time of each step's energy (tau units; the finite ones), or per sample
    a list of them."""
    energies: np.ndarray | list
    """`[S]`: the energy after each step, or per sample a list of them."""
    rises: EnergyRises | list[EnergyRises]
    """Where `E` rose along the trace (a list per sample batched)."""
    real_rises: int
    """Real rises, summed over samples."""
    roundoff_rises: int
    """Round-off rises, summed over samples."""
    max_rise: float
    """The largest rise over samples (energy units)."""
    num_steps: np.ndarray | int | np.integer
    """The solver's steps (`[B]` batched)."""
    nfe: np.ndarray | int | np.integer
    """Its vector-field evaluations (`[B]` batched)."""
    stop_reason: str | list[str]
    """Its stop reason (a list per sample batched)."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class EnergyDescent(Result):
    """The result of `energy_descent`: each solver's energy trace to the same `t1`, and
    the steps where `E` rose, real rises told apart from round-off."""

    runs: list[EnergyDescentRun]
    """One per solver specification, in the order given."""
    batched: bool
    """Whether `x0` was a batch `[B, N, D]`."""
    metadata: dict
    """What produced it (study, dtype, flow, `t1`, `roundoff_ulps`, `max_steps`, `batch`,
    each run's `solvers` options, versions)."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class WorkPrecisionRun(Result):
    """One solve of `work_precision`: an adaptive solver at one tolerance (`rtol`,
    `atol`) or a constant-step one at one step size (`dt0`), its cost and its error."""

    solver: str
    """The solver's name."""
    kind: str
    """`"adaptive"` (PID steps) or `"fixed"` (constant steps)."""
    nfe: int
    """`stats["nfe"]`, the largest over samples: the tableau's count, exact for constant
    steps, a lower bound for first-same-as-last solvers under adaptive steps (see
    `solvers.solve`)."""
    num_steps: int
    """Steps taken, the largest over samples."""
    wall_s: float
    """Median seconds per solve over the timed calls after a warm-up (solve overhead
    included; never compare timings taken on different machines)."""
    ok: bool
    """Whether every sample's solve reached `t1`."""
    stop_reason: list[str]
    """Per sample, why its solve stopped."""
    error_exact: float
    """`max |x(t1) - x_ref(t1)| / max |x_ref(t1)|` against the float64 reference (NaN
    where not `ok`)."""
    error_paper: float
    """The same against the paper's Euler map (dt 0.1; NaN where not `ok`)."""
    rtol: float | None = optional()
    """Adaptive runs: the relative tolerance."""
    atol: float | None = optional()
    """Adaptive runs: the absolute tolerance (`atol_factor * rtol`)."""
    dt0: float | None = optional()
    """Constant-step runs: the step size (tau units)."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class WorkPrecision(Result):
    """The result of `work_precision`: the error of `x(t1)` against NFE and wall time for
    each run of the grid, against two references solved in the same call."""

    runs: list[WorkPrecisionRun]
    """The adaptive runs (solver by tolerance), then the constant-step ones (solver by
    step size)."""
    reference: dict
    """The exact reference: `x_final` (`[B, N, D]`, float64), `solver`, `rtol`, `atol`,
    `nfe` (`[B]`), `dtype`."""
    paper: dict
    """The paper's Euler map (dt 0.1, in the model's dtype): `x_final` (`[B, N, D]`),
    `solver`, `dt0`, `error_exact` (how far it is from the exact flow)."""
    metadata: dict
    """What produced it (study, dtype, flow, `t1`, `atol_factor`, `batch`, `repeats`,
    `max_steps`, the error and timing definitions, versions)."""
