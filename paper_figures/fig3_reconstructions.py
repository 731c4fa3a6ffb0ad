"""Figure 3: masked input, reconstruction and original for held-out images.

python paper_figures/fig3_reconstructions.py [--checkpoint paper] [--out figures]
    [--images 8] [--seed 20230213] [--format png|pdf|svg]
"""

try:
    from . import _common
except ImportError:  # run as a script
    import _common  # type: ignore[no-redef, import-not-found]

from et_ode.analysis import reconstruction_figure


def main(argv=None):
    options = _common.parser(__doc__.splitlines()[0], images=8).parse_args(argv)

    model, config, header = _common.load(options.checkpoint)
    images, indices, masks = _common.held_out(model, config, options.images, options.seed)
    fig, data = reconstruction_figure(model, images, masks, name=_common.model_name(options))
    data |= {"image_indices": indices, "occluded": masks.occluded, "replaced": masks.replaced}
    meta = _common.metadata(
        options, config, header, solve=model.dynamics.solve_options() | {"stop": None}
    )
    return _common.save_figure(options.out, "fig3_reconstructions", fig, data, meta, options.format)


if __name__ == "__main__":
    main()
