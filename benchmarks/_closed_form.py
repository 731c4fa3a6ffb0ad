"""The paper's hand-written update (eq. 17, `et_ode.closed_form_update`) against
`jax.grad` of the energy (`model.energy_gradient`, what the library uses): does the
closed form beat autodiff by more than 10% on this machine? Measured on a batched
evaluation and inside the paper's 12-step Euler solve. Reported only: the model has no
option to use the closed form."""

import equinox as eqx
import jax
import jax.numpy as jnp

import et_ode

from ._common import pair_ratio, paper_solve, row, spread, time_interleaved

FAMILY = "closed_form"
THRESHOLD = 1.10


class ClosedFormField(eqx.Module):
    """The core with its vector field taken from the closed form (native flow only):
    enough of `solvers.EnergySystem` for a fixed-step solve."""

    model: et_ode.EnergyTransformer

    def energy(self, x, args=None):
        return self.model.energy(x, args)

    def residual(self, x, args=None):
        return self.model.residual(x, args)

    def vector_field(self, t, x, args=None, flow="native"):
        if flow != "native":
            raise ValueError("ClosedFormField only has the native flow.")
        return closed_form_field(self.model, x, args)


def closed_form_field(model, x, args=None):
    return et_ode.closed_form_update(model, x, args) / model.tau


def autodiff_field(model, x, args=None):
    return -model.energy_gradient(x, args) / model.tau


def run(problem, opts) -> list[dict]:
    model, x0 = problem.core, problem.x0
    closed = eqx.filter_jit(lambda m, x: jax.vmap(lambda s: closed_form_field(m, s))(x))
    auto = eqx.filter_jit(lambda m, x: jax.vmap(lambda s: autodiff_field(m, s))(x))
    wrapped = ClosedFormField(model)
    solve = paper_solve
    diff = float(jnp.max(jnp.abs(closed(model, x0) - auto(model, x0))))
    solve_diff = float(jnp.max(jnp.abs(solve(wrapped, x0) - solve(model, x0))))
    repeats = opts.reps(3 if opts.quick else None)
    times = time_interleaved(
        {
            "closed": lambda: closed(model, x0),
            "autodiff": lambda: auto(model, x0),
            "solve closed": lambda: solve(wrapped, x0),
            "solve autodiff": lambda: solve(model, x0),
        },
        repeats,
    )
    rows = []
    for label, name, ref, d in [
        (f"field evaluation, batch {problem.batch}", "closed", "autodiff", diff),
        ("inside euler-12 solve", "solve closed", "solve autodiff", solve_diff),
    ]:
        # value: how much faster the closed form is (autodiff time / closed-form time)
        speedup = pair_ratio(times, ref, name)
        beats = speedup["median"] > THRESHOLD
        rows.append(
            row(
                FAMILY,
                label,
                value=speedup["median"],
                unit="x faster",
                reference="jax.grad of the energy (model.energy_gradient)",
                spread_=speedup,
                goal=f"question: > {THRESHOLD} ?",
                met=None,
                note=(
                    "the closed form beats autodiff by more than 10%"
                    if beats
                    else "the closed form does not beat autodiff by more than 10%"
                )
                + f"; max |difference| {d:.2g}",
                closed_beats_autodiff_by_10pct=beats,
                max_abs_diff=d,
                seconds=spread(times[name]),
                reference_seconds=spread(times[ref]),
            )
        )
    return rows
