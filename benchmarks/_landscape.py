"""Rows landscape: the tools of docs/how-to/landscape.md on the shipped core, each against
what a user would run without them, measured in the same run, in float64 (the row turns
`jax_enable_x64` on for itself; `_precision` keeps float32 tolerances for a caller that
runs a piece in float32):

- **continuation in beta**: the first sample's fixed point (the projected flow with
  `auto` to RMS G 1e-6, then Newton) followed in the attention's `beta` from its trained
  value, `POINTS` points with `K` eigenvalues each (one compiled field for the branch:
  `beta` is traced), against an independent fixed point at each `beta` the branch
  reached (the same flow and Newton polish from the sample's encoding, the model at that
  `beta` by `with_beta`, so the solve compiles once). Both are timed from cold, each
  paying its own compilations (JAX's caches are cleared in between). Goal: <= 0.5x
  their time.
- **Lyapunov spectrum**: the top 8 exponents of the native flow by QR over `T` (one
  tangent solve for the 8 directions per interval), measured in `g` as the single runs
  are, against 8 single-exponent runs (`lyapunov_exponent`, seeds 0..7) over the same
  time: each of those estimates the top exponent. Goal: <= 0.5x their time.
- **tangent Hessian**: `hessian_eigenvalues(method="lanczos")` (the generic room's
  Krylov-Schur on the symmetric operator, its products in one compiled loop) at the
  first sample's fixed point, the `K` smallest and largest eigenvalues in `g` to 1e-10,
  against scipy's `eigsh` (ARPACK) on the same operator built from the model's public
  methods (`residual`, `tangent_projection`, `clock`: `P J C^-1 P` plus a shift on the
  normal space, each product a jitted JVP called from Python), both warm. Goal: no
  slower (<= 1x), the same eigenvalues.
- **basin grid**: `analysis.basins` on a grid of starts in the plane through the first
  two samples' encodings and a random direction (`GRID` per side): the batched solve is one
  compilation, and
  its sequential loop iterations (the slowest start's steps) against their sum over the
  starts (solving them one by one). Goal: one compilation of the solve.

- **stiff continuation** (a field, not the ET): `u'' + lambda (1 + u)^2 = 0` on
  `STIFF_POINTS` interior points (`|df/dx| = 4 / h^2`), from `lambda = 0` through its fold,
  matrix-free with a tridiagonal preconditioner (`L^-1`) and the eigenvalues nearest zero
  (`spectrum="nearest_zero"`), against the dense path (`jacfwd`, LU, `eig`) on the same
  settings, each from cold: time per point, and where each put the fold.

- **fold curve** (a field, not the ET): the Bratu-Gelfand fold followed in a second
  parameter by `analysis.fold_continuation`, against scipy `fsolve` on the fold's
  extended system at each value the curve reached: the warm time over scipy's.

Quick mode: fewer points, a shorter `T`, an 8 x 8 grid, a 300-point stiff grid.
"""

import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from et_ode import analysis, solvers

from ._common import row
from ._compile import BACKEND_COMPILE, CompileCounter

FAMILY = "landscape"
POINTS, K = (100, 6), (6, 2)  # (full, quick): continuation points, eigenvalues
HORIZON = (100.0, 4.0)  # Lyapunov averaging time (full, quick)
EXPONENTS = 8
GRID = (64, 8)  # basin grid points per side (full, quick)
STIFF_POINTS = (1100, 300)  # interior grid points of the stiff field (full, quick)


def _precision():
    """`(dtype, fixed-point RMS G, Newton tol, rtol, atol)` for this process."""
    if jax.config.read("jax_enable_x64"):
        return jnp.float64, 1e-6, 1e-9, 1e-7, 1e-9
    return jnp.float32, 1e-4, 1e-4, 1e-5, 1e-7


def _fixed_point(model, x, tol, newton_tol):
    """The studies' start: the projected flow with `auto` to RMS G `tol`, then Newton."""
    sol = solvers.solve(
        model,
        x,
        solver="auto",
        rtol=1e-7,
        atol=1e-9,
        dt0=None,
        flow="projected",
        t1=1000.0,
        max_steps=100_000,
        throw=False,
        stop=solvers.FixedPointStop(atol=tol),
    )
    return solvers.find_fixed_point(
        model, sol.x_final, method="newton", linear="auto", tol=newton_tol
    )


def _at_beta(model, beta):
    return eqx.tree_at(lambda m: m.attention, model, model.attention.with_beta(beta))


