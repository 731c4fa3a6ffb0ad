"""Hopf points followed in two parameters: the curve in `(p, q)` along which a steady
state of `f(x, p, args)` has a pair of eigenvalues `+-i omega` on the imaginary axis,
with its Bogdanov-Takens, Bautin (generalised Hopf), zero-Hopf and double-Hopf points
located.

The Hopf curve is the branch of zeros of the minimally augmented system (Govaerts,
*Numerical Methods for Bifurcations of Dynamical Equilibria*, SIAM 2000, ch. 4;
Kuznetsov, *Elements of Applied Bifurcation Theory*, 3rd ed., section 10.2)

    H(x, p, kappa; q) = (f(x, p, args(q)), G_i1(x, p, kappa, q), G_i2(x, p, kappa, q)),

in the `n + 2` unknowns `(x, p, kappa)`, where `G` (`2 x 2`) solves the bordered system

    [ J^2 + kappa I   B ] [V]   [0 ]
    [ C^T             0 ] [G] = [I2],       J = df/dx at (x, p, q),

with `B`, `C` (`[n, 2]`) fixed orthonormal bases of the left and right null spaces of
`J^2 + kappa I` at the start. `J^2 + kappa I` has a two-dimensional null space, and `G
= 0`, exactly where `J` has eigenvalues `+-i sqrt(kappa)` (`kappa > 0`: a Hopf point,
frequency `omega = sqrt(kappa)`) or `+-sqrt(-kappa)` (`kappa < 0`: a neutral saddle, the
curve's continuation past a Bogdanov-Takens point). Two of `G`'s four entries suffice:
those whose rows, with `f`'s, make the system's Jacobian best conditioned at the start
(chosen again wherever the borders are re-seeded). `continuation` follows `H`'s zeros in
`q`, as `fold_continuation` follows a fold's (the same re-seeding of the borders where
the null spaces turn from them: the cosine is the smallest singular value of `C^T V`,
`V` orthonormalised, and of `B^T W`).

Along the curve:

- **Bogdanov-Takens point**: `kappa` passes through zero (the pair meets at zero and
  turns real). Located by Newton on `(f, G_i1, G_i2) = 0` with `kappa = 0` in
  `(x, p, q)`; its normal form `a`, `b` as on a fold curve (`fold_continuation`).
- **Bautin (generalised Hopf) point**: the first Lyapunov coefficient `l1 = Re(c1) /
  omega` (as `continuation`'s Hopf records have it, unit `q`) passes through zero: the
  Hopf bifurcation turns from super- to subcritical and a fold of cycles is born.
  Located by the Illinois method on `l1` along the curve (each iterate corrected onto
  it: Newton through `l1`'s third derivatives compiles slowly), with the second
  Lyapunov coefficient `l2 = Re(c2) / omega` there, `c2 = G32 / 12` of the normal form
  `z' = i omega z + c1 z |z|^2 + c2 z |z|^4` (Kuznetsov, SIAM J. Numer. Anal. 36, 1999:
  `h20`, `h11`, `h30`, `h21`, `h31`, `h22` of the centre manifold, then `G32`; the
  multilinear forms up to the fifth derivative are nested JVPs, `_multilinear`).
  `l2 < 0`: on the subcritical side of the point the unstable cycle born at each Hopf
  point lies inside a stable one, the two meeting in a fold of cycles.
- **zero-Hopf point**: a real eigenvalue besides the pair passes through zero (the curve
  crosses a fold curve). Located by Newton on `(f, G_i1, G_i2, g) = 0` in `(x, p, kappa,
  q)` with `g` the fold's bordered test function (`fold_continuation`).
- **double-Hopf point**: a second complex pair crosses the imaginary axis. Located by
  Gauss-Newton on `(f, G_i1, G_i2, G') = 0` in `(x, p, kappa, q, kappa')`, `G'` the
  `2 x 2` bordered solution of `J^2 + kappa' I` for the second pair; both frequencies
  reported.

The last three are looked for where the curve is a Hopf curve (`kappa > 0` at both ends
of a step), and a Bautin point not in a step where a real eigenvalue crosses zero (there
`l1` passes through infinity, `h11 = -J^-1 B(q, conj q)`). Dense only, as fold curves:
states of more than `FOLD_DENSE_MAX` entries are refused.
"""

import math
from collections.abc import Callable
from typing import Any, Literal, cast

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jax.typing import DTypeLike

from et_ode import solvers

