"""The measurements of docs/benchmarks.md, "Non-smooth dynamics": why adaptive solvers
crawl at the authors' shapes (the problem of the `imagenet` row: random weights, one
noise image, the authors' masking), and which method reaches the fixed point. Not run by
`make bench` (minutes on a GPU, about an hour on 2 CPU cores). Prints JSON lines.

    python -m benchmarks.nonsmooth [--tiny] [--f64] [--highest] [--few]
                                   [--parts=euler,order,adaptive,anderson,newton]

- `euler`: constant-step Euler (dt 0.1) on the projected flow for 1500 steps: RMS G along
  the way, the step where it falls below 1e-5, and how many of the N K activations change
  sign per unit time.
- `order`: from states on that path (t = 0, 2, 20), one step of Euler, Heun, Bosh3 and
  Tsit5 for h from 1e-3 to 1, against 256 Tsit5 substeps: the true local error, the
  embedded error estimate, and their slopes in log h (the effective order + 1), for the
  ReLU model and for the same model with its activation pattern frozen at the start
  state (a quadratic Hopfield energy: smooth, the same scales).
- `adaptive`: tsit5, bosh3, auto and Euler to RMS G 1e-5 (1500 steps at most), ReLU and
  frozen pattern.
- `anderson`: `find_fixed_point(method="anderson")` for a few memories, steps and warm
  starts; `newton`: Newton-GMRES and L-BFGS from Euler warm starts.
`--highest`: `jax_default_matmul_precision="highest"` (on GPUs float32 matmuls otherwise
run in TF32). Every line printed is also a row of the record written at the end
(`benchmarks/_records.py`: family `nonsmooth`, the line's fields under `data`) into
`benchmarks/records/` (with `--tiny`: runs/bench/), or `--out=PATH`.
"""

import json
import sys
import time

import jax

if "--f64" in sys.argv:
    jax.config.update("jax_enable_x64", True)
if "--highest" in sys.argv:
    jax.config.update("jax_default_matmul_precision", "highest")

import diffrax  # noqa: E402
import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

from et_ode import analysis, solvers  # noqa: E402
from et_ode.analysis import save_json  # noqa: E402

from . import _common, _records  # noqa: E402
from ._imagenet import imagenet_problem  # noqa: E402

TINY = "--tiny" in sys.argv
DTYPE = jnp.float64 if "--f64" in sys.argv else jnp.float32
PARTS = next(
    (a.split("=", 1)[1].split(",") for a in sys.argv if a.startswith("--parts=")),
    ["euler", "order", "adaptive", "anderson", "newton"],
)
G_TOL = 1e-5
# (memory, dt, warm steps) of each Anderson setting tried
ANDERSON: tuple[tuple[int, float, int], ...] = (
    (10, 0.1, 0),
    (10, 0.2, 0),
    (20, 0.2, 0),
    (10, 0.1, 50),
    (10, 0.2, 50),
    (20, 0.3, 50),
)
if "--few" in sys.argv:
    ANDERSON = ((10, 0.1, 20), (10, 0.1, 50), (10, 0.2, 50))


ROWS: list[dict] = []  # every line printed, for the record


def out(**kw):
    kw = {
        k: (float(v) if isinstance(v, (np.floating, jnp.ndarray)) and np.ndim(v) == 0 else v)
        for k, v in kw.items()
    }
    line = json.dumps(kw, default=lambda o: np.asarray(o).tolist())
    print(line, flush=True)
    fields = json.loads(line)
    name = ", ".join(f"{k} {v}" for k, v in fields.items() if isinstance(v, (str, bool)))
    ROWS.append({"family": "nonsmooth", "name": name, "value": None, "data": fields})


def write_record(started: float) -> None:
    """The record of this run: every printed line a row (see the module docstring)."""

    options = {"argv": sys.argv[1:], "parts": PARTS, "dtype": str(jnp.dtype(DTYPE))}
    record = _records.skeleton(
        "nonsmooth", _common.machine(), {"imagenet_shapes": not TINY}, options
    )
    record["rows"] = ROWS
    record["seconds"] = time.perf_counter() - started
    given = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--out=")), None)
    path = given or _records.default_path(record, smoke=TINY)
    save_json(path, record, indent=2)
    print(f"wrote {path}", flush=True)


