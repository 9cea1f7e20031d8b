"""``ctxpolicy list``: the policies and samples bundled with the package (``builtin:NAME``).

(The module is ``bundled``: see `ctxpolicy.cli.VERB_MODULES`.)

Each bundled policy with its ``description``; then the samples the ``--help`` examples
use (a state for ``preview --state``, a manifest for ``compile``). Exit 0.
"""

from __future__ import annotations

import argparse
import json
import sys

from ctxpolicy.builtin import PREFIX, builtin_policies, builtin_samples, resolve_ref
from ctxpolicy.loading.read import read_document
from ctxpolicy.render import FORMAT_VERSION

HELP = "name the policies and samples bundled with ctxpolicy (builtin:NAME)"
#: Exit codes, as ``--help``, the README and docs/cli.md give them.
EXIT_CODES = "0, 2 usage"
EXAMPLES = """examples:
  # then: ctxpolicy show builtin:long-session, ctxpolicy init my-team --extends builtin:base
  ctxpolicy list --format json
  ctxpolicy list
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of ``list``."""
    parser.description = HELP
    parser.add_argument(
        "--format", choices=("text", "json"), default="text", help="output format (default: text)"
    )


def _description(name: str) -> str:
    document, _ = read_document(resolve_ref(f"{PREFIX}{name}"))
    value = None if document is None else document.data.get("description")
    return value if isinstance(value, str) else ""


def run(args: argparse.Namespace) -> int:
    """Print the bundled policies and samples. Returns 0."""
    policies = {f"{PREFIX}{name}": _description(name) for name in builtin_policies()}
    samples = list(builtin_samples())
    if args.format == "json":
        data = {"format_version": FORMAT_VERSION, "policies": policies, "samples": samples}
        sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        return 0
    width = max(map(len, policies), default=0)
    lines = ["policies:"]
    lines += [f"  {name.ljust(width)}  {text}".rstrip() for name, text in policies.items()]
    lines += ["samples:", *(f"  {name}" for name in samples)]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


__all__ = ["EXAMPLES", "EXIT_CODES", "HELP", "add_arguments", "run"]
