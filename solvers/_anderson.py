"""Anderson acceleration of the flow's Euler map: the fixed-point finder for large,
piecewise-smooth energies (`find_fixed_point(method="anderson")`).

First `warm_steps` plain Euler steps of the residual flow `dx/dt = -G/tau` (as
`solve(..., solver="euler")` takes them), to `x_warm`. Then the map is one Euler step
retracted to the manifold of `x_warm` (for the ET: each token's mean and variance, and
clamped tokens whole; plain Euler steps drift the variance a little, as they do in `solve`),

    T(x) = R(x - (dt / tau) G(x)),     G = model.residual,

whose fixed points are exactly the model's (`G = 0`). Anderson's method (type II,
"Anderson mixing"; Walker and Ni, SIAM J. Numer. Anal. 49, 2011) keeps the last `memory`
differences of iterates `dX` and of steps `dF` (`f = T(x) - x` before retraction) and takes

    gamma = argmin ||f_k - dF gamma||,    x_{k+1} = R(x_k + f_k - (dX + dF) gamma),

which on a linear map is GMRES on `I - T'`: the slow directions that make Euler take
`kappa log(1/tol)` steps (`kappa` the ratio of the fastest to the slowest rate) converge
about as fast as a Krylov method, at one evaluation of `G` per iteration. It needs no
energy (so, unlike L-BFGS, it does not stall at float32's resolution of E), no Jacobian
(unlike Newton, whose GMRES failed from the same starts at the authors' shapes) and no
error estimate (which keeps an adaptive integrator's steps near 1e-3 tau there).
Measured: docs/benchmarks.md, "Non-smooth dynamics".

Safeguards: a mixed iterate whose RMS G exceeds the current one's is replaced by the plain
Euler step from the current iterate (one more evaluation), and the history is dropped.
And where the best RMS G has not halved within `STALL * memory` iterations, the iteration
goes on as plain Euler to the end: Anderson solves G = 0 and can be drawn to the plateau of
a saddle, which the descending Euler map leaves (from a random start on the shipped `paper`
model it stalled at RMS G 7e-4 where Euler reached 1e-4). So it costs at most about what
Euler costs plus the failed attempt. Far from a fixed point the least-squares model of `T`
is poor: without the warm steps and the safeguards the iteration stagnated on small ReLU
models. The result is the best iterate seen.

What it preserves: the fixed point's defining equation, not the trajectory. In a landscape
with many nearby minima (a trained or random ET) it can settle in a different minimum from
the one the exact flow reaches from the same start, as Euler with a large step or a loose
adaptive tolerance also can; trajectory studies integrate the flow instead.
"""

import dataclasses
import numbers

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax

from ._stop import rms

# Every STALL * memory iterations the best RMS G must have fallen below PROGRESS times
# its value at the last check; else the iteration goes on as plain Euler (see above).
STALL, PROGRESS = 2, 0.5


@dataclasses.dataclass(frozen=True)
class AndersonSettings:
    """How `find_fixed_point(method="anderson")` iterates (module docstring), checked when
    made:

    - `dt`: the step of the Euler map, in units of `tau` (default 0.1, the paper's).
    - `memory`: how many of the last steps Anderson's method mixes (default 10).
    - `warm_steps`: plain Euler steps before the mixing starts (default 50); they count
      among `find_fixed_point`'s `max_steps` evaluations of G.

    Frozen and hashable: a static argument of a jitted function.

    ```python
    found = solvers.find_fixed_point(
        model, x0, method="anderson", tol=1e-8, anderson=solvers.AndersonSettings(memory=5)
    )
    ```
    """

    dt: float = 0.1
    memory: int = 10
    warm_steps: int = 50

    def __post_init__(self):
        dt = self.dt
        if not (isinstance(dt, numbers.Real) and not isinstance(dt, bool) and dt > 0 and dt == dt):
            raise ValueError(
                f"dt must be a positive number (the Euler step, in units of tau); got {dt!r}."
            )
        for name, low in (("memory", 1), ("warm_steps", 0)):
            value = getattr(self, name)
            if not _integer_at_least(value, low):
                raise ValueError(f"{name} must be an integer >= {low} (got {value!r}).")


