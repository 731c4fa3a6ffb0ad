"""Energy descent along a trajectory: where did E rise, and was it real?"""

import numpy as np


def energy_rises(energies, *, roundoff_ulps: float = 64.0) -> dict:
    """Count the steps along an energy trace where `E` rose.

    The exact flow cannot raise `E` (`dE/dt <= 0`); a discrete step can, and so can
    floating-point round-off. A rise counts as round-off when it is below
    `roundoff_ulps * eps(dtype) * |E|` (the error of evaluating E, which sums many
    terms of magnitude about |E|), and as real otherwise.

    **Arguments:**

    - `energies`: `[S]` energies along a trajectory (`inf` padding is ignored).
    - `roundoff_ulps`: round-off allowance in units of the dtype's machine epsilon.

    **Returns:** a dict with `steps` (number of steps compared), `rises` (all rises),
    `real_rises`, `roundoff_rises`, `max_rise` (absolute, 0 if none) and
    `max_relative_rise` (relative to |E| at that step).
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
    return dict(
        steps=int(delta.size),
        rises=int(rose.sum()),
        real_rises=int(real.sum()),
        roundoff_rises=int((rose & ~real).sum()),
        max_rise=float(delta.max(initial=0.0)),
        max_relative_rise=float((delta / scale).max(initial=0.0)),
    )
