"""Figure 6: the rows of the attention weights Wq and Wk, decoded as patches.

python paper_figures/fig6_attention_weights.py [--checkpoint paper] [--out figures]
    [--format png|pdf|svg]
"""

try:
    from . import _common
except ImportError:  # run as a script
    import _common  # type: ignore[no-redef, import-not-found]

from et_ode.analysis import attention_weights_figure


def main(argv=None):
    return _common.model_figure(argv, __doc__, "fig6_attention_weights", attention_weights_figure)


if __name__ == "__main__":
    main()
