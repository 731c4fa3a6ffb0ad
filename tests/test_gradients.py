"""Gradients through `solvers.solve`, float64 (conftest enables x64).

1. `adjoint="checkpoint"` equals central finite differences of the discrete map (constant
   tsit5 steps, so the map is smooth), along random directions in parameters and x0.
2. `adjoint="backsolve"` (tsit5, PID steps) against `"checkpoint"`. `python -m
   benchmarks.backsolve` measures the relative error of the whole parameter gradient
   against the checkpoint gradient of the same solve (atol = rtol / 100) on this module's
   `smooth` model for 7 horizons and 3 tolerances, and writes a record
   (benchmarks/records/; the table in docs/mathematics.md, "What backsolve can and cannot
   do"). The projected flow contracts fast, so integrating it backwards amplifies the
   error about tenfold per 0.1 tau past 1.2 tau; on the native flow, whose clock slows
   like 1/t, it grows slowly. (With the ReLU model the error also has a floor set by the
   kinks of the field, about 4e-3 / 5e-4 / 6e-5 at rtol 1e-6 / 1e-8 / 1e-10, at any
   horizon: measured once, 2026-11-22.) Hence
   `BACKSOLVE_STABLE_HORIZON = {"native": 100, "projected": 1.2}`. Tested: agreement at
   the projected flow's horizon, the table's four corners against the newest record, the
   warning beyond either horizon, the refusals.
3. `adjoint="implicit"` equals unrolled checkpoint gradients through a converged
   projected-flow solve, every parameter (LayerNorm's `log_gamma` and `delta` included).
4. The same with conditions in `args` (clamped tokens, an external field), differentiated
   with respect to the clamped tokens of `x0` and the field.

Compilation dominates the run time: every gradient is one `eqx.filter_jit` program per
solve configuration, with the model, `x0` and `args` traced (for backsolve and the
table's checkpoint gradients also the horizon and the tolerance), and there are seven:
the constant-step checkpoint gradient (tests 1 and 2), backsolve and the adaptive
checkpoint gradient on each flow (2: `benchmarks.backsolve.gradient`, the projected
flow's backsolve shared by the horizon test and the table's corners), implicit and
unrolled (3 and 4).
"""

import math
import sys
import warnings
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import et_ode
from conftest import make_model, make_state
from et_ode import solvers
from et_ode.solvers import BACKSOLVE_STABLE_HORIZON

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `benchmarks` is not installed: it lives in the checkout
    sys.path.insert(0, str(ROOT))

from benchmarks import _records  # noqa: E402
from benchmarks import backsolve as backsolve_table  # noqa: E402

TIGHT = dict(rtol=1e-10, atol=1e-12)
# Constant tsit5 steps of 0.01 to the projected flow's stable backsolve horizon (1.2 tau,
# the paper's t1): a smooth discrete map whose gradient is within 1e-10 of the flow's.
CONSTANT_STEP = dict(
    solver="tsit5", dt0=0.01, t1=BACKSOLVE_STABLE_HORIZON["projected"], flow="projected"
)
# A converged projected-flow solve. (Not Euler: a constant Euler step along P_T grows each
# token's scale by O(dt^2), which moves the fixed point through LayerNorm's eps: 2e-5
# relative in log_gamma's gradient.)
FIXED_POINT = dict(
    solver="tsit5",
    flow="projected",
    stop=solvers.FixedPointStop(atol=1e-10),
    t1=500.0,
    max_steps=20000,
    **TIGHT,
)
# The unrolled reference: the same solve to a fixed time, about twice the converged times
# (18 and 24 tau here), cheaper to compile than with the stop and converged further.
UNROLLED = dict(FIXED_POINT, stop=None, t1=40.0, max_steps=4096)
BACKSOLVE_WARNING = r"adjoint='backsolve' on the \w+ flow over"


def _loss(model, x_final, w):
    """A scalar that sees the final state through the LayerNorm output g."""
    return jnp.sum(jnp.sin(model.norm(x_final)) * w)


