"""The ``ctxpolicy`` command line: one module per verb under ``ctxpolicy.cli``.

Each verb module has ``HELP``, ``EXAMPLES`` (the epilog of its ``--help``),
``add_arguments(parser)`` and ``run(args) -> int``, and imports what it needs at the top.
This module is the lazy surface: it imports a verb's module only when that verb runs
(`build_parser` for the verb named on the command line), so ``ctxpolicy validate``
never loads what ``preview`` needs (langchain-core, tiktoken, jinja2).

Exit codes: 0 ok, 1 invalid or different, 2 usage or unreadable, 3 internal error,
141 output pipe closed. `main` never lets a traceback out: a `CtxPolicyError` or
`OSError` becomes one line on stderr, anything unexpected an "internal error"
line (the traceback only with ``CTXPOLICY_DEBUG=1``).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from types import ModuleType
from typing import Any, NoReturn

import ctxpolicy
from ctxpolicy.cli.reporters import format_issue
from ctxpolicy.errors import CtxPolicyError, PolicyValidationError

#: The verbs, in the order ``--help`` lists them.
VERBS: tuple[str, ...] = (
    "validate",
    "show",
    "schema",
    "preview",
    "compile",
    "set",
    "diff",
    "init",
    "list",
    "completion",
)

PROG = "ctxpolicy"

EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
#: 128 + SIGPIPE: what a command killed by a closed pipe exits with (``cat``, ``git``).
EXIT_BROKEN_PIPE = 141
EXIT_INTERRUPTED = 130
#: Set (to anything but ``0``) to get the traceback of an internal error.
DEBUG_VARIABLE = "CTXPOLICY_DEBUG"

_EPILOG = f"""exit codes:
  0    valid / written / identical
  1    invalid policy, or the two policies differ (diff)
  2    usage error, or a file that is missing or cannot be read (diff: also invalid)
  3    internal error: a bug in ctxpolicy (please report it; {DEBUG_VARIABLE}=1 for details)
  130  interrupted
  {EXIT_BROKEN_PIPE}  the reader of the output went away (e.g. `| head -1`); nothing printed

environment:
  CTXPOLICY_POLICY                the policy file when none is given (show)
  CTXPOLICY_ENABLE_SHARE_CONTEXT  override the central switch (also TOKENIZER, CONTEXT_WINDOW)
  NO_COLOR                        any non-empty value: no colour anywhere
  FORCE_COLOR                     colour even when stdout is not a terminal (not over NO_COLOR)
  {DEBUG_VARIABLE}=1               print the traceback of an internal error

policies bundled with the package are named builtin:NAME (ctxpolicy list) wherever a
policy file is taken, and in extends: and CTXPOLICY_POLICY.

examples:
  ctxpolicy list
  ctxpolicy show builtin:long-session --explain
  ctxpolicy preview builtin:base --process react --state builtin:samples/state.json
  ctxpolicy init my-team --extends builtin:base
  ctxpolicy validate my-team.yaml --format github
  ctxpolicy COMMAND --help
