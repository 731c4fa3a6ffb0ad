"""The spectrum of a fixed point of any energy system: the eigenvalues of the Riemannian
Hessian (the Jacobian of the residual `G` restricted to the tangent space of the model's
geometry, `analysis._geometry`), applied by JVPs of `model.residual`; dense below
`solvers.DENSE_MAX` state entries, Lanczos above (the generic room's one eigen-solver,
`_eigen`: Krylov-Schur on the symmetric operator, which is thick-restart Lanczos).

Coordinates. With `C` the model's clock (the ET: `gamma / s_A` per token; 1 for a model
without one), `coordinates="g"` gives the eigenvalues of `H` (the curvature of `E` on the
manifold) and `coordinates="x"` those of `C^(1/2) H C^(1/2)` (similar to `H C`), which
divided by `tau` are the decay rates of the linearised projected flow; both have the same
signs (Sylvester's law of inertia), hence the same Morse index. The normal directions are
excluded: the dense method works in an orthonormal basis of the projection's range;
Lanczos works on the operator plus a shift on the normal space that moves those
directions past the end of the spectrum it looks for.
"""

import dataclasses
import math
from typing import Any, Literal, Protocol, runtime_checkable

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float

from et_ode import solvers

from .._common import cast
from .._geometry import TangentOperator, clock, require, tangent_dimension
from .._results import Result
from . import _eigen as eigen

State = Float[Array, "N D"]  # one state, as in `solvers.EnergySystem`


# The coordinates of a spectrum (module docstring) and the methods that compute it.
Coordinates = Literal["g", "x"]


Method = Literal["auto", "dense", "lanczos"]


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class HessianSpectrum(Result):
    """The extreme eigenvalues of the tangent-restricted Riemannian Hessian at one state
    (`hessian_eigenvalues`), in `coordinates`; also a read-only mapping of its keys
    (`spectrum["smallest"] is spectrum.smallest`)."""

    smallest: np.ndarray
    """`[k]`: the smallest eigenvalues, ascending."""
    largest: np.ndarray
    """`[k]`: the largest eigenvalues, ascending."""
    all: np.ndarray | None
    """Every eigenvalue, ascending (dense only; `None` with Lanczos)."""
    asymmetry: float
    """`|A - A^T|_F / |A|_F` of the operator: exact when dense, from three random pairs
    with Lanczos; near rounding at a fixed point of a gradient system, of order one where
    `residual` is not the gradient of an energy (the symmetric part whose spectrum is
    returned is then no Hessian)."""
    method: str
    """`"dense"` or `"lanczos"`."""
    dimension: int | None
    """The tangent dimension (`None` where Lanczos cannot know it and the model does not
    say)."""
    morse_index_is_lower_bound: bool
    """Lanczos with all `k` smallest negative: there may be more negative ones."""
    coordinates: str
    """`"g"` or `"x"` (module docstring)."""
    zero_tol: float
    """`1e-9` times the largest magnitude known: eigenvalues within it count as zero."""
    morse_index: int
    """The eigenvalues below `-zero_tol` (among the `k` smallest with Lanczos)."""
    n_near_zero: int
    """The eigenvalues within `zero_tol` of 0 (among the same)."""
    n_normal_excluded: int | None
    """The normal directions left out (`None` where `dimension` is)."""
    geometry: str
    """`"manifold"` or `"flat"`."""
    clock: np.ndarray | float
    """The model's clock (per token on the ET: `[N]`; 1 without one)."""
    clock_range: list | np.ndarray
    """`[min, max]` of the clock."""


@runtime_checkable
class ResidualSystem(Protocol):
    """All that `hessian_eigenvalues` needs of a model: its residual `G` (the optional
    geometry and metric of `analysis._geometry` are used where it has them)."""

    def residual(self, x: State, args: Any) -> State: ...


