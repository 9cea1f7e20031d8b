"""``ctxpolicy compile CONTEXT_CONFIG.json``: compile a context manifest and show the messages.

A manifest (docs/design.md, 'Files as context'; `ctxpolicy.blocks.manifest`) names
every input of one LLM call by handle: prompt files, profile blocks, the history
file, the query with inline references. This verb compiles it through the engine's
planner and composer and shows the result like ``preview`` does (the same renderers:
``--format text|json|html``, ``-o`` written atomically). Errors are one line each,
``FILE:LINE:COL: MESSAGE [RULE]`` when the place is known; exit 0 compiled, 1 invalid
manifest or a handle that points at nothing, 2 unreadable input or bad usage.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ctxpolicy.blocks.manifest import (
    emit_composition,
    format_messages,
    manifest_from_text,
    manifest_policy,
    merge_references,
    read_sources,
    resolve_sources,
    select_blocks,
)
from ctxpolicy.blocks.sandbox import read_text_inside, resolve_root
from ctxpolicy.builtin import resolve_ref
from ctxpolicy.cli import main as cli_main
from ctxpolicy.cli.preview import emit, stdout_wants_color
from ctxpolicy.cli.reporters import format_issue
from ctxpolicy.engine import ComposeResult
from ctxpolicy.errors import (
    BlocksError,
    BudgetExceededError,
    CtxPolicyError,
    FileAccessError,
    ManifestError,
    PathEscapeError,
    PolicyValidationError,
    QueryPathError,
    UnknownProcessError,
)
from ctxpolicy.loading import load_policy
from ctxpolicy.render.formats import FORMATS, render_preview
from ctxpolicy.render.view import Preview

if TYPE_CHECKING:
    from ctxpolicy.blocks.manifest import ContextManifest
    from ctxpolicy.plan import LayerPlan
    from ctxpolicy.policy import Policy

HELP = "compile a context manifest (context-config.json) and show its messages like preview"
#: Exit codes, as ``--help``, the README and docs/cli.md give them.
EXIT_CODES = "0 compiled, 1 invalid manifest, 2 usage/unreadable"
EXAMPLES = """examples:
  # your own manifest: its handles resolve in --root DIR (default: the manifest's
  # folder), session files in --session DIR inside it; --policy FILE sets the budget
  ctxpolicy compile builtin:samples/manifest/context-config.json --format json
  ctxpolicy compile builtin:samples/manifest/context-config.json --format html -o call.html
  # the bundled sample manifest (ctxpolicy list); its files sit beside it
  ctxpolicy compile builtin:samples/manifest/context-config.json
"""

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``ctxpolicy compile``."""
    parser.add_argument(
        "manifest",
        metavar="CONTEXT_CONFIG",
        help="context manifest (JSON), or builtin:samples/manifest/context-config.json",
    )
    parser.add_argument(
        "--root",
        metavar="DIR",
        help="data folder the handles resolve in; nothing outside it is read "
        "(default: the manifest's folder)",
    )
    parser.add_argument(
        "--session", metavar="DIR", help="session folder inside the root (session files)"
    )
    parser.add_argument(
        "--policy",
        metavar="POLICY",
        help="policy file for budget and order (default: the built-in manifest policy)",
    )
    parser.add_argument("--process", "-p", default=None, help="process (default: the policy's)")
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        help="text (coloured on a terminal), json, or a self-contained html page",
    )
    parser.add_argument(
        "--output",
        "-o",
        metavar="FILE",
        help="write the result to FILE (atomically) instead of standard output",
    )


def _err(line: str) -> None:
    sys.stderr.write(line + "\n")


def _locate(text: str, needle: str) -> tuple[int, int] | None:
    """Line and column (1-based) of the first ``"needle"`` in the manifest text."""
    match = re.search(re.escape(json.dumps(needle, ensure_ascii=False)), text)
    if match is None:
        match = re.search(re.escape(needle), text)
    if match is None:
        return None
    line = text.count("\n", 0, match.start()) + 1
    column = match.start() - (text.rfind("\n", 0, match.start()) + 1) + 1
    return line, column


def _problem(file: str, text: str | None, needle: str | None, message: str, rule: str) -> str:
    where = _locate(text, needle) if text is not None and needle else None
    place = f"{file}:{where[0]}:{where[1]}" if where else file
    return f"{place}: {message} [{rule}]"


_JSON_POSITION = re.compile(r":(\d+):(\d+): not JSON: ")


def _manifest_error(file: str, text: str | None, message: str) -> str:
    """A `ManifestError` message as ``FILE:LINE:COL: ... [rule]``."""
    found = _JSON_POSITION.search(message)
    if found is not None:
        detail = message[found.end() :]
        return f"{file}:{found.group(1)}:{found.group(2)}: not JSON: {detail} [manifest.json]"
    detail = message.split(": invalid context manifest: ", 1)[-1]
    key = detail.split(".", 1)[0].split(":", 1)[0].strip()
    return _problem(
        file, text, key or None, f"invalid context manifest: {detail}", "manifest.schema"
    )