def rms(x):
    return jnp.sqrt(jnp.mean(x * x))


def field(m, x):
    return m.vector_field(0.0, x, None, "projected")


def hidden(m, x):
    return m.norm(x) @ m.hopfield.xi.T


@eqx.filter_jit
def euler_scan(m, x, n, dt=0.1):
    def body(x, _):
        x1 = x + dt * field(m, x)
        flips = jnp.sum((hidden(m, x) > 0) != (hidden(m, x1) > 0))
        return x1, (rms(m.residual(x, None)), flips)

    return lax.scan(body, x, None, length=n)


def one_step(solver, m, y0, h):
    term = diffrax.ODETerm(lambda t, y, a: field(m, y))
    state = solver.init(term, 0.0, h, y0, None)
    y1, err, _, _, _ = solver.step(term, 0.0, h, y0, None, state, made_jump=False)
    return y1, err


@eqx.filter_jit
def reference_step(m, y0, h, n=256):
    term = diffrax.ODETerm(lambda t, y, a: field(m, y))
    sol = diffrax.diffeqsolve(
        term,
        diffrax.Tsit5(),
        0.0,
        h,
        h / n,
        y0,
        stepsize_controller=diffrax.ConstantStepSize(),
        max_steps=n + 1,
    )
    return sol.ys[-1]


