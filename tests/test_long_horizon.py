"""The long-horizon study (`analysis.long_horizon`) on the tiny float64 model and on a flat
(non-ET) modern Hopfield network, short horizons: the numbers mean what
docs/mathematics.md says they should, and the decay laws, fixed-point times, energy reference and
Lyapunov exponents agree with answers computed independently here."""

import json
import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import make_model, make_state
from et_ode import analysis
from et_ode.vocab import FLOWS

T1 = 100.0
N_TIMES = 25  # six records per decade of time: enough to tell an exponential decay


@pytest.fixture(scope="module")
def model():
    return make_model()


def _study(model, flows, options=analysis.LONG_HORIZON_OPTIONS, **settings):
    return analysis.long_horizon(
        model,
        make_state(),
        flows=flows,
        t1=T1,
        options=options,
        settings=analysis.LongHorizonSettings(
            n_times=N_TIMES,
            error_fn=lambda x: float(np.mean(np.asarray(x) ** 2)),
            error_name="mean square (x units^2)",
            **settings,
        ),
    )


@pytest.fixture(scope="module")
def both(model):
    """Both flows, integrated to T1 (tsit5 native, "auto" projected)."""
    return _study(model, FLOWS, lyapunov_horizons=())


@pytest.fixture(scope="module")
def projected(model):
    """The projected flow with an explicit solver, stopped and held at its fixed point."""
    return _study(
        model,
        ("projected",),
        options=analysis.LONG_HORIZON_OPTIONS["native"],  # tsit5, here on the projected flow
        hold_tol="auto",
        lyapunov_horizons=(1.0, 8.0),
        lyapunov_directions=2,
        lyapunov_segment=4.0,
    )


def test_native_scales_grow_linearly_and_G_decays_as_a_power(both):
    rec = both["flows"]["native"]
    times = both["times"]
    assert not rec["held"].any() and rec["t_hold"] is None
    assert list(rec["segments"]["stop_reason"]) == ["t1"] * (len(times) - 1)
    # s_A linear in t late: doubling t doubles the median scale (within 10 %)
    late = times >= T1 / 10
    ratio = rec["scales_median"][late] / times[late]
    assert ratio.max() / ratio.min() < 1.25
    assert rec["scale_growth_per_tau"] == pytest.approx(ratio[-1], rel=0.1)
    assert np.all(rec["scales_min"] <= rec["scales_median"])
    assert np.all(rec["scales_median"] <= rec["scales_max"])
    # G decays slowly, as a power of t (measured: t^-0.22 over t = 4-100, RMS log
    # residual 0.025 against 0.073 for the best exponential), and never reaches a fixed point
    decay = rec["decay"]
    assert decay["law"] == "power law" and 0.1 < decay["rate"] < 1.0
    assert decay["n_points"] >= 8 and decay["window"][1] == T1
    assert decay["exponential"]["rms_log_residual"] > 2 * decay["power_law"]["rms_log_residual"]
    assert rec["t_fixed_point"] is None and rec["t_fixed_point_bracket"] is None
    assert rec["residual_rms"].min() > 100 * both["metadata"]["fixed_point_tol"]
    # E falls along the exact flow (to the solver's tolerance)
    assert np.all(np.diff(rec["energy"]) < 1e-6 * np.abs(rec["energy"][:-1]))
    # not stiff: the clock slows, and the accepted steps grow with t
    steps = rec["segments"]["mean_step"]
    assert steps[-1] > 20 * steps[0] and rec["total_steps"] < 300
    # the error callable was recorded at every time, and the switches are absent (tsit5)
    assert rec["error"].shape == times.shape and np.isfinite(rec["error"]).all()
    assert rec["total_switches"] is None and rec["lyapunov"] is None


