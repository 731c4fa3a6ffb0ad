"""Critical points of an energy system beside the flow's ends and between its minima:
a flow's end polished onto the critical point beside it (`polish_near`), and the
minimum energy path between two minima with the index-1 saddle on it, the barrier a
noisy path must climb to go from one to the other (`minimum_energy_path`).

The simplified string method (E, Ren and Vanden-Eijnden, J. Chem. Phys. 126, 2007): a
chain of `images` states from `a` to `b` (a straight line to start with) is let flow
for `interval` (tau) along the model's own descent (the projected flow on a manifold,
so each image keeps its token scales), then spread again at equal arclength along the
chain by linear interpolation, and so on until the chain moves less than
`path_tol` (RMS, per unit of flow time). The chain then lies on a path along which the
field is tangent: a minimum energy path (in the metric of the flow's mobility; its
critical points, and so the barrier, are those of the energy whatever the metric). Its
highest image climbs (the model's field reflected along the chain's tangent there, the
climbing image of a nudged elastic band), is polished by Newton
(`solvers.find_fixed_point`, which converges to the nearest critical point, saddles
included) and its Morse index counted on the tangent Hessian (`hessian_eigenvalues`):
an index-1 saddle, the transition state. Interior minima of the chain (intermediate
states between `a` and `b`) are counted: then the path crosses several saddles, and the
polished one is the highest, the one that sets the rate of going from `a` to `b` (on a
rugged landscape the lower ones are crossed many times at a temperature where the
highest is crossed at all).

The chain lives in the model's coordinates; on a manifold every image is put back onto
`a`'s (`from_manifold(to_manifold(x), a)`: each token's mean and scale taken from `a`)
after each spreading, since interpolation leaves it.
"""

import dataclasses
from typing import Any, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float

from et_ode import solvers

from .._common import cast, float64_available, is_count
from .._geometry import energy_coordinates, require
from .._records import metadata
from .._results import Result
from .._settings import NewtonSettings, Settings, positive
from ._hessian import hessian_eigenvalues

# The polish's Newton by default: to RMS G 1e-10 in at most 100 iterations (those of
# `solvers.find_fixed_point`), dense up to `solvers.DENSE_MAX` entries, GMRES above.
POLISH_NEWTON = NewtonSettings(newton_tol=1e-10, max_newton=100)
# `NewtonSettings.matrix_free` -> `find_fixed_point`'s `linear`.
LINEAR: dict[bool | None, Literal["auto", "dense", "gmres"]] = {
    None: "auto",
    True: "gmres",
    False: "dense",
}


def polish_near(model, x, args, *, newton: NewtonSettings = POLISH_NEWTON, within=1e-3):
    """`x` polished by Newton (`solvers.find_fixed_point`, in float64 when it is
    available: above float32's floor), or None where Newton fails or lands farther than
    `within` (RMS, in the energy's coordinates) from `x`: Newton converges to the nearest
    critical point, which may be a saddle beside the flow's end. `newton`: its RMS G
    `newton_tol` (`None`: 1e-10 with float64, else 1e-5), `max_newton` iterations and
    `matrix_free` (`None`: dense up to `solvers.DENSE_MAX` entries); an energy
    model's Newton takes no `preconditioner`. Returns the `FixedPointResult` (its `x` in
    the model's dtype)."""
    if newton.preconditioner is not None:
        raise ValueError("polish_near: an energy model's Newton takes no preconditioner.")
    wide = jnp.float64 if float64_available() else jnp.asarray(x).dtype
    tol = newton.newton_tol
    if tol is None:
        tol = 1e-10 if wide == jnp.float64 else 1e-5
    m64, x64, a64 = cast((model, jnp.asarray(x), args), wide)
    found = solvers.find_fixed_point(
        m64,
        x64,
        args=a64,
        linear=LINEAR[newton.matrix_free],
        method="newton",
        tol=tol,
        max_steps=newton.max_newton,
    )
    moved = energy_coordinates(
        model, jnp.asarray(found.x, jnp.asarray(x).dtype), args
    ) - energy_coordinates(model, jnp.asarray(x), args)
    if not (bool(found.success) and float(jnp.sqrt(jnp.mean(moved**2))) < within):
        return None
    return found


