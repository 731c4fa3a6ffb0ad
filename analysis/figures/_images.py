"""The image figures of a `MaskedImageET` (paper figures 2-6) and the energy-trajectory
video (figure 8).

Each figure function takes a model (and data) and returns `(fig, data)`: a matplotlib
`Figure` and a dict of the plotted numbers (NumPy arrays and plain values). The video
function returns its frames instead of a figure. Nothing is written to disk here.

Units: images in [0, 1] (RGB) for display; "normalised" means the model's per-channel
data normalisation (`model.normalisation`), the units of its loss; time in units of the
model's `tau`.
"""

import math
from typing import Any, Protocol, runtime_checkable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float, Real, UInt8
from matplotlib.figure import Figure

from et_ode import solvers
from et_ode.tasks import MaskedImageET, Masking, masked_mse, mean_fill

from .._records import model_dtype
from ..tasks import (
    frame_steps,
    image_trajectory,
    normalised_patches,
    to_display,
)
from ._plotting import SEPARATOR, solver_text, title

MASK_GREY = 0.5  # display value of a MASK-replaced patch in a masked input
GAP = np.nan  # separator pixels in mosaics (drawn white)

# The energy video's frames: `uint8 [H, W, 3]` pixels each (`figure_to_frame`).
Frames = list[UInt8[np.ndarray, "height width 3"]]


@runtime_checkable
class ParameterModel(Protocol):
    """What the parameter figures (2, 5 and 6) read of a model: a `MaskedImageET`'s
    position embeddings `positions [N, D]`, its `core` (the Hopfield memories
    `core.hopfield.xi`, the attention weights `core.attention.Wq` and `Wk`, and the
    parameters' dtype), its patch `config` (`patch`, `channels`) and `decode_token`.
    Anything that has them serves."""

    @property
    def positions(self) -> Any: ...

    @property
    def core(self) -> Any: ...

    @property
    def config(self) -> Any: ...

    def decode_token(self, token: Any) -> Any: ...


# ----------------------------------------------------------------------------- data


def masked_display(model, images, masking: Masking) -> np.ndarray:
    """What the model is shown: `images [B, S, S, C]` in [0, 1] with every MASK-replaced
    patch painted grey (0.5); occluded patches left visible (the paper's 10 %) show
    their content."""
    patches = jax.vmap(model.patches)(jnp.asarray(images))
    grey = jnp.where(masking.replaced[..., None], MASK_GREY, patches)
    return np.asarray(jax.vmap(model.image)(grey))


def patch_display(model, decoded) -> tuple[np.ndarray, np.ndarray]:
    """Decoded vectors `[M, P]` as patch images `[M, p, p, C]` in [0, 1], each rescaled
    on its own: `(v - min v) / (max v - min v)` over its pixels and channels together
    (so colours keep their relation; constant patches show mid-grey). Returns the
    images and each patch's `(min, max)`, `[M, 2]`, in the decoder's output units."""
    config = model.config
    decoded = np.asarray(decoded, np.float64)
    low, high = decoded.min(axis=1, keepdims=True), decoded.max(axis=1, keepdims=True)
    span = high - low
    scaled = np.where(span > 0, (decoded - low) / np.where(span > 0, span, 1.0), 0.5)
    images = scaled.reshape(-1, config.patch, config.patch, config.channels)
    return images, np.concatenate([low, high], axis=1)


def mosaic(tiles, columns: int, gap: int = 1) -> np.ndarray:
    """Tiles `[M, h, w(, C)]` in a grid of `columns`, separated by `gap` NaN pixels
    (drawn white): `[rows (h + gap) - gap, columns (w + gap) - gap(, C)]`."""
    tiles = np.asarray(tiles, np.float64)
    m, h, w = tiles.shape[:3]
    rows = math.ceil(m / columns)
    out = np.full((rows * (h + gap) - gap, columns * (w + gap) - gap) + tiles.shape[3:], GAP)
    for i, tile in enumerate(tiles):
        r, c = divmod(i, columns)
        out[r * (h + gap) : r * (h + gap) + h, c * (w + gap) : c * (w + gap) + w] = tile
    return out


