"""Path independence: do different starts reach the same fixed point?

Each start is run to a fixed point of the projected flow (which keeps every token's
mean and scale) with `solvers.FixedPointStop`, optionally polished by Newton's method
(`solvers.find_fixed_point`), and the end states are compared in `g = LayerNorm(x)`,
the coordinates in which a fixed point is a critical point of `E` on the manifold (any
`solvers.EnergySystem` runs: a model's `energy_coordinates` where it has them, else `x`;
its projected flow is its own, the same as its only flow for a flat model).
"""

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, PRNGKeyArray

from et_ode import solvers

from .._common import as_batch, shard, take
from .._geometry import energy_coordinates, require
from .._records import metadata, model_dtype
from ..landscape import GRADIENT_ASYMMETRY, hessian_eigenvalues, polish_near
from ._settings import (
    FIXED_POINTS_OPTIONS,
    FIXED_POINTS_POLISH,
    FixedPointSettings,
    require_options,
    solver_name,
)
from ._stability_records import FixedPoints


def matched_noise(
    x: Float[ArrayLike, "*batch N D"], key: PRNGKeyArray
) -> Float[Array, "*batch N D"]:
    """Gaussian noise with each token's mean and standard deviation taken from `x`
    (`[N, D]` or `[B, N, D]`): a start at the data's scale that carries none of its
    content."""
    x = jnp.asarray(x)
    noise = jax.random.normal(key, x.shape, x.dtype)
    noise = (noise - noise.mean(-1, keepdims=True)) / noise.std(-1, keepdims=True)
    return x.mean(-1, keepdims=True) + x.std(-1, keepdims=True) * noise


def standard_starts(
    x: Float[ArrayLike, "N D"], other_end_state: Float[ArrayLike, "N D"], key: PRNGKeyArray
) -> tuple[Float[Array, "3 N D"], list[str]]:
    """The three starts of the path-independence question for one sample `x: [N, D]`:
    the data itself, another sample's end state (`other_end_state: [N, D]`), and
    `matched_noise(x, key)`. Returns `(starts [3, N, D], labels)`."""
    x = jnp.asarray(x)
    starts = jnp.stack([x, jnp.asarray(other_end_state, x.dtype), matched_noise(x, key)])
    return starts, ["data", "another end state", "matched noise"]


def _components(close):
    """Connected components of a boolean adjacency matrix: a label per node."""
    n = close.shape[0]
    labels = -np.ones(n, int)
    current = 0
    for start in range(n):
        if labels[start] >= 0:
            continue
        stack = [start]
        labels[start] = current
        while stack:
            i = stack.pop()
            for j in np.flatnonzero(close[i] & (labels < 0)):
                labels[j] = current
                stack.append(j)
        current += 1
    return labels


def _morse_index(model, x, args) -> int:
    """The tangent Hessian's Morse index at the fixed point `x`, refused where the
    residual's Jacobian is not symmetric (no Hessian: `_verdict.GRADIENT_ASYMMETRY`)."""
    spectrum = hessian_eigenvalues(model, x, args, k=1)
    if spectrum["asymmetry"] > GRADIENT_ASYMMETRY:
        raise ValueError(
            "morse_index=True needs a residual that is the gradient of the energy; this "
            f"one's Jacobian is not symmetric (relative asymmetry {spectrum['asymmetry']:.2g}) "
            "and has no Morse index: analysis.stability gives such a point's stability "
            "from the flow's eigenvalues."
        )
    return int(spectrum["morse_index"])


