"""Trajectories against references written elsewhere: the paper's discrete update by hand,
the energy and its closed-form rate along tight solves, scipy's DOP853, and single solves
against batched ones.

Compilation dominates the run time, so the solves share a few static configurations
(solver, flow, save mode, model, batching) and vary only numbers (t1, dt0, tolerances).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import et_ode
from conftest import make_state
from et_ode import solvers
from et_ode.vocab import FLOWS

TIGHT = dict(rtol=1e-10, atol=1e-12)
T_LONG = 5.0  # horizon of the tight step-saving solves
TS = np.array([0.25, 0.5, 1.0, 2.0, 3.0])  # comparison times for the other solvers


def _max_rel(a, b):
    """Max abs difference per saved time over the max abs of the reference there."""
    a, b = np.asarray(a), np.asarray(b)
    axes = tuple(range(a.ndim - 2, a.ndim))
    return np.max(np.abs(a - b), axis=axes) / np.max(np.abs(b), axis=axes)


@pytest.fixture(scope="module")
def xb():
    """Three different initial states, [3, N, D]."""
    return make_state(batch=(3,))


# ----------------------------------------------------------------- Test 2: the paper's map
def _paper_iterates(model, x, steps=12, alpha=0.1):
    """The paper's discrete update, written out: `x <- x - alpha dE/dg`, tau = 1."""
    step = jax.jit(lambda x: x - alpha * jax.grad(model.energy_of_g)(model.norm(x)))
    iterates = [x]
    for _ in range(steps):
        iterates.append(step(iterates[-1]))
    return iterates


def _as_float32(tree):
    return jax.tree.map(
        lambda a: a.astype(jnp.float32) if jnp.issubdtype(a.dtype, jnp.floating) else a, tree
    )


@pytest.mark.parametrize("dtype, tol", [(jnp.float32, 1e-5), (jnp.float64, 1e-12)])
def test_euler_solve_is_the_papers_update(smooth_model, x0, dtype, tol):
    """The identity does not depend on the Hopfield activation; the smooth model shares the
    compiled Euler solve with Test 10 and test_order.py. Its float32 copy is a cast of the
    float64 one: building a fresh float32 model costs seconds of eager compilation."""
    model = smooth_model
    if dtype == jnp.float32:
        model, x0 = _as_float32(model), x0.astype(jnp.float32)
        assert all(leaf.dtype == jnp.float32 for leaf in jax.tree.leaves(model))
    sol = solvers.solve(model, x0, solver="euler", dt0=0.1, t1=1.2)
    iterates = _paper_iterates(model, x0)
    by_hand = iterates[12]
    assert sol.x_final.dtype == dtype and by_hand.dtype == dtype
    assert int(sol.stats["num_steps"]) == 12 and float(sol.t_final) == pytest.approx(1.2)
    scale = float(jnp.max(jnp.abs(by_hand)))
    err = float(jnp.max(jnp.abs(sol.x_final - by_hand)))
    print(
        f"\neuler vs the paper's 12 steps ({jnp.dtype(dtype).name}): max abs diff {err:.3g}, "
        f"max |x| {scale:.3g}"
    )
    assert err <= tol * scale
    # The comparison can fail: one step fewer is far outside the tolerance.
    assert float(jnp.max(jnp.abs(iterates[11] - by_hand))) > 1e3 * tol * scale


# ----------------------------------------------------- tight step-saving solves (shared)
@pytest.fixture(scope="module")
def smooth_runs(smooth_model, x0):
    """Tight tsit5 solves of both flows on the smooth model, saving every step and E.
    Shared by Tests 3, 4 and 10 (one compiled program per flow)."""
    return {
        flow: solvers.solve(
            smooth_model,
            x0,
            solver="tsit5",
            flow=flow,
            t1=T_LONG,
            save="steps",
            save_energy=True,
            **TIGHT,
        )
        for flow in FLOWS
    }


PAD = 1024  # trajectories are padded to this many states: one compile per model


@eqx.filter_jit
def _along(model, xs):
    """Per state: E, and dE/dt both in closed form and as the JVP of E along the field,
    for both flows."""

    def one(x):
        out = dict(energy=model.energy(x))
        for flow in FLOWS:
            out[f"dEdt_{flow}"] = model.dEdt(x, flow=flow)
            field = model.vector_field(0.0, x, None, flow)
            out[f"jvp_{flow}"] = jax.jvp(model.energy, (x,), (field,))[1]
        return out

    return jax.vmap(one)(xs)


def _along_trajectory(model, xs):
    xs = np.asarray(xs)
    assert len(xs) <= PAD
    padded = np.concatenate([xs, np.repeat(xs[-1:], PAD - len(xs), axis=0)])
    return {k: np.asarray(v)[: len(xs)] for k, v in _along(model, padded).items()}