def _show(ax, image, title=None, **kwargs):
    image = np.asarray(image, np.float64)
    if image.ndim == 3:  # RGB(A): NaN gaps become white
        image = np.where(np.isnan(image), 1.0, image)
    ax.imshow(image, interpolation="nearest", **kwargs)
    ax.set_xticks([])
    ax.set_yticks([])
    if title:
        ax.set_title(title, fontsize=8)


# ------------------------------------------------------------------------ figure 2


def position_similarity(positions) -> np.ndarray:
    """Cosine similarity `[N, N]` of the position embeddings `positions [N, D]`."""
    p = np.asarray(positions, np.float64)
    unit = p / np.maximum(np.linalg.norm(p, axis=1, keepdims=True), 1e-30)
    return unit @ unit.T


def position_similarity_figure(
    model: ParameterModel, *, name: str | None = None
) -> tuple[Figure, dict]:
    """Figure 2: for each patch position A (an `s x s` grid, `s = sqrt(N)`), the map of
    the cosine similarity of its position embedding with every other position, drawn
    in A's place: an `s x s` grid of `s x s` maps (8 x 8 of 8 x 8 for 32 x 32 images
    with 4 x 4 patches). Colour from -1 (blue) to 1 (red); each map's brightest pixel
    is A itself. `name`: the model's name for the caption (e.g. its checkpoint).

    **Returns:** `(fig, {"cosine_similarity": [N, N]})`.
    """
    similarity = position_similarity(model.positions)
    n = similarity.shape[0]
    side = math.isqrt(n)
    if side * side != n:
        raise ValueError(f"{n} positions do not form a square grid.")
    big = mosaic(similarity.reshape(n, side, side), columns=side)
    fig = Figure(figsize=(6.4, 5.6), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    cmap = _cmap("RdBu_r")
    image = ax.imshow(
        np.ma.masked_invalid(big), cmap=cmap, vmin=-1, vmax=1, interpolation="nearest"
    )
    ax.set_xticks([])
    ax.set_yticks([])
    fig.colorbar(image, ax=ax, shrink=0.8, label="cosine similarity")
    title(
        fig,
        "Cosine similarity of the position embeddings: the map at row r, column c is "
        f"patch (r, c) against all {n} patches",
        _model_caption(
            model, name, f"{n} patches", f"embedding dimension {np.shape(model.positions)[-1]}"
        ),
    )
    return fig, {"cosine_similarity": similarity, "grid": side}


def _model_caption(model, name, *parts) -> str:
    """The caption line of a figure of `model`: its name (when given), `parts`, its
    dtype."""
    return SEPARATOR.join(
        ([f"model {name}"] if name else [])
        + [p for p in parts if p]
        + [str(model_dtype(model.core))]
    )


def _dynamics_text(dynamics) -> str:
    """A model's own dynamics in a caption: flow, solver and steps, horizon or stop."""
    options = dynamics.solve_options()
    horizon = (
        f"to RMS G < {dynamics.fixed_point_atol:g} (cap t1 = {dynamics.t1:g} tau)"
        if dynamics.fixed_point_atol is not None
        else f"to t1 = {dynamics.t1:g} tau"
    )
    return f"{dynamics.flow} flow, {solver_text(options)} {horizon}"


def _cmap(name):
    import matplotlib

    return matplotlib.colormaps[name].with_extremes(bad="white")


# ------------------------------------------------------------------------ figure 3


def reconstruction_figure(
    model: MaskedImageET,
    images: Float[ArrayLike, "B H W C"],
    masking: Masking,
    *,
    name: str | None = None,
) -> tuple[Figure, dict]:
    """Figure 3: for each image (a column), the masked input (MASK patches grey), the
    completion by `model.complete` (its own dynamics; occluded patches predicted, the
    rest as given) and the original; each completion's masked MSE above it. The caption
    gives the model (`name`), the image count, the masking, the dynamics and the dtype.

    **Arguments:** `images [B, S, S, C]` in [0, 1]; `masking` with `[B, N]` fields.

    **Returns:** `(fig, data)`: `masked`, `completed`, `original` `[B, S, S, C]` in
    [0, 1]; `masked_mse` and `mean_fill_mse` `[B]` per image over its occluded
    patches, in normalised units (the loss's).
    """
    images = np.asarray(images)
    completed = np.asarray(model.complete(jnp.asarray(images), masking)[0])
    patches = normalised_patches(model, images)
    model_patches = normalised_patches(model, completed)
    data = {
        "masked": masked_display(model, images, masking),
        "completed": np.clip(completed, 0.0, 1.0),
        "original": images,
        "masked_mse": _per_image_mse(model_patches, patches, masking.occluded),
        "mean_fill_mse": _per_image_mse(mean_fill(patches, masking), patches, masking.occluded),
    }
    occluded = np.asarray(masking.occluded).sum(axis=-1)
    text = _model_caption(
        model,
        name,
        f"{len(images)} images",
        f"{int(occluded.min())}"
        + ("" if occluded.min() == occluded.max() else f"-{int(occluded.max())}")
        + f" of {np.shape(masking.occluded)[-1]} patches occluded",
        _dynamics_text(model.dynamics),
    )
    return _reconstruction_drawing(data, text), data


def _reconstruction_drawing(data: dict, caption_text: str) -> Figure:
    """Figure 3 drawn from `reconstruction_figure`'s data."""
    rows = (("masked input", "masked"), ("reconstruction", "completed"), ("original", "original"))
    b = len(data["original"])
    fig = Figure(
        figsize=(max(1.2 * b + 1.0, 6.8), 4.6), dpi=100, layout="constrained"
    )  # the caption: one line
    axes = fig.subplots(3, b, squeeze=False)
    for r, (label, key) in enumerate(rows):
        for c in range(b):
            heading = f"MSE {data['masked_mse'][c]:.3f}" if key == "completed" else None
            _show(axes[r, c], data[key][c], heading)
        axes[r, 0].set_ylabel(label, fontsize=8)
    title(
        fig,
        "Held-out completions (above each: MSE on the occluded patches, normalised units)",
        caption_text,
    )
    return fig


def _per_image_mse(prediction, target, occluded) -> np.ndarray:
    return np.asarray(
        jax.vmap(lambda p, t, o: masked_mse(p[None], t[None], o[None]))(
            prediction, target, occluded
        )
    )


# ------------------------------------------------------------------------ figure 4


@eqx.filter_jit
def _decoded_parts(model, xs, conditions, std):
    """For one image: `xs [T, N, D]` -> `{part: [T, N, P]}`, the decoder's linear map at
    `x(t)` applied to each part of `-dE/dg` (clamped tokens zero), times the context
    std (normalised pixel units per tau)."""

    def one(x):
        parts = model.core.update_parts(x, conditions)
        if conditions.clamped is not None:
            parts = {k: jnp.where(conditions.clamped[:, None], 0.0, v) for k, v in parts.items()}
        return {k: jax.jvp(model.decode, (x,), (v,))[1] * std for k, v in parts.items()}

    return jax.vmap(one)(xs)


def tokens_over_time_figure(
    model: MaskedImageET,
    images: Float[ArrayLike, "B H W C"],
    masking: Masking,
    times: Real[ArrayLike, " T"],
    index: int = 0,
    *,
    name: str | None = None,
    options: solvers.SolveOptions | None = None,
) -> tuple[Figure, dict]:
    """Figure 4: one image's tokens decoded at each of `times` (top row: every patch
    decoded, context standardisation and normalisation undone, the visible ones
    included), and the attention and Hopfield parts of the update `-dE/dg` decoded at
    the same times (and the external-field part when the model has a field).

    A part `u [N, D]` is decoded by the decoder's linear map at the current tokens,
    `J_decode(x(t)) u` (a JVP: the decoder's LayerNorm Jacobian, then its weight),
    times the context std: the rate of change of the decoded patches (normalised pixel
    units per tau) that the part alone would cause on the native flow (for the
    projected flow, before the projection; clamped tokens are zero). Each part's row is
    shown as `0.5 + 0.5 v / max|v|` per RGB channel, `max|v|` over that row's times and
    pixels (recorded), so grey is zero and rows show their own relative size over time.
    The caption gives the model (`name`), which image, the solve and the dtype.

    **Arguments:** `images [B, S, S, C]` in [0, 1] and `masking` with `[B, N]` fields
    (the whole batch is solved, image `index` is shown); `times [T]`; `options`: how to
    solve, a `solvers.SolveOptions` (None: the model's own, `model.dynamics.options`),
    its cap raised to reach the last time (as for `image_trajectory`).

    **Returns:** `(fig, data)`: `times`, `tokens [T, S, S, C]` in [0, 1], for each part
    `{part} [T, S, S, C]` (normalised units per tau) and `{part}_scale`, `energies [T]`,
    `mse [T]` (this image's), `masked` and `original` images, `index`, `options`.
    """
    images = np.asarray(images)
    traj = image_trajectory(model, images, masking, times, options=options)
    conditions = jax.tree.map(lambda a: a[index], traj["conditions"])
    parts = _decoded_parts(
        model,
        jnp.asarray(traj["states"][index]),
        conditions,
        jnp.asarray(traj["context_std"][index]),
    )
    names = ["attention", "hopfield"] + (["external"] if model.dynamics.external_field else [])
    data = {
        "times": traj["times"],
        "index": index,
        "tokens": to_display(model, traj["reconstructions"][index]),
        "energies": traj["energies"][index],
        "mse": traj["mse_per_image"][index],
        "masked": masked_display(model, images, masking)[index],
        "original": images[index],
        "options": traj["options"],
    }
    for part in names:
        decoded = np.asarray(jax.vmap(model.image)(parts[part]))
        data[part] = decoded
        data[f"{part}_scale"] = float(np.max(np.abs(decoded)))
    solved = traj["options"]  # the solve's keywords, as recorded
    text = _model_caption(
        model,
        name,
        f"image {index + 1} of {len(images)}",
        f"{solved.get('flow')} flow, {solver_text(solved)}",
        frame_steps(solved, traj["times"])["sentence"],
    )
    return _tokens_drawing(data, names, text), data


def _tokens_drawing(data: dict, names, caption_text: str) -> Figure:
    """Figure 4 drawn from `tokens_over_time_figure`'s data and its part `names`."""
    times = np.asarray(data["times"])
    t = len(times)
    fig = Figure(
        figsize=(max(1.15 * (t + 1) + 0.6, 5.0), 1.25 * (len(names) + 1) + 1.1),
        dpi=100,
        layout="constrained",
    )
    axes = fig.subplots(len(names) + 1, t + 1, squeeze=False)
    _show(axes[0, 0], data["masked"], "masked input")
    _show(axes[1, 0], data["original"], "original")
    for ax in axes[2:, 0]:
        ax.axis("off")
    for k in range(t):
        _show(axes[0, k + 1], data["tokens"][k], f"t = {times[k]:.3g}")
        for r, part in enumerate(names, start=1):
            scale = data[f"{part}_scale"] or 1.0
            _show(axes[r, k + 1], np.clip(0.5 + 0.5 * data[part][k] / scale, 0, 1))
    axes[0, 1].set_ylabel("tokens", fontsize=8)
    for r, part in enumerate(names, start=1):
        axes[r, 1].set_ylabel(f"{part}\n(max {data[f'{part}_scale']:.2g}/tau)", fontsize=8)
    title(
        fig,
        "Decoded tokens and the decoded parts of -dE/dg over time (t in tau; grey: "
        "zero, each row scaled to its max, normalised pixel units per tau)",
        caption_text,
    )
    return fig


# ------------------------------------------------------------------------ figures 5, 6


def memories_figure(
    model: ParameterModel, count: int = 64, *, name: str | None = None
) -> tuple[Figure, dict]:
    """Figure 5: the `count` Hopfield memories `xi [K, D]` of largest norm, each decoded
    as a patch by the model's decoder (`model.decode`: its LayerNorm, then its affine
    map), shown in decreasing order of norm, row by row, each patch rescaled to [0, 1]
    on its own (see `patch_display`). `name`: the model's name for the caption.

    **Returns:** `(fig, data)`: `indices [count]` into the memories, `norms [count]`,
    `decoded [count, P]` (decoder units: context-standardised, normalised pixels) and
    `ranges [count, 2]` (each patch's min and max before rescaling).
    """
    xi = np.asarray(model.core.hopfield.xi)
    count = min(int(count), len(xi))
    norms = np.linalg.norm(xi.astype(np.float64), axis=1)
    order = np.argsort(-norms, kind="stable")[:count]
    decoded = np.asarray(jax.vmap(model.decode_token)(jnp.asarray(xi[order])))
    tiles, ranges = patch_display(model, decoded)
    columns = math.ceil(math.sqrt(count))
    fig = Figure(figsize=(5.0, 5.3), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    _show(ax, mosaic(tiles, columns))
    title(
        fig,
        f"{count} of {len(xi)} Hopfield memories, largest norm first, as patches (each "
        "min-max rescaled)",
        _model_caption(
            model,
            name,
            f"memory norms {norms[order][-1]:.3g} to {norms[order][0]:.3g}",
            f"dimension {xi.shape[-1]}",
        ),
    )
    return fig, {"indices": order, "norms": norms[order], "decoded": decoded, "ranges": ranges}


def attention_weights_figure(
    model: ParameterModel, *, name: str | None = None
) -> tuple[Figure, dict]:
    """Figure 6: every row of `Wq` and `Wk` (`[H, Y, D]`: `H x Y` vectors of dimension
    D each) decoded as a patch like the memories (`model.decode_token`, each patch rescaled
    to its own min-max, see `patch_display`): one panel per matrix, a row of `Y`
    patches per head. `name`: the model's name for the caption.

    **Returns:** `(fig, data)`: `Wq`, `Wk` decoded `[H, Y, P]` and their `Wq_ranges`,
    `Wk_ranges` `[H, Y, 2]`.
    """
    att = model.core.attention
    h, y, _ = att.Wq.shape
    fig = Figure(
        figsize=(max(0.45 * y + 1.0, 4.8), 2 * (0.5 * h + 0.6) + 0.9), dpi=100, layout="constrained"
    )
    axes = fig.subplots(2, 1)
    data = {}
    for ax, matrix in zip(axes, ("Wq", "Wk")):
        rows = np.asarray(getattr(att, matrix)).reshape(h * y, -1)
        decoded = np.asarray(jax.vmap(model.decode_token)(jnp.asarray(rows)))
        tiles, ranges = patch_display(model, decoded)
        _show(ax, mosaic(tiles, y), matrix)
        data[matrix] = decoded.reshape(h, y, -1)
        data[f"{matrix}_ranges"] = ranges.reshape(h, y, 2)
    title(
        fig,
        f"Wq and Wk rows decoded as patches, {y} per head (each min-max rescaled)",
        _model_caption(
            model, name, f"{h} head{'s' if h != 1 else ''}", f"dimension {att.Wq.shape[-1]}"
        ),
    )
    return fig, data


# ------------------------------------------------------------------------ figure 8
