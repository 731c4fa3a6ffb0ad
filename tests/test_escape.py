"""First passages at a temperature (issue 50): `solvers.PassageStop` stops each sample at
its first passage; the escape-time estimator (`analysis.escape_mle`, censored
exponential maximum likelihood) on exponential samples whose mean is known; and
`analysis.escape_times` on a one-dimensional double well `U = (x^2 - 1)^2` against its
exact mean first-passage time (a double integral, by scipy's quadrature) and Kramers'
law with its prefactor."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate

import et_ode
from conftest import runtime_types_off
from et_ode import analysis, solvers


class DoubleWell(eqx.Module):
    """`U(x) = (x^2 - 1)^2` for one coordinate (`x: [1, 1]`): wells at -1 and 1
    (`U'' = 8`), the saddle at 0 (`U'' = -4`), barrier 1; `tau dx/dt = -U'(x)`."""

    def energy(self, x, args=None):
        return jnp.sum((x**2 - 1) ** 2)

    def vector_field(self, t, x, args=None, flow="native"):
        return -jax.grad(self.energy)(x)

    def residual(self, x, args=None):
        return jax.grad(self.energy)(x)


def _well_potential(x):
    return (x**2 - 1) ** 2


def exact_mean_first_passage(temperature, start=-1.0, target=0.5):
    """`(1/T) int_start^target exp(U(y)/T) int_-inf^y exp(-U(z)/T) dz dy`: the mean time
    of `dx = -U' dt + sqrt(2 T) dW` from `start` to first reach `target`."""

    def inner(y):
        return integrate.quad(lambda z: np.exp(-_well_potential(z) / temperature), -np.inf, y)[0]

    outer = integrate.quad(
        lambda y: np.exp(_well_potential(y) / temperature) * inner(y), start, target, limit=200
    )[0]
    return outer / temperature


def past_the_saddle(x, args):
    return x[0, 0] > 0.5


def test_the_estimator_on_censored_exponential_samples():
    rng = np.random.default_rng(0)
    waits = rng.exponential(10.0, size=2000)
    censored_at = 15.0
    times, escaped = np.minimum(waits, censored_at), waits < censored_at
    mean, low, high = analysis.escape_mle(times, escaped)
    assert low < 10.0 < high and abs(mean / 10.0 - 1) < 0.06
    assert 0.05 < high / low - 1 < 0.2  # about +-5 % at 1,550 escapes
    # the naive mean of the escaped alone is biased low by the censoring
    assert np.mean(times[escaped]) < 0.7 * mean
    nothing = analysis.escape_mle(np.full(5, 3.0), np.zeros(5, bool))
    assert np.isnan(nothing[0]) and nothing[1:] == (0.0, float("inf"))


def test_escape_times_of_a_double_well_against_the_exact_and_kramers():
    """300 paths per temperature, Euler-Maruyama dt 0.01 to t = 500, escaped once past
    x = 0.5: each mean within 12 % of the exact mean first-passage time (0.3 % to 6 %
    measured) and its 95 % interval around it; Kramers' rate
    `sqrt(8 * 4) / (2 pi) exp(-1/T)` within 10 % of the exact one at these temperatures
    (7.6 % to 9.3 %), the slope of `log mean` against `1/T` within 0.1 of the barrier 1
    (1.007 measured) with the barrier inside its interval."""
    temperatures = [1 / 3, 1 / 4, 1 / 5]
    found = analysis.escape_times(
        DoubleWell(),
        -jnp.ones((1, 1)),
        past_the_saddle,
        temperatures,
        options=analysis.ESCAPE_OPTIONS,  # Euler-Maruyama, dt 0.01
        settings=analysis.EscapeSettings(paths=300, t1=500.0),
        barrier=1.0,
    )
    assert isinstance(found, analysis.EscapeTimes) and found.barrier == 1.0
    assert found.times.shape == (3, 300) and np.all(found.escaped >= 270)
    for temperature, mean, low, high in zip(temperatures, found.mean, found.low, found.high):
        exact = exact_mean_first_passage(temperature)
        kramers = 2 * np.pi / np.sqrt(8 * 4) * np.exp(1 / temperature)
        assert abs(mean / exact - 1) < 0.12, (temperature, mean, exact)
        assert 0.97 * low < exact < 1.03 * high
        assert abs(exact / kramers - 1) < 0.1
    assert abs(found.slope - 1.0) < 0.1 and found.slope_low < 1.0 < found.slope_high
    assert found.to_json()["escaped"] == found.escaped.tolist()


def test_a_passage_stop_stops_each_sample_at_its_first_passage():
    model = et_ode.EnergyTransformer(
        dim=4, n_heads=1, head_dim=2, n_memories=3, key=jax.random.key(1), dtype=jnp.float64
    )
    x0 = jax.random.normal(jax.random.key(2), (3, 4), jnp.float64)

    def moved(x, args):
        return jnp.sqrt(jnp.mean((x - x0) ** 2)) > 0.3

    stop = solvers.PassageStop(moved)
    batch = jnp.stack([x0] * 4)
    sol = solvers.solve(
        model,
        batch,
        t1=20.0,
        temperature=0.05,
        key=jax.random.key(0),
        stop=stop,
        max_steps=300,
        save="steps",
    )
    assert sol.stats["stop_reason"] == ["passage"] * 4 and sol.stats["passage_stop"] == "moved"
    for i in range(4):  # stopped at the first step end past 0.3, not before
        steps = np.isfinite(np.asarray(sol.ts[i]))
        distances = np.sqrt(np.mean((np.asarray(sol.xs[i])[steps] - np.asarray(x0)) ** 2, (1, 2)))
        assert distances[-1] > 0.3 and np.all(distances[:-1] <= 0.3)
        assert float(sol.t_final[i]) == pytest.approx(float(np.asarray(sol.ts[i])[steps][-1]))
    cold = solvers.solve(model, x0, t1=2.0, stop=stop)  # never moves that far: t1, no failure
    assert cold.stats["stop_reason"] == "t1" and float(cold.t_final) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="adjoint='checkpoint'"):
        solvers.solve(model, x0, t1=2.0, stop=stop, adjoint="backsolve")
    with runtime_types_off(), pytest.raises(ValueError, match="PassageStop needs a condition"):
        solvers.PassageStop(0.3)
    with pytest.raises(ValueError, match="solvers.PassageStop"):
        solvers.solve(
            model, x0, temperature=0.1, key=jax.random.key(0), stop=solvers.FixedPointStop()
        )
