"""A `MaskedImageET`'s attractors across a parameter, seen from one held-out image: its
own encoding and random starts under its conditions, followed by `basin_continuation`.

The starts are the image's initial core state (`encode_batch`, where the model's own
dynamics start) and `random_starts` states whose tokens are drawn from a normal
distribution with that state's RMS token size (where the model clamps visible tokens,
they keep the image's values), all under the image's conditions, so that every start
is a state of one dynamical system, at every value of the parameter. The attractors'
states (the core's `[N, D]` each) are not kept: each track keeps its energies,
fractions, stability and jumps, and `image_track` says which track the image's own
start reaches at each value.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import DTypeLike
from jaxtyping import ArrayLike, Float

from et_ode import solvers
from et_ode.tasks import MaskedImageET, Masking

from .._common import cast, is_count, take
from ..landscape import (
    BASIN_OPTIONS,
    BasinContinuationSettings,
    Parameter,
    basin_continuation,
)
from ._image_basins import image_starts
from ._image_trajectory import normalised_patches
from ._task_records import ImageBasinContinuation, image_basin_continuation_record


def image_basin_continuation(
    model: MaskedImageET,
    images: Float[ArrayLike, "B H W C"],
    masking: Masking,
    ps: Float[ArrayLike, " P"],
    *,
    parameter: Parameter = "beta",
    random_starts: int = 64,
    seed: int = 0,
    dtype: DTypeLike = jnp.float64,
    options: solvers.SolveOptions = BASIN_OPTIONS,
    settings: BasinContinuationSettings = BasinContinuationSettings(),
) -> ImageBasinContinuation:
    """The attractors of `model`'s core reached from the first of `images` and from
    random starts, followed across the values `ps` of `parameter` (module docstring).

    **Arguments:**

    - `images [B, S, S, C]` in [0, 1] and `masking` with `[B, N]` fields: the first
      image (and its mask) is used.
    - `ps`: the parameter's values (`basin_continuation`'s); `parameter`: `"beta"`,
      `"memory_scale"`, `"field_strength"` or a function (as `continuation`'s).
    - `random_starts`: how many random starts beside the image's own; `seed`: theirs.
    - `dtype`: of the solves (float64 needs `jax_enable_x64`).
    - `options`, `settings`: `basin_continuation`'s (`solvers.SolveOptions`, default
      `BASIN_OPTIONS`; `BasinContinuationSettings`: how tracks are matched, and
      `basins`' `BasinSettings` at every value); the image's own attractor is polished
      first.

    **Returns:** an `ImageBasinContinuation`: `basin_continuation`'s result with its
    tracks without their states (`ImageTrack`s), the image's `image_track`, and
    `random_starts`, `seed` in the metadata.
    """
    images = jnp.asarray(images)
    if images.ndim != 4 or images.shape[0] < 1:
        raise ValueError(
            f"image_basin_continuation needs images [B, S, S, C] (got shape {images.shape})."
        )
    if not is_count(random_starts, 0):
        raise ValueError(f"random_starts must be an integer >= 0 (got {random_starts!r}).")
    x0, conditions, _, _ = model.encode_batch(normalised_patches(model, images), masking)
    core, x0, conditions = cast((model.core, x0, conditions), jnp.dtype(dtype))
    args = take(conditions, 0, True)
    starts = image_starts(x0[0], args, random_starts, jax.random.key(seed))
    result = basin_continuation(
        core,
        starts,
        ps,
        args=args,
        parameter=parameter,
        polish_first=[0],
        options=options,
        settings=settings,
    )
    return image_basin_continuation_record(
        result,
        image_track=np.asarray(result.labels)[:, 0],
        metadata=dict(
            result.metadata,
            study="image_basin_continuation",
            random_starts=int(random_starts),
            seed=int(seed),
        ),
    )
