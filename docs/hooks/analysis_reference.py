"""mkdocs hook: the API reference of `et_ode.analysis`, by room and by concept.

A page line `<!-- analysis-reference -->` gets, in its place, one section per room (in
the order of `et_ode.analysis.ROOMS`, then the names every room shares), each listing
`::: et_ode.analysis.NAME` for its names in the order of `et_ode.analysis.__all__`
(entry points first, then the typed results they return). Each object keeps its anchor
in the flat namespace (`et_ode.analysis.continuation`), and the page cannot miss a name.
"""

MARKER = "<!-- analysis-reference -->"

ROOMS = {
    "landscape": (
        "The generic tools: `landscape`",
        "Any field or energy system: continuation, fold curves, steady states, basins, "
        "Lyapunov spectra, the tangent Hessian's spectrum, the typed results they "
        "return and the settings they take. The room imports no name of the Energy "
        "Transformer.",
    ),
    "energy": (
        "Studies of an energy system: `energy`",
        "The fixed points and trajectories of any `solvers.EnergySystem`, their typed "
        "results, their default `solvers.SolveOptions` and their settings.",
    ),
    "tasks": (
        "Studies of the image and graph tasks: `tasks`",
        "A masked-image or graph model past its horizon, gradients against depth, the "
        "attractors of an image, their typed results and settings, and the image helpers.",
    ),
    "figures": (
        "Figures, videos and layout checks: `figures`",
        "Every plot of a study's result, the paper's figures, the energy video and the "
        "layout check: the only room that imports matplotlib.",
    ),
    None: (
        "Shared by every room",
        "The bases of the typed results and of the settings objects (`NewtonSettings`: "
        "every Newton corrector's), dtype helpers, and the record of what produced a result.",
    ),
}


def reference() -> str:
    from et_ode import analysis

    lines = []
    for room, (title, text) in ROOMS.items():
        names = [name for name in analysis.__all__ if analysis.ROOM_OF.get(name) == room]
        lines += [f"## {title}", "", text, ""]
        for name in names:
            lines += [f"::: et_ode.analysis.{name}", "    options:", "      heading_level: 3", ""]
    return "\n".join(lines)


def on_page_markdown(markdown, page, config, files):
    return markdown.replace(MARKER, reference()) if MARKER in markdown else markdown
