"""Any diffrax solver and step-size controller as objects, and traced horizons and
tolerances (issue 11, items 1 and 3).

1. Names are shortcuts for diffrax objects: a named solver and its object run the same
   compiled program (bitwise equal, same statistics) and the same cost model (all nine);
   objects with no name (Kvaerno3, a Runge-Kutta method with a tableau of our own,
   Ralston under a tuned PIDController with a jump) solve the flow to their accuracy;
   counts that cannot be derived (implicit, ReversibleHeun, a custom step, FSAL across
   jumps) are labelled; every unfit combination is refused with a message naming the
   problem and the fix.
2. `t0`, `t1`, `rtol`, `atol` and the fixed-point tolerances traced under `jax.jit` and
   `jax.vmap` equal separate solves (1e-12 in float64, 1e-6 in float32); one compilation
   serves a sweep; bad traced values fail at run time with the messages of the concrete checks.

Compilation dominates the run time, so most solves share one static configuration,
`SWEEP` (tsit5, projected flow, a fixed-point stop whose tolerance is a number): its
concrete solves share one program, its jitted sweep another, its vmapped sweep a third.

The jitted functions take the model and `x0` as arguments, as `solve` passes them to its
own compiled program: closed over, they are constants that XLA folds into the program,
which changes float32 rounding enough to flip the controller's accept/reject decisions
(measured: 12 steps instead of 15 to t1 = 0.5, 4e-5 apart at rtol 1e-5, with or without
a traced t1). As arguments, traced and concrete solves are bitwise equal here.
"""

from typing import ClassVar

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import make_model, make_state
from et_ode import solvers
from et_ode.solvers._plumbing import solve_core

# tsit5 on the projected flow with a fixed-point stop, throw=False: with fp_atol = 1e-300
# the stop never fires and the solve runs to t1; with a loose one it stops earlier.
SWEEP = dict(solver="tsit5", flow="projected", atol=1e-9, throw=False)
NEVER = 1e-300
TS = np.linspace(0.5, 4.0, 8)


def _solve(model, x0, t1, rtol, fp_atol, fp_rtol=0.0, **kwargs):
    return solvers.solve(
        model,
        x0,
        t1=t1,
        rtol=rtol,
        stop=solvers.FixedPointStop(atol=fp_atol, rtol=fp_rtol),
        **dict(SWEEP, **kwargs),
    )


def _rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def _cache_size():
    return solve_core._cached._cache_size()


@pytest.fixture(scope="module")
def reference(model, x0):
    """A tight solve to t = 1 (no stop fires): the reference for the objects."""
    return _solve(model, x0, 1.0, 1e-11, NEVER).x_final


# ----------------------------------------------------------- 1. names are objects
@pytest.mark.parametrize("name", solvers.SOLVER_NAMES)
def test_every_name_is_a_diffrax_object(name):
    """Structure, all nine: the name makes the default object of its class, and the object
    describes itself with the same cost model (so the same `nfe`, `nfe_note`)."""
    by_name = solvers.get_preset(name)
    obj = type(by_name.make())()
    by_object = solvers.get_preset(obj)
    assert by_name.make() == obj and by_object.name == type(obj).__name__
    fields = ("stages", "fsal", "adaptive", "implicit", "order", "nfe_exact", "nfe_note")
    assert [getattr(by_object, f) for f in fields if f != "nfe_note"] == [
        getattr(by_name, f) for f in fields if f != "nfe_note"
    ]
    assert by_object.nfe_note.replace(by_object.name, name) == by_name.nfe_note


@pytest.mark.parametrize(
    "name, sweep",
    [
        ("euler", None),  # the paper's defaults
        ("tsit5", (1.0, 1e-11, NEVER)),  # shares the SWEEP program
    ],
)
def test_named_solver_equals_its_object(model, x0, reference, name, sweep):
    """Numbers: the same program (the cache does not grow), bitwise equal, same stats."""

    def call(solver):
        if sweep is None:
            return solvers.solve(model, x0, solver=solver)
        return _solve(model, x0, *sweep, solver=solver)

    by_name = call(name)
    size = _cache_size()
    by_object = call(type(solvers.get_preset(name).make())())
    assert _cache_size() == size
    assert bool(jnp.all(by_name.x_final == by_object.x_final))
    assert by_object.stats["solver"] == type(solvers.get_preset(name).make()).__name__
    assert by_name.stats["solver"] == name
    for key, value in by_name.stats.items():
        if key != "solver":
            assert str(by_object.stats[key]) == str(value), key