def main():
    model, _, _, x0 = imagenet_problem(1, TINY)
    core = analysis.cast(model.core, DTYPE)
    x = x0[0].astype(DTYPE)
    n, d = x.shape
    out(
        part="problem",
        tiny=TINY,
        matmul_precision=str(jax.config.jax_default_matmul_precision),
        dtype=str(jnp.dtype(DTYPE)),
        n=n,
        d=d,
        k=core.hopfield.xi.shape[0],
        device=str(jax.devices()[0]),
        rms_g0=rms(core.residual(x, None)),
    )

    # --- Euler dt 0.1 trajectory: RMS G and activation flips per step
    steps = 1500
    t0 = time.perf_counter()
    xs_end, (g, flips) = jax.block_until_ready(euler_scan(core, x, steps))
    secs = time.perf_counter() - t0
    g = np.asarray(g)
    flips = np.asarray(flips)
    reached = np.nonzero(g < G_TOL)[0]
    hit = int(reached[0]) if reached.size else None
    out(
        part="euler",
        steps_to_tol=hit,
        seconds_incl_compile=secs,
        flips_per_unit_time_by_decade={
            f"t<{t}": float(flips[: int(t * 10)].mean() * 10) for t in (1, 3, 10, 30, 100)
        },
        rms_g_at=[float(g[i]) for i in (0, 10, 30, 100, 300, 600, 1000, 1499)],
        total_activations=n * core.hopfield.xi.shape[0],
    )
    # states along the Euler path to take local steps from
    starts = {}
    if {"order", "adaptive"} & set(PARTS):
        for t in (0.0, 2.0, 20.0):
            starts[t] = euler_scan(core, x, int(t * 10))[0] if t else x

    if "order" in PARTS:
        hs = np.logspace(-3, 0, 7)
        for t, y0 in starts.items():
            pattern = hidden(core, y0) > 0
            frozen = eqx.tree_at(lambda mm: mm.hopfield, core, core.hopfield.with_pattern(pattern))
            for label, m in (("relu", core), ("frozen pattern (smooth)", frozen)):
                for name, solver in (
                    ("euler", diffrax.Euler()),
                    ("heun", diffrax.Heun()),
                    ("bosh3", diffrax.Bosh3()),
                    ("tsit5", diffrax.Tsit5()),
                ):
                    errs, ests, switched = [], [], []
                    for h in hs:
                        y1, est = eqx.filter_jit(one_step)(solver, m, y0, DTYPE(h))
                        ref = reference_step(m, y0, DTYPE(h))
                        errs.append(float(rms(y1 - ref)))
                        ests.append(float(rms(est)) if est is not None else float("nan"))
                        switched.append(int(jnp.sum((hidden(m, y0) > 0) != (hidden(m, ref) > 0))))
                    lh = np.log10(hs)
                    mid = slice(1, 5)
                    out(
                        part="order",
                        t=t,
                        model=label,
                        solver=name,
                        h=hs.tolist(),
                        error=errs,
                        estimate=ests,
                        switched=switched,
                        slope_error=float(
                            np.polyfit(lh[mid], np.log10(np.maximum(errs, 1e-300))[mid], 1)[0]
                        ),
                        slope_estimate=(
                            float(
                                np.polyfit(lh[mid], np.log10(np.maximum(ests, 1e-300))[mid], 1)[0]
                            )
                            if name != "euler"
                            else None
                        ),
                    )

    if "adaptive" in PARTS:
        y0 = x
        pattern = hidden(core, y0) > 0
        frozen = eqx.tree_at(lambda mm: mm.hopfield, core, core.hopfield.with_pattern(pattern))
        for label, m in (("relu", core), ("frozen pattern (smooth)", frozen)):
            for name, opts in (
                ("tsit5 rtol 1e-4", dict(solver="tsit5", rtol=1e-4, atol=1e-6)),
                ("bosh3 rtol 1e-3", dict(solver="bosh3", rtol=1e-3, atol=1e-6)),
                ("auto rtol 1e-4", dict(solver="auto", rtol=1e-4, atol=1e-6)),
                ("euler dt 0.1", dict(solver="euler", dt0=0.1)),
            ):
                t0 = time.perf_counter()
                sol = solvers.solve(
                    m,
                    y0,
                    flow="projected",
                    throw=False,
                    t1=1e3,
                    max_steps=1500,
                    dtmin=1e-9,
                    stop=solvers.FixedPointStop(atol=G_TOL),
                    **opts,
                )
                st = sol.stats
                out(
                    part="adaptive",
                    model=label,
                    method=name,
                    t=float(sol.t_final),
                    nfe=int(st["nfe"]),
                    steps=int(st["num_steps"]),
                    rejected=int(st["num_rejected_steps"]),
                    g=float(st["residual_rms"]),
                    reason=solvers.STOP_REASONS[int(st["stop_code"])],
                    seconds=time.perf_counter() - t0,
                )

    if "anderson" in PARTS:
        for memory, dt, start in ANDERSON:
            t0 = time.perf_counter()
            res = solvers.find_fixed_point(
                core,
                x,
                method="anderson",
                tol=G_TOL,
                anderson=solvers.AndersonSettings(dt=dt, memory=memory, warm_steps=start),
                max_steps=3000,
            )
            xa = jax.block_until_ready(res.x)
            out(
                part="anderson",
                memory=memory,
                dt=dt,
                warm_euler_steps=start,
                nfe=int(res.steps),
                g=float(res.residual_rms),
                success=bool(res.success),
                distance_to_euler_end=float(rms(xa - xs_end)) if hit else None,
                energy=float(core.energy(xa, None)),
                euler_energy=float(core.energy(xs_end, None)),
                seconds_incl_compile=time.perf_counter() - t0,
            )

    if "newton" in PARTS:
        finders = [
            ("newton", warm, dict(method="newton", linear="gmres", max_steps=30))
            for warm in (0, 50, 150)
        ]
        finders += [("lbfgs", warm, dict(method="lbfgs", max_steps=3000)) for warm in (0, 50)]
        for part, warm, options in finders:
            xw = euler_scan(core, x, warm)[0] if warm else x
            t0 = time.perf_counter()
            res = solvers.find_fixed_point(core, xw, tol=G_TOL, **options)
            jax.block_until_ready(res.x)
            out(
                part=part,
                warm_euler_steps=warm,
                steps=int(res.steps),
                g=float(res.residual_rms),
                success=bool(res.success),
                distance_to_euler_end=float(rms(res.x - xs_end)) if hit else None,
                seconds_incl_compile=time.perf_counter() - t0,
            )


if __name__ == "__main__":
    _started = time.perf_counter()
    main()
    write_record(_started)
