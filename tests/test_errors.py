"""Bad input gets a ValueError that names the problem and the fix; a failed solve says
why, with its statistics."""

import re

import jax.numpy as jnp
import numpy as np
import pytest

import et_ode
from conftest import DIM, N_TOKENS, make_model, make_state
from et_ode import solvers


@pytest.mark.parametrize(
    "kwargs, x_shape, message",
    [
        ({}, (N_TOKENS, DIM + 1), r"x must have shape \[N, 16\]"),
        ({}, (DIM,), r"x0 must have shape \[N, D\] or \[B, N, D\]"),
        ({}, (2, 2, N_TOKENS, DIM), r"x0 must have shape"),
        ({"dt0": 0.0}, None, "dt0 must be a positive finite number"),
        ({"dt0": -0.1}, None, "dt0 must be a positive finite number"),
        ({"dt0": None}, None, "Constant steps need dt0 > 0"),
        ({"t1": -1.0}, None, "t1 must be finite and greater than t0"),
        ({"t1": float("inf")}, None, "t1 must be finite"),
        ({"solver": "rk4"}, None, "Unknown solver 'rk4'; choose one of euler, heun"),
        ({"flow": "riemannian"}, None, "Unknown flow 'riemannian'; use 'native'"),
        ({"adjoint": "adjoint"}, None, "Unknown adjoint 'adjoint'; choose one of checkpoint"),
        ({"rtol": 1e-6, "atol": 1e-8}, None, "solver 'euler' has no error estimate"),
        ({"solver": "tsit5", "rtol": 1e-6}, None, "needs both rtol and atol"),
        ({"solver": "kvaerno5"}, None, "solver 'kvaerno5' is implicit"),
        ({"save": "everything"}, None, "save must be 'final', 'steps' or an array"),
        ({"save": jnp.array([0.5, 2.0])}, None, r"within \[t0, t1\]"),
        ({"adjoint": "backsolve", "save_energy": True}, None, "backsolve' cannot be combined"),
        ({"adjoint": "backsolve", "save": "steps"}, None, "backsolve' cannot be combined"),
        (
            {"adjoint": "backsolve", "stop": solvers.FixedPointStop()},
            None,
            "backsolve' cannot be combined with a fixed-point stop",
        ),
        ({"adjoint": "implicit"}, None, "adjoint='implicit' differentiates a fixed point"),
        ({"max_steps": 0}, None, "max_steps must be a positive integer"),
        ({"max_steps": 2**31}, None, r"max_steps = 2147483648 is above the limit of 2147483647"),
        ({"max_steps": 10**20}, None, "max_steps = 100000000000000000000 is above the limit"),
        (
            {"dt0": 1e-300},
            None,
            r"dt0 = 1e-300 from t0 = 0 to t1 = 1.2 is 1.2e\+300 constant steps, above the limit "
            r"of 2147483647 .*use dt0 >= 5.59e-10, or adaptive steps",
        ),
        ({"dt0": 1e-300, "max_steps": 10}, None, "dt0 = 1e-300 .* constant steps"),
        ({"dt0": 5e-324, "t1": 1e300}, None, "is inf constant steps"),
    ],
)
def test_bad_solve_arguments(model, x0, kwargs, x_shape, message, no_runtime_types):
    # no_runtime_types: a flow or adjoint outside its Literal must reach solve's own
    # check, whose message names the choices
    x = x0 if x_shape is None else jnp.ones(x_shape)
    with pytest.raises(ValueError, match=message):
        solvers.solve(model, x, **kwargs)


# no_runtime_types, here and below: the bad value has the wrong type for the annotation
# (`stop: FixedPointStop | None`, `key_mask: Bool[Array, ...]`), which the suite's
# run-time type checks would refuse before et_ode's own message, the one users get.
def test_stop_must_be_a_fixed_point_stop(model, x0, no_runtime_types):
    with pytest.raises(ValueError, match="stop must be None or a solvers.FixedPointStop"):
        solvers.solve(model, x0, stop=1e-6)


def test_non_finite_initial_state(model, x0):
    with pytest.raises(ValueError, match="x0 contains NaN or inf"):
        solvers.solve(model, x0.at[0, 0].set(jnp.nan))


def test_integer_state_refused(model):
    with pytest.raises(ValueError, match="floating-point"):
        solvers.solve(model, jnp.ones((N_TOKENS, DIM), jnp.int32))


