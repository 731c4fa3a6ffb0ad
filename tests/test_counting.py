"""Exact work counts (`solve(..., count_evaluations=True)`): for every named solver and
three diffrax objects (one implicit), `stats["f_evals"]` and `stats["jvp_evals"]` equal
an independent count kept by a test-only wrapper of the model (`jax.debug.callback` in
its vector field and in a JVP rule of its own; the wrapped solve is itself uncounted),
the counted solve's numbers equal the uncounted one's, and constant-step counts equal
the tableau's."""

import functools

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import make_state
from et_ode import solvers

TALLY = {"f": 0, "jvp": 0}


def _bump(kind, directions):
    TALLY[kind] += max(1, np.size(directions))


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _tallied_field(flow, model, t, x, args):
    jax.debug.callback(functools.partial(_bump, "f"), jnp.zeros(()))
    return model.vector_field(t, x, args, flow)


@_tallied_field.defjvp
def _tallied_field_jvp(flow, primals, tangents):
    model, t, x, args = primals
    out, d_out = jax.jvp(lambda m, t_, x_, a: m.vector_field(t_, x_, a, flow), primals, tangents)
    jax.debug.callback(functools.partial(_bump, "jvp"), jnp.sum(jnp.zeros_like(tangents[2])))
    return out, d_out


class TalliedModel(eqx.Module):
    """The test model with a vector field that tallies its evaluations and JVPs on the
    host: the independent count."""

    inner: eqx.Module

    def vector_field(self, t, x, args=None, flow="native"):
        return _tallied_field(flow, self.inner, t, x, args)

    def residual(self, x, args=None):
        return self.inner.residual(x, args)

    def energy(self, x, args=None):
        return self.inner.energy(x, args)

    def dEdt(self, x, args=None, flow="native"):
        return self.inner.dEdt(x, args, flow)

    def check_inputs(self, *a, **k):
        return self.inner.check_inputs(*a, **k)

    def tangent_projection(self, x, w, args=None):
        return self.inner.tangent_projection(x, w, args)


ADAPTIVE = dict(rtol=1e-5, atol=1e-7)
CASES: list[tuple[str | diffrax.AbstractSolver, dict[str, float]]] = [
    (name, ADAPTIVE if solvers.get_preset(name).adaptive else dict(dt0=0.1))
    for name in solvers.SOLVER_NAMES
]
CASES += [
    (diffrax.Tsit5(), ADAPTIVE),
    (diffrax.ReversibleHeun(), dict(dt0=0.1)),
    (diffrax.Kvaerno3(), ADAPTIVE),
]


@pytest.mark.parametrize(
    "solver, options",
    CASES,
    ids=lambda v: (
        getattr(v, "__name__", None)
        or (v if isinstance(v, str) else type(v).__name__ if not isinstance(v, dict) else "-")
    ),
)
def test_counts_equal_an_independent_tally(smooth_model, solver, options):
    """One solve, two counters: ours (around the solver's term) and the tally (inside
    the model), which must agree evaluation for evaluation."""
    TALLY.update(f=0, jvp=0)
    counted = solvers.solve(
        TalliedModel(smooth_model),
        make_state(),
        solver=solver,
        t1=0.3,
        flow="projected",
        count_evaluations=True,
        **options,
    )
    st = counted.stats
    assert int(st["f_evals"]) == TALLY["f"] > 0 and int(st["jvp_evals"]) == TALLY["jvp"]
    assert int(st["nfe"]) == TALLY["f"] + TALLY["jvp"] and not st["nfe_is_estimate"]
    preset = solvers.get_preset(solver)
    table = int(preset.nfe(st["num_steps"]))
    if "dt0" in options and not preset.implicit and preset.nfe_exact:
        assert int(st["nfe"]) == table  # constant steps: the tableau is exact
    if preset.implicit:  # Newton iterations and Jacobians: beyond the tableau
        assert int(st["jvp_evals"]) > 0 and int(st["nfe"]) > table


def test_counting_changes_no_number(smooth_model):
    x = make_state()
    plain = solvers.solve(smooth_model, x, solver=diffrax.Kvaerno3(), t1=0.3, **ADAPTIVE)
    counted = solvers.solve(
        smooth_model, x, solver=diffrax.Kvaerno3(), t1=0.3, count_evaluations=True, **ADAPTIVE
    )
    np.testing.assert_allclose(counted.x_final, plain.x_final, rtol=1e-13, atol=1e-15)
    assert plain.stats["nfe_is_estimate"] and not counted.stats["nfe_is_estimate"]


def test_batched_counts_are_per_sample(smooth_model):
    xb = make_state(batch=(2,))
    counted = solvers.solve(
        smooth_model, xb, solver="bosh3", t1=0.3, count_evaluations=True, **ADAPTIVE
    )
    for i in range(2):
        one = solvers.solve(
            smooth_model, xb[i], solver="bosh3", t1=0.3, count_evaluations=True, **ADAPTIVE
        )
        assert int(counted.stats["nfe"][i]) == int(one.stats["nfe"])
