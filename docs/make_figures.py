"""The figures shown on the how-to pages, rendered into docs/images/ (`make docs-figures`).

Each is what the command line (or a `paper_figures/` script) writes, run on a shipped
model with small inputs (`--quick`, two held-out images), then reduced to a palette PNG
of at most `MAX_BYTES` so that the repository stays small. `tests/test_figure_layout.py`
checks that every figure function of `et_ode.analysis` has its image here, referenced
from a how-to page. Run from the repository root:

    python docs/make_figures.py  # every figure (several minutes on 2 cores)
    python docs/make_figures.py convergence fig2-positions  # some of them
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


def study(name: str) -> list[str]:
    """`et-ode study NAME --quick` on two held-out images, or as many as it uses."""
    from et_ode.cli._study_commands import COMMANDS

    images = min(2, COMMANDS[name].images[1] or 2)
    return ["study", name, "--images", str(images), "--quick", "--no-progress"]


# image name -> (how-to page that shows it, command line or paper_figures script and
# arguments, file it writes)
FIGURES = {
    "compare-solvers": (
        "compare-solvers.md",
        ["compare-solvers", *QUICK, "--fixed-solvers", "euler", "--step-sizes", "0.1,0.05"],
        "compare-solvers.png",
    ),
    "energy-video": (
        "energy-video.md",
        ["frames", "--images", "2", "--frames", "13", "--no-progress"],
        "energy_video.png",
    ),
    "fig2-positions": ("energy-video.md", ("fig2_positions", []), "fig2_positions.png"),
    "fig3-reconstructions": (
        "energy-video.md",
        ("fig3_reconstructions", ["--images", "4"]),
        "fig3_reconstructions.png",
    ),
    "fig4-tokens-over-time": (
        "energy-video.md",
        ("fig4_tokens_over_time", []),
        "fig4_tokens_over_time.png",
    ),
    "fig5-memories": ("energy-video.md", ("fig5_memories", ["--count", "36"]), "fig5_memories.png"),
    "fig6-attention-weights": (
        "energy-video.md",
        ("fig6_attention_weights", []),
        "fig6_attention_weights.png",
    ),
    **{
        name: ("long-horizons.md", study(name), f"{name}.png")
        for name in (
            "convergence",
            "energy-descent",
            "overshoot",
            "gradient-depth",
            "contributions",
            "long-horizon",
        )
    },
    "temperature": ("energy-video.md", study("temperature"), "temperature.png"),
    **{
        name: ("fixed-points.md", study(name), f"{name}.png")
        for name in ("stability", "fixed-points")
    },
    "graph-overshoot": ("graphs.md", ["graph", "study", "overshoot", "--quick"], "overshoot.png"),
    "image-basins": ("landscape.md", study("basins"), "basins.png"),
    "escape": ("landscape.md", study("escape"), "escape.png"),
    "paper-basin-continuation": (
        "landscape.md",
        study("basin-continuation"),
        "basin-continuation.png",
    ),
    # the landscape tools on systems with known answers (a function of the folder)
    "continuation": ("landscape.md", lambda folder: _pitchfork(folder), "continuation.png"),
    "basins": ("landscape.md", lambda folder: _four_wells(folder), "basins.png"),
    "basin-continuation": (
        "landscape.md",
        lambda folder: _hopfield_transition(folder),
        "basin_continuation.png",
    ),
    "lyapunov-spectrum": ("landscape.md", lambda folder: _lorenz(folder), "lyapunov_spectrum.png"),
    "fold-curve": ("landscape.md", lambda folder: _two_memories_cusp(folder), "fold_curve.png"),
}


def _pitchfork(folder: Path) -> None:
    """The pitchfork x' = p x - x^3: the trivial branch and both halves of the other."""
    import jax
    import jax.numpy as jnp

    from et_ode import analysis

    jax.config.update("jax_enable_x64", True)

    def pitchfork(x, p, args):
        return p * x - x**3

    settings = analysis.ContinuationSettings(ds=0.05, ds_max=0.2)
    span = (-1.0, 1.0)
    trivial = analysis.continuation(
        pitchfork, jnp.array([0.0]), -1.0, p_span=span, settings=settings
    )
    point = trivial["bifurcations"][0]
    branches = [trivial] + [
        analysis.switch_branch(
            pitchfork, point, p_span=span, settings=settings.replace(direction=d)
        )
        for d in (1, -1)
    ]
    analysis.plot_continuation(
        branches, folder / "continuation.png", labels=["x = 0", "x > 0", "x < 0"]
    )


def _four_wells(folder: Path) -> None:
    """Basins of E = (a^2 - 1)^2 + (b^2 - 1)^2 + a b / 2 on a 48 x 48 grid."""
    import equinox as eqx
    import jax
    import numpy as np

    from et_ode import analysis

    jax.config.update("jax_enable_x64", True)

    class FourWells(eqx.Module):
        def energy(self, x, args=None):
            a, b = x[0, 0], x[0, 1]
            return (a**2 - 1) ** 2 + (b**2 - 1) ** 2 + 0.5 * a * b

        def residual(self, x, args=None):
            return jax.grad(self.energy)(x, args)

        def vector_field(self, t, x, args=None, flow="native"):
            return -self.residual(x, args)

    starts, a, b = analysis.grid_starts(
        np.zeros((1, 2)), np.array([[1.6, 0.0]]), np.array([[0.0, 1.6]]), resolution=48
    )
    result = analysis.basins(
        FourWells(),
        starts,
        grid_shape=(48, 48),
        options=analysis.BASIN_OPTIONS.replace(flow="native"),
        settings=analysis.BasinSettings(box=4),
    )
    analysis.plot_basins(result, folder / "basins.png", a=1.6 * a, b=1.6 * b)