from ._continuation import Field, check_field_shape, default_tol, dtype_of, is_float
from ._fold_curve import (
    FOLD_DENSE_MAX,
    RECORD_RESIDUAL,
    _At,
    _Curve,
    _Problem,
    _sorted_eigenvalues,
    bogdanov_takens_coefficients,
    check_settings,
    curve_options,
    pair_crossings,
    zero_hopf_normal_form,
)
from ._multilinear import multilinear
from ._normal_forms import forms_at, second_lyapunov

# At the start the pair nearest the imaginary axis has a real part at most this fraction
# of its modulus: else the record is not a Hopf point of this field at q0.
HOPF_GAP = 1e-3
# The records a Hopf curve starts from: continuation's Hopf points, a fold curve's
# zero-Hopf points (where a Hopf curve crosses it) and Bogdanov-Takens points (where one
# starts; kappa = 0 there), and a Hopf curve's double-Hopf points (the other pair's).
START_KINDS = ("hopf", "zero_hopf", "bogdanov_takens", "double_hopf")
# The Illinois iterations that locate a Bautin point on its bracket at most.
BAUTIN_ITERATIONS = 40


def _pair_system(problem: _Problem, y, p, q, kappa, args, B, C):
    """`(J, V, G, W)` at `(y, p, q, kappa)`: `J = df/dx` (`[n, n]`) and the bordered
    solutions of `J^2 + kappa I` with borders `B`, `C` (`[n, 2]`): `V` (`[n, 2]`),
    `G` (`[2, 2]`) and the transposed system's `W` (`[n, 2]`)."""
    n = y.size
    jac = problem.jacobian(y, p, q, args)
    square = jac @ jac + kappa * jnp.eye(n, dtype=y.dtype)
    bordered = jnp.block([[square, B], [C.T, jnp.zeros((2, 2), y.dtype)]])
    rhs = jnp.concatenate([jnp.zeros((n, 2), y.dtype), jnp.eye(2, dtype=y.dtype)])
    right = jnp.linalg.solve(bordered, rhs)
    left = jnp.linalg.solve(bordered.T, rhs)
    return jac, right[:n], right[n:], left[:n]


def _augmented(z, q, packed):
    """`H(z; q)` (module docstring) of `z = (x flat, p, kappa)`: the field followed by
    `continuation`; `packed = (problem, args, B, C, pick)`, `pick` (`[2]`) the entries
    of `G` (flattened) that are kept."""
    problem, args, B, C, pick = packed
    y, p, kappa = z[:-2], z[-2], z[-1]
    _, _, G, _ = _pair_system(problem, y, p, q, kappa, args, B, C)
    return jnp.concatenate([problem.f(y, p, q, args), G.ravel()[pick]])


def _eigenvectors(jac, kappa, V, W):
    """The unit right eigenvector `q` for `i omega` (`omega = sqrt(kappa)`) and the left
    one `w` with `<w, q> = conj(w) . q = 1`, from the bordered bases `V`, `W` of
    `J^2 + kappa I`'s null spaces: for `v` in the right one `q = v - i J v / omega`, for
    `u` in the left one `w = u + i J^T u / omega`."""
    omega = jnp.sqrt(kappa)
    v, u = V[:, 0], W[:, 0]
    q = v - 1j * (jac @ v) / omega
    q = q / jnp.linalg.norm(q)
    w = u + 1j * (jac.T @ u) / omega
    return q, w / jnp.conj(jnp.vdot(w, q))


def _first_lyapunov(problem: _Problem, y, p, q, kappa, args, jac, V, W):
    """`l1 = Re(c1) / omega` at a point of the curve (`kappa > 0`), `c1 = <w, C(q, q,
    conj q) + B(conj q, h20) + 2 B(q, h11)> / 2` (`_hopf`'s module docstring); NaN
    where `kappa <= 0`."""
    positive = kappa > 0
    kappa_ = jnp.where(positive, kappa, 1.0)
    omega = jnp.sqrt(kappa_)
    qv, wv = _eigenvectors(jac, kappa_, V, W)
    f = lambda z: problem.f(z, p, q, args)  # noqa: E731
    n = y.size
    complex_dtype = qv.dtype
    h20 = jnp.linalg.solve(
        2j * omega * jnp.eye(n, dtype=complex_dtype) - jac, multilinear(f, y, qv, qv)
    )
    h11 = -jnp.linalg.solve(jac, jnp.real(multilinear(f, y, qv, jnp.conj(qv))))
    total = (
        multilinear(f, y, qv, qv, jnp.conj(qv))
        + multilinear(f, y, jnp.conj(qv), h20)
        + 2.0 * multilinear(f, y, qv, h11.astype(complex_dtype))
    )
    l1 = 0.5 * jnp.real(jnp.vdot(wv, total)) / omega
    return jnp.where(positive, l1, jnp.nan)


