"""docs/how-to/own-model.md runs as written on a model that is not an Energy Transformer
(a classical modern Hopfield network, flat: no manifold), and its numbers are right
against references computed here without et_ode:

- the trajectory against scipy's `solve_ivp` (DOP853, float64, rtol 1e-12) on the closed
  form `dx/dt = -(x - X^T softmax(beta X x))`, the Euler maps against a numpy loop;
- the fixed points against numpy's Newton on the closed-form gradient and Hessian;
- the implicit adjoint's gradient with respect to the patterns against central finite
  differences of that Newton fixed point;
- stability's eigenvalues and verdicts against `numpy.linalg.eigvalsh` of the analytic
  Hessian `I - beta X^T (diag(p) - p p^T) X` (p = softmax(beta X x*)), per query;
- Lyapunov exponents and convergence rates against that spectrum (for the linearised
  gradient flow `d(dx)/dt = -H dx` every growth rate lies in `[-lambda_max, -lambda_min]`);
- the studies that need more than `solvers.EnergySystem` refuse the model in one line
  naming the method, before anything is solved.

The page runs once per module (`page` fixture), in one namespace, as a reader runs it.
Adaptive step counts move with the CPU's rounding: they are bounded, never pinned.
"""

import contextlib
import io
import pathlib
import re
from contextlib import nullcontext

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.special import logsumexp, softmax

from conftest import runtime_types_off

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "how-to" / "own-model.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
MARKERS = (
    "class ModernHopfield",
    'solver="auto"',
    "analysis.work_precision",
    'adjoint="implicit"',
    "analysis.stability",
    "analysis.convergence",
    "analysis.fixed_points",
    "analysis.lyapunov_exponent",
    "analysis.energy_descent",
    "analysis.long_horizon",
    "analysis.contributions",
)
BETA = 2.0


@pytest.fixture(scope="module")
def page():
    """Every Python block of the page run in order in one namespace; returns the
    namespace and each block's printed lines."""
    namespace: dict = {}
    printed = {}
    for code in BLOCKS:
        out = io.StringIO()
        # The block that shows the refusals hands studies a model they do not take, on
        # purpose: et_ode's own one-line refusal is what it shows, so the suite's run-time
        # type checks (which would refuse first) are off for it.
        refusals = "analysis.contributions" in code
        with contextlib.redirect_stdout(out), runtime_types_off() if refusals else nullcontext():
            exec(compile(code, str(PAGE), "exec"), namespace)
        printed[next(m for m in MARKERS if m in code)] = out.getvalue().splitlines()
    return namespace, printed


# ----------------------------------------------------------- references, numpy only
def _grad(patterns, x):
    """dE/dx = x - softmax(beta x X^T) X, per query row of x [N, D]."""
    return x - softmax(BETA * x @ patterns.T, axis=-1) @ patterns


def _energy(patterns, x):
    return float(
        np.sum(-logsumexp(BETA * x @ patterns.T, axis=-1) / BETA + 0.5 * np.sum(x**2, axis=-1))
    )


def _hessians(patterns, x):
    """The analytic Hessian of each query's energy, `[N, D, D]`."""
    out = []
    for row in x:
        p = softmax(BETA * patterns @ row)
        out.append(
            np.eye(patterns.shape[1]) - BETA * patterns.T @ (np.diag(p) - np.outer(p, p)) @ patterns
        )
    return np.stack(out)


def _spectrum(patterns, x):
    """Every eigenvalue of the block-diagonal Hessian of the state, ascending."""
    return np.sort(np.concatenate([np.linalg.eigvalsh(h) for h in _hessians(patterns, x)]))


def _newton(patterns, x, steps=50):
    """The critical point of E nearest x, by Newton's method per query."""
    x = np.array(x, np.float64)
    for _ in range(steps):
        g = _grad(patterns, x)
        if np.max(np.abs(g)) < 1e-15:
            break
        x = x - np.einsum("nij,nj->ni", np.linalg.inv(_hessians(patterns, x)), g)
    return x


def _exact(patterns, x0, t1):
    """x(t1) of the gradient flow by scipy (DOP853, rtol 1e-12)."""
    shape = x0.shape
    done = solve_ivp(
        lambda t, y: -_grad(patterns, y.reshape(shape)).ravel(),
        (0.0, t1),
        x0.ravel(),
        method="DOP853",
        rtol=1e-12,
        atol=1e-14,
    )
    assert done.success
    return done.y[:, -1].reshape(shape)


