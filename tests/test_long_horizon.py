"""The long-horizon study (`analysis.long_horizon`) on the tiny float64 model, short
horizons: the numbers mean what DESIGN.md section 3 says they should."""

import json

import numpy as np
import pytest
from conftest import make_model, make_state

from et_ode import analysis

T1 = 100.0


@pytest.fixture(scope="module")
def model():
    return make_model()


def _study(model, flow, **options):
    return analysis.long_horizon(model, make_state(), flows=(flow,), t1=T1, n_times=11,
                                 error_fn=lambda x: float(np.mean(np.asarray(x) ** 2)),
                                 error_name="mean square", **options)


@pytest.fixture(scope="module")
def native(model):
    return _study(model, "native", lyapunov_horizons=())


@pytest.fixture(scope="module")
def projected(model):
    """The projected flow with an explicit solver, stopped and held at its fixed point."""
    return _study(model, "projected", solver="tsit5", hold_tol="auto",
                  lyapunov_horizons=(1.0, 8.0), lyapunov_directions=2, lyapunov_segment=4.0)


@pytest.fixture(scope="module")
def projected_default(model):
    """The default: the projected flow integrated to T1 by the stiffness-switching solver."""
    return _study(model, "projected", lyapunov_horizons=())


def test_native_scales_grow_linearly_and_G_decays_as_a_power(native):
    rec = native["flows"]["native"]
    times = native["times"]
    assert rec["t_fixed_point"] is None and not rec["held"].any()
    assert list(rec["segments"]["stop_reason"]) == ["t1"] * (len(times) - 1)
    # s_A linear in t late: doubling t doubles the median scale (within 10 %)
    late = times >= T1 / 10
    ratio = rec["scales_median"][late] / times[late]
    assert ratio.max() / ratio.min() < 1.25
    assert rec["scale_growth_per_tau"] == pytest.approx(ratio[-1], rel=0.1)
    assert np.all(rec["scales_min"] <= rec["scales_median"])
    assert np.all(rec["scales_median"] <= rec["scales_max"])
    # G decays, slowly: a power of t, well below 1 (not exponentially)
    assert 0.1 < rec["residual_power"] < 1.0
    assert rec["residual_rms"][-1] < 0.7 * rec["residual_rms"][0]
    # E falls along the exact flow (to the solver's tolerance)
    assert np.all(np.diff(rec["energy"]) < 1e-6 * np.abs(rec["energy"][:-1]))
    # not stiff: the clock slows, and the accepted steps grow with t
    steps = rec["segments"]["mean_step"]
    assert steps[-1] > 20 * steps[0] and rec["total_steps"] < 200
    # the error callable was recorded at every time, and the switches are absent (tsit5)
    assert rec["error"].shape == times.shape and np.isfinite(rec["error"]).all()
    assert rec["total_switches"] is None and rec["lyapunov"] is None


def test_projected_reaches_and_holds_a_stable_fixed_point(model, projected):
    result = projected
    rec = result["flows"]["projected"]
    hold_tol = result["metadata"]["hold_tol"]
    assert hold_tol == pytest.approx(1e-3)  # "auto": 10 rtol
    t_fp = rec["t_fixed_point"]
    assert 1.0 < t_fp < 20.0
    held = rec["held"]
    assert held.any() and np.all(held == (result["times"] >= t_fp))
    # held times carry the fixed point: RMS G below the tolerance, scales constant
    assert np.all(rec["residual_rms"][held] < hold_tol)
    np.testing.assert_allclose(rec["scales_median"], rec["scales_median"][0], rtol=1e-4)
    assert rec["residual_rms"][-1] < 1e-3 * rec["residual_rms"][0]
    # perturbations of a stable fixed point shrink; over long horizons at the slowest
    # linear rate, lambda_min of C^1/2 H C^1/2 (analysis.stability), approached from below
    hess = analysis.hessian_eigenvalues(model, rec["x_end"], coordinates="x", k=1)
    assert hess["morse_index"] == 0
    rate = float(hess["smallest"][0])
    ftle = rec["lyapunov"]["exponents"]
    assert np.all(ftle < 0)
    assert np.all(ftle[:, 0] < ftle[:, 1])  # short horizons see the fast directions too
    assert np.all((-1.4 * rate < ftle[:, 1]) & (ftle[:, 1] < -0.95 * rate))


def test_projected_integrated_to_t1_by_default_with_stiffness_switches(projected,
                                                                       projected_default):
    rec = projected_default["flows"]["projected"]
    assert rec["solver"] == "auto" and projected_default["metadata"]["hold_tol"] is None
    assert rec["t_fixed_point"] is None and not rec["held"].any()
    assert list(rec["segments"]["stop_reason"]) == ["t1"] * (len(projected_default["times"]) - 1)
    # past convergence the flow is stiff: "auto" switches to its implicit step there
    assert rec["total_switches"] >= 1 and sum(rec["segments"]["implicit"]) > 0
    # integrated, not held, it converges far below the explicit solver's floor (10 rtol)
    assert rec["residual_rms"][-1] < 1e-6
    np.testing.assert_allclose(rec["scales_median"], rec["scales_median"][0], rtol=1e-4)
    # ... to the fixed point the held run found (its RMS G 1e-3: 6e-4 apart here)
    held_end = np.asarray(projected["flows"]["projected"]["x_end"])
    assert np.sqrt(np.mean((np.asarray(rec["x_end"]) - held_end) ** 2)) < 5e-3
    assert "projected flow (auto) ran to t = 100" in " ".join(projected_default["findings"])


def test_findings_plot_and_json(native, projected, tmp_path):
    result = dict(projected, flows=dict(native["flows"], **projected["flows"]))
    result["findings"] = analysis.long_horizon_findings(result)
    text = " ".join(result["findings"])
    assert "native flow (tsit5) ran to t = 100" in text
    assert "projected flow (tsit5) stopped at a fixed point" in text
    assert "shrink" in text and "The mean square went" in text
    assert projected["metadata"]["solver"] == {"projected": "tsit5"}
    path = analysis.save_json(tmp_path / "long.json", result)
    loaded = json.loads(open(path).read())
    assert loaded["flows"]["projected"]["t_fixed_point"] == result["flows"]["projected"][
        "t_fixed_point"]
    fig = analysis.plot_long_horizon(result, path=tmp_path / "long.png")
    assert len(fig.axes) == 6 and (tmp_path / "long.png").stat().st_size > 0