def _orthonormal(basis):
    return jnp.linalg.qr(basis)[0]


@eqx.filter_jit
def _point_data(problem, y, p, q, kappa, args, B, C):
    """At a point of the curve: `df/dx`, the cosines between the null spaces and the
    borders (the smallest singular values of `C^T V` and `B^T W`, both orthonormal),
    and `l1`."""
    jac, V, _, W = _pair_system(problem, y, p, q, kappa, args, B, C)
    cosines = jnp.stack(
        [
            jnp.linalg.svd(C.T @ _orthonormal(V), compute_uv=False)[-1],
            jnp.linalg.svd(B.T @ _orthonormal(W), compute_uv=False)[-1],
        ]
    )
    return jac, cosines, _first_lyapunov(problem, y, p, q, kappa, args, jac, V, W)


def _root(system, u0, tol, max_steps: int):
    """Newton on the square `system(u) = 0` from `u0`: `(u, RMS there, converged)`."""
    solver: optx.Newton = optx.Newton(rtol=tol, atol=tol, norm=optx.rms_norm)
    solution: optx.Solution = optx.root_find(
        lambda u, _: system(u), solver, u0, max_steps=max_steps, throw=False
    )
    u = solution.value
    residual = jnp.sqrt(jnp.mean(system(u) ** 2))
    return u, residual, solution.result == optx.RESULTS.successful


@eqx.filter_jit
def _locate_bogdanov_takens(problem, u0, args, B, C, pick, tol, max_steps: int):
    """Newton on `(f, G_pick) = 0` with `kappa = 0` in `u = (x flat, p, q)`."""

    def system(u):
        y, p, q = u[:-2], u[-2], u[-1]
        zero = jnp.zeros((), u.dtype)
        _, _, G, _ = _pair_system(problem, y, p, q, zero, args, B, C)
        return jnp.concatenate([problem.f(y, p, q, args), G.ravel()[pick]])

    return _root(system, u0, tol, max_steps)


@eqx.filter_jit
def _onto_curve(problem, u0, d, args, B, C, pick, tol, max_steps: int):
    """Newton on `(f, G_pick, d . (u - u0)) = 0` in `u = (x flat, p, kappa, q)`: the
    point of the curve on the hyperplane through `u0` normal to `d`."""

    def system(u):
        y, p, kappa, q = u[:-3], u[-3], u[-2], u[-1]
        _, _, G, _ = _pair_system(problem, y, p, q, kappa, args, B, C)
        along = jnp.dot(u - u0, d)
        return jnp.concatenate([problem.f(y, p, q, args), G.ravel()[pick], along[None]])

    return _root(system, u0, tol, max_steps)


@eqx.filter_jit
def _locate_zero_hopf(problem, u0, args, B, C, pick, b, c, tol, max_steps: int):
    """Newton on `(f, G_pick, g) = 0` in `u = (x flat, p, kappa, q)`, `g` the fold's
    bordered test function with borders `b`, `c` (`[n]`)."""

    def system(u):
        y, p, kappa, q = u[:-3], u[-3], u[-2], u[-1]
        _, _, G, _ = _pair_system(problem, y, p, q, kappa, args, B, C)
        _, g, _ = problem.null_vectors(y, p, q, args, b, c)
        return jnp.concatenate([problem.f(y, p, q, args), G.ravel()[pick], g[None]])

    return _root(system, u0, tol, max_steps)


@eqx.filter_jit
def _locate_double_hopf(problem, u0, args, B, C, pick, B2, C2, tol, max_steps: int):
    """Gauss-Newton on `(f, G_pick, G') = 0` in `u = (x flat, p, kappa, q, kappa')`,
    `G'` (`[2, 2]`) the bordered solution of `J^2 + kappa' I` with borders `B2`, `C2`."""

    def system(u, _):
        y, p, kappa, q, kappa2 = u[:-4], u[-4], u[-3], u[-2], u[-1]
        _, _, G, _ = _pair_system(problem, y, p, q, kappa, args, B, C)
        _, _, G2, _ = _pair_system(problem, y, p, q, kappa2, args, B2, C2)
        return jnp.concatenate([problem.f(y, p, q, args), G.ravel()[pick], G2.ravel()])

    solver: optx.GaussNewton = optx.GaussNewton(rtol=tol, atol=tol, norm=optx.rms_norm)
    solution: optx.Solution = optx.least_squares(
        system, solver, u0, max_steps=max_steps, throw=False
    )
    u = solution.value
    residual = jnp.sqrt(jnp.mean(system(u, None) ** 2))
    return u, residual, solution.result == optx.RESULTS.successful