def _hopfield_transition(folder: Path) -> None:
    """The landscape page's three-pattern modern Hopfield network (its example run first,
    for the model), on 24 x 24 starts at 17 values of beta from 1.6 to 2.4."""
    import re

    import numpy as np

    from et_ode import analysis

    page = (Path(__file__).parent / "how-to" / "landscape.md").read_text()
    (code,) = [
        block
        for block in re.findall(r"```python\n(.*?)```", page, re.S)
        if "analysis.basin_continuation(" in block
    ]
    namespace: dict = {}
    exec(compile(code, "landscape.md", "exec"), namespace)
    starts, _, _ = analysis.grid_starts(
        np.zeros((1, 2)), np.array([[1.2, 0.0]]), np.array([[0.0, 1.2]]), resolution=24
    )
    result = analysis.basin_continuation(
        namespace["model"],
        starts,
        np.linspace(1.6, 2.4, 17),
        parameter=namespace["set_beta"],
        options=analysis.BASIN_OPTIONS.replace(flow="native"),
    )
    result["metadata"]["model"] = "modern Hopfield network, 3 patterns"
    analysis.plot_basin_continuation(
        result, folder / "basin_continuation.png", parameter_label="beta"
    )


def _lorenz(folder: Path) -> None:
    """Lorenz (sigma 10, rho 28, beta 8/3): all three exponents to T = 200."""
    import jax
    import jax.numpy as jnp

    from et_ode import analysis

    jax.config.update("jax_enable_x64", True)

    def lorenz(t, x, args):
        return jnp.stack(
            [10.0 * (x[1] - x[0]), x[0] * (28.0 - x[2]) - x[1], x[0] * x[1] - 8.0 / 3.0 * x[2]]
        )

    settings = analysis.LyapunovSpectrumSettings(transient=20.0, renormalise=0.5)
    out = analysis.lyapunov_spectrum(lorenz, jnp.ones(3), t1=200.0, settings=settings)
    analysis.plot_lyapunov_spectrum(out, folder / "lyapunov_spectrum.png")


def _two_memories_cusp(folder: Path) -> None:
    """Two Hopfield memories +-xi in a field h: the fold at beta = 2 followed in beta
    down through the cusp at beta = 1 (the landscape page's example), and up."""
    import jax
    import jax.numpy as jnp

    from et_ode import analysis

    jax.config.update("jax_enable_x64", True)
    xi = jnp.array([0.6, 0.0, 0.8])

    def two_memories(x, h, args):
        m = jnp.dot(args["xi"], x)
        return -x + args["xi"] * (jnp.tanh(args["beta"] * m) + h)

    args = {"xi": xi, "beta": 2.0}
    branch = analysis.continuation(
        two_memories,
        -1.5 * xi,
        -0.5,
        p_span=(-0.5, 0.5),
        args=args,
        settings=analysis.ContinuationSettings(ds=0.05),
    )
    curves = [
        analysis.fold_continuation(
            two_memories,
            branch["bifurcations"][0],
            2.0,
            second=lambda a, beta: {**a, "beta": beta},
            q_span=(0.5, 3.0),
            args=args,
            settings=analysis.ContinuationSettings(direction=direction, ds=0.05),
        )
        for direction in (-1, 1)
    ]
    analysis.plot_parameter_plane(
        curves,
        folder / "fold_curve.png",
        labels=["from beta = 2 down", "from beta = 2 up"],
        names=("h", "beta"),
    )


def render(name: str, folder: Path) -> Path:
    """Run the command of figure `name` into `folder`; return the figure it wrote."""
    _, command, written = FIGURES[name]
    if callable(command):  # drawn here, on a system with known answers
        folder.mkdir(parents=True, exist_ok=True)
        command(folder)
    elif isinstance(command, tuple):  # a paper_figures script
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
            image = image.resize(
                (WIDTH, round(image.height * WIDTH / image.width)), Image.Resampling.LANCZOS
            )
        for colours in (256, 128, 64, 32, 16):
            image.quantize(colours, dither=Image.Dither.NONE).save(target, optimize=True)
            if target.stat().st_size <= MAX_BYTES:
                return target.stat().st_size
    raise SystemExit(f"{target.name}: {target.stat().st_size} bytes even with 16 colours")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help=f"figures to render (default all): {', '.join(FIGURES)}",
    )
    names = parser.parse_args(argv).names or list(FIGURES)
    unknown = [name for name in names if name not in FIGURES]
    if unknown:
        parser.error(f"unknown figure(s) {', '.join(unknown)}; choose from {', '.join(FIGURES)}")
    IMAGES.mkdir(parents=True, exist_ok=True)
    for name in names:
        start = time.perf_counter()
        with tempfile.TemporaryDirectory() as folder:
            size = shrink(render(name, Path(folder) / "out"), IMAGES / f"{name}.png")
        print(
            f"docs/images/{name}.png: {size / 1000:.0f} kB ({time.perf_counter() - start:.0f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
