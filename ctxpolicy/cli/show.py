"""``ctxpolicy show POLICY``: the effective policy after ``extends`` and the environment.

``--explain`` lists, for every effective value, the file line, environment variable
or default that set it.
"""

from __future__ import annotations

import argparse
from typing import Any

HELP = "print the effective policy (after extends and environment overrides)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of ``show``."""
    parser.add_argument(
        "policy", nargs="?", metavar="POLICY",
        help="policy file (default: $CTXPOLICY_POLICY)",
    )
    parser.add_argument(
        "--format", choices=("yaml", "json"), default="yaml", help="output format (default: yaml)"
    )
    parser.add_argument(
        "--explain", action="store_true",
        help="show where every effective value comes from (file:line, variable, default)",
    )


def _dump_yaml(data: Any) -> str:
    import io

    from ruamel.yaml import YAML

    yaml = YAML(typ="rt", pure=True)
    yaml.default_flow_style = False
    yaml.width = 100
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()


def run(args: argparse.Namespace) -> int:
    """Print the effective policy; on errors print them and return 1."""
    import json
    import sys

    from ctxpolicy.loading import resolve_policy
    from ctxpolicy.settings import read_settings

    target = args.policy
    if target is None:
        settings, _ = read_settings()
        if settings.policy is None:
            sys.stderr.write("ctxpolicy show: give POLICY or set CTXPOLICY_POLICY\n")
            return 2
        target = str(settings.policy)
    result = resolve_policy(target)
    if result.policy is None:
        for issue in result.issues:
            sys.stderr.write(issue.format_text() + "\n")
        return 2 if any(i.rule == "file.unreadable" for i in result.issues) else 1
    if args.explain:
        rows = [
            {"path": p.path, "value": p.value, "source": p.source} for p in result.provenance()
        ]
        if args.format == "json":
            sys.stdout.write(json.dumps(rows, indent=2, ensure_ascii=False) + "\n")
        else:
            for row in rows:
                value = json.dumps(row["value"], ensure_ascii=False)
                sys.stdout.write(f"{row['path']} = {value}  # {row['source']}\n")
        return 0
    data = result.policy.to_data()
    if args.format == "json":
        sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(_dump_yaml(data))
    return 0
