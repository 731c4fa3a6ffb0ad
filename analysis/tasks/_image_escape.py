"""Escapes between two memories of a trained image model at a temperature, against
Kramers' law.

On the first image's core problem (float64): the well `a` is its fixed point (the
projected flow, then Newton); the other memory `b` is the nearest distinct minimum that
`probes` noisy paths reach from `a` (tangent noise at `probe_temperature` for
`probe_time`, then the flow without noise to a fixed point, then Newton); the barrier is
that of the highest saddle on the minimum energy path from `a` to `b`
(`landscape.minimum_energy_path`); where that path passes an intermediate minimum, `b`
becomes the first one (polished) and the path is found again, up to four times, so that
`b` is adjacent to `a` and the saddle between them is one (an index-1 saddle where the
chain resolves it; its Morse index is reported). Then `paths` noisy paths leave `a` at each
temperature (by default `barrier / barrier_over_t`, so that the barrier is a fixed
number of temperatures high whatever its size) and each stops once past the dividing
plane through the saddle normal to the path (`energy.escape_times`): the slope of
`log mean escape time` against `1/T` is set against the barrier.
"""

import dataclasses
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float

from et_ode import solvers
from et_ode.tasks import MaskedImageET, Masking
from et_ode.vocab import Flow

from .._common import cast, take
from .._geometry import energy_coordinates
from .._records import metadata
from .._results import Result
from .._settings import Settings, positive
from ..energy import EscapeSettings, EscapeTimes, escape_times
from ..landscape import PathSettings, minimum_energy_path
from ._image_trajectory import normalised_patches

# The flow to a fixed point (the well, the probes' ends): RMS G at which the flow stops
# before Newton polishes it, and its steps.
_DESCENT = solvers.SolveOptions(solver="tsit5", rtol=1e-7, atol=1e-9, max_steps=100_000)
_DESCENT_STOP = 1e-6
# RMS distance in g below which two minima are one.
_SAME = 1e-3
# Times the other memory is replaced by the first intermediate minimum on the path to it.
_MAX_HOPS = 4


@dataclasses.dataclass(frozen=True)
class ImageEscapeSettings(Settings):
    """What `image_escape` runs.

    - `barrier_over_t`: the temperatures as the barrier over `T` (used where no
      temperatures are given): Kramers' law is the limit of large values.
    - `paths`: noisy paths per temperature (one batch); `t1`: each path's horizon
      (tau); `dt0`: the Euler-Maruyama step.
    - `probes`, `probe_temperature`, `probe_time`: the noisy paths that look for the
      other memory (module docstring).
    - `path`: the minimum energy path's `PathSettings`.
    - `seed`: the noise's.
    """

    barrier_over_t: tuple[float, ...] = (1.0, 1.5, 2.0, 3.0, 4.0)
    paths: int = 200
    t1: float = 10_000.0
    dt0: float = 0.05
    probes: int = 16
    probe_temperature: float = 0.3
    probe_time: float = 20.0
    path: PathSettings = PathSettings(images=17, path_tol=1e-4)
    seed: int = 0

    def check(self) -> None:
        ratios = np.asarray(self.barrier_over_t, float)
        if ratios.ndim != 1 or ratios.size < 2 or not np.all(ratios > 0):
            raise ValueError(
                "ImageEscapeSettings.barrier_over_t needs at least two positive values "
                f"(got {self.barrier_over_t!r})."
            )
        for name in ("t1", "dt0", "probe_temperature", "probe_time"):
            positive(self, name)
        for name in ("paths", "probes"):
            if not (isinstance(getattr(self, name), int) and getattr(self, name) >= 2):
                raise ValueError(
                    f"ImageEscapeSettings.{name} must be an integer >= 2 "
                    f"(got {getattr(self, name)!r})."
                )


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ImageEscape(Result):
    """The result of `image_escape`: the two memories, the minimum energy path and its
    saddle, the escape times at each temperature and Kramers' comparison. Energies in
    the model's units, times in tau."""

    well_energy: float
    """`E(a)`: the image's own fixed point."""
    neighbour_energy: float
    """`E(b)`: the other memory."""
    neighbour_distance: float
    """RMS distance in `g` from `a` to `b`."""
    minima_found: int
    """Distinct minima the probes reached (`a` among them where one came back)."""
    path_energies: np.ndarray
    """`[images]`: `E - E(a)` along the minimum energy path from `a` to `b`."""
    path_arclength: np.ndarray
    """`[images]`: the distance along it (RMS in `g`, summed over links)."""
    interior_minima: int
    """Intermediate minima left on the final path (0 once `b` is adjacent)."""
    hops: int
    """Times `b` was replaced by the first intermediate minimum on the path to it."""
    path_converged: bool
    """Whether the path's chain converged (`PathSettings.path_tol`)."""
    saddle_energy: float
    """The polished saddle's energy."""
    barrier: float
    """`E(saddle) - E(a)`."""
    morse_index: int
    """The saddle's Morse index (1: a transition state)."""
    unstable_eigenvalue: float
    """The saddle's negative Hessian eigenvalue (energy per squared `g`)."""
    escapes: EscapeTimes
    """The escape times (`energy.escape_times`), past the saddle's dividing plane."""
    slope_over_barrier: float
    """Kramers' slope over the barrier (1 where the law holds)."""
    kramers: str
    """`"holds"` (the barrier within the slope's 95 % interval, the interval narrower
    than the barrier), `"fails"` (outside it) or `"unresolved"` (too few escapes: the
    interval wider than the barrier, or fewer than two temperatures with an escape)."""
    flow: str
    """The flow of the escapes (`"projected"`: tangent noise; `"native"`: isotropic)."""
    metadata: dict
    """Dtype, seed, settings and versions."""


