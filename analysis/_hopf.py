"""The normal form of a Hopf point: whether the periodic orbit born there is stable, and
its shape, size and period near the point.

At a Hopf point `(x*, p*)` of `dx/dt = f(x, p)` the Jacobian `A = df/dx` has a simple
pair `+-i omega`. With `A q = i omega q` (`|q| = 1`, Euclidean over the flattened state)
and `A^T w = -i omega w`, `<w, q> = conj(w) . q = 1`, the flow on the centre manifold
`x = x*(p) + 2 Re(z q) + Re(h20 z^2) + h11 |z|^2 + O(|z|^3)` is, to third order in `z`
and first in `p - p*`,

    dz/dt = z (i omega + a (p - p*) + c1 |z|^2)

with `a` the crossing eigenvalue's derivative along the branch and

    c1 = 1/2 <w, C(q, q, conj q) + B(conj q, h20) + 2 B(q, h11)>,
    h20 = (2 i omega - A)^-1 B(q, q),   h11 = -A^-1 B(q, conj q),

`B` and `C` the second and third derivatives of `f` in `x` (Yu. A. Kuznetsov,
"Numerical normalization techniques for all codim 2 bifurcations of equilibria in
ODE's", SIAM J. Numer. Anal. 36, 1999; *Elements of Applied Bifurcation Theory*, section
3.5, for its real part). The first Lyapunov coefficient is `l1 = Re(c1) / omega`: negative,
a stable cycle grows from the point where the steady state loses stability
(supercritical); positive, an unstable cycle shrinks onto it from the other side, and the
state jumps away (subcritical). `l1` depends on the scaling of `q` (here unit), its sign
does not.

The coefficients are computed at the two ends of the bracket that located the point
(`hopf_normal_form`) and interpolated to the crossing.

Matrix-free, `B` and `C` are JVPs of JVPs, the left eigenvector comes from Krylov-Schur on
`A^T` (vector-Jacobian products), and the two solves are GMRES (the complex one as a real
system of twice the size), preconditioned where the field has a preconditioner.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np

from . import _krylov_schur as krylov_schur
from ._branch_kernels import (
    GMRES_MAX_STEPS,
    WARM_START_MIX,
    _gmres,
    _inverted_pairs,
    _leading_pairs,
    jacobian,
    real_eigenvalues,
    rounding_rtol,
    transposed_arnoldi_steps,
    transposed_inverse_arnoldi_steps,
)
from ._common import is_count
from ._xla_fallback import compiled

# The linear solves of `c1` are accepted up to this factor of their relative tolerance.
SOLVE_SLACK = 100.0


def _real_parts(u):
    return jnp.real(u), jnp.imag(u)


@compiled
def hopf_coefficients(F, y, t, args, q, left, omega, dense: bool):
    """`c1`, `a` and what checks them at the Hopf point `y` (`[n + 1]`), where the branch
    has the tangent `t` (`[n + 1]`), `q` (`[n]`, complex) is the right eigenvector for
    `i omega`, `left` the left one (`<left, q> = 1`).

    Returns a dict: `c1`, `a` (complex scalars), `terms` (the sizes of `c1`'s three
    terms, summed), `h20` (`[n]`, complex) and `h11` (`[n]`), the centre manifold's
    second-order coefficients, and `residuals` (`[2]`: the relative residuals of the
    solves for `h11` and `h20`)."""
    x, p = y[:-1], y[-1]
    n = x.size
    f = lambda u: F.split(u, p, args)  # noqa: E731

    def second(u, v):
        return jax.jvp(lambda z: jax.jvp(f, (z,), (u,))[1], (x,), (v,))[1]

    def third(u, v, w):
        return jax.jvp(
            lambda s: jax.jvp(lambda z: jax.jvp(f, (z,), (u,))[1], (s,), (v,))[1], (x,), (w,)
        )[1]

    def bilinear(u, v):
        """`B(u, v)` for complex `u`, `v`, from four real products."""
        (ur, ui), (vr, vi) = _real_parts(u), _real_parts(v)
        out = jax.vmap(second)(jnp.stack([ur, ui, ur, ui]), jnp.stack([vr, vi, vi, vr]))
        return (out[0] - out[1]) + 1j * (out[2] + out[3])

    qr, qi = _real_parts(q)
    # C(q, q, conj q) = C(qr,qr,qr) + C(qr,qi,qi) + i (C(qr,qr,qi) + C(qi,qi,qi))
    cubic = jax.vmap(third)(
        jnp.stack([qr, qr, qr, qi]), jnp.stack([qr, qi, qr, qi]), jnp.stack([qr, qi, qi, qi])
    )
    c_qqq = (cubic[0] + cubic[1]) + 1j * (cubic[2] + cubic[3])
    b_qq = bilinear(q, q)
    b_qqbar = jnp.real(bilinear(q, jnp.conj(q)))
    shift = 2.0 * omega
    if dense:
        matrix = jax.jacfwd(f)(x)
        linear = lambda u: matrix @ u  # noqa: E731
        h11 = -jnp.linalg.solve(matrix, b_qqbar)
        shifted = 1j * shift * jnp.eye(n, dtype=q.dtype) - matrix
        h20 = jnp.linalg.solve(shifted, b_qq)
    else:
        _, linear = jax.linearize(f, x)
        inverse = F.precondition_at(y, args)
        rtol = rounding_rtol(x.dtype)
        h11 = -_gmres(linear, b_qqbar, None, rtol, n, inverse, GMRES_MAX_STEPS)

        # (2 i omega - A)(u + i v) = (-A u - 2 omega v) + i (2 omega u - A v)
        def block(d):
            u, v = d
            return -linear(u) - shift * v, shift * u - linear(v)

        precondition = None if inverse is None else (lambda d: (-inverse(d[0]), -inverse(d[1])))
        u, v = _gmres(block, _real_parts(b_qq), None, rtol, 2 * n, precondition, GMRES_MAX_STEPS)
        h20 = u + 1j * v

    def relative(residual, rhs):
        return jnp.linalg.norm(residual) / jnp.maximum(
            jnp.linalg.norm(rhs), jnp.finfo(x.dtype).tiny
        )

    hr, hi = _real_parts(h20)
    residuals = jnp.stack(
        [
            relative(linear(h11) + b_qqbar, b_qqbar),
            relative((-linear(hr) - shift * hi) + 1j * (shift * hr - linear(hi)) - b_qq, b_qq),
        ]
    )
    parts = jnp.stack(
        [
            jnp.vdot(left, c_qqq),
            jnp.vdot(left, bilinear(jnp.conj(q), h20)),
            2.0 * jnp.vdot(left, bilinear(q, h11)),
        ]
    )
    c1 = 0.5 * jnp.sum(parts)
    terms = 0.5 * jnp.sum(jnp.abs(parts))
    # a = <w, d/dp (df/dx) q> along the branch: the second derivative of F(y) along
    # (q, 0) and the tangent, over the tangent's p component
    g = lambda z: F(z, args)  # noqa: E731
    along = lambda u: jax.jvp(lambda z: jax.jvp(g, (z,), (u,))[1], (y,), (t,))[1]  # noqa: E731
    pad = lambda u: jnp.concatenate([u, jnp.zeros((1,), y.dtype)])  # noqa: E731
    a = jnp.vdot(left, along(pad(qr)) + 1j * along(pad(qi))) / t[-1]
    return dict(c1=c1, a=a, terms=terms, h20=h20, h11=h11, residuals=residuals)


def _left_eigenvector(F, y, args, value, q, dense: bool, k: int, spectrum: str):
    """The left eigenvector `w` of `df/dx` at `y` for the eigenvalue `value` (`A^T w =
    conj(value) w`), scaled so that `<w, q> = 1`. Matrix-free: Krylov-Schur on `A^T`
    (`k + 1` leading or nearest zero, as the branch keeps them: both members of a
    pair that `k` cuts), started from `q`. Raises `EigenNotConvergedError` where no
    eigenvalue of `A^T` is clearly the one sought (none near it, or two), or where `w`
    and `q` are nearly orthogonal (the eigenvalue is ill-conditioned, as near a
    Bogdanov-Takens point)."""
    n = y.size - 1
    if dense:
        values, vectors = np.linalg.eig(np.asarray(jacobian(F, y, args))[:, :-1].T)
    else:
        start = np.real(q) + np.imag(q)
        start = start / np.linalg.norm(start) + WARM_START_MIX * (
            1.0 + np.random.default_rng(0).random(n)
        ) / math.sqrt(n)
        start = jnp.asarray(start, y.dtype)
        kept = k + 1
        if spectrum == "nearest_zero":
            values, vectors = _inverted_pairs(
                transposed_inverse_arnoldi_steps, F, y, args, start, kept
            )
        else:
            values, vectors = _leading_pairs(transposed_arnoldi_steps, F, y, args, start, kept)
    target = np.conj(value)
    near = math.sqrt(float(jnp.finfo(y.dtype).eps)) * max(1.0, float(np.max(np.abs(values))))
    distance = np.abs(values - target)
    pick = int(np.argmin(distance))
    others = np.delete(distance, pick)
    if distance[pick] > near or (others.size and others.min() <= max(2 * distance[pick], near)):
        raise krylov_schur.EigenNotConvergedError(
            f"the transposed Jacobian's eigenvalues {np.round(values, 8)} hold none clearly "
            f"equal to {complex(target):.8g}: no left eigenvector."
        )
    w = np.asarray(vectors[:, pick], complex)
    overlap = abs(np.vdot(w, q)) / np.linalg.norm(w)
    if overlap <= math.sqrt(float(jnp.finfo(y.dtype).eps)):
        raise krylov_schur.EigenNotConvergedError(
            f"the left and right eigenvectors are nearly orthogonal (cosine {overlap:.1e}): "
            "the eigenvalue is ill-conditioned, as near a Bogdanov-Takens point."
        )
    return w / np.conj(np.vdot(w, q))


def _coefficients_at(F, point, args, dense: bool, k: int, spectrum: str) -> dict:
    """The normal form's coefficients at one `point` of a branch (a dict with `y`, `t`,
    `eigenvalues`, `vectors`), from its complex eigenvalue nearest the imaginary axis:
    `hopf_coefficients`' dict with `value` (that eigenvalue, positive imaginary part)
    and `q` (unit, its largest entry real and positive). Raises `_NoNormalForm` saying
    why where it cannot be computed."""
    values = np.asarray(point["eigenvalues"]).astype(complex)
    pairs = np.flatnonzero(~real_eigenvalues(values))
    if not pairs.size:
        raise _NoNormalForm("no complex eigenvalue kept at the point.")
    e = int(pairs[np.argmin(np.abs(values.real[pairs]))])
    value, q = values[e], np.asarray(point["vectors"])[:, e].astype(complex)
    if value.imag < 0:
        value, q = np.conj(value), np.conj(q)
    y, t = point["y"], np.asarray(point["t"])
    eps = float(jnp.finfo(y.dtype).eps)
    if value.imag <= math.sqrt(eps) * max(1.0, float(np.max(np.abs(values)))):
        raise _NoNormalForm(
            f"the frequency {value.imag:.3g} is near zero: a Bogdanov-Takens point?"
        )
    if abs(t[-1]) <= math.sqrt(eps):
        raise _NoNormalForm("the branch turns in p at this Hopf point: no first-order a.")
    q = q / np.linalg.norm(q)
    q = q * np.exp(-1j * np.angle(q[np.argmax(np.abs(q))]))
    try:
        w = _left_eigenvector(F, y, args, value, q, dense, k, spectrum)
    except krylov_schur.EigenNotConvergedError as error:
        raise _NoNormalForm(str(error)) from None
    complex_dtype = jnp.result_type(y.dtype, jnp.complex64)
    out = hopf_coefficients(
        F,
        y,
        point["t"],
        args,
        jnp.asarray(q, complex_dtype),
        jnp.asarray(w, complex_dtype),
        jnp.asarray(value.imag, y.dtype),
        dense,
    )
    out = {key: np.asarray(entry) for key, entry in out.items()}
    residuals = out["residuals"]
    if not all(np.all(np.isfinite(entry)) for entry in out.values()):
        raise _NoNormalForm("the normal form's coefficients are not finite.")
    allowed = SOLVE_SLACK * rounding_rtol(y.dtype)
    # (an LU solve is exact to rounding: its residual is only checked matrix-free)
    if not dense and np.any(residuals > allowed):
        raise _NoNormalForm(
            f"the solves for h11 and h20 reached relative residuals "
            f"{np.array2string(residuals, precision=2)} (wanted {allowed:.1g}): give a "
            "preconditioner of df/dx (preconditioner=), or matrix_free=False."
        )
    return dict(out, value=value, q=q)


class _NoNormalForm(Exception):
    """Why a Hopf point's normal form was not computed (`normal_form_error`)."""


