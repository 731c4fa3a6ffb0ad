"""The stability verdict, first on systems whose answers are analytic, then on the ET.

A verdict is only as good as the point it is taken at: `analysis.stability` polishes the
state with Newton's method, bounds the distance to the true critical point, looks for
kinks of `E` within that reach, and reconciles the Hessian with a Lyapunov exponent.

- A flat double well `E = (a^2 - 1)^2 + (w/2) b^2` (state `[1, 2]`): minima at
  `(+-1, 0)` with Hessian `diag(8, w)`, a saddle at the origin with `diag(-4, w)`; the
  flow `-grad E` linearises to `-Hessian`, so the Lyapunov exponent tends to
  `-min(8, w)` at a minimum and to `+4` at the saddle.
- The tiny ReLU ET of conftest in float64: a point stopped at a loose tolerance gets the
  verdict of the Newton-polished point; without the polish it is refused as not
  converged.
- The constructed ET of test_analysis (memories in pairs `+-sqrt(a) e`): at its saddle
  many activations are exactly zero, a kink per memory. The two one-sided Hessians bound
  the index (Weyl), and as they disagree the verdict is refused ("at a kink").
"""

import os

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import DIM, N_TOKENS, make_model, make_state
from et_ode import analysis, solvers

OMEGA = 3.0


class DoubleWell(eqx.Module):
    """`E = (a^2 - 1)^2 + (OMEGA/2) b^2` on a state `[1, 2]`; a flat gradient system."""

    def energy(self, x, args=None):
        a, b = x[0, 0], x[0, 1]
        return (a**2 - 1.0) ** 2 + 0.5 * OMEGA * b**2

    def residual(self, x, args=None):
        return jax.grad(self.energy)(x, args)

    def vector_field(self, t, x, args=None, flow="native"):
        return -self.residual(x, args)


class DampedDuffing(eqx.Module):
    """`a'' + DAMPING a' - a + a^3 = 0` as the first-order system of `[a, b = a']` (state
    `[1, 2]`): not a gradient flow. Its wells `(+-1, 0)` are stable foci, the linearised
    flow's eigenvalues the roots of `l^2 + DAMPING l + 2`; the origin is a saddle. The
    residual is `-field` (zero exactly at the fixed points, as the protocol asks), whose
    Jacobian at a well is not symmetric and whose symmetric part has a negative
    eigenvalue: a verdict read from it would call the stable wells unstable."""

    def energy(self, x, args=None):
        a, b = x[0, 0], x[0, 1]
        return 0.5 * b**2 - 0.5 * a**2 + 0.25 * a**4

    def vector_field(self, t, x, args=None, flow="native"):
        a, b = x[..., 0], x[..., 1]
        return jnp.stack([b, a - a**3 - DAMPING * b], axis=-1)

    def residual(self, x, args=None):
        return -self.vector_field(0.0, x, args)


DAMPING = 0.3


class EnergyOnly(eqx.Module):
    """Has an energy and a field but no residual: the studies must refuse it."""

    def energy(self, x, args=None):
        return jnp.sum(x**2)

    def vector_field(self, t, x, args=None, flow="native"):
        return -2.0 * x


@pytest.mark.parametrize(
    "start, code, hessian, exponent",
    [
        ([[0.97, 0.02]], "stable_minimum", [OMEGA, 8.0], -OMEGA),
        ([[-1.02, -0.03]], "stable_minimum", [OMEGA, 8.0], -OMEGA),
        ([[0.03, -0.02]], "saddle", [-4.0, OMEGA], 4.0),
    ],
)
def test_double_well_verdicts_are_analytic(start, code, hessian, exponent):
    result = analysis.stability(
        DoubleWell(),
        jnp.array(start),
        settings=analysis.StabilitySettings(lyapunov_time=20.0, lyapunov_segments=10),
    )
    verdict = result["verdict"]
    print(f"\n{start}: {verdict['sentence']}")
    assert verdict["code"] == code and verdict["called"]
    expected_words = "stable minimum" if code == "stable_minimum" else "saddle of index 1"
    assert verdict["sentence"].startswith(expected_words)
    assert result["geometry"] == "flat" and result["dimension"] == 2
    assert result["asymmetry"] < 1e-12 and result["flow_eigenvalues"] is None  # a gradient
    assert result["polish"]["converged"] and result["residual_rms"] < 1e-12
    np.testing.assert_allclose(
        np.abs(result["x"][0]), [1.0 if code != "saddle" else 0.0, 0.0], atol=1e-12
    )
    np.testing.assert_allclose(result["all"], hessian, rtol=1e-10)
    assert result["morse_index"] == (code == "saddle")
    # The exponent of a random perturbation over 20 tau: the slowest (or the unstable)
    # rate plus log(component) / 20; the last segment's local rate is that rate itself.
    lyap = result["lyapunov"]
    # (at the saddle the horizon is capped where round-off would carry the state off it)
    assert lyap["exponent"] == pytest.approx(exponent, abs=1.5 / lyap["t1"])
    assert (lyap["capped_from"] is not None) == (code == "saddle")
    assert lyap["local"][-1] == pytest.approx(exponent, rel=1e-6)
    assert verdict["lyapunov_consistent"]
    assert result["kinks"]["twice_differentiable"] and not result["kinks"]["declared"]


