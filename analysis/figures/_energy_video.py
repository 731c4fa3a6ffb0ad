"""The energy video's frames (`energy_video_frames`): the masked input, the completion, the
original, E and the error over time, one figure per saved time, drawn to pixels."""

from typing import Literal, overload

import numpy as np
from jaxtyping import ArrayLike, Float, Real
from matplotlib.figure import Figure

from et_ode import solvers
from et_ode.tasks import MaskedImageET, Masking

from .._records import model_dtype
from ..tasks import (
    completed_patches,
    frame_steps,
    image_trajectory,
    reference_time,
    still_frame,
    to_display,
)
from ._images import Frames, _show, masked_display
from ._plotting import SEPARATOR, caption, samples_text, title_text
from ._video import figure_to_frame


def _video_figure(masked, completed, originals, times, energies, mse, reference, caption_text):
    """The figure of the energy video and `show(k, note="")`, which draws frame `k` into it
    and returns its pixels: the title's heading line (the frame, its time, mean E and
    masked MSE; `note`, the still's sentence of which frame it is, in place of the frame
    number) over the caption line, one font size for every frame (`title_text`).
    `masked`, `originals` `[B, S, S, C]`; `completed [B, T, S, S, C]`; `energies [B, T]`; `mse [T]`;
    `reference = (time, label)`."""
    horizon, label = reference
    ts = np.asarray(times, np.float64)
    b = len(originals)
    fig = Figure(figsize=(9.6, max(3.6, 1.05 * b + 1.2)), dpi=100)
    mean_energy = energies.mean(axis=0)

    def frame_heading(k):
        return (
            f"Energy-trajectory video, frame {k + 1} of {ts.size}: t = {ts[k]:.3g} tau, "
            f"mean E = {mean_energy[k]:.4g}, masked MSE = {mse[k]:.4f} (normalised units)"
        )

    size = min(title_text(fig, frame_heading(k), caption_text)[1] for k in range(ts.size))
    height_pt = fig.get_figheight() * 72
    title_pt = 2 * size * 1.25 + 6
    grid = fig.add_gridspec(
        max(b, 2),
        5,
        width_ratios=[1, 1, 1, 0.42, 3.0],
        left=0.02,
        right=0.98,
        top=1 - (title_pt + 16) / height_pt,
        bottom=36 / height_pt,
        wspace=0.08,
        hspace=0.25,
    )
    recon_artists = []
    for r in range(b):
        for c, (heading, image) in enumerate(
            (("masked input", masked[r]), ("at time t", None), ("original", originals[r]))
        ):
            ax = fig.add_subplot(grid[r, c])
            _show(ax, completed[r, 0] if image is None else image, heading if r == 0 else None)
            if image is None:
                recon_artists.append(ax.images[0])
    half = max(b, 2) // 2
    ax_e = fig.add_subplot(grid[:half, 4])
    ax_m = fig.add_subplot(grid[half:, 4], sharex=ax_e)
    inside = ts[0] <= horizon <= ts[-1]
    for series, ax, ylabel in (
        (energies, ax_e, "energy E"),
        (mse[None], ax_m, "masked MSE\n(normalised units)"),
    ):
        for row in series:
            ax.plot(ts, row, lw=0.7, alpha=0.5, color="tab:blue")
        ax.plot(ts, series.mean(axis=0), lw=2.0, color="tab:blue")
        if inside:  # the reference marked only where the frames reach it
            ax.axvline(horizon, ls="--", color="0.3", lw=1.0)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.tick_params(labelsize=7)
    ax_e.set_xlim(ts[0], ts[-1])
    right = inside and horizon > ts[0] + 0.6 * (ts[-1] - ts[0])
    if inside:  # beside the dashed line, clear of it and of the cursor there
        ax_e.annotate(
            label,
            (horizon, 0.96),
            xycoords=ax_e.get_xaxis_transform(),
            xytext=(-3 if right else 3, 0),
            textcoords="offset points",
            fontsize=7,
            va="top",
            ha="right" if right else "left",
            color="0.3",
        )
    else:
        side = "beyond" if horizon > ts[-1] else "before"
        ax_e.text(
            0.98,
            0.96,
            f"{label} t = {horizon:.3g}: {side} the last frame \u2192"
            if side == "beyond"
            else f"\u2190 {label} t = {horizon:.3g}",
            transform=ax_e.transAxes,
            fontsize=7,
            va="top",
            ha="right",
            color="0.3",
        )
    ax_e.tick_params(labelbottom=False)
    ax_m.set_xlabel("t (tau)", fontsize=8)
    cursors = [ax.axvline(ts[0], color="tab:red", lw=1.0) for ax in (ax_e, ax_m)]
    dots = [
        ax_e.plot([ts[0]], [mean_energy[0]], "o", color="tab:red", clip_on=False)[0],
        ax_m.plot([ts[0]], [mse[0]], "o", color="tab:red", clip_on=False)[0],
    ]
    title = fig.suptitle("", fontsize=size, y=1 - 3 / height_pt, va="top")

    def show(k, note=""):
        for r, artist in enumerate(recon_artists):
            artist.set_data(completed[r, k])
        for cursor in cursors:
            cursor.set_xdata([ts[k], ts[k]])
        dots[0].set_data([ts[k]], [mean_energy[k]])
        dots[1].set_data([ts[k]], [mse[k]])
        if note:  # the still: which frame it is, in place of "frame k of T"
            heading = (
                f"Energy video {note}; mean E = {mean_energy[k]:.4g}, masked MSE = {mse[k]:.4f} "
                "(normalised units)"
            )
            own = title_text(fig, heading, caption_text)[1]  # its own size, if smaller
            text, shown, gid = title_text(fig, heading, caption_text, size=min(size, own))
        else:
            text, shown, gid = title_text(fig, frame_heading(k), caption_text, size=size)
        title.set_fontsize(shown)
        title.set_text(text)
        title.set_gid(gid)
        return figure_to_frame(fig)

    return fig, show


