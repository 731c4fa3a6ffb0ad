"""Typed results of the energy room (`analysis.energy`): each study returns its type,
read by key and by attribute alike, written to JSON with the keys its dict had
(`to_json()` is `analysis.to_json` of its mapping) and read back (`from_json`) with its
arrays, its NaN and its nested records (by flow, by run, by part) typed again.

Cheap cases: a flat double well `E = (a^2 - 1)^2 + (3/2) b^2` (state `[1, 2]`, as in
test_verdicts.py) for all but `contributions`, which needs the ET's `update_parts` (the
tiny ET of conftest); short horizons."""

import dataclasses
import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import N_TOKENS, make_model, make_state
from et_ode import analysis, solvers
from et_ode.analysis import energy


class DoubleWell(eqx.Module):
    """`E = (a^2 - 1)^2 + (3/2) b^2` on a state `[1, 2]`: minima at `(+-1, 0)`, a saddle at
    the origin; a flat gradient system (no token scales, no clock)."""

    def energy(self, x, args=None):
        a, b = x[0, 0], x[0, 1]
        return (a**2 - 1.0) ** 2 + 1.5 * b**2

    def residual(self, x, args=None):
        return jax.grad(self.energy)(x, args)

    def vector_field(self, t, x, args=None, flow="native"):
        return -self.residual(x, args)


WELL = DoubleWell()
START = jnp.array([[0.6, 0.4]])
TIGHT = solvers.SolveOptions(solver="tsit5", rtol=1e-8, atol=1e-10, max_steps=100_000)


def _same(a, b):
    """Equal values, arrays by value (NaN equal to NaN)."""
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray), type(b)
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b or (a != a and b != b), (a, b)


def check(result, kind):
    """`result` is a `kind`, read alike by key and attribute, frozen; its JSON is its
    dict's, key for key; read back it is a `kind` again, with the same JSON and its
    arrays numpy arrays. Returns what was read back."""
    assert isinstance(result, kind)
    for key in result:
        assert result[key] is getattr(result, key)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.metadata = None
    with pytest.raises(TypeError):
        result["metadata"] = None  # read-only: a new dict is dict(result, metadata=...)
    data = json.loads(json.dumps(result.to_json()))
    assert data == analysis.to_json(dict(result))
    assert set(data) == set(result)
    back = kind.from_json(data)
    assert isinstance(back, kind) and set(back) == set(result)
    assert back.to_json() == data
    for key, value in result.items():
        if isinstance(value, np.ndarray) and value.ndim and value.size:
            _same(np.asarray(value, back[key].dtype), back[key])
    return back


@pytest.fixture(scope="module")
def et():
    return make_model(), make_state()


def test_convergence():
    """Per flow a `ConvergenceFlow` with the Hessian's prediction; read back, the records
    are typed again and a scalar NaN (the native flow's time to a tolerance it was not
    asked for, the clock scaling a flat model has none of) is NaN, not None."""
    result = analysis.convergence(
        WELL,
        START,
        t1=4.0,
        options=TIGHT,
        settings=analysis.ConvergenceSettings(
            n_times=8, t_first=0.1, chunks=1, fixed_point_atol={"projected": 1e-4, "native": None}
        ),
    )
    back = check(result, energy.Convergence)
    assert set(result.flows) == set(back.flows) == {"native", "projected"}
    for flow, rec in back.flows.items():
        assert isinstance(rec, energy.ConvergenceFlow)
        assert set(rec) == set(result.flows[flow]) and "rate_ratio" in rec
        assert rec.scales is None and np.isnan(rec.predicted_rate_scaled)
        np.testing.assert_array_equal(rec.residual_rms, result.flows[flow].residual_rms)
    native, projected = back.flows["native"], back.flows["projected"]
    assert native.stop_reason is None and np.isnan(native.time_to_tolerance)
    assert projected.stop_reason == "fixed_point"
    assert projected.predicted_rate == result["flows"]["projected"]["predicted_rate"]