# ------------------------------------------------------- objects that have no name
class MyEuler(diffrax.Euler):
    """A user's subclass that keeps Euler's step."""


class RK4(diffrax.AbstractERK):
    """The classic fourth-order Runge-Kutta method, with the midpoint rule embedded for an
    error estimate: a tableau of our own."""

    tableau: ClassVar[diffrax.ButcherTableau] = diffrax.ButcherTableau(
        c=np.array([0.5, 0.5, 1.0]),
        b_sol=np.array([1 / 6, 1 / 3, 1 / 3, 1 / 6]),
        b_error=np.array([1 / 6, 1 / 3 - 1, 1 / 3, 1 / 6]),
        a_lower=(np.array([0.5]), np.array([0.0, 0.5]), np.array([0.0, 0.0, 1.0])),
    )
    interpolation_cls: ClassVar = diffrax.ThirdOrderHermitePolynomialInterpolation.from_k

    def order(self, terms):
        return 4


def test_custom_tableau_is_the_hand_written_method(model, x0):
    """12 constant RK4 steps (ConstantStepSize as an object) equal the method written out,
    and `nfe` is exact: 4 evaluations per step."""
    sol = solvers.solve(
        model, x0, solver=RK4(), stepsize_controller=diffrax.ConstantStepSize(), dt0=0.1, t1=1.2
    )
    field = lambda x: model.vector_field(0.0, x, None, "native")  # noqa: E731

    @jax.jit
    def step(x, dt=0.1):
        k1 = dt * field(x)
        k2 = dt * field(x + k1 / 2)
        k3 = dt * field(x + k2 / 2)
        k4 = dt * field(x + k3)
        return x + (k1 + 2 * k2 + 2 * k3 + k4) / 6

    x = x0
    for _ in range(12):
        x = step(x)
    assert _rel(sol.x_final, x) < 1e-12
    stats = sol.stats
    assert stats["solver"] == "RK4" and stats["stepsize_controller"] == "ConstantStepSize"
    assert int(stats["num_steps"]) == 12 and int(stats["nfe"]) == 48
    assert (
        not stats["nfe_is_estimate"] and stats["nfe_note"] == "exact: 4 stages per attempted step"
    )


def test_kvaerno3_with_tolerances(model, x0, reference):
    sol = solvers.solve(
        model, x0, solver=diffrax.Kvaerno3(), flow="projected", rtol=1e-8, atol=1e-10, t1=1.0
    )
    err = _rel(sol.x_final, reference)
    print(f"\nKvaerno3 rtol 1e-8: error {err:.2g}, {int(sol.stats['num_steps'])} steps")
    assert err < 1e-6
    assert sol.stats["solver"] == "Kvaerno3" and sol.stats["nfe_is_estimate"]
    assert sol.stats["nfe_note"].startswith("lower bound")
    assert int(sol.stats["nfe"]) == 3 * int(sol.stats["num_steps"]) + 1  # 4 stages, FSAL


def test_counts_that_cannot_be_derived_are_labelled():
    """ReversibleHeun, a wrapped solver and a custom `step` have no tableau to count from:
    `nfe` (one per step) is then an estimate, and says so."""

    class CustomStep(diffrax.Euler):
        def step(self, *args, **kwargs):
            return super().step(*args, **kwargs)

    for solver in (diffrax.ReversibleHeun(), diffrax.HalfSolver(diffrax.Tsit5()), CustomStep()):
        preset = solvers.get_preset(solver)
        assert not preset.nfe_exact and preset.stages == 1
        assert preset.nfe_note.startswith(
            f"estimate: one evaluation per attempted step; the count of {type(solver).__name__}"
        )
    assert solvers.get_preset(MyEuler()).nfe_exact  # a subclass that keeps Euler's step