def hopf_normal_form(F, args, dense: bool, k: int, spectrum: str, point, ends, unstable_change):
    """The entries a Hopf record gains from its normal form: `lyapunov_coefficient`,
    `criticality` and `normal_form` (`c1`, `a`, `c1_error`, `frequency`, and in the
    state's shape `q`, `h20`, `h11` and the branch's slope `dx_dp`), or
    `normal_form_error` saying why not.

    `point` is the located Hopf point (the record's), `ends` the two points of its final
    bracket (`point` is one of them), `unstable_change` the change in the number of
    eigenvalues with a positive real part across it. The coefficients are computed at
    both ends, where the crossing eigenvalue's real part `alpha` has opposite signs, and
    `c1` and `a` interpolated linearly in `alpha` to `alpha = 0` (at either end `c1` is
    off by about `alpha / omega^2`, which matters near a Bogdanov-Takens point). Their
    difference, or a floor of `10 rounding_rtol` times the sizes of `c1`'s terms, is
    `c1_error`; where `|Re c1|` is not above it the point is `"degenerate"` (a Bautin
    point, a linear field's centre, or too near a Bogdanov-Takens point to tell). Two
    pairs crossing at once (a double Hopf point) have no single normal form."""
    if abs(unstable_change) > 2:
        return dict(
            normal_form_error=(
                f"{abs(unstable_change)} eigenvalues cross at once (a double Hopf point?): "
                "no single normal form."
            )
        )
    try:
        at = [_coefficients_at(F, end, args, dense, k, spectrum) for end in ends]
    except _NoNormalForm as why:
        return dict(normal_form_error=str(why))
    (lo, hi), here = at, at[0] if ends[0] is point else at[1]
    alpha_lo, alpha_hi = lo["value"].real, hi["value"].real
    weight = alpha_lo / (alpha_lo - alpha_hi) if alpha_lo != alpha_hi else 0.5
    weight = min(max(weight, 0.0), 1.0)
    c1, a = (complex(lo[name] + weight * (hi[name] - lo[name])) for name in ("c1", "a"))
    floor = 10 * rounding_rtol(point["y"].dtype) * float(max(lo["terms"], hi["terms"]))
    c1_error = max(abs(complex(hi["c1"] - lo["c1"])), floor)
    omega = float(here["value"].imag)
    l1 = c1.real / omega
    degenerate = abs(c1.real) <= c1_error
    shape = np.shape(F.state(point["y"]))
    t = np.asarray(point["t"])
    complex_dtype = np.result_type(t.dtype, np.complex64)
    return dict(
        lyapunov_coefficient=l1,
        criticality="degenerate" if degenerate else ("supercritical" if l1 < 0 else "subcritical"),
        normal_form=dict(
            c1=c1,
            a=a,
            c1_error=c1_error,
            frequency=omega,
            q=here["q"].astype(complex_dtype).reshape(shape),
            h20=here["h20"].astype(complex_dtype).reshape(shape),
            h11=here["h11"].reshape(shape),
            dx_dp=(t[:-1] / t[-1]).reshape(shape),
        ),
    )


