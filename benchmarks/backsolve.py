"""What backsolve can and cannot do (docs/mathematics.md): the relative error of the whole
parameter gradient of `adjoint="backsolve"` against the checkpoint gradient of the same
solve, tsit5, PID steps with atol = rtol / 100, float64, on the smooth test model of
`tests/test_gradients.py` (its `smooth` fixture: `conftest.make_model(hopfield="softmax")`,
`make_state()`, the loss weights from key 7), for each flow, horizon and tolerance of
`CELLS`. Not run by `make bench` (24 s on 2 CPU cores, compiles included). Writes a record
(`benchmarks/_records.py`) and prints a Markdown table:

    python -m benchmarks.backsolve [--out PATH]

Rows of family `backsolve` are the table's cells (`cell: ["native, T = 100", "rtol
1e-08"]`); rows of family `backsolve_default_init` are the same measurement at 20 tau
for the library's default `init_std` (0.02 in place of the test model's 0.3).

One compiled gradient serves every horizon and tolerance of a flow and adjoint (`t1`,
`rtol` and `atol` are traced: `gradient`), so the tests reuse it
(`tests/test_gradients.py` checks the table's corners against the newest record).
"""

import argparse
import functools
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import et_ode
from et_ode import solvers
from et_ode.analysis import save_json

from . import _common, _records
from ._common import row

# The table: rows (flow, horizon in tau), columns rtol (atol = rtol / 100).
CELLS: tuple[tuple[str, float], ...] = (
    ("native", 1.2),
    ("native", 100.0),
    ("native", 1000.0),
    ("projected", 1.2),
    ("projected", 1.5),
    ("projected", 2.0),
    ("projected", 5.0),
)
RTOLS = (1e-6, 1e-8, 1e-10)
# The same measurement on weights of the library's default size, at one horizon.
DEFAULT_INIT_CELLS: tuple[tuple[str, float], ...] = (("native", 20.0), ("projected", 20.0))
DEFAULT_INIT_STD = 0.02
# One step cap for every cell (a traced horizon has no step count to size it by): the
# most any cell takes (native to 1000 tau at rtol 1e-10) with room to spare.
MAX_STEPS = 4096
SOLVER = "tsit5"
REFERENCE = "checkpoint gradient of the same solve"


def smooth_problem(init_std: float = 0.3):
    """The `smooth` fixture of tests/test_gradients.py, built as tests/conftest.py builds
    it: the softmax-Hopfield ET (dim 16, 2 heads of 8, 24 memories, no self-attention,
    parameters from key 0 with `init_std`), `x0` of 6 tokens from key 1, and the loss
    weights `w` from key 7; float64. Returns `(model, x0, w)`."""
    _check_x64()
    model = et_ode.EnergyTransformer(
        16,
        2,
        8,
        24,
        key=jax.random.key(0),
        hopfield="softmax",
        self_attention=False,
        init_std=init_std,
        dtype=jnp.float64,
    )
    x0 = jax.random.normal(jax.random.key(1), (6, 16), jnp.float64)
    w = jax.random.normal(jax.random.key(7), x0.shape, x0.dtype)
    return model, x0, w


def loss(model, x_final, w):
    """The tests' loss: a scalar that sees the final state through the LayerNorm output."""
    return jnp.sum(jnp.sin(model.norm(x_final)) * w)


@functools.cache
def gradient(flow: str, adjoint: str):
    """The compiled gradient, with respect to the model and `x0`, of `loss` after a tsit5
    solve on `flow` with `adjoint`, called as `grad(model, x0, w, t1, rtol)` (`t1` and
    `rtol` traced: one compilation per flow and adjoint; atol = rtol / 100, step cap
    `MAX_STEPS`)."""

    def value(inputs, w, t1, rtol):
        model, x0 = inputs
        sol = solvers.solve(
            model,
            x0,
            solver=SOLVER,
            flow=flow,
            t1=t1,
            dt0=None,
            rtol=rtol,
            atol=rtol / 100,
            adjoint=adjoint,
            max_steps=MAX_STEPS,
        )
        return loss(model, sol.x_final, w)

    grad = eqx.filter_jit(eqx.filter_grad(value))

    def call(model, x0, w, t1, rtol):
        dtype = x0.dtype
        return grad((model, x0), w, jnp.asarray(t1, dtype), jnp.asarray(rtol, dtype))

    return call


def _flat(tree) -> np.ndarray:
    leaves = jax.tree.leaves(eqx.filter(tree, eqx.is_array))
    return np.concatenate([np.ravel(np.asarray(x)) for x in leaves])


def relative_error(a, b) -> float:
    """`|a - b| / |b|` over every array leaf of two gradients (pytrees)."""
    fa, fb = _flat(a), _flat(b)
    return float(np.linalg.norm(fa - fb) / np.linalg.norm(fb))