def test_ralston_object_with_a_tuned_pid_and_a_jump(model, x0, reference):
    """Ralston as an object under `PIDController(pcoeff, icoeff, jump_ts)` (diffrax makes
    that a ClipStepSizeController): a step ends just before the jump, the tolerance is
    met, the controller is recorded."""
    controller = diffrax.PIDController(rtol=1e-5, atol=1e-7, pcoeff=0.3, icoeff=0.4, jump_ts=[0.5])
    sol = solvers.solve(
        model,
        x0,
        solver=diffrax.Ralston(),
        stepsize_controller=controller,
        flow="projected",
        t1=1.0,
        save="steps",
    )
    err = _rel(sol.x_final, reference)
    print(
        f"\nRalston PID(0.3, 0.4) rtol 1e-5: error {err:.2g}, {int(sol.stats['num_steps'])} steps"
    )
    assert err < 1e-5
    assert np.min(np.abs(np.asarray(sol.ts) - 0.5)) < 1e-12
    stats = sol.stats
    assert stats["solver"] == "Ralston" and stats["rtol"] == 1e-5 and stats["atol"] == 1e-7
    assert stats["stepsize_controller"] == "ClipStepSizeController(PIDController)"
    assert not stats["nfe_is_estimate"]  # Ralston is not FSAL: no evaluation after jumps
    assert int(stats["nfe"]) == 2 * int(stats["num_steps"])


class _Decay:
    """`dx/dt = -x`: a tiny energy system (cheap to compile) with a known solution."""

    def energy(self, x, args):
        return jnp.sum(x**2) / 2

    def vector_field(self, t, x, args, flow):
        return -x

    def residual(self, x, args):
        return x


def test_jump_with_an_fsal_solver_labels_nfe_a_lower_bound():
    """After a jump an FSAL method evaluates its first stage again, which the tableau count
    misses: `nfe` is then labelled a lower bound. The jump costs no accuracy."""
    sol = solvers.solve(
        _Decay(),
        jnp.ones((2, 3)),
        solver=diffrax.Tsit5(),
        t1=2.0,
        stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-10, jump_ts=[0.5, 1.0]),
    )
    assert _rel(sol.x_final, np.full((2, 3), np.exp(-2.0))) < 1e-7
    assert sol.stats["nfe_is_estimate"]
    assert sol.stats["nfe_note"].startswith("lower bound: 7 stages per attempted step")
    assert "jump_ts" in sol.stats["nfe_note"]