def test_convergence_without_the_hessian_has_none_of_its_keys():
    """`hessian=False` (a batch): the prediction's keys are absent, not None."""
    result = analysis.convergence(
        WELL,
        jnp.stack([START, -START]),
        flows=("projected",),
        t1=4.0,
        options=TIGHT,
        settings=analysis.ConvergenceSettings(
            n_times=8, t_first=0.1, chunks=1, fixed_point_atol=1e-4, hessian=False
        ),
    )
    back = check(result, energy.Convergence)
    rec = back.flows["projected"]
    assert "predicted_rate" not in rec and rec.predicted_rate is None
    assert result.batched and rec.residual_rms.shape == (2, 9) and len(rec.stop_reason) == 2


def test_energy_descent_and_energy_rises():
    result = analysis.energy_descent(WELL, START, None, [("euler", 0.3)], t1=3.0)
    back = check(result, energy.EnergyDescent)
    (run,) = back.runs
    assert isinstance(run, energy.EnergyDescentRun) and isinstance(run.rises, energy.EnergyRises)
    assert run.label == "euler dt 0.3" and run.rises.steps == result.runs[0].rises.steps
    np.testing.assert_array_equal(run.energies, result.runs[0].energies)
    # a SolveOptions item: its solver and steps, on the study's flow and cap
    same = analysis.energy_descent(WELL, START, None, [solvers.SolveOptions(dt0=0.3)], t1=3.0)
    assert same.runs[0].label == "euler dt 0.3"
    np.testing.assert_array_equal(same.runs[0].energies, result.runs[0].energies)
    rises = analysis.energy_rises(np.array([3.0, 2.0, 2.5, 1.0]))
    back = check(rises, energy.EnergyRises)
    assert rises.real_rises == 1 and list(back.real_rise_steps) == [1]


@pytest.fixture(scope="module")
def saddle():
    """The double well's saddle, from a point near it: its exponent capped."""
    return analysis.stability(
        WELL,
        jnp.array([[0.03, -0.02]]),
        settings=analysis.StabilitySettings(lyapunov_time=20.0, lyapunov_segments=4),
    )


def test_stability(saddle):
    back = check(saddle, energy.Stability)
    assert isinstance(saddle.lyapunov, energy.StabilityLyapunov)
    assert isinstance(back.lyapunov, energy.StabilityLyapunov)
    assert back.lyapunov.capped_from == 20.0 and back.verdict["code"] == "saddle"
    assert saddle.flow_eigenvalues is None and "smallest_magnitude" not in saddle
    np.testing.assert_array_equal(back.x, saddle.x)


def test_lyapunov_exponent_and_finite_time_lyapunov(saddle):
    exponent = analysis.lyapunov_exponent(WELL, saddle.x, t1=1.0, segments=2)
    back = check(exponent, energy.LyapunovExponent)
    assert "capped_from" not in exponent and back.exponent == exponent.exponent
    ftle = analysis.finite_time_lyapunov(WELL, saddle.x, horizons=(0.5, 1.0), directions=2)
    back = check(ftle, energy.FiniteTimeLyapunov)
    assert back.exponents.shape == (2, 2) and back.coordinates == "x"


def test_fixed_points():
    starts = jnp.stack([START, START + 0.01, -START])
    result = analysis.fixed_points(
        WELL,
        starts,
        options=TIGHT,
        settings=analysis.FixedPointSettings(fixed_point_atol=1e-8, morse_index=True),
    )
    back = check(result, energy.FixedPoints)
    assert back.n_distinct == 2 and list(back.morse_index) == [0, 0, 0]
    assert back.converged.dtype == bool and back.labels == result.labels


def test_long_horizon():
    """A flat model: no scales (keys, None); per flow a `LongHorizonFlow`, its exponents
    a `FiniteTimeLyapunov`; the findings read the typed result."""
    result = analysis.long_horizon(
        WELL,
        START,
        flows=("native",),
        t1=10.0,
        options=analysis.LONG_HORIZON_OPTIONS["native"].replace(rtol=1e-6, atol=1e-8),
        settings=analysis.LongHorizonSettings(
            n_times=9, lyapunov_horizons=(1.0,), lyapunov_directions=2
        ),
    )
    back = check(result, energy.LongHorizon)
    rec = back.flows["native"]
    assert isinstance(rec, energy.LongHorizonFlow) and rec.scales_median is None
    assert isinstance(rec.lyapunov, energy.FiniteTimeLyapunov)
    assert np.isnan(rec.error).all()  # no error_fn: NaN, written as null, NaN again
    assert analysis.long_horizon_findings(back) == result.findings