def test_a_model_without_a_needed_method_is_refused_before_solving(monkeypatch, no_runtime_types):
    def no_solve(*args, **kwargs):
        raise AssertionError("solved before refusing")

    monkeypatch.setattr(solvers, "solve", no_solve)
    x = jnp.ones((1, 2))
    for study, call in [
        ("stability", lambda: analysis.stability(EnergyOnly(), x)),
        ("lyapunov_exponent", lambda: analysis.lyapunov_exponent(EnergyOnly(), x)),
        ("convergence", lambda: analysis.convergence(EnergyOnly(), x)),
        ("fixed_points", lambda: analysis.fixed_points(EnergyOnly(), x[None])),
        ("hessian_eigenvalues", lambda: analysis.hessian_eigenvalues(EnergyOnly(), x)),
    ]:
        with pytest.raises(ValueError) as error:
            call()
        message = str(error.value)
        assert "\n" not in message
        assert f"analysis.{study} needs model.residual(...)" in message, message
        assert "EnergyOnly" in message


@pytest.fixture(scope="module")
def relu_fixed_point():
    """The tiny ReLU ET's projected flow from conftest's state: stopped loosely (RMS G
    below 1e-3) and tightly (1e-10)."""
    model = make_model()
    x0 = make_state()
    points = {}
    for name, tol in (("loose", 1e-3), ("tight", 1e-10)):
        sol = solvers.solve(
            model,
            x0,
            t1=200.0,
            flow="projected",
            solver="tsit5",
            rtol=1e-10,
            atol=1e-12,
            max_steps=20000,
            stop=solvers.FixedPointStop(atol=tol),
        )
        assert sol.stats["stop_reason"] == "fixed_point"
        points[name] = sol.x_final
    return model, points


def test_a_loosely_stopped_et_point_gets_the_polished_verdict(relu_fixed_point):
    model, points = relu_fixed_point
    settings = analysis.StabilitySettings(k=3, lyapunov_time=4.0, lyapunov_segments=4)
    loose = analysis.stability(model, points["loose"], coordinates="x", settings=settings)
    tight = analysis.stability(model, points["tight"], coordinates="x", settings=settings)
    print(f"\nloose: {loose['verdict']['sentence']}\ntight: {tight['verdict']['sentence']}")
    assert loose["polish"]["residual_rms_before"] > 1e-5
    assert loose["verdict"]["code"] == tight["verdict"]["code"]
    assert loose["verdict"]["called"]
    # Newton from either start reaches the same critical point and spectrum.
    g = jax.vmap(model.norm)(jnp.stack([loose["x"], tight["x"]]))
    assert float(jnp.max(jnp.abs(g[0] - g[1]))) < 1e-9
    np.testing.assert_allclose(loose["all"], tight["all"], rtol=1e-7, atol=1e-9)
    assert loose["geometry"] == "manifold"
    assert loose["dimension"] == N_TOKENS * (DIM - 2)
    assert loose["kinks"]["declared"] and loose["kinks"]["nearest"] > loose["kinks"]["within"]
    # Unpolished, the loose point is refused, not judged.
    raw = analysis.stability(
        model,
        points["loose"],
        coordinates="x",
        settings=settings.replace(polish=None, lyapunov_time=None),
    )
    assert raw["verdict"]["code"] == "not_converged" and not raw["verdict"]["called"]
    assert raw["verdict"]["sentence"].startswith("not converged")


