"""`analysis.lyapunov_exponent` and `analysis.finite_time_lyapunov` are views of the one
estimator, `analysis.lyapunov_spectrum`: on a flat linear gradient flow
`dx/dt = -r * x` (rates `r` per entry, so that a perturbation `d` grows to
`exp(-r T) d`, measured in `x`) both agree with the spectrum to rounding and with the
closed forms to the solver's tolerance:

- the top exponent over `[0, T]` from the seeded start `d0` is
  `log(|exp(-r T) d0| / |d0|) / T` (renormalising a single vector changes nothing), and
  each piece's `local` rate the same over the piece, from the direction it starts in;
- each independent direction of `finite_time_lyapunov` (the rows of
  `jax.random.normal(key(seed), (directions, *x.shape))`) has that exponent at each
  horizon, none orthogonalised against another;
- with constant Euler steps of `h` the exponent is that of the discrete map,
  `log(|(1 - h r)^n d0| / |d0|) / T`, to rounding.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from et_ode import analysis

RATES = jnp.array([[0.5, 1.0, 2.0], [3.0, 0.8, 1.5]])  # [N, D]
X = jnp.array([[1.0, -0.5, 0.3], [0.2, 0.7, -1.1]])


class Linear(eqx.Module):
    """`E = sum(r x^2) / 2`: the gradient flow `dx/dt = -r x` on both flows (flat: no
    clock, no tangent projection)."""

    rates: jax.Array

    def energy(self, x, args=None):
        return 0.5 * jnp.sum(self.rates * x**2)

    def residual(self, x, args=None):
        return self.rates * x

    def vector_field(self, t, x, args=None, flow="native"):
        return -self.rates * x


MODEL = Linear(RATES)


def _growth(d0, factor):
    """`log(|factor * d0| / |d0|)` per start (rows of `d0`)."""
    d0 = np.asarray(d0).reshape(len(d0), -1)
    factor = np.asarray(factor).reshape(1, -1)
    return np.log(np.linalg.norm(factor * d0, axis=1) / np.linalg.norm(d0, axis=1))


def test_the_top_exponent_is_the_spectrums_and_the_closed_form():
    t1, segments = 4.0, 4
    out = analysis.lyapunov_exponent(MODEL, X, t1=t1, segments=segments, seed=2)
    spectrum = analysis.lyapunov_spectrum(
        MODEL,
        X,
        k=1,
        t1=t1,
        options=analysis.LYAPUNOV_EXPONENT_OPTIONS,
        settings=analysis.LyapunovSpectrumSettings(renormalise=1.0, measure="g", seed=2),
    )
    # the same solve: equal to rounding
    assert out["exponent"] == pytest.approx(float(spectrum["exponents"][0]), rel=1e-13)
    np.testing.assert_allclose(
        np.cumsum(out["local"]) / np.arange(1, segments + 1), spectrum["history"][:, 0], rtol=1e-12
    )
    # the closed form, from the seeded start (rtol 1e-10: agreement to 1e-9)
    d0 = jax.random.normal(jax.random.key(2), (1,) + X.shape, jnp.float64)
    rates = np.asarray(RATES)
    assert out["exponent"] == pytest.approx(_growth(d0, np.exp(-rates * t1))[0] / t1, rel=1e-8)
    # each piece's rate: the growth over [t, t + 1] of the direction reached at t
    starts = np.asarray(d0)[0] * np.exp(-rates * out["times"][:, None, None] + rates)
    expected = _growth(starts, np.exp(-rates))
    np.testing.assert_allclose(out["local"], expected, rtol=1e-8)
    # another measure on a flat model is the same (the clock is 1): the same numbers
    metric = analysis.lyapunov_exponent(
        MODEL, X, t1=t1, segments=segments, seed=2, measure="metric"
    )
    np.testing.assert_allclose(metric["local"], out["local"], rtol=1e-12)


def test_finite_time_exponents_are_independent_directions_at_every_horizon():
    horizons, directions = (0.5, 3.0, 7.0), 3
    out = analysis.finite_time_lyapunov(
        MODEL, X, horizons=horizons, directions=directions, segment=2.0, seed=5
    )
    d0 = jax.random.normal(jax.random.key(5), (directions,) + X.shape, jnp.float64)
    rates = np.asarray(RATES)
    expected = np.stack([_growth(d0, np.exp(-rates * h)) / h for h in horizons], axis=1)
    assert out["exponents"].shape == (directions, len(horizons))
    np.testing.assert_allclose(out["exponents"], expected, rtol=1e-8)
    assert out["coordinates"] == "x"
    # the spectrum's independent mode with those ends is the same computation
    spectrum = analysis.lyapunov_spectrum(
        MODEL,
        X,
        k=directions,
        t1=7.0,
        options=analysis.FINITE_TIME_LYAPUNOV_OPTIONS,
        settings=analysis.LyapunovSpectrumSettings(
            renormalise=2.0, measure="g", seed=5, orthonormalise=False, ends=horizons
        ),
    )
    # pieces of at most 2 ending at each horizon: 0.5 | 3.0 in 2 | 7.0 in 2
    np.testing.assert_allclose(spectrum["times"], [0.5, 1.75, 3.0, 5.0, 7.0], rtol=1e-15)
    at = np.searchsorted(spectrum["times"], horizons)
    np.testing.assert_allclose(out["exponents"], spectrum["history"][at].T, rtol=1e-13)
    # QR would orthogonalise the second and third against the first: their exponents
    # are then the next ones, not three estimates of the top one
    qr = analysis.lyapunov_spectrum(
        MODEL,
        X,
        k=directions,
        t1=7.0,
        options=analysis.FINITE_TIME_LYAPUNOV_OPTIONS,
        settings=analysis.LyapunovSpectrumSettings(renormalise=1.0, measure="g", seed=5),
    )
    assert qr["exponents"][-1] < out["exponents"][:, -1].min() - 0.1  # measured 0.22 apart


def test_constant_steps_give_the_exponent_of_the_discrete_map():
    h, t1, segments = 0.1, 2.0, 2
    options = analysis.LYAPUNOV_EXPONENT_OPTIONS.replace(
        solver="euler", rtol=None, atol=None, dt0=h, max_steps=None
    )
    out = analysis.lyapunov_exponent(MODEL, X, options=options, t1=t1, segments=segments)
    assert out["dt0"] == h and out["rtol"] is None and out["solver"] == "euler"
    d0 = jax.random.normal(jax.random.key(0), (1,) + X.shape, jnp.float64)
    steps = round(t1 / h)
    expected = _growth(d0, (1.0 - h * np.asarray(RATES)) ** steps)[0] / t1
    assert out["exponent"] == pytest.approx(expected, rel=1e-12)


def test_bad_views_are_refused_in_one_line(no_runtime_types):
    with pytest.raises(ValueError, match="segments must be an integer >= 1"):
        analysis.lyapunov_exponent(MODEL, X, t1=1.0, segments=0)
    with pytest.raises(ValueError, match="t1 must be a finite horizon > 0"):
        analysis.lyapunov_exponent(MODEL, X, t1=-1.0)
    with pytest.raises(ValueError, match="measure must be one of g, metric"):
        analysis.lyapunov_exponent(MODEL, X, measure="x")
    with pytest.raises(ValueError, match="horizons must be one or more finite times > 0"):
        analysis.finite_time_lyapunov(MODEL, X, horizons=())
    with pytest.raises(ValueError, match="directions must be an integer >= 1"):
        analysis.finite_time_lyapunov(MODEL, X, directions=0)
    with pytest.raises(ValueError, match="segment must be a finite time > 0"):
        analysis.finite_time_lyapunov(MODEL, X, segment=0.0)
    auto = analysis.LYAPUNOV_EXPONENT_OPTIONS.replace(solver="auto")
    with pytest.raises(ValueError, match="cannot be 'auto'"):
        analysis.lyapunov_exponent(MODEL, X, options=auto)