@eqx.filter_jit
def _full_jacobian(problem, u, args, B, C):
    """The Jacobian (`[n + 4, n + 3]`) of `(f, G flattened)` in `u = (x flat, p, kappa,
    q)`: which two of `G`'s rows make the augmented system best conditioned."""

    def system(u):
        y, p, kappa, q = u[:-3], u[-3], u[-2], u[-1]
        _, _, G, _ = _pair_system(problem, y, p, q, kappa, args, B, C)
        return jnp.concatenate([problem.f(y, p, q, args), G.ravel()])

    return jax.jacfwd(system)(u)


def null_space_bases(jac, kappa: float) -> tuple[np.ndarray, np.ndarray]:
    """`(left, right)`: orthonormal bases (`[n, 2]`) of the left and right null spaces
    of `J^2 + kappa I` (its two smallest singular vectors; float64)."""
    jac = np.asarray(jac, np.float64)
    u, _, vt = np.linalg.svd(jac @ jac + kappa * np.eye(len(jac)))
    return u[:, -2:], vt[-2:].T


class _HopfCurve(_Curve):
    """The Hopf curve's problem and settings: `_Curve.follow` on `H` (unknowns `z = (x
    flat, p, kappa)`, a point `u = (z, q)`), each point measured, and a codimension-two
    point located."""

    augmented = staticmethod(_augmented)

    def split(self, u):
        """`(y, p, kappa, q)` of a point `u`, cast."""
        return self.cast(u[:-3], u[-3], u[-2], u[-1])

    def start_borders(self, u, jac):
        """`(B, C, pick)` at `u` (`jac = df/dx` there): bases of the null spaces of `J^2
        + kappa I`, and the two entries of `G` that make the augmented system's Jacobian
        best conditioned there."""
        left, right = null_space_bases(jac, float(u[-2]))
        B, C = self.cast(left, right)
        full = np.asarray(
            _full_jacobian(self.problem, jnp.asarray(u, self.dtype), self.args, B, C),
            np.float64,
        )
        n = len(jac)
        best, pick = -1.0, (0, 3)
        for i in range(4):
            for j in range(i + 1, 4):
                rows = np.concatenate([full[:n], full[[n + i, n + j]]])
                sigma = np.linalg.svd(rows, compute_uv=False)[-1]
                if sigma > best:
                    best, pick = sigma, (i, j)
        return B, C, jnp.asarray(pick, jnp.int32)

    def reseed(self, point: dict):
        return self.start_borders(point["u"], point["jac"])

    def measure(self, u, borders) -> dict:
        B, C, _ = borders
        y, p, kappa, q = self.split(u)
        jac, cosines, l1 = _point_data(self.problem, y, p, q, kappa, self.args, B, C)
        return dict(
            u=np.asarray(u, np.float64),
            jac=np.asarray(jac, np.float64),
            cosines=np.asarray(cosines, np.float64),
            l1=float(l1),
            borders=borders,
        )

    def record(self, kind, at, i, weight, points, located, residual) -> dict:
        """A codimension-two point's record at `at = (x flat, p, kappa, q)`."""
        n = at.size - 3
        return dict(
            kind=kind,
            p=float(at[n]),
            q=float(at[n + 2]),
            x=np.asarray(at[:n]).reshape(self.problem.shape),
            index=int(i),
            located=located,
            residual_rms=float(residual),
            s=float((1 - weight) * points[i]["s"] + weight * points[i + 1]["s"]),
            frequency=_frequency(at[n + 1]),
        )

    @staticmethod
    def located(u, converged, ends, guess) -> bool:
        """Whether Newton's `u` locates the point: converged, finite, and no farther from
        `guess` than the step that bracketed it."""
        return bool(
            converged
            and np.all(np.isfinite(u))
            and np.linalg.norm(u - guess) <= np.linalg.norm(ends[1] - ends[0])
        )

    def bracket(self, i: int, points, weight: float):
        ends = points[i]["u"], points[i + 1]["u"]
        return ends, (1 - weight) * ends[0] + weight * ends[1]

    def jacobian_at(self, u):
        y, p, kappa, q = self.split(u)
        return np.asarray(self.problem.jacobian(y, p, q, self.args), np.float64)

    def bogdanov_takens(self, i: int, points) -> dict:
        """The Bogdanov-Takens point where `kappa` changes sign between `i` and `i + 1`."""
        k0, k1 = points[i]["u"][-2], points[i + 1]["u"][-2]
        weight = k0 / (k0 - k1)
        ends, guess = self.bracket(i, points, weight)
        B, C, pick = points[i]["borders"]
        u0, tol = self.cast(np.delete(guess, -2), self.tol)
        u, residual, converged = _locate_bogdanov_takens(
            self.problem, u0, self.args, B, C, pick, tol, self.max_newton
        )
        u = np.insert(np.asarray(u, np.float64), -1, 0.0)
        located = self.located(u, converged, ends, guess)
        record = self.record(
            "bogdanov_takens", u if located else guess, i, weight, points, located, residual
        )
        if located:
            jac = self.jacobian_at(u)
            y, p, _, q = self.split(u)
            record["eigenvalues"] = _sorted_eigenvalues(jac)
            forms = _At(self.problem, y, p, q, self.args)
            record["a"], record["b"] = bogdanov_takens_coefficients(forms, jac)
        return record

    def bautin(self, i: int, points) -> dict:
        """The Bautin point where `l1` changes sign between `i` and `i + 1`: a zero of
        `l1` along the curve, by the Illinois method on the chord between the two
        points (each iterate corrected onto the curve on the hyperplane normal to the
        chord), to `tol` in the chord's length; its normal form there."""
        ends = points[i]["u"], points[i + 1]["u"]
        chord = ends[1] - ends[0]
        borders = points[i]["borders"]
        B, C, pick = borders
        (lo, f_lo), (hi, f_hi) = (0.0, points[i]["l1"]), (1.0, points[i + 1]["l1"])
        u, residual, located, theta, kept = ends[0], np.inf, False, 0.0, 0
        d, tol = self.cast(chord, self.tol)
        for _ in range(BAUTIN_ITERATIONS):
            previous = theta
            theta = lo - f_lo * (hi - lo) / (f_hi - f_lo)
            start = self.cast(ends[0] + theta * chord)[0]
            out, res, converged = _onto_curve(
                self.problem, start, d, self.args, B, C, pick, tol, self.max_newton
            )
            if not bool(converged) or not np.all(np.isfinite(np.asarray(out))):
                located = False
                break
            u, residual, located = np.asarray(out, np.float64), float(res), True
            value = self.measure(u, borders)["l1"]
            if value == 0 or abs(theta - previous) * np.linalg.norm(chord) <= self.tol:
                break
            # Illinois: the end kept twice running has its value halved
            if np.sign(value) == np.sign(f_lo):
                lo, f_lo = theta, value
                f_hi, kept = (0.5 * f_hi if kept == 1 else f_hi), 1
            else:
                hi, f_hi = theta, value
                f_lo, kept = (0.5 * f_lo if kept == -1 else f_lo), -1
        else:
            located = False
        located = located and bool(u[-2] > 0)
        guess = ends[0] + theta * chord
        record = self.record("bautin", u if located else guess, i, theta, points, located, residual)
        if located:
            jac = self.jacobian_at(u)
            y, p, _, q = self.split(u)
            record["eigenvalues"] = _sorted_eigenvalues(jac)
            normal_form = second_lyapunov(
                forms_at(self.problem, y, p, q, self.args), jac, record["frequency"]
            )
            record["second_lyapunov_coefficient"] = normal_form["l2"]
            record["normal_form"] = normal_form
        return record

    def zero_hopf(self, i: int, points, values) -> dict:
        """The zero-Hopf point where the real eigenvalue `values` (at `i`, `i + 1`)
        changes sign."""
        weight = values[0] / (values[0] - values[1])
        ends, guess = self.bracket(i, points, weight)
        B, C, pick = points[i]["borders"]
        b, c = self.borders(points[i]["jac"])
        u0, tol = self.cast(guess, self.tol)
        u, residual, converged = _locate_zero_hopf(
            self.problem, u0, self.args, B, C, pick, b, c, tol, self.max_newton
        )
        u = np.asarray(u, np.float64)
        located = self.located(u, converged, ends, guess) and bool(u[-2] > 0)
        at = u if located else guess
        record = self.record("zero_hopf", at, i, weight, points, located, residual)
        if located:
            jac = self.jacobian_at(u)
            y, p, _, q = self.split(u)
            record["eigenvalues"] = _sorted_eigenvalues(jac)
            record["normal_form"] = zero_hopf_normal_form(
                self.problem, (y, p, q, self.args), jac, record["frequency"]
            )
        return record

    def double_hopf(self, i: int, points, crossing) -> dict:
        """The double-Hopf point where a second pair (`crossing`: its member with a
        positive imaginary part at `i`, `i + 1`) crosses the imaginary axis."""
        weight = crossing[0].real / (crossing[0].real - crossing[1].real)
        ends, guess = self.bracket(i, points, weight)
        omega2 = (1 - weight) * crossing[0].imag + weight * crossing[1].imag
        B, C, pick = points[i]["borders"]
        left, right = null_space_bases(points[i]["jac"], float(crossing[0].imag ** 2))
        u0, tol, B2, C2 = self.cast(np.append(guess, omega2**2), self.tol, left, right)
        u, residual, converged = _locate_double_hopf(
            self.problem, u0, self.args, B, C, pick, B2, C2, tol, 2 * self.max_newton
        )
        u = np.asarray(u, np.float64)
        located = self.located(u[:-1], converged, ends, guess) and bool(u[-3] > 0 and u[-1] > 0)
        at = u[:-1] if located else guess
        record = self.record("double_hopf", at, i, weight, points, located, residual)
        second = u[-1] if located else omega2**2
        record["frequencies"] = (record["frequency"], _frequency(second))
        if located:
            record["eigenvalues"] = _sorted_eigenvalues(self.jacobian_at(at))
        return record