def _arrays(ns):
    return np.asarray(ns["X"], np.float64), np.asarray(ns["x0"], np.float64)


# --------------------------------------------------------------------------- tests
def test_every_block_is_checked():
    assert len(BLOCKS) == len(MARKERS)
    assert all(sum(m in code for code in BLOCKS) >= 1 for m in MARKERS)
    assert [next(m for m in MARKERS if m in code) for code in BLOCKS] == list(MARKERS)


def test_model_is_the_closed_form(page):
    ns, printed = page
    patterns, x0 = _arrays(ns)
    model = ns["model"]
    assert np.allclose(np.linalg.norm(patterns, axis=1), 2.0)
    energy, difference = map(float, printed["class ModernHopfield"][0].split())
    assert energy == pytest.approx(_energy(patterns, x0), rel=1e-13)
    assert difference < 1e-14
    assert np.max(np.abs(np.asarray(model.residual(x0)) - _grad(patterns, x0))) < 1e-14
    for flow in ("native", "projected"):  # one field, both names
        field = np.asarray(model.vector_field(0.0, x0, None, flow))
        assert np.max(np.abs(field + _grad(patterns, x0))) < 1e-14


def test_solves_against_scipy_and_numpy(page):
    ns, printed = page
    patterns, x0 = _arrays(ns)
    exact = _exact(patterns, x0, 10.0)
    scale = np.max(np.abs(exact))
    # tsit5 at rtol 1e-10 against DOP853 at 1e-12 (measured 1.8e-12)
    tsit5 = np.asarray(ns["tsit5"].x_final)
    assert np.max(np.abs(tsit5 - exact)) / scale < 1e-9
    # the constant-step Euler map, step for step, against a numpy loop
    x = x0.copy()
    for _ in range(100):
        x = x - 0.1 * _grad(patterns, x)
    assert np.max(np.abs(np.asarray(ns["euler"].x_final) - x)) < 1e-13
    # and it is a first-order approximation of the flow (dt 0.1): close, not equal
    assert 1e-6 < np.max(np.abs(x - exact)) / scale < 1e-2
    # auto with a fixed-point stop: at numpy's Newton fixed point of the same basin,
    # as close as its residual allows: |x - x*|_2 <= |G|_2 / lambda_min (measured
    # 1.5e-10 max entry against a bound of 3.5e-10)
    x_star = _newton(patterns, exact)
    assert np.max(np.abs(_grad(patterns, x_star))) < 1e-14
    auto = ns["auto"]
    bound = np.sqrt(x0.size) * float(auto.stats["residual_rms"]) / _spectrum(patterns, x_star)[0]
    assert float(auto.stats["residual_rms"]) <= 1e-10
    assert np.linalg.norm(np.asarray(auto.x_final) - x_star) <= 1.01 * bound + 1e-14
    # each query reached the pattern it was a noisy copy of (off it by the other
    # patterns' pull at finite beta)
    assert np.all(
        np.argmin(np.linalg.norm(x_star[:, None] - patterns[None], axis=-1), axis=1) == [0, 1]
    )
    lines = printed['solver="auto"']
    euler, tsit5_line, auto_line, ramsauer = (line.split() for line in lines)
    assert euler[:4] == ["euler", "100", "100", "t1"]  # constant steps: exact counts
    assert tsit5_line[0] == "tsit5" and tsit5_line[3] == "t1" and 40 < int(tsit5_line[1]) < 400
    assert auto_line[0] == "auto" and auto_line[3] == "fixed_point"
    distance = float(np.max(np.abs(x_star - patterns[:2])))
    for line in (euler, tsit5_line, auto_line):
        assert float(line[4]) == pytest.approx(distance, rel=0.05)
    # Euler at dt 1 is Ramsauer et al.'s update x <- X^T softmax(beta X x)
    x = x0.copy()
    for _ in range(3):
        x = softmax(BETA * x @ patterns.T, axis=-1) @ patterns
    assert np.max(np.abs(np.asarray(ns["one"].x_final) - x)) < 1e-13
    assert float(ramsauer[0]) < 1e-13