def test_projected_decays_exponentially_to_a_fixed_point_with_stiffness_switches(model, both):
    rec = both["flows"]["projected"]
    meta = both["metadata"]
    assert rec["solver"] == "auto" and meta["hold_tol"] is None and rec["t_hold"] is None
    assert not rec["held"].any()
    assert list(rec["segments"]["stop_reason"]) == ["t1"] * (len(both["times"]) - 1)
    # past convergence the flow is stiff: "auto" switches to its implicit step there
    assert rec["total_switches"] >= 1 and sum(rec["segments"]["implicit"]) > 0
    # integrated, not held, it converges far below the explicit solver's floor (10 rtol)
    assert rec["residual_rms"][-1] < 1e-6
    np.testing.assert_allclose(rec["scales_median"], rec["scales_median"][0], rtol=1e-4)
    # the fixed point: RMS G first below fixed_point_tol ("auto": 10 rtol) between two
    # records, interpolated in log G (measured t = 5.4), and below it from then on
    tol = meta["fixed_point_tol"]
    assert tol == pytest.approx(10 * meta["rtol"])
    lo, hi = rec["t_fixed_point_bracket"]
    g = dict(zip(rec["state_times"], rec["residual_rms"]))
    assert g[lo] >= tol > g[hi] and lo < rec["t_fixed_point"] <= hi
    assert 1.0 < rec["t_fixed_point"] < 20.0 and rec["fixed_point_stays"]
    # the decay law is exponential (measured over t = 0.8-4.1: RMS log residual 0.44
    # against 0.79 for the best power law), its rate positive, its late rate positive
    decay = rec["decay"]
    assert decay["law"] == "exponential" and decay["rate"] > 0.5
    assert decay["power_law"]["rms_log_residual"] > 1.5 * decay["exponential"]["rms_log_residual"]
    assert decay["window"][1] <= rec["t_fixed_point"] and decay["late"]["rate"] > 0.5


def test_one_energy_reference_for_both_flows(both):
    """E_ref is the projected flow's fixed point, and the native flow, which has not
    converged, stays above it (it no longer drops to its own minimum)."""
    reference = both["energy_reference"]
    native, projected = both["flows"]["native"], both["flows"]["projected"]
    assert reference["flow"] == "projected" and reference["at_fixed_point"]
    assert reference["value"] == min(native["energy"].min(), projected["energy"].min())
    assert "projected flow's fixed point" in reference["label"]
    assert both["metadata"]["energy_reference"] == reference["label"]
    np.testing.assert_allclose(
        native["energy_above_reference"], native["energy"] - reference["value"]
    )
    assert np.all(native["energy_above_reference"] > 10)  # measured: 53.8 at t = 100
    assert abs(projected["energy_above_reference"][-1]) < 1e-10 * abs(reference["value"])
    text = " ".join(both["findings"])
    assert "The native flow (tsit5) ran to t = 100" in text
    assert "reached no fixed point (RMS G stayed above 0.001)" in text
    assert "RMS G decayed like a power of t, t^-0." in text  # measured t^-0.217
    assert "The projected flow (auto) ran to t = 100" in text
    assert "RMS G decayed exponentially at rate" in text
    # the native flow's end sits above the projected fixed point (measured 53.8; the
    # number moves with the adaptive steps' rounding, so only its form is checked here)
    assert re.search(r"Its energy ended \d+(\.\d+)? above E_ref", text)
    assert "Its energy ended at E_ref" in text


def test_projected_reaches_and_holds_a_stable_fixed_point(model, projected):
    result = projected
    rec = result["flows"]["projected"]
    hold_tol = result["metadata"]["hold_tol"]
    assert hold_tol == pytest.approx(1e-3)  # "auto": 10 rtol
    t_hold = rec["t_hold"]
    assert 1.0 < t_hold < 20.0
    held = rec["held"]
    assert held.any() and np.all(held == (result["times"] >= t_hold))
    assert np.all(rec["state_times"][held] == t_hold)
    # the fixed point was reached (fixed_point_tol = hold_tol here) by the time the hold began
    assert rec["t_fixed_point"] <= t_hold
    # held times carry the fixed point: RMS G below the tolerance, scales constant
    assert np.all(rec["residual_rms"][held] < hold_tol)
    np.testing.assert_allclose(rec["scales_median"], rec["scales_median"][0], rtol=1e-4)
    assert rec["residual_rms"][-1] < 1e-3 * rec["residual_rms"][0]
    # the decay law is fitted on the integrated records only: the same as integrated
    assert rec["decay"]["law"] == "exponential"
    # perturbations of a stable fixed point shrink; over long horizons at the slowest
    # linear rate, lambda_min of C^1/2 H C^1/2 (analysis.stability), approached from below
    hess = analysis.hessian_eigenvalues(model, rec["x_end"], coordinates="x", k=1)
    assert hess["morse_index"] == 0
    rate = float(hess["smallest"][0])
    ftle = rec["lyapunov"]["exponents"]
    assert rec["lyapunov"]["coordinates"] == "g"
    assert np.all(ftle < 0)
    assert np.all(ftle[:, 0] < ftle[:, 1])  # short horizons see the fast directions too
    assert np.all((-1.4 * rate < ftle[:, 1]) & (ftle[:, 1] < -0.95 * rate))


