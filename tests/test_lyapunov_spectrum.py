"""`analysis.lyapunov_spectrum` against answers nobody here computed:

- Lorenz (sigma 10, rho 28, beta 8/3): the published spectrum is about 0.906, 0, -14.57
  (Sprott, "Chaos and Time-Series Analysis", 2003, table A.1: 0.9056, 0, -14.5723), and
  the exponents sum to the trace of the Jacobian, -(sigma + 1 + beta), at every point:
  the QR method must reproduce the sum to 1e-3 however short the run;
- a linear field `dx/dt = A x` with `A` similar to a diagonal matrix: the exponents are the
  real parts of its eigenvalues;
- the tiny ET at its fixed point (projected flow): the exponents are the real parts of the
  Jacobian's eigenvalues there (`numpy.linalg.eigvals` of the dense Jacobian), with two
  neutral directions per token (its mean and scale, kept by the flow) at 0; measured in
  `g` (those directions dropped) the same rates without the neutral ones.
"""

import re

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from et_ode import analysis, solvers

SIGMA, RHO, BETA = 10.0, 28.0, 8.0 / 3.0


def lorenz(t, x, args):
    return jnp.stack([SIGMA * (x[1] - x[0]), x[0] * (RHO - x[2]) - x[1], x[0] * x[1] - BETA * x[2]])


@pytest.fixture(scope="module")
def lorenz_spectrum():
    return analysis.lyapunov_spectrum(
        lorenz,
        jnp.array([1.0, 1.0, 1.0]),
        t1=100.0,
        options=analysis.LYAPUNOV_OPTIONS.replace(rtol=1e-7, atol=1e-9),
        settings=analysis.LyapunovSpectrumSettings(transient=10.0, renormalise=0.5),
    )


def test_lorenz_spectrum_is_the_published_one(lorenz_spectrum):
    out = lorenz_spectrum
    assert abs(out["volume_rate"] + (SIGMA + 1 + BETA)) < 1e-3  # the trace, exactly
    top, middle, bottom = out["exponents"]
    assert abs(top - 0.906) < 0.1 and abs(middle) < 0.05 and abs(bottom + 14.57) < 0.1
    assert out["history"].shape == (200, 3) and out["times"][-1] == 100.0
    assert out["neutral"] is None and out["flow"] is None


def test_linear_field_exponents_are_the_real_parts_of_its_eigenvalues():
    rng = np.random.default_rng(0)
    basis = rng.normal(size=(4, 4))
    a = basis @ np.diag([0.3, -0.2, -1.0, -2.5]) @ np.linalg.inv(basis)
    a = jnp.asarray(a)
    out = analysis.lyapunov_spectrum(
        lambda t, x, args: a @ x,
        jnp.ones(4),
        k=2,
        t1=400.0,
        settings=analysis.LyapunovSpectrumSettings(renormalise=1.0),
    )
    # the estimate converges like 1/t (the basis's conditioning): 1e-2 at t = 400
    np.testing.assert_allclose(out["exponents"], [0.3, -0.2], atol=2e-2)


def test_at_the_ets_fixed_point_the_spectrum_is_the_jacobians(model, x0):
    near = solvers.solve(
        model,
        x0,
        flow="projected",
        solver="tsit5",
        rtol=1e-10,
        atol=1e-12,
        t1=1e4,
        max_steps=100_000,
        stop=solvers.FixedPointStop(atol=1e-8),
    )
    fixed = solvers.find_fixed_point(model, near.x_final, tol=1e-12)  # Newton's polish
    assert bool(fixed.success)
    neutral = 2 * fixed.x.shape[0]  # each token's mean and scale
    out = analysis.lyapunov_spectrum(
        model,
        fixed.x,
        k=neutral + 4,
        t1=100.0,
        options=analysis.LYAPUNOV_OPTIONS.replace(atol=1e-12),
        settings=analysis.LyapunovSpectrumSettings(renormalise=5.0),
    )
    jacobian = jax.jacfwd(lambda x: model.vector_field(0.0, x, None, "projected"))(fixed.x)
    rates = np.sort(np.linalg.eigvals(np.asarray(jacobian).reshape(fixed.x.size, -1)).real)
    rates = rates[::-1][: neutral + 4]
    assert out["neutral"] == neutral and np.all(np.abs(rates[:neutral]) < 1e-8)
    # the estimates converge like 1/t: measured -0.010 to -0.024 for the neutral ones at
    # t = 100 (half that at 200), and within 0.012 of the next four rates (-1.25 to -3.41)
    np.testing.assert_allclose(out["exponents"][:neutral], 0.0, atol=4e-2)
    assert np.all(rates[neutral:] < -0.5)
    np.testing.assert_allclose(out["exponents"][neutral:], rates[neutral:], atol=4e-2)
    # measured in g (each vector projected onto the tangent space and scaled by the
    # clock, as lyapunov_exponent measures): the neutral directions are not measured, and
    # a fixed linear change of measure leaves the rates: the same four
    in_g = analysis.lyapunov_spectrum(
        model,
        fixed.x,
        k=4,
        t1=100.0,
        options=analysis.LYAPUNOV_OPTIONS.replace(atol=1e-12),
        settings=analysis.LyapunovSpectrumSettings(renormalise=5.0, measure="g"),
    )
    assert in_g["neutral"] == 0 and in_g["measure"] == "g"
    np.testing.assert_allclose(in_g["exponents"], rates[neutral:], atol=4e-2)


