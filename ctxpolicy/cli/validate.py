"""``ctxpolicy validate [PATH ...]``: check policy files (exit 0 valid, 1 invalid, 2 unreadable).

Starts fast: loads neither langchain-core nor tiktoken (CI and pre-commit run it on
every commit). A path that does not exist is reported like any other problem, in the
chosen format (rule ``file.missing``, exit 2), so ``--format github`` turns it into an
annotation too. With more than 20 files and stderr on a terminal, a one-line counter
shows progress on stderr.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ctxpolicy.cli.progress import Progress
from ctxpolicy.cli.reporters import escape_data, get_reporter
from ctxpolicy.loading import iter_policy_files, validate_paths
from ctxpolicy.loading.extends import DocumentCache

if TYPE_CHECKING:
    from ctxpolicy.diagnostics import PolicyIssue

HELP = "check policy files against the schema and the semantic rules"
EXAMPLES = """examples:
  # every policy under policies/ (the default), as FILE:LINE:COL: PATH: MESSAGE [RULE]
  ctxpolicy validate
  # GitHub Actions annotations on the lines of a pull request
  ctxpolicy validate policies/ --format github
  ctxpolicy validate policies/base.yaml policies/teams/ --format json
"""
DEFAULT_PATHS = ("policies",)
#: Rules that mean "could not read", not "invalid": exit code 2.
UNREADABLE_RULES = frozenset({"file.unreadable", "file.missing"})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of ``validate``."""
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="policy files or folders, searched recursively for .yaml/.yml/.toml "
        "(default: policies/)",
    )
    parser.add_argument(
        "--format",
        choices=("text", "json", "github"),
        default="text",
        help="output format (default: text)",
    )


def validate_files(files: list[Path]) -> list[PolicyIssue]:
    """Every issue of ``files``, one file at a time (with a progress counter on a terminal).

    The same issues, in the same order, as `ctxpolicy.loading.validate_paths` on them:
    an issue found through two files (a shared parent) is reported once.
    """
    found: list[PolicyIssue] = []
    documents = DocumentCache()  # a base extended by many team files is parsed once
    with Progress(len(files), label="validating") as progress:
        for file in files:
            found.extend(validate_paths(file, documents=documents))
            progress.advance()
    return sorted(dict.fromkeys(found), key=lambda i: (*i.sort_key, i.rule))


def _no_files(paths: list[Path], *, fmt: str) -> int:
    """Say that ``paths`` hold no policy file (an annotation with ``github``); exit 2."""
    shown = ", ".join(p.as_posix() for p in paths)
    message = f"no policy files (.yaml, .yml, .toml) in {shown}"
    if fmt == "github":
        sys.stdout.write(f"::error::{escape_data(message)}\n")
    else:
        sys.stderr.write(f"ctxpolicy validate: {message}\n")
    return 2


def exit_code(issues: list[PolicyIssue]) -> int:
    """2 when a file could not be read, 1 when a policy is invalid, else 0."""
    if any(i.rule in UNREADABLE_RULES for i in issues):
        return 2
    return 1 if any(i.severity == "error" for i in issues) else 0


def run(args: argparse.Namespace) -> int:
    """Validate, print the report, return the exit code."""
    paths = [Path(p) for p in (args.paths or DEFAULT_PATHS)]
    files = list(iter_policy_files(paths))  # a missing path comes back as itself
    if not files:
        return _no_files(paths, fmt=args.format)
    issues = validate_files(files)
    checked = [f.as_posix() for f in files if f.exists()]
    sys.stdout.write(get_reporter(args.format)(checked, issues))
    return exit_code(issues)
