"""Fixed points: what "converged" means on each flow (docs/mathematics.md), the direct
fixed-point finder as a reference for the integrating stop, and conditions that make a
fixed point depend on the data."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import et_ode
from conftest import N_TOKENS, make_state, runtime_types_off
from et_ode import solvers

TIGHT = dict(solver="tsit5", rtol=1e-8, atol=1e-10)


@eqx.filter_jit
def _rates(model, x, flow="native"):
    """RMS of G, of dg/dt and of dx/dt at state x."""
    v = model.vector_field(0.0, x, None, flow)
    dg = jax.jvp(model.norm, (x,), (v,))[1]
    return solvers.rms(model.residual(x)), solvers.rms(dg), solvers.rms(v)


@pytest.fixture(scope="module")
def native_long(model, x0):
    times = jnp.array([10.0, 100.0, 1000.0])
    return times, solvers.solve(model, x0, t1=1000.0, save=times, max_steps=20000, **TIGHT)


def test_native_flow_scales_grow_linearly(model, native_long):
    times, sol = native_long
    scales = np.stack([np.asarray(model.norm.scale(x)) for x in sol.xs])  # [T, N]
    ratio = scales[2] / scales[1]  # t = 1000 against t = 100
    assert np.all((ratio > 8.0) & (ratio < 12.5)), ratio
    assert np.all(scales[1] / scales[0] > 7.0)


def test_native_flow_dgdt_falls_faster_than_residual(model, native_long):
    _, sol = native_long
    g_rms, dg_rms, dx_rms = np.array([_rates(model, x) for x in sol.xs]).T
    ratio = dg_rms / g_rms
    assert ratio[2] < ratio[0] / 50, ratio  # |dg/dt| / |G| shrinks with the slowing clock
    assert g_rms[2] > 0.1  # still far from a fixed point at t = 1000 ...
    assert dg_rms[2] < 1e-3  # ... although g has all but stopped moving
    assert dx_rms[2] > 1.0  # and |dx/dt| never goes to zero


def test_native_stop_waits_for_residual(model, x0):
    """A stop on |dg/dt| (or diffrax's steady-state test on |dx/dt| against |x|) would
    fire long before t = 1000; the residual stop does not."""
    sol = solvers.solve(
        model,
        x0,
        t1=1000.0,
        stop=solvers.FixedPointStop(atol=1e-3),
        max_steps=20000,
        throw=False,
        **TIGHT,
    )
    assert sol.stats["stop_reason"] == "not_converged"
    assert float(sol.t_final) == pytest.approx(1000.0)
    x = sol.x_final
    g_rms, dg_rms, dx_rms = _rates(model, x)
    assert float(g_rms) > 0.1 and float(dg_rms) < 1e-3
    # |dx/dt| / |x| ~ 1/t: diffrax's steady_state_event (|dx/dt| < rtol |x|) fires
    # at any rtol >= 2e-3 here, at a state that is not a fixed point.
    assert float(dx_rms) < 2e-3 * float(solvers.rms(x))
    with pytest.raises(solvers.SolveError, match="time cap") as info:
        solvers.solve(
            model, x0, t1=1000.0, stop=solvers.FixedPointStop(atol=1e-3), max_steps=20000, **TIGHT
        )
    assert info.value.reason == "not_converged"


@pytest.fixture(scope="module")
def projected_stop(model, x0):
    return solvers.solve(
        model,
        x0,
        flow="projected",
        t1=1000.0,
        stop=solvers.FixedPointStop(atol=1e-7),
        solver="tsit5",
        rtol=1e-10,
        atol=1e-12,
        max_steps=20000,
    )


def test_projected_stop_fires_at_the_finders_minimum(model, projected_stop):
    sol = projected_stop
    assert sol.stats["stop_reason"] == "fixed_point"
    assert float(sol.stats["residual_rms"]) < 1e-7
    assert float(sol.t_final) < 200.0
    ref = solvers.find_fixed_point(model, sol.x_final)
    assert bool(ref.success) and float(ref.residual_rms) < 1e-12
    energy = float(model.energy(sol.x_final))
    assert energy == pytest.approx(float(ref.energy), rel=1e-10, abs=1e-10)
    # Same point, not just the same energy (distance ~ |G| / smallest curvature).
    assert float(jnp.abs(sol.x_final - ref.x).max()) < 1e-4
    # The projected flow keeps each token's mean and scale.
    np.testing.assert_allclose(model.norm.scale(sol.x_final), model.norm.scale(ref.x), rtol=1e-10)


def test_relative_fixed_point_tolerance(model, x0):
    stop = solvers.FixedPointStop(atol=0.0, rtol=1e-4)
    sol = solvers.solve(model, x0, flow="projected", t1=1000.0, stop=stop, max_steps=20000, **TIGHT)
    initial = float(sol.stats["residual_rms_initial"])
    assert float(sol.stats["residual_rms"]) < 1e-4 * initial
    assert float(sol.stats["fixed_point_threshold"]) == pytest.approx(1e-4 * initial)


def test_finder_gmres_matches_dense(model, projected_stop):
    dense = solvers.find_fixed_point(model, projected_stop.x_final)
    gmres = solvers.find_fixed_point(model, projected_stop.x_final, linear="gmres", tol=1e-11)
    assert float(gmres.residual_rms) < 1e-9
    assert float(jnp.abs(dense.x - gmres.x).max()) < 1e-8


def test_lbfgs_reaches_the_flows_minimum_and_stalls_at_the_energy_floor(model, x0, projected_stop):
    """From x0 on this tiny model (one basin along both paths) L-BFGS on the manifold
    reaches the projected flow's minimum in far fewer gradients than the flow's NFE, at
    the same point, token scales kept. Its line search compares energies, so it stalls
    where a step lowers E by less than E's round-off, RMS G ~ sqrt(eps |E| curvature):
    measured 1.45e-7 here (float64, |E| = 468), where the flow, which never evaluates
    E, goes on to 1e-12."""
    found = solvers.find_fixed_point(model, x0, method="lbfgs", tol=1e-6, max_steps=500)
    assert bool(found.success) and float(found.residual_rms) < 1e-6
    assert int(found.steps) < int(projected_stop.stats["nfe"]) / 20
    assert float(jnp.abs(model.norm(found.x) - model.norm(projected_stop.x_final)).max()) < 1e-5
    np.testing.assert_allclose(model.norm.scale(found.x), model.norm.scale(x0), rtol=1e-10)
    floor = solvers.find_fixed_point(model, x0, method="lbfgs", tol=1e-10, max_steps=500)
    assert not bool(floor.success) and 1e-8 < float(floor.residual_rms) < 1e-6
    with runtime_types_off(), pytest.raises(ValueError, match="method must be one of"):
        solvers.find_fixed_point(model, x0, method="adam")  # past its Literal annotation


def test_anderson_settings_are_the_old_keywords(model, x0):
    """`anderson=solvers.AndersonSettings(dt, memory, warm_steps)` is what the keywords
    `dt=`, `memory=`, `warm_steps=` were: the same iterates, bit for bit. The keywords
    still work, with a `DeprecationWarning` naming the settings that replace them, but not
    beside settings of one's own; a bad field is refused where the settings are made."""
    settings = solvers.AndersonSettings(dt=0.5, memory=5, warm_steps=5)
    found = solvers.find_fixed_point(model, x0, method="anderson", tol=1e-8, anderson=settings)
    assert bool(found.success) and float(found.residual_rms) <= 1e-8
    replacement = r"anderson=solvers.AndersonSettings\(dt=0.5, memory=5, warm_steps=5\)"
    with pytest.warns(DeprecationWarning, match=replacement):
        old = solvers.find_fixed_point(
            model, x0, method="anderson", tol=1e-8, dt=0.5, memory=5, warm_steps=5
        )
    np.testing.assert_array_equal(np.asarray(old.x), np.asarray(found.x))
    assert int(old.steps) == int(found.steps)
    with pytest.raises(ValueError, match="got anderson= and memory= beside it"):
        solvers.find_fixed_point(model, x0, method="anderson", anderson=settings, memory=3)
    with pytest.raises(ValueError, match="memory must be an integer >= 1"):
        solvers.AndersonSettings(memory=0)
    with pytest.raises(ValueError, match="dt must be a positive number"):
        solvers.AndersonSettings(dt=float("nan"))
    with pytest.raises(ValueError, match=r"warm_steps \(5\) must be below max_steps \(5\)"):
        solvers.find_fixed_point(model, x0, method="anderson", anderson=settings, max_steps=5)


def test_a_nan_in_the_start_model_or_args_is_named(model, x0):
    """A NaN start, weight or condition is refused before the search, naming where it
    is (the search would end with `success=False` and a NaN state, and no word)."""
    with pytest.raises(ValueError, match=r"x_init holds NaN"):
        solvers.find_fixed_point(model, x0.at[0, 0].set(jnp.nan))
    broken = eqx.tree_at(lambda m: m.hopfield.xi, model, model.hopfield.xi.at[0, 0].set(jnp.inf))
    with pytest.raises(ValueError, match=r"model\.hopfield\.xi holds NaN or inf"):
        solvers.find_fixed_point(broken, x0)
    with pytest.raises(ValueError, match=r"args\[1\] holds NaN"):
        solvers.find_fixed_point(model, x0, args=(None, jnp.array([jnp.nan])))


# ---------------------------------------------------------------- conditions (test 8)
# The gradients and losses below are jitted: one compiled program each, where an eager
# `jax.grad` compiles every operation of the backward pass on its own.
IMPLICIT = dict(
    solver="tsit5",
    rtol=1e-10,
    atol=1e-12,
    flow="projected",
    t1=1000.0,
    stop=solvers.FixedPointStop(atol=1e-9),
    max_steps=20000,
    adjoint="implicit",
)


def _loss(model, sol):
    weights = make_state(seed=11)
    return jnp.sum(weights * jnp.tanh(model.norm(sol.x_final)))


def test_clamped_tokens_make_the_fixed_point_depend_on_them(model, x0):
    grad = jax.jit(
        jax.grad(lambda x, args: _loss(model, solvers.solve(model, x, args=args, **IMPLICIT)))
    )
    clamped = jnp.arange(N_TOKENS) < 3
    grad_x0 = grad(x0, et_ode.Conditions(clamped=clamped))
    grad_free = grad(x0, et_ode.Conditions(clamped=jnp.zeros(N_TOKENS, bool)))  # same compile
    clamped_norm = float(jnp.linalg.norm(grad_x0[:3]))
    free_norm = float(jnp.linalg.norm(grad_x0[3:]))
    # Clamped values steer the fixed point; the free tokens' own start is forgotten
    # (only their scale, which the projected flow keeps, and the loss's direct use).
    assert clamped_norm > 0.1
    # Without clamping, the loss's x0-gradient on those same free tokens is unchanged in
    # kind; with clamping, the free tokens' fixed point moves with the clamped values:
    assert free_norm < clamped_norm
    assert float(jnp.linalg.norm(grad_free)) < 0.1 * clamped_norm


def test_external_field_makes_the_fixed_point_depend_on_it(model, x0):
    field = 0.5 * make_state(seed=12)

    def loss(c):
        sol = solvers.solve(model, x0, args=et_ode.Conditions(field=c), **IMPLICIT)
        return _loss(model, sol)

    grad_field = jax.jit(jax.grad(loss))(field)
    loss = jax.jit(loss)
    assert float(jnp.linalg.norm(grad_field)) > 0.1
    # Finite-difference check along one direction: the dependence is real, not an artefact.
    direction = make_state(seed=13)
    h = 1e-5
    fd = (loss(field + h * direction) - loss(field - h * direction)) / (2 * h)
    assert float(jnp.sum(grad_field * direction)) == pytest.approx(float(fd), rel=1e-4)