def _grad(w, **solve_kwargs):
    """A compiled gradient of `_loss` after a solve with respect to the model, `x0` and
    `args`, all traced (one compilation serves every value). Returns `(model, x0, args)`
    gradients and `(loss, t_final, final RMS residual)`."""

    def loss(inputs):
        model, x0, args = inputs
        sol = solvers.solve(model, x0, args=args, throw=False, **solve_kwargs)
        value = _loss(model, sol.x_final, w)
        return value, (value, sol.t_final, sol.stats["residual_rms"])

    grad = eqx.filter_jit(eqx.filter_grad(loss, has_aux=True))
    return lambda model, x0, args: grad((model, x0, args))


def _params(model):
    return eqx.filter(model, eqx.is_array)


def _flat(tree):
    return np.concatenate([np.ravel(np.asarray(x)) for x in jax.tree.leaves(tree)])


def _rel(a, b):
    a, b = _flat(a), _flat(b)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def _named(model_grad):
    leaves = jax.tree_util.tree_flatten_with_path(_params(model_grad))[0]
    return {jax.tree_util.keystr(path): leaf for path, leaf in leaves}


@pytest.fixture(scope="module")
def smooth():
    """Smooth model (softmax Hopfield): the discrete map is smooth for finite differences,
    and backsolve's error is the adjoint's own, not that of stepping over ReLU kinks."""
    model, x0 = make_model(hopfield="softmax"), make_state()
    return model, x0, jax.random.normal(jax.random.key(7), x0.shape, x0.dtype)


@pytest.fixture(scope="module")
def constant_step(smooth):
    """The compiled constant-step gradient (it also gives the loss, for finite
    differences)."""
    _, _, w = smooth
    return _grad(w, **CONSTANT_STEP)


@pytest.fixture(scope="module")
def constant_step_grad(smooth, constant_step):
    """The exact gradient of the constant-step solve: checked against finite differences,
    then the reference for backsolve."""
    model, x0, _ = smooth
    return constant_step(model, x0, None)


# --------------------------------------------------- 1. checkpoint = finite differences
def test_checkpoint_gradient_matches_finite_differences(smooth, constant_step, constant_step_grad):
    """Along random directions in parameter space (all parameters at once, then Wq, Wk,
    xi, log_gamma and delta one at a time) and in x0."""
    model, x0, _ = smooth
    params, static = eqx.partition(model, eqx.is_array)
    (g_model, g_x0, _), _ = constant_step_grad

    def value(params_, x0_):  # the loss from the same compiled solve (ignoring its gradient)
        return float(constant_step(eqx.combine(params_, static), x0_, None)[1][0])

    keys = iter(jax.random.split(jax.random.key(11), 16))
    normal = lambda like: jax.random.normal(next(keys), like.shape, like.dtype)  # noqa: E731
    zeros = jax.tree.map(jnp.zeros_like, params)
    directions = [jax.tree.map(normal, params)]
    for where in (
        lambda p: p.attention.Wq,
        lambda p: p.attention.Wk,
        lambda p: p.hopfield.xi,
        lambda p: p.norm.log_gamma,
        lambda p: p.norm.delta,
    ):
        directions.append(eqx.tree_at(where, zeros, normal(where(params))))

    h = 1e-6
    errors = []
    for v in directions:
        plus = value(jax.tree.map(lambda p, d: p + h * d, params, v), x0)
        minus = value(jax.tree.map(lambda p, d: p - h * d, params, v), x0)
        ad = float(np.dot(_flat(_params(g_model)), _flat(v)))
        errors.append(abs((plus - minus) / (2 * h) - ad) / abs(ad))
    for _ in range(2):
        v = normal(x0)
        fd = (value(params, x0 + h * v) - value(params, x0 - h * v)) / (2 * h)
        ad = float(jnp.vdot(g_x0, v))
        errors.append(abs(fd - ad) / abs(ad))
    print("finite differences vs checkpoint:", " ".join(f"{e:.1e}" for e in errors))
    assert max(errors) < 1e-6