LYAPUNOV, SETTINGS = analysis.LYAPUNOV_OPTIONS, analysis.LyapunovSpectrumSettings


@pytest.mark.parametrize(
    "options, words",
    [
        (lambda: dict(t1=-1.0), ["t1 must be a positive averaging time"]),
        (lambda: dict(t1=1.0, k=4), ["k must be between 1 and the state's size 3"]),
        (
            lambda: dict(t1=1.0, options=LYAPUNOV.replace(solver="auto")),
            ["options.solver cannot be 'auto'", "tsit5"],
        ),
        (
            lambda: dict(
                t1=1.0,
                options=LYAPUNOV.replace(
                    rtol=None, atol=None, stepsize_controller=diffrax.PIDController(1e-6, 1e-8)
                ),
            ),
            ["leave options.stepsize_controller None"],
        ),
        (lambda: dict(t1=1.0, settings=SETTINGS(ends=(0.5, 2.0))), ["ends must lie within"]),
        (lambda: dict(t1=1.0, settings=SETTINGS(ends=(0.0,))), ["ends must be finite times > 0"]),
        (
            lambda: dict(t1=1.0, settings=SETTINGS(orthonormalise=1)),  # type: ignore[arg-type]
            ["orthonormalise must be True or False"],
        ),
        (
            lambda: dict(t1=1.0, settings=SETTINGS(measure="y")),  # type: ignore[arg-type]
            ["measure must be one of x, g"],
        ),
        (lambda: dict(t1=1.0, settings=SETTINGS(renormalise=0.0)), ["renormalise must be a"]),
        (lambda: dict(t1=1.0, settings=SETTINGS(transient=-1.0)), ["transient must be a finite"]),
        (
            lambda: dict(t1=1.0, settings=SETTINGS(measure="g")),
            ["needs an energy system", "measure='x'"],
        ),
        (lambda: dict(t1=1.0, k=2.7), ["k must be an integer or None (got 2.7)"]),
        (lambda: dict(t1=1.0, k=True), ["k must be an integer or None (got True)"]),
        (lambda: dict(t1=0.3), ["t1=0.3 is shorter than one renormalise interval (1)"]),
    ],
)
def test_bad_settings_are_refused(options, words, no_runtime_types):
    """Each refused in one line: the settings and options when they are made (inside
    `options()`), the rest by `lyapunov_spectrum`."""
    with pytest.raises(ValueError) as error:
        analysis.lyapunov_spectrum(lorenz, jnp.ones(3), **options())
    assert all(w in str(error.value) for w in words), str(error.value)


