"""solver="auto" (solvers.AutoSwitch): Tsit5 while not stiff, a matrix-free
Rosenbrock-W step (JVPs + GMRES) while stiff. Tiny smooth model, float64."""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import make_model, make_state
from et_ode import solvers


@pytest.fixture(scope="module")
def smooth():
    return make_model(hopfield="softmax")


def test_non_stiff_window_is_tsit5(smooth):
    x0 = make_state()
    ref = solvers.solve(smooth, x0, solver="tsit5", rtol=1e-12, atol=1e-12, t1=1.2, dt0=None)
    same = solvers.solve(smooth, x0, solver="tsit5", rtol=1e-8, atol=1e-10, t1=1.2, dt0=None)
    auto = solvers.solve(smooth, x0, solver="auto", rtol=1e-8, atol=1e-10, t1=1.2, dt0=None)
    st = auto.stats
    assert int(st["num_switches"]) == 0 and int(st["jvp_evals"]) == 0
    # explicit mode is Tsit5 step for step
    assert int(st["num_steps"]) == int(same.stats["num_steps"])
    assert int(st["nfe"]) == int(same.stats["nfe"]) and not st["nfe_is_estimate"]
    np.testing.assert_allclose(auto.x_final, same.x_final, atol=1e-12)
    assert float(jnp.max(jnp.abs(auto.x_final - ref.x_final))) < 1e-6


def test_projected_long_horizon_switches_and_reaches_fixed_point(smooth):
    x0 = make_state()
    kw = dict(flow="projected", t1=300.0, dt0=None, max_steps=20000)
    ref = solvers.solve(smooth, x0, solver="tsit5", rtol=1e-10, atol=1e-12, **kw)
    auto = solvers.solve(smooth, x0, solver="auto", rtol=1e-6, atol=1e-8, **kw)
    tsit = solvers.solve(smooth, x0, solver="tsit5", rtol=1e-6, atol=1e-8, **kw)
    st = auto.stats
    print(
        f"\nauto: {int(st['num_steps'])} steps, nfe {int(st['nfe'])} "
        f"({int(st['jvp_evals'])} JVPs), {int(st['num_switches'])} switches; "
        f"tsit5: {int(tsit.stats['num_steps'])} steps, nfe {int(tsit.stats['nfe'])}"
    )
    assert int(st["num_switches"]) >= 1 and int(st["implicit_steps"]) > 0
    assert float(st["residual_rms"]) < 1e-8
    assert float(jnp.max(jnp.abs(auto.x_final - ref.x_final))) < 1e-5
    assert int(st["nfe"]) * 5 < int(tsit.stats["nfe"])


class _Counting:
    """A model whose vector field counts its (primal) evaluations on the host."""

    def __init__(self, model):
        self.model, self.calls = model, 0

    def _count(self):
        self.calls += 1

    def energy(self, x, args):
        return self.model.energy(x, args)

    def residual(self, x, args):
        return self.model.residual(x, args)

    def vector_field(self, t, x, args, flow):
        jax.debug.callback(self._count)
        return self.model.vector_field(t, x, args, flow)


def test_counts_match_an_independent_count(smooth):
    """Evaluations of f (JVPs aside) counted by a host callback equal the solver's own
    count (stats nfe - jvp_evals), rejected steps included when they are exact."""
    for flow, t1 in (("native", 5.0), ("projected", 300.0)):
        counting = _Counting(smooth)
        sol = solvers.solve(
            counting,
            make_state(),
            solver="auto",
            rtol=1e-6,
            atol=1e-8,
            t1=t1,
            dt0=None,
            flow=flow,
            max_steps=20000,
        )
        jax.effects_barrier()
        st = sol.stats
        f_evals = int(st["nfe"]) - int(st["jvp_evals"])
        print(
            f"\n{flow}: callback {counting.calls}, own {f_evals}, "
            f"rejected {int(st['num_rejected_steps'])}, switches {int(st['num_switches'])}"
        )
        if st["nfe_is_estimate"]:  # rejected steps after a switch: costed at 6 (an
            # implicit attempt costs 3 evaluations plus its JVPs)
            rejected = int(st["num_rejected_steps"])
            assert f_evals - 3 * rejected <= counting.calls <= f_evals
        else:
            assert counting.calls == f_evals, (flow, counting.calls, f_evals)


