"""Figure 4: one held-out image's tokens, and the attention and Hopfield parts of the
update, decoded over time.

    python paper_figures/fig4_tokens_over_time.py [--checkpoint paper] [--out figures]
        [--images 1] [--index 0] [--seed 20230213] [--frames 7] [--horizon T]
        [--solver S] [--dt0 DT] [--rtol R] [--atol A] [--max-steps M] [--format png|pdf|svg]

All `--images` held-out images are solved; image `--index` of them is shown. Times are
`--frames` equally spaced from 0 to `--horizon`, by default the time the model was
trained to reach: its training horizon `dynamics.t1`, or for a fixed-point model
(`ode`), whose `t1` is only a cap, its mean stop time on these images.
"""

try:
    from . import _common
except ImportError:  # run as a script
    import _common  # type: ignore[no-redef, import-not-found]

from et_ode.analysis import frame_times, reference_time, tokens_over_time_figure


def main(argv=None):
    parser = _common.parser(__doc__.splitlines()[0], images=1, frames=7, dynamics=True)
    parser.add_argument(
        "--index", type=int, default=0, help="which of the held-out images to show (default 0)"
    )
    options = parser.parse_args(argv)
    if not 0 <= options.index < options.images:
        parser.error(f"--index must be in [0, --images) = [0, {options.images}).")

    model, config, header = _common.load(options.checkpoint)
    images, indices, masks = _common.held_out(model, config, options.images, options.seed)
    horizon = options.horizon or reference_time(model, images, masks)[0]
    fig, data = tokens_over_time_figure(
        model,
        images,
        masks,
        frame_times(horizon, options.frames),
        index=options.index,
        name=_common.model_name(options),
        options=_common.solve_options(model, options),
    )
    i = options.index
    data |= {
        "image_index": indices[i],
        "occluded": masks.occluded[i],
        "replaced": masks.replaced[i],
    }
    meta = _common.metadata(options, config, header, solve=data.pop("options"))
    return _common.save_figure(
        options.out, "fig4_tokens_over_time", fig, data, meta, options.format
    )


if __name__ == "__main__":
    main()
