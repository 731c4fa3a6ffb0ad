"""The benchmark code (`benchmarks/`), in quick mode on a tiny problem: structure, and the
numbers that do not depend on timing (sharded = single device, no recompilation, memory
analysis, NFE). No timing is ever asserted. One test per group of rows, so that
`pytest -n 2` spreads them over both cores."""

import json
import math
import os
import sys
from pathlib import Path

import jax.numpy as jnp
import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `benchmarks` is not installed: it lives in the checkout
    sys.path.insert(0, str(ROOT))

from benchmarks import _common, _flops, _report, _run  # noqa: E402

REQUIRED = {"family", "name", "value", "unit", "reference", "goal", "met", "note"}


@pytest.fixture(scope="module")
def problem():
    return _common.tiny_problem(batch=4)


def _run_rows(rows, problem):
    record = _run.run_benchmarks(
        rows,
        quick=True,
        batch=4,
        repeats=1,
        tiny=True,
        problem=problem,
        print_fn=lambda *a, **k: None,
    )
    assert record["summary"]["errors"] == []
    for r in record["rows"]:
        assert REQUIRED <= set(r), r
        json.dumps(r)  # every row is JSON-ready
    return record, {r["name"]: r for r in record["rows"]}


def test_devices_compile_and_memory(problem):
    record, rows = _run_rows(("devices", "compile", "memory"), problem)
    # sharded over 1, 2 and 4 forced host devices: the same numbers
    devices = [r for r in record["rows"] if r["family"] == "devices"]
    assert [r["devices"] for r in devices] == [1, 2, 4]
    for r in devices:
        assert r["max_abs_diff"] <= 1e-6 and r["met"] is True
        assert r["noisy_max_abs_diff"] <= 1e-6
        assert "xla_force_host_platform_device_count=4" in r["worker_xla_flags"]
    # new data and new Python-float tolerances: no recompilation, no retrace
    recompiles = next(r for r in record["rows"] if r["name"].startswith("recompilations"))
    assert recompiles["recompilations"] == 0 and recompiles["retraces"] == 0
    first = next(r for r in record["rows"] if r["name"].startswith("first call"))
    assert first["first_call_compilations"] >= 1
    # memory analysis: positive sizes; the implicit adjoint's is flat with the horizon
    memory = [r for r in record["rows"] if r["family"] == "memory"]
    assert {r["steps"] for r in memory} == {12, 192}
    for r in memory:
        assert r["bytes"]["total"] > 0 and r["bytes"]["temp"] > 0
        assert r["bytes"]["argument"] > 0 and r["bytes"]["output"] > 0
    implicit = next(r for r in memory if r["adjoint"].startswith("implicit") and r["steps"] == 192)
    assert implicit["value"] <= 1.3 and implicit["met"] is True


def test_fixed_point_and_overhead(problem):
    record, rows = _run_rows(("fixed_point", "overhead", "noisy"), problem)
    # the noisy solve draws the noise the hand-written scan draws; the tree is reported
    noisy = [r for r in record["rows"] if r["family"] == "noisy"]
    assert len(noisy) == 2 and noisy[0]["max_abs_diff_vs_scan"] <= 1e-5
    assert isinstance(noisy[0]["met"], bool) and noisy[0]["value"] > 0 and noisy[1]["value"] > 0
    fp = {r["name"]: r for r in record["rows"] if r["family"] == "fixed_point"}
    euler = fp["problem core / projected / euler dt 0.1"]
    tsit5 = next(r for name, r in fp.items() if name.startswith("problem core / projected / tsit5"))
    assert euler["reached"] and tsit5["reached"]
    assert max(euler["residual_rms"]) <= 1e-5 and max(tsit5["residual_rms"]) <= 1e-5
    # every projected-flow end state is compared with the dopri8 reference's
    reference = fp["problem core / projected / dopri8 rtol=atol=1e-07 (reference)"]
    assert reference["reached"] and reference["distance_to_reference"] == [0.0]
    assert 0 < tsit5["distance_to_reference"][0] < 1e-3
    lbfgs = fp["problem core / projected / find_fixed_point (L-BFGS) from x0"]
    assert lbfgs["nfe"] == lbfgs["steps"][0] > 0 and "line search" in lbfgs["note"]
    native = fp["problem core / native / euler dt 0.1"]
    assert not native["reached"] and "not reached (RMS G =" in native["note"]
    # the native flow at equal accuracy: tsit5 needs fewer evaluations than Euler
    nfe_goal = next(r for name, r in fp.items() if "Euler NFE / tsit5 NFE" in name)
    assert nfe_goal["tsit5_nfe"] < nfe_goal["euler_nfe"] == 200
    # the solve and the hand-written scan compute the same map
    fwd = rows["forward, solve inside jit"]
    assert fwd["max_abs_diff_vs_scan"] <= 1e-5
    assert (
        rows["fwd+bwd, checkpoint adjoint, solve's defaults"]["grad_max_rel_diff_vs_scan"] <= 1e-4
    )


