"""The `et-ode` command line."""

import argparse
import json
import sys


def _demo(options) -> int:
    from ._demo import run_demo, run_shipped_models

    run_demo(n_tokens=options.tokens, dim=options.dim, seed=options.seed)
    if options.images > 0:
        run_shipped_models(options.images)
    return 0


def _train(options) -> int:
    from ._config import load_config
    from ._train import train

    config = load_config(options.config)
    state = train(config, options.out, resume=options.resume, stop_after=options.stop_after)
    print(f"trained to step {state.step}; checkpoint in {options.out or config.training.out_dir}")
    return 0


def _eval(options) -> int:
    from ._evaluate import evaluate_baselines, evaluate_model, eval_masks
    from ._train import config_from_header, held_out_split
    from ._checkpoint import read_checkpoint
    from ._zoo import SHIPPED, shipped_path
    from . import MaskedImageET

    if options.images is not None and options.images < 1:
        raise ValueError(f"--images must be a positive integer (got {options.images}).")
    path = shipped_path(options.checkpoint) if options.checkpoint in SHIPPED else options.checkpoint
    model = MaskedImageET.load(options.checkpoint)
    config = config_from_header(read_checkpoint(path)[0], path)
    count = config.data.eval_images if options.images is None else options.images
    images = held_out_split(config, count)
    images = model.normalisation.apply(images)
    masks = eval_masks(config, len(images))
    result = {"checkpoint": str(options.checkpoint), "images": len(images),
              "model_masked_mse": evaluate_model(model, images, masks)}
    if options.baselines:
        result.update(evaluate_baselines(images, masks, config.model.image_size,
                                         config.model.patch, config.model.channels))
    print(json.dumps(result, indent=2))
    return 0


def _export(options) -> int:
    from ._train import export_model

    export_model(options.checkpoint, options.out, force=options.force)
    print(f"wrote the model of {options.checkpoint} (no optimiser state) to {options.out}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="et-ode", description="The Energy Transformer as a true ODE."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo", help="solve a random model with several solvers on both flows and print "
        "energy, residual, steps and NFE",
    )
    demo.add_argument("--tokens", type=int, default=64, help="number of tokens N (default 64)")
    demo.add_argument("--dim", type=int, default=48, help="token dimension D (default 48)")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    demo.add_argument("--images", type=int, default=64,
                      help="held-out crops on which to evaluate the shipped models against "
                      "the baselines (default 64; 0 skips)")
    demo.set_defaults(handler=_demo)

    train = commands.add_parser("train", help="train a masked-image model from a TOML config")
    train.add_argument("--config", required=True, help="TOML config (see configs/)")
    train.add_argument("--out", default=None, help="run folder (default: [training] out_dir)")
    train.add_argument("--resume", action="store_true",
                       help="continue the run in --out from its checkpoint, bit-identically")
    train.add_argument("--stop-after", type=int, default=None,
                       help="end this run after this many steps (resume later)")
    train.set_defaults(handler=_train)

    evaluate = commands.add_parser(
        "eval", help="held-out masked-patch MSE of a model, with the two baselines")
    evaluate.add_argument("--checkpoint", required=True,
                          help="a shipped model name (paper, ode) or a checkpoint file")
    evaluate.add_argument("--images", type=int, default=None,
                          help="number of held-out images (default: the config's eval_images)")
    evaluate.add_argument("--no-baselines", dest="baselines", action="store_false",
                          help="skip the mean-fill and interpolation baselines")
    evaluate.set_defaults(handler=_eval)

    export = commands.add_parser(
        "export", help="write a model-only copy of a training checkpoint (for shipping)")
    export.add_argument("--checkpoint", required=True, help="training checkpoint file")
    export.add_argument("--out", required=True, help="destination file")
    export.add_argument("--force", action="store_true", help="replace an existing destination")
    export.set_defaults(handler=_export)
    return parser


def main(argv=None) -> int:
    options = build_parser().parse_args(argv)
    try:
        return options.handler(options)
    except ValueError as error:  # bad input: a message, not a traceback
        print(f"et-ode: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
