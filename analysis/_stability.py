"""Stability of a state: the Riemannian Hessian of E on the LayerNorm manifold, and a
finite-time Lyapunov exponent.

The operator is the Jacobian of the residual `G = P_T(g) dE/dg` (the derivative of the
projection included) restricted to the tangent space of the manifold that the projected
flow keeps, applied by JVPs of `model.residual`. The native field's Jacobian is *not*
used: it misses the curvature term of the constraint and shows positive eigenvalues at
true minima (DESIGN.md, section 3).

Coordinates. A tangent displacement `dx` (per token: mean zero, orthogonal to
`x_A - mean_A`) moves `g` by exactly `dg_A = c_A dx_A` with `c_A = gamma / s_A`, the
token's clock. With `H` the Riemannian Hessian in `g` (symmetric on the tangent space),
`dG = H dg = H C dx`, and the projected flow linearises to
`tau d(dx)/dt = -H C dx`. So

- `coordinates="g"`: the eigenvalues of `H` (the curvature of `E` on the manifold,
  independent of the clocks);
- `coordinates="x"`: the eigenvalues of `C^(1/2) H C^(1/2)` (similar to `H C`), which
  divided by `tau` are the decay rates of the linearised projected flow.

Both have the same signs (Sylvester's law of inertia), hence the same Morse index.

The normal directions (per token the mean and the direction of `x_A - mean_A`, and
every direction of a clamped token) are excluded by construction: the operator acts on
coordinates in an orthonormal basis of the tangent space only (`N_free (D - 2)`
dimensions), built per token by a complete QR factorisation of `[1/sqrt(D), u_A]`.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse.linalg as spla

from et_ode import solvers

from ._common import cast, float64_available
from ._plotting import figure, finish
from ._records import metadata

DENSE_MAX = 2000  # N * D up to which the dense Jacobian is the default


def _free_tokens(args, n_tokens):
    clamped = getattr(args, "clamped", None)
    if clamped is None:
        return np.ones(n_tokens, bool)
    return ~np.asarray(clamped, bool)


def tangent_basis(x, free=None) -> np.ndarray:
    """An orthonormal basis of the tangent space of the LayerNorm manifold at `x: [N, D]`
    per free token: `[F, D, D - 2]` (`F` free tokens), each token's columns orthogonal
    to the constant vector and to `x_A - mean_A`."""
    x = np.asarray(x, np.float64)
    n_tokens, dim = x.shape
    free = np.ones(n_tokens, bool) if free is None else np.asarray(free, bool)
    centred = x - x.mean(axis=-1, keepdims=True)
    u = centred / np.linalg.norm(centred, axis=-1, keepdims=True)
    normal = np.stack([np.full((n_tokens, dim), 1.0 / np.sqrt(dim)), u], axis=-1)
    q, _ = np.linalg.qr(normal, mode="complete")  # [N, D, D]
    return q[free][..., 2:]


@eqx.filter_jit
def _apply(model, x, args, basis, free_index, pre, post, y):
    """`y: [F, D-2]` tangent coordinates -> the operator applied, same shape."""
    w = jnp.zeros_like(x).at[free_index].set(jnp.einsum("fdk,fk->fd", basis, y))
    dx = w * pre[:, None]
    jx = jax.jvp(lambda x_: model.residual(x_, args), (x,), (dx,))[1]
    return jnp.einsum("fdk,fd->fk", basis, (jx * post[:, None])[free_index])


@eqx.filter_jit
def _apply_columns(model, x, args, basis, free_index, pre, post, columns):
    return jax.vmap(lambda y: _apply(model, x, args, basis, free_index, pre, post, y))(columns)


class _Operator:
    """The tangent-restricted Hessian (in `g` or `x` coordinates) as a matrix-free map
    on flat float64 vectors of length `F (D - 2)`."""

    def __init__(self, model, x, args, coordinates):
        self.model, self.x, self.args = model, x, args
        n_tokens, dim = x.shape
        free = _free_tokens(args, n_tokens)
        self.shape_y = (int(free.sum()), dim - 2)
        self.size = self.shape_y[0] * self.shape_y[1]
        self.basis = jnp.asarray(tangent_basis(x, free), x.dtype)
        self.free_index = jnp.asarray(np.flatnonzero(free))
        clock = np.asarray(model.norm.gamma / model.norm.scale(x), np.float64)  # c_A
        if coordinates == "g":
            pre, post = 1.0 / clock, np.ones_like(clock)
        elif coordinates == "x":
            pre, post = clock**-0.5, clock**0.5
        else:
            raise ValueError(f"coordinates must be 'g' or 'x' (got {coordinates!r}).")
        self.pre, self.post = jnp.asarray(pre, x.dtype), jnp.asarray(post, x.dtype)
        self.clock = clock

    def matvec(self, v):
        y = jnp.asarray(np.reshape(v, self.shape_y), self.x.dtype)
        out = _apply(self.model, self.x, self.args, self.basis, self.free_index, self.pre,
                     self.post, y)
        return np.asarray(out, np.float64).reshape(np.shape(v))

    def dense(self):
        eye = jnp.eye(self.size, dtype=self.x.dtype).reshape((self.size,) + self.shape_y)
        rows = _apply_columns(self.model, self.x, self.args, self.basis, self.free_index,
                              self.pre, self.post, eye)
        return np.asarray(rows, np.float64).reshape(self.size, self.size).T


def hessian_eigenvalues(model, x, args=None, *, coordinates="g", k=6, method="auto",
                        dense_max=DENSE_MAX, lanczos_tol=1e-10, seed=0) -> dict:
    """Leading eigenvalues of the tangent-restricted Riemannian Hessian at `x: [N, D]`.

    **Arguments:**

    - `model`, `x`, `args`: an `et_ode.EnergyTransformer` (computed in float64: cast
      here), one state and its conditions.
    - `coordinates`: `"g"` or `"x"` (see the module docstring).
    - `k`: how many of the smallest and of the largest eigenvalues to return.
    - `method`: `"dense"` (materialise the `F (D-2)` square matrix by JVPs, `eigh`),
      `"lanczos"` (scipy `eigsh` on a `LinearOperator` wrapping a jitted JVP) or
      `"auto"` (dense when `N D <= dense_max`).
    - `lanczos_tol`: `eigsh` tolerance; `seed`: its starting vector.

    **Returns:** a dict: `smallest [k]`, `largest [k]` (ascending), `all` (every
    eigenvalue, dense only, else `None`), `morse_index` (count of eigenvalues below
    `-zero_tol`), `morse_index_is_lower_bound` (Lanczos with all `k` smallest
    negative), `zero_tol`, `n_near_zero`, `asymmetry` (dense: relative size of the
    antisymmetric part, a check), `dimension` (tangent dimension), `n_normal_excluded`,
    `method`, `coordinates`, `clock` (`gamma / s_A` per token).
    """
    model64, x64, args64 = cast((model, jnp.asarray(x), args), jnp.float64)
    op = _Operator(model64, x64, args64, coordinates)
    n_tokens, dim = x64.shape
    if method == "auto":
        method = "dense" if n_tokens * dim <= dense_max else "lanczos"
    k = int(min(k, op.size))
    result = dict(method=method, coordinates=coordinates, dimension=op.size,
                  n_normal_excluded=n_tokens * dim - op.size, clock=op.clock)
    if method == "dense" or op.size <= k + 1:
        matrix = op.dense()
        antisym = np.linalg.norm(matrix - matrix.T) / max(np.linalg.norm(matrix), 1e-300)
        values = np.linalg.eigvalsh(0.5 * (matrix + matrix.T))
        smallest, largest, lower_bound = values[:k], values[-k:], False
        result.update(all=values, asymmetry=float(antisym), method="dense")
    elif method == "lanczos":
        linop = spla.LinearOperator((op.size, op.size), matvec=op.matvec, dtype=np.float64)
        v0 = np.random.default_rng(seed).standard_normal(op.size)
        smallest = np.sort(spla.eigsh(linop, k=k, which="SA", tol=lanczos_tol, v0=v0,
                                      return_eigenvectors=False))
        largest = np.sort(spla.eigsh(linop, k=k, which="LA", tol=lanczos_tol, v0=v0,
                                     return_eigenvectors=False))
        values = np.concatenate([smallest, largest])
        lower_bound = bool(np.all(smallest < 0))
        result.update(all=None, asymmetry=None)
    else:
        raise ValueError(f"method must be 'auto', 'dense' or 'lanczos' (got {method!r}).")
    zero_tol = 1e-9 * max(float(np.max(np.abs(values))), 1e-300)
    counted = result["all"] if result["all"] is not None else smallest
    result.update(
        smallest=smallest, largest=largest, zero_tol=zero_tol,
        morse_index=int(np.sum(counted < -zero_tol)),
        morse_index_is_lower_bound=lower_bound,
        n_near_zero=int(np.sum(np.abs(counted) <= zero_tol)),
    )
    return result


class _Variational(eqx.Module):
    """The flow and its variational equation as one energy system on `[2N, D]`: the
    first N rows are the state, the last N a perturbation carried by the JVP of the
    vector field. Lets `solvers.solve` integrate the linearised flow along a solution."""

    model: object
    n_tokens: int = eqx.field(static=True)

    def energy(self, y, args):
        return self.model.energy(y[: self.n_tokens], args)

    def vector_field(self, t, y, args, flow):
        x, dx = y[: self.n_tokens], y[self.n_tokens:]
        f, df = jax.jvp(lambda x_: self.model.vector_field(t, x_, args, flow), (x,), (dx,))
        return jnp.concatenate([f, df])

    def residual(self, y, args):
        x = y[: self.n_tokens]
        return jnp.concatenate([self.model.residual(x, args), jnp.zeros_like(x)])


@eqx.filter_jit
def _tangent_normalise(model, x, dx, args):
    """Project `dx` onto the tangent space at `x`; scale it so that `|dg| = 1`. Returns
    the perturbation and `|dg|` before scaling."""
    dx = model.tangent_projection(x, dx, args)
    size = jnp.linalg.norm(jax.jvp(model.norm, (x,), (dx,))[1])
    return dx / size, size


def lyapunov_exponent(model, x, args=None, *, flow="projected", t1=20.0, segments=20,
                      seed=0, solver="tsit5", rtol=1e-10, atol=1e-12, dt0=None,
                      max_steps=20000) -> dict:
    """Finite-time Lyapunov exponent of the flow from `x: [N, D]`, in float64.

    A random tangent perturbation `dx` (seeded) is carried with the state by the
    variational equation `d(dx)/dt = J(x) dx` (a JVP of the vector field), integrated by
    `solvers.solve` over `segments` equal pieces of `[0, t1]`. After each piece `dx` is
    projected onto the tangent space (token means and scales, which do not change `g`,
    are dropped) and renormalised so that the perturbation of `g`, `|dg| = |M dx|`,
    is 1; the exponent is `sum(log growth) / t1` (units 1/tau, measured in `g`).
    `solver`, `rtol`, `atol`, `dt0`, `max_steps`: the `solvers.solve` options (`rtol =
    atol = None` with a `dt0`: constant steps, the exponent of that discrete map).

    **Returns:** a dict: `exponent`, `local` (per-segment rates `[segments]`),
    `times` (segment ends), `flow`, `t1`, `segments`, `seed`, `solver`, `rtol`, `atol`,
    `coordinates` (`"g"`: growth of `dg`).
    """
    model64, x64, args64 = cast((model, jnp.asarray(x), args), jnp.float64)
    n_tokens = x64.shape[0]
    system = _Variational(model64, n_tokens)
    dx = jax.random.normal(jax.random.key(seed), x64.shape, x64.dtype)
    dx, _ = _tangent_normalise(model64, x64, dx, args64)
    edges = np.linspace(0.0, float(t1), int(segments) + 1)
    steps = {} if dt0 is None else dict(dt0=dt0)
    logs = []
    for start, end in zip(edges[:-1], edges[1:]):
        y = jnp.concatenate([x64, dx])
        sol = solvers.solve(system, y, args=args64, t0=start, t1=end, solver=solver,
                            rtol=rtol, atol=atol, flow=flow, max_steps=max_steps, **steps)
        x64, dx = sol.x_final[:n_tokens], sol.x_final[n_tokens:]
        dx, growth = _tangent_normalise(model64, x64, dx, args64)
        logs.append(float(jnp.log(growth)))
    logs = np.asarray(logs)
    return dict(exponent=float(logs.sum() / float(t1)), local=logs / np.diff(edges),
                times=edges[1:], flow=flow, t1=float(t1), segments=int(segments),
                seed=int(seed), solver=solver, rtol=rtol, atol=atol, dt0=dt0,
                coordinates="g")


def stability(model, x_star, args=None, flow="projected", *, coordinates="g", k=6,
              method="auto", dense_max=DENSE_MAX, lyapunov_time=20.0, lyapunov_segments=20,
              seed=0, lanczos_tol=1e-10, lyapunov_options=None) -> dict:
    """Stability of an end state `x_star: [N, D]` (typically a fixed point).

    The Riemannian Hessian of `E` on the LayerNorm manifold, restricted to the tangent
    space (see the module docstring for the operator, the coordinates and how the
    normal directions are excluded), by a dense Jacobian for small problems or Lanczos
    (scipy `eigsh`) otherwise, in float64; and a finite-time Lyapunov exponent of `flow`
    from `x_star` (`lyapunov_time=None` skips it).

    **Arguments:** as `hessian_eigenvalues` and `lyapunov_exponent`; `flow` is the flow
    whose Lyapunov exponent is measured and whose linear rates are reported;
    `lyapunov_options`: solver options of `lyapunov_exponent` (`solver`, `rtol`, `atol`,
    `dt0`, `max_steps`; default its tsit5 at rtol 1e-10).

    **Returns:** a dict with the `hessian_eigenvalues` entries; `rates_smallest`
    (`coordinates="x"` only: `smallest / tau`, the decay rates of the linearised
    projected flow, 1/tau units); `residual_rms` (RMS of G at `x_star`: near zero at a
    fixed point); `energy`; `lyapunov` (a `lyapunov_exponent` dict or `None`); `flow`;
    `tau`; and `metadata`.
    """
    x_star = jnp.asarray(x_star)
    if x_star.ndim != 2:
        raise ValueError(f"stability takes one state [N, D]; got shape {tuple(x_star.shape)}.")
    result = hessian_eigenvalues(model, x_star, args, coordinates=coordinates, k=k,
                                 method=method, dense_max=dense_max,
                                 lanczos_tol=lanczos_tol, seed=seed)
    tau = float(getattr(model, "tau", 1.0))
    result["rates_smallest"] = result["smallest"] / tau if coordinates == "x" else None
    model64, x64, args64 = cast((model, x_star, args), jnp.float64)
    result["residual_rms"] = float(solvers.rms(model64.residual(x64, args64)))
    result["energy"] = float(model64.energy(x64, args64))
    result["lyapunov"] = None
    if lyapunov_time is not None:
        result["lyapunov"] = lyapunov_exponent(
            model, x_star, args, flow=flow, t1=lyapunov_time, segments=lyapunov_segments,
            seed=seed, **(lyapunov_options or {}))
    result.update(flow=flow, tau=tau, metadata=metadata(
        study="stability", dtype=np.float64 if float64_available() else np.float32,
        seeds=dict(lanczos_and_lyapunov=seed), flow=flow, coordinates=coordinates,
        method=result["method"], k=k, float64=float64_available(),
    ))
    return result


def plot_stability(result: dict, path=None):
    """Eigenvalues of the tangent Hessian (all of them when dense, else the `k` smallest
    and largest), sorted, with negative ones marked; and the Lyapunov exponent's local
    rates over time. Returns the `Figure`."""
    fig, axes = figure(2, 1)
    ax = axes[0, 0]
    values = result["all"] if result.get("all") is not None else np.concatenate(
        [result["smallest"], result["largest"]])
    values = np.sort(np.asarray(values, float))
    index = np.arange(values.size)
    negative = values < -result["zero_tol"]
    ax.plot(index[~negative], values[~negative], "o", ms=3, label="non-negative")
    ax.plot(index[negative], values[negative], "o", ms=4, color="tab:red",
            label=f"negative (Morse index {result['morse_index']})")
    ax.axhline(0.0, color="0.5", lw=0.8)
    ax.set_yscale("symlog", linthresh=max(1e-3, float(np.min(np.abs(values))) or 1e-3))
    ax.set_xlabel("eigenvalue index (sorted)")
    ax.set_ylabel(f"Hessian eigenvalue ({result['coordinates']} coords)")
    ax.set_title(f"tangent Hessian, {result['method']}")
    ax.legend(fontsize=7)
    ax = axes[0, 1]
    lyap = result.get("lyapunov")
    if lyap is not None:
        ax.plot(lyap["times"], lyap["local"], "-o", ms=3)
        ax.axhline(lyap["exponent"], color="tab:red", ls="--",
                   label=f"FTLE {lyap['exponent']:.3g} / tau")
        ax.set_xlabel("time (tau)")
        ax.set_ylabel("local growth rate of |dg| (1/tau)")
        ax.set_title(f"Lyapunov, {lyap['flow']} flow")
        ax.legend(fontsize=7)
    else:
        ax.set_axis_off()
    return finish(fig, path)
