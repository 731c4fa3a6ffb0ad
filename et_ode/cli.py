"""The `et-ode` command line."""

import argparse
import sys


def _demo(options) -> int:
    from ._demo import run_demo

    run_demo(n_tokens=options.tokens, dim=options.dim, seed=options.seed)
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
    demo.set_defaults(handler=_demo)
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