def test_bad_conditions(model, x0):
    with pytest.raises(ValueError, match=r"Conditions.clamped has shape \(5,\), expected \(6,\)"):
        solvers.solve(model, x0, args=et_ode.Conditions(clamped=jnp.ones(5, bool)))
    with pytest.raises(ValueError, match="Conditions.field contains NaN"):
        solvers.solve(model, x0, args=et_ode.Conditions(field=jnp.full((6, DIM), jnp.nan)))
    with pytest.raises(ValueError, match="args_batched=True needs a batched x0"):
        solvers.solve(model, x0, args_batched=True)
    with pytest.raises(TypeError, match="args must be an et_ode.Conditions"):
        model.energy(x0, {"mask": 1})


def test_float_key_mask_refused(model, x0, no_runtime_types):
    with pytest.raises(ValueError, match="Conditions.key_mask must be a boolean"):
        solvers.solve(model, x0, args=et_ode.Conditions(key_mask=jnp.ones((6, 6))))


def test_not_an_energy_system(x0, no_runtime_types):
    with pytest.raises(ValueError, match="satisfying solvers.EnergySystem"):
        solvers.solve(object(), x0)


def test_bad_fixed_point_stop():
    with pytest.raises(ValueError, match="not both zero"):
        solvers.FixedPointStop(atol=0.0, rtol=0.0)


def test_max_steps_reported(model, x0):
    with pytest.raises(solvers.SolveError, match="maximum number of steps") as info:
        solvers.solve(model, x0, solver="tsit5", rtol=1e-8, atol=1e-10, t1=50.0, max_steps=5)
    err = info.value
    assert err.reason == "max_steps"
    assert int(err.stats["num_steps"]) == 5
    assert "num_steps=5" in str(err) and "solver=tsit5" in str(err)
    assert "grew" not in str(err)  # a state that did not grow is not called a blow-up
    sol = solvers.solve(
        model, x0, solver="tsit5", rtol=1e-8, atol=1e-10, t1=50.0, max_steps=5, throw=False
    )
    assert sol.stats["stop_reason"] == "max_steps"


class _BlowUp:
    """A non-ET energy system, `dx/dt = x^2`, which reaches infinity at t = 1/x0: the
    protocol is all that solvers needs."""

    def energy(self, x, args):
        return -jnp.sum(x**3) / 3

    def vector_field(self, t, x, args, flow):
        return x**2

    def residual(self, x, args):
        return x**2


class _Shaped:
    """`x' = -x`, its field returned as `shape_of(-x)`: of the wrong shape or dtype."""

    def __init__(self, shape_of):
        self.shape_of = shape_of

    def energy(self, x, args):
        return 0.5 * jnp.sum(x**2)

    def vector_field(self, t, x, args, flow):
        return self.shape_of(-x)

    def residual(self, x, args):
        return x


@pytest.mark.parametrize(
    "shape_of, got",
    [
        (lambda v: v[:, :1], r"shape \(2, 1\), dtype float32"),  # broadcast, once silently
        (lambda v: v.sum(), r"shape \(\), dtype float32"),
        (lambda v: v.astype(jnp.int32), r"shape \(2, 3\), dtype int32"),
        (lambda v: v.ravel(), r"shape \(6,\), dtype float32"),
    ],
)
def test_a_field_of_another_shape_or_dtype_is_refused(shape_of, got):
    with pytest.raises(
        ValueError,
        match=r"vector_field must return .* shape \(2, 3\) and dtype float32 \(got " + got,
    ):
        solvers.solve(
            _Shaped(shape_of),
            jnp.ones((2, 3), jnp.float32),
            solver="tsit5",
            rtol=1e-4,
            atol=1e-6,
            t1=1.0,
        )


def test_constant_steps_below_the_times_resolution_are_refused():
    # float32 resolves 0.0078 at t = 1e5: steps of 1e-3 would round to 0 or 0.0078
    with pytest.raises(
        ValueError, match=r"dt0 = 0.001 is below what float32 resolves at t = 100005"
    ):
        solvers.solve(_BlowUp(), jnp.ones((2, 3), jnp.float32), dt0=1e-3, t0=1e5, t1=1e5 + 5.0)


def test_non_finite_state_reported():
    assert isinstance(_BlowUp(), solvers.EnergySystem)
    with pytest.raises(solvers.SolveError, match="non-finite") as info:
        solvers.solve(_BlowUp(), jnp.ones((2, 3)), dt0=0.5, t1=100.0)
    assert info.value.reason == "nonfinite"


def test_a_blow_up_in_finite_time_is_named_with_when():
    # adaptive steps shrink towards t = 1/x0 = 1 with the state finite: the failure
    # (step size underflow) says how far the state grew, and by when
    with pytest.raises(solvers.SolveError, match="step size underflow") as info:
        solvers.solve(_BlowUp(), jnp.ones((2, 3)), solver="tsit5", rtol=1e-6, atol=1e-9, t1=5.0)
    found = re.search(
        r"RMS grew from 1 to ([0-9.e+]+) by t = ([0-9.]+), ever faster .* blows up in finite",
        str(info.value),
    )
    assert found, str(info.value)
    assert float(found[1]) >= solvers._blowup.BLOWUP_GROWTH
    assert abs(float(found[2]) - 1.0) < 1e-3  # the blow-up time 1/x0


