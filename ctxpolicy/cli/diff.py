"""``ctxpolicy diff A B``: the difference between two effective policies.

Both files are loaded as the application would load them (``extends`` resolved,
environment overrides applied), then compared key by key; for every process the layers
its calls gain or lose are listed too. What is compared is the self-contained effective
policy ``ctxpolicy show`` prints (`ctxpolicy.cli.effective`): ``extends`` is not a value
of it, and a ``template_file`` counts as the text it holds, so a policy and its saved
``show`` output are identical, and editing a template file is a difference.

``--format json`` prints ``{"format_version": 1, "a", "b", "same", "values",
"processes"}``.

Exit codes: 0 same, 1 different, 2 unreadable or invalid input.
"""

from __future__ import annotations

import argparse
import json
import sys

from ctxpolicy.cli.effective import self_contained
from ctxpolicy.cli.reporters import FORMAT_VERSION, format_issue
from ctxpolicy.diffing import diff_policies
from ctxpolicy.errors import CtxPolicyError, PolicyValidationError
from ctxpolicy.loading import load_policy
from ctxpolicy.render.terminal import color_enabled, paint

HELP = "difference between two effective policies (keys and layers per process)"
#: Exit codes, as ``--help``, the README and docs/cli.md give them.
EXIT_CODES = "0 same, 1 differ, 2 usage/invalid/unreadable"
EXAMPLES = """examples:
  # what a team policy changes from the defaults it extends (exit 1: they differ)
  ctxpolicy init my-team --extends builtin:base
  ctxpolicy set my-team.yaml budget.ratios.query 0.1
  ctxpolicy diff builtin:base my-team.yaml
  # a change under review: keep the old copy next to the new file (extends resolves
  # from there), e.g. git show main:policies/team.yaml > policies/team.before.yaml
  ctxpolicy diff builtin:base builtin:long-session --format json
"""


def _err(message: str) -> None:
    sys.stderr.write(message + "\n")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of ``diff``."""
    parser.description = HELP
    parser.add_argument("a", metavar="A", help="first (old) policy file")
    parser.add_argument("b", metavar="B", help="second (new) policy file")
    parser.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="output format (default: text)",
    )


def run(args: argparse.Namespace) -> int:
    """Load both policies, print their difference. Returns the exit code."""
    policies = []
    for path in (args.a, args.b):
        try:
            policies.append(self_contained(load_policy(path)).policy)
        except PolicyValidationError as exc:
            for issue in exc.issues:
                _err(format_issue(issue))
            _err(f"{path}: cannot diff: the policy is invalid or unreadable")
            return 2
        except (CtxPolicyError, OSError) as exc:
            _err(f"{path}: cannot diff: {exc}")
            return 2
    result = diff_policies(policies[0], policies[1], a_label=args.a, b_label=args.b)
    if args.format == "json":
        data = {"format_version": FORMAT_VERSION, **result.to_dict()}
        sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(_colour(result.format_text()) + "\n")
    return 0 if result.same else 1


def _colour(text: str) -> str:
    """Green additions, red removals, yellow changes: only on a terminal without NO_COLOR."""
    if not color_enabled(sys.stdout):
        return text
    styles = {"+": "green", "-": "red", "~": "yellow"}
    lines = []
    for line in text.split("\n"):
        mark = line.lstrip()[:1]
        style = styles.get(mark) if not line.startswith(("---", "+++")) else "bold"
        lines.append(paint(line, style, enabled=True) if style else line)
    return "\n".join(lines)