def test_flops_closed_form_batch_and_cli(problem, tmp_path):
    # FLOP counts from the shapes: one vector field = 4a + 3s + 2h (see _flops)
    counts = _flops.field_flops(n=64, d=64, h=4, y=16, k=256)
    assert counts["field"] == 7_864_320
    # the command line: table printed, JSON written atomically where asked
    out = tmp_path / "bench.json"
    code = _run.main(
        [
            "--tiny",
            "--quick",
            "--batch",
            "4",
            "--repeats",
            "1",
            "--rows",
            "flops,closed_form,batch",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    record = json.loads(out.read_text())
    assert [p.name for p in tmp_path.iterdir()] == ["bench.json"]  # no temporary file left
    assert record["machine"]["cpu"] and record["machine"]["jax_backend"] == "cpu"
    assert record["problem"]["batch"] == 4 and record["problem"]["dim"] == 16
    rows = {r["name"]: r for r in record["rows"]}
    vf = rows["vector field, batch 4"]
    n, d, h, y, k = 16, 16, 2, 8, 32
    assert vf["flops_shape_count"] == 4 * _flops.field_flops(n, d, h, y, k)["field"]
    # XLA's count also holds the elementwise work: close to, and above, the products
    assert vf["flops_shape_count"] <= vf["flops_xla"] <= 3 * vf["flops_shape_count"]
    closed = [r for r in record["rows"] if r["family"] == "closed_form"]
    assert len(closed) == 2 and all(r["max_abs_diff"] < 1e-4 for r in closed)
    batch = [r for r in record["rows"] if r["family"] == "batch"]
    assert [r["batch"] for r in batch] == [1, 2, 4]
    assert all(r["samples_per_second"] > 0 and math.isfinite(r["value"]) for r in batch)
    table = _report.table(record["rows"])
    assert table.count("\n") == len(record["rows"]) + 1


def test_solver_objects_and_sweep(problem):
    record, rows = _run_rows(("solver_objects", "sweep"), problem)
    # a diffrax object and its name: the same program, so the same numbers and steps
    objects = [r for r in record["rows"] if r["family"] == "solver_objects"]
    assert len(objects) == 1  # tiny: tsit5 only
    assert all(r["max_abs_diff"] == 0.0 and r["same_steps"] and r["met"] for r in objects)
    # 8 horizons in one vmapped program: compiled once, the separate solves' end states
    sweep = next(r for r in record["rows"] if r["family"] == "sweep")
    assert sweep["compilations"]["sweep"] == 1 and len(sweep["horizons"]) == 8
    assert sweep["max_rel_diff"] < 1e-3  # float32, rtol 1e-4


def test_tokens_and_spread():
    x = jnp.zeros((2, 3, 4))
    p = _common.Problem("t", "t", None, x, x, None)
    more = p.tokens(5)
    assert more.shape == (5, 3, 4)
    assert bool(jnp.all(more[:2] == 0)) and bool(jnp.all(more[2:] != 0))
    s = _common.spread([3.0, 1.0, 2.0])
    assert s["median"] == 2.0 and s["min"] == 1.0 and s["max"] == 3.0 and s["n"] == 3


def test_long_horizon(problem):
    record, _ = _run_rows(("long_horizon",), problem)
    long = {r["name"].split(",")[0]: r for r in record["rows"]}
    assert set(long) == {"projected", "native", "paper horizon"}
    for r in long.values():  # float32, rtol 1e-4: the same end state (tiny: 1e-4 apart)
        assert r["tsit5_nfe"] > 0 and r["auto_nfe"] > 0 and r["end_state_distance"] < 1e-2
    # past convergence the projected flow is stiff: auto switches and needs fewer
    # evaluations (tiny model to t = 1000: 13,717 against 781 here)
    projected = long["projected"]
    assert max(projected["auto_switches"]) >= 1 and projected["nfe_ratio"] > 3
    # not stiff: auto is tsit5 step for step
    assert long["paper horizon"]["auto_switches"] == [0]
    assert long["paper horizon"]["nfe_ratio"] == 1.0


@pytest.mark.skipif(
    not os.environ.get("ET_ODE_SLOW_TESTS"),
    reason="about 18 compilations (40 s of CPU); set ET_ODE_SLOW_TESTS=1",
)
def test_sparse(problem):
    record, _ = _run_rows(("sparse",), problem)
    rows = record["rows"]
    assert len(rows) == 4  # vector field and gradient step: measured, and the largest graph
    for r in rows[0::2]:  # sparse equals dense at the small size; memory known and small
        assert r["max_abs_diff_vs_dense"] < 1e-4
        assert 0 < r["bytes"]["total"] < 4 * 2**30 and r["met"] is True
    for r in rows[1::2]:  # the largest graph within the budget: found, compiled, fits
        assert r["fits"] and 0 < r["total"] <= r["budget_bytes"] and r["value"] == r["edges"] > 0


@pytest.mark.skipif(
    not os.environ.get("ET_ODE_SLOW_TESTS"),
    reason="six landscape rows and their references (90 s of CPU); set ET_ODE_SLOW_TESTS=1",
)
def test_landscape(problem):
    """The landscape rows: the continued points are the independent fixed points (same
    tolerance), the spectrum has 8 descending exponents, and the basin grid's batched
    solve compiles once and runs fewer sequential steps than one by one; the tangent
    Hessian's Lanczos gives ARPACK's eigenvalues; the stiff field's fold is the same
    matrix-free (preconditioned) and dense; the fold curve is scipy's points."""
    _, rows = _run_rows(("landscape",), problem)
    branch = next(r for name, r in rows.items() if name.startswith("continuation"))
    assert branch["points"] >= 1 and branch["largest_distance_rms"] < 1e-6
    spectrum = next(r for name, r in rows.items() if name.startswith("Lyapunov"))
    assert len(spectrum["exponents"]) == 8 == len(spectrum["single_exponents"])
    assert spectrum["exponents"] == sorted(spectrum["exponents"], reverse=True)
    grid = next(r for name, r in rows.items() if name.startswith("basin grid"))
    assert grid["solve_compilations"] == 1 and grid["met"] is True
    assert grid["one_by_one_iterations"] > grid["batched_iterations"] > 0
    stiff = next(r for name, r in rows.items() if name.startswith("stiff continuation"))
    assert stiff["matrix_free"]["points"] == stiff["dense"]["points"] == 14
    assert stiff["fold_difference"] < 1e-9  # the same fold, matrix-free and dense
    hessian = next(r for name, r in rows.items() if name.startswith("tangent Hessian"))
    assert hessian["max_difference"] < 1e-8 * max(map(abs, hessian["largest"]))
    fold = next(r for name, r in rows.items() if name.startswith("fold curve"))
    assert fold["points"] >= 3 and fold["max_difference_to_scipy"] < 1e-8