@pytest.mark.parametrize(
    "growth, rate_start, rate_end, elapsed, blowing_up",
    [
        # x' = x^2 from 1, at t = 1 - 1e-6: x = 1e6, its rate |f|/|x| = x
        (1e6, 1.0, 1e6, 1.0 - 1e-6, True),
        # linear growth x = 1 + t (the ET's native flow inflating x) to t = 1e6: rate 1/x
        (1e6, 1.0, 1.0 / (1.0 + 1e6), 1e6, False),
        # exponential growth at rate 1 to t = 14: grown 1.2e6 at a constant rate
        (np.exp(14.0), 1.0, 1.0, 14.0, False),
        # a limit cycle of amplitude 2 from 1e-5 (Van der Pol), at t = 2e4: its rate a
        # frequency, 0.5 at the start, 2 on the cycle
        (2e5, 0.5, 2.0, 2e4, False),
        # x' = x^2 stopped early, grown only 100-fold
        (1e2, 1.0, 1e2, 0.99, False),
    ],
)
def test_what_is_called_a_blow_up(growth, rate_start, rate_end, elapsed, blowing_up):
    note = solvers.growth_note(1.0, growth, rate_start, rate_end * growth, elapsed, elapsed)
    assert bool(note) == blowing_up, note


def test_step_size_underflow_reported(model, x0):
    with pytest.raises(solvers.SolveError, match="step size underflow") as info:
        solvers.solve(
            model, x0, solver="heun", rtol=1e-14, atol=1e-16, t1=5.0, dtmin=1e-3, max_steps=10000
        )
    assert info.value.reason == "dt_underflow"


def test_float32_stall_at_large_t_is_dt_underflow():
    # At t = 1000 a float32 step below ~1e-4 cannot advance t: the default dtmin says so
    # instead of burning max_steps on steps that change nothing.
    model32 = make_model(dtype=jnp.float32)
    sol = solvers.solve(
        model32,
        make_state(dtype=jnp.float32),
        solver="heun",
        rtol=1e-12,
        atol=1e-14,
        t0=1000.0,
        t1=1005.0,
        max_steps=4000,
        throw=False,
    )
    assert sol.stats["stop_reason"] == "dt_underflow"
    assert int(sol.stats["num_steps"]) < 100


def test_failure_inside_jit_raises(model, x0):
    import jax

    solve_jitted = jax.jit(
        lambda x: (
            solvers.solve(
                model, x, solver="tsit5", rtol=1e-8, atol=1e-10, t1=50.0, max_steps=5
            ).x_final
        )
    )
    with pytest.raises(Exception, match="failed inside jax.jit"):
        jax.block_until_ready(solve_jitted(x0))


def test_dtype_mismatch_is_named(model, x0):
    with pytest.raises(ValueError, match="cast x0 to the model's dtype"):
        solvers.solve(model, x0.astype(jnp.float32))


def test_field_strength_is_an_array_so_values_do_not_recompile(model, x0):
    from et_ode.solvers._plumbing import solve_core

    field = make_state(seed=2)
    sizes = []
    for strength in (0.5, 0.7, 0.9):
        solvers.solve(model, x0, args=et_ode.Conditions(field=field, field_strength=strength))
        sizes.append(solve_core._cached._cache_size())
    assert sizes[0] == sizes[1] == sizes[2]


def test_step_limits_are_exact(model, x0):
    """The limit itself passes `check_options`; one more step is refused (and a tiny
    first step of adaptive steps, or a tiny constant step before a fixed-point stop,
    is not a step count: allowed)."""
    limit = solvers.MAX_STEPS_LIMIT
    assert limit == 2**31 - 1
    assert solvers.check_options(max_steps=limit) is False
    assert solvers.check_options(t1=1.0, dt0=1.0 / (limit - 1)) is False
    with pytest.raises(ValueError, match="constant steps, above the limit"):
        solvers.check_options(t1=1.0, dt0=1.0 / limit)
    assert solvers.check_options(solver="tsit5", dt0=1e-300, rtol=1e-3, atol=1e-5) is True
    assert solvers.check_options(dt0=1e-300, stop=solvers.FixedPointStop()) is False
    # a solve with the largest cap runs (diffrax's int32 counter) and stops on its own
    sol = solvers.solve(model, x0, solver="tsit5", rtol=1e-3, atol=1e-5, t1=0.1, max_steps=limit)
    assert sol.stats["stop_reason"] == "t1"
