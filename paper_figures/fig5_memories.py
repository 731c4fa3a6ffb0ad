"""Figure 5: the Hopfield memories of largest norm, decoded as patches.

python paper_figures/fig5_memories.py [--checkpoint paper] [--out figures] [--count 64]
    [--format png|pdf|svg]
"""

try:
    from . import _common
except ImportError:  # run as a script
    import _common  # type: ignore[no-redef, import-not-found]

from et_ode.analysis import memories_figure


def main(argv=None):
    parser = _common.parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--count",
        type=_common._positive_int,
        default=64,
        help="number of memories shown (default 64)",
    )

    return _common.model_figure(
        argv, __doc__, "fig5_memories", memories_figure, parser, count="count"
    )


if __name__ == "__main__":
    main()