def test_where_newton_fails_the_flow_brings_the_point_closer(relu_fixed_point):
    """Newton allowed 2 steps from RMS G 1e-3 does not converge; the projected flow then
    takes the point 100x closer and Newton starts again, until it converges: the same
    point and verdict as from the tight start, Newton's last move within the distance
    its starting residual allows."""
    model, points = relu_fixed_point
    # two Newton steps per round (the default polish's tolerance, POLISH_TOL)
    polish = analysis.StabilitySettings().polish.replace(max_newton=2)
    result = analysis.stability(
        model,
        points["loose"],
        coordinates="x",
        settings=analysis.StabilitySettings(k=3, lyapunov_time=None, polish=polish),
    )
    rounds = result["polish"]["rounds"]
    print("\n" + "\n".join(map(str, rounds)))
    assert rounds[0]["method"].startswith("newton") and rounds[0]["residual_rms"] > 1e-11
    assert rounds[1]["method"].startswith("projected flow")
    assert rounds[1]["residual_rms"] <= 1e-2 * result["polish"]["residual_rms_before"]
    assert result["polish"]["converged"] and result["residual_rms"] < 1e-11
    tight = solvers.find_fixed_point(model, points["tight"])
    g = jax.vmap(model.norm)(jnp.stack([jnp.asarray(result["x"]), tight.x]))
    assert float(jnp.max(jnp.abs(g[0] - g[1]))) < 1e-9
    assert result["verdict"]["code"] == "stable_minimum"
    assert result["polish"]["newton_displacement"] <= result["polish"]["newton_jump_bound"]


@pytest.mark.parametrize(
    "quick",
    [
        True,
        pytest.param(
            False,
            marks=pytest.mark.skipif(
                not os.environ.get("ET_ODE_SLOW_TESTS"),
                reason="the full study (k = 6, Lyapunov to 20 tau, 25 s): ET_ODE_SLOW_TESTS=1",
            ),
        ),
    ],
)
def test_the_shipped_paper_models_held_out_fixed_point_is_a_stable_minimum(tmp_path, quick):
    """`et-ode study stability --checkpoint paper --quick` used to stop the projected
    flow at RMS G 1e-4 and take the Hessian there: "saddle of index 2-3" (a point on the
    other side of ReLU kinks from the fixed point). Now the flow stops at 1e-6 and Newton
    polishes the point: a stable minimum, consistent with the Lyapunov exponent."""
    from et_ode.cli import main

    out = tmp_path / "stability"
    assert (
        main(
            ["study", "stability", "--checkpoint", "paper", "--out", str(out), "--no-progress"]
            + (["--quick"] if quick else [])
        )
        == 0
    )
    import json

    result = json.loads((out / "stability.json").read_text())
    assert result["start"]["stop_reason"] == "fixed_point"
    assert 1e-9 < result["start"]["residual_rms"] <= 1e-6  # where Newton takes over
    polish = result["polish"]
    assert polish["converged"] and polish["residual_rms"] < 1e-11 and polish["linear"] == "gmres"
    assert polish["newton_displacement"] <= polish["newton_jump_bound"]
    verdict = result["verdict"]
    assert verdict["code"] == "stable_minimum" and verdict["called"], verdict["sentence"]
    assert verdict["lyapunov_consistent"] and result["lyapunov"]["exponent"] < 0
    assert result["kinks"]["declared"] and result["kinks"]["twice_differentiable"]
    assert result["morse_index_range"] == [0, 0]
    # The smallest tangent Hessian eigenvalue (x coordinates) at the Newton-polished
    # float64 point (RMS G < 1e-11): docs/how-to/fixed-points.md quotes 0.0531 (measured
    # 0.053138 on 2026-12-03, the same with XLA's default compiler settings: the band
    # is the quoted digits); the neighbouring minimum a jump would reach has 0.207.
    print(f"smallest eigenvalue {result['smallest'][0]:.6f}")
    assert result["smallest"][0] == pytest.approx(0.0531, abs=1e-4)


def test_one_sided_models_pin_the_kinks_near_the_point():
    """`one_sided`: with no kink within reach both sides are the model itself; with
    some, the energy at the point changes by at most `within^2 |xi|^2 / 2` per pinned
    activation, and the Hessians in g differ by exactly `-sum xi_mu xi_mu^T` over the
    pinned (token, memory) pairs, on their token's block."""
    model, x = make_model(), make_state()
    g = model.norm(x)
    distances = np.asarray(model.kink_distances(x))
    within = float(np.sort(distances.ravel())[4])  # the five nearest kinks
    near = distances <= within
    assert near.sum() == 5
    lower = model.one_sided(x, None, within, "lower")
    upper = model.one_sided(x, None, within, "upper")
    xi = np.asarray(model.hopfield.xi)
    bound = 0.5 * within**2 * np.sum(np.linalg.norm(xi, axis=-1) ** 2)
    for pinned in (lower, upper):
        assert abs(float(pinned.energy(x) - model.energy(x))) <= bound
    hessian = [
        np.asarray(jax.hessian(m.hopfield)(g)).reshape(g.size, g.size) for m in (lower, upper)
    ]
    expected = np.zeros((g.size, g.size))
    dim = g.shape[1]
    for token, memory in zip(*np.nonzero(near)):
        block = slice(token * dim, (token + 1) * dim)
        expected[block, block] -= np.outer(xi[memory], xi[memory])
    np.testing.assert_allclose(hessian[0] - hessian[1], expected, atol=1e-12)
    same = model.one_sided(x, None, 0.1 * float(distances.min()), "lower")
    assert float(same.energy(x)) == float(model.energy(x))


