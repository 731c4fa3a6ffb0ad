"""The result of `solvers.solve`."""

import equinox as eqx
from jaxtyping import Array, Bool, Float


class StopReason(eqx.Enumeration):
    """Why a solve ended (`sol.stats["stop"]`, as diffrax's `RESULTS`): compare with
    `sol.stats["stop"] == StopReason.fixed_point`; inside `jax.jit` and `jax.vmap` it
    is an array like any other. `StopReason[item]` is the message."""

    t1 = "the solve reached t1"
    fixed_point = "RMS G fell below the fixed-point tolerance"
    max_steps = (
        "the maximum number of steps was reached; raise max_steps, loosen the tolerances "
        "or shorten t1"
    )
    dt_underflow = (
        "the step size fell below dtmin (step size underflow): the problem is stiff or the "
        "tolerances are too tight for the dtype; try an implicit solver (kvaerno5 for "
        "states of at most 1024 entries; solver='auto', matrix-free, for a flow that is "
        "stiff near rest), looser tolerances or float64; a field that is NaN or inf where "
        "the solve stopped ends the same way (an adaptive step rejects a non-finite error "
        "estimate until the step underflows)"
    )
    nonfinite = (
        "the state became non-finite (NaN or inf): the step is too large for a "
        "constant-step solver, or the model diverges; reduce dt0 or use rtol/atol"
    )
    not_converged = (
        "the time cap t1 was reached before RMS G fell below the fixed-point tolerance; "
        "raise t1 (the native flow slows like 1/t: flow='projected' converges "
        "exponentially) or loosen the tolerance"
    )
    passage = "the passage stop's condition held at the end of a step"


# The names in the enumeration's order: `stats["stop_code"]` indexes this tuple. Read
# from the enumeration itself (equinox 0.13 keeps its items, in the order they are
# defined, in `_name_to_item`; `equinox<0.14` is pinned), so the two cannot disagree.
STOP_REASONS = tuple(StopReason._name_to_item)


def reason_item(name: str) -> StopReason:
    """The item `name` of `StopReason`: `reason_item("t1")` is `StopReason.t1`, typed as
    the item it is. equinox types `Enumeration` for pyright, as an `enum.Enum` with a
    metaclass of its own, which mypy cannot combine with `Enum`'s: mypy then reads
    `StopReason.t1` as the `str` written in the class body, and `StopReason[item]` as
    not indexable."""
    return getattr(StopReason, name)


FAILURES = {
    # the message of each failure; mypy cannot index StopReason: equinox's stub (reason_item)
    name: StopReason[reason_item(name)]  # type: ignore[misc]
    for name in ("max_steps", "dt_underflow", "nonfinite", "not_converged")
}


def stop_code(reason) -> Array:
    """The index into `STOP_REASONS` of a `StopReason` item (any batch shape)."""
    return sum(
        index * (reason == getattr(StopReason, name)).astype(int)
        for index, name in enumerate(STOP_REASONS)
    )


class EnergySolution(eqx.Module):
    """What `solvers.solve` returns. Shapes are for one sample; a batch adds a leading
    `B` axis to every array.

    - `ts: [T]`, `xs: [T, N, D]`: saved times and states (`save="final"`: only the end;
      `"steps"`: t0 and every accepted step; an array: those times).
    - `energy_ts: [S]`, `energies: [S]`: the energy trace (t0 and every accepted step)
      when `save_energy=True`, stored without states; otherwise `None`.
    - `x_final: [N, D]`, `t_final: []`: the end state and time (the stop time for a
      fixed-point stop).
    - `stats`: a dict: `solver` (the name, or the class name of a solver object),
      `stepsize_controller` (its class name; `PIDController` or `ConstantStepSize` for
      the shortcuts), `flow`, `adjoint`, tolerances (a controller's own for a controller
      object), `dtype`; `num_steps` (attempted), `num_accepted_steps`,
      `num_rejected_steps`, `nfe` (vector-field evaluations: by default derived from
      the tableau, exact for constant steps, a lower bound for FSAL methods under
      adaptive steps or `jump_ts`, an estimate for implicit solvers and for solvers
      whose count cannot be derived such as ReversibleHeun; exact for any solver with
      `count_evaluations=True` (then also `f_evals`, `jvp_evals`); `solver="auto"`'s own
      count, JVPs included; `nfe_is_estimate` says whether it is exact, `nfe_note` how
      it was counted), `residual_evals`
      (fixed-point checks), `residual_rms` and `residual_rms_initial` (RMS of G),
      `stop` (a `StopReason`), `stop_code` (its index into `STOP_REASONS`) and,
      outside `jax.jit`, `stop_reason` (its name).

    Outside `jax.jit` the saved arrays are trimmed to the steps taken (a batch keeps
    diffrax's `inf` padding for samples that took fewer steps); inside, they keep the
    padding of length `max_steps`.
    """

    ts: Float[Array, "*B T"]
    xs: Float[Array, "*B T N D"]
    energy_ts: Float[Array, "*B S"] | None
    energies: Float[Array, "*B S"] | None
    x_final: Float[Array, "*B N D"]
    t_final: Float[Array, "*B"]
    stats: dict

    @property
    def converged(self) -> Bool[Array, "*B"]:
        """Whether each sample stopped at a fixed point (fixed-point stop only)."""
        return self.stats["stop"] == StopReason.fixed_point