# ------------------------------------------------------------------- refusals
PID = diffrax.PIDController(rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(solver=diffrax.Sil3(), rtol=1e-6, atol=1e-8), "solver Sil3 is an IMEX solver"),
        (
            dict(solver=diffrax.KenCarp4(), rtol=1e-6, atol=1e-8),
            "solver KenCarp4 is an IMEX solver",
        ),
        (dict(solver=diffrax.SRA1()), r"solver SRA1 is a stochastic \(SDE\) solver"),
        (dict(solver=diffrax.EulerHeun()), r"solver EulerHeun is a stochastic \(SDE\) solver"),
        (dict(solver=diffrax.SemiImplicitEuler()), "solver SemiImplicitEuler needs the terms"),
        (
            dict(solver=diffrax.Euler(), stepsize_controller=PID),
            r"solver Euler has no error estimate, so an adaptive step-size controller "
            r"\(PIDController\)",
        ),
        (
            dict(solver=MyEuler(), rtol=1e-6, atol=1e-8),
            r"solver MyEuler has no error estimate, so rtol/atol \(PID step control\)",
        ),
        (
            dict(solver="tsit5", stepsize_controller=PID, rtol=1e-6, atol=1e-8),
            "stepsize_controller and rtol/atol both set the step control",
        ),
        (dict(solver="tsit5", stepsize_controller=PID, dtmin=1e-6), "dtmin belongs to the PID"),
        (dict(solver="euler", dt0=0.1, dtmin=0), "dtmin is the smallest adaptive step"),
        (
            dict(solver="tsit5", rtol=1e-6, atol=1e-8, dtmin=0.0),
            r"dtmin must be a positive finite number \(got 0.0\)",
        ),
        (
            dict(solver="tsit5", rtol=1e-6, atol=1e-8, dtmin=float("nan")),
            "dtmin must be a positive finite number",
        ),
        (
            dict(solver=diffrax.Kvaerno3(), stepsize_controller=diffrax.ConstantStepSize()),
            r"solver Kvaerno3 is implicit: .*root_finder=diffrax.VeryChord",
        ),
        (
            dict(solver=diffrax.Tsit5(), stepsize_controller=diffrax.ConstantStepSize(), dt0=None),
            "Constant steps need dt0",
        ),
    ],
)
def test_refusals(model, x0, kwargs, message):
    with pytest.raises(ValueError, match=message):
        solvers.solve(model, x0, **kwargs)
    with pytest.raises(ValueError, match=message):  # config files get the same checks
        solvers.check_options(**kwargs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(solver=diffrax.Tsit5), r"is a class; pass an instance: solver=diffrax.Tsit5\(\)"),
        (dict(solver=3), "solver must be a name"),
        (
            dict(solver="tsit5", stepsize_controller=diffrax.PIDController),
            "stepsize_controller=diffrax.PIDController is a class",
        ),
        (
            dict(solver="tsit5", stepsize_controller="pid"),
            "stepsize_controller must be a diffrax step-size controller",
        ),
    ],
)
def test_refusals_of_wrong_types(model, x0, kwargs, message, no_runtime_types):
    # no_runtime_types: these values do not have the type of solve's annotations, which
    # the suite's run-time type checks would refuse before solve's own message, the one
    # users get (config files, checked by check_options, get it too).
    test_refusals(model, x0, kwargs, message)


def test_check_options_accepts_objects():
    assert solvers.check_options(solver=diffrax.Tsit5(), stepsize_controller=PID)
    assert not solvers.check_options(solver=RK4(), stepsize_controller=diffrax.ConstantStepSize())
    assert solvers.check_options(solver=diffrax.Kvaerno3(), rtol=1e-6, atol=1e-8)
    own_tols = diffrax.Kvaerno3(root_finder=diffrax.VeryChord(rtol=1e-8, atol=1e-8))
    assert not solvers.check_options(solver=own_tols, dt0=0.1)


def test_check_options_takes_a_solve_options_and_the_callers_question():
    """`check_options(options, t1=..., stop=...)`: a `SolveOptions` with the horizon, stop,
    save and adjoint, as the fields one by one do; a field beside `options` is refused,
    an unknown keyword is a `TypeError` as Python's own."""
    adaptive = solvers.SolveOptions(solver="tsit5", dt0=None, rtol=1e-6, atol=1e-8)
    assert solvers.check_options(adaptive, t1=20.0, stop=solvers.FixedPointStop())
    assert solvers.check_options(**adaptive.keywords(), t1=20.0) is True
    assert solvers.check_options(solvers.SolveOptions()) is False  # the paper's Euler steps
    # the horizon's checks, which a SolveOptions alone cannot make
    with pytest.raises(ValueError, match="above the limit of 2147483647"):
        solvers.check_options(solvers.SolveOptions(dt0=1e-12), t1=1e3)
    with pytest.raises(ValueError, match="adjoint='implicit' differentiates a fixed point"):
        solvers.check_options(adaptive, adjoint="implicit")
    with pytest.raises(ValueError, match="check_options got options= and rtol= beside it"):
        solvers.check_options(adaptive, rtol=1e-3)
    assert solvers.check_options(adaptive, dt0=0.1)  # a default beside it is no choice
    with pytest.raises(TypeError, match="unexpected keyword argument 'tol'"):
        solvers.check_options(tol=1e-6)


# ------------------------------------------------------ 2. traced horizons and tolerances
TRACES: list[int] = []
# `_run` traces all six numbers of SWEEP: (t1, rtol, fixed-point atol) vary in the first
# tests, (t0, atol, fixed-point rtol) in the later ones, so that one jitted program and one
# vmapped program (every number batched) serve all of them.
DEFAULTS = dict(t0=0.0, atol=SWEEP["atol"], fp_rtol=0.0)


