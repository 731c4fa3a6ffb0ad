"""Every figure the package draws says what it shows and is legible: a title with a caption
line from the result's metadata (model, horizon, dtype, sample count, solver and
tolerances), no overlapping or clipped text, axes that keep to the data, and it writes
as png, pdf and svg.

The figures are drawn from small synthetic results with the keys the studies return (no
solve, no compilation); `test_every_figure_is_checked` fails when a figure function is
added to `et_ode.analysis` without an entry here. `layout_problems`, the checker, is
itself tested on figures with known defects: a checker that cannot fail proves nothing.
The real results of the studies and jobs are drawn by test_analysis.py, test_cli.py,
test_figures.py and test_graphs.py (the image figures and the energy video on a tiny
model there; the drawing code is the same)."""

import importlib.util
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from et_ode import analysis  # noqa: E402
from et_ode.analysis import layout_problems  # noqa: E402
from et_ode.analysis.figures import _energy_video, _images  # noqa: E402
from et_ode.analysis.tasks import _image_trajectory  # noqa: E402

RNG = np.random.default_rng(0)
JOB = dict(checkpoint="paper", data={"split": "test", "image_indices": [0, 799]})


def meta(study, **extra):
    """Metadata as `analysis.metadata` writes it (the volatile entries left out)."""
    return dict(study=study, seeds={}, x64=True, **extra)


def decay(times, start, rate, floor=0.0):
    return start * np.exp(-rate * np.asarray(times, float)) + floor


# ------------------------------------------------------------- synthetic results
def crowded_wall_times():
    """`work_precision_result` with every wall time between 0.07 and 0.09 s (as a loaded
    machine measured them): the log axis' integer-multiple ticks 0.07, 0.08, 0.09 crowd."""
    result = work_precision_result()
    for run, wall in zip(result["runs"], (0.071, 0.089, 0.075, 0.083, 0.08)):
        run["wall_s"] = wall
    return result


def work_precision_result():
    """What `et-ode compare-solvers --quick` on two images returns (its NFE span less than a
    decade: where matplotlib labels minor log ticks and they collided)."""
    runs = []
    for rtol, nfe, err, wall in ((1e-3, 32, 3.1e-4, 4.1e-3), (1e-5, 45, 2.2e-6, 5.7e-3)):
        runs.append(
            dict(
                solver="tsit5",
                kind="adaptive",
                rtol=rtol,
                atol=rtol * 1e-2,
                nfe=nfe,
                num_steps=nfe // 6,
                wall_s=wall,
                ok=True,
                stop_reason=["t1"] * 2,
                error_exact=err,
                error_paper=err * 30,
            )
        )
    for dt0, nfe, err, wall in ((0.1, 12, 4.0e-3, 2.0e-3), (0.05, 24, 2.1e-3, 3.0e-3)):
        runs.append(
            dict(
                solver="euler",
                kind="fixed",
                dt0=dt0,
                nfe=nfe,
                num_steps=nfe,
                wall_s=wall,
                ok=True,
                stop_reason=["t1"] * 2,
                error_exact=err,
                error_paper=0.0 if dt0 == 0.1 else 1.9e-3,
            )
        )
    runs.append(
        dict(
            solver="heun",
            kind="fixed",
            dt0=0.2,
            nfe=12,
            num_steps=6,
            wall_s=2e-3,
            ok=False,
            stop_reason=["max_steps"] * 2,
            error_exact=float("nan"),
            error_paper=float("nan"),
        )
    )
    return dict(
        runs=runs,
        reference=dict(
            solver="dopri8", rtol=1e-8, atol=1e-10, dtype="float64", nfe=np.array([400, 410])
        ),
        paper=dict(solver="euler", dt0=0.1, error_exact=4.0e-3),
        metadata=meta(
            "work_precision",
            dtype="float32",
            flow="native",
            t1=1.2,
            atol_factor=0.01,
            repeats=1,
            batch=2,
            **JOB,
        ),
    )


def many_solvers_result():
    """What `work_precision`'s default grid returns on the paper's float32 core: three
    adaptive solvers at four tolerances and three constant-step ones at four steps (six
    series; tsit5 is in both), errors down to the float32 floor near 1.5e-6, the paper's
    Euler map (euler dt 0.1) as the dotted reference line."""
    runs = []
    adaptive = {
        "bosh3": ((40, 2e-3), (70, 2.5e-4), (140, 3e-5), (290, 4e-6)),
        "tsit5": ((32, 3e-4), (45, 3e-5), (70, 2.2e-6), (110, 1.5e-6)),
        "dopri8": ((80, 5e-5), (95, 6e-6), (120, 1.8e-6), (150, 1.4e-6)),
    }
    for solver, points in adaptive.items():
        for rtol, (nfe, err) in zip((1e-3, 1e-4, 1e-5, 1e-6), points):
            runs.append(
                dict(
                    solver=solver,
                    kind="adaptive",
                    rtol=rtol,
                    atol=rtol * 1e-2,
                    nfe=nfe,
                    num_steps=nfe // 6,
                    wall_s=1e-3 + 5e-5 * nfe,
                    ok=True,
                    stop_reason=["t1"] * 2,
                    error_exact=err,
                    error_paper=4e-3,
                )
            )
    fixed = {
        "euler": ((6, 8e-3), (12, 4e-3), (24, 2e-3), (48, 1e-3)),
        "heun": ((12, 4e-4), (24, 1e-4), (48, 2.5e-5), (96, 6e-6)),
        "tsit5": ((36, 1e-5), (72, 1.6e-6), (144, 1.5e-6), (288, 1.5e-6)),
    }
    for solver, points in fixed.items():
        for dt0, (nfe, err) in zip((0.2, 0.1, 0.05, 0.025), points):
            runs.append(
                dict(
                    solver=solver,
                    kind="fixed",
                    dt0=dt0,
                    nfe=nfe,
                    num_steps=nfe,
                    wall_s=1.2e-3 + 5e-5 * nfe,
                    ok=True,
                    stop_reason=["t1"] * 2,
                    error_exact=err,
                    error_paper=0.0 if (solver, dt0) == ("euler", 0.1) else err + 4e-3,
                )
            )
    base = work_precision_result()
    return dict(base, runs=runs, paper=dict(solver="euler", dt0=0.1, error_exact=4e-3))


def contributions_result():
    times = np.linspace(0.0, 1.2, 7)
    part = {
        name: {
            where: np.stack([decay(times, scale * (1 + 0.1 * b), 1.5) for b in range(2)])
            for where, scale in (("masked", s), ("visible", s / 3))
        }
        for name, s in (("attention", 2.0), ("hopfield", 5.0), ("total", 6.0))
    }
    part["external"] = {"masked": np.zeros((2, 7)), "visible": np.zeros((2, 7))}
    fraction = {
        where: part["attention"][where] / (part["attention"][where] + part["hopfield"][where])
        for where in ("masked", "visible")
    }
    return dict(
        times=times,
        **part,
        attention_fraction=fraction,
        sum_mismatch=np.full((2, 7), 1e-16),
        batched=True,
        metadata=meta(
            "contributions",
            dtype="float32",
            flow="native",
            solver="euler",
            dt0=0.1,
            rtol=None,
            atol=None,
            n_masked=50,
            batch=2,
            **JOB,
        ),
    )


def energy_descent_result():
    runs = []
    for label, options, dt, rises in (
        ("euler dt 0.1", dict(solver="euler", dt0=0.1), 0.1, [5]),
        ("euler dt 0.5", dict(solver="euler", dt0=0.5), 0.5, []),
        ("tsit5 rtol 1e-07", dict(solver="tsit5", rtol=1e-7, atol=1e-9), 0.3, []),
    ):
        ts = np.arange(0.0, 2.4 + 1e-9, dt)
        energies = -100.0 - 50.0 * (1 - np.exp(-ts))
        record = dict(
            steps=ts.size - 1,
            rises=len(rises),
            real_rises=len(rises),
            roundoff_rises=0,
            max_rise=0.1 if rises else 0.0,
            max_relative_rise=0.0,
            real_rise_steps=np.array(rises, int),
            real_rise_sizes=np.zeros(len(rises)),
            roundoff_allowance=1e-10,
            dtype="float64",
        )
        runs.append(
            dict(
                label=label,
                options=options,
                energy_ts=[ts, ts],
                energies=[energies, energies],
                rises=[record, record],
                real_rises=2 * len(rises),
                roundoff_rises=1,
                max_rise=0.1 if rises else 0.0,
                num_steps=[ts.size] * 2,
                nfe=[ts.size] * 2,
                stop_reason=["t1"] * 2,
            )
        )
    return dict(
        runs=runs,
        batched=True,
        metadata=meta(
            "energy_descent",
            dtype="float64",
            flow="native",
            t1=2.4,
            roundoff_ulps=64.0,
            max_steps=20000,
            batch=2,
            solvers=[run["options"] for run in runs],
            **JOB,
        ),
    )


