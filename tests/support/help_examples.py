"""The examples of every ``--help``, as shell commands a test runs from an empty folder."""

from __future__ import annotations

from ctxpolicy.cli import VERBS, build_parser

#: Verbs whose examples may exit 1 on success (``diff``: the two policies differ).
DIFFER_OK = frozenset({"diff"})


def help_text(verb: str | None) -> str:
    """The ``--help`` of ``verb`` (None: the top level)."""
    parser = build_parser()
    if verb is None:
        return parser.format_help()
    action = next(a for a in parser._actions if a.dest == "verb")
    return action.choices[verb].format_help()  # type: ignore[index]


def examples(verb: str | None) -> list[str]:
    """The commands under ``examples:`` (comments left out, continued lines joined)."""
    text = help_text(verb).split("\nexamples:\n", 1)[1]
    commands: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or (line.startswith("#") and not pending):
            continue
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        commands.append(pending + line)
        pending = ""
    # ``ctxpolicy COMMAND --help`` names the others' help: a placeholder, not a command
    return [c for c in commands if "COMMAND" not in c]


def all_examples() -> list[tuple[str | None, list[str]]]:
    """Every verb's examples, then the top level's."""
    return [(verb, examples(verb)) for verb in VERBS] + [(None, examples(None))]


__all__ = ["DIFFER_OK", "all_examples", "examples", "help_text"]