def _frequency(kappa) -> float:
    """`sqrt(kappa)`, zero for `kappa <= 0` (a Bogdanov-Takens point, a neutral saddle)."""
    return float(math.sqrt(max(float(kappa), 0.0)))


def _pair_indices(values, kappa: float) -> np.ndarray:
    """The two eigenvalues the curve tracks: those whose squares are nearest `-kappa`."""
    return np.argsort(np.abs(values**2 + kappa), kind="stable")[:2]


def _others(point: dict) -> np.ndarray:
    """`df/dx`'s eigenvalues at a point, the tracked pair left out."""
    values = _sorted_eigenvalues(point["jac"])
    return np.delete(values, _pair_indices(values, float(point["u"][-2])))


def _real_crossings(others: list[np.ndarray]) -> list[tuple[int, np.ndarray]]:
    """`(i, [value at i, value at i + 1])` where a real eigenvalue among `others` passes
    through zero between points `i` and `i + 1`: the product of the real ones changes
    sign (complex pairs would add positive factors), and the real one nearest zero at
    each end is the crossing one. (LAPACK gives a real matrix's real eigenvalues an
    imaginary part of exactly zero.)"""

    def sign_and_nearest(values):
        real = values.real[values.imag == 0]
        if not real.size:
            return 1.0, np.nan
        return float(np.prod(np.sign(real))), float(real[np.argmin(np.abs(real))])

    found = []
    for i in range(len(others) - 1):
        (sign0, value0), (sign1, value1) = (sign_and_nearest(v) for v in others[i : i + 2])
        if sign0 * sign1 < 0 and value0 * value1 <= 0:
            found.append((i, np.array([value0, value1])))
    return found