# ------------------------------------------------------- 2. backsolve against checkpoint
def test_backsolve_matches_checkpoint_within_stable_horizon(smooth, constant_step_grad):
    """At the projected flow's stable horizon itself (where `solve` does not warn:
    `test_backsolve_warns_beyond_stable_horizon`), tight tolerances: within 1e-6 of the
    exact gradient, parameters and `x0` (measured 1.2e-8). The gradient is
    `benchmarks.backsolve`'s (horizon and tolerances traced), compiled once for this test
    and the table's corners."""
    model, x0, w = smooth
    t1, rtol = BACKSOLVE_STABLE_HORIZON["projected"], TIGHT["rtol"]
    assert TIGHT["atol"] == rtol / 100 and CONSTANT_STEP["t1"] == t1
    bs_model, bs_x0 = backsolve_table.gradient("projected", "backsolve")(model, x0, w, t1, rtol)
    (cp_model, cp_x0, _), _ = constant_step_grad
    err, err_x0 = _rel(_params(bs_model), _params(cp_model)), _rel(bs_x0, cp_x0)
    print(
        f"backsolve vs checkpoint (constant steps), projected, T={t1}: {err:.1e}, x0 {err_x0:.1e}"
    )
    assert err < 1e-6
    assert err_x0 < 1e-6


def _newest_backsolve_record():
    records = [(p, r) for p, r in _records.load_all() if r["benchmark"] == "backsolve"]
    return records[-1] if records else (None, None)


# The table's corners: (flow, T, rtol). At T = 5 the projected flow's backsolve has blown
# up (measured about 1e26 to 1e30): only that is checked.
CORNERS = (
    ("native", 1.2, 1e-6),
    ("native", 1.2, 1e-10),
    ("projected", 5.0, 1e-6),
    ("projected", 5.0, 1e-10),
)
BLOWN_UP = 1e20


def test_backsolve_table_corners_match_the_record(smooth):
    """The four corners of docs/mathematics.md's backsolve table, computed here by the
    function that wrote it (`benchmarks.backsolve.backsolve_error`, on this module's
    `smooth` model, which is the script's own), against the newest backsolve record in
    benchmarks/records/: the small errors within a factor 2 (adaptive step counts move
    with rounding, so no tighter), the blown-up ones both above 1e20."""
    path, record = _newest_backsolve_record()
    if record is None:
        pytest.skip(
            "no backsolve record in benchmarks/records/: run python -m benchmarks.backsolve"
        )
    model, x0, w = smooth
    s_model, s_x0, s_w = backsolve_table.smooth_problem()
    np.testing.assert_array_equal(_flat(_params(s_model)), _flat(_params(model)))
    np.testing.assert_array_equal(s_x0, x0)
    np.testing.assert_array_equal(s_w, w)
    recorded = {r["name"]: r["value"] for r in record["rows"] if r["family"] == "backsolve"}
    for flow, t1, rtol in CORNERS:
        value = recorded[f"{flow}, T {t1:g}, rtol {rtol:g}"]
        value = math.inf if value is None else value  # an overflow is recorded as null
        err = backsolve_table.backsolve_error(flow, t1, rtol, smooth)
        print(
            f"backsolve table {path.name}: {flow}, T {t1:g}, rtol {rtol:g}: {err:.2e}, "
            f"recorded {value:.2e}"
        )
        if flow == "projected" and t1 == 5.0:
            assert err > BLOWN_UP and value > BLOWN_UP
        else:
            assert value / 2 < err < 2 * value


@pytest.mark.parametrize("flow", ["native", "projected"])
def test_backsolve_warns_beyond_stable_horizon(smooth, flow):
    model, x0, _ = smooth

    def trace(t1):  # tracing is enough: the warning comes from the argument checks
        jax.eval_shape(
            lambda m, x: (
                solvers.solve(
                    m, x, solver="tsit5", flow=flow, t1=t1, adjoint="backsolve", **TIGHT
                ).x_final
            ),
            model,
            x0,
        )

    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=BACKSOLVE_WARNING)
        trace(BACKSOLVE_STABLE_HORIZON[flow])
    with pytest.warns(UserWarning, match=BACKSOLVE_WARNING):
        trace(1.5 * BACKSOLVE_STABLE_HORIZON[flow])