def gradient_depth_result():
    horizons = np.array([0.6, 1.2, 2.4])
    adjoint = dict(
        grad_norm=np.array([1.1, 0.9, 0.8]),
        x0_grad_norm=np.array([0.3, 0.1, 0.02]),
        loss=np.array([1.2, 1.1, 1.0]),
        skipped=[None] * 3,
        ratio=0.7,
        vanishes=False,
    )
    back = dict(adjoint, grad_norm=np.array([1.1, 0.9, np.nan]), skipped=[None, None, "unstable"])
    times = np.linspace(0.0, 2.4, 4)
    return dict(
        horizons=horizons,
        steps=np.array([6, 12, 24]),
        adjoints={"checkpoint": adjoint, "backsolve": back},
        implicit=dict(grad_norm=0.75, x0_grad_norm=1e-6, loss=1.0),
        adjoint_state=dict(
            times=times,
            grad_norm=decay(times, 1e-2, -1.0),
            scaled_grad_norm=decay(times, 2e-2, -0.5),
            horizon=2.4,
        ),
        avoids_vanishing=["checkpoint"],
        summary=[],
        metadata=meta(
            "gradient_depth",
            dtype="float32",
            solver="euler",
            dt0=0.1,
            rtol=None,
            atol=None,
            flow="native",
            max_steps=20000,
            adjoints=["checkpoint", "backsolve", "implicit"],
            batch=2,
            vanish_threshold=1e-3,
            model="MaskedImageET",
        ),
    )


def temperature_result():
    temperatures = np.asarray([0.0, 2e-4, 1e-3, 1e-2, 0.1, 0.3])
    mse = 0.11 + 0.25 * temperatures
    options = dict(solver="euler", dt0=0.1, rtol=None, atol=None, flow="native", max_steps=13)
    return dict(
        temperatures=temperatures,
        mse=mse,
        mse_low=mse - 0.01,
        mse_high=mse + 0.01,
        mse_per_image=np.stack([mse, mse], axis=1),
        energy=-8400 + 1500 * temperatures,
        energy_std=np.full(6, 300.0),
        energy_rise=1500 * temperatures,
        energy_rise_std=np.full(6, 20.0),
        tolerance=0.1,
        tolerated=0.01,
        degraded_at=0.1,
        horizon=1.2,
        samples=2,
        noise="isotropic",
        solve_options=options,
        metadata=meta("temperature", dtype="float32", n_images=2, **JOB),
    )


def escape_result():
    temperatures = np.asarray([2.6e-4, 1.73e-4, 1.3e-4])
    mean = 160 * np.exp(2.6e-4 / temperatures)
    escapes = dict(
        temperatures=temperatures,
        escaped=np.asarray([30, 22, 14]),
        mean=mean,
        low=0.7 * mean,
        high=1.5 * mean,
        slope=2.4e-4,
        slope_low=1.1e-4,
        slope_high=3.7e-4,
        intercept=5.1,
        barrier=2.6e-4,
        paths=32,
        t1=1000.0,
        dt0=0.05,
        solver="euler",
    )
    arclength = np.linspace(0, 0.02, 17)
    return dict(
        path_energies=2.6e-4 * np.sin(np.pi * arclength / 0.02) - 0.7 * arclength,
        path_arclength=arclength,
        barrier=2.6e-4,
        morse_index=1,
        flow="projected",
        escapes=escapes,
        metadata=meta("escape", dtype="float64", n_images=1, **JOB),
    )


def overshoot_result():
    times = np.unique(np.concatenate([[0.0, 1.2], np.geomspace(0.012, 12.0, 12)]))
    mse = 1.2 - 0.3 * (1 - np.exp(-times)) + 0.01 * np.log1p(times)
    energy = np.stack([-3000 - 900 * (1 - np.exp(-times)) * (1 + 0.05 * b) for b in range(2)])
    options = dict(solver="euler", dt0=0.1, rtol=None, atol=None, flow="native", max_steps=136)
    return dict(
        times=times,
        mse=mse,
        mse_per_image=np.stack([mse, mse]),
        energy=energy,
        horizon=1.2,
        horizon_kind="t1",
        t_max=12.0,
        mse_at_horizon=float(mse[3]),
        mse_at_end=float(mse[-1]),
        best_time=12.0,
        best_mse=float(mse.min()),
        solve_options=options,
        metadata=meta(
            "overshoot",
            dtype="float32",
            t_max_factor=10.0,
            horizon=1.2,
            horizon_kind="t1",
            n_images=2,
            solve_options=options,
            stop_for_horizon=None,
            **JOB,
        ),
    )


def graph_overshoot_result():
    times = np.unique(np.concatenate([[0.0, 1.2], np.geomspace(0.012, 120.0, 10)]))
    options = dict(
        solver="euler", dt0=0.1, rtol=None, atol=None, flow="native", t1=120.0, max_steps=1200
    )
    return dict(
        times=times,
        auc=0.8 + 0.05 * np.tanh(np.log1p(times)),
        energy=-50 - 10 * (1 - np.exp(-times)),
        horizon=1.2,
        t_max=120.0,
        auc_at_horizon=0.83,
        auc_at_end=0.85,
        best_time=120.0,
        best_auc=0.85,
        solve_options=options,
        metadata=meta(
            "graph_overshoot",
            dtype="float32",
            t_max_factor=100.0,
            horizon=1.2,
            t_max=120.0,
            n_nodes=2708,
            n_scored=542,
            solve_options=options,
        ),
    )


def convergence_result():
    times = np.concatenate([[0.0], np.geomspace(0.01, 20.0, 15)])
    flows = {}
    for flow, rate, growth in (("native", 0.2, 0.05), ("projected", 1.5, 0.0)):
        flows[flow] = dict(
            residual_rms=decay(times, 0.5, rate, 1e-12),
            dgdt_rms=decay(times, 0.3, rate),
            dxdt_rms=decay(times, 0.3, rate, 0.01),
            abs_dEdt=decay(times, 50.0, 2 * rate),
            energy=-100 - 10 * (1 - np.exp(-times)),
            scales=np.outer(1 + growth * times, np.linspace(0.8, 1.2, 6)),
            time_to_tolerance=None,
            nfe_to_tolerance=None,
            stop_reason=["t1"],
            fit=dict(rate=rate, r2=0.99, n_points=8, t_window=[1.0, 10.0]),
            power_law=dict(exponent=float("nan"), r2=float("nan"), n_points=0),
        )
    return dict(
        times=times,
        flows=flows,
        batched=False,
        metadata=meta(
            "convergence",
            dtype="float64",
            flows=["native", "projected"],
            solver="tsit5",
            rtol=1e-5,
            atol=1e-7,
            dt0=None,
            t1=20.0,
            tolerance=None,
            chunks=2,
            max_steps=100000,
            batch=1,
            **JOB,
        ),
    )