def test_findings_plot_and_json(both, projected, tmp_path):
    result = dict(projected, flows=dict(native=both["flows"]["native"], **projected["flows"]))
    result["energy_reference"] = analysis.energy._long_horizon.energy_reference(result["flows"])
    result["findings"] = analysis.long_horizon_findings(result)
    text = " ".join(result["findings"])
    assert "native flow (tsit5) ran to t = 100" in text
    assert "projected flow (tsit5) stopped at a fixed point" in text
    assert "shrink" in text and "The mean square (x units^2) went" in text
    assert projected["metadata"]["solver"] == {"projected": "tsit5"}
    path = analysis.save_json(tmp_path / "long.json", result)
    loaded = json.loads(open(path).read())
    assert (
        loaded["flows"]["projected"]["t_fixed_point"]
        == result["flows"]["projected"]["t_fixed_point"]
    )
    assert loaded["flows"]["projected"]["decay"]["law"] == "exponential"
    fig = analysis.plot_long_horizon(result, path=tmp_path / "long.png")
    assert len(fig.axes) == 6 and (tmp_path / "long.png").stat().st_size > 0
    _check_caption(fig, result)  # its layout: tests/test_figure_layout.py
    energy, residual = fig.axes[0], fig.axes[1]
    assert "E_ref" in energy.get_ylabel() and "projected fixed point" in energy.get_title()
    assert fig.axes[3].get_ylabel() == "mean square (x units^2)"
    # the chosen law, dashed on the RMS G panel, named in its legend
    fits = [line for line in residual.get_lines() if "fit:" in line.get_label()]
    assert {line.get_label().split(" fit")[0] for line in fits} == {"native", "projected"}
    assert all(line.get_linestyle() == "--" for line in fits)


def _check_caption(fig, result):
    """The caption names the model, horizon, dtype, solvers and tolerances."""
    meta = result["metadata"]
    header = fig._suptitle.get_text()
    for part in (
        meta["model_type"],
        f"t1 = {meta['t1']:g} tau",
        "float64",
        f"rtol {meta['rtol']:g}",
        f"atol {meta['atol']:g}",
        "fixed point: RMS G <",
    ):
        assert part in header, part


# ------------------------------------------------------------ a flat, non-ET energy
class ModernHopfield(eqx.Module):
    """A classical modern Hopfield network per row of `x: [N, D]`,
    `E = sum_A -logsumexp(beta X x_A) / beta + |x_A|^2 / 2`, a gradient flow on both
    flows: no LayerNorm, no token scales, no manifold."""

    memories: jax.Array
    beta: float = eqx.field(static=True)

    def energy(self, x, args=None):
        scores = self.beta * x @ self.memories.T
        return jnp.sum(
            -jax.nn.logsumexp(scores, axis=-1) / self.beta + 0.5 * jnp.sum(x**2, axis=-1)
        )

    def residual(self, x, args=None):
        return jax.grad(self.energy)(x, args)

    def vector_field(self, t, x, args, flow):
        return -self.residual(x, args)


