"""The multilinear forms of a real field at a point, taken at complex vectors: what the
normal forms of equilibria are written in.

For `f: R^n -> R^n` smooth, its `k`-th derivative at `x` is a symmetric `k`-linear form
`D^k f(x)[u1, ..., uk]`, real for real vectors. Normal forms need it at complex vectors
(eigenvectors of a pair); it extends complex-multilinearly, so with `uj = aj + i bj` it
is the sum over the `2^k` choices of real or imaginary part of each argument,
`i^(number of imaginary parts)` times the real form of those parts. Each real form is
`k` nested JVPs (forward mode: no Jacobian is formed), the `2^k` of them one `vmap`.
"""

import itertools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np


def _real_form(f: Callable, x, tangents):
    """`D^k f(x)[t1, ..., tk]` for real tangents (`k = len(tangents)`), by nested JVPs."""
    g = f
    for tangent in tangents:
        g = (lambda h, t: lambda z: jax.jvp(h, (z,), (t,))[1])(g, tangent)
    return g(x)


def multilinear(f: Callable, x, *vectors):
    """`D^k f(x)[u1, ..., uk]` (`[n]`, complex) at complex vectors `u1 ... uk` (`[n]`
    each), `f` real (`[n] -> [n]`) at the real point `x` (`[n]`)."""
    k = len(vectors)
    choices = np.array(list(itertools.product((0, 1), repeat=k)))  # [2^k, k]
    parts = [jnp.stack([jnp.real(u), jnp.imag(u)]) for u in vectors]  # k of [2, n]
    tangents = [part[choices[:, j]] for j, part in enumerate(parts)]  # k of [2^k, n]
    forms = jax.vmap(lambda *ts: _real_form(f, x, ts))(*tangents)  # [2^k, n]
    complex_dtype = jnp.result_type(x.dtype, jnp.complex64)
    weights = jnp.asarray(1j ** choices.sum(axis=1), complex_dtype)
    return jnp.tensordot(weights, forms.astype(complex_dtype), axes=1)
