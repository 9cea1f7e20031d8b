"""The ``ctxpolicy`` command line: one module per verb under ``ctxpolicy.cli``.

Each verb module has ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int`` and is
cheap to import (heavy imports live inside ``run``). Exit codes: 0 ok, 1 invalid or
different, 2 usage or unreadable. `main` never lets a traceback out: a
`CtxPolicyError` or `OSError` becomes one line on stderr.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

#: The verbs, in the order ``--help`` lists them.
VERBS: tuple[str, ...] = ("validate", "show", "schema", "preview", "set", "diff", "init")

PROG = "ctxpolicy"


def _verb_module(verb: str) -> ModuleType:
    return importlib.import_module(f"ctxpolicy.cli.{verb}")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with one sub-command per verb."""
    from ctxpolicy import __version__

    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Declarative context policies: validate, inspect and preview policy files.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="verb", metavar="COMMAND", required=True)
    for verb in VERBS:
        module = _verb_module(verb)
        sub = commands.add_parser(verb, help=module.HELP, description=module.HELP)
        module.add_arguments(sub)
        sub.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 ok, 1 invalid/differ, 2 usage/unreadable)."""
    from ctxpolicy.errors import CtxPolicyError, PolicyValidationError

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help/--version (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else 2
    try:
        code: int = args._run(args)
    except PolicyValidationError as exc:
        for issue in exc.issues:
            sys.stderr.write(issue.format_text() + "\n")
        return 1
    except CtxPolicyError as exc:
        sys.stderr.write(f"{PROG} {args.verb}: {exc}\n")
        return 1
    except OSError as exc:
        sys.stderr.write(f"{PROG} {args.verb}: {exc}\n")
        return 2
    except KeyboardInterrupt:
        return 130
    return code


def console_main() -> None:
    """Entry point of the ``ctxpolicy`` console script."""
    sys.exit(main())


__all__ = ["VERBS", "build_parser", "console_main", "main"]
