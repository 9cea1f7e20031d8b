"""``ctxpolicy set POLICY KEY VALUE``: edit one value in place, keeping comments and layout.

The edit patches only the characters of the value being changed (see
`ctxpolicy.editing`), validates the edited policy before anything is written, and
replaces the file atomically with its permission bits kept. An invalid edit prints the
issues, exits 1 and leaves the file byte-identical.

Exit codes: 0 written (or already set), 1 the edit would make the policy invalid,
2 unreadable file, bad key or value syntax, or an edit that cannot be applied safely.
"""

from __future__ import annotations

import argparse
import sys

from ctxpolicy.builtin import is_builtin
from ctxpolicy.cli.reporters import format_issue
from ctxpolicy.editing import EditError, set_policy_value
from ctxpolicy.errors import PolicyValidationError

HELP = "edit one value of a policy file in place (keeps comments and layout)"

#: Exit codes, as ``--help``, the README and docs/cli.md give them.
EXIT_CODES = "0 set, 1 would be invalid, 2 usage/unreadable"
EXAMPLES = """values are YAML: 0.1 is a number, false a boolean, [a, b] a list, '"false"' a string.

examples:
  # a team policy to edit (a bundled builtin:NAME is read-only)
  ctxpolicy init my-team --extends builtin:base
  ctxpolicy set my-team.yaml processes.mapreduce_worker.include \\
      "[framework__context, knowledge__context]"
  ctxpolicy set my-team.yaml budget.ratios.query 0.1
  ctxpolicy set my-team.yaml enable_share_context false
"""


def _err(message: str) -> None:
    sys.stderr.write(message + "\n")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of ``set``."""
    parser.description = HELP
    parser.add_argument("policy", metavar="POLICY", help="policy file (.yaml, .yml or .toml)")
    parser.add_argument("key", metavar="KEY", help="dotted key, e.g. budget.ratios.query")
    parser.add_argument("value", metavar="VALUE", help="new value as YAML, e.g. 0.1 or [a, b]")


def run(args: argparse.Namespace) -> int:
    """Apply the edit; print what happened. Returns the exit code."""
    if is_builtin(args.policy):
        _err(
            f"{args.policy}: a bundled policy is read-only; edit a team policy that extends "
            f"it: ctxpolicy init NAME --extends {args.policy}"
        )
        return 2
    try:
        result = set_policy_value(args.policy, args.key, args.value)
    except EditError as exc:
        _err(f"{args.policy}: {exc}")
        return 2
    except PolicyValidationError as exc:
        for issue in exc.issues:
            _err(format_issue(issue))
        _err(
            f"{args.policy}: not changed: setting {args.key} to {args.value} would make "
            "the policy invalid"
        )
        return 1
    except OSError as exc:
        reason = exc.strerror or str(exc)
        _err(f"{args.policy}: cannot edit: {reason}")
        return 2
    for warning in result.warnings:
        _err(format_issue(warning))
    if result.changed:
        sys.stdout.write(f"{args.policy}: {args.key} = {args.value}\n")
    else:
        sys.stdout.write(f"{args.policy}: {args.key} already is {args.value}; file unchanged\n")
    return 0