def _run(model, x0, t1, rtol, fp_atol, t0, atol, fp_rtol):
    TRACES.append(1)  # a Python side effect: runs once per trace
    return _solve(model, x0, t1, rtol, fp_atol, fp_rtol, t0=t0, atol=atol).x_final


def _traced(model, x0):
    """`_run` for `jax.vmap` over `(t1, rtol, fp_atol, t0, atol, fp_rtol)`."""
    return lambda *numbers: _run(model, x0, *numbers)


def _columns(points):
    """`[(t1, rtol, fp_atol, t0, atol, fp_rtol), ...]` as six arrays for `jax.vmap`."""
    return [jnp.asarray(column, jnp.float64) for column in zip(*points)]


_RUN_JIT = eqx.filter_jit(_run)


@pytest.fixture(scope="module")
def jitted(model, x0):
    """`_run` compiled, with all six numbers traced."""

    def f(t1, rtol, fp_atol, t0=0.0, atol=DEFAULTS["atol"], fp_rtol=0.0):
        return _RUN_JIT(
            model,
            x0,
            *(jnp.asarray(v, jnp.float64) for v in (t1, rtol, fp_atol, t0, atol, fp_rtol)),
        )

    f.compilations = _RUN_JIT._cached._cache_size
    return f


@pytest.fixture(scope="module")
def separate(model, x0):
    """Concrete solves, one compiled program for all (the numbers are arrays)."""

    def f(t1, rtol, fp_atol, t0=0.0, atol=DEFAULTS["atol"], fp_rtol=0.0):
        return _solve(model, x0, t1, rtol, fp_atol, fp_rtol, t0=t0, atol=atol).x_final

    return f


def test_jit_sweep_over_t1_compiles_once(jitted, separate):
    before = len(TRACES)
    outs = [jitted(t1, 1e-8, NEVER) for t1 in TS]
    assert jitted.compilations() == 1 and len(TRACES) - before == 1  # 8 points, 1 compile
    errs = [_rel(out, separate(float(t1), 1e-8, NEVER)) for out, t1 in zip(outs, TS)]
    print(f"\njit over t1: 8 points, 1 compilation, max rel diff {max(errs):.2g}")
    assert max(errs) < 1e-12


def test_jit_over_rtol_and_fixed_point_tolerance(jitted, separate):
    for rtol, fp_atol, t1 in [
        (1e-5, NEVER, 2.0),
        (1e-9, NEVER, 2.0),
        (1e-8, 1e-2, 50.0),
        (1e-8, 1e-4, 50.0),
    ]:
        assert _rel(jitted(t1, rtol, fp_atol), separate(t1, rtol, fp_atol)) < 1e-12
    assert jitted.compilations() == 1


def test_vmap_over_t1_rtol_and_fixed_point_tolerance(model, x0, separate):
    rtols = np.array([1e-5, 1e-6, 1e-7, 1e-8] * 2)
    fp = np.array([NEVER] * 6 + [1e-2, 1e-3])
    t1s = np.where(fp > NEVER, 50.0, TS)
    points = [(t1s[i], rtols[i], fp[i], *DEFAULTS.values()) for i in range(8)]
    outs = jax.vmap(_traced(model, x0))(*_columns(points))
    errs = [_rel(outs[i], separate(*point)) for i, point in enumerate(points)]
    print(f"\nvmap over (t1, rtol, fixed-point atol): max rel diff {max(errs):.2g}")
    assert max(errs) < 1e-12


