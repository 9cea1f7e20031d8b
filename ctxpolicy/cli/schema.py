"""``ctxpolicy schema``: print the policy JSON Schema (draft 2020-12)."""

from __future__ import annotations

import argparse
import sys

from ctxpolicy.schema import read_schema_text

HELP = "print the JSON Schema of policy files"
#: Exit codes, as ``--help``, the README and docs/cli.md give them.
EXIT_CODES = "0, 2 usage"
EXAMPLES = """examples:
  # for editors and other tools; policies name it in a yaml-language-server comment
  ctxpolicy schema > ctxpolicy.schema.json
  ctxpolicy schema
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``schema`` takes no arguments."""
    del parser


def run(args: argparse.Namespace) -> int:
    """Print the schema as shipped in the package."""
    del args
    text = read_schema_text()
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0