def test_options():
    assert solvers.check_options(solver="auto", rtol=1e-4, atol=1e-6)
    with pytest.raises(ValueError, match="solver 'auto' .*pass rtol and atol"):
        solvers.check_options(solver="auto")
    preset = solvers.get_preset("auto")
    assert preset.adaptive and preset.self_counting
    assert isinstance(preset.make(), diffrax.AbstractAdaptiveSolver)


def test_dense_implicit_refused_above_threshold(smooth):
    big = jnp.zeros((solvers.DENSE_MAX // 16 + 1, 16))
    with pytest.raises(ValueError, match='solver="auto"'):
        solvers.solve(smooth, big, solver="kvaerno5", rtol=1e-6, atol=1e-8)


class _StiffThenMoving:
    """dx/dt = -lam(t) (x - c(t)): stiff (lam ~ 2e3) while x rests at c = 1/2, until
    t ~ 3; then lam ~ 1 while c starts to oscillate (from t ~ 5), so that accuracy, not
    stability, limits the step. A protocol object (solvers integrate any), with scipy's
    Radau as the reference."""

    @staticmethod
    def rate(t):
        return 1.0 + 2e3 * jax.nn.sigmoid(-5.0 * (t - 3.0))

    @staticmethod
    def target(t):
        return 0.5 + jax.nn.sigmoid(5.0 * (t - 5.0)) * jnp.sin(2.0 * t)

    def energy(self, x, args):
        return 0.5 * jnp.sum(x**2)

    def residual(self, x, args):
        return x

    def vector_field(self, t, x, args, flow):
        return -self.rate(t) * (x - self.target(t))


def test_switches_to_implicit_while_stiff_and_back_when_calm():
    from scipy.integrate import solve_ivp

    system = _StiffThenMoving()
    x0 = jnp.linspace(-1.0, 1.0, 6).reshape(2, 3)
    kw = dict(rtol=1e-6, atol=1e-8, t1=10.0, dt0=None, max_steps=50000)
    sol = solvers.solve(system, x0, solver="auto", **kw)
    tsit = solvers.solve(system, x0, solver="tsit5", **kw)
    st = sol.stats
    print(
        f"\nauto: {int(st['num_steps'])} steps, nfe {int(st['nfe'])}, "
        f"{int(st['num_switches'])} switches, {int(st['implicit_steps'])} implicit; "
        f"tsit5: {int(tsit.stats['num_steps'])} steps, nfe {int(tsit.stats['nfe'])}"
    )
    # into the implicit step while stiff, and back to Tsit5 once the motion limits h
    assert int(st["num_switches"]) >= 2 and int(st["implicit_steps"]) > 0
    assert int(st["nfe"]) * 5 < int(tsit.stats["nfe"])  # tsit5 held to h ~ 3.5 / lam

    def f(t, y):  # the same field in NumPy
        rate = 1.0 + 2e3 / (1.0 + np.exp(5.0 * (t - 3.0)))
        return -rate * (y - 0.5 - np.sin(2.0 * t) / (1.0 + np.exp(-5.0 * (t - 5.0))))

    ref = solve_ivp(
        f, (0.0, 10.0), np.asarray(x0).ravel(), method="Radau", rtol=1e-11, atol=1e-13
    ).y[:, -1]
    error = np.max(np.abs(np.asarray(sol.x_final).ravel() - ref))
    print(f"max error against Radau: {error:.2e}")
    assert error < 1e-6