@pytest.fixture(scope="module")
def hopfield():
    # two memories symmetric about the plane x_0 = 0: beta |X|^2 < 1 makes E strongly
    # convex, with one minimum, whose slowest direction (along x_0, about 0.36) is well
    # apart from the others (1): the late decay and the perturbations follow it alone
    memories = jnp.asarray([[0.8, 0.3, 0.0], [-0.8, 0.3, 0.0]], jnp.float64)
    model = ModernHopfield(memories, 1.0)
    x0 = jax.random.normal(jax.random.key(3), (2, 3), jnp.float64)
    result = analysis.long_horizon(
        model,
        x0,
        flows=("native",),
        t1=60.0,
        options=analysis.LONG_HORIZON_OPTIONS["native"].replace(rtol=1e-6, atol=1e-8),
        settings=analysis.LongHorizonSettings(
            n_times=N_TIMES,
            lyapunov_horizons=(10.0, 60.0),
            lyapunov_directions=3,
            lyapunov_segment=20.0,
        ),
    )
    return model, result


def _smallest_hessian_eigenvalue(model, x):
    x = jnp.asarray(x)
    hessian = jax.jit(jax.hessian(lambda v: model.energy(v.reshape(x.shape))))(x.ravel())
    return float(np.linalg.eigvalsh(np.asarray(hessian))[0])


def test_flat_energy_system_decays_at_the_smallest_hessian_eigenvalue(hopfield, tmp_path):
    model, result = hopfield
    rec = result["flows"]["native"]
    lam = _smallest_hessian_eigenvalue(model, rec["x_end"])
    assert 0.3 < lam < 0.4
    # no token scales: the entries are None, not a crash
    assert rec["scales_median"] is None and rec["scale_growth_per_tau"] is None
    assert result["metadata"]["model_type"] == "ModernHopfield"
    # a fixed point reached (RMS G < 10 rtol), an exponential decay at rate lambda_min
    assert rec["t_fixed_point"] is not None and rec["fixed_point_stays"]
    assert result["energy_reference"]["at_fixed_point"]
    decay = rec["decay"]
    assert decay["law"] == "exponential"
    assert decay["late"]["rate"] == pytest.approx(lam, rel=0.03)
    assert decay["rate"] == pytest.approx(lam, rel=0.25)  # the window's transient too
    # perturbations of the minimum shrink at -lambda_min (the longest horizon, where
    # the random start's share of the slowest direction weighs least)
    # (the exponent at T is -lambda_min + log(share) / T: measured -0.368 to -0.393 at
    # T = 60, the largest 2 % from -lambda_min; -0.44 to -0.56 at T = 10)
    lyap = rec["lyapunov"]
    assert lyap["coordinates"] == "x" and np.all(lyap["exponents"] < 0)
    assert lyap["max"][-1] == pytest.approx(-lam, rel=0.05)
    assert np.all(np.abs(lyap["exponents"][:, -1] + lam) < 0.12 * lam)
    assert np.all(lyap["exponents"][:, 0] < lyap["exponents"][:, -1])
    text = " ".join(result["findings"])
    assert "decayed exponentially at rate" in text and "reached a fixed point" in text
    assert "token scale" not in text
    # the figure without token scales or an error: each panel says so, no text overlaps
    fig = analysis.plot_long_horizon(result)
    _check_caption(fig, result)
    assert "no token scales" in " ".join(t.get_text() for t in fig.axes[2].texts)
    assert "no error recorded" in " ".join(t.get_text() for t in fig.axes[3].texts)
    assert analysis.figures._plotting.layout_problems(fig) == []


def test_a_model_without_a_needed_method_is_refused_before_solving(no_runtime_types):
    class NoResidual(eqx.Module):
        def energy(self, x, args=None):
            return jnp.sum(x**2)

        def vector_field(self, t, x, args, flow):
            return -x

    with pytest.raises(ValueError, match=r"needs model\.residual"):
        analysis.long_horizon(NoResidual(), jnp.ones((2, 3)))
    with pytest.raises(ValueError, match=r"needs model\.residual"):
        analysis.finite_time_lyapunov(NoResidual(), jnp.ones((2, 3)))