def test_a_stable_focus_of_a_field_that_is_no_gradient_is_not_called_a_saddle():
    """The damped Duffing oscillator's well `(1, 0)`: the symmetric part of its
    residual's Jacobian `[[0, -1], [2, DAMPING]]` has a negative eigenvalue, and its
    Hessian-range test even agrees with the decaying exponent; the flow's eigenvalues,
    the roots of `l^2 + DAMPING l + 2`, say it is stable, and the verdict says that."""
    out = analysis.stability(
        DampedDuffing(),
        jnp.array([[1.0, 0.0]]),
        options=analysis.STABILITY_OPTIONS.replace(flow="native"),
        settings=analysis.StabilitySettings(k=2),
    )
    assert out["asymmetry"] > 0.1 and out["verdict"]["code"] == "not_gradient"
    assert "linearly stable" in out["verdict"]["sentence"] and not out["verdict"]["called"]
    np.testing.assert_allclose(
        np.sort_complex(out["flow_eigenvalues"]),
        np.sort_complex(np.roots([1.0, DAMPING, 2.0])),
        atol=1e-10,
    )
    # nor does fixed_points count a Morse index for it
    with pytest.raises(ValueError, match="not symmetric .* has no Morse index"):
        analysis.fixed_points(
            DampedDuffing(),
            np.array([[[1.2, 0.1]]]),
            settings=analysis.FixedPointSettings(morse_index=True),
        )


BASE = dict(
    converged=True,
    residual_rms=1e-15,
    distance=1e-13,
    index_range=(0, 0),
    index_is_lower_bound=False,
    n_near_zero=0,
    dimension=4,
    smallest=0.5,
    kinks=dict(n_within=0),
    lyapunov=None,
    rates=[-4.0, -0.5],
    clock_range=[1.0, 1.0],
    flow="projected",
)


@pytest.mark.parametrize(
    "changes, code, words",
    [
        ({}, "stable_minimum", "stable minimum"),
        (dict(index_range=(4, 4), smallest=-4.0, rates=[0.5, 4.0]), "maximum", "local maximum"),
        (dict(index_range=(2, 2), smallest=-1.0, rates=[-4.0, 1.0]), "saddle", "saddle of index 2"),
        (
            dict(index_range=(2, 2), index_is_lower_bound=True, smallest=-1.0, rates=[-4.0, 1.0]),
            "saddle",
            "saddle of index >= 2",
        ),
        (dict(converged=False, residual_rms=1e-4), "not_converged", "not converged"),
        (dict(jumped=True, newton_displacement=2.35, jump_bound=0.85), "jumped", "not called"),
        (dict(n_near_zero=1), "degenerate", "degenerate"),
        (
            dict(index_range=(0, 2), kinks=dict(n_within=3, nearest=1e-14, within=1e-12)),
            "at_kink",
            "at a kink",
        ),
        (
            dict(kinks=dict(n_within=3, nearest=1e-14, within=1e-12)),
            "stable_minimum",
            "every side agrees",
        ),
        # a stable minimum whose exponent grows: the two disagree, so it is not called
        (
            dict(lyapunov=dict(exponent=0.3, t1=2.0, coordinates="metric")),
            "inconsistent",
            "not called",
        ),
        (
            dict(lyapunov=dict(exponent=-0.6, t1=20.0, coordinates="metric")),
            "stable_minimum",
            "perturbations decay",
        ),
        # a residual whose Jacobian is not symmetric: no Hessian; the flow's eigenvalues
        (
            dict(asymmetry=0.5, flow_eigenvalues=np.array([-0.15 + 1.4j, -0.15 - 1.4j])),
            "not_gradient",
            "linearly stable",
        ),
        (
            dict(asymmetry=0.5, flow_eigenvalues=np.array([0.2 + 1.0j, 0.2 - 1.0j, -3.0])),
            "not_gradient",
            "not linearly stable",
        ),
        # measured in g, the range widens by log(c_max / c_min) / T
        (
            dict(lyapunov=dict(exponent=0.1, t1=2.0, coordinates="g"), clock_range=[1.0, 4.0]),
            "stable_minimum",
            "consistent",
        ),
    ],
)
def test_verdict_rules(changes, code, words):
    from et_ode.analysis.landscape._verdict import verdict

    result = verdict(**dict(BASE, **changes))
    assert result["code"] == code and words in result["sentence"], result["sentence"]
    assert result["called"] == (code in ("stable_minimum", "saddle", "maximum"))
    assert "\n" not in result["sentence"]
