"""The figures shown on the how-to pages, rendered into docs/images/ (`make docs-figures`).

Each is what the command line (or a `paper_figures/` script) writes, run on a shipped
model with small inputs (`--quick`, two held-out images), then reduced to a palette PNG
of at most `MAX_BYTES` so that the repository stays small. `tests/test_figure_layout.py`
checks that every figure function of `et_ode.analysis` has its image here, referenced
from a how-to page. Run from the repository root:

    python docs/make_figures.py                    # every figure (several minutes on 2 cores)
    python docs/make_figures.py convergence fig2   # some of them
"""

import argparse
import importlib
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "docs" / "images"
MAX_BYTES = 60_000
WIDTH = 860  # pixels: the width of the docs' content column

QUICK = ["--images", "2", "--quick", "--no-progress"]

# image name -> (how-to page that shows it, command line or paper_figures script and
# arguments, file it writes)
FIGURES = {
    "compare-solvers": ("compare-solvers.md", ["compare-solvers", *QUICK, "--fixed-solvers",
                                               "euler", "--step-sizes", "0.1,0.05"],
                        "compare-solvers.png"),
    "energy-video": ("energy-video.md", ["frames", "--images", "2", "--frames", "13",
                                         "--no-progress"], "energy_video.png"),
    "fig2-positions": ("energy-video.md", ("fig2_positions", []), "fig2_positions.png"),
    "fig3-reconstructions": ("energy-video.md", ("fig3_reconstructions", ["--images", "4"]),
                             "fig3_reconstructions.png"),
    "fig4-tokens-over-time": ("energy-video.md", ("fig4_tokens_over_time", []),
                              "fig4_tokens_over_time.png"),
    "fig5-memories": ("energy-video.md", ("fig5_memories", ["--count", "36"]),
                      "fig5_memories.png"),
    "fig6-attention-weights": ("energy-video.md", ("fig6_attention_weights", []),
                               "fig6_attention_weights.png"),
    **{name: ("long-horizons.md", ["study", name, *QUICK], f"{name}.png")
       for name in ("convergence", "energy-descent", "overshoot", "gradient-depth",
                    "contributions", "long-horizon")},
    **{name: ("fixed-points.md", ["study", name, *QUICK], f"{name}.png")
       for name in ("stability", "fixed-points")},
    "graph-overshoot": ("graphs.md", ["graph", "study", "overshoot", "--quick"],
                        "overshoot.png"),
}


def render(name: str, folder: Path) -> Path:
    """Run the command of figure `name` into `folder`; return the figure it wrote."""
    _, command, written = FIGURES[name]
    if isinstance(command, tuple):  # a paper_figures script
        script, argv = command
        sys.path.insert(0, str(ROOT / "paper_figures"))
        importlib.import_module(script).main(["--out", str(folder), *argv])
    else:
        from et_ode.cli import main

        if main([*command, "--out", str(folder)]) != 0:
            raise SystemExit(f"docs figure {name}: et-ode {' '.join(command)} failed")
    return folder / written


def shrink(source: Path, target: Path) -> int:
    """Write `source` as a palette PNG of at most `WIDTH` pixels across and `MAX_BYTES`
    bytes (fewer colours until it fits) at `target`; return its size."""
    with Image.open(source) as image:
        image = image.convert("RGB")
        if image.width > WIDTH:
            image = image.resize((WIDTH, round(image.height * WIDTH / image.width)),
                                 Image.Resampling.LANCZOS)
        for colours in (256, 128, 64, 32, 16):
            image.quantize(colours, dither=Image.Dither.NONE).save(target, optimize=True)
            if target.stat().st_size <= MAX_BYTES:
                return target.stat().st_size
    raise SystemExit(f"{target.name}: {target.stat().st_size} bytes even with 16 colours")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help=f"figures to render (default all): {', '.join(FIGURES)}")
    names = parser.parse_args(argv).names or list(FIGURES)
    unknown = [name for name in names if name not in FIGURES]
    if unknown:
        parser.error(f"unknown figure(s) {', '.join(unknown)}; choose from {', '.join(FIGURES)}")
    IMAGES.mkdir(parents=True, exist_ok=True)
    for name in names:
        start = time.perf_counter()
        with tempfile.TemporaryDirectory() as folder:
            size = shrink(render(name, Path(folder) / "out"), IMAGES / f"{name}.png")
        print(f"docs/images/{name}.png: {size / 1000:.0f} kB "
              f"({time.perf_counter() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