def test_work_precision_against_scipy(page):
    ns, printed = page
    patterns, x0 = _arrays(ns)
    wp = ns["wp"]
    exact = _exact(patterns, x0, 5.0)
    scale = np.max(np.abs(exact))
    assert np.max(np.abs(wp["reference"]["x_final"][0] - exact)) / scale < 1e-11
    runs = {(r["solver"], r.get("rtol") or r.get("dt0")): r for r in wp["runs"]}
    assert len(runs) == 10 and len(printed["analysis.work_precision"]) == 10
    for r in wp["runs"]:
        assert r["ok"]
        # the study's error is the error against scipy's solution (the two references
        # differ by < 1e-11 relative, far below every error here)
        ours = np.max(np.abs(np.asarray(wp["reference"]["x_final"]) - exact)) / scale
        assert r["error_exact"] > 10 * ours
    for solver in ("tsit5", "dopri8"):
        errors = [runs[solver, tol]["error_exact"] for tol in (1e-4, 1e-6, 1e-8)]
        assert errors[0] > errors[1] > errors[2]  # tighter tolerance, smaller error
        assert errors[2] < 1e-7
    # constant steps: exact evaluation counts and the methods' orders (halving dt)
    for solver, stages, order in (("euler", 1, 1), ("heun", 2, 2)):
        for dt in (0.1, 0.05):
            assert runs[solver, dt]["nfe"] == stages * round(5.0 / dt)
        ratio = runs[solver, 0.1]["error_exact"] / runs[solver, 0.05]["error_exact"]
        assert 2**order * 0.8 < ratio < 2**order * 1.2  # measured 1.9 (euler), 4.2 (heun)


def test_implicit_adjoint_against_finite_differences(page):
    ns, printed = page
    patterns, x0 = _arrays(ns)
    x_star = _newton(patterns, _exact(patterns, x0, 10.0))

    def loss(p):
        return 0.5 * np.sum((_newton(p, x_star) - x0) ** 2)

    step = 1e-6
    fd = np.zeros_like(patterns)
    for index in np.ndindex(*patterns.shape):
        e = np.zeros_like(patterns)
        e[index] = step
        fd[index] = (loss(patterns + e) - loss(patterns - e)) / (2 * step)
    grad = np.asarray(ns["grad"])
    assert float(ns["value"]) == pytest.approx(loss(patterns), rel=1e-9)
    # measured 1.7e-10 relative (central differences: h^2 truncation, 1e-10 round-off)
    assert np.max(np.abs(grad - fd)) < 1e-8 * np.max(np.abs(fd))
    value, norm = re.fullmatch(r"(\S+) \(3, 6\) (\S+)", printed['adjoint="implicit"'][0]).groups()
    assert float(value) == pytest.approx(loss(patterns), abs=1e-4)
    assert float(norm) == pytest.approx(np.linalg.norm(fd), abs=1e-4)


def test_stability_verdicts_against_the_analytic_hessian(page):
    ns, printed = page
    patterns, _ = _arrays(ns)
    for name, code, index, sentence in (
        ("at_minimum", "stable_minimum", 0, "stable minimum"),
        ("at_saddle", "saddle", 1, "saddle of index 1"),
    ):
        result = ns[name]
        x = np.asarray(result["x"])
        assert np.max(np.abs(_grad(patterns, x))) < 1e-13  # Newton-polished
        values = _spectrum(patterns, x)
        assert int(np.sum(values < 0)) == index  # the reference's own Morse index
        assert result["geometry"] == "flat" and result["dimension"] == x.size
        assert np.max(np.abs(np.sort(result["all"]) - values)) < 1e-10
        assert result["morse_index"] == index
        assert result["verdict"]["code"] == code
        assert result["verdict"]["sentence"].startswith(sentence)
        # the linearised flow's growth rates lie in [-lambda_max, -lambda_min]
        exponent = result["lyapunov"]["exponent"]
        assert -values[-1] - 1e-6 <= exponent <= -values[0] + 1e-6
    lines = printed["analysis.stability"]
    assert lines[0].startswith("stable minimum") and lines[1].startswith("saddle of index 1")
    # the saddle lies between patterns 0 and 1: query 0 weighs them about equally
    x = np.asarray(ns["at_saddle"]["x"])
    p = softmax(BETA * patterns @ x[0])
    assert p[0] > 0.3 and p[1] > 0.3
    assert np.argmin(np.linalg.norm(patterns - x[1], axis=1)) == 2  # query 1: pattern 2
    values = _spectrum(patterns, x)
    assert np.fromstring(lines[2].strip("[]"), sep=" ") == pytest.approx(values[:2], abs=1e-7)
    assert values[0] < -2.0  # a clear saddle: -2.87