def backsolve_error(flow: str, t1: float, rtol: float, problem=None) -> float:
    """The relative error of backsolve's gradient with respect to the model's parameters
    against the checkpoint gradient of the same solve (`flow`, horizon `t1`, tsit5 at
    `rtol`, atol = rtol / 100), on `problem` (`(model, x0, w)`; default
    `smooth_problem()`)."""
    model, x0, w = smooth_problem() if problem is None else problem
    (bs_model, _) = gradient(flow, "backsolve")(model, x0, w, t1, rtol)
    (cp_model, _) = gradient(flow, "checkpoint")(model, x0, w, t1, rtol)
    return relative_error(bs_model, cp_model)


def _check_x64():
    if not jax.config.read("jax_enable_x64"):
        raise RuntimeError(
            "benchmarks.backsolve measures in float64: jax.config.update('jax_enable_x64', "
            "True) before calling it (python -m benchmarks.backsolve does)"
        )


def _label(flow: str, t1: float) -> str:
    return f"{flow}, T = {t1:g}"


def _table(rows: list[dict]) -> list[str]:
    columns = list(dict.fromkeys(r["cell"][1] for r in rows))
    labels = list(dict.fromkeys(r["cell"][0] for r in rows))
    values = {tuple(r["cell"]): r["value"] for r in rows}
    lines = ["| | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for label in labels:
        cells = [f"{values[(label, c)]:.2g}" for c in columns]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def measure(print_fn=print) -> list[dict]:
    """Every cell of `CELLS` x `RTOLS` (family `backsolve`) and of `DEFAULT_INIT_CELLS` x
    `RTOLS` (family `backsolve_default_init`), as record rows."""

    rows = []
    for family, cells, init_std in (
        ("backsolve", CELLS, 0.3),
        ("backsolve_default_init", DEFAULT_INIT_CELLS, DEFAULT_INIT_STD),
    ):
        problem = smooth_problem(init_std)
        for flow, t1 in cells:
            for rtol in RTOLS:
                start = time.perf_counter()
                err = backsolve_error(flow, t1, rtol, problem)
                seconds = time.perf_counter() - start
                print_fn(
                    f"  {family}: {flow}, T {t1:g}, rtol {rtol:g}: {err:.2e} ({seconds:.1f} s)"
                )
                rows.append(
                    row(
                        family,
                        f"{flow}, T {t1:g}, rtol {rtol:g}",
                        value=err,
                        unit="",
                        reference=REFERENCE,
                        note=(
                            f"relative error of the whole parameter gradient; {SOLVER}, "
                            f"rtol {rtol:g}, atol {rtol / 100:g}, init_std {init_std:g}"
                        ),
                        cell=[_label(flow, t1), f"rtol {rtol:g}"],
                        seconds=seconds,
                    )
                )
    return rows


def main(argv=None) -> str:
    jax.config.update("jax_enable_x64", True)

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.backsolve",
        description="backsolve's gradient error against checkpoint gradients (docs: "
        "mathematics, 'What backsolve can and cannot do'). Prints a Markdown table and "
        "writes a record.",
    )
    parser.add_argument(
        "--out", default=None, help="the record's path (default: benchmarks/records/)"
    )
    args = parser.parse_args(argv)

    start = time.perf_counter()
    model, x0, _ = smooth_problem()
    problem = {
        "model": "the smooth test model of tests/test_gradients.py (conftest.make_model("
        "hopfield='softmax'): softmax Hopfield, init_std 0.3, key 0)",
        "tokens": int(x0.shape[0]),
        "dim": int(x0.shape[1]),
        "heads": int(model.attention.Wq.shape[0]),
        "head_dim": int(model.attention.Wq.shape[1]),
        "memories": int(model.hopfield.xi.shape[0]),
        "x0": "N(0, 1) from key 1",
        "loss": "sum(sin(LayerNorm(x(T))) * w), w N(0, 1) from key 7",
        "dtype": "float64",
        "default_init_std": DEFAULT_INIT_STD,
    }
    options = {
        "solver": SOLVER,
        "rtols": list(RTOLS),
        "atol": "rtol / 100",
        "max_steps": MAX_STEPS,
        "cells": [list(c) for c in CELLS],
        "default_init_cells": [list(c) for c in DEFAULT_INIT_CELLS],
        "value": "|g_backsolve - g_checkpoint| / |g_checkpoint| over every parameter",
    }
    record = _records.skeleton("backsolve", _common.machine(), problem, options)
    record["rows"] = measure()
    record["wall_seconds"] = time.perf_counter() - start
    path = args.out or _records.default_path(record, smoke=False)
    written = save_json(path, record, indent=2)
    for family in ("backsolve", "backsolve_default_init"):
        print()
        print("\n".join(_table([r for r in record["rows"] if r["family"] == family])))
    print(f"\n{len(record['rows'])} rows in {record['wall_seconds']:.0f} s: {written}")
    return written


if __name__ == "__main__":
    main()