def _polished(core, x, args):
    found = solvers.find_fixed_point(core, x, args=args, method="newton", linear="auto", tol=1e-9)
    if not bool(found.success):
        raise RuntimeError(
            "image_escape: Newton did not polish a flow's end into a fixed point (RMS G "
            f"{float(found.residual_rms):.3g}); the model may have no minima on this image."
        )
    return found.x


def _neighbour(core, well, args, settings: ImageEscapeSettings, key):
    """The nearest distinct minimum the probes reach from `well`, polished, and the
    number of distinct minima they reached."""
    steps = solvers.constant_step_count(0.0, settings.probe_time, settings.dt0) or 0
    hot = solvers.solve(
        core,
        jnp.broadcast_to(well, (settings.probes, *well.shape)),
        args=args,
        options=solvers.SolveOptions(
            solver="euler", dt0=settings.dt0, flow="projected", max_steps=steps + 1
        ),
        t1=settings.probe_time,
        temperature=settings.probe_temperature,
        noise="tangent",
        key=key,
    )
    cold = solvers.solve(
        core,
        hot.x_final,
        args=args,
        options=_DESCENT.replace(flow="projected"),
        t1=1e4,
        stop=solvers.FixedPointStop(_DESCENT_STOP),
        throw=False,
    )
    ends = [x for x, r in zip(cold.x_final, cold.stats["stop_reason"]) if r == "fixed_point"]
    g_well = energy_coordinates(core, well, args)
    distinct: list[tuple[float, jax.Array, jax.Array]] = []  # (from the well, g, x)
    for x in ends:
        g = energy_coordinates(core, x, args)
        if all(float(jnp.sqrt(jnp.mean((g - h) ** 2))) > _SAME for _, h, _ in distinct):
            distinct.append((float(jnp.sqrt(jnp.mean((g - g_well) ** 2))), g, x))
    others = sorted((d, i) for i, (d, _, _) in enumerate(distinct) if d > _SAME)
    if not others:
        raise RuntimeError(
            f"image_escape: the {settings.probes} probes at T = "
            f"{settings.probe_temperature:g} came back to the image's own minimum; raise "
            "ImageEscapeSettings.probe_temperature or probe_time."
        )
    return _polished(core, distinct[others[0][1]][2], args), len(distinct)


def _kramers(escapes: EscapeTimes, barrier: float) -> str:
    """The verdict of `ImageEscape.kramers`."""
    low, high = escapes.slope_low, escapes.slope_high
    if not (np.isfinite(low) and np.isfinite(high)) or high - low > barrier:
        return "unresolved"
    return "holds" if low <= barrier <= high else "fails"


