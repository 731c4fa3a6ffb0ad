"""Basins of a `MaskedImageET`'s core on its own inputs: a plane through two held-out
images' encodings and random starts, integrated together to fixed points (`basins`),
each attractor decoded as an image.

The plane: with `x_a`, `x_b` the two images' initial core states (`encode_batch`, the
starts the model's own dynamics take), the starts are `c + a u + b v` on a grid of
`resolution x resolution` points of `a, b` in `extent`, where `c = (x_a + x_b)/2` and
`u = (x_a - x_b)/2` (so `(a, b) = (1, 0)` is the first image and `(-1, 0)` the second),
and `v` is a random direction orthogonal to `u` with the same norm. The random starts
are tokens drawn from a normal distribution with the first image's RMS token size. All
starts run under the first image's conditions (its mask and context; where the model
clamps visible tokens they keep the first image's values in every start), so that every
start is a state of one dynamical system. Decoding uses the first image's context
statistics.
"""

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import DTypeLike
from jaxtyping import ArrayLike, Float

from et_ode import solvers
from et_ode.tasks import MaskedImageET, Masking

from .._common import cast, take
from .._records import model_dtype
from ..landscape import BASIN_OPTIONS, BasinSettings, basin_entropy, basins, grid_starts
from ._image_trajectory import normalised_patches, to_display
from ._task_records import ImageAttractor, ImageBasins, ImagePlane, ImageRandomStarts


def _plane(x_a, x_b, key):
    """`(c, u, v)` of the module docstring."""
    center, u = (x_a + x_b) / 2, (x_a - x_b) / 2
    v = jax.random.normal(key, u.shape, u.dtype)
    v = v - jnp.vdot(v, u) / jnp.vdot(u, u) * u
    return center, u, v * jnp.linalg.norm(u) / jnp.linalg.norm(v)


def image_starts(x0: jax.Array, args: Any, random_starts: int, key: jax.Array) -> jax.Array:
    """`[1 + random_starts, N, D]`: the image's core state `x0 [N, D]` and random states
    whose tokens are normal with its RMS token size, clamped tokens (`args.clamped`,
    where the model has them) kept at the image's values (module docstring)."""
    size = jnp.sqrt(jnp.mean(x0**2))
    noise = size * jax.random.normal(key, (random_starts,) + x0.shape, x0.dtype)
    clamped = getattr(args, "clamped", None)
    if clamped is not None:
        noise = jnp.where(clamped[None, :, None], x0[None], noise)
    return jnp.concatenate([x0[None], noise])


