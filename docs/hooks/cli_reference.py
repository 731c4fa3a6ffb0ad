"""mkdocs hook: render the `et-ode` command line from `et_ode.cli.build_parser()`.

A page containing the line `<!-- et-ode-cli -->` gets, in its place, one section per
command: its help, its usage and a table of its arguments, read from the argparse
parser itself, so the reference cannot drift from the code.
"""

import argparse

MARKER = "<!-- et-ode-cli -->"


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _argument(action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    flags = ", ".join(f"`{flag}`" for flag in action.option_strings)
    if action.nargs == 0:
        return flags
    value = action.metavar or (
        "{" + ",".join(map(str, action.choices)) + "}" if action.choices else action.dest.upper()
    )
    return f"{flags} `{value}`"


def _command(name: str, summary: str, parser: argparse.ArgumentParser) -> list[str]:
    parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=88)
    lines = [
        f"## `et-ode {name}`",
        "",
        summary[:1].upper() + summary[1:] + ".",
        "",
        "```text",
        parser.format_usage().strip(),
        "```",
        "",
        "| argument | meaning | default |",
        "|---|---|---|",
    ]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        default = action.default
        shown = "" if action.nargs == 0 or default in (None, argparse.SUPPRESS) else f"`{default}`"
        if action.required and action.option_strings:
            shown = "required"
        lines.append(f"| {_argument(action)} | {_cell(action.help or '')} | {shown} |")
    return lines + [""]


def _commands(parser: argparse.ArgumentParser, prefix: str = "") -> list[str]:
    """A section per command of `parser`, and per action of a command that has its own
    (`et-ode graph train`, ...)."""
    lines = []
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        summaries = {choice.dest: choice.help for choice in action._choices_actions}
        for name, subparser in action.choices.items():
            lines += _command(prefix + name, summaries.get(name, ""), subparser)
            lines += _commands(subparser, prefix + name + " ")
    return lines


def render() -> str:
    from et_ode.cli import build_parser

    parser = build_parser()
    parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=88)
    lines = ["```text", parser.format_usage().strip(), "```", ""]
    return "\n".join(lines + _commands(parser))


def on_page_markdown(markdown, page, config, files):
    if MARKER in markdown:
        return markdown.replace(MARKER, render())
    return markdown