"""


def package_version() -> str:
    """The installed distribution's version, else the package's ``__version__``.

    importlib.metadata is imported here, when the version is asked for: it costs every
    other command ~25 ms of start-up (docs/design.md, 'Structure: where each decision
    lives').
    """
    import importlib.metadata  # declared lazy import

    try:
        return importlib.metadata.version(PROG)
    except importlib.metadata.PackageNotFoundError:
        return str(getattr(ctxpolicy, "__version__", "unknown"))


class _VersionAction(argparse.Action):
    """``--version``: looks the version up only when asked (keeps start-up light)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        kwargs.setdefault("help", "show the version and exit")
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> NoReturn:
        del namespace, values, option_string
        sys.stdout.write(f"{PROG} {package_version()}\n")
        parser.exit(0)


#: Verbs whose module has another name (a submodule named ``list`` would shadow the
#: built-in ``list`` in this package's namespace once imported).
VERB_MODULES = {"list": "bundled"}


def verb_module(verb: str) -> ModuleType:
    """The module of ``verb`` (``ctxpolicy.cli.<verb>``, or its `VERB_MODULES` name)."""
    return importlib.import_module(f"ctxpolicy.cli.{VERB_MODULES.get(verb, verb)}")


def build_parser(verbs: Sequence[str] = VERBS) -> argparse.ArgumentParser:
    """The argument parser with one sub-command per verb of ``verbs`` (default: all).

    Only the modules of ``verbs`` are imported.
    """
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Declarative context policies: validate, inspect and preview policy files.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_VersionAction)
    commands = parser.add_subparsers(dest="verb", metavar="COMMAND", required=True)
    for verb in verbs:
        module = verb_module(verb)
        sub = commands.add_parser(
            verb,
            help=module.HELP,
            description=module.HELP,
            epilog=f"exit codes: {module.EXIT_CODES}\n\n{module.EXAMPLES}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(sub)
        sub.set_defaults(_run=module.run)
    return parser


def _debug() -> bool:
    return os.environ.get(DEBUG_VARIABLE, "") not in ("", "0")


def _internal_error(exc: BaseException) -> int:
    """One line naming the exception, a hint to report it; the traceback only when debugging."""
    if _debug():
        traceback.print_exception(exc, file=sys.stderr)
    lines = str(exc).strip().splitlines()
    detail = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    try:
        version = f" {package_version()}"
    except Exception:  # noqa: BLE001 - reporting a bug must not raise another
        version = ""
    sys.stderr.write(
        f"{PROG}: internal error: {detail[:500]}\n"
        f"{PROG}: this is a bug in ctxpolicy{version}; please report it with the "
        f"command line and the traceback that {DEBUG_VARIABLE}=1 prints\n"
    )
    return EXIT_INTERNAL


def _silence_stdout() -> None:
    """Point file descriptor 1 at /dev/null so the interpreter's final flush cannot fail."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # not a real file (tests): nothing to do
        pass


def _named_verbs(argv: Sequence[str]) -> tuple[str, ...]:
    """The verb named on the command line (the first word that is not an option), or
    every verb when none is named (``--help``, a typo: the full parser answers)."""
    named = next((word for word in argv if not word.startswith("-")), None)
    return (named,) if named in VERBS else VERBS


def _dispatch(argv: Sequence[str] | None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_named_verbs(words))
    try:
        args = parser.parse_args(words)
    except SystemExit as exc:  # argparse: --help/--version (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    try:
        code: int = args._run(args)
    except PolicyValidationError as exc:
        for issue in exc.issues:
            sys.stderr.write(format_issue(issue) + "\n")
        return EXIT_INVALID
    except CtxPolicyError as exc:
        sys.stderr.write(f"{PROG} {args.verb}: {exc}\n")
        return EXIT_INVALID
    except BrokenPipeError:
        raise
    except OSError as exc:
        sys.stderr.write(f"{PROG} {args.verb}: {exc}\n")
        return EXIT_USAGE
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code.

    0 ok, 1 invalid or different, 2 usage or unreadable, 3 internal error (one line on
    stderr; set ``CTXPOLICY_DEBUG=1`` for the traceback), 130 interrupted, 141 the output
    pipe was closed (quietly: nothing is printed).
    """
    # the verbs print what the `ctxpolicy` logger would (a skipped collector is in the
    # preview): no second copy on stderr from Python's last-resort handler, during the run
    logger = logging.getLogger("ctxpolicy")
    quiet = logging.NullHandler()
    logger.addHandler(quiet)
    try:
        code = _dispatch(argv)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the one place that turns bugs into exit 3
        return _internal_error(exc)
    finally:
        logger.removeHandler(quiet)
    return code


#: pydantic looks for plugins in the entry points of every installed distribution the
#: first time it builds a model (~10 ms of start-up in a large environment); none has any
#: use in a command-line run. Set the variable yourself (even empty) to keep them.
PYDANTIC_PLUGINS_VARIABLE = "PYDANTIC_DISABLE_PLUGINS"


def console_main() -> None:
    """Entry point of the ``ctxpolicy`` console script and of ``python -m ctxpolicy``."""
    os.environ.setdefault(PYDANTIC_PLUGINS_VARIABLE, "__all__")
    sys.exit(main())


__all__ = [
    "DEBUG_VARIABLE",
    "EXIT_BROKEN_PIPE",
    "EXIT_INTERNAL",
    "VERBS",
    "VERB_MODULES",
    "build_parser",
    "console_main",
    "main",
    "package_version",
    "verb_module",
]