def test_any_solver_and_constant_steps_and_independent_vectors():
    """`dx/dt = diag(-1, -2) x`: any diffrax solver gives tsit5's numbers (the same start
    vectors) to the tolerance, and the sum its trace; constant steps of `h` the exponents
    of the discrete map, whose sum is `log((1 - h) (1 - 2 h)) / h` exactly for Euler; with
    `orthonormalise=False` each vector estimates the top rate, more of them than the
    dimension allowed, and `ends` make intervals of at most `renormalise` that end at
    each (not rounded)."""
    rates = jnp.array([-1.0, -2.0])
    field = lambda t, x, args: rates * x  # noqa: E731
    tsit5 = analysis.lyapunov_spectrum(field, jnp.ones(2), t1=4.0)
    for solver in ("bosh3", "kvaerno5"):
        out = analysis.lyapunov_spectrum(
            field, jnp.ones(2), t1=4.0, options=LYAPUNOV.replace(solver=solver)
        )
        np.testing.assert_allclose(out["exponents"], tsit5["exponents"], atol=1e-6)
        assert out["volume_rate"] == pytest.approx(-3.0, abs=1e-6) and out["solver"] == solver
    euler = LYAPUNOV.replace(solver="euler", rtol=None, atol=None, dt0=0.1)
    out = analysis.lyapunov_spectrum(field, jnp.ones(2), t1=2.0, options=euler)
    assert out["volume_rate"] == pytest.approx(np.log(0.9 * 0.8) / 0.1, rel=1e-12)
    assert out["rtol"] is None and out["atol"] is None and out["solver"] == "euler"
    independent = analysis.lyapunov_spectrum(
        field,
        jnp.ones(2),
        k=3,
        t1=0.3,
        settings=SETTINGS(renormalise=0.15, orthonormalise=False, ends=(0.1,)),
    )
    np.testing.assert_allclose(independent["times"], [0.1, 0.2, 0.3], rtol=1e-15)
    assert independent["t1"] == 0.3 and independent["metadata"]["orthonormalise"] is False
    # each from its own row of normal(key(0), (3, 2)): between -2 and -1, not sorted
    draw = np.asarray(jax.random.normal(jax.random.key(0), (3, 2), jnp.float64))
    grown = np.linalg.norm(draw * np.exp(np.asarray(rates) * 0.3), axis=1)
    expected = np.log(grown / np.linalg.norm(draw, axis=1)) / 0.3
    np.testing.assert_allclose(independent["exponents"], expected, rtol=1e-8)


def test_options_and_settings_of_another_type_are_refused(no_runtime_types):
    with pytest.raises(TypeError, match="options must be a solvers.SolveOptions"):
        analysis.lyapunov_spectrum(lorenz, jnp.ones(3), t1=1.0, options=dict(rtol=1e-8))
    with pytest.raises(TypeError, match="settings must be an analysis.LyapunovSpectrumSettings"):
        analysis.lyapunov_spectrum(lorenz, jnp.ones(3), t1=1.0, settings=dict(seed=1))


def test_a_start_a_field_or_a_solve_that_cannot_give_a_spectrum_is_refused_saying_why():
    # conditions that are no arrays (a mode by name) pass through to the field
    modal = lambda t, x, args: -args["rate"] * x if args["mode"] == "linear" else -(x**3)  # noqa: E731
    out = analysis.lyapunov_spectrum(
        modal, jnp.ones(2), args={"mode": "linear", "rate": 2.0}, t1=2.0
    )
    np.testing.assert_allclose(out["exponents"], [-2.0, -2.0], atol=1e-6)
    with pytest.raises(ValueError, match="x0 holds NaN or inf"):
        analysis.lyapunov_spectrum(lorenz, jnp.array([1.0, jnp.nan, 0.0]), t1=1.0)
    with pytest.raises(ValueError, match=r"x0's shape \(3,\) \(got \(2,\)\).*time first"):
        analysis.lyapunov_spectrum(lambda t, x, args: x[:2], jnp.ones(3), t1=1.0)
    # a field undefined beyond x = 2 (sqrt of a negative): NaN, named as such, with when
    undefined = lambda t, x, args: jnp.sqrt(2.0 - x)  # noqa: E731
    with pytest.raises(ValueError, match=r"from t = 0 to 1: the state or the field there is NaN"):
        analysis.lyapunov_spectrum(undefined, jnp.array([3.0]), t1=2.0)
    # x' = -sqrt(x) from 0.81 reaches x = 0 at t = 1.8, beyond which the field is NaN:
    # no state is NaN (every step past it is rejected), the field just ahead is
    drains = lambda t, x, args: -jnp.sqrt(x)  # noqa: E731
    with pytest.raises(
        ValueError, match=r"from t = 1 to 2: the field is NaN or inf just ahead"
    ) as info:
        analysis.lyapunov_spectrum(drains, jnp.array([0.81]), t1=3.0)
    found = re.search(r"stopped, at t = ([0-9.]+)", str(info.value))
    assert found and abs(float(found[1]) - 1.8) < 1e-3, str(info.value)
    # x' = x^2 - x from 1.5 blows up at t = ln 3, in the second interval: named, with when
    blows_up = lambda t, x, args: x**2 - x  # noqa: E731
    with pytest.raises(
        ValueError, match=r"from t = 1 to 2\. The state's RMS grew from 1.5"
    ) as info:
        analysis.lyapunov_spectrum(blows_up, jnp.array([1.5]), t1=2.0)
    found = re.search(r"by t = ([0-9.]+), ever faster", str(info.value))
    assert found and abs(float(found[1]) - np.log(3.0)) < 1e-3, str(info.value)
    # an integer start is a start (cast to the arithmetic's dtype; the program above)
    out = analysis.lyapunov_spectrum(
        modal, jnp.array([1, 2]), args={"mode": "linear", "rate": 1.0}, t1=2.0
    )
    np.testing.assert_allclose(out["exponents"], [-1.0, -1.0], atol=1e-6)


