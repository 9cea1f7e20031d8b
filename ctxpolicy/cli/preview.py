"""``ctxpolicy preview POLICY --process P``: compose and show one call's messages.

Shows the composed messages and a per-layer table: tokens, cap, share of the window
as a bar, and why each layer is included or excluded. ``--state`` takes a JSON or YAML
Blackboard whose ``messages`` are dicts as langchain-core's ``convert_to_messages``
accepts them. Services (retrievers, summarizer) are not available in a preview: their
collectors are shown as skipped, with the reason, instead of failing.

The renderers are `ctxpolicy.render.formats`'s, chosen by ``--format``: ``text``,
``json`` (``{"format_version": 1, "plan", "messages", "report", "persist"}``, see
`ctxpolicy.render.data`) or ``html``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from langchain_core.messages import convert_to_messages
from ruamel.yaml import YAML

from ctxpolicy.atomic import write_text_atomic
from ctxpolicy.builtin import is_builtin, missing_message, resolve_ref
from ctxpolicy.cli.reporters import format_issue
from ctxpolicy.diagnostics import display_name
from ctxpolicy.engine import PolicyEngine
from ctxpolicy.errors import (
    CtxPolicyError,
    PolicyValidationError,
    QueryPathError,
    UnknownProcessError,
)
from ctxpolicy.layers import CHECKPOINT_MESSAGES
from ctxpolicy.loading import load_policy
from ctxpolicy.plan import LayerPlan
from ctxpolicy.policy import Policy
from ctxpolicy.render.formats import FORMATS, render_preview
from ctxpolicy.render.terminal import color_enabled
from ctxpolicy.render.view import Preview

HELP = "compose one call from a policy and show its messages and per-layer token breakdown"
#: Exit codes, as ``--help``, the README and docs/cli.md give them.
EXIT_CODES = "0 composed, 1 invalid policy or call, 2 usage/unreadable"
EXAMPLES = """examples:
  ctxpolicy preview builtin:long-session -p react --state builtin:samples/state.json \\
      --format html -o preview.html
  # a MapReduce worker: no history, its input given with --query
  ctxpolicy preview builtin:base -p mapreduce_worker --query "Count rows for 2024-06-01"
  # a ReAct call: its input is the last user message of the --state history
  ctxpolicy preview builtin:base --process react --state builtin:samples/state.json