# ------------------------------------------------------------ Test 3: energy and dE/dt
@pytest.mark.parametrize("flow", FLOWS)
def test_energy_never_rises_and_matches_closed_form_rate(smooth_model, smooth_runs, flow):
    sol = smooth_runs[flow]
    ts, energies = np.asarray(sol.ts), np.asarray(sol.energies)
    assert sol.stats["stop_reason"] == "t1" and ts[-1] == pytest.approx(T_LONG)
    np.testing.assert_array_equal(np.asarray(sol.energy_ts), ts)
    along = _along_trajectory(smooth_model, sol.xs)
    # The stored trace is E at the stored states.
    scale = np.max(np.abs(energies))
    assert np.max(np.abs(energies - along["energy"])) <= 1e-13 * scale

    # Lyapunov: E never rises along the exact flow (here: a tight solve).
    rise = float(np.max(np.diff(energies)))
    print(
        f"\n{flow}: {len(ts) - 1} steps, E {energies[0]:.6g} -> {energies[-1]:.6g}, "
        f"largest step-to-step change {rise:.3g}"
    )
    assert rise <= 1e-10 * scale

    # dE/dt in closed form equals the directional derivative of E along the field ...
    dedt, jvp = along[f"dEdt_{flow}"], along[f"jvp_{flow}"]
    closed_vs_jvp = float(np.max(np.abs(dedt - jvp) / np.abs(jvp)))
    assert np.all(dedt < 0)
    assert closed_vs_jvp <= 1e-10

    # ... and the time derivative of E along the computed trajectory: a quartic through
    # five consecutive saved (t, E), differentiated at the middle one (error O(dt^4)).
    errors = np.array(
        [
            np.polyfit(ts[i - 2 : i + 3] - ts[i], energies[i - 2 : i + 3], 4)[-2] - dedt[i]
            for i in range(2, len(ts) - 2)
        ]
    )
    rates = np.abs(dedt[2:-2])
    # Relative to the local rate, where the rate is not tiny next to the round-off in E.
    big = rates > 1e-3 * rates.max()
    rel = np.abs(errors[big]) / rates[big]
    print(
        f"  dE/dt closed form vs d/dt of E along the solve: max rel {rel.max():.3g} at "
        f"{big.sum()} steps; closed form vs JVP: max rel {closed_vs_jvp:.3g}"
    )
    assert big.sum() > 100
    assert rel.max() <= 1e-5


# ------------------------------------------------------------------ Test 4: vs scipy
def _scipy_dense(model, x0, flow, t1):
    rhs = jax.jit(lambda y: model.vector_field(0.0, y.reshape(x0.shape), None, flow).reshape(-1))
    ref = solve_ivp(
        lambda t, y: np.asarray(rhs(y)),
        (0.0, t1),
        np.asarray(x0).ravel(),
        method="DOP853",
        rtol=1e-12,
        atol=1e-12,
        dense_output=True,
    )
    assert ref.success, ref.message
    return lambda ts: ref.sol(np.asarray(ts)).T.reshape(-1, *x0.shape)


@pytest.fixture(scope="module")
def scipy_refs(smooth_model, x0):
    """DOP853 at rtol = atol = 1e-12 with its dense output, per flow, over [0, T_LONG]."""
    return {flow: _scipy_dense(smooth_model, x0, flow, T_LONG) for flow in FLOWS}


@pytest.mark.parametrize("flow", FLOWS)
def test_tsit5_steps_match_scipy(smooth_runs, scipy_refs, flow):
    sol = smooth_runs[flow]
    err = _max_rel(sol.xs, scipy_refs[flow](sol.ts))
    print(f"\ntsit5 {flow}: max rel error vs DOP853 over {len(err)} step times {err.max():.3g}")
    assert err.max() <= 1e-8


T4_TIMES = {"dopri8": TS, "bosh3": TS, "dopri5": TS, "kvaerno5": TS[:3]}
# Every solver costs a compile of 4-6 s of CPU (kvaerno5: about 15 s, and it takes over a
# thousand Newton-iterated steps per unit time here, half of them rejected). Measured max
# rel errors vs DOP853: dopri8 1.0e-10, bosh3 3.0e-10, dopri5 8.0e-11, kvaerno5 1.3e-12.


@pytest.mark.parametrize("solver", list(T4_TIMES))
def test_adaptive_solvers_match_scipy(smooth_model, x0, scipy_refs, solver):
    times = T4_TIMES[solver]
    if solver == "dopri8":  # one solve saving at the times
        sol = solvers.solve(
            smooth_model,
            x0,
            solver=solver,
            t1=times[-1],
            save=jnp.asarray(times),
            **TIGHT,
        )
        np.testing.assert_array_equal(np.asarray(sol.ts), times)
        assert float(sol.t_final) == times[-1]
        np.testing.assert_allclose(sol.x_final, sol.xs[-1], rtol=1e-12, atol=1e-12)
        xs, steps = sol.xs, int(sol.stats["num_steps"])
    else:  # one solve per time: t1 is a number, so one compiled program serves them all
        sols = [solvers.solve(smooth_model, x0, solver=solver, t1=t, **TIGHT) for t in times]
        assert [float(s.t_final) for s in sols] == list(times)
        xs, steps = [s.x_final for s in sols], int(sols[-1].stats["num_steps"])
    err = _max_rel(xs, scipy_refs["native"](times))
    print(
        f"\n{solver} native: max rel error vs DOP853 at t = {times.tolist()}: "
        f"{', '.join(f'{e:.2g}' for e in err)} ({steps} steps to t = {times[-1]})"
    )
    assert err.max() <= 1e-8