def image_escape(
    model: MaskedImageET,
    images: Float[ArrayLike, "B H W C"],
    masking: Masking,
    temperatures: Sequence[float] | None = None,
    *,
    flow: Flow = "projected",
    settings: ImageEscapeSettings = ImageEscapeSettings(),
) -> ImageEscape:
    """Escapes from the first image's fixed point to its nearest other memory at
    several temperatures, against the barrier of the saddle between them (module
    docstring), in float64.

    **Arguments:**

    - `model`, `images` (`[B, S, S, C]` in [0, 1]; the first is used) and `masking`.
    - `temperatures`: at least two (None: `barrier / settings.barrier_over_t`).
    - `flow`: of the escapes: `"projected"` (tangent noise, which samples
      `exp(-E/T)` on the manifold) or `"native"` (isotropic noise on `x`, the
      authors' kind).
    - `settings`: an `ImageEscapeSettings`.

    **Returns:** an `ImageEscape`.
    """
    if flow not in ("projected", "native"):
        raise ValueError(f"flow must be 'projected' or 'native' (got {flow!r}).")
    images = jnp.asarray(images)
    first = jax.tree.map(lambda a: a[:1], masking)
    x0, conditions, _, _ = model.encode_batch(normalised_patches(model, images[:1]), first)
    core, x0, conditions = cast((model.core, x0, conditions), jnp.float64)
    args = take(conditions, 0, True)
    probe_key, escape_key = jax.random.split(jax.random.key(settings.seed))
    start = solvers.solve(
        core,
        x0[0],
        args=args,
        options=_DESCENT.replace(flow="projected", solver="auto"),
        t1=1e4,
        stop=solvers.FixedPointStop(_DESCENT_STOP),
    )
    well = _polished(core, start.x_final, args)
    neighbour, found = _neighbour(core, well, args, settings, probe_key)
    path, hops = minimum_energy_path(core, well, neighbour, args=args, settings=settings.path), 0
    while path.interior_minima and hops < _MAX_HOPS:
        # the neighbour is not adjacent: take the path's first intermediate minimum instead
        e = path.energies
        first = next(i for i in range(1, len(e) - 1) if e[i] < min(e[i - 1], e[i + 1]))
        neighbour = _polished(core, jnp.asarray(path.states[first]), args)
        path = minimum_energy_path(core, well, neighbour, args=args, settings=settings.path)
        hops += 1
    barrier = path.barrier
    if temperatures is None:
        temperatures = [barrier / r for r in settings.barrier_over_t]
    g_saddle = jnp.asarray(energy_coordinates(core, jnp.asarray(path.saddle), args))
    normal = jnp.asarray(path.direction)

    def past_the_saddle(x, args):
        return jnp.sum((core.norm(x) - g_saddle) * normal) > 0

    escapes = escape_times(
        core,
        well,
        past_the_saddle,
        temperatures,
        options=solvers.SolveOptions(solver="euler", dt0=settings.dt0, flow=flow),
        settings=EscapeSettings(
            paths=settings.paths,
            t1=settings.t1,
            noise="tangent" if flow == "projected" else "isotropic",
            seed=settings.seed,
        ),
        barrier=barrier,
        args=args,
        key=escape_key,
    )
    e_well = float(core.energy(well, args))
    g_well, g_neighbour = (energy_coordinates(core, x, args) for x in (well, neighbour))
    return ImageEscape(
        well_energy=e_well,
        neighbour_energy=float(core.energy(neighbour, args)),
        neighbour_distance=float(jnp.sqrt(jnp.mean((g_well - g_neighbour) ** 2))),
        minima_found=found,
        path_energies=np.asarray(path.energies) - e_well,
        path_arclength=np.asarray(path.arclength),
        interior_minima=path.interior_minima,
        hops=hops,
        path_converged=path.converged,
        saddle_energy=path.saddle_energy,
        barrier=barrier,
        morse_index=path.morse_index,
        unstable_eigenvalue=float(np.min(path.hessian_smallest)),
        escapes=escapes,
        slope_over_barrier=escapes.slope / barrier,
        kramers=_kramers(escapes, barrier),
        flow=flow,
        metadata=metadata(
            study="image_escape",
            dtype=jnp.float64,
            seeds={"noise": settings.seed},
            settings=settings.to_json(),
        ),
    )
