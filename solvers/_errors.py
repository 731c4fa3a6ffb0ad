"""Errors raised by `solvers`."""


class SolveError(RuntimeError):
    """A solve that did not finish as asked. `reason` is one of `"max_steps"`,
    `"dt_underflow"`, `"nonfinite"`, `"not_converged"`; `stats` holds the solve's
    statistics (per sample for a batch)."""

    def __init__(self, reason: str, message: str, stats: dict):
        super().__init__(message)
        self.reason = reason
        self.stats = stats
