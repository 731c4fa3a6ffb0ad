"""Figures without global state: `matplotlib.figure.Figure` objects rendered with the Agg
canvas, never pyplot (so plotting works headless and leaves no open windows)."""

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from et_ode.records import atomic_path

FLOW_COLOURS = {"native": "tab:blue", "projected": "tab:orange"}


def figure(ncols: int = 1, nrows: int = 1, *, width: float = 4.2, height: float = 3.2):
    """A constrained-layout `Figure` and its `[nrows, ncols]` array of axes."""
    fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, axes


def finish(fig: Figure, path=None, *, dpi: int = 120) -> Figure:
    """Save `fig` to `path` (format from the suffix) when given, atomically (never a
    half-written figure under its name); return the figure."""
    if path is not None:
        kind = Path(path).suffix.lstrip(".").lower() or None
        with atomic_path(path) as temporary:
            fig.savefig(temporary, dpi=dpi, format=kind)
    return fig


def positive(values):
    """`values` with non-positive and non-finite entries masked (for log axes)."""
    values = np.asarray(values, float)
    return np.where(np.isfinite(values) & (values > 0), values, np.nan)


def batch_median(values):
    """Median over a leading batch axis when `values` has one more axis than a trace."""
    values = np.asarray(values, float)
    return np.nanmedian(values, axis=0) if values.ndim > 1 else values