def _result(curve: _HopfCurve, points: list[dict], stop) -> dict:
    """`hopf_continuation`'s result from the curve's measured points."""
    u = np.stack([point["u"] for point in points])
    kappa, l1 = u[:, -2], np.array([point["l1"] for point in points])
    hopf = kappa[:-1] > 0
    hopf &= kappa[1:] > 0
    others = [_others(point) for point in points]
    real = [(i, values) for i, values in _real_crossings(others) if hopf[i]]
    codim2 = [
        curve.bogdanov_takens(int(i), points) for i in np.flatnonzero(kappa[:-1] * kappa[1:] < 0)
    ]
    codim2 += [curve.zero_hopf(i, points, values) for i, values in real]
    near_zero_hopf = {i for i, _ in real}
    codim2 += [
        curve.bautin(int(i), points)
        for i in np.flatnonzero(
            hopf & np.isfinite(l1[:-1]) & np.isfinite(l1[1:]) & (l1[:-1] * l1[1:] < 0)
        )
        if int(i) not in near_zero_hopf
    ]
    codim2 += [
        curve.double_hopf(i, points, crossing) for i, crossing in pair_crossings(others) if hopf[i]
    ]
    shape = curve.problem.shape
    return dict(
        p=u[:, -3].astype(curve.dtype),
        q=u[:, -1].astype(curve.dtype),
        x=u[:, :-3].reshape((len(u),) + shape).astype(curve.dtype),
        kappa=kappa.astype(curve.dtype),
        frequency=np.where(kappa > 0, np.sqrt(np.abs(kappa)), np.nan).astype(curve.dtype),
        first_lyapunov=l1.astype(curve.dtype),
        **curve.summary(points, stop, codim2, "hopf_continuation"),
    )