def _continuation(core, x0, quick):
    dtype, tol, newton_tol, _, _ = _precision()
    points, k = POINTS[quick], K[quick]
    beta0 = float(core.attention.beta)
    jax.clear_caches()  # cold, whichever rows ran before
    start = time.perf_counter()
    found = _fixed_point(core, x0, tol, newton_tol)
    branch = analysis.continuation(
        core,
        found.x,
        beta0,
        p_span=(0.1 * beta0, 10 * beta0),  # a decade each way: room for the points
        parameter="beta",
        settings=analysis.ContinuationSettings(
            ds=0.05 * beta0,
            ds_max=0.2 * beta0,
            k=k,
            max_points=points,
            newton=analysis.NewtonSettings(newton_tol=newton_tol),
        ),
    )
    branch_s = time.perf_counter() - start
    betas = np.asarray(branch["p"])[1:]
    # Both sides from cold: the branch's start compiled the fixed-point solve, which the
    # independent solves would otherwise reuse (docs/benchmarks.md, "The landscape").
    jax.clear_caches()
    start = time.perf_counter()
    independent = [
        _fixed_point(_at_beta(core, jnp.asarray(b, dtype)), x0, tol, newton_tol) for b in betas
    ]
    independent_s = time.perf_counter() - start
    # the same fixed points? (the flow may settle in another nearby minimum)
    distance = max(
        (
            float(jnp.sqrt(jnp.mean((f.x - jnp.asarray(x)) ** 2)))
            for f, x in zip(independent, np.asarray(branch["x"])[1:])
        ),
        default=None,
    )
    ratio = branch_s / independent_s if independent_s > 0 else None
    return row(
        FAMILY,
        f"continuation in beta, {len(betas)} points, {k} eigenvalues",
        value=ratio,
        unit="x (branch time / independent solves' time)",
        reference="a fixed point solved independently at each beta reached",
        goal="<= 0.5x",
        met=None if quick or ratio is None else ratio <= 0.5,
        branch_s=branch_s,
        independent_s=independent_s,
        points=len(betas),
        beta_trained=beta0,
        beta_reached=float(betas[-1]) if len(betas) else None,
        stop_reason=branch["stop_reason"],
        stall=branch["stall"],  # why a branch stopped by ds_min stopped
        largest_distance_rms=distance,
        bifurcations=[b["kind"] for b in branch["bifurcations"]],
        # on an accelerator: the kernels XLA refused as they are, with the passes then off
        xla_passes_off=branch["metadata"]["xla_passes_off"],
        unknowns=int(x0.size),
        dtype=str(jnp.dtype(dtype)),
        note="quick: few points" if quick else "",
    )


def _spectrum(core, x0, quick):
    dtype, _, _, rtol, atol = _precision()
    t1 = HORIZON[quick]
    options = dict(flow="native", solver="tsit5", rtol=rtol, atol=atol)
    start = time.perf_counter()
    spectrum = analysis.lyapunov_spectrum(
        core,
        x0,
        k=EXPONENTS,
        t1=t1,
        options=analysis.LYAPUNOV_OPTIONS.replace(**options),
        settings=analysis.LyapunovSpectrumSettings(renormalise=1.0, measure="g"),
        dtype=dtype,
    )
    spectrum_s = time.perf_counter() - start
    start = time.perf_counter()
    single = analysis.LYAPUNOV_EXPONENT_OPTIONS.replace(**options)
    singles = [
        analysis.lyapunov_exponent(core, x0, options=single, t1=t1, segments=int(t1), seed=seed)[
            "exponent"
        ]
        for seed in range(EXPONENTS)
    ]
    singles_s = time.perf_counter() - start
    ratio = spectrum_s / singles_s
    return row(
        FAMILY,
        f"Lyapunov spectrum, top {EXPONENTS}, T = {t1:g}",
        value=ratio,
        unit="x (spectrum time / single runs' time)",
        reference=f"{EXPONENTS} single-exponent runs (lyapunov_exponent)",
        goal="<= 0.5x",
        met=None if quick else ratio <= 0.5,
        spectrum_s=spectrum_s,
        singles_s=singles_s,
        exponents=spectrum["exponents"],
        single_exponents=singles,
        flow="native",
        dtype=str(jnp.dtype(dtype)),
        measure="g (both: token scales and means dropped, |dg| measured)",
        note="quick: short horizon" if quick else "",
    )


