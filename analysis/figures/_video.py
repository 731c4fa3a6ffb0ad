"""Frames and videos from matplotlib figures: numbered PNGs, an H.264 mp4 (imageio with
the ffmpeg binary that imageio-ffmpeg ships, so it works offline), a GIF through Pillow
when ffmpeg fails. Every file is written atomically: a temporary file in the same
folder, then `os.replace`, so a reader sees the old file or the complete new one."""

import errno
import os
import warnings
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from jaxtyping import ArrayLike, UInt8
from matplotlib.figure import Figure

from et_ode.records import atomic_path

# The file system refused the write itself (space, size, permission): a GIF would fail too.
REFUSED = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS}


def figure_to_frame(fig: Figure) -> UInt8[np.ndarray, "H W 3"]:
    """Render a matplotlib figure and return its pixels, `uint8 [H, W, 3]` (RGB, the
    alpha channel dropped; H, W in pixels = figure inches x dpi)."""
    canvas = fig.canvas
    if not hasattr(canvas, "buffer_rgba"):  # a bare Figure(): give it an Agg canvas
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.array(canvas.buffer_rgba(), dtype=np.uint8)[..., :3]


def _check_frames(frames: Iterable[ArrayLike]) -> list[np.ndarray]:
    arrays = [np.asarray(f) for f in frames]
    if not arrays:
        raise ValueError("no frames to write; pass at least one uint8 [H, W, 3] array.")
    shape = arrays[0].shape
    for i, frame in enumerate(arrays):
        if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[-1] != 3:
            raise ValueError(
                f"frame {i} must be uint8 [H, W, 3] (got {frame.dtype} {list(frame.shape)}); "
                "render figures with et_ode.analysis.figure_to_frame."
            )
        if frame.shape != shape:
            raise ValueError(
                f"frame {i} has shape {list(frame.shape)}, frame 0 {list(shape)}: "
                "all frames of a video must have one size."
            )
    return arrays


def pad_even(frame: np.ndarray) -> np.ndarray:
    """Pad `frame [H, W, 3]` at the bottom and right with white to even H and W (yuv420p,
    the pixel format players expect, halves the chroma resolution and needs both even)."""
    h, w = frame.shape[:2]
    return np.pad(frame, ((0, h % 2), (0, w % 2), (0, 0)), constant_values=255)


def write_png(path: Path | str, image: Figure | ArrayLike) -> Path:
    """Write a `uint8 [H, W, 3]` frame, or a matplotlib figure, as a PNG at `path`
    atomically (folder created). Returns the path."""
    path = Path(path)
    with atomic_path(path) as temporary:
        if hasattr(image, "savefig"):
            image.savefig(temporary, format="png")
        else:
            from PIL import Image

            Image.fromarray(_check_frames([image])[0]).save(temporary, format="PNG")
    return path


def write_frames(
    frames: Iterable[ArrayLike], folder: Path | str, prefix: str = "frame"
) -> list[Path]:
    """Write `frames` (each `uint8 [H, W, 3]`) as `folder/{prefix}_0000.png`, ... (folder
    created). Returns the paths, in order."""
    frames = _check_frames(frames)
    digits = max(4, len(str(len(frames) - 1)))
    return [
        write_png(Path(folder) / f"{prefix}_{i:0{digits}d}.png", frame)
        for i, frame in enumerate(frames)
    ]


def _write_mp4(frames, path: Path, fps: float) -> None:
    import imageio.v2 as imageio

    with atomic_path(path) as temporary, warnings.catch_warnings():
        # imageio-ffmpeg starts ffmpeg with subprocess (fork, then exec at once), which
        # JAX warns about although nothing runs between the two.
        warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called")
        writer = imageio.get_writer(
            temporary,
            format="FFMPEG",
            mode="I",
            fps=fps,
            codec="libx264",
            pixelformat="yuv420p",
            macro_block_size=1,
            ffmpeg_log_level="error",
        )
        try:
            for frame in frames:
                writer.append_data(pad_even(frame))
        finally:
            writer.close()
        if os.path.getsize(temporary) == 0:
            raise OSError("ffmpeg wrote an empty file")


def _write_gif(frames, path: Path, fps: float) -> None:
    from PIL import Image

    images = [Image.fromarray(frame) for frame in frames]
    with atomic_path(path) as temporary:
        images[0].save(
            temporary,
            format="GIF",
            save_all=True,
            append_images=images[1:],
            duration=max(int(round(1000 / fps)), 20),
            loop=0,
        )


def write_video(frames: Iterable[ArrayLike], path: Path | str, fps: float = 12.0) -> Path:
    """Write `frames` (each `uint8 [H, W, 3]`, all one size) as an H.264 mp4 at `path`
    (yuv420p; odd sides padded with one white row/column), `fps` frames per second.

    If ffmpeg fails (or `path` ends in `.gif`), write an animated GIF through Pillow
    instead, at `path` with the suffix `.gif`, and warn; a write the file system refuses
    (no space, file too large, permission denied) raises `et_ode.records.WriteError`
    instead, with no fallback. Returns the path written; its suffix says which format it
    is.
    """
    frames = _check_frames(frames)
    if not fps > 0:
        raise ValueError(f"fps must be positive (got {fps}).")
    path = Path(path)
    if path.suffix.lower() != ".gif":
        try:
            _write_mp4(frames, path, fps)
            return path
        except Exception as exc:  # noqa: BLE001  any ffmpeg failure: fall back
            if isinstance(exc, OSError) and exc.errno in REFUSED:
                raise
            warnings.warn(
                f"ffmpeg could not write {path} ({exc!r}); writing a GIF instead.", stacklevel=2
            )
        path = path.with_suffix(".gif")
    _write_gif(frames, path, fps)
    return path