def test_work_precision():
    result = analysis.work_precision(
        WELL,
        START,
        solvers=("tsit5",),
        tolerances=(1e-4,),
        fixed_solvers=("euler",),
        step_sizes=(0.1,),
        settings=analysis.WorkPrecisionSettings(repeats=1, reference_solver="tsit5"),
    )
    back = check(result, energy.WorkPrecision)
    adaptive, fixed = back.runs
    assert isinstance(adaptive, energy.WorkPrecisionRun) and adaptive.kind == "adaptive"
    assert "dt0" not in adaptive and "rtol" not in fixed and fixed.dt0 == 0.1
    # an untyped dict field keeps JSON's lists (its keys are data: no annotation says which
    # of them are arrays)
    np.testing.assert_array_equal(
        np.asarray(back.reference["x_final"]), result.reference["x_final"]
    )


def test_contributions(et):
    model, x0 = et
    masked = np.arange(N_TOKENS) < 2
    result = analysis.contributions(model, x0, None, np.linspace(0.0, 0.2, 3), masked)
    back = check(result, energy.Contributions)
    for part in ("attention", "hopfield", "external", "total", "attention_fraction"):
        assert isinstance(back[part], energy.TokenGroups) and set(back[part]) == {
            "masked",
            "visible",
        }
        np.testing.assert_array_equal(back[part].masked, result[part]["masked"])


def test_settings_and_options_are_checked_in_one_line(no_runtime_types):
    """Each settings object refuses a bad field naming it; a study refuses options that
    are no `SolveOptions`, and `long_horizon` a mapping that misses a flow or whose flows
    differ in their step control; the defaults are the studies' own (JSON by name)."""
    bad = [
        (lambda: analysis.ConvergenceSettings(chunks=0), "ConvergenceSettings.chunks"),
        (
            lambda: analysis.ConvergenceSettings(fixed_point_atol={"sideways": 1e-6}),
            "ConvergenceSettings.fixed_point_atol",
        ),
        (lambda: analysis.LongHorizonSettings(hold_tol=-1.0), "LongHorizonSettings.hold_tol"),
        (lambda: analysis.StabilitySettings(method="qr"), "StabilitySettings.method"),
        (
            lambda: analysis.StabilitySettings(
                polish=analysis.NewtonSettings(preconditioner=lambda v, x, p, a: v)
            ),
            "StabilitySettings.polish.preconditioner",
        ),
        (lambda: analysis.FixedPointSettings(distance_tol=0.0), "FixedPointSettings.distance_tol"),
        (lambda: analysis.WorkPrecisionSettings(repeats=0), "WorkPrecisionSettings.repeats"),
    ]
    for make, name in bad:
        with pytest.raises(ValueError) as error:
            make()
        assert name in str(error.value) and "\n" not in str(error.value)
    with pytest.raises(TypeError, match="convergence's options must be a solvers.SolveOptions"):
        analysis.convergence(WELL, START, options=dict(solver="tsit5"))
    native = analysis.LONG_HORIZON_OPTIONS["native"]
    with pytest.raises(ValueError, match="none for the projected flow"):
        analysis.long_horizon(WELL, START, options={"native": native})
    with pytest.raises(ValueError, match="must share rtol and atol"):
        analysis.long_horizon(
            WELL, START, options={"native": native, "projected": native.replace(rtol=1e-6)}
        )
    assert analysis.STABILITY_OPTIONS.flow == "projected"
    assert analysis.StabilitySettings().polish.newton_tol == energy._settings.POLISH_TOL
    settings = analysis.LongHorizonSettings(error_fn=np.mean)
    assert settings.to_json()["error_fn"] == "mean"
    assert settings.replace(seed=3).seed == 3 and settings.seed == 0