def test_convergence_lyapunov_fixed_points_descent(page):
    ns, printed = page
    patterns, x0 = _arrays(ns)
    x_star = _newton(patterns, _exact(patterns, x0, 10.0))
    values = _spectrum(patterns, x_star)
    lam_min, lam_max = values[0], values[-1]
    assert 0.9 < lam_min < lam_max <= 1.0 + 1e-12  # H = I - (psd): eigenvalues <= 1
    # convergence: the predicted rate is lambda_min; the fitted decay rate of RMS G lies
    # in the spectrum (late decay is dominated by the slow modes)
    record = ns["conv"]["flows"]["projected"]
    assert record["predicted_rate"] == pytest.approx(lam_min, abs=1e-8)
    assert lam_min - 0.01 < record["fit"]["rate"] < lam_max + 0.01  # measured 0.997
    assert record["scales"] is None  # a flat model has no token scales
    # Lyapunov exponent from the minimum: in [-lambda_max, -lambda_min], near -lambda_min
    exponent = ns["lyap"]["exponent"]
    assert -lam_max - 1e-6 <= exponent <= -lam_min + 1e-6  # measured -0.9941, 0.9899
    printed_exp, printed_min = map(float, printed["analysis.lyapunov_exponent"][0].split())
    assert printed_min == pytest.approx(lam_min, abs=1e-4)
    # fixed points: the noisy start shares x0's fixed point, the swapped start is the
    # same two fixed points in the other order, all minima
    fps = ns["fps"]
    assert fps["n_distinct"] == 2 and list(fps["cluster"]) == [0, 0, 1]
    assert list(fps["morse_index"]) == [0, 0, 0]
    assert np.max(np.abs(fps["x_star"][0] - x_star)) < 1e-10
    assert np.max(np.abs(fps["x_star"][2] - x_star[::-1])) < 1e-10
    assert printed["analysis.fixed_points"] == ["2 [0 0 1] [0 0 0]"]
    # energy descent: no real rises, and the dt = 1 run is Ramsauer's update, whose
    # energies a numpy loop reproduces
    descent = ns["descent"]
    assert [run["real_rises"] for run in descent["runs"]] == [0, 0]
    x, energies = x0.copy(), [_energy(patterns, x0)]
    for _ in range(10):
        x = softmax(BETA * x @ patterns.T, axis=-1) @ patterns
        energies.append(_energy(patterns, x))
    assert np.max(np.abs(np.asarray(descent["runs"][0]["energies"]) - energies)) < 1e-12
    assert np.all(np.diff(energies) <= 1e-15)


def test_long_horizon(page):
    ns, printed = page
    patterns, x0 = _arrays(ns)
    x_star = _newton(patterns, _exact(patterns, x0, 10.0))
    values = _spectrum(patterns, x_star)
    record = ns["long"]["flows"]["projected"]
    assert record["energy"][-1] - _energy(patterns, x_star) < 1e-8
    assert np.max(np.abs(np.asarray(record["x_end"]) - x_star)) < 1e-4  # at rtol 1e-4
    assert record["t_fixed_point"] is not None and record["t_fixed_point"] < 20.0
    for median in record["lyapunov"]["median"]:
        assert -values[-1] - 1e-3 <= median <= -values[0] + 1e-3
    assert printed["analysis.long_horizon"][0].startswith("The projected flow")


REFUSALS = (
    ("contributions", "update_parts"),
    ("gradient_depth", "norm"),
    ("overshoot", "patches"),
    ("graph_overshoot", "encode"),
)


def test_studies_that_do_not_apply_refuse_before_solving(page, monkeypatch, no_runtime_types):
    ns, printed = page
    from et_ode import analysis, solvers

    lines = printed["analysis.contributions"]
    assert len(lines) == len(REFUSALS)
    for line, (study, method) in zip(lines, REFUSALS):
        assert line.startswith(f"analysis.{study} needs model.{method}(...)")

    def refuse(*args, **kwargs):
        raise AssertionError("a study solved before it refused the model")

    for name in ("solve", "find_fixed_point"):
        monkeypatch.setattr(solvers, name, refuse)
    model, x0 = ns["model"], ns["x0"]
    calls = {
        "contributions": lambda: analysis.contributions(model, x0),
        "gradient_depth": lambda: analysis.gradient_depth(model, x0),
        "overshoot": lambda: analysis.overshoot(model, x0[None], None),
        "graph_overshoot": lambda: analysis.graph_overshoot(model, x0, None, None, None, None),
    }
    for study, method in REFUSALS:
        with pytest.raises(
            ValueError, match=rf"^analysis\.{study} needs model\.{method}\("
        ) as refusal:
            calls[study]()
        assert "\n" not in str(refusal.value)