def tangent_basis(
    x: Float[ArrayLike, "N D"], free: Bool[ArrayLike, " N"] | None = None
) -> Float[np.ndarray, "F D D-2"]:
    """An orthonormal basis of the ET's tangent space (LayerNorm manifold) at `x: [N, D]`
    per free token: `[F, D, D - 2]` (`F` free tokens), each token's columns orthogonal
    to the constant vector and to `x_A - mean_A` (by a complete QR factorisation). The
    studies build their basis from the model's own projection instead; this is the
    closed form, kept for users of the ET."""
    x = np.asarray(x, np.float64)
    n_tokens, dim = x.shape
    free = np.ones(n_tokens, bool) if free is None else np.asarray(free, bool)
    centred = x - x.mean(axis=-1, keepdims=True)
    u = centred / np.linalg.norm(centred, axis=-1, keepdims=True)
    normal = np.stack([np.full((n_tokens, dim), 1.0 / np.sqrt(dim)), u], axis=-1)
    q, _ = np.linalg.qr(normal, mode="complete")  # [N, D, D]
    return q[free][..., 2:]


# The Krylov-Schur tolerance of the coarse spectral radius behind the normal shift.
RADIUS_TOL = 1e-3


def _start(op: TangentOperator, seed: int):
    """The Krylov start vector: standard normal, seeded (`[size]`, float64)."""
    return jnp.asarray(np.random.default_rng(seed).standard_normal(op.size), jnp.float64)


def _extremes(op: TangentOperator, k: int, which: str, seed: int, tol: float, **shifted):
    """The `k` eigenvalues of `op` (shifted as `TangentOperator.krylov_steps`) largest in
    `which` (`_eigen.WANTED`), by Lanczos (`_eigen.eigenpairs`, symmetric), ascending."""
    values, _ = eigen.eigenpairs(
        k,
        which=which,
        symmetric=True,
        steps=op.krylov_steps(eigen.arnoldi_steps, **shifted),
        start=_start(op, seed),
        krylov=_krylov_vectors(k, op.size),
        tol=tol,
    )
    return np.sort(np.asarray(values, np.float64))


def _normal_shift(op: TangentOperator, seed: int) -> float:
    """A value past both ends of `op`'s spectrum (twice its spectral radius, by a
    coarse Lanczos, plus 1): added on the normal space, it moves those directions (its
    eigenvalue 0) out of the way of the tangent spectrum's extremes."""
    radius = float(np.max(np.abs(_extremes(op, 1, "magnitude", seed, RADIUS_TOL))))
    return 2.0 * radius + 1.0


def _krylov_vectors(k: int, size: int) -> int:
    """Lanczos vectors kept between restarts: at least 40. ARPACK's default,
    `max(2k + 1, 20)`, restarted so often on the ET's spectra (condition numbers in the
    hundreds) that it needed about twice the operator applications (measured: the
    benchmarks page, "Lanczos vectors")."""
    return int(min(size - 1, max(2 * k + 1, 40)))


def _asymmetry(op: TangentOperator, seed: int, probes: int = 3) -> float:
    """`|A - A^T|_F / |A|_F` of `op`'s operator `A`, estimated matrix-free from `probes`
    pairs of standard normal vectors `u, v` (two products each): the mean of
    `(u^T A v - v^T A u)^2` is `|A - A^T|_F^2` and that of `|A v|^2` is `|A|_F^2`."""
    apply = op.linear_operator().matvec
    rng = np.random.default_rng(seed + 1)
    antisymmetric, total = 0.0, 0.0
    for _ in range(probes):
        u, v = rng.standard_normal((2, op.size))
        au, av = apply(u), apply(v)
        antisymmetric += float(u @ av - v @ au) ** 2
        total += 0.5 * float(au @ au + av @ av)
    return math.sqrt(antisymmetric / max(total, 1e-300))


def _spectrum(op: TangentOperator, k, method, eigen_tol, seed, dimension) -> dict:
    """Eigenvalues of `op`: `smallest [k]`, `largest [k]`, `all` (dense) and the rest of
    `hessian_eigenvalues`' entries that depend on the method."""
    if method == "dense":
        matrix, basis = op.dense()
        antisym = np.linalg.norm(matrix - matrix.T) / max(float(np.linalg.norm(matrix)), 1e-300)
        values = eigen.eigenpairs(None, which="leftmost", symmetric=True, matrix=matrix)[0]
        k = min(k, values.size)
        return dict(
            smallest=values[:k],
            largest=values[-k:],
            all=values,
            asymmetry=float(antisym),
            method="dense",
            dimension=int(basis.shape[1]),
            morse_index_is_lower_bound=False,
        )
    if method != "lanczos":
        raise ValueError(f"method must be 'auto', 'dense' or 'lanczos' (got {method!r}).")
    # normal directions (eigenvalue 0 of op) moved past each end of the spectrum
    shift = 0.0 if op.flat else _normal_shift(op, seed)
    k = int(min(k, (dimension or op.size) - 1, op.size - 2))
    smallest = _extremes(op, k, "leftmost", seed, eigen_tol, shift=shift)
    largest = _extremes(op, k, "real", seed, eigen_tol, shift=-shift)
    return dict(
        smallest=smallest,
        largest=largest,
        all=None,
        asymmetry=_asymmetry(op, seed),
        method="lanczos",
        dimension=dimension,
        morse_index_is_lower_bound=bool(np.all(smallest < 0)),
    )