"""

#: Largest state file read, in bytes.
MAX_STATE_BYTES = 20_000_000
EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2
#: Loader issue rules that mean "could not read the file" (exit 2, like ``validate``).
UNREADABLE_RULES = frozenset({"file.unreadable", "file.missing"})


class PreviewInputError(CtxPolicyError):
    """Bad command-line input (exit 2)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``ctxpolicy preview``."""
    parser.add_argument("policy", metavar="POLICY", help="policy file (YAML or TOML)")
    parser.add_argument("--process", "-p", default=None, help="process (default: the policy's)")
    parser.add_argument("--state", metavar="FILE", help="Blackboard state as JSON or YAML")
    parser.add_argument("--query", metavar="TEXT", help="runtime input (query: runtime processes)")
    parser.add_argument(
        "--system-prompt",
        metavar="TEXT|@FILE",
        default="You are a helpful agent.",
        help="the agent's system prompt, or @FILE to read it from a file",
    )
    parser.add_argument(
        "--share-context",
        choices=("true", "false"),
        default=None,
        help="override enable_share_context for this preview",
    )
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
        help="write the preview to FILE (atomically) instead of standard output",
    )


def _read_text(path: Path, *, what: str) -> str:
    name = display_name(path)  # a bundled file by its builtin: name, not its venv path
    try:
        data = path.read_bytes()
    except OSError as exc:
        if isinstance(exc, FileNotFoundError) and is_builtin(name):
            raise PreviewInputError(f"{what} {name}: {missing_message(name)}") from None
        raise PreviewInputError(f"{what} {name}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_STATE_BYTES:
        raise PreviewInputError(f"{what} {name}: larger than {MAX_STATE_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise PreviewInputError(f"{what} {name}: not UTF-8 text") from None


def load_state(path: Path) -> dict[str, Any]:
    """Read a Blackboard from JSON or YAML; ``messages`` become `BaseMessage` objects.

    Raises:
        PreviewInputError: unreadable, not a mapping, or messages langchain cannot read.
    """
    text = _read_text(path, what="--state")
    name = display_name(path)
    try:
        if path.suffix.lower() in (".yaml", ".yml"):
            data: Any = YAML(typ="safe", pure=True).load(text)
        else:
            data = json.loads(text)
    except Exception as exc:  # noqa: BLE001 - any parser error is bad input
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PreviewInputError(f"--state {name}: cannot parse: {first}") from None
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise PreviewInputError(f"--state {name}: expected a mapping, got {type(data).__name__}")
    state = dict(data)
    raw = state.get("messages")
    if raw is not None:
        if not isinstance(raw, list):
            raise PreviewInputError(f"--state {name}: 'messages' must be a list")
        try:
            state["messages"] = convert_to_messages(raw)
        except Exception as exc:  # noqa: BLE001 - langchain raises several types
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            raise PreviewInputError(f"--state {name}: bad 'messages': {message}") from None
    return state


def _err(line: str) -> None:
    sys.stderr.write(line + "\n")


def _system_prompt(value: str) -> str:
    if value.startswith("@"):
        return _read_text(Path(value[1:]), what="--system-prompt")
    return value


def tolerant_policy(policy: Policy) -> Policy:
    """``policy`` with every collector set to ``on_error: skip`` (preview has no services)."""
    layers = {
        name: spec.model_copy(
            update={"collector": spec.collector.model_copy(update={"on_error": "skip"})}
        )
        if spec.collector is not None
        else spec
        for name, spec in policy.layers.items()
    }
    copy = policy.model_copy(update={"layers": layers})
    copy._source = policy._source  # keep where relative files resolve
    copy._base_dirs = policy._base_dirs
    return copy


def stdout_wants_color() -> bool:
    """Whether standard output takes ANSI colour (a terminal, no ``NO_COLOR``)."""
    return color_enabled(sys.stdout)


def emit(rendered: str, *, output: str | None, verb: str) -> int:
    """Write to standard output, or atomically to ``output``; exit 2 if it cannot be
    written (the error names ``verb``, the command that rendered it)."""
    if output is None:
        sys.stdout.write(rendered + "\n")
        return EXIT_OK
    try:
        write_text_atomic(output, rendered + "\n")
    except OSError as exc:
        _err(f"ctxpolicy {verb}: --output {output}: {exc.strerror or exc}")
        return EXIT_USAGE
    return EXIT_OK


def _load_inputs(args: argparse.Namespace) -> tuple[Policy, dict[str, Any], str] | int:
    """Policy, state and system prompt from the arguments, or the exit code of bad input."""
    share = None if args.share_context is None else args.share_context == "true"
    try:
        state = load_state(resolve_ref(args.state)) if args.state else {}
        system_prompt = _system_prompt(args.system_prompt)
        policy = load_policy(args.policy, enable_share_context=share)
    except PreviewInputError as exc:
        _err(f"ctxpolicy preview: {exc}")
        return EXIT_USAGE
    except PolicyValidationError as exc:
        for issue in exc.issues:
            _err(format_issue(issue))
        unreadable = any(i.rule in UNREADABLE_RULES for i in exc.issues)
        return EXIT_USAGE if unreadable else EXIT_INVALID
    except OSError as exc:
        _err(f"ctxpolicy preview: {args.policy}: {exc.strerror or exc}")
        return EXIT_USAGE
    return policy, state, system_prompt


#: What to give a process whose input arrives in the history.
_STATE_HINT = "--state FILE (e.g. --state builtin:samples/state.json)"


def input_problem(plan: LayerPlan, state: Mapping[str, Any], query: str | None) -> str | None:
    """Why ``--query`` / ``--state`` cannot give this process its input, in the CLI's
    own words (the flags, not the Python arguments), or None when they can."""
    where = f"process {plan.process!r} takes its input"
    if plan.query_path == "runtime":
        if query is None or not query.strip():
            return f"{where} at run time (query: runtime): give it with --query TEXT"
        return None
    if not plan.includes(CHECKPOINT_MESSAGES):
        return None  # the policy's own problem: the composer names it
    if query is not None:
        return (
            f"{where} from the history (query: checkpoint), so --query does not apply: "
            f"give it as the last user message in {_STATE_HINT}"
        )
    messages = state.get("messages") or ()
    if not any(getattr(m, "type", None) == "human" for m in messages):
        given = "--state holds no user message" if messages else "no --state history given"
        return (
            f"{where} from the history (query: checkpoint) and {given}: give one in "
            f"{_STATE_HINT}, its last user message being the input"
        )
    return None


def run(args: argparse.Namespace) -> int:
    """Run ``ctxpolicy preview``; exit 0 ok, 1 invalid policy or composition, 2 bad input."""
    loaded = _load_inputs(args)
    if isinstance(loaded, int):
        return loaded
    policy, state, system_prompt = loaded
    engine = PolicyEngine(tolerant_policy(policy))
    try:
        plan = engine.plan(args.process)
        problem = input_problem(plan, state, args.query)
        if problem is not None:
            _err(f"ctxpolicy preview: {problem}")
            return EXIT_USAGE
        result = engine.compose(
            process=args.process, system_prompt=system_prompt, state=state, query=args.query
        )
    except (QueryPathError, UnknownProcessError, ValueError, TypeError) as exc:
        _err(f"ctxpolicy preview: {exc}")
        return EXIT_USAGE
    except CtxPolicyError as exc:
        _err(f"ctxpolicy preview: {exc}")
        return EXIT_INVALID
    rendered = render_preview(
        Preview.of(result, plan, policy=policy, source=str(args.policy)),
        fmt=args.format,
        color=args.output is None and stdout_wants_color(),
    )
    return emit(rendered, output=args.output, verb="preview")


__all__ = [
    "EXAMPLES",
    "EXIT_CODES",
    "HELP",
    "PreviewInputError",
    "add_arguments",
    "emit",
    "input_problem",
    "load_state",
    "run",
    "stdout_wants_color",
    "tolerant_policy",
]