def batched_convergence_result():
    """`convergence_result` on two images (batched), their fits differing (the demo's
    default run: two images, rates 0.0531 and 0.126 with r^2 0.60 and 0.85)."""
    one = convergence_result()
    times = one["times"]
    flows = {}
    for flow, rec in one["flows"].items():
        rates = (0.0531, 0.126) if flow == "projected" else (0.2, 0.25)
        traces = np.stack(
            [decay(times, 0.5 * (1 + 0.2 * b), r, 1e-12) for b, r in enumerate(rates)]
        )
        flows[flow] = dict(
            {
                k: np.stack([v, 1.1 * v])
                for k, v in rec.items()
                if k in ("dgdt_rms", "dxdt_rms", "abs_dEdt", "energy", "scales")
            },
            residual_rms=traces,
            time_to_tolerance=np.array([np.nan, np.nan]),
            nfe_to_tolerance=np.array([-1, -1]),
            stop_reason=["t1", "t1"],
            fit=dict(
                rate=np.array(rates),
                r2=np.array([0.60, 0.85]),
                n_points=np.array([8, 8]),
                t_window=np.array([[1.0, 10.0], [1.0, 8.0]]),
            ),
            power_law=dict(
                exponent=np.array([0.5, 0.6]) if flow == "native" else np.full(2, np.nan),
                r2=np.array([0.97, 0.99]) if flow == "native" else np.full(2, np.nan),
                n_points=np.array([4, 4]),
            ),
        )
    return dict(one, flows=flows, batched=True, metadata=dict(one["metadata"], batch=2))


def fixed_points_result():
    labels = ["data", "another end state", "matched noise"]
    distances = np.array([[0.0, 1e-9, 0.4], [1e-9, 0.0, 0.4], [0.4, 0.4, 0.0]])
    return dict(
        labels=labels,
        distances=distances,
        cluster=np.array([0, 0, 1]),
        n_distinct=2,
        path_independence=1 / 3,
        energy=np.array([-120.0, -120.0, -110.0]),
        residual_rms=np.full(3, 1e-7),
        t_final=np.array([40.0, 35.0, 60.0]),
        stop_reason=["fixed_point"] * 3,
        converged=np.ones(3, bool),
        morse_index=None,
        metadata=meta(
            "fixed_points",
            dtype="float64",
            flow="projected",
            solver="tsit5",
            rtol=1e-7,
            atol=1e-9,
            tolerance=1e-6,
            t1=1000.0,
            distance_tol=1e-6,
            polish=False,
            **JOB,
        ),
    )


def stability_result():
    """`analysis.stability`'s entries (its docstring): the polished point's spectrum, the
    polish report, kinks, the Lyapunov exponent and the verdict."""
    smallest, largest = np.array([0.048, 0.05, 0.07]), np.array([3.0, 4.0, 5.5])
    times = np.linspace(0.1, 2.0, 4)
    return dict(
        smallest=smallest,
        largest=largest,
        all=None,
        morse_index=0,
        morse_index_is_lower_bound=False,
        zero_tol=1e-8,
        n_near_zero=0,
        asymmetry=None,
        dimension=3840,
        n_normal_excluded=128,
        geometry="manifold",
        method="lanczos",
        coordinates="x",
        clock=np.ones(64),
        clock_range=[0.9, 1.1],
        polish=dict(
            polished=True,
            residual_rms_before=1e-4,
            residual_rms=3e-12,
            converged=True,
            steps=4,
            displacement_rms=2e-5,
        ),
        residual_rms=3e-12,
        distance_bound=1e-9,
        kinks=dict(declared=True, twice_differentiable=True, n_within=0, nearest=0.3, within=1e-8),
        sides=None,
        morse_index_range=[0, 0],
        linear_rates=[-5.5, -0.048],
        rates_smallest=smallest,
        energy=-120.0,
        lyapunov=dict(
            exponent=-0.05,
            local=np.array([-0.5, -0.1, -0.06, -0.05]),
            times=times,
            flow="projected",
            t1=2.0,
            segments=4,
            seed=0,
            solver="tsit5",
            rtol=1e-5,
            atol=1e-7,
            dt0=None,
            coordinates="g",
        ),
        verdict=dict(
            code="stable_minimum",
            sentence="stable minimum: no negative Hessian "
            "eigenvalue (smallest +0.048), FTLE -0.05/tau within the linearised "
            "range",
            called=True,
            lyapunov_range=[-5.5, -0.048],
            lyapunov_consistent=True,
        ),
        flow="projected",
        tau=1.0,
        start=dict(t_final=40.0, stop_reason="fixed_point", residual_rms=1e-4),
        metadata=meta(
            "stability",
            dtype="float64",
            flow="projected",
            coordinates="x",
            method="lanczos",
            k=3,
            float64=True,
            **JOB,
        ),
    )


def hopf_continuation_result():
    """A Brusselator's branch (two unknowns, so the RMS distance is drawn) through its
    Hopf point at p = 2, as `continuation` returns it."""
    p = np.linspace(1.5, 2.5, 8)
    x = np.stack([np.ones(8), p], axis=1)
    return dict(
        continuation_result(),
        p=p,
        x=x,
        s=p - 1.5,
        eigenvalues=np.stack([(p - 2) / 2 + 1j, (p - 2) / 2 - 1j], axis=1),
        stable=p < 2,
        unstable=2 * (p > 2),
        bifurcations=[
            dict(
                kind="hopf",
                p=2.0,
                x=np.array([1.0, 2.0]),
                s=0.5,
                index=3,
                s_bracket=1e-11,
                eigenvalues=np.array([1j, -1j]),
                eigenvalue=1j,
                residual_rms=0.0,
                frequency=1.0,
            )
        ],
    )


def continuation_result():
    """A pitchfork's trivial branch as `continuation` returns it (a branch point at 0)."""
    p = np.linspace(-1.0, 1.0, 9)
    return dict(
        p=p,
        x=np.zeros((9, 1)),
        s=p + 1.0,
        eigenvalues=(p + 0j)[:, None],
        stable=p < 0,
        unstable=(p > 0).astype(int),
        tangent_p=np.ones(9),
        newton_iterations=np.ones(9, int),
        residual_rms=np.zeros(9),
        dense=True,
        bifurcations=[
            dict(
                kind="branch_point",
                p=1e-11,
                x=np.zeros(1),
                s=1.0,
                index=4,
                s_bracket=1e-11,
                eigenvalues=np.array([1e-11j]),
                eigenvalue=1e-11 + 0j,
                residual_rms=0.0,
            )
        ],
        stop_reason="p_span",
        metadata=meta("continuation", dtype="float64", tol=1e-10, k=6, parameter=None),
    )


def unlocated_continuation_result():
    """`continuation_result` as the shipped model's quick continuation ended: the branch
    point's bisection did not reach `locate_tol` (`located` False), and the branch
    stopped at `max_points` before the requested span's end (p = 2)."""
    result = continuation_result()
    point = dict(result["bifurcations"][0], p=0.9876, s=1.98, index=7, located=False)
    meta = dict(result["metadata"], p_span=(-1.0, 2.0))
    return dict(result, bifurcations=[point], stop_reason="max_points", metadata=meta)


def basin_continuation_result(values=5):
    """`basin_continuation` across a pitchfork at p = 0 (one attractor, then two; the
    second appears), 64 starts, one of which reaches no fixed point at the last value."""
    p = np.linspace(-1.0, 1.0, values)
    after = p > 0
    fractions = np.stack([np.where(after, 0.5, 1.0), np.where(after, 0.5, 0.0)], axis=1)
    fractions[-1] = [31 / 64, 0.5]
    first = int(np.argmax(after))

    def track(i, where):
        return dict(
            id=i,
            index=list(np.flatnonzero(where)),
            p=list(p[where]),
            energy=list(-(p[where].clip(0) ** 2) / 4),
            fraction=list(fractions[where, i]),
            stable=[True] * int(where.sum()),
            morse_index=[0] * int(where.sum()),
        )

    return dict(
        p=p,
        counts=np.where(after, 2, 1),
        labels=np.zeros((values, 64), int),
        fractions=fractions,
        tracks=[track(0, np.ones(values, bool)), track(1, after)],
        events=[dict(kind="appears", track=1, p=p[first], between=[p[first - 1], p[first]])],
        metadata=meta(
            "basin_continuation",
            dtype="float64",
            flow="native",
            solver="tsit5",
            rtol=1e-6,
            atol=1e-8,
            fixed_point_atol=1e-5,
            t1=1e4,
            parameter="beta",
            match="distance",
        ),
    )