@pytest.mark.parametrize(
    "bad",
    [
        dict(stop=solvers.FixedPointStop(atol=1e-8)),
        dict(save_energy=True),
    ],
)
def test_backsolve_refuses_events_and_energy_trace(smooth, bad):
    model, x0, _ = smooth
    with pytest.raises(ValueError, match="backsolve"):
        solvers.solve(
            model, x0, solver="tsit5", flow="native", adjoint="backsolve", t1=1.0, **TIGHT, **bad
        )


# ------------------------------------------- 3./4. implicit = unrolled, at a fixed point
@pytest.fixture(scope="module")
def implicit_grad(smooth):
    """The implicit adjoint's gradient after a converged projected solve (compiled once
    for conditions of one structure: a clamped mask, a field and its strength)."""
    _, _, w = smooth
    return _grad(w, adjoint="implicit", **FIXED_POINT)


@pytest.fixture(scope="module")
def fixed_point_grads(smooth, implicit_grad):
    """Implicit and unrolled (checkpoint) gradients, compiled once for conditions of one
    structure (a clamped mask, a field and its strength)."""
    _, _, w = smooth
    implicit = implicit_grad
    unrolled = _grad(w, adjoint="checkpoint", **UNROLLED)

    def both(model, x0, args):
        g_imp, (_, t_imp, res_imp) = implicit(model, x0, args)
        g_ref, (_, _, res_ref) = unrolled(model, x0, args)
        # The implicit solve stopped at the fixed point, well before the reference's end.
        assert float(t_imp) < 0.75 * UNROLLED["t1"] and float(res_imp) < 1e-10
        assert float(res_ref) < 1e-10
        return g_imp, g_ref

    return both


def _conditions(x0, clamped, field_strength):
    field = 0.5 * jax.random.normal(jax.random.key(5), x0.shape, x0.dtype)
    return et_ode.Conditions(
        clamped=jnp.asarray(clamped),
        field=field,
        field_strength=jnp.asarray(field_strength, x0.dtype),
    )


def _check_parameters(g_imp_model, g_ref_model, label):
    imp, ref = _named(g_imp_model), _named(g_ref_model)
    assert set(imp) == {
        ".norm.log_gamma",
        ".norm.delta",
        ".attention.Wq",
        ".attention.Wk",
        ".hopfield.xi",
    }
    for name in imp:
        err = _rel(imp[name], ref[name])
        print(f"implicit vs unrolled, {label}, {name}: {err:.1e}")
        assert err < 1e-6, name


# The norms of the gradients at the fixed point (measured 2026-12-03: 1.7499e1, 2.4580e-5,
# 4.6820, 2.2433e-5, the same with XLA's default compiler settings): of the weights and of
# x0 without a condition, of the clamped rows and the free rows of x0 with conditions.
# The x0 gradients are left over by the solve's stop (RMS G 1e-10): asserted to 10 %,
# five orders of magnitude below the weights' and the clamped rows'.
X0_QUOTED = dict(weights=17.50, x0=2.458e-5, clamped=4.682, free=2.243e-5)


