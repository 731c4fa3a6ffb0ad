"""`find_fixed_point(method="anderson")`: Anderson acceleration of the flow's Euler map.

- On a linear gradient system with rates 1e-2 to 1 (an analytic fixed point, x = 0),
  constant-step Euler needs about kappa log(1/tol) steps; Anderson, which is GMRES on a
  linear map, a few times the dimension.
- On a tiny ReLU ET whose activations keep switching along the way, it reaches RMS G
  1e-8 with fewer evaluations of G than constant-step Euler (dt 0.1) to the same
  tolerance, at a point that Newton's method (dense Jacobian) confirms: Newton from it
  moves it by less than 1e-7.
- `method="auto"`, the default, is Newton on small states and Anderson on large ones
  (and the quick studies at the authors' size take their start from Anderson:
  `test_authors_checkpoint.py`).
- Bad settings are refused in one line naming the setting.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import make_model, make_state
from et_ode import solvers

RATES = np.logspace(-2, 0, 12)  # the Hessian's spectrum of the linear system


class Quadratic(eqx.Module):
    """`E = 1/2 x^T A x` summed over rows, `A = Q diag(RATES) Q^T`: a flat gradient system
    whose only fixed point is x = 0."""

    a: jax.Array

    def energy(self, x, args):
        return 0.5 * jnp.sum((x @ self.a) * x)

    def residual(self, x, args):
        return x @ self.a

    def vector_field(self, t, x, args, flow):
        return -self.residual(x, args)


def _quadratic():
    q = np.linalg.qr(np.random.default_rng(0).normal(size=(RATES.size, RATES.size)))[0]
    return Quadratic(jnp.asarray(q @ np.diag(RATES) @ q.T))


def _euler_evaluations(model, x0, tol, dt):
    sol = solvers.solve(
        model,
        x0,
        flow="projected",
        solver="euler",
        dt0=dt,
        t1=1e5,
        max_steps=100_000,
        stop=solvers.FixedPointStop(atol=tol),
        throw=False,
    )
    assert sol.stats["stop_reason"] == "fixed_point"
    return int(sol.stats["nfe"]), sol.x_final


def test_on_a_linear_system_anderson_is_a_krylov_method():
    model = _quadratic()
    x0 = jnp.asarray(np.random.default_rng(1).normal(size=(3, RATES.size)))
    euler, _ = _euler_evaluations(model, x0, 1e-10, dt=1.0)
    # Euler's slowest mode decays like (1 - 0.01)^k (measured: 1,656 steps)
    assert euler > 1000
    found = solvers.find_fixed_point(
        model,
        x0,
        method="anderson",
        tol=1e-10,
        anderson=solvers.AndersonSettings(dt=1.0, memory=RATES.size, warm_steps=0),
    )
    assert bool(found.success) and float(found.residual_rms) <= 1e-10
    assert int(found.steps) < 100  # measured 22
    np.testing.assert_allclose(np.asarray(found.x), 0.0, atol=1e-8)  # the analytic answer


def test_on_a_switching_relu_et_anderson_beats_euler_at_newtons_fixed_point():
    model = make_model(init_std=1.0, seed=3)
    x0 = make_state(seed=1)
    euler, x_euler = _euler_evaluations(model, x0, 1e-8, dt=0.1)
    # the activations switch along the way: the field is only piecewise smooth there
    before = model.norm(x0) @ model.hopfield.xi.T > 0
    after = model.norm(x_euler) @ model.hopfield.xi.T > 0
    assert int(jnp.sum(before != after)) >= 20  # measured 76 of 144
    found = solvers.find_fixed_point(model, x0, method="anderson", tol=1e-8)
    assert bool(found.success) and float(found.residual_rms) <= 1e-8
    assert int(found.steps) < euler  # measured 71 against 250 (50 of them warm steps)
    polished = solvers.find_fixed_point(model, found.x, tol=1e-12)
    assert bool(polished.success)
    moved = solvers.rms(model.norm(polished.x) - model.norm(found.x))
    assert float(moved) < 1e-7
    # a minimum: the energy is below the start's
    assert float(found.energy) < float(model.energy(x0))


@pytest.mark.parametrize(
    "options, words",
    [
        (dict(dt=0.0), ["dt must be a positive number"]),
        (dict(memory=0), ["memory must be an integer >= 1"]),
        (dict(warm_steps=-1), ["warm_steps must be an integer >= 0"]),
    ],
)
def test_bad_settings_are_refused(options, words):
    with pytest.raises(ValueError) as error:
        solvers.AndersonSettings(**options)
    assert all(w in str(error.value) for w in words), str(error.value)


def test_warm_steps_beyond_the_cap_are_refused(model, x0):
    with pytest.raises(ValueError, match=r"warm_steps \(60\) must be below max_steps \(50\)"):
        solvers.find_fixed_point(
            model,
            x0,
            method="anderson",
            max_steps=50,
            anderson=solvers.AndersonSettings(warm_steps=60),
        )


def test_auto_is_newton_on_small_states_and_anderson_on_large_ones(model, x0):
    # the method is chosen by size, whatever the tolerance: one step of each suffices
    small = solvers.find_fixed_point(model, x0, max_steps=1)
    assert small.method == "newton" and x0.size <= solvers.DENSE_MAX
    large_x0 = jnp.tile(x0, (solvers.DENSE_MAX // x0.size + 1, 1))
    large = solvers.find_fixed_point(
        model, large_x0, max_steps=3, anderson=solvers.AndersonSettings(warm_steps=1)
    )
    assert large.method == "anderson" and int(large.steps) <= 3


def test_a_large_adaptive_solve_that_will_crawl_says_so_first(monkeypatch, model, x0):
    """Before an adaptive solve of a large state (`PROBE_MIN_STATE` entries, lowered here
    to the tiny model's) `solve` measures its first steps and warns once where their
    mean would not reach t1 within max_steps; where it would, it says nothing."""
    import warnings

    from et_ode.solvers import _solve

    monkeypatch.setattr(_solve, "PROBE_MIN_STATE", 0)
    options = dict(
        flow="projected", solver="tsit5", throw=False, stop=solvers.FixedPointStop(atol=1e-9)
    )
    with pytest.warns(solvers.SlowSolveWarning) as caught:
        sol = solvers.solve(model, x0, rtol=1e-10, atol=1e-12, t1=1e4, max_steps=100, **options)
    assert sol.stats["stop_reason"] == "max_steps"
    (message,) = [str(w.message) for w in caught]
    assert "max_steps=100 reaches t = " in message and "find_fixed_point" in message
    with warnings.catch_warnings():
        warnings.simplefilter("error", solvers.SlowSolveWarning)
        sol = solvers.solve(model, x0, rtol=1e-4, atol=1e-6, t1=100.0, max_steps=4096, **options)