def image_basins(
    model: MaskedImageET,
    images: Float[ArrayLike, "2 H W C"],
    masking: Masking,
    *,
    resolution: int = 64,
    random_starts: int = 1000,
    extent: tuple[float, float] = (-1.5, 1.5),
    seed: int = 0,
    dtype: DTypeLike = jnp.float64,
    options: solvers.SolveOptions = BASIN_OPTIONS,
    settings: BasinSettings = BasinSettings(),
) -> ImageBasins:
    """The basins of the core of `model` (a `MaskedImageET`) on the plane through two
    images and on random starts (module docstring), in one batched solve.

    **Arguments:**

    - `images [2, S, S, C]` in [0, 1] and `masking` with `[2, N]` fields: the two
      images the plane goes through; the first one's conditions are used throughout.
    - `resolution`: grid points per side of the plane (`resolution^2` starts);
      `random_starts`: how many random starts (0: none); `extent`: the range of `a` and
      `b`; `seed`: for `v` and the random starts.
    - `dtype`: of the solve (float64 needs `jax_enable_x64`).
    - `options`, `settings`: `basins`' (`solvers.SolveOptions`, default
      `BASIN_OPTIONS`; `BasinSettings`: the stop and horizon, `distance_tol`, the
      polish, `k`, the entropy's `box`); the attractors reached from the grid points
      nearest the two images are polished first.

    **Returns:** an `ImageBasins` (its fields, and those of its `ImageAttractor`s,
    `ImagePlane` and `ImageRandomStarts`, say what each holds).
    """
    images = jnp.asarray(images)
    if images.ndim != 4 or images.shape[0] != 2:
        raise ValueError(
            "image_basins needs exactly two images [2, S, S, C] (the plane "
            f"goes through both); got shape {images.shape}."
        )
    box = settings.box
    if resolution < box or random_starts < 0:
        raise ValueError(
            f"resolution >= box ({box}: the basin entropy's boxes) and "
            f"random_starts >= 0 are needed (got {resolution}, "
            f"{random_starts})."
        )
    x0, conditions, mean, std = model.encode_batch(normalised_patches(model, images), masking)
    core, x0, conditions = cast((model.core, x0, conditions), jnp.dtype(dtype))
    args = take(conditions, 0, True)
    plane_key, random_key = jax.random.split(jax.random.key(seed))
    center, u, v = _plane(x0[0], x0[1], plane_key)
    plane_starts, a, b = grid_starts(center, u, v, extent=extent, resolution=resolution)
    grid = jnp.asarray(plane_starts, x0.dtype)
    clamped = getattr(args, "clamped", None)
    if clamped is not None:  # clamped tokens are the first image's in every start
        grid = jnp.where(clamped[None, :, None], x0[0][None], grid)
    random = image_starts(x0[0], args, random_starts, random_key)[1:]
    starts = jnp.concatenate([grid, random])
    n_grid = resolution * resolution
    nearest = [
        int(np.argmin(np.abs(a - pa))) * resolution + int(np.argmin(np.abs(b)))
        for pa in (1.0, -1.0)
    ]  # the grid points nearest the two images
    found = basins(
        core, starts, args=args, polish_first=nearest, options=options, settings=settings
    )
    labels = np.asarray(found["labels"])
    plane_labels, random_labels = labels[:n_grid], labels[n_grid:]
    count = len(found["attractors"])

    def fractions(part):
        return np.bincount(part[part >= 0], minlength=count) / max(part.size, 1)

    plane_fractions, random_fractions = fractions(plane_labels), fractions(random_labels)
    polished = [i for i, att in enumerate(found["attractors"]) if att["polished"]]
    decoded = dict(
        zip(
            polished,
            to_display(
                model,
                jax.vmap(model.decode)(
                    jnp.asarray(
                        np.stack([found["attractors"][i]["x"] for i in polished])
                        if polished
                        else np.zeros((0,) + center.shape),
                        model_dtype(model),
                    )
                )
                * std[0]
                + mean[0],
            ),
        )
    )
    attractors = []
    for i, att in enumerate(found["attractors"]):
        kept = {k: v for k, v in att.items() if k not in ("x", "fraction", "count")}
        attractors.append(
            ImageAttractor(
                **kept,
                plane_fraction=float(plane_fractions[i]),
                random_fraction=float(random_fractions[i]),
                decoded_image=decoded.get(i),
            )
        )
    grid_labels = plane_labels.reshape(resolution, resolution)
    reasons, counts = np.unique(found["stop_reasons"], return_counts=True)
    meta = dict(
        found["metadata"],
        study="image_basins",
        resolution=int(resolution),
        random_starts=int(random_starts),
        extent=[float(e) for e in extent],
        seed=int(seed),
    )
    return ImageBasins(
        attractors=attractors,
        plane=ImagePlane(
            labels_grid=grid_labels,
            a=a,
            b=b,
            image_points={"image 0": [1.0, 0.0], "image 1": [-1.0, 0.0]},
            fractions=plane_fractions,
            not_converged=int(np.sum(plane_labels < 0)),
            basin_entropy=basin_entropy(grid_labels, box),
        ),
        random=ImageRandomStarts(
            labels=random_labels,
            fractions=random_fractions,
            distinct=int(np.unique(random_labels[random_labels >= 0]).size),
            not_converged=int(np.sum(random_labels < 0)),
        ),
        token_structure=found["token_structure"],
        batched_iterations=found["batched_iterations"],
        one_by_one_iterations=found["one_by_one_iterations"],
        stop_reasons={str(r): int(c) for r, c in zip(reasons, counts)},
        metadata=meta,
    )