# t0, atol and the fixed-point rtol: t1 = 6, fixed-point atol NEVER; fixed-point rtol 0
# runs to t1 (`not_converged`), 0.1 ... 0.01 stop early (0.01 from t0 2.5: at 5.9).
# 8 points, as the t1 sweep: the vmapped program is the same only for the same batch size.
T0_POINTS = [
    (6.0, 1e-8, NEVER, t0, atol, fp_rtol)
    for t0, atol, fp_rtol in [
        (0.0, 1e-9, 0.0),
        (-1.5, 1e-7, 0.0),
        (1.0, 1e-10, 0.0),
        (3.0, 1e-8, 0.0),
        (0.0, 1e-9, 1e-1),
        (2.5, 1e-8, 1e-2),
        (-1.0, 1e-7, 1e-1),
        (1.0, 1e-9, 3e-2),
    ]
]


@pytest.fixture(scope="module")
def separate_t0(model, x0):
    """Concrete solves of the `T0_POINTS` (the program of `separate`), with their stops."""
    sols = [
        _solve(model, x0, t1, rtol, fp_atol, fp_rtol, t0=t0, atol=atol)
        for t1, rtol, fp_atol, t0, atol, fp_rtol in T0_POINTS
    ]
    assert [s.stats["stop_reason"] for s in sols] == ["not_converged"] * 4 + ["fixed_point"] * 4
    assert all(float(s.t_final) < 6.0 for s in sols[4:])
    return [s.x_final for s in sols]


def test_jit_over_t0_atol_and_fixed_point_rtol(jitted, separate_t0):
    for point, expected in zip(T0_POINTS, separate_t0):
        assert _rel(jitted(*point), expected) < 1e-12
    assert jitted.compilations() == 1  # the program of the t1 sweep


def test_vmap_over_t0_atol_and_fixed_point_rtol(model, x0, separate_t0):
    outs = jax.vmap(_traced(model, x0))(*_columns(T0_POINTS))
    errs = [_rel(outs[i], expected) for i, expected in enumerate(separate_t0)]
    print(f"\nvmap over (t0, atol, fixed-point rtol): max rel diff {max(errs):.2g}")
    assert max(errs) < 1e-12


F32_ADAPTIVE = dict(solver="tsit5", rtol=1e-5, atol=1e-7)


@pytest.fixture(scope="module")
def model32():
    to32 = lambda tree: jax.tree.map(  # noqa: E731  a cast: cheaper than a fresh model
        lambda a: a.astype(jnp.float32) if jnp.issubdtype(a.dtype, jnp.floating) else a, tree
    )
    return to32(make_model()), make_state(dtype=jnp.float32)


def test_float32_traced_t1(model32):
    model, x0 = model32
    f = eqx.filter_jit(lambda m, x, t1: solvers.solve(m, x, t1=t1, **F32_ADAPTIVE).x_final)
    for t1 in (0.5, 1.5, 3.0):
        out = f(model, x0, jnp.float32(t1))
        assert out.dtype == jnp.float32
        assert _rel(out, solvers.solve(model, x0, t1=t1, **F32_ADAPTIVE).x_final) < 1e-6
    assert f._cached._cache_size() == 1


def test_float32_vmap_over_t1(model32):
    """8 horizons in one vmapped float32 program equal 8 separate solves to 1e-6 (bitwise
    on the CPUs tried: each sample runs the float32 operations of its own solve). With
    adaptive steps this is not a matter of round-off only: a difference of one rounding
    could flip an accept/reject decision and move the result by the tolerance (4e-5 at
    rtol 1e-5, see the module docstring); 1e-6 holds because the batched program rounds
    as the separate ones do. Compare at the float32 value of each horizon: a horizon
    rounded differently is a different problem."""
    model, x0 = model32
    t1s = np.geomspace(0.5, 6.0, 8).astype(np.float32)
    outs = jax.vmap(lambda t1: solvers.solve(model, x0, t1=t1, **F32_ADAPTIVE).x_final)(
        jnp.asarray(t1s)
    )
    assert outs.dtype == jnp.float32 and outs.shape == (8,) + x0.shape
    errs = [
        _rel(outs[i], solvers.solve(model, x0, t1=float(t1), **F32_ADAPTIVE).x_final)
        for i, t1 in enumerate(t1s)
    ]
    print(f"\nfloat32 vmap over t1 (tsit5, rtol 1e-5): max rel diff {max(errs):.2g}")
    assert max(errs) < 1e-6


