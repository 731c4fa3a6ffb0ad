"""Normal forms of codimension-two points of equilibria, from the field's multilinear
forms at the point (complex vectors, `_multilinear`): the Bautin point's second Lyapunov
coefficient and the zero-Hopf point's second-order coefficients (Yu. A. Kuznetsov,
"Numerical normalization techniques for all codim 2 bifurcations of equilibria in
ODE's", SIAM J. Numer. Anal. 36, 1999). The cusp's and Bogdanov-Takens point's, real,
are in `_fold_curve`.

`form(u1, ..., uk)` below is `D^k f[u1, ..., uk]` at the point (`forms_at`), the
derivatives told apart by their number of arguments.
"""

from collections.abc import Callable

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from ._multilinear import multilinear


def second_lyapunov(form: Callable, jac, omega: float) -> dict:
    """The normal form at a Bautin point (`J = jac` has `+-i omega`, `Re c1 = 0`):
    `l1`, `l2 = Re(c2) / omega` and `c1`, `c2` (module docstring; Kuznetsov 1999),
    from the unit right eigenvector `q` and the left one `p` with `<p, q> = 1`.
    `form(u1, ..., uk)` is `D^k f[u1, ..., uk]` there at complex vectors."""
    n = len(jac)
    values, vectors = np.linalg.eig(jac)
    k = int(np.argmin(np.abs(values - 1j * omega)))
    q = vectors[:, k] / np.linalg.norm(vectors[:, k])
    values_t, vectors_t = np.linalg.eig(jac.T)
    p = vectors_t[:, int(np.argmin(np.abs(values_t + 1j * omega)))]
    p = p / np.conj(np.vdot(p, q))
    eye = np.eye(n)
    # the derivatives 2 to 5, told apart by their number of arguments
    B = C = D = E = form
    qb = np.conj(q)
    h20 = np.linalg.solve(2j * omega * eye - jac, B(q, q))
    h11 = -np.linalg.solve(jac, B(q, qb).real)
    g21 = np.vdot(p, C(q, q, qb) + B(qb, h20) + 2 * B(q, h11))
    h30 = np.linalg.solve(3j * omega * eye - jac, C(q, q, q) + 3 * B(q, h20))
    # (i omega - J) h21 = R - G21 q with <p, h21> = 0: solvable since <p, R - G21 q> = 0
    rhs = C(q, q, qb) + B(qb, h20) + 2 * B(q, h11) - g21 * q
    bordered = np.block(
        [[1j * omega * eye - jac, q[:, None]], [np.conj(p)[None, :], np.zeros((1, 1))]]
    )
    h21 = np.linalg.solve(bordered, np.append(rhs, 0.0))[:n]
    h20b, h21b = np.conj(h20), np.conj(h21)
    h31 = np.linalg.solve(
        2j * omega * eye - jac,
        D(q, q, q, qb)
        + 3 * C(q, q, h11)
        + 3 * C(q, qb, h20)
        + 3 * B(h20, h11)
        + B(qb, h30)
        + 3 * B(q, h21)
        - 3 * g21 * h20,
    )
    h22 = -np.linalg.solve(
        jac,
        (
            D(q, q, qb, qb)
            + 4 * C(q, qb, h11)
            + C(qb, qb, h20)
            + C(q, q, h20b)
            + 2 * B(h11, h11)
            + 2 * B(q, h21b)
            + 2 * B(qb, h21)
            + B(h20b, h20)
            - 2 * (g21 + np.conj(g21)) * h11
        ).real,
    )
    g32 = np.vdot(
        p,
        E(q, q, q, qb, qb)
        + D(q, q, q, h20b)
        + 3 * D(q, qb, qb, h20)
        + 6 * D(q, q, qb, h11)
        + C(qb, qb, h30)
        + 3 * C(q, q, h21b)
        + 6 * C(q, qb, h21)
        + 3 * C(q, h20b, h20)
        + 6 * C(q, h11, h11)
        + 6 * C(qb, h20, h11)
        + 2 * B(qb, h31)
        + 3 * B(q, h22)
        + B(h20b, h30)
        + 3 * B(h21b, h20)
        + 6 * B(h11, h21),
    )
    c1, c2 = g21 / 2, g32 / 12
    return dict(l1=c1.real / omega, l2=c2.real / omega, c1=complex(c1), c2=complex(c2))


@eqx.filter_jit
def _form(problem, y, p, q, args, vectors):
    """`D^k f[vectors]` (`[n]`, complex) at `(y, p, q)`, `k = len(vectors)`."""
    return multilinear(lambda z: problem.f(z, p, q, args), y, *vectors)


def forms_at(problem, y, p, q, args) -> Callable:
    """`form(u1, ..., uk)`: `D^k f[u1, ..., uk]` at `(y, p, q)` for complex numpy
    vectors, in complex128 numpy."""
    complex_dtype = jnp.result_type(y.dtype, jnp.complex64)

    def form(*vectors):
        cast = tuple(jnp.asarray(np.asarray(v, complex), complex_dtype) for v in vectors)
        return np.asarray(_form(problem, y, p, q, args, cast), np.complex128)

    return form


def zero_hopf_coefficients(form: Callable, jac, omega: float) -> dict:
    """The second-order coefficients of the zero-Hopf normal form

        w0' = G200 w0^2 / 2 + G011 |w1|^2 + ...,   w1' = i omega w1 + G110 w0 w1 + ...

    (`x = x* + w0 q0 + 2 Re(w1 q1) + ...`, `J q0 = 0`, `J q1 = i omega q1`, both unit,
    with the adjoint vectors `<p0, q0> = <p1, q1> = 1`): `G200 = <p0, B(q0, q0)>`,
    `G011 = <p0, B(q1, conj q1)>`, `G110 = <p1, B(q0, q1)>` (the resonant quadratic
    terms, which no change of coordinates removes). With them Kuznetsov's unfolding
    (*Elements*, section 8.5) has `s = sign(G200 G011)` and `theta = Re(G110) / (G200 /
    2)`: `s` and the sign of `theta` say which of its four phase portraits the point
    unfolds into (with `s = 1`, `theta < 0` a torus can be born; the cubic terms
    decide). `q0` is signed so that `G200 >= 0`. Returns those, and `q0`, `q1`."""
    values, vectors = np.linalg.eig(jac)
    zero = int(np.argmin(np.abs(values)))
    pair = int(np.argmin(np.abs(values - 1j * omega)))
    q0 = vectors[:, zero].real / np.linalg.norm(vectors[:, zero].real)
    q1 = vectors[:, pair] / np.linalg.norm(vectors[:, pair])
    values_t, vectors_t = np.linalg.eig(jac.T)
    p0 = vectors_t[:, int(np.argmin(np.abs(values_t)))].real
    p0 = p0 / float(p0 @ q0)
    p1 = vectors_t[:, int(np.argmin(np.abs(values_t + 1j * omega)))]
    p1 = p1 / np.conj(np.vdot(p1, q1))
    g200 = float(np.vdot(p0, form(q0, q0)).real)
    if g200 < 0:  # q0 -> -q0 with p0 -> -p0 flips G200, G011 and G110 (taken after)
        q0, p0, g200 = -q0, -p0, -g200
    g011 = float(np.vdot(p0, form(q1, np.conj(q1))).real)
    g110 = complex(np.vdot(p1, form(q0, q1)))
    return dict(
        G200=g200,
        G011=g011,
        G110=g110,
        s=float(np.sign(g200 * g011)),
        theta=g110.real / (g200 / 2) if g200 else float("nan"),
        q0=q0,
        q1=q1,
    )