PATH_OPTIONS = solvers.SolveOptions(
    solver="tsit5", rtol=1e-6, atol=1e-8, max_steps=100_000, flow="projected"
)
"""How the chain's images flow between spreadings by default: tsit5 at rtol 1e-6, atol
1e-8, the projected flow (a flat model ignores the flow's name)."""


@dataclasses.dataclass(frozen=True)
class PathSettings(Settings):
    """How `minimum_energy_path` relaxes its chain.

    - `images`: states on the chain, the two ends included (an integer >= 5).
    - `interval`: the flow time (tau) between two spreadings: short against the time
      the flow takes to slide an image into a minimum (about the inverse of the
      slowest rate along the path).
    - `max_iterations`: spreadings at most.
    - `path_tol`: the RMS move of the chain per unit of flow time below which it has
      converged (the state's units per tau).
    - `newton`: the saddle's polish (`NewtonSettings`: `newton_tol` None is 1e-10 in
      float64, 1e-5 in float32).
    - `k`: smallest Hessian eigenvalues kept at the saddle.
    """

    images: int = 17
    interval: float = 0.5
    max_iterations: int = 400
    path_tol: float = 1e-5
    newton: NewtonSettings = NewtonSettings(max_newton=30)
    k: int = 4

    def check(self) -> None:
        if not is_count(self.images, 5):
            raise ValueError(f"PathSettings.images must be an integer >= 5 (got {self.images!r}).")
        if not is_count(self.max_iterations, 1):
            raise ValueError(
                "PathSettings.max_iterations must be an integer >= 1 "
                f"(got {self.max_iterations!r})."
            )
        if not is_count(self.k, 1):
            raise ValueError(f"PathSettings.k must be an integer >= 1 (got {self.k!r}).")
        positive(self, "interval")
        positive(self, "path_tol")


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class MinimumEnergyPath(Result):
    """The result of `minimum_energy_path`: the relaxed chain from `a` to `b`, its
    energies, and the polished highest saddle with its Morse index."""

    states: np.ndarray
    """`[images, *shape]`: the chain, `a` first and `b` last."""
    energies: np.ndarray
    """`[images]`: the energy of each image."""
    arclength: np.ndarray
    """`[images]`: the distance along the chain from `a` (RMS in the energy's
    coordinates, `g` for the ET, summed over the links)."""
    saddle: np.ndarray
    """`[*shape]`: the polished saddle (the chain's highest image, then Newton)."""
    saddle_energy: float
    """Its energy."""
    barrier: float
    """`saddle_energy - E(a)`: the barrier from `a` to `b` along the path."""
    barrier_back: float
    """`saddle_energy - E(b)`."""
    saddle_image: int
    """Which image of the chain was polished."""
    morse_index: int
    """Negative eigenvalues of the tangent Hessian at the saddle (1: a transition
    state)."""
    hessian_smallest: np.ndarray
    """`[k]`: its smallest eigenvalues (energy per squared `g`, ascending)."""
    saddle_residual_rms: float
    """RMS of the residual at the polished saddle."""
    saddle_shift: float
    """RMS distance in the energy's coordinates from the chain's image to the polished
    saddle (small: Newton stayed on the path)."""
    direction: np.ndarray
    """`[*shape]`: the chain's unit tangent at the saddle in the energy's coordinates,
    pointing from `a` to `b` (the unstable direction: a dividing plane through the
    saddle has it as its normal)."""
    interior_minima: int
    """Images (ends excluded) whose energy is below both neighbours': intermediate
    minima between `a` and `b`."""
    iterations: int
    """Spreadings run."""
    converged: bool
    """Whether the chain's move fell below `path_tol` before `max_iterations`."""
    movement: float
    """The chain's last RMS move per unit of flow time."""
    metadata: dict
    """Dtype, settings and versions."""