@pytest.mark.parametrize(
    "args, message",
    [
        (
            (-1.0, 1e-8, NEVER),
            r"t1 must be finite and greater than t0=<traced> \(got t1=<traced>\)",
        ),
        ((jnp.inf, 1e-8, NEVER), "t1 must be finite and greater than t0"),
        ((1.0, 1e-8, NEVER, 2.0), "t1 must be finite and greater than t0"),
        ((1.0, 1e-8, NEVER, -jnp.inf), r"t0 must be finite \(got <traced>\)"),
        (
            (1.0, -1e-8, NEVER),
            r"rtol and atol must be finite, >= 0 and not both 0 \(got <traced>, <traced>\)",
        ),
        ((1.0, 1e-8, NEVER, 0.0, -1e-9), "rtol and atol must be finite, >= 0 and not both 0"),
        ((1.0, jnp.inf, NEVER), "rtol and atol must be finite, >= 0 and not both 0"),
        ((1.0, 1e-8, -1.0), "FixedPointStop needs atol >= 0 and rtol >= 0, not both zero"),
        ((1.0, 1e-8, NEVER, 0.0, 1e-9, -0.1), "FixedPointStop needs atol >= 0 and rtol >= 0"),
    ],
)
def test_traced_bad_values_fail_at_run_time(jitted, args, message):
    with pytest.raises(Exception, match=message):
        jax.block_until_ready(jitted(*args))
    assert jitted.compilations() == 1  # the same program checks them


def test_traced_bad_value_under_vmap(model, x0):
    # 8 points, one of them bad: the program of the vmapped sweeps above
    points = [(t1, 1e-8, NEVER, *DEFAULTS.values()) for t1 in [1.0] * 7 + [-1.0]]
    with pytest.raises(Exception, match="t1 must be finite and greater than t0"):
        jax.block_until_ready(jax.vmap(_traced(model, x0))(*_columns(points)))


def test_traced_constant_steps_need_max_steps(model, x0):
    with pytest.raises(ValueError, match="pass max_steps"):
        jax.jit(lambda t1: solvers.solve(model, x0, t1=t1).x_final)(1.2)
    with pytest.raises(ValueError, match="pass max_steps"):
        jax.vmap(lambda dt: solvers.solve(model, x0, dt0=dt).x_final)(jnp.array([0.1, 0.2]))


def test_traced_dt0_and_t1_with_max_steps(model, x0):
    """With `max_steps` a constant-step horizon may be traced: 12 Euler steps of 0.1 under
    jit equal the paper's defaults."""
    f = jax.jit(lambda t1, dt: solvers.solve(model, x0, t1=t1, dt0=dt, max_steps=30).x_final)
    expected = solvers.solve(model, x0).x_final
    assert _rel(f(1.2, 0.1), expected) < 1e-12


# ------------------------------------------------- 4. one options object (issue 48, item 4)
SWEEP_OPTIONS = solvers.SolveOptions(solver="tsit5", flow="projected", rtol=1e-8, atol=1e-9)


def test_options_object_is_the_keywords(model, x0, separate):
    """`solve(options=...)` runs the keywords' program: bitwise equal, no new compile."""
    expected = separate(2.0, 1e-8, NEVER)
    before = _cache_size()
    sol = solvers.solve(
        model,
        x0,
        options=SWEEP_OPTIONS,
        t1=2.0,
        stop=solvers.FixedPointStop(atol=NEVER, rtol=0.0),
        throw=False,
    )
    assert _cache_size() == before
    np.testing.assert_array_equal(sol.x_final, expected)
    assert sol.stats["solver"] == "tsit5" and sol.stats["rtol"] == 1e-8


