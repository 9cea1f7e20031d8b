"""``ctxpolicy validate [PATH ...]``: check policy files (exit 0 valid, 1 invalid, 2 unreadable).

Starts fast: loads neither langchain-core nor tiktoken (CI and pre-commit run it on
every commit).
"""

from __future__ import annotations

import argparse

HELP = "check policy files against the schema and the semantic rules"
DEFAULT_PATHS = ("policies",)
#: Rules that mean "could not read", not "invalid": exit code 2.
UNREADABLE_RULES = frozenset({"file.unreadable", "file.missing"})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of ``validate``."""
    parser.add_argument(
        "paths", nargs="*", metavar="PATH",
        help="policy files or folders, searched recursively for .yaml/.yml/.toml "
        "(default: policies/)",
    )
    parser.add_argument(
        "--format", choices=("text", "json", "github"), default="text",
        help="output format (default: text)",
    )


def run(args: argparse.Namespace) -> int:
    """Validate, print the report, return the exit code."""
    import sys
    from pathlib import Path

    from ctxpolicy.cli.reporters import get_reporter
    from ctxpolicy.loading import iter_policy_files, validate_paths

    paths = [Path(p) for p in (args.paths or DEFAULT_PATHS)]
    missing = [p for p in paths if not p.exists()]
    if missing:
        for path in missing:
            sys.stderr.write(f"ctxpolicy validate: {path.as_posix()}: no such file or folder\n")
        return 2
    files = [f.as_posix() for f in iter_policy_files(paths)]
    if not files:
        shown = ", ".join(p.as_posix() for p in paths)
        sys.stderr.write(f"ctxpolicy validate: no policy files (.yaml, .yml, .toml) in {shown}\n")
        return 2
    issues = validate_paths(paths)
    sys.stdout.write(get_reporter(args.format)(files, issues))
    if any(i.rule in UNREADABLE_RULES for i in issues):
        return 2
    return 1 if any(i.severity == "error" for i in issues) else 0