def test_too_long_a_renormalise_interval_for_the_dtype_is_flagged():
    """At Lorenz's origin (a fixed point) the exponents are the eigenvalues of the
    Jacobian there, 11.83, -2.67 and -22.83, summing to its trace -(sigma + 1 + beta).
    Over one renormalise interval of 1 the tangent vectors' growth spreads over 34.7
    nats, e^34.7 times float64's epsilon is 0.26: the smallest exponent drowns in
    rounding (the sum off by 0.02 with atol 1e-16, where the solver's own floor is
    far below), and a warning says so and how short to go; at the interval it names
    the sum is the trace to 1e-5. (At the default atol, 1e-10, the slowest vector's
    shrinking by e^22.8 within the interval is the larger floor: see the next test.)"""
    origin = jnp.zeros(3)
    jacobian = np.array([[-SIGMA, SIGMA, 0.0], [RHO, -1.0, 0.0], [0.0, 0.0, -BETA]])
    rates = np.sort(np.linalg.eigvals(jacobian).real)[::-1]
    with pytest.warns(
        RuntimeWarning, match=r"spread over 3\d\.\d nats.*renormalise at most"
    ) as said:
        long = analysis.lyapunov_spectrum(
            lorenz,
            origin,
            t1=20.0,
            options=analysis.LYAPUNOV_OPTIONS.replace(atol=1e-16),
            settings=analysis.LyapunovSpectrumSettings(transient=5.0, renormalise=1.0),
        )
    # the eigenvalues' spread, 34.66, and a little more while the vectors align
    assert rates[0] - rates[-1] - 0.1 < long["growth_spread"] < rates[0] - rates[-1] + 1.0
    assert abs(long["volume_rate"] - np.sum(rates)) > 1e-2
    suggested = float(str(said[0].message).rsplit("at most ", 1)[1].rstrip("."))
    assert 0.5 < suggested < 1.0
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        short = analysis.lyapunov_spectrum(
            lorenz,
            origin,
            t1=20.0,
            options=analysis.LYAPUNOV_OPTIONS.replace(atol=1e-16),
            settings=analysis.LyapunovSpectrumSettings(transient=5.0, renormalise=suggested),
        )
    assert abs(short["volume_rate"] - np.sum(rates)) < 1e-5
    np.testing.assert_allclose(short["exponents"], rates, atol=1e-4)  # aligned: no 1/T


def test_a_vector_that_shrinks_below_atol_within_an_interval_is_flagged():
    """`dx/dt = diag(-1, -30) x`: over an interval of 1 the second tangent vector
    shrinks by e^30, far below what atol 1e-10 resolves (its exponent comes out near
    -23); a warning names an interval at which it is resolved, and there the exponents
    are the rates."""
    rates = jnp.array([-1.0, -30.0])
    field = lambda t, x, args: rates * x  # noqa: E731
    with pytest.warns(RuntimeWarning, match=r"shrank by e\^\d+.*atol=1e-10.*at most") as said:
        coarse = analysis.lyapunov_spectrum(
            field, jnp.ones(2), t1=20.0, settings=analysis.LyapunovSpectrumSettings(transient=2.0)
        )
    assert coarse["exponents"][1] > -29.0  # the floor, not the rate
    suggested = float(str(said[0].message).rsplit("at most ", 1)[1].rstrip("."))
    fine = analysis.lyapunov_spectrum(
        field,
        jnp.ones(2),
        t1=20.0,
        settings=analysis.LyapunovSpectrumSettings(transient=2.0, renormalise=suggested),
    )
    np.testing.assert_allclose(fine["exponents"], [-1.0, -30.0], atol=2e-2)
