"""How an Energy Transformer core is run inside a task model: `Dynamics`, the frozen
dataclass that configs and checkpoint headers hold (images and graphs alike)."""

import dataclasses

from .. import solvers
from ..vocab import Adjoint, Flow


@dataclasses.dataclass(frozen=True)
class Dynamics:
    """How the core is run: a `solvers.solve` configuration plus the conditions.

    - `solver`, `dt0`, `t1`, `rtol`, `atol`, `flow`, `adjoint`, `max_steps`: as in
      `solvers.solve`. The paper: euler, dt0 0.1, t1 1.2, native, checkpoint.
      `max_steps=None` (the default) is `solve`'s own cap: exact for constant steps to
      a fixed `t1`, with every step checkpointed for short solves.
    - `fixed_point_atol`: if set, stop at RMS(G) below it (then `t1` is the cap).
    - `clamp_visible`: tokens that show image content (not replaced by MASK) do not move
      (image models).
    - `external_field`: add `E_ext = -lambda sum_A c_A . g_A` with `c` the encoded
      tokens (MASK plus position for masked ones), `lambda` learnable.
    """

    solver: str = "euler"
    dt0: float | None = 0.1
    t1: float = 1.2
    rtol: float | None = None
    atol: float | None = None
    flow: Flow = "native"
    adjoint: Adjoint = "checkpoint"
    max_steps: int | None = None
    fixed_point_atol: float | None = None
    clamp_visible: bool = False
    external_field: bool = False

    def solve_options(self) -> dict:
        """The keyword arguments of `solvers.solve` for these dynamics."""
        options = dict(solver=self.solver, dt0=self.dt0, t1=self.t1, rtol=self.rtol,
                       atol=self.atol, flow=self.flow, adjoint=self.adjoint,
                       max_steps=self.max_steps)
        if self.fixed_point_atol is not None:
            options["stop"] = solvers.FixedPointStop(atol=self.fixed_point_atol)
        return options