def _read_manifest(path: Path, file: str) -> str | int:
    """The text of the manifest ``file`` (at ``path``), read once as `load_manifest`
    reads it (a regular file within the size limit, UTF-8), or exit 2 after one line
    naming why it cannot be read."""
    try:
        return read_text_inside(path.parent, path.name)
    except (FileAccessError, PathEscapeError) as exc:
        missing = isinstance(exc, FileAccessError) and exc.missing
        rule = "file.missing" if missing else "file.unreadable"
        _err(f"{file}: cannot read: {exc.reason} [{rule}]")
        return EXIT_USAGE


def _root(root: str | None, manifest: Path) -> str | int:
    """The folder the manifest's handles resolve in (``--root``, else the manifest's
    folder), or exit 2 after one line when ``--root`` is no folder."""
    if root is None:
        return str(manifest.parent) or "."
    try:
        resolve_root(root)
    except FileAccessError as exc:
        _err(f"ctxpolicy compile: --root {root}: {'no such folder' if exc.missing else exc.reason}")
        return EXIT_USAGE
    return root


def _policy(path: str | None) -> Policy | int:
    """The ``--policy`` file (the built-in manifest policy without one), or an exit code."""
    if path is None:
        return manifest_policy()
    try:
        return load_policy(path)
    except PolicyValidationError as exc:
        for issue in exc.issues:
            _err(format_issue(issue))
        unreadable = any(i.rule in ("file.missing", "file.unreadable") for i in exc.issues)
        return EXIT_USAGE if unreadable else EXIT_INVALID


def _compile(
    manifest: ContextManifest, args: argparse.Namespace, *, policy: Policy | None, root: str
) -> tuple[LayerPlan, ComposeResult]:
    """Read the manifest's sources and compose its call (the five stages)."""
    sources = read_sources(manifest, root=root, session_dir=args.session)
    formatted = format_messages(manifest, sources, user_message=merge_references(manifest, sources))
    plan, composition = emit_composition(
        system_prompt=resolve_sources(manifest, sources),
        profile=select_blocks(manifest, sources),
        formatted=formatted,
        policy=policy,
        process=args.process,
    )
    result = ComposeResult(
        messages=list(composition.messages), report=composition.report, persist={}
    )
    return plan, result


def _failure(  # noqa: PLR0911 - one line per kind of error
    exc: CtxPolicyError | ValueError, file: str, text: str
) -> tuple[str, int]:
    """The one line and exit code of a manifest that does not compile."""
    if isinstance(exc, ManifestError):
        return _manifest_error(file, text, str(exc)), EXIT_INVALID
    if isinstance(exc, PathEscapeError):
        return _problem(file, text, exc.path, str(exc), "path.outside"), EXIT_INVALID
    if isinstance(exc, FileAccessError):
        needle = exc.path.rsplit("/", 1)[-1]
        return _problem(file, text, needle, str(exc), "file.missing"), EXIT_INVALID
    if isinstance(exc, BlocksError):  # a reference or profile block that points at nothing
        block = getattr(exc, "block_id", None)
        found = block if isinstance(block, str) else _first_quoted(str(exc))
        return _problem(file, text, found, str(exc), "manifest.reference"), EXIT_INVALID
    if isinstance(exc, BudgetExceededError):
        return f"{file}: {exc} [budget.exceeded]", EXIT_INVALID
    if isinstance(exc, QueryPathError | UnknownProcessError | ValueError):
        return f"ctxpolicy compile: {exc}", EXIT_USAGE
    return f"{file}: {exc} [manifest.compile]", EXIT_INVALID


def run(args: argparse.Namespace) -> int:
    """Run ``ctxpolicy compile``; exit 0 ok, 1 invalid or unresolvable, 2 unreadable input."""
    file = str(args.manifest)
    path = resolve_ref(file)
    root = _root(args.root, path)
    if isinstance(root, int):
        return root
    text = _read_manifest(path, file)
    if isinstance(text, int):
        return text
    policy = _policy(args.policy)
    if isinstance(policy, int):
        return policy
    try:
        manifest = manifest_from_text(text, source=file)
        plan, result = _compile(
            manifest, args, policy=None if args.policy is None else policy, root=root
        )
    except (CtxPolicyError, ValueError) as exc:
        line, code = _failure(exc, file, text)
        _err(line)
        return code
    rendered = render_preview(
        Preview.of(result, plan, policy=policy, source=file),
        fmt=args.format,
        color=args.output is None and stdout_wants_color(),
    )
    return emit(rendered, output=args.output, verb="compile")


def _first_quoted(message: str) -> str | None:
    found = re.search(r"'([^']+)'", message)
    return found.group(1) if found else None


def main(argv: Sequence[str] | None = None) -> int:
    """``ctxpolicy compile ARGS`` (the same exit codes and error handling as the CLI)."""
    return cli_main(["compile", *(sys.argv[1:] if argv is None else argv)])


__all__ = ["EXAMPLES", "EXIT_CODES", "HELP", "add_arguments", "main", "run"]