@eqx.filter_jit
def _spread(chain, a, model, args):
    """The chain respread at equal arclength (in its own coordinates) by linear
    interpolation, its ends kept, put back onto `a`'s manifold."""
    flat = chain.reshape(chain.shape[0], -1)
    links = jnp.sqrt(jnp.sum(jnp.diff(flat, axis=0) ** 2, axis=1))
    s = jnp.concatenate([jnp.zeros(1, flat.dtype), jnp.cumsum(links)])
    target = jnp.linspace(0.0, s[-1], chain.shape[0])
    index = jnp.clip(jnp.searchsorted(s, target, side="right") - 1, 0, chain.shape[0] - 2)
    weight = ((target - s[index]) / jnp.maximum(links[index], 1e-300))[:, None]
    moved = ((1 - weight) * flat[index] + weight * flat[index + 1]).reshape(chain.shape)
    system = solvers.as_manifold_system(model)
    back = jax.vmap(lambda x: system.from_manifold(system.to_manifold(x, args), a, args))(moved)
    return back.at[0].set(chain[0]).at[-1].set(chain[-1])


class _Climbing(eqx.Module):
    """`model` with its field reflected along the unit vector `along` (the chain's
    tangent at its highest image): `v - 2 (v . t) t` climbs along `t` and descends across
    it, so that its only attracting zeros near the chain are the model's index-1 saddles
    (the climbing image of Henkelman, Uberuaga and Jonsson, J. Chem. Phys. 113, 2000).
    Its zeros are the model's (a reflection is invertible); energy and residual are the
    model's."""

    model: Any
    along: jax.Array

    def energy(self, x, args=None):
        return self.model.energy(x, args)

    def residual(self, x, args=None):
        return self.model.residual(x, args)

    def vector_field(self, t, x, args=None, flow="projected"):
        v = self.model.vector_field(t, x, args, flow)
        return v - 2 * jnp.vdot(v, self.along) * self.along


# RMS residual at which the climb hands its image to Newton, and the flow time it may take.
_CLIMB_TO = 1e-5
_CLIMB_TIME = 1e4


def _climb(model, chain, top, args, options, a):
    """The chain's highest image flowed up along the chain's tangent and down across it
    (`_Climbing`) to RMS residual `_CLIMB_TO` (or `_CLIMB_TIME`), kept on `a`'s
    manifold: a start from which Newton reaches the saddle."""
    system = solvers.as_manifold_system(model)
    tangent = system.tangent_projection(chain[top], chain[top + 1] - chain[top - 1], args)
    along = tangent / jnp.sqrt(jnp.vdot(tangent, tangent))
    sol = solvers.solve(
        _Climbing(model, along),
        chain[top],
        args=args,
        options=options,
        t1=_CLIMB_TIME,
        stop=solvers.FixedPointStop(_CLIMB_TO),
        throw=False,
    )
    end = system.from_manifold(system.to_manifold(sol.x_final, args), a, args)
    return end if bool(jnp.all(jnp.isfinite(end))) else chain[top]


def _energies(model, chain, args) -> np.ndarray:
    return np.asarray(jax.vmap(lambda x: model.energy(x, args))(chain))