def _arpack_extremes(core, x, k, tol):
    """The reference: the `k` smallest and largest eigenvalues of the tangent Hessian in
    `g` at `x`, by scipy's `eigsh` on a `LinearOperator` over a jitted JVP."""
    import scipy.sparse.linalg as spla

    inverse_clock = 1.0 / jnp.broadcast_to(core.clock(x, None), x.shape)

    @jax.jit
    def apply(v, shift):
        w = v.reshape(x.shape)
        dx = core.tangent_projection(x, w, None)
        jx = jax.jvp(lambda z: core.residual(z, None), (x,), (dx * inverse_clock,))[1]
        out = core.tangent_projection(x, jx, None)
        return (out + shift * (w - core.tangent_projection(x, w, None))).reshape(-1)

    def operator(shift):
        matvec = lambda v: np.asarray(apply(jnp.asarray(v, x.dtype).ravel(), shift))  # noqa: E731
        return spla.LinearOperator((x.size, x.size), matvec=matvec, dtype=np.float64)

    v0 = np.random.default_rng(0).standard_normal(x.size)
    radius = spla.eigsh(operator(0.0), k=1, which="LM", tol=1e-3, v0=v0, return_eigenvectors=False)
    shift = 2.0 * float(np.abs(radius[0])) + 1.0
    ncv = min(x.size - 1, max(2 * k + 1, 40))
    return [
        np.sort(
            spla.eigsh(
                operator(s), k=k, which=w, tol=tol, v0=v0, ncv=ncv, return_eigenvectors=False
            )
        )
        for w, s in (("SA", shift), ("LA", -shift))
    ]


def _tangent_hessian(core, x0, quick):
    dtype, tol, newton_tol, _, _ = _precision()
    k, eigen_tol = K[quick], 1e-10 if dtype == jnp.float64 else 1e-5
    x = _fixed_point(core, x0, tol, newton_tol).x

    def ours():
        out = analysis.hessian_eigenvalues(core, x, k=k, method="lanczos", eigen_tol=eigen_tol)
        return [out.smallest, out.largest]

    measured = {}
    for name, run in (
        ("krylov_schur", ours),
        ("arpack", lambda: _arpack_extremes(core, x, k, eigen_tol)),
    ):
        run()  # warm: each side's compilations paid before it is timed
        measured[name] = _timed(run)
    (values, ours_s), (reference, arpack_s) = measured["krylov_schur"], measured["arpack"]
    ratio = ours_s / arpack_s
    difference = max(float(np.max(np.abs(a - b))) for a, b in zip(values, reference))
    return row(
        FAMILY,
        f"tangent Hessian, {k} smallest and largest, Lanczos",
        value=ratio,
        unit="x (Krylov-Schur time / ARPACK's)",
        reference="scipy eigsh (ARPACK) on the same operator, a jitted JVP per product",
        goal="<= 1x",
        met=None if quick else ratio <= 1.0,
        krylov_schur_s=ours_s,
        arpack_s=arpack_s,
        smallest=values[0],
        largest=values[1],
        max_difference=difference,
        unknowns=int(x.size),
        dtype=str(jnp.dtype(dtype)),
        note="quick: k = 2" if quick else "",
    )


def _basin_grid(core, x0, quick):
    dtype, _, _, _, _ = _precision()
    side = GRID[quick]
    # the plane through the two samples (at a = 0 and a = 1) and a random direction of
    # the same size
    u = x0[1] - x0[0]
    v = jax.random.normal(jax.random.key(0), u.shape, u.dtype)
    v = v * jnp.linalg.norm(u) / jnp.linalg.norm(v)
    starts, _, _ = analysis.grid_starts(x0[0], u, v, extent=(-0.5, 1.5), resolution=side)
    with CompileCounter() as counter, counter.counting():
        start = time.perf_counter()
        result = analysis.basins(
            core,
            jnp.asarray(starts, dtype),
            options=analysis.BASIN_OPTIONS.replace(solver="tsit5", rtol=1e-5, atol=1e-7),
            settings=analysis.BasinSettings(
                fixed_point_atol=1e-4, distance_tol=1e-2, polish_max=1, k=2
            ),
        )
        seconds = time.perf_counter() - start
    # compilations (or persistent-cache reads) of the solve's program
    solve_compiles = sum("solve_core" in str(name) for _, name in counter.events[BACKEND_COMPILE])
    ratio = result["one_by_one_iterations"] / result["batched_iterations"]
    return row(
        FAMILY,
        f"basin grid, {side} x {side} starts",
        value=ratio,
        unit="x (one-by-one / batched sequential iterations)",
        reference="the same starts solved one by one (the sum of their steps)",
        goal="one compilation of the batched solve",
        met=solve_compiles == 1,
        batched_iterations=result["batched_iterations"],
        one_by_one_iterations=result["one_by_one_iterations"],
        solve_compilations=solve_compiles,
        seconds=seconds,
        attractors=len(result["attractors"]),
        starts=side * side,
        not_converged=result["not_converged"],
        dtype=str(jnp.dtype(dtype)),
        note="quick: 8 x 8 grid" if quick else "",
    )


