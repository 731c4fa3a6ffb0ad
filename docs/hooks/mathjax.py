"""mkdocs hook: the math renders without a network.

MathJax 3 (its `tex-chtml` component and the CommonHTML fonts it loads from beside
itself) comes from the installed Python package `django-static-mathjax` (static files
only, no dependencies; the `docs` extra installs it) and is added to the site under
`javascripts/mathjax/`, so that neither the build nor a reader needs a CDN.
`docs/javascripts/mathjax.js` configures it for pymdownx.arithmatex's generic output
(`\\( ... \\)` and `\\[ ... \\]` inside `arithmatex` elements) and typesets each page as
Material's instant navigation loads it.
"""

from importlib.resources import files
from pathlib import Path

from mkdocs.structure.files import File

# The MathJax component the pages load, and the fonts it loads from beside itself.
COMPONENT = "tex-chtml.js"
FONTS = "output/chtml/fonts/woff-v2"
TARGET = "javascripts/mathjax"


def mathjax_root() -> Path:
    """The installed MathJax build (`es5/` of django-static-mathjax)."""
    root = Path(str(files("mathjax"))) / "static" / "mathjax" / "es5"
    if not (root / COMPONENT).is_file():
        raise FileNotFoundError(
            f"MathJax's {COMPONENT} is not in {root}: install the docs extra "
            "(pip install -e '.[docs]'), which brings django-static-mathjax."
        )
    return root


def on_files(files_, config):
    root = mathjax_root()
    sources = [root / COMPONENT, *sorted((root / FONTS).glob("*.woff"))]
    for source in sources:
        uri = f"{TARGET}/{source.relative_to(root).as_posix()}"
        files_.append(File.generated(config, uri, abs_src_path=str(source)))
    return files_