def test_options_traced_tolerance(model, x0, separate):
    """An options object built inside `jax.jit` from a traced rtol equals the concrete solve."""

    @jax.jit
    def run(rtol):
        options = SWEEP_OPTIONS.replace(rtol=rtol)
        stop = solvers.FixedPointStop(atol=NEVER, rtol=0.0)
        return solvers.solve(model, x0, options=options, t1=2.0, stop=stop, throw=False).x_final

    assert _rel(run(jnp.asarray(1e-7)), separate(2.0, 1e-7, NEVER)) < 1e-12


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: solvers.SolveOptions(solver="euler", rtol=1e-6, atol=1e-8), "no error estimate"),
        (lambda: solvers.SolveOptions(solver="tsit5", rtol=1e-6), "needs both rtol and atol"),
        (lambda: solvers.SolveOptions(flow="sideways"), "Unknown flow"),  # type: ignore[arg-type]
        (lambda: solvers.SolveOptions(dt0=-0.1), "dt0"),
        (lambda: solvers.SolveOptions(max_steps=0), "max_steps must be a positive"),
        (lambda: solvers.SolveOptions(solver="rk99"), "rk99"),
        (lambda: SWEEP_OPTIONS.replace(tol=1e-3), "no field tol; its fields are solver"),
    ],
)
def test_options_refusals(make, message, no_runtime_types):
    with pytest.raises((ValueError, TypeError), match=message):
        make()


def test_options_and_keywords_are_not_both_given(model, x0, no_runtime_types):
    with pytest.raises(ValueError, match="options= and rtol= beside it: give each choice once"):
        solvers.solve(model, x0, options=SWEEP_OPTIONS, rtol=1e-3)
    with pytest.raises(TypeError, match="options must be a solvers.SolveOptions"):
        solvers.solve(model, x0, options=dict(solver="tsit5"))


def test_options_cover_a_horizon_and_describe_themselves():
    """`covering` gives the cap a trajectory needs: the constant-step count plus one (as
    `constant_step_count`), the larger of a given cap and it, 4096 for adaptive steps."""
    paper = solvers.SolveOptions()
    assert paper.covering(0.0, 12.0).max_steps == solvers.constant_step_count(0.0, 12.0, 0.1)
    assert paper.covering(0.0, 12.0).max_steps == 121
    assert paper.replace(max_steps=500).covering(0.0, 12.0).max_steps == 500
    assert SWEEP_OPTIONS.covering(0.0, 1e4).max_steps == 4096
    assert paper.describe() == "euler, dt 0.1"
    assert SWEEP_OPTIONS.describe() == "tsit5, rtol 1e-08, atol 1e-09"
    assert not paper.adaptive and SWEEP_OPTIONS.adaptive


def test_dynamics_take_and_give_options():
    """A task model's `Dynamics` holds the same choices: from and to a `SolveOptions`, with
    what a config cannot hold refused in one line."""
    from et_ode.tasks import Dynamics

    options = solvers.SolveOptions(solver="tsit5", dt0=None, rtol=1e-6, atol=1e-8, flow="projected")
    dynamics = Dynamics.from_options(options, t1=5.0, fixed_point_atol=1e-4)
    assert dynamics.options == options and dynamics.t1 == 5.0
    assert dynamics.solve_options()["stop"].atol == 1e-4
    with pytest.raises(ValueError, match="Dynamics name their solver"):
        Dynamics.from_options(options.replace(solver=diffrax.Tsit5()))
    with pytest.raises(ValueError, match="Dynamics have no dtmin"):
        Dynamics.from_options(options.replace(dtmin=1e-9))
    with pytest.raises(ValueError, match="flow given both in options and beside them"):
        Dynamics.from_options(options, flow="native")


def test_one_dense_limit_and_its_old_names():
    """One limit for every method chosen by size (issue 48, item 5); the names it had
    still resolve, with a warning naming it."""
    from et_ode import analysis

    assert solvers.DENSE_MAX == 1024
    assert analysis.StabilitySettings().dense_max == solvers.DENSE_MAX
    for old in ("NEWTON_DENSE_MAX", "DENSE_JACOBIAN_MAX_STATE"):
        with pytest.warns(DeprecationWarning, match=f"solvers.{old} is now solvers.DENSE_MAX"):
            assert getattr(solvers, old) == solvers.DENSE_MAX
    with pytest.raises(AttributeError, match="no attribute 'DENSE_LIMIT'"):
        solvers.DENSE_LIMIT  # noqa: B018
