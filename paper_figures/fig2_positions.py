"""Figure 2: cosine similarity of the position embeddings, an 8 x 8 grid of 8 x 8 maps.

python paper_figures/fig2_positions.py [--checkpoint paper] [--out figures]
    [--format png|pdf|svg]
"""

try:
    from . import _common
except ImportError:  # run as a script
    import _common  # type: ignore[no-redef, import-not-found]

from et_ode.analysis import position_similarity_figure


def main(argv=None):
    return _common.model_figure(argv, __doc__, "fig2_positions", position_similarity_figure)


if __name__ == "__main__":
    main()