# ---------------------------------------------------------------- Test 10: batches
def _assert_per_sample(batched, singles, rtol, t_rtol=None):
    """Each sample of `batched` equals its single solve: the state to `rtol`, the end time
    to `t_rtol` (default `rtol`), the same step counts."""
    for i, single in enumerate(singles):
        np.testing.assert_allclose(batched.x_final[i], single.x_final, rtol=rtol, atol=rtol)
        assert float(batched.t_final[i]) == pytest.approx(float(single.t_final), rel=t_rtol or rtol)
        for key in ("num_steps", "num_accepted_steps", "num_rejected_steps"):
            assert int(batched.stats[key][i]) == int(single.stats[key]), key


def test_batched_constant_step_solve(smooth_model, xb):
    batched = solvers.solve(smooth_model, xb, solver="euler", dt0=0.1, t1=1.2)
    singles = [solvers.solve(smooth_model, x, solver="euler", dt0=0.1, t1=1.2) for x in xb]
    assert batched.x_final.shape == xb.shape and batched.stats["stop_reason"] == ["t1"] * 3
    _assert_per_sample(batched, singles, 1e-12)


def test_batched_adaptive_solve(smooth_model, xb):
    kw = dict(solver="tsit5", t1=T_LONG, save="steps", save_energy=True, rtol=1e-8, atol=1e-10)
    batched = solvers.solve(smooth_model, xb, **kw)
    singles = [solvers.solve(smooth_model, x, **kw) for x in xb]
    _assert_per_sample(batched, singles, 1e-10)
    counts = [len(s.ts) for s in singles]
    print(f"\nadaptive batch: saved states per sample {counts}")
    assert len(set(counts)) > 1  # the samples took different numbers of steps
    for i, (single, n) in enumerate(zip(singles, counts)):
        np.testing.assert_allclose(batched.ts[i, :n], single.ts, rtol=1e-10)
        np.testing.assert_allclose(batched.xs[i, :n], single.xs, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(batched.energies[i, :n], single.energies, rtol=1e-10)
        assert np.all(np.isinf(np.asarray(batched.ts[i, n:])))  # diffrax's padding


def test_batched_fixed_point_stop_with_batched_args(smooth_model, xb):
    """Per-sample conditions (`args_batched=True`): the clamped tokens differ by sample,
    and sample 0 has none (the plain fixed-point stop). The batch saves at given times
    (three, the last past every stop), the single solves save only the end."""
    clamped = jnp.zeros(xb.shape[:2], bool).at[1, :2].set(True).at[2, -1].set(True)
    kw = dict(
        solver="tsit5",
        flow="projected",
        rtol=1e-8,
        atol=1e-10,
        stop=solvers.FixedPointStop(atol=1e-6),
    )
    batched = solvers.solve(
        smooth_model,
        xb,
        args=et_ode.Conditions(clamped=clamped),
        args_batched=True,
        save=jnp.array([0.5, 2.0, 40.0]),
        **kw,
    )
    singles = [
        solvers.solve(smooth_model, xb[i], args=et_ode.Conditions(clamped=clamped[i]), **kw)
        for i in range(3)
    ]
    # A vmapped program rounds differently from a single one (as two CPUs or compiler
    # settings do): the step sizes differ in their last digits, so the time the stop
    # fires differs at about 1e-8 relative (measured 1.4e-8), the state at rest there not.
    _assert_per_sample(batched, singles, 1e-9, t_rtol=1e-6)
    assert batched.stats["stop_reason"] == ["fixed_point"] * 3
    stops = np.asarray(batched.t_final)
    print(f"\nfixed-point stop times per sample: {stops}")
    assert len(set(np.round(stops, 6))) == 3 and np.all((stops > 2.0) & (stops < 40.0))
    for i in range(3):
        # Converged, clamped tokens untouched, and the save time past the stop unfilled.
        assert float(batched.stats["residual_rms"][i]) < 1e-6
        np.testing.assert_array_equal(batched.x_final[i][clamped[i]], xb[i][clamped[i]])
        np.testing.assert_array_equal(np.asarray(batched.ts[i]), [0.5, 2.0, np.inf])
        assert np.all(np.isfinite(np.asarray(batched.xs[i, :2])))
    # Clamping changes the answer: the per-sample conditions reached their samples.
    unclamped = solvers.solve(
        smooth_model, xb[1], args=et_ode.Conditions(clamped=jnp.zeros_like(clamped[1])), **kw
    )
    assert float(jnp.max(jnp.abs(unclamped.x_final - batched.x_final[1]))) > 1e-2