def _start_kappa(jac, record: dict, p0: float, q0: float) -> float:
    """`kappa` at the start: the square of the frequency of the pair of `jac` nearest
    the imaginary axis (at a double-Hopf point, of the pair nearest the record's second
    frequency: the other Hopf curve through it), or 0 at a Bogdanov-Takens point (where
    `J^2` has a two-dimensional null space); refused where there is neither."""
    where = f"df/dx at p = {p0:.6g}, q0 = {q0:g}"
    kind = record["kind"]
    if kind == "bogdanov_takens":
        sigma = np.linalg.svd(jac @ jac, compute_uv=False)
        if not sigma[-2] <= HOPF_GAP * max(1.0, float(sigma[0])):
            raise ValueError(
                f"{where} has no double zero eigenvalue (the two smallest singular values "
                f"of its square {sigma[-1]:.3g} and {sigma[-2]:.3g}): not a "
                "Bogdanov-Takens point of this field, or not a located one."
            )
        return 0.0
    values = _sorted_eigenvalues(jac)
    scale = max(1.0, float(np.max(np.abs(values))))
    pairs = values[values.imag > 1e-8 * scale]
    if kind == "double_hopf" and pairs.size:
        if "frequencies" not in record:
            raise ValueError("the double_hopf record has no 'frequencies': pass it as found.")
        pairs = pairs[[np.argmin(np.abs(pairs - 1j * float(record["frequencies"][1])))]]
    nearest = pairs[np.argmin(np.abs(pairs.real))] if pairs.size else None
    if nearest is None or not abs(nearest.real) <= HOPF_GAP * abs(nearest):
        found = "no complex pair" if nearest is None else f"the nearest pair {nearest:.4g}"
        raise ValueError(
            f"{where} has no pair of eigenvalues on the imaginary axis ({found}): not a "
            "Hopf point of this field, or not a located one."
        )
    return float(nearest.imag) ** 2


def _check_record(hopf, field, second) -> None:
    if callable(getattr(field, "vector_field", None)):
        raise ValueError(
            "hopf_continuation takes a field f(x, p, args) -> dx/dt: an energy model's "
            "flows descend its energy, so their Jacobians have real eigenvalues at a steady "
            "state and no Hopf point (follow its folds with fold_continuation)."
        )
    if not callable(field):
        raise TypeError(
            f"hopf_continuation takes a field f(x, p, args) -> dx/dt (got {type(field).__name__})."
        )
    if not callable(second):
        raise TypeError(
            "second must be a function (args, q) -> args that sets the second parameter "
            f"(got {type(second).__name__})."
        )
    kind = hopf.get("kind") if isinstance(hopf, dict) else type(hopf).__name__
    if kind not in START_KINDS:
        raise ValueError(
            "hopf_continuation starts from a 'hopf' record of continuation's bifurcations, "
            "a 'zero_hopf' or 'bogdanov_takens' point of fold_continuation or "
            f"hopf_continuation, or a 'double_hopf' point of hopf_continuation (got {kind!r})."
        )
    for key in ("x", "p"):
        if key not in hopf:
            raise ValueError(f"the {kind} record has no {key!r}: pass the record as found.")
    if not np.all(np.isfinite(np.asarray(hopf["x"], float))) or not np.isfinite(float(hopf["p"])):
        raise ValueError(f"the {kind} record holds NaN or inf: pass the record as found.")


