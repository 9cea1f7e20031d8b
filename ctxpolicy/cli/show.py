"""``ctxpolicy show POLICY``: the effective policy after ``extends`` and the environment.

The printed policy is self-contained (`ctxpolicy.cli.effective`): no ``extends`` (its
values are merged in) and template files inline, so saved anywhere it validates and
loads to the same effective policy (``ctxpolicy diff`` says identical). A ``files`` root
cannot be inlined; a note on stderr names it.

``--explain`` lists, for every effective value, the file line, environment variable
or default that set it.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.scalarstring import LiteralScalarString

from ctxpolicy.cli.effective import self_contained
from ctxpolicy.cli.reporters import format_issue
from ctxpolicy.diagnostics import display_name
from ctxpolicy.errors import PolicyNotGivenError
from ctxpolicy.loading import resolve_policy
from ctxpolicy.loading.loader import LoadResult
from ctxpolicy.policy import Policy
from ctxpolicy.settings import policy_path

HELP = "print the effective policy (after extends and environment overrides)"
#: Exit codes, as ``--help``, the README and docs/cli.md give them.
EXIT_CODES = "0 valid, 1 invalid, 2 usage/unreadable"
EXAMPLES = """examples:
  # save the effective policy: self-contained, it loads from any folder
  ctxpolicy show builtin:long-session > effective.yaml
  CTXPOLICY_POLICY=builtin:base ctxpolicy show --format json
  # which file line, variable or default set each value
  ctxpolicy show builtin:base --explain
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of ``show``."""
    parser.add_argument(
        "policy",
        nargs="?",
        metavar="POLICY",
        help="policy file (default: $CTXPOLICY_POLICY)",
    )
    parser.add_argument(
        "--format", choices=("yaml", "json"), default="yaml", help="output format (default: yaml)"
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="show where every effective value comes from (file:line, variable, default)",
    )


def _literal_blocks(data: Any) -> Any:
    """``data`` with multi-line strings marked for YAML literal blocks (``|``)."""
    if isinstance(data, dict):
        return {key: _literal_blocks(value) for key, value in data.items()}
    if isinstance(data, list):
        return [_literal_blocks(value) for value in data]
    if isinstance(data, str) and "\n" in data.rstrip("\n"):
        return LiteralScalarString(data)
    return data


def _dump(data: Any) -> str:
    yaml = YAML(typ="rt", pure=True)
    yaml.default_flow_style = False
    yaml.width = 100
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()


def dump_yaml(data: Any) -> str:
    """YAML text of ``data``; multi-line strings as literal blocks when that round-trips."""
    text = _dump(_literal_blocks(data))
    try:
        same = YAML(typ="safe", pure=True).load(text) == data
    except Exception:  # noqa: BLE001 - any doubt: fall back to plain quoting
        same = False
    return text if same else _dump(data)


def _header(source: str) -> str:
    shown = " ".join(source.splitlines())
    return (
        f"# Effective policy of {shown} (ctxpolicy show): extends resolved,\n"
        "# environment applied, template files inline. Loads from any folder.\n"
    )


def _explain(result: LoadResult, *, fmt: str) -> Iterator[str]:
    """Where every effective value comes from (file line, variable or default), in pieces
    written one by one: a reader that stops early (``| head``) stops the command early."""
    rows = [{"path": p.path, "value": p.value, "source": p.source} for p in result.provenance()]
    if fmt == "json":
        yield json.dumps(rows, indent=2, ensure_ascii=False) + "\n"
        return
    for row in rows:
        yield f"{row['path']} = {json.dumps(row['value'], ensure_ascii=False)}  # {row['source']}\n"


def _effective(policy: Policy, *, target: str, fmt: str) -> str:
    """The self-contained effective policy as YAML (with a header) or JSON."""
    effective = self_contained(policy)
    for note in effective.notes:
        sys.stderr.write(f"ctxpolicy show: note: {target}: {note}\n")
    data = effective.policy.to_data()
    if fmt == "json":
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    return _header(target) + dump_yaml(data)


def run(args: argparse.Namespace) -> int:
    """Print the effective policy; on errors print them and return 1."""
    try:
        target = str(policy_path(args.policy))
    except PolicyNotGivenError:
        sys.stderr.write("ctxpolicy show: give POLICY or set CTXPOLICY_POLICY\n")
        return 2
    result = resolve_policy(target)
    if result.policy is None:
        for issue in result.issues:
            sys.stderr.write(format_issue(issue) + "\n")
        unreadable = any(i.rule in ("file.unreadable", "file.missing") for i in result.issues)
        return 2 if unreadable else 1
    if args.explain:
        for piece in _explain(result, fmt=args.format):
            sys.stdout.write(piece)
    else:
        shown = display_name(Path(target))
        sys.stdout.write(_effective(result.policy, target=shown, fmt=args.format))
    return 0