def _stiff_field(n):
    """`u'' + lambda (1 + u)^2` on `n` interior points of (0, 1), and `L^-1` (the
    Laplacian's tridiagonal solve) as the preconditioner of its Jacobian."""
    h = 1.0 / (n + 1)

    def field(u, lam, args):
        padded = jnp.pad(u, 1)
        return (padded[:-2] - 2 * u + padded[2:]) / h**2 + lam * (1 + u) ** 2

    def inverse_laplacian(v, u, lam, args):
        off = jnp.full(v.shape, 1 / h**2, v.dtype)
        diagonal = jnp.full(v.shape, -2 / h**2, v.dtype)
        lower, upper = off.at[0].set(0.0), off.at[-1].set(0.0)
        return jax.lax.linalg.tridiagonal_solve(lower, diagonal, upper, v[:, None])[:, 0]

    return field, inverse_laplacian


def _stiff_continuation(quick):
    dtype = _precision()[0]
    n = STIFF_POINTS[quick]
    field, inverse_laplacian = _stiff_field(n)
    tol = 1e-8 if dtype == jnp.float64 else 1e-4  # above the grid's rounding floor
    newton = analysis.NewtonSettings(newton_tol=tol)
    settings = analysis.ContinuationSettings(ds=0.1, ds_max=0.5, k=4, max_points=14)
    runs = {}
    for name, run_settings in (
        (
            "matrix_free",
            settings.replace(
                spectrum="nearest_zero", newton=newton.replace(preconditioner=inverse_laplacian)
            ),
        ),
        ("dense", settings.replace(newton=newton.replace(matrix_free=False))),
    ):
        jax.clear_caches()
        start = time.perf_counter()
        branch = analysis.continuation(
            field, jnp.zeros(n, dtype), 0.0, p_span=(0.0, 3.0), settings=run_settings
        )
        folds = [b["p"] for b in branch["bifurcations"] if b["kind"] == "fold"]
        runs[name] = dict(
            seconds=time.perf_counter() - start,
            points=len(branch["p"]),
            fold=folds[0] if folds else None,
            stop_reason=branch["stop_reason"],
        )
    per_point = {name: r["seconds"] / r["points"] for name, r in runs.items()}
    ratio = per_point["matrix_free"] / per_point["dense"]
    folds = [runs[name]["fold"] for name in runs]
    return row(
        FAMILY,
        f"stiff continuation, {n} unknowns, preconditioned matrix-free",
        value=ratio,
        unit="x (time per point / dense time per point)",
        reference="the dense path (jacfwd, LU, eig) on the same field and settings",
        goal="< 1x",
        met=ratio < 1.0,
        matrix_free=runs["matrix_free"],
        dense=runs["dense"],
        fold_difference=None if None in folds else abs(folds[0] - folds[1]),
        unknowns=n,
        dtype=str(jnp.dtype(dtype)),
        note="quick: 300 points" if quick else "",
    )


BRATU_N = 20  # interior points of the Bratu-Gelfand problem
CURVE_POINTS = (40, 12)  # two-parameter curve points at most (full, quick)


def _bratu(u, lam, args):
    """`u'' + lam exp(u / (1 + eps u)) = 0`, `u(0) = u(1) = 0` on `BRATU_N` points."""
    h = 1.0 / (BRATU_N + 1)
    pad = jnp.pad(u, 1)
    return (pad[2:] - 2 * u + pad[:-2]) / h**2 + lam * jnp.exp(u / (1 + args["eps"] * u))


def _bratu_fold_numpy(z, eps):
    """The fold's extended system `(f, J v, |v|^2 - 1)` in `z = (u, v, lambda)`, numpy."""
    n, h = BRATU_N, 1.0 / (BRATU_N + 1)
    u, v, lam = z[:n], z[n:-1], z[-1]
    source = np.exp(u / (1 + eps * u))
    lap = (np.diag(np.ones(n - 1), 1) - 2 * np.eye(n) + np.diag(np.ones(n - 1), -1)) / h**2
    jac = lap + lam * np.diag(source / (1 + eps * u) ** 2)
    return np.concatenate([lap @ u + lam * source, jac @ v, [v @ v - 1]])