def hopf_continuation(
    field: solvers.EnergySystem | Field,
    hopf: dict,
    q0: float,
    *,
    second: Callable[..., Any],
    q_span: tuple[float, float],
    args: Any = None,
    ds: float = 0.01,
    ds_min: float = 1e-8,
    ds_max: float = 0.1,
    direction: Literal[1, -1] = 1,
    max_points: int = 1000,
    tol: float | None = None,
    max_newton: int = 10,
    max_turn: float = 0.5,
    state_weight: float = 1.0,
    dtype: DTypeLike | None = None,
) -> dict:
    """Follow the Hopf point `hopf` of `field`'s steady states in a second parameter
    `q`: the curve in `(p, q)` where the steady state has a pair `+-i omega` on the
    imaginary axis, with its Bogdanov-Takens, Bautin, zero-Hopf and double-Hopf points
    located (module docstring).

    **Arguments:**

    - `field`: `f(x, p, args) -> dx/dt`, the field `continuation` found the Hopf point
      on (`x` of any shape, at most `FOLD_DENSE_MAX` entries). Energy models are
      refused: their flows have no Hopf points.
    - `hopf`: a `"hopf"` record of `continuation(field, ...)["bifurcations"]`, or a
      `"zero_hopf"` or `"bogdanov_takens"` point of `fold_continuation(field,
      ...)["codim2"]` (or of a Hopf curve's; with `q0` its `q`); also read back from
      JSON. Its `x` and `p` start the curve, and the pair of `df/dx` nearest the
      imaginary axis there its `omega` (zero from a Bogdanov-Takens point: `direction`
      then chooses between the Hopf side and the neutral saddles). A `"double_hopf"`
      point of a Hopf curve starts the other Hopf curve through it (the pair of its
      second frequency).
    - `q0`, `second`, `q_span`, `args`: as for `fold_continuation`: `second(args, q) ->
      args` sets the second parameter (traced: one compilation serves the curve),
      `q_span = (low, high)` holds `q0`, and the curve stops at its first point outside.
    - `ds`, `ds_min`, `ds_max`, `direction` (`+1`: towards larger `q`), `max_points`,
      `tol`, `max_newton`, `max_turn`, `state_weight`, `dtype`: as for `continuation`,
      in the unknowns `(x, p, kappa)` with `q` the parameter (`p` and `kappa` counted
      as state entries in the arclength).

    **Returns:** a dict: `p [m]`, `q [m]`, `x [m, *shape]` (the steady state), `kappa
    [m]` (`omega^2`; negative where the curve has become a neutral saddle past a
    Bogdanov-Takens point), `frequency [m]` (`sqrt(kappa)`, NaN where `kappa <= 0`),
    `first_lyapunov [m]` (`l1 = Re(c1) / omega`, unit right eigenvector: negative, the
    Hopf bifurcation there is supercritical; NaN where `kappa <= 0`), `s [m]`
    (arclength), `eigenvalues [m, n]` (of `df/dx`, complex, largest real part first),
    `border_cosines [m, 2]`, `residual_rms [m]`, `newton_iterations [m]`; `codim2`: a
    list of dicts in arclength order with `kind` (`"bogdanov_takens"`, `"bautin"`,
    `"zero_hopf"`, `"double_hopf"`), `p`, `q`, `x`, `frequency`, `index`, `s`,
    `located`, `residual_rms`, `eigenvalues` (as on a fold curve), and: `a`, `b`
    (Bogdanov-Takens), `second_lyapunov_coefficient` and `normal_form` (`l1`, `l2`,
    `c1`, `c2`; Bautin), `normal_form` (`G200`, `G011`, `G110`, `s`, `theta`, `q0`,
    `q1`; zero-Hopf, as on a fold curve), `frequencies` (both pairs'; double Hopf);
    `stop_reason` (as `continuation`'s: `"closed"` where the curve has come back round
    to its start, followed once), `stall`, `metadata`.
    """
    _check_record(hopf, field, second)
    check_settings(q0, q_span, max_points, tol, max_newton)
    x_hopf = np.asarray(hopf["x"])
    dtype = dtype_of(x_hopf, dtype)
    args = jax.tree.map(lambda v: jnp.asarray(v, dtype) if is_float(v) else v, args)
    shape, n = x_hopf.shape, x_hopf.size
    if n > FOLD_DENSE_MAX:
        raise ValueError(
            f"hopf_continuation forms df/dx densely: the state has {n} entries, above "
            f"FOLD_DENSE_MAX = {FOLD_DENSE_MAX}; matrix-free Hopf curves are not built."
        )
    if n < 2:
        raise ValueError("a Hopf point needs a state of at least 2 entries.")
    tol = default_tol(dtype) if tol is None else float(tol)
    check_field_shape(field, jnp.asarray(x_hopf, dtype), float(hopf["p"]), args)
    problem = _Problem(field=cast(Callable[..., Any], field), second=second, shape=shape)
    y0 = jnp.asarray(x_hopf.ravel(), dtype)
    p0, q0_ = jnp.asarray(float(hopf["p"]), dtype), jnp.asarray(float(q0), dtype)
    residual = float(jnp.sqrt(jnp.mean(problem.f(y0, p0, q0_, args) ** 2)))
    if not residual <= RECORD_RESIDUAL * tol:
        raise ValueError(
            f"the {hopf['kind']} point at p = {float(p0):.6g} is not a steady state of "
            f"this field at q0 = {float(q0):g} (RMS of f there {residual:.3g}, tol "
            f"{tol:.3g}): pass the record found on this field, with its args and q0."
        )
    jac = np.asarray(problem.jacobian(y0, p0, q0_, args), np.float64)
    kappa0 = _start_kappa(jac, hopf, float(p0), float(q0))
    u0 = np.concatenate([np.asarray(y0, np.float64), [float(p0), kappa0, float(q0)]])
    curve = _HopfCurve(problem, args, dtype, tol, max_newton)
    options = curve_options(
        p_span=q_span,
        ds=ds,
        ds_min=ds_min,
        ds_max=ds_max,
        tol=tol,
        max_newton=max_newton,
        max_turn=max_turn,
        state_weight=state_weight,
        dtype=dtype,
    )
    borders = curve.start_borders(u0, jac)
    points, stop = curve.follow(u0[:-1], float(q0), borders, direction, max_points, options)
    return _result(curve, points, stop)