def _noise_note(temperature: float, trajectory: dict) -> str:
    noise = "tangent" if trajectory["options"].get("flow") == "projected" else "isotropic"
    return f"at T = {temperature:g} ({noise} noise)"


@overload
def energy_video_frames(
    model: MaskedImageET,
    images: Float[ArrayLike, "B H W C"],
    masking: Masking,
    times: Real[ArrayLike, " T"],
    *,
    reference: tuple[float, str] | None = None,
    name: str | None = None,
    still: Literal[False] = False,
    options: solvers.SolveOptions | None = None,
    temperature: float = 0.0,
    seed: int = 0,
) -> tuple[Frames, dict]: ...


@overload
def energy_video_frames(
    model: MaskedImageET,
    images: Float[ArrayLike, "B H W C"],
    masking: Masking,
    times: Real[ArrayLike, " T"],
    *,
    reference: tuple[float, str] | None = None,
    name: str | None = None,
    still: Literal[True],
    options: solvers.SolveOptions | None = None,
    temperature: float = 0.0,
    seed: int = 0,
) -> tuple[Frames, dict, Figure]: ...


def energy_video_frames(
    model: MaskedImageET,
    images: Float[ArrayLike, "B H W C"],
    masking: Masking,
    times: Real[ArrayLike, " T"],
    *,
    reference: tuple[float, str] | None = None,
    name: str | None = None,
    still: bool = False,
    options: solvers.SolveOptions | None = None,
    temperature: float = 0.0,
    seed: int = 0,
) -> tuple[Frames, dict] | tuple[Frames, dict, Figure]:
    """Figure 8, the energy-trajectory video: one frame per time in `times`, each showing,
    per image (a row), the masked input, the completion at time t (the decoded tokens
    on the occluded patches, the original elsewhere) and the original, beside the
    energy `E(t)` (thin: each image; thick: their mean) and the masked-patch MSE(t)
    (normalised units), with the time the model was trained to reach (`reference_time`:
    the training horizon `dynamics.t1`, or a fixed-point model's mean stop time) as a
    dashed vertical line where it lies within the frames' times (else a note says where
    it lies; the time axis spans the frames' times only) and the current t as a red line
    and dots. The title gives t, E and the MSE; the caption line the model (`name`, e.g.
    the checkpoint), the image count, the solver and tolerances, the dtype and whether
    the frames are step ends or interpolated states (`frame_steps`).

    The whole trajectory is one solve (`image_trajectory`); each frame is a redraw of
    one figure.

    **Arguments:** `images [B, S, S, C]` in [0, 1]; `masking` with `[B, N]` fields;
    `times [T]` (tau), e.g. `frame_times(4 * model.dynamics.t1, 49)`; `reference`:
    `(time, label)` of the dashed line (default `reference_time(model, images,
    masking)`); `name`: the model's name for the caption; `still`: also return the
    figure, drawn at the still frame (`still_frame`), its title saying which frame it
    is; `options`: how to solve, a `solvers.SolveOptions` (None: the model's own,
    `model.dynamics.options`), its cap raised to reach the last time (as for
    `image_trajectory`); `temperature`, `seed`: a noisy video, the dynamics at that
    temperature (`image_trajectory`), named in the caption.

    **Returns:** `(frames, data)`, with `still` `(frames, data, figure)`: `frames`, a
    list of `T` arrays `uint8 [H, W, 3]`; `data` with `times [T]`, `energies [B, T]`,
    `mean_energy [T]`, `mse [T]`, `mse_per_image [B, T]`, `reference_time`,
    `reference_label`, `still_frame` and `still_note` (`still_frame`),
    `interpolated_frames` and `frames_note` (`frame_steps`), `options`, `stats`.
    """
    horizon, label = reference or reference_time(model, images, masking)
    traj = image_trajectory(
        model, images, masking, times, options=options, temperature=temperature, seed=seed
    )
    completed = to_display(model, completed_patches(traj, masking))  # [B, T, S, S, C]
    masked = masked_display(model, np.asarray(images), masking)
    energies, mse, ts = traj["energies"], traj["mse"], traj["times"]
    steps = frame_steps(traj["options"], ts)
    text = caption(
        None,
        samples=samples_text(None, np.shape(images)[0], "images"),
        horizon=f"frames from t = {ts[0]:.3g} to {ts[-1]:.3g} tau",
        flow=traj["options"].get("flow"),
        dtype=str(model_dtype(model.core)),
        solver=traj["options"],
        extra=[steps["sentence"]] + ([_noise_note(temperature, traj)] if temperature else []),
    )
    if name:
        text = f"model {name}" + SEPARATOR + text
    fig, show = _video_figure(
        masked, completed, np.asarray(images), ts, energies, mse, (horizon, label), text
    )
    frames = [show(k) for k in range(len(ts))]
    index, note = still_frame(ts, horizon, label)
    data = {
        "times": ts,
        "energies": energies,
        "mean_energy": energies.mean(axis=0),
        "mse": mse,
        "mse_per_image": traj["mse_per_image"],
        "reference_time": horizon,
        "reference_label": label,
        "still_frame": index,
        "still_note": note,
        "interpolated_frames": steps["interpolated"],
        "frames_note": steps["sentence"],
        "options": traj["options"],
        "stats": traj["stats"],
    }
    if still:
        show(index, note)
        return frames, data, fig
    return frames, data