def smallest_eigenvalue_magnitude(model, x, args, coordinates, seed, tol=1e-6) -> float:
    """`min |lambda|` over the tangent spectrum, where Lanczos' extremes do not reach it
    (all `k` smallest negative): the smallest eigenvalue of the operator squared, the
    normal directions shifted past the largest (Lanczos to `tol` of the square's
    norm)."""
    op = TangentOperator(model, x, args, coordinates)
    shift = 0.0 if op.flat else _normal_shift(op, seed)
    value = _extremes(op, 1, "leftmost", seed, tol, shift=shift**2, squared=True)
    return float(np.sqrt(max(float(value[0]), 0.0)))


def hessian_eigenvalues(
    model: ResidualSystem,
    x: Float[ArrayLike, "N D"],
    args: Any = None,
    *,
    coordinates: Coordinates = "g",
    k: int = 6,
    method: Method = "auto",
    dense_max: int = solvers.DENSE_MAX,
    eigen_tol: float = 1e-10,
    seed: int = 0,
) -> HessianSpectrum:
    """Leading eigenvalues of the tangent-restricted Riemannian Hessian at `x`.

    **Arguments:**

    - `model`: any `solvers.EnergySystem` (needs `residual`; its geometry as in
      `analysis._geometry`: a manifold where it declares `tangent_projection`, else
      flat; its `clock` where it has one), computed in float64 (cast here); `x` one
      state (`[N, D]` for the ET), `args` its conditions.
    - `coordinates`: `"g"` or `"x"` (see the module docstring).
    - `k`: how many of the smallest and of the largest eigenvalues to return.
    - `method`: `"dense"` (materialise the operator by JVPs in an orthonormal basis of
      the tangent space, `eigh`), `"lanczos"` (Krylov-Schur on the symmetric operator,
      its products jitted JVPs in one compiled loop: `analysis.landscape._eigen`) or
      `"auto"` (dense when `x.size <= dense_max`).
    - `eigen_tol`: Lanczos' tolerance, on a Ritz pair's residual relative to the
      operator's norm; `seed`: its starting vector.

    **Protocol:** `residual` (refused up front without it); optional: the manifold's
    `tangent_projection`, `clock`, `tangent_dimension`.

    **Returns:** a `HessianSpectrum` (its fields say what each holds).
    """
    require(model, "hessian_eigenvalues")
    model64, x64, args64 = cast((model, jnp.asarray(x), args), jnp.float64)
    op = TangentOperator(model64, x64, args64, coordinates)
    if method == "auto":
        method = "dense" if x64.size <= dense_max else "lanczos"
    result = _spectrum(op, int(k), method, eigen_tol, seed, tangent_dimension(model64, x64, args64))
    values = (
        result["all"]
        if result["all"] is not None
        else np.concatenate([result["smallest"], result["largest"]])
    )
    zero_tol = 1e-9 * max(float(np.max(np.abs(values))), 1e-300)
    counted = result["all"] if result["all"] is not None else result["smallest"]
    own_clock = np.asarray(clock(model64, x64, args64), np.float64)
    dimension = result["dimension"]
    result.update(
        coordinates=coordinates,
        zero_tol=zero_tol,
        morse_index=int(np.sum(counted < -zero_tol)),
        n_near_zero=int(np.sum(np.abs(counted) <= zero_tol)),
        n_normal_excluded=None if dimension is None else op.size - dimension,
        geometry="flat" if op.flat else "manifold",
        clock=own_clock.reshape(-1)
        if own_clock.ndim == 2 and own_clock.shape[1] == 1
        else own_clock,
        clock_range=[float(op.clock.min()), float(op.clock.max())],
    )
    return HessianSpectrum(**result)