def _integer_at_least(value, low: int) -> bool:
    """Whether `value` is an integer (a whole float too, not a bool) of at least `low`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    return float(value).is_integer() and float(value) >= low


@eqx.filter_jit
def anderson(model, x_init, args, tol, max_steps, dt, memory: int, warm_steps: int):
    """Anderson-accelerated Euler map of `model` (a `ManifoldEnergySystem`) from `x_init`
    (`[N, D]`), stopped at RMS G `tol`, at a non-finite G, or when `max_steps`
    evaluations of G (warm steps included) are spent. `dt`: the Euler step in units of
    `tau`. Returns `(x, evaluations, rms_g, fallbacks)`: the best iterate, the evaluations
    spent, its RMS G, and how many mixed iterates were replaced by Euler steps; and
    `x_warm`, the point after the warm steps, on whose manifold the iteration runs.

    Only `x_warm` carries derivatives (through the warm Euler steps, with respect to
    `model`, `x_init` and `args`): the iteration runs on values with the gradient
    stopped, and `find_fixed_point` attaches the fixed point's implicit gradient."""
    shape, dtype = x_init.shape, x_init.dtype
    step = jnp.asarray(dt, dtype) / jnp.asarray(getattr(model, "tau", 1.0), dtype)

    def retract(x):
        return model.from_manifold(model.to_manifold(x, args), x_warm, args)

    def euler_step(x):  # f = T(x) - x before retraction, and RMS G at x
        g = model.residual(x, args)
        return -step * g, rms(g)

    def skipped(x):
        return jnp.zeros_like(x), jnp.asarray(jnp.inf, dtype)

    def warm(_, x):
        return x + euler_step(x)[0]

    x_warm_traced = lax.fori_loop(0, warm_steps, warm, x_init)
    # From here on the closures above see the stopped values (a while loop cannot be
    # differentiated in reverse mode, and the fixed point's gradient is implicit).
    model, args, step, x_warm = jax.tree.map(
        lambda leaf: lax.stop_gradient(leaf) if eqx.is_inexact_array(leaf) else leaf,
        (model, args, step, x_warm_traced),
    )
    x = x_warm
    f, g = euler_step(x)
    empty = jnp.zeros((memory, x.size), dtype)
    start = dict(
        x=x.reshape(-1),
        f=f.reshape(-1),
        g=g,
        dX=empty,
        dF=empty,
        slot=jnp.asarray(0),
        filled=jnp.asarray(0),
        evaluations=jnp.asarray(warm_steps + 1),
        fallbacks=jnp.asarray(0),
        best_x=x.reshape(-1),
        best_g=g,
        k=jnp.asarray(0),
        mark_g=g,
        plain=jnp.asarray(False),
    )

    def cond(c):
        return (c["evaluations"] + 2 <= max_steps) & (c["best_g"] > tol) & jnp.isfinite(c["g"])

    def body(c):
        gamma = jnp.linalg.lstsq(c["dF"].T, c["f"])[0]
        x_mixed = retract((c["x"] + c["f"] - (c["dX"] + c["dF"]).T @ gamma).reshape(shape))
        f_mixed, g_mixed = euler_step(x_mixed)
        # The safeguard (module docstring). Without history the mixed iterate is the
        # Euler step itself, always taken: G need not fall along the flow (on the
        # authors' shapes it doubles in the first tau).
        fallback = (c["filled"] > 0) & ~(g_mixed <= c["g"])
        x_euler = retract((c["x"] + c["f"]).reshape(shape))
        f_euler, g_euler = lax.cond(fallback, euler_step, skipped, x_euler)
        x_new = jnp.where(fallback, x_euler, x_mixed).reshape(-1)
        f_new = jnp.where(fallback, f_euler, f_mixed).reshape(-1)
        g_new = jnp.where(fallback, g_euler, g_mixed)
        better = g_new < c["best_g"]
        best_g = jnp.where(better, g_new, c["best_g"])
        check = (c["k"] + 1) % (STALL * memory) == 0
        plain = c["plain"] | (check & (best_g > PROGRESS * c["mark_g"]))
        # in plain mode the history stays empty, so every mixed iterate is an Euler step
        keep = ~(fallback | plain)
        slot = jnp.where(keep, c["slot"], 0)
        dX = jnp.where(keep, c["dX"], 0.0).at[slot].set(jnp.where(plain, 0.0, x_new - c["x"]))
        dF = jnp.where(keep, c["dF"], 0.0).at[slot].set(jnp.where(plain, 0.0, f_new - c["f"]))
        return dict(
            x=x_new,
            f=f_new,
            g=g_new,
            dX=dX,
            dF=dF,
            slot=(slot + 1) % memory,
            filled=jnp.where(
                plain, 0, jnp.where(fallback, 1, jnp.minimum(c["filled"] + 1, memory))
            ),
            evaluations=c["evaluations"] + 1 + fallback.astype(c["evaluations"].dtype),
            fallbacks=c["fallbacks"] + fallback.astype(c["fallbacks"].dtype),
            best_x=jnp.where(better, x_new, c["best_x"]),
            best_g=best_g,
            k=c["k"] + 1,
            mark_g=jnp.where(check, best_g, c["mark_g"]),
            plain=plain,
        )

    out = lax.while_loop(cond, body, start)
    return (
        out["best_x"].reshape(shape),
        out["evaluations"],
        out["best_g"],
        out["fallbacks"],
        x_warm_traced,
    )