def test_implicit_matches_unrolled_at_fixed_point(smooth, fixed_point_grads):
    """No condition: nothing clamped and a field of strength zero (the same energy and flow
    as `args=None`, in the pytree structure of the next test, to share its compilation)."""
    model, x0, _ = smooth
    args = _conditions(x0, [False] * x0.shape[0], 0.0)
    np.testing.assert_array_equal(
        model.vector_field(0.0, x0, args, "projected"),
        model.vector_field(0.0, x0, None, "projected"),
    )
    (gi_model, gi_x0, _), (gr_model, gr_x0, _) = fixed_point_grads(model, x0, args)
    _check_parameters(gi_model, gr_model, "no condition")
    # A fixed point forgets its start (but for eps-sized effects of each token's scale):
    # docs/tests.md quotes these norms. Properties of the fixed point (RMS G < 1e-10) and
    # of GMRES at 1e-10, both far below 0.1 % of them: the band is 0.1 %.
    weights = np.linalg.norm(_flat(_params(gr_model)))
    print(
        f"|dl/dx0| implicit {np.linalg.norm(gi_x0):.4e}, unrolled "
        f"{np.linalg.norm(gr_x0):.4e}, |dl/dweights| {weights:.4e}"
    )
    assert weights == pytest.approx(X0_QUOTED["weights"], rel=1e-3)
    assert np.linalg.norm(gi_x0) == pytest.approx(X0_QUOTED["x0"], rel=0.1)
    assert np.linalg.norm(gr_x0) == pytest.approx(X0_QUOTED["x0"], rel=0.1)


def test_implicit_matches_unrolled_with_conditions(smooth, fixed_point_grads):
    """Clamped tokens and an external field make the fixed point depend on them: the
    gradients with respect to the clamped rows of x0, the field and its strength, and
    every parameter, agree with the unrolled ones."""
    model, x0, _ = smooth
    clamped = np.array([True, False, True, False, False, False])
    args = _conditions(x0, clamped, 0.7)
    (gi_model, gi_x0, gi_args), (gr_model, gr_x0, gr_args) = fixed_point_grads(model, x0, args)
    _check_parameters(gi_model, gr_model, "with conditions")
    errors = dict(
        clamped_x0=_rel(gi_x0[clamped], gr_x0[clamped]),
        field=_rel(gi_args.field, gr_args.field),
        field_strength=_rel(gi_args.field_strength, gr_args.field_strength),
    )
    print(
        "implicit vs unrolled, with conditions:",
        ", ".join(f"{k} {v:.1e}" for k, v in errors.items()),
    )
    assert max(errors.values()) < 1e-6, errors
    # The fixed point depends on the clamped tokens, not on the free tokens' start.
    clamped_size = np.linalg.norm(gr_x0[clamped])
    print(
        f"|dl/dx0| clamped rows {clamped_size:.4e}, free rows implicit "
        f"{np.linalg.norm(gi_x0[~clamped]):.4e}, unrolled {np.linalg.norm(gr_x0[~clamped]):.4e}"
    )
    assert clamped_size == pytest.approx(X0_QUOTED["clamped"], rel=1e-3)
    assert np.linalg.norm(gi_x0[~clamped]) == pytest.approx(X0_QUOTED["free"], rel=0.1)


def test_find_fixed_point_gives_the_implicit_adjoints_gradient(smooth, implicit_grad):
    """`find_fixed_point(method="anderson")`, the forward solve at the authors' shapes:
    its `x` carries the implicit gradient with respect to the parameters, `x0` (through
    the warm Euler steps, whose end fixes each token's scale) and the conditions. It
    equals central finite differences of the whole search (direction `v`, step 1e-6:
    measured 8e-9 relative), and `solve(adjoint="implicit")`'s gradient of the same loss
    in `g = LayerNorm(x)` to within the LayerNorm eps's effect of the warm steps' larger
    token scales (measured 1e-5)."""
    model, x0, w = smooth
    clamped = np.array([True, False, True, False, False, False])
    args = _conditions(x0, clamped, 0.7)
    params, static = eqx.partition((model, x0, args), eqx.is_inexact_array)

    @eqx.filter_jit
    def loss(p):
        m, x, a = eqx.combine(p, static)
        found = solvers.find_fixed_point(m, x, args=a, method="anderson", tol=1e-12)
        return _loss(m, found.x, w), found.residual_rms

    grads, residual = eqx.filter_jit(jax.grad(loss, has_aux=True))(params)
    assert float(residual) < 1e-12
    v = jax.tree.map(lambda p: jax.random.normal(jax.random.key(11), p.shape, p.dtype), params)
    h = 1e-6
    shifted = [loss(jax.tree.map(lambda p, q: p + e * q, params, v))[0] for e in (h, -h)]
    fd = (float(shifted[0]) - float(shifted[1])) / (2 * h)
    ad = float(sum(jnp.vdot(a, b) for a, b in zip(jax.tree.leaves(grads), jax.tree.leaves(v))))
    print(f"find_fixed_point gradient: AD {ad:.10f}, central differences {fd:.10f}")
    assert abs(ad - fd) < 1e-6 * abs(fd)

    g_model, g_x0, g_args = eqx.combine(grads, static)
    (i_model, i_x0, i_args), _ = implicit_grad(model, x0, args)
    errors = dict(
        parameters=_rel(_params(g_model), _params(i_model)),
        clamped_x0=_rel(g_x0[clamped], i_x0[clamped]),
        field=_rel(g_args.field, i_args.field),
        field_strength=_rel(g_args.field_strength, i_args.field_strength),
    )
    print("find_fixed_point vs solve, implicit:", errors)
    assert max(errors.values()) < 1e-4, errors


