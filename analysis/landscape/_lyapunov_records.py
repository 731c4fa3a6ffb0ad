"""The typed result of `lyapunov_spectrum` (`LyapunovSpectrum`), the settings of its QR
method (`LyapunovSpectrumSettings`), its measures and its default solve options."""

import dataclasses
import math
from collections.abc import Sequence
from typing import Literal

import numpy as np

from et_ode import solvers

from .._common import is_real
from .._results import Result
from .._settings import Settings, at_least, positive


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class LyapunovSpectrum(Result):
    """The `k` largest Lyapunov exponents of a flow by the QR method
    (`lyapunov_spectrum`), in units of 1/time (1/tau on the ET), with their running
    estimates over `M` averaging intervals and the settings; also a read-only mapping of
    its keys (`out["exponents"] is out.exponents`)."""

    exponents: np.ndarray
    """`[k]`: the exponents, descending (`orthonormalise=False`: each direction's, in
    the order of the start vectors)."""
    history: np.ndarray
    """`[M, k]`: the running estimates after each averaging interval (columns as
    `exponents`)."""
    times: np.ndarray
    """`[M]`: the averaging time at each."""
    volume_rate: float
    """The exponents' sum (with all of them, in `x`, the mean divergence of the field)."""
    neutral: int | None
    """How many of the measured directions the system carries without change by
    construction, exponent 0: in `x`, two per free token of the ET, its mean and scale,
    on either flow (on the native flow the scale up to LayerNorm's `eps`); 0 in `g` and
    `metric`, which do not measure them; `None` for a plain field."""
    measure: str
    """Where the tangent vectors were measured: `"x"`, `"g"` or `"metric"`."""
    k: int
    """The exponents computed."""
    size: int
    """The state's entries."""
    t1: float
    """The averaging time (whole intervals, or the last of `ends`)."""
    transient: float
    """The time run first, not averaged (whole intervals)."""
    renormalise: float
    """The time between QR steps (with `ends`, the longest)."""
    solver: str
    """The diffrax solver."""
    rtol: float | None
    """Its relative tolerance (None: constant steps)."""
    atol: float | None
    """Its absolute tolerance (None: constant steps)."""
    steps: int
    """The solver's steps, in all."""
    growth_spread: float | None
    """The largest spread of one interval's `log |R_ii|` (nats): `inf` where a tangent
    vector vanished or overflowed within one (`None` read back from JSON)."""
    flow: str | None
    """An energy system's flow (`"native"` or `"projected"`); `None` for a plain field."""
    dtype: str
    """The arithmetic."""
    x_final: np.ndarray
    """The state at the end (the start's shape)."""
    metadata: dict
    """What produced it (study, dtype, solver, tolerances, seeds, versions)."""


# Measures of the tangent vectors: the power of the clock (None: the state's coordinates).
MEASURES = {"x": None, "g": 1.0, "metric": 0.5}
# How `lyapunov_spectrum` solves by default: tsit5 at rtol 1e-8 and atol 1e-10 on the
# projected flow, at most 100,000 steps per renormalise interval.
LYAPUNOV_OPTIONS = solvers.SolveOptions(
    solver="tsit5", dt0=None, rtol=1e-8, atol=1e-10, max_steps=100_000, flow="projected"
)


@dataclasses.dataclass(frozen=True)
class LyapunovSpectrumSettings(Settings):
    """How `lyapunov_spectrum` runs the QR method (module docstring).

    - `transient`: the time run first (state and tangent vectors, no averaging) so that
      the tangent vectors align (>= 0, default 0; rounded to whole intervals).
    - `renormalise`: the time between QR steps (> 0, default 1; each interval one
      diffrax solve).
    - `measure`: where the tangent vectors are measured: `"x"` (default) the state's
      coordinates (any system); on an energy system `"g"`, the energy's coordinates
      (`|dg|` on the ET: token means and scales dropped, as `lyapunov_exponent`
      measures), or `"metric"` (`|C^(1/2) P dx|`).
    - `seed`: the random start of the tangent vectors (an integer, default 0): the
      columns of `jax.random.normal(key(seed), (size, k))`, or with
      `orthonormalise=False` the rows of `(k, size)`.
    - `orthonormalise`: the QR step (default `True`); `False` normalises each tangent
      vector on its own, so that each estimates the top exponent from its own random
      direction (`finite_time_lyapunov`'s), and `k` may exceed the dimension.
    - `ends`: times after the transient, within `(0, t1]`, at which an averaging
      interval must end (`history` at each, as `finite_time_lyapunov`'s horizons): the
      intervals then end at each of them and at `t1`, not rounded, those between two
      ends equal and at most `renormalise` long; `()` (default): whole intervals.
    """

    transient: float = 0.0
    renormalise: float = 1.0
    measure: Literal["x", "g", "metric"] = "x"
    seed: int = 0
    orthonormalise: bool = True
    ends: Sequence[float] = ()

    def check(self) -> None:
        positive(self, "renormalise")
        transient = self.transient
        if not (is_real(transient) and math.isfinite(transient) and transient >= 0):
            raise ValueError(
                "LyapunovSpectrumSettings.transient must be a finite time >= 0 (got "
                f"{self.transient!r})."
            )
        if self.measure not in MEASURES:
            raise ValueError(
                f"LyapunovSpectrumSettings.measure must be one of {', '.join(MEASURES)} "
                f"(got {self.measure!r})."
            )
        at_least(self, "seed", 0)
        ends, name = self.ends, "LyapunovSpectrumSettings"
        if not isinstance(self.orthonormalise, bool):
            raise ValueError(f"{name}.orthonormalise must be True or False.")
        if isinstance(ends, str) or not all(is_real(e) and 0 < e < math.inf for e in ends):
            raise ValueError(f"{name}.ends must be finite times > 0, or () (got {ends!r}).")