def fixed_points(
    model: solvers.EnergySystem,
    starts: Float[ArrayLike, "S N D"],
    args: Any = None,
    *,
    labels: Sequence[str] | None = None,
    t1: float = 1000.0,
    options: solvers.SolveOptions = FIXED_POINTS_OPTIONS,
    settings: FixedPointSettings = FixedPointSettings(),
    args_batched: bool = False,
) -> FixedPoints:
    """Run every start to a fixed point and say whether they coincide.

    **Arguments:**

    - `model`: any `solvers.EnergySystem` (an `et_ode.EnergyTransformer`, say; needs
      `energy`, `vector_field`, `residual`); `starts: [S, N, D]` (for instance the
      data, another sample's end state, `matched_noise(...)`); `args` shared or per
      start (`args_batched=True`).
    - `labels`: a name per start (default `start 0`, ...).
    - `t1`: the cap of each start's solve (tau units), which stops at
      `FixedPointStop(atol=settings.fixed_point_atol)`.
    - `options`: how that solve runs (default `FIXED_POINTS_OPTIONS`: tsit5 at rtol
      1e-10, atol 1e-12); the flow is the projected one, which replaces `options.flow`.
    - `settings`: a `FixedPointSettings`: when two fixed points are the same
      (`distance_tol`), the stop (`fixed_point_atol`), the Newton `polish` before
      comparing, the Morse index (`morse_index`) and the `seeds` recorded.

    **Protocol:** `energy`, `vector_field`, `residual` (refused up front without them);
    optional: `energy_coordinates` (where the distances are measured), a manifold
    (`solvers.find_fixed_point` polishes on it; flat without one).

    **Returns:** a `FixedPoints`: the end states, their distances and clusters, the
    path-independence score, and per start its energy, residual and stop
    (each entry documented on its field).
    """
    require(model, "fixed_points")
    options = require_options("fixed_points", options).replace(flow="projected")
    tolerance, morse_index = settings.fixed_point_atol, settings.morse_index
    xb, _ = as_batch(starts)
    count = xb.shape[0]
    labels = list(labels) if labels is not None else [f"start {i}" for i in range(count)]
    x_in, args_in, _ = shard(xb, args, args_batched)
    sol = solvers.solve(
        model,
        x_in,
        options=options,
        args=args_in,
        t1=t1,
        stop=solvers.FixedPointStop(atol=tolerance),
        args_batched=args_batched,
        throw=False,
    )
    x_star = np.array(sol.x_final)[:count]
    reasons = list(sol.stats["stop_reason"])[:count]
    newton_ok = np.ones(count, bool)

    def coordinates(x, args_i):
        return energy_coordinates(model, jnp.asarray(x), args_i)

    newton = settings.polish or FIXED_POINTS_POLISH
    if settings.polish is not None or morse_index:  # a Morse index needs a fixed point
        for i in range(count):
            polished = polish_near(model, x_star[i], take(args, i, args_batched), newton=newton)
            if polished is not None:
                x_star[i] = np.asarray(polished.x)
            else:
                newton_ok[i] = False
    g_star = np.stack(
        [np.asarray(coordinates(x_star[i], take(args, i, args_batched))) for i in range(count)]
    )
    diff = g_star[:, None] - g_star[None, :]
    distances = np.sqrt(np.mean(diff**2, axis=(-2, -1)))
    close = distances < settings.distance_tol
    cluster = _components(close)
    pairs = np.triu_indices(count, 1)
    score = float(np.mean(close[pairs])) if count > 1 else 1.0
    energy: list[float] = []
    residual: list[float] = []
    morse: list[int] = []
    for i in range(count):
        args_i = take(args, i, args_batched)
        x_i = jnp.asarray(x_star[i])
        energy.append(float(model.energy(x_i, args_i)))
        residual.append(float(solvers.rms(model.residual(x_i, args_i))))
        if morse_index:  # -1: Newton did not polish this point, no index is taken
            morse.append(_morse_index(model, x_i, args_i) if newton_ok[i] else -1)
    residual_rms = np.asarray(residual)
    return FixedPoints(
        labels=labels,
        x_star=x_star,
        g_star=g_star,
        distances=distances,
        cluster=cluster,
        n_distinct=int(cluster.max() + 1),
        path_independence=score,
        energy=np.asarray(energy),
        residual_rms=residual_rms,
        t_final=np.asarray(sol.t_final)[:count],
        stop_reason=reasons,
        converged=residual_rms <= tolerance,
        newton_polished=newton_ok,
        morse_index=np.asarray(morse) if morse_index else None,
        metadata=metadata(
            study="fixed_points",
            dtype=model_dtype(model),
            seeds=settings.seeds,
            flow="projected",
            solver=solver_name(options),
            rtol=options.rtol,
            atol=options.atol,
            tolerance=tolerance,
            t1=t1,
            distance_tol=settings.distance_tol,
            polish=settings.polish is not None,
            coordinates="distances: RMS over N D entries of g* differences",
        ),
    )