def test_unconverged_gmres_raises_unless_lenient(smooth, fixed_point_grads):
    """A GMRES tolerance that float64 cannot reach (1e-30): with `throw=True` the
    backward pass raises; with `throw=False` (a training step that keeps samples which
    reached the time cap) it gives GMRES's last iterate, within 1e-8 of the converged
    gradient."""
    model, x0, w = smooth
    args = _conditions(x0, [False] * x0.shape[0], 0.0)
    strict = dict(FIXED_POINT, adjoint="implicit", implicit_tol=1e-30)

    def strict_loss(m):
        return _loss(m, solvers.solve(m, x0, args=args, **strict).x_final, w)

    # Jitted, as every gradient here: one program (eagerly, each operation of the
    # backward pass compiles on its own); the error is raised when it runs.
    with pytest.raises(Exception, match="stagnation|maximum number of steps"):
        jax.block_until_ready(eqx.filter_jit(eqx.filter_grad(strict_loss))(model))
    lenient = _grad(w, **strict)
    (g_lenient, _, _), _ = lenient(model, x0, args)
    (g_converged, _, _), _ = fixed_point_grads(model, x0, args)
    assert _rel(_flat(_params(g_lenient)), _flat(_params(g_converged))) < 1e-8


def test_default_cap_of_a_constant_step_solve(smooth):
    """Without `max_steps`, a constant-step solve to t1 caps at its step count (+1) and
    checkpoints every step: the same gradient as under a wider cap with diffrax's own
    checkpoint count (40 steps: cheaper to compile than 4096, the same recursive
    checkpointing). Adaptive steps and fixed-point stops keep the 4096 cap."""
    from et_ode.solvers._defaults import default_cap

    model, x0, w = smooth
    sol = solvers.solve(model, x0, t1=1.2)
    assert int(sol.stats["max_steps"]) == 13 and int(sol.stats["num_steps"]) == 12

    def grad(**cap):
        return eqx.filter_jit(
            eqx.filter_grad(lambda m: _loss(m, solvers.solve(m, x0, t1=1.2, **cap).x_final, w))
        )(model)

    assert _rel(_params(grad()), _params(grad(max_steps=40))) < 1e-12
    common = dict(t0=0.0, t1=1.2, adjoint="checkpoint", checkpoints=None)
    assert default_cap(dt0=0.1, rtol=None, atol=None, stop=None, **common) == (13, 13)
    assert default_cap(dt0=0.01, rtol=None, atol=None, stop=None, **common) == (121, None)
    assert default_cap(dt0=None, rtol=1e-6, atol=1e-8, stop=None, **common) == (4096, None)
    stop = solvers.FixedPointStop(atol=1e-6)
    assert default_cap(dt0=0.1, rtol=None, atol=None, stop=stop, **common) == (4096, None)
