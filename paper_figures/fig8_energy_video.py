"""Figure 8: the energy-trajectory video: masked input, reconstruction at time t and
original beside E(t) and the masked MSE(t), past the training horizon.

    python paper_figures/fig8_energy_video.py [--checkpoint paper] [--out figures]
        [--images 4] [--seed 20230213] [--frames 49] [--horizon T] [--fps 12]
        [--solver S] [--dt0 DT] [--rtol R] [--atol A] [--max-steps M] [--format png|pdf|svg]

Times are `--frames` equally spaced from 0 to `--horizon`, by default 4 x the time the
model was trained to reach: its training horizon `dynamics.t1` (with the paper's 1.2 and
49 frames, one frame per Euler step of 0.1), or for a fixed-point model (`ode`), whose
`t1` is only a cap, its mean stop time on these images. Writes (through
`et_ode.cli.energy_video_job`, the job of `et-ode frames`)
`fig8_frames/frame_0000.png`, ..., `fig8_energy_video.mp4` (a `.gif` if ffmpeg fails),
`fig8_energy_video.png` (the still: the frame nearest that reference time, or the last
frame when the reference lies beyond the horizon, and it says so; `.pdf` or `.svg`
with `--format`) and
`fig8_energy_video.json` (times, energies, MSE(t), metadata).
"""

try:
    from . import _common
except ImportError:  # run as a script
    import _common  # type: ignore[no-redef, import-not-found]

from et_ode.cli import EnergyVideoSettings, energy_video_job


def main(argv=None):
    parser = _common.parser(__doc__.splitlines()[0], images=4, frames=49, dynamics=True)
    parser.add_argument(
        "--fps",
        type=_common._positive_float,
        default=12.0,
        help="frames per second of the video (default 12)",
    )
    options = parser.parse_args(argv)

    model, config, header = _common.load(options.checkpoint)
    images, indices, masks = _common.held_out(model, config, options.images, options.seed)
    result = energy_video_job(
        model,
        images,
        masks,
        options.out,
        settings=EnergyVideoSettings(
            frames=options.frames,
            horizon=options.horizon,
            fps=options.fps,
            frames_folder="fig8_frames",
        ),
        stem="fig8_energy_video",
        meta=_common.metadata(options, config, header),
        indices=indices,
        figure_format=options.format,
        options=_common.solve_options(model, options),
    )
    video = result["video"]
    print(
        f"wrote {len(result['frames'])} frames to {result['frames'][0].parent} and the video "
        f"{video} ({'H.264 mp4' if video.suffix == '.mp4' else 'GIF: ffmpeg failed'}), "
        f"{result['still']} and {result['json']}"
    )
    return {k: result[k] for k in ("frames", "video", "still", "json")}


if __name__ == "__main__":
    main()