def _set_eps(args, eps):
    return {**args, "eps": eps}


def _timed(function):
    start = time.perf_counter()
    out = function()
    return out, time.perf_counter() - start


def _curve_row(name, follow, reference, reference_name, quick):
    """A two-parameter curve row: `follow()` from cold (caches cleared) and again warm;
    `reference(curve) -> (p per point, seconds)` at the curve's `q`."""
    jax.clear_caches()
    curve, cold = _timed(follow)
    _, warm = _timed(follow)
    p_ref, seconds = reference(curve)
    p, q = np.asarray(curve["p"], float), np.asarray(curve["q"], float)
    return row(
        FAMILY,
        name,
        value=warm / seconds,
        unit="x (warm time / scipy time)",
        reference=reference_name,
        goal="<= 1x",
        met=warm <= seconds,
        note=""
        if warm <= seconds
        else (
            "a few unknowns: per-point dispatch of the compiled steps (tangent, corrector, "
            "eigenvalues, test functions) against MINPACK's compiled loop; the curve adds "
            "arclength through turns, every point's eigenvalues and the codim-2 points"
        ),
        cold_seconds=cold,
        warm_seconds=warm,
        scipy_seconds=seconds,
        points=len(q),
        codim2=[point["kind"] for point in curve["codim2"]],
        max_difference_to_scipy=float(np.max(np.abs(p - p_ref))),
        quick=quick,
    )


def _natural_continuation(system, z, qs, extra: tuple, entry: int):
    """scipy `fsolve` on `system(z, q, *extra) = 0` at each `q` in turn, each from the
    one before (differences for the Jacobian): `z[entry]` at each, and the seconds."""
    import scipy.optimize

    start, found = time.perf_counter(), []
    for q in np.asarray(qs, float):
        z = scipy.optimize.fsolve(system, z, args=(q, *extra), xtol=1e-12)
        found.append(z[entry])
    return np.array(found), time.perf_counter() - start


def _fold_curve_row(quick):
    """The Bratu-Gelfand fold followed in `eps` (0.2 to 0.24, short of the cusp, where a
    natural-parameter reference would turn back) against scipy `fsolve` on the fold's
    extended system at each `eps` the curve reached, each started from the one before
    (its Jacobian by differences: the loop a user writes by hand)."""

    args = {"eps": jnp.asarray(0.2)}
    branch = analysis.continuation(
        _bratu,
        jnp.zeros(BRATU_N),
        0.0,
        p_span=(0.0, 6.0),
        args=args,
        settings=analysis.ContinuationSettings(ds=0.2, ds_max=1.0),
    )
    fold = next(b for b in branch["bifurcations"] if b["kind"] == "fold")

    def follow():
        return analysis.fold_continuation(
            _bratu,
            fold,
            0.2,
            second=_set_eps,
            q_span=(0.2, 0.24),
            args=args,
            settings=analysis.ContinuationSettings(
                ds=0.005, ds_max=0.005, max_points=CURVE_POINTS[bool(quick)]
            ),
        )

    def reference(curve):
        x0 = np.asarray(curve["x"][0], float)
        v0 = np.linalg.svd(np.asarray(jax.jacfwd(lambda u: _bratu(u, fold["p"], args))(x0)))[2][-1]
        z = np.concatenate([x0, v0, [float(curve["p"][0])]])
        return _natural_continuation(_bratu_fold_numpy, z, curve["q"], (), -1)

    return _curve_row(
        "fold curve, Bratu-Gelfand (20 points) in eps",
        follow,
        reference,
        "scipy fsolve on the fold's extended system at each eps reached (natural "
        "continuation, differences for the Jacobian)",
        quick,
    )


def run(problem, opts) -> list[dict]:
    # float64 whatever the process's setting: the branches' Newton tolerances and the
    # Bratu-Gelfand fold need it (in float32 the fold row's branch finds no fold).
    with jax.enable_x64(True):
        return _rows(problem, opts)


def _rows(problem, opts) -> list[dict]:
    dtype = _precision()[0]
    core, x0 = analysis.cast((problem.core, problem.x0[:2]), dtype)
    return [
        _continuation(core, x0[0], opts.quick),
        _spectrum(core, x0[0], opts.quick),
        _tangent_hessian(core, x0[0], opts.quick),
        _basin_grid(core, x0, opts.quick),
        _stiff_continuation(opts.quick),
        _fold_curve_row(opts.quick),
    ]
