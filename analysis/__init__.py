"""Studies of Energy Transformer solutions (uses `et_ode` and `solvers`)."""

from ._energy_descent import energy_rises

__all__ = ["energy_rises"]