def _from_json(value):
    """A normal form's entry as `continuation` gives it, from it or from its `to_json`
    copy (complex numbers as `{"real": ..., "imag": ...}`, arrays as lists)."""
    if isinstance(value, dict) and set(value) == {"real", "imag"}:
        return complex(value["real"], value["imag"])
    if isinstance(value, list):
        return np.asarray([_from_json(entry) for entry in value])
    return value


def hopf_cycle(bifurcation: dict, p: float, *, points: int | np.integer = 64) -> dict:
    """The periodic orbit born at a Hopf point, at the parameter `p`, to leading order
    in `p - p*`: with `z = r exp(i theta)`,
    `x(theta) = x*(p) + 2 Re(z q) + Re(h20 z^2) + h11 r^2`, `x*(p) = x* + (p - p*) dx/dp`
    (the centre manifold to second order), radius `r = sqrt(-Re(a) (p - p*) / Re(c1))`
    and angular frequency `omega + Im(a) (p - p*) + Im(c1) r^2` (the normal form in
    `_hopf`'s docstring).

    - `bifurcation`: a `kind="hopf"` record of `continuation` with a `normal_form`.
    - `p`: where the cycle exists: past `p*` on the side where the steady state is
      unstable for a supercritical point, on the stable side for a subcritical one. The
      orbit's error relative to its size `r` grows like `|p - p*|`.
    - `points`: samples over one period.

    Returns a dict: `x` (`[points, *shape]`, the orbit at equal times), `t`
    (`[points]`, from 0), `period`, `radius` (`r`: the orbit's RMS distance from
    `x*(p)` is `sqrt(2) r`), `stable` (whether the orbit attracts: supercritical).
    Raises `ValueError` where the record has no normal form, or no cycle exists at `p`
    (the side is named)."""
    if bifurcation.get("kind") != "hopf" or "normal_form" not in bifurcation:
        why = bifurcation.get("normal_form_error", "it is not a Hopf point of continuation")
        raise ValueError(f"hopf_cycle needs a Hopf record with a normal form: {why}.")
    form = {key: _from_json(value) for key, value in bifurcation["normal_form"].items()}
    if bifurcation["criticality"] == "degenerate":
        raise ValueError(
            "the Hopf point is degenerate (Re c1 = 0 to what was resolved): the cubic normal "
            "form does not say where its cycles are."
        )
    if not is_count(points, 2):
        raise ValueError(f"points must be an integer of at least 2 (got {points!r}).")
    c1, a = complex(form["c1"]), complex(form["a"])
    dp = float(p) - bifurcation["p"]
    squared = -a.real * dp / c1.real
    if not squared > 0:
        side = ">" if -a.real / c1.real > 0 else "<"
        raise ValueError(
            f"no cycle at p = {float(p):.6g}: the {bifurcation['criticality']} Hopf point at "
            f"p* = {bifurcation['p']:.6g} has its cycles at p {side} p*."
        )
    radius = math.sqrt(squared)
    frequency = float(form["frequency"]) + a.imag * dp + c1.imag * squared
    theta = 2 * np.pi * np.arange(points) / points
    centre = np.asarray(bifurcation["x"], float) + dp * form["dx_dp"] + squared * form["h11"]
    phase = np.exp(1j * theta).reshape((points,) + (1,) * np.ndim(centre))
    x = centre[None] + np.real(
        2 * radius * phase * form["q"][None] + squared * phase**2 * form["h20"][None]
    )
    return dict(
        x=x,
        t=theta / frequency,
        period=2 * np.pi / frequency,
        radius=radius,
        stable=bifurcation["criticality"] == "supercritical",
    )