def many_tracks_figure():
    """Twelve tracks over beta from 0.1 to 10 (every start its own attractor, as on the
    shipped models), the trained value marked: the legend names eight tracks."""
    result = basin_continuation_result(values=6)
    result["p"] = np.geomspace(0.1, 10.0, 6)
    base = result["tracks"][0]
    result["tracks"] = [
        dict(base, id=i, p=list(result["p"]), energy=[-float(i)] * 6, fraction=[1 / 12] * 6)
        for i in range(12)
    ]
    result["fractions"] = np.full((6, 12), 1 / 12)
    result["counts"] = np.full(6, 12)
    result["events"] = []
    fig = analysis.plot_basin_continuation(result, reference=0.25, reference_label="trained")
    assert fig.axes[0].get_xscale() == "log"
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend[:8] == [f"track {i}" for i in range(8)]
    assert legend[8:] == ["and 4 more", "trained, beta = 0.25"]
    return fig


def basins_result():
    """`basins` on an 8 x 8 grid split into two basins, one start not converged."""
    labels = np.repeat(np.array([0, 1]), 32).reshape(8, 8)
    labels[0, 0] = -1
    attractors = [
        dict(
            x=np.array([[sign, 0.0]]),
            energy=0.0,
            count=count,
            fraction=count / 64,
            morse_index=0,
            smallest_eigenvalues=np.array([3.0, 8.0]),
            stable=True,
            residual_rms=1e-14,
            polished=True,
            start=start,
        )
        for sign, count, start in ((-1.0, 31, 1), (1.0, 32, 32))
    ]
    return dict(
        labels=labels.ravel(),
        labels_grid=labels,
        attractors=attractors,
        fractions=np.array([31 / 64, 0.5]),
        not_converged=1,
        entropy=0.69,
        batched_iterations=40,
        one_by_one_iterations=2000,
        basin_entropy=dict(S_b=0.32, S_bb=0.64, boxes=4, boundary_boxes=2, box=3),
        metadata=meta(
            "basins",
            dtype="float64",
            flow="native",
            solver="tsit5",
            rtol=1e-6,
            atol=1e-8,
            fixed_point_atol=1e-5,
            t1=1e4,
            match_tol=1e-3,
            starts=64,
        ),
    )


def image_basins_result():
    """`image_basins` on a 12 x 12 plane (two basins) and 20 random starts reaching
    three attractors, each decoded as an 8 x 8 image."""
    labels = np.repeat(np.array([0, 1]), 72).reshape(12, 12)
    rng = np.random.default_rng(0)
    random_labels = np.array([0] * 9 + [1] * 8 + [2] * 3)
    attractors = [
        dict(
            energy=-327.18 + i,
            morse_index=0,
            stable=True,
            polished=True,
            residual_rms=1e-12,
            smallest_eigenvalues=np.array([0.05, 0.07]),
            start=i,
            plane_fraction=float(np.mean(labels == i)),
            random_fraction=float(np.mean(random_labels == i)),
            decoded_image=rng.uniform(size=(8, 8, 3)),
        )
        for i in range(3)
    ]
    return dict(
        attractors=attractors,
        plane=dict(
            labels_grid=labels,
            a=np.linspace(-1.5, 1.5, 12),
            b=np.linspace(-1.5, 1.5, 12),
            image_points={"image 0": [1.0, 0.0], "image 1": [-1.0, 0.0]},
            fractions=np.array([0.5, 0.5, 0.0]),
            not_converged=0,
            basin_entropy=dict(S_b=0.2, S_bb=0.6, boxes=4, boundary_boxes=2, box=5),
        ),
        random=dict(
            labels=random_labels, fractions=np.array([0.45, 0.4, 0.15]), distinct=3, not_converged=0
        ),
        batched_iterations=40,
        one_by_one_iterations=5000,
        stop_reasons={"fixed_point": 164},
        metadata=meta(
            "image_basins",
            dtype="float64",
            flow="projected",
            solver="tsit5",
            rtol=1e-5,
            atol=1e-7,
            fixed_point_atol=1e-4,
            t1=1000.0,
            match_tol=1e-2,
            starts=164,
        ),
    )


def many_image_basins_result():
    """`image_basins` where every start reaches its own attractor (as on the shipped
    models): 8 x 8 plane starts and 16 random ones, 80 attractors."""
    result = image_basins_result()
    rng = np.random.default_rng(1)
    attractors = [
        dict(
            result["attractors"][0],
            energy=-14500.0 + 30 * i,
            plane_fraction=1 / 64 if i < 64 else 0.0,
            random_fraction=1 / 16 if i >= 64 else 0.0,
            morse_index=0 if i < 4 or i in (12, 52) else None,
            polished=i < 4 or i in (12, 52),
            decoded_image=rng.uniform(size=(8, 8, 3)) if i < 4 or i in (12, 52) else None,
        )
        for i in range(80)
    ]
    plane = dict(
        result["plane"],
        labels_grid=np.arange(64).reshape(8, 8),
        a=np.linspace(-1.5, 1.5, 8),
        b=np.linspace(-1.5, 1.5, 8),
        fractions=np.array([a["plane_fraction"] for a in attractors]),
        basin_entropy=dict(S_b=3.2, S_bb=3.2, boxes=1, boundary_boxes=1, box=5),
    )
    random = dict(
        labels=np.arange(64, 80),
        distinct=16,
        fractions=np.array([a["random_fraction"] for a in attractors]),
        not_converged=0,
    )
    return dict(result, attractors=attractors, plane=plane, random=random)