def minimum_energy_path(
    model: solvers.EnergySystem,
    a: Float[ArrayLike, "*shape"],
    b: Float[ArrayLike, "*shape"],
    *,
    args: Any = None,
    options: solvers.SolveOptions = PATH_OPTIONS,
    settings: PathSettings = PathSettings(),
) -> MinimumEnergyPath:
    """The minimum energy path from the minimum `a` to the minimum `b` of `model` and
    the highest saddle on it (module docstring).

    **Arguments:**

    - `model`: an energy system (`energy`, `vector_field`, `residual`); on a manifold
      the chain keeps `a`'s token means and scales.
    - `a`, `b`: two minima (polished fixed points, one state each, `[N, D]` for the ET);
      `b` is put onto `a`'s manifold first.
    - `args`: the conditions, shared by every image.
    - `options`: how the images flow between spreadings (`PATH_OPTIONS`).
    - `settings`: a `PathSettings` (images, interval, iterations, tolerance, the
      saddle's Newton and its `k` eigenvalues).

    **Returns:** a `MinimumEnergyPath`. A `RuntimeError` where Newton does not polish
    the chain's maximum into a critical point (with its residual).
    """
    require(model, "minimum_energy_path", ("energy", "vector_field", "residual"))
    if not isinstance(settings, PathSettings):
        raise TypeError(
            f"settings must be an analysis.PathSettings (got {type(settings).__name__})."
        )
    a, b = jnp.asarray(a), jnp.asarray(b, jnp.asarray(a).dtype)
    if a.shape != b.shape:
        raise ValueError(f"a and b must be states of one shape (got {a.shape} and {b.shape}).")
    if not (bool(jnp.all(jnp.isfinite(a))) and bool(jnp.all(jnp.isfinite(b)))):
        raise ValueError("a and b must be finite states.")
    system = solvers.as_manifold_system(model)
    b = system.from_manifold(system.to_manifold(b, args), a, args)
    m = settings.images
    fractions = jnp.linspace(0.0, 1.0, m, dtype=a.dtype).reshape((m,) + (1,) * a.ndim)
    chain = _spread((1 - fractions) * a + fractions * b, a, model, args)
    interval = settings.interval
    movement, iterations, converged = float("inf"), 0, False
    for iterations in range(1, settings.max_iterations + 1):
        sol = solvers.solve(model, chain[1:-1], args=args, options=options, t1=interval)
        flowed = chain.at[1:-1].set(sol.x_final)
        spread = _spread(flowed, a, model, args)
        movement = float(jnp.sqrt(jnp.mean((spread - chain) ** 2))) / interval
        chain = spread
        if not np.isfinite(movement):
            raise RuntimeError(
                f"minimum_energy_path: the chain became non-finite after {iterations} "
                "spreadings; reduce PathSettings.interval or tighten options."
            )
        if movement < settings.path_tol:
            converged = True
            break
    energies = _energies(model, chain, args)
    interior = [i for i in range(1, m - 1) if energies[i] < min(energies[i - 1], energies[i + 1])]
    top = int(np.argmax(energies[1:-1])) + 1
    tol = settings.newton.newton_tol
    if tol is None:
        tol = 1e-10 if a.dtype == jnp.float64 else 1e-5
    climbed = _climb(model, chain, top, args, options, a)
    polished = solvers.find_fixed_point(
        model,
        climbed,
        args=args,
        method="newton",
        linear="auto",
        tol=tol,
        max_steps=settings.newton.max_newton,
    )
    if not bool(polished.success):
        raise RuntimeError(
            "minimum_energy_path: Newton did not polish the chain's energy maximum (image "
            f"{top} of {m}, climbed) into a critical point (RMS residual "
            f"{float(polished.residual_rms):.3g} after {int(polished.steps)} iterations); "
            "relax the chain further (PathSettings.max_iterations, a smaller path_tol or "
            "more images)."
        )
    saddle = polished.x
    coords = jax.vmap(lambda x: energy_coordinates(model, x, args))(chain)
    g_saddle = energy_coordinates(model, saddle, args)
    tangent = coords[top + 1] - coords[top - 1]
    direction = tangent / jnp.sqrt(jnp.sum(tangent**2))
    links = jnp.sqrt(jnp.mean(jnp.diff(coords, axis=0) ** 2, axis=tuple(range(1, coords.ndim))))
    spectrum = hessian_eigenvalues(model, saddle, args, k=settings.k)
    saddle_energy = float(model.energy(saddle, args))
    return MinimumEnergyPath(
        states=np.asarray(chain),
        energies=energies,
        arclength=np.concatenate([[0.0], np.cumsum(np.asarray(links))]),
        saddle=np.asarray(saddle),
        saddle_energy=saddle_energy,
        barrier=saddle_energy - float(energies[0]),
        barrier_back=saddle_energy - float(energies[-1]),
        saddle_image=int(top),
        morse_index=int(spectrum.morse_index),
        hessian_smallest=np.asarray(spectrum.smallest),
        saddle_residual_rms=float(polished.residual_rms),
        saddle_shift=float(jnp.sqrt(jnp.mean((g_saddle - coords[top]) ** 2))),
        direction=np.asarray(direction),
        interior_minima=len(interior),
        iterations=int(iterations),
        converged=converged,
        movement=movement,
        metadata=metadata(
            study="minimum_energy_path",
            dtype=a.dtype,
            settings=settings.to_json(),
            options=dict(
                solver=str(options.solver), rtol=options.rtol, atol=options.atol, flow=options.flow
            ),
        ),
    )