def fold_curve_result(points: int = 30):
    """The two memories' fold curve (`h = m - tanh(beta m)`, `beta = 1 / (1 - tanh^2)`
    in `m`) with its cusp at beta = 1, and one unlocated cusp."""
    t = np.linspace(-0.8, 0.8, points)  # tanh(beta m)
    beta = 1 / (1 - t**2)
    m = np.arctanh(t) / beta
    return dict(
        p=m - t,
        q=beta,
        x=m[:, None] * np.array([0.6, 0.0, 0.8]),
        s=np.cumsum(np.r_[0.0, np.hypot(np.diff(beta), np.diff(m - t))]),
        tests=(-2 * t)[:, None],
        codim2=[
            dict(kind="cusp", p=0.0, q=1.0, located=True, c=-1 / 3, index=points // 2 - 1),
            dict(kind="cusp", p=0.1, q=1.2, located=False, index=3),
        ],
        stop_reason="p_span",
        metadata=meta("fold_continuation", dtype="float64", tol=1e-10),
    )


def lyapunov_spectrum_result():
    """Lorenz's spectrum converging over 100 intervals of 0.5."""
    times = 0.5 * np.arange(1, 101)
    final = np.array([0.906, 0.0, -14.57])
    history = final + np.array([1.0, 0.5, -1.0]) / np.sqrt(times)[:, None]
    return dict(
        exponents=history[-1],
        history=history,
        times=times,
        volume_rate=float(history[-1].sum()),
        neutral=None,
        k=3,
        size=3,
        t1=50.0,
        transient=5.0,
        renormalise=0.5,
        solver="tsit5",
        rtol=1e-8,
        atol=1e-10,
        steps=4000,
        flow=None,
        dtype="float64",
        metadata=meta(
            "lyapunov_spectrum",
            dtype="float64",
            solver="tsit5",
            rtol=1e-8,
            atol=1e-10,
            k=3,
            renormalise=0.5,
            transient=5.0,
        ),
    )


def long_horizon_result():
    """`analysis.long_horizon`'s entries (its docstring): per flow the traces, the step
    segments, the decay law of RMS G (fitted by its own `fit_decay_laws`), the Lyapunov
    exponents; one energy reference."""
    from et_ode.analysis.energy._decay_laws import fit_decay_laws
    from et_ode.analysis.energy._long_horizon import energy_reference

    times = np.concatenate([[0.0], np.geomspace(0.01, 100.0, 16)])
    flows = {}
    for flow, rate in (("native", 0.05), ("projected", 1.0)):
        held = times > (30.0 if flow == "projected" else np.inf)
        ends = times[1:]
        residual = decay(times, 0.5, rate, 1e-12)
        grows = 0.01 * times * (flow == "native")
        flows[flow] = dict(
            energy=-100 - 10 * (1 - np.exp(-rate * times)) - (flow == "projected"),
            residual_rms=residual,
            error=1.0 + 0.01 * np.log1p(times),
            held=held,
            state_times=np.where(held, 30.0, times),
            scales_median=1 + grows,
            scales_min=0.9 + grows,
            scales_max=1.1 + grows,
            segments=dict(
                t0=times[:-1],
                t1=ends,
                accepted=np.full(ends.size, 10),
                rejected=np.where(ends > 10, 1, 0),
                nfe=np.full(ends.size, 60),
                mean_step=np.geomspace(0.01, 5.0, ends.size),
                stop_reason=["t1"] * ends.size,
                switches=[None] * ends.size,
                implicit=[None] * ends.size,
            ),
            t_fixed_point=7.0 if flow == "projected" else None,
            t_fixed_point_bracket=[6.0, 8.0] if flow == "projected" else None,
            fixed_point_stays=True if flow == "projected" else None,
            t_hold=30.0 if flow == "projected" else None,
            decay=fit_decay_laws(times, residual, floor=1e-3),
            lyapunov=dict(
                horizons=np.array([1.0, 10.0]),
                exponents=np.array([[-0.5, -0.3], [-0.4, -0.35]]),
                median=np.array([-0.45, -0.32]),
                max=np.array([-0.4, -0.3]),
                flow=flow,
                directions=2,
                coordinates="g",
            ),
            solver="tsit5" if flow == "native" else "auto",
            total_steps=120,
            total_nfe=700,
            total_switches=None,
            scale_growth_per_tau=0.01 if flow == "native" else 0.0,
        )
    for rec in flows.values():
        rec["energy_above_reference"] = rec["energy"] - min(
            np.min(r["energy"]) for r in flows.values()
        )
    return dict(
        times=times,
        flows=flows,
        energy_reference=energy_reference(flows),
        findings=[],
        metadata=meta(
            "long_horizon",
            dtype="float64",
            flows=["native", "projected"],
            solver={"native": "tsit5", "projected": "auto"},
            rtol=1e-4,
            atol=1e-6,
            t1=100.0,
            n_times=17,
            max_steps=100000,
            hold_tol=1e-3,
            fixed_point_tol=1e-3,
            fit_floor=1e-3,
            fit_start=0.8,
            model_type="EnergyTransformer",
            error="masked MSE (normalised units)",
            lyapunov_horizons=[1.0, 10.0],
            **JOB,
        ),
    )


# --------------------------------------------------- image figures, drawn without a model
def image(seed, size=32):
    return np.random.default_rng(seed).uniform(0.0, 1.0, (size, size, 3))


def energy_video_figure(reference):
    """The energy video's figure at its still frame, as `energy_video_frames` draws it,
    from synthetic trajectories: 2 images, 5 frames to t = 0.4."""
    times = np.linspace(0.0, 0.4, 5)
    originals = np.stack([image(1), image(2)])
    completed = np.stack([[image(10 * b + k) for k in range(5)] for b in range(2)])
    energies = np.stack(
        [-2400 - 1500 * (1 - np.exp(-2 * times)) * (1 + 0.02 * b) for b in range(2)]
    )
    mse = 1.14 + 0.18 * times
    steps = _image_trajectory.frame_steps(dict(solver="euler", dt0=0.1, rtol=None), times)
    text = " \u00b7 ".join(
        ["model paper", "2 images", "native flow", "float32", "euler dt0 0.1", steps["sentence"]]
    )
    fig, show = _energy_video._video_figure(
        originals * 0.5, completed, originals, times, energies, mse, reference, text
    )
    index, note = _image_trajectory.still_frame(times, *reference)
    show(index, note)
    return fig


def reconstruction_figure():
    data = dict(
        masked=np.stack([image(1), image(2)]),
        completed=np.stack([image(3), image(4)]),
        original=np.stack([image(5), image(6)]),
        masked_mse=np.array([0.31, 0.27]),
        mean_fill_mse=np.array([0.5, 0.6]),
    )
    return _images._reconstruction_drawing(
        data, "model paper \u00b7 2 images \u00b7 euler dt0 0.1 to t1 = 1.2 tau \u00b7 float32"
    )


def tokens_over_time_figure():
    t = 5
    data = dict(
        times=np.linspace(0.0, 1.2, t),
        tokens=np.stack([image(k) for k in range(t)]),
        masked=image(20),
        original=image(21),
        attention=np.stack([image(30 + k) - 0.5 for k in range(t)]),
        hopfield=np.stack([image(40 + k) - 0.5 for k in range(t)]),
        attention_scale=0.5,
        hopfield_scale=0.5,
    )
    return _images._tokens_drawing(
        data,
        ["attention", "hopfield"],
        "model paper \u00b7 image 1 of 2 \u00b7 euler dt0 0.1 \u00b7 float32",
    )


class TinyImageModel:
    """What the parameter figures read of a `MaskedImageET`: positions, memories, the
    attention weights and the decoder, with a linear decoder (no JAX)."""

    class config:  # noqa: N801  (attribute access like the model's config)
        patch, channels, n_tokens = 4, 3, 64

    def __init__(self):
        rng = np.random.default_rng(3)
        self.positions = rng.normal(size=(64, 16))
        self.decoder = rng.normal(size=(16, 48))
        self.core = type("Core", (), {})()
        self.core.hopfield = type("H", (), {"xi": rng.normal(size=(32, 16))})()
        self.core.attention = type(
            "A", (), {"Wq": rng.normal(size=(2, 8, 16)), "Wk": rng.normal(size=(2, 8, 16))}
        )()
        self.dtype = "float32"

    def decode_token(self, x):
        return jnp.asarray(x) @ jnp.asarray(self.decoder)


# ------------------------------------------------------------------- the registry
# name -> (draw: () -> Figure, texts the title and caption must contain)
FIGURES = {
    "plot_work_precision": (
        lambda: analysis.plot_work_precision(work_precision_result()),
        ["paper", "2 images", "t1 = 1.2", "float32", "1 run did not reach t1 (not drawn)", "rtol"],
    ),
    "plot_work_precision (wall times within 0.07-0.09 s, a loaded machine)": (
        lambda: analysis.plot_work_precision(crowded_wall_times()),
        ["paper", "float32"],
    ),
    "plot_work_precision (paper)": (
        lambda: analysis.plot_work_precision(work_precision_result(), against="paper"),
        ["paper's Euler map", "float32"],
    ),
    "plot_contributions": (
        lambda: analysis.plot_contributions(contributions_result()),
        ["paper", "2 images", "native flow", "float32", "euler dt0 0.1", "1.2 tau"],
    ),
    "plot_energy_descent": (
        lambda: analysis.plot_energy_descent(energy_descent_result()),
        ["paper", "2 images", "t1 = 2.4", "float64"],
    ),
    "plot_gradient_depth": (
        lambda: analysis.plot_gradient_depth(gradient_depth_result()),
        ["2 samples", "native flow", "2.4 tau", "float32", "euler dt0 0.1"],
    ),
    "plot_overshoot": (
        lambda: analysis.plot_overshoot(overshoot_result()),
        ["paper", "2 images", "12 tau", "float32", "euler dt0 0.1"],
    ),
    "plot_temperature_sweep": (
        lambda: analysis.plot_temperature_sweep(temperature_result()),
        ["paper", "2 images x 2 noise draws", "1.2 tau", "isotropic noise", "float32"],
    ),
    "plot_image_escape": (
        lambda: analysis.plot_image_escape(escape_result()),
        ["paper", "1 image, 32 paths per T", "projected flow", "1e+03 tau", "float64"],
    ),
    "plot_graph_overshoot": (
        lambda: analysis.plot_graph_overshoot(graph_overshoot_result()),
        ["542 scored test nodes", "120 tau", "float32", "euler dt0 0.1"],
    ),
    "plot_convergence": (
        lambda: analysis.plot_convergence(convergence_result()),
        ["paper", "1 image", "t1 = 20", "float64", "tsit5 rtol 1e-05"],
    ),
    "plot_convergence (2 images)": (
        lambda: analysis.plot_convergence(batched_convergence_result()),
        ["paper", "2 images", "t1 = 20", "float64", "tsit5 rtol 1e-05"],
    ),
    "plot_fixed_points": (
        lambda: analysis.plot_fixed_points(fixed_points_result()),
        ["paper", "3 starts", "float64", "tsit5 rtol 1e-07"],
    ),
    "plot_stability": (
        lambda: analysis.plot_stability(stability_result()),
        ["stable minimum", "paper", "float64"],
    ),
    "plot_long_horizon": (
        lambda: analysis.plot_long_horizon(long_horizon_result()),
        ["paper", "1 image", "t1 = 100", "float64", "rtol 0.0001"],
    ),
    "plot_continuation": (
        lambda: analysis.plot_continuation(continuation_result()),
        ["branch point at p = 1e-11", "float64", "9 points", "dense", "Newton tol 1e-10"],
    ),
    "plot_continuation hopf": (
        lambda: analysis.plot_continuation(hopf_continuation_result()),
        ["Hopf at p = 2", "8 points"],
    ),
    "plot_continuation (not located, stopped at max_points)": (
        lambda: analysis.plot_continuation(unlocated_continuation_result()),
        [
            "branch point near p = 0.9876 (not located)",
            "stopped by max_points at p = 1, short of the span -1 to 2",
        ],
    ),
    "plot_basins (coordinates of grid_starts)": (
        lambda: analysis.plot_basins(
            basins_result(), a=np.linspace(-2.0, 2.0, 8), b=np.linspace(-1.0, 1.0, 8)
        ),
        ["2 attractors from 64 starts", "64 starts"],
    ),
    "plot_basins": (
        lambda: analysis.plot_basins(basins_result()),
        [
            "2 attractors from 64 starts",
            "basin entropy 0.32",
            "64 starts",
            "float64",
            "tsit5 rtol 1e-06",
            "fixed-point stop RMS G 1e-05",
        ],
    ),
    "plot_basin_continuation": (
        lambda: analysis.plot_basin_continuation(basin_continuation_result()),
        [
            "Attractors across beta from -1 to 1: 1 to 2 per value, 2 tracks (1 appears, 0 vanish)",
            "64 starts",
            "float64",
            "tsit5 rtol 1e-06",
            "matched by distance",
        ],
    ),
    "plot_basin_continuation (many tracks, a log axis)": (
        lambda: many_tracks_figure(),
        ["12 per value, 12 tracks (0 appear, 0 vanish)"],
    ),
    "plot_image_basins": (
        lambda: analysis.plot_image_basins(image_basins_result()),
        [
            "3 attractors",
            "144 + 20 starts",
            "float64",
            "tsit5 rtol 1e-05",
            "fixed-point stop RMS G 1e-04",
            "basin entropy 0.2",
            "3 attractors from 20 random starts",
        ],
    ),
    "plot_image_basins (every start its own attractor)": (
        lambda: analysis.plot_image_basins(many_image_basins_result()),
        ["80 attractors", "64 attractors", "16 attractors from 16 random starts", "(image)"],
    ),
    "plot_parameter_plane": (
        lambda: analysis.plot_parameter_plane(fold_curve_result(), names=("h", "beta")),
        [
            "cusp at beta = 1, h = 0 (c = -0.3333)",
            "cusp at beta = 1.2, h = 0.1 (not located)",
            "30 points",
            "stopped: p_span",
            "Newton tol 1e-10",
        ],
    ),
    "plot_parameter_plane (two curves)": (
        lambda: analysis.plot_parameter_plane(
            [fold_curve_result(), fold_curve_result(12)], labels=["fine", "coarse"]
        ),
        ["42 points", "stopped: p_span, p_span"],
    ),
    "plot_lyapunov_spectrum": (
        lambda: analysis.plot_lyapunov_spectrum(lyapunov_spectrum_result()),
        ["top 3", "t1 = 50", "float64", "tsit5 rtol 1e-08", "renormalised every 0.5"],
    ),
    "energy_video_frames": (
        lambda: energy_video_figure((0.3, "training horizon")),
        [
            "paper",
            "2 images",
            "float32",
            "euler dt0 0.1",
            "t = 0.3",
            "every frame at a step end",
            "normalised units",
        ],
    ),
    "energy_video_frames (reference beyond the last frame)": (
        lambda: energy_video_figure((13.7, "fixed-point stop (mean)")),
        ["the last frame", "13.7", "beyond"],
    ),
    "reconstruction_figure": (
        reconstruction_figure,
        ["paper", "2 images", "float32", "normalised units"],
    ),
    "tokens_over_time_figure": (tokens_over_time_figure, ["paper", "float32", "per tau"]),
    "position_similarity_figure": (
        lambda: analysis.position_similarity_figure(TinyImageModel(), name="paper")[0],
        ["paper", "64 patches"],
    ),
    "memories_figure": (
        lambda: analysis.memories_figure(TinyImageModel(), 10, name="paper")[0],
        ["paper", "10 of 32"],
    ),
    "attention_weights_figure": (
        lambda: analysis.attention_weights_figure(TinyImageModel(), name="paper")[0],
        ["paper", "2 heads"],
    ),
}


def figure_functions():
    """The figure functions of `et_ode.analysis`: every `plot_*`, every `*_figure` but the
    writers, and the energy video."""
    return sorted(
        name
        for name in analysis.__all__
        if name.startswith("plot_")
        or name == "energy_video_frames"
        or (name.endswith("_figure") and not name.startswith("write_"))
    )


def test_every_figure_is_checked():
    covered = {name.split(" ")[0] for name in FIGURES}
    missing = [name for name in figure_functions() if name not in covered]
    assert not missing, f"figure functions without a layout test here: {missing}"
    assert len(figure_functions()) >= 16


def all_text(fig) -> str:
    texts = [fig.get_suptitle()] + [t.get_text() for t in fig.texts if t is not fig._suptitle]
    for ax in fig.axes:
        texts += [ax.get_title(loc) for loc in ("left", "center", "right")]
        texts += [t.get_text() for t in ax.texts]
    return " ".join(" ".join(texts).split())


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_figure_says_what_it_shows_and_is_legible(name):
    draw, expected = FIGURES[name]
    fig = draw()
    assert isinstance(fig, Figure)
    assert fig.get_suptitle().strip(), f"{name}: no title"
    words = all_text(fig)
    missing = [text for text in expected if text not in words]
    assert not missing, f"{name}: the title and caption lack {missing}: {words!r}"
    problems = layout_problems(fig)
    assert not problems, f"{name}:\n" + "\n".join(problems)


# ----------------------------------------------------------------- specific promises
def test_tolerance_marked_on_every_work_precision_point():
    fig = analysis.plot_work_precision(work_precision_result())
    for ax in fig.axes:
        labels = {t.get_text() for t in ax.texts}
        assert {"1e-3", "1e-5", "dt 0.1", "dt 0.05"} <= labels, labels
        assert "dt 0.2" not in labels  # the failed run is not drawn


def test_energy_video_time_axis_keeps_to_the_frames():
    """The reference past the last frame (the `ode` model's stop at 13.7 against a video
    to 0.4) no longer stretches the time axis, and the figure says where it lies."""
    for reference in ((13.7, "fixed-point stop (mean)"), (0.3, "training horizon")):
        fig = energy_video_figure(reference)
        plots = [ax for ax in fig.axes if ax.lines]
        for ax in plots:
            assert ax.get_xlim() == pytest.approx((0.0, 0.4))
    words = all_text(energy_video_figure((13.7, "fixed-point stop (mean)")))
    assert "still: the last frame (t = 0.4)" in words and "beyond" in words


def test_frame_steps_and_still():
    times = np.linspace(0.0, 0.4, 5)
    assert _image_trajectory.frame_steps(dict(dt0=0.1, rtol=None), times)["interpolated"] == 0
    odd = _image_trajectory.frame_steps(dict(dt0=0.15, rtol=None), times)
    assert odd["interpolated"] == 2 and "interpolated" in odd["sentence"]  # 0.1, 0.2
    adaptive = _image_trajectory.frame_steps(dict(dt0=None, rtol=1e-5), times)
    assert adaptive["interpolated"] == 3
    assert _image_trajectory.still_frame(times, 0.3, "training horizon")[0] == 3
    index, note = _image_trajectory.still_frame(times, 13.7, "fixed-point stop (mean)")
    assert index == 4 and "last frame" in note


# --------------------------------------------------------------- the checker itself
def test_layout_problems_finds_overlapping_tick_labels():
    """matplotlib's own log axis over 12..60 (NFE of a quick solver comparison) labels
    minor ticks, and `3x10^1` and `4x10^1` collide (the defect of compare-solvers.png);
    `finish` gives the axis readable ticks instead."""

    def draw():
        fig = Figure(figsize=(3.0, 2.0), dpi=100, layout="constrained")
        ax = fig.add_subplot()
        ax.plot([12, 60], [1, 2])
        ax.set_xscale("log")
        return fig, ax

    fig, _ = draw()
    problems = layout_problems(fig)
    assert any(re.search(r"x tick label .*3.*overlaps x tick label .*4", p) for p in problems), (
        problems
    )
    fig, ax = draw()
    from et_ode.analysis.figures._plotting import finish

    finish(fig)
    assert not layout_problems(fig)
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert labels == ["20", "50"]  # still numbers on the axis: 1-2-5 steps


def test_layout_problems_finds_text_outside_the_canvas_and_clipped_text():
    fig = Figure(figsize=(3.0, 2.0), dpi=100)
    ax = fig.add_subplot()
    ax.plot([0, 14], [0, 1])
    ax.text(
        13.7, 1.0, " fixed-point stop", transform=ax.get_xaxis_transform(), va="bottom"
    )  # the old energy video's label past the right edge
    problems = layout_problems(fig)
    assert any("'fixed-point stop' extends outside the canvas" in p for p in problems), problems
    fig = Figure(figsize=(3.0, 2.0), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    ax.text(0.9, 0.5, "cut at the axes", transform=ax.transAxes, clip_on=True)
    problems = layout_problems(fig)
    assert any("clipped by its axes" in p for p in problems), problems


def test_layout_problems_finds_overlaps_between_axes_and_rotated_labels():
    fig = Figure(figsize=(4.0, 2.0), dpi=100)  # no layout engine: the y label runs into
    left, right = fig.subplots(1, 2)  # the left axes
    right.set_ylabel("a long y label of the right axes")
    right.set_yticks([0, 1], ["zero", "one"])
    left.set_title("a title wider than its own axes, over the neighbour")
    problems = layout_problems(fig)
    assert any("overlaps" in p or "plotting area" in p for p in problems), problems
    # Rotated labels that do not touch: clean, although their bounding boxes overlap.
    fig = Figure(figsize=(4.0, 3.0), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    ax.set_xticks(
        range(4),
        ["tsit5 rtol 1e-07"] * 4,
        rotation=30,
        ha="right",
        rotation_mode="anchor",
        fontsize=7,
    )
    assert not layout_problems(fig)
    fig = Figure(figsize=(4.0, 3.0), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    ax.set_xticks(
        range(20),
        ["tsit5 rtol 1e-07"] * 20,
        rotation=30,
        ha="right",
        rotation_mode="anchor",
        fontsize=9,
    )
    assert any("overlaps" in p for p in layout_problems(fig))


def test_layout_problems_finds_overlapping_annotations():
    """Two point labels (annotations, `ax.texts`) on top of each other: reported; moved
    apart, clean."""

    def draw(gap):
        fig = Figure(figsize=(3.0, 2.0), dpi=100, layout="constrained")
        ax = fig.add_subplot()
        ax.plot([0, 10], [0, 1], "o", color="C0")
        ax.annotate("1e-3", (5, 0.5), xytext=(4, 2), textcoords="offset points", color="C1")
        ax.annotate("1e-5", (5, 0.5), xytext=(4 + gap, 2), textcoords="offset points")
        return fig

    problems = layout_problems(draw(gap=6))
    assert any("text '1e-3' overlaps text '1e-5'" in p for p in problems), problems
    assert layout_problems(draw(gap=40)) == []


def test_layout_problems_finds_a_label_over_a_line_it_does_not_label():
    """A point label on the dotted reference line (the work-precision figure's 'dt 0.05'
    on the paper's Euler line): reported, naming the line; the same label in the line's
    own colour (it labels that line), or beside it, is clean."""

    def draw(colour, y):
        fig = Figure(figsize=(3.0, 2.0), dpi=100, layout="constrained")
        ax = fig.add_subplot()
        ax.plot([1, 2, 3], [1, 2, 3], color="C1")
        ax.axhline(2.0, color="0.5", ls=":", label="paper's Euler map")
        ax.text(1.2, y, "dt 0.05", color=colour, va="center", fontsize=7)
        return fig

    problems = layout_problems(draw("C1", 2.0))
    assert any("text 'dt 0.05' lies over the line \"paper's Euler map\"" in p for p in problems), (
        problems
    )
    assert layout_problems(draw("0.5", 2.0)) == []  # the line's own label
    assert layout_problems(draw("C1", 2.6)) == []  # clear of both lines
    # another series' markers count as its line
    fig = Figure(figsize=(3.0, 2.0), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    ax.plot([1, 3], [1, 3], "s", color="C2", ms=6)
    ax.text(1, 1, "heun", color="C0", ha="center", va="center", fontsize=7)
    assert any("text 'heun' lies over the line" in p for p in layout_problems(fig))


def test_layout_problems_finds_titles_over_two_lines_and_orphans():
    """A four-line suptitle (the old compare-solvers title: heading and caption wrapped,
    'in float64' left alone): reported; `title` writes the same words as a heading line
    and a caption line, clean; a part broken into a long line and an orphan is reported."""
    heading = (
        "Work against precision: error of x(t1) against the float64 reference (exact "
        "flow); points labelled with rtol or dt"
    )
    words = (
        "model paper \u00b7 2 images \u00b7 native flow \u00b7 t1 = 1.2 tau \u00b7 float32 "
        "\u00b7 atol = 0.01 rtol \u00b7 reference dopri8 rtol 1e-06, atol 1e-08 in float64"
    )
    fig = Figure(figsize=(6.0, 3.0), dpi=100, layout="constrained")
    fig.suptitle(heading.replace("; ", ";\n") + "\n" + words.replace(" in float64", "\nin float64"))
    problems = layout_problems(fig)
    assert any("takes 4 lines (at most 2" in p for p in problems), problems
    fig = Figure(figsize=(8.0, 3.0), dpi=100, layout="constrained")
    analysis.figures.title(fig, heading, words)
    assert fig.get_suptitle().count("\n") == 1 and not layout_problems(fig)
    assert fig.get_suptitle() == heading + "\n" + words  # nothing shortened
    fig = Figure(figsize=(6.0, 3.0), dpi=100, layout="constrained")
    fig.suptitle(words.replace(" in float64", "\nin float64"))
    problems = layout_problems(fig)
    assert any("'in float64' is an orphan" in p for p in problems), problems
    fig = Figure(figsize=(6.0, 3.0), dpi=100, layout="constrained")
    fig.suptitle(analysis.figures.wrap(fig, words, 8.5))  # balanced: no orphan
    assert fig.get_suptitle().count("\n") == 1 and not layout_problems(fig)


def test_clean_figure_has_no_problems():
    fig = Figure(figsize=(4.0, 3.0), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    ax.plot([1, 2, 3], [1, 4, 9], label="squares")
    ax.set_xlabel("x (units)")
    ax.set_ylabel("y (units)")
    ax.legend()
    fig.suptitle("a title")
    assert layout_problems(fig) == []


# ------------------------------------------------------------------------- formats
def test_figures_write_as_png_pdf_and_svg(tmp_path):
    fig = analysis.plot_graph_overshoot(graph_overshoot_result(), path=tmp_path / "a.svg")
    for suffix, magic in (("png", b"\x89PNG"), ("pdf", b"%PDF"), ("svg", b"<svg")):
        path = analysis.write_figure(tmp_path / f"figure.{suffix}", fig)
        assert magic in path.read_bytes()[:1000], suffix
    assert b"<svg" in (tmp_path / "a.svg").read_bytes()[:1000]  # plot_*(path=...) too
    pdf = (tmp_path / "figure.pdf").read_bytes()
    assert b"/Type3" not in pdf and b"CIDFontType2" in pdf  # TrueType fonts, as journals ask
    with pytest.raises(ValueError, match="suffix"):
        analysis.write_figure(tmp_path / "figure.jpg", fig)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "a.svg",
        "figure.pdf",
        "figure.png",
        "figure.svg",
    ]


def test_work_precision_says_when_a_point_has_no_room_for_its_label():
    result = work_precision_result()
    crowded = dict(result["runs"][0])
    result["runs"] = [dict(crowded, rtol=10.0**-k) for k in range(3, 12)]  # one spot
    fig = analysis.plot_work_precision(result)
    assert "had no room" in all_text(fig)
    assert not layout_problems(fig)


# ---------------------------------------------------------------------------- docs
DOCS = Path(__file__).resolve().parents[1] / "docs"
DOCS_IMAGES = {  # figure function -> its images in docs/images (docs/make_figures.py)
    "plot_work_precision": "compare-solvers",
    "energy_video_frames": "energy-video",
    "position_similarity_figure": "fig2-positions",
    "reconstruction_figure": "fig3-reconstructions",
    "tokens_over_time_figure": "fig4-tokens-over-time",
    "memories_figure": "fig5-memories",
    "attention_weights_figure": "fig6-attention-weights",
    "plot_convergence": "convergence",
    "plot_energy_descent": "energy-descent",
    "plot_overshoot": "overshoot",
    "plot_temperature_sweep": "temperature",
    "plot_image_escape": "escape",
    "plot_gradient_depth": "gradient-depth",
    "plot_contributions": "contributions",
    "plot_long_horizon": "long-horizon",
    "plot_stability": "stability",
    "plot_fixed_points": "fixed-points",
    "plot_graph_overshoot": "graph-overshoot",
    "plot_continuation": "continuation",
    "plot_basins": "basins",
    "plot_basin_continuation": ("basin-continuation", "paper-basin-continuation"),
    "plot_image_basins": "image-basins",
    "plot_lyapunov_spectrum": "lyapunov-spectrum",
    "plot_parameter_plane": "fold-curve",
}


def test_every_figure_is_shown_on_its_how_to_page():
    """Each figure function has a small committed image (`make docs-figures`), shown on
    the how-to page docs/make_figures.py names for it."""
    spec = importlib.util.spec_from_file_location("make_figures", DOCS / "make_figures.py")
    make_figures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_figures)
    assert sorted(DOCS_IMAGES) == figure_functions()
    images = [
        (function, image)
        for function, names in DOCS_IMAGES.items()
        for image in ((names,) if isinstance(names, str) else names)
    ]
    assert sorted(image for _, image in images) == sorted(make_figures.FIGURES)
    for function, image in images:
        path = DOCS / "images" / f"{image}.png"
        assert path.exists(), f"{function}: {path} is missing (make docs-figures)"
        assert path.stat().st_size <= make_figures.MAX_BYTES, path
        page = DOCS / "how-to" / make_figures.FIGURES[image][0]
        assert f"](../images/{image}.png)" in page.read_text(), f"{image} not shown on {page}"


def test_energy_descent_says_in_words_when_e_never_rose():
    """No rise at all (the shipped model's quick study): no empty bar chart, a sentence
    saying E never rose in any run, with the runs and steps counted."""
    result = energy_descent_result()
    for run in result["runs"]:
        run.update(real_rises=0, roundoff_rises=0)
        for record in run["rises"]:
            record.update(real_rise_steps=np.array([], int))
    fig = analysis.plot_energy_descent(result)
    counts = fig.axes[1]
    assert not counts.patches and not counts.axison  # no bars, no empty axes
    steps = sum(sum(run["num_steps"]) for run in result["runs"])
    assert f"E never rose: no step of the 3 runs ({steps} steps in all, 2 images)" in all_text(fig)
    assert not layout_problems(fig)
    fig = analysis.plot_energy_descent(energy_descent_result())  # rises: bars from zero
    assert len(fig.axes[1].patches) == 6 and fig.axes[1].get_ylim()[0] == 0.0


def test_convergence_draws_every_image_and_quotes_the_summarys_fit():
    """A batched result: every image's trace drawn (two per flow per panel), each image's
    fit dashed, and the legend's fit is `quoted_decay`'s (the summary's): the median of
    the two rates with their range and r^2, not image 0's rate."""
    from et_ode.analysis.energy import quoted_decay

    result = batched_convergence_result()
    fig = analysis.plot_convergence(result)
    residual = fig.axes[0]
    for flow, colour in (("native", "tab:blue"), ("projected", "tab:orange")):
        traces = [line for line in residual.lines if line.get_color() == colour]
        assert len(traces) == 2, flow
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    quoted = quoted_decay(result["flows"]["projected"], "projected")
    assert quoted["value"] == pytest.approx(np.median([0.0531, 0.126]))
    assert quoted["text"] == (
        "rate 0.0896/tau: median of 2 images, range 0.0531 to 0.126 (r^2 0.6 to 0.85)"
    )
    assert f"projected fit: {quoted['text']}" in legend
    native = quoted_decay(result["flows"]["native"], "native")
    assert native["law"] == "power_law" and native["text"].startswith("t^-0.55: median of 2")
    assert f"native fit: {native['text']}" in legend
    assert "native (2 images)" in legend and "projected (2 images)" in legend
    dashed = [line for line in residual.lines if line.get_linestyle() not in ("-", "None")]
    assert len(dashed) == 4  # each image's fit, both flows
    one = analysis.plot_convergence(result, sample=1)  # one image, said so
    assert "image 1 of 2 images" in all_text(one)
    assert len([ln for ln in one.axes[0].lines if ln.get_color() == "tab:orange"]) == 1
    rate = [t.get_text() for t in one.legends[0].get_texts() if "projected fit" in t.get_text()]
    assert rate == ["projected fit: rate 0.126/tau (r^2 0.85)"]


def test_continuation_marks_an_unlocated_point_and_a_short_branch():
    """A branch point whose bisection did not reach `locate_tol` is hollow, "not located"
    in the legend and "near" in the title (never "at"); a branch that stopped at
    `max_points` before its span's end says so in the caption."""
    fig = analysis.plot_continuation(unlocated_continuation_result())
    words = all_text(fig)
    assert "branch point at" not in words
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "branch point (not located)" in legend and "branch point" not in legend
    (marker,) = [ln for ln in fig.axes[0].lines if ln.get_marker() == "D" and len(ln.get_xdata())]
    assert marker.get_markerfacecolor() == "white"
    located = analysis.plot_continuation(continuation_result())
    assert "branch point at p = 1e-11" in all_text(located) and "short of" not in all_text(located)


def test_basins_axes_are_in_the_coordinates_given():
    """With `grid_starts`' coordinates the map's axes span them (each cell centred on its
    coordinate, `a` up, `b` across); without, the axes say they are grid indices."""
    a, b = np.linspace(-2.0, 2.0, 8), np.linspace(-1.0, 1.0, 8)
    ax = analysis.plot_basins(basins_result(), a=a, b=b, axis_labels=("a", "b")).axes[0]
    half_a, half_b = (a[1] - a[0]) / 2, (b[1] - b[0]) / 2
    assert ax.get_ylim() == pytest.approx((-2.0 - half_a, 2.0 + half_a))
    assert ax.get_xlim() == pytest.approx((-1.0 - half_b, 1.0 + half_b))
    assert (ax.get_ylabel(), ax.get_xlabel()) == ("a", "b")
    ax = analysis.plot_basins(basins_result()).axes[0]
    assert ax.get_ylabel() == "a: grid row (index)" and ax.get_xlim() == (-0.5, 7.5)
    with pytest.raises(ValueError, match="8 x 8"):
        analysis.plot_basins(basins_result(), a=a[:5], b=b[:5])


def test_image_basins_says_when_every_start_has_its_own_attractor():
    fig = analysis.plot_image_basins(many_image_basins_result())
    energy_ax = fig.axes[1]
    assert not energy_ax.collections and not energy_ax.axison  # no row of single starts
    assert "every start reached an attractor of its own" in all_text(fig)
    shared = analysis.plot_image_basins(image_basins_result())
    assert shared.axes[1].collections and "of its own" not in all_text(shared)


def test_every_work_precision_point_has_a_label_clear_of_other_lines():
    """Six series and the paper's dotted line: every point labelled (none left out),
    each label clear of every line of another colour (`layout_problems` checks)."""
    result = many_solvers_result()
    fig = analysis.plot_work_precision(result)
    words = all_text(fig)  # it says what it shows, as every figure of FIGURES does
    assert all(w in words for w in ("paper", "2 images", "t1 = 1.2", "float32", "rtol"))
    assert "had no room" not in words
    for ax in fig.axes:
        assert len(ax.texts) == len(result["runs"])
    assert not layout_problems(fig)
