"""``ctxpolicy preview POLICY --process P``: compose and show one call's messages.

Shows the composed messages and a per-layer table: tokens, cap, share of the window
as a bar, and why each layer is included or excluded. ``--state`` takes a JSON or YAML
Blackboard whose ``messages`` are dicts as langchain-core's ``convert_to_messages``
accepts them. Services (retrievers, summarizer) are not available in a preview: their
collectors are shown as skipped, with the reason, instead of failing.

``--format json`` prints ``{"format_version": 1, "plan", "messages", "report",
"persist"}`` (`render_json`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

    from ctxpolicy.engine import ComposeResult
    from ctxpolicy.plan import LayerPlan
    from ctxpolicy.policy import Policy

HELP = "compose one call from a policy and show its messages and per-layer token breakdown"
EXAMPLES = """examples:
  ctxpolicy preview policies/base.yaml --process react --state examples/state.json
  ctxpolicy preview policies/base.yaml -p mapreduce_worker --query "Count rows for 2024-06-01"
  ctxpolicy preview policies/base.yaml -p react --format html -o preview.html
"""

#: Largest state file read, in bytes.
MAX_STATE_BYTES = 20_000_000
BAR_WIDTH = 20
PREVIEW_CHARS = 72
EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2
#: Loader issue rules that mean "could not read the file" (exit 2, like ``validate``).
UNREADABLE_RULES = frozenset({"file.unreadable", "file.missing"})


class PreviewInputError(Exception):
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
        choices=("text", "json", "html"),
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
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise PreviewInputError(f"{what} {path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_STATE_BYTES:
        raise PreviewInputError(f"{what} {path}: larger than {MAX_STATE_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise PreviewInputError(f"{what} {path}: not UTF-8 text") from None


def load_state(path: Path) -> dict[str, Any]:
    """Read a Blackboard from JSON or YAML; ``messages`` become `BaseMessage` objects.

    Raises:
        PreviewInputError: unreadable, not a mapping, or messages langchain cannot read.
    """
    text = _read_text(path, what="--state")
    try:
        if path.suffix.lower() in (".yaml", ".yml"):
            from ruamel.yaml import YAML

            data: Any = YAML(typ="safe", pure=True).load(text)
        else:
            data = json.loads(text)
    except Exception as exc:  # noqa: BLE001 - any parser error is bad input
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PreviewInputError(f"--state {path}: cannot parse: {first}") from None
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise PreviewInputError(f"--state {path}: expected a mapping, got {type(data).__name__}")
    state = dict(data)
    raw = state.get("messages")
    if raw is not None:
        from langchain_core.messages import convert_to_messages

        if not isinstance(raw, list):
            raise PreviewInputError(f"--state {path}: 'messages' must be a list")
        try:
            state["messages"] = convert_to_messages(raw)
        except Exception as exc:  # noqa: BLE001 - langchain raises several types
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            raise PreviewInputError(f"--state {path}: bad 'messages': {message}") from None
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


def _one_line(text: str, width: int = PREVIEW_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _content(message: BaseMessage) -> str:
    content = message.content
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    calls = getattr(message, "tool_calls", None) or ()
    if calls:
        names = ", ".join(str(c.get("name")) for c in calls)
        text = f"{text} [tool calls: {names}]".strip()
    return text


def _bar(tokens: int, cap: int | None, window: int) -> str:
    """``█`` for the tokens used, ``░`` for the rest of the layer's cap, as shares of the window."""
    if window <= 0:
        return " " * BAR_WIDTH
    used = round(BAR_WIDTH * tokens / window)
    used = 1 if tokens and not used else used
    room = round(BAR_WIDTH * (cap or 0) / window)
    room = max(room, used)
    return ("█" * used + "░" * (room - used)).ljust(BAR_WIDTH)


def render_text(
    result: ComposeResult, plan: LayerPlan, *, policy: Policy, layers: Sequence[str]
) -> str:
    """The human-readable preview."""
    report = result.report
    window = policy.model.context_window
    share = 100 * report.total_tokens / report.available_tokens if report.available_tokens else 0
    lines = [
        (
            f"policy {policy.name} · process {plan.process} · query path {plan.query_path} · "
            f"tokenizer {plan.tokenizer} · enable_share_context "
            f"{str(plan.enable_share_context).lower()}"
        ),
        (
            f"window {window} tokens, output reserve {policy.budget.output_reserve:g} → "
            f"available {report.available_tokens}; used {report.total_tokens} ({share:.1f}%)"
        ),
        "",
        "messages:",
    ]
    for index, (message, owner) in enumerate(zip(result.messages, layers, strict=True)):
        lines.append(f"  {index:>3} {message.type:<6} {owner:<22} {_one_line(_content(message))}")
    if not result.messages:
        lines.append("  (none)")
    lines += [
        "",
        f"  {'layer':<22} {'tokens':>7} {'cap':>7}  {'share of window':<{BAR_WIDTH}}  why",
    ]
    for layer in report.layers:
        if layer.included:
            why = layer.reason
            extra = [c.describe() for c in layer.cuts]
            if layer.error:
                extra.append(f"collector skipped: {layer.error}")
            elif not layer.messages and layer.kind == "block":
                extra.append("empty this call")
            if extra:
                why = f"{why} — {'; '.join(extra)}"
            bar = _bar(layer.tokens, layer.base_cap, window)
            lines.append(
                f"  {layer.name:<22} {layer.tokens:>7} {layer.base_cap or 0:>7}  {bar}  {why}"
            )
            lines.extend(
                f"  {'':<22} recalled {u.label} ({u.source}, score {u.score:.2f}, "
                f"{u.tokens} tok): {_one_line(u.text)}"
                for u in layer.recalled
            )
        else:
            lines.append(
                f"  {layer.name:<22} {'-':>7} {'-':>7}  {'':<{BAR_WIDTH}}  excluded: {layer.reason}"
            )
    if result.persist:
        lines += ["", "persist: " + ", ".join(sorted(result.persist))]
    if report.warnings:
        lines += ["", "warnings:"] + [f"  - {w}" for w in report.warnings]
    return "\n".join(lines)


def render_json(result: ComposeResult, plan: LayerPlan, *, layers: Sequence[str]) -> str:
    """The machine-readable preview."""
    from langchain_core.messages import message_to_dict

    from ctxpolicy.cli.reporters import FORMAT_VERSION

    data = {
        "format_version": FORMAT_VERSION,
        "plan": plan.to_dict(),
        "messages": [
            {"layer": layer, **message_to_dict(message)}
            for message, layer in zip(result.messages, layers, strict=True)
        ],
        "report": result.report.to_dict(),
        "persist": result.persist,
    }
    return json.dumps(data, ensure_ascii=False, indent=2, default=str)


def _message_layers(result: ComposeResult) -> list[str]:
    names: list[str] = []
    for layer in result.report.layers:
        names.extend([layer.name] * layer.messages)
    return names


def _stdout_wants_color() -> bool:
    from ctxpolicy.render.terminal import color_enabled

    return color_enabled(sys.stdout)


def render_preview(
    result: ComposeResult,
    plan: LayerPlan,
    *,
    policy: Policy,
    source: str,
    fmt: Literal["text", "json", "html"],
    color: bool = False,
) -> str:
    """Render a composed call as ``text`` (with the stacked window bar), ``json`` or ``html``."""
    layers = _message_layers(result)
    as_json = render_json(result, plan, layers=layers)
    if fmt == "json":
        return as_json
    data = json.loads(as_json)
    data.update(policy=policy.name, source=source)
    if fmt == "html":
        from ctxpolicy.render.html import render_preview_html

        return render_preview_html(data)
    from ctxpolicy.render.terminal import format_stacked_bar

    text = render_text(result, plan, policy=policy, layers=layers)
    return "\n".join([text, "", *format_stacked_bar(data, color=color)])


def emit(rendered: str, *, output: str | None) -> int:
    """Write to standard output, or atomically to ``output``; exit 2 if it cannot be written."""
    if output is None:
        sys.stdout.write(rendered + "\n")
        return EXIT_OK
    from ctxpolicy.atomic import write_text_atomic

    try:
        write_text_atomic(output, rendered + "\n")
    except OSError as exc:
        _err(f"ctxpolicy preview: --output {output}: {exc.strerror or exc}")
        return EXIT_USAGE
    return EXIT_OK


def _load_inputs(args: argparse.Namespace) -> tuple[Policy, dict[str, Any], str] | int:
    """Policy, state and system prompt from the arguments, or the exit code of bad input."""
    from ctxpolicy.errors import PolicyValidationError
    from ctxpolicy.loading import load_policy

    share = None if args.share_context is None else args.share_context == "true"
    try:
        state = load_state(Path(args.state)) if args.state else {}
        system_prompt = _system_prompt(args.system_prompt)
        policy = load_policy(args.policy, enable_share_context=share)
    except PreviewInputError as exc:
        _err(f"ctxpolicy preview: {exc}")
        return EXIT_USAGE
    except PolicyValidationError as exc:
        from ctxpolicy.cli.reporters import format_issue

        for issue in exc.issues:
            _err(format_issue(issue))
        unreadable = any(i.rule in UNREADABLE_RULES for i in exc.issues)
        return EXIT_USAGE if unreadable else EXIT_INVALID
    except OSError as exc:
        _err(f"ctxpolicy preview: {args.policy}: {exc.strerror or exc}")
        return EXIT_USAGE
    return policy, state, system_prompt


def run(args: argparse.Namespace) -> int:
    """Run ``ctxpolicy preview``; exit 0 ok, 1 invalid policy or composition, 2 bad input."""
    from ctxpolicy.engine import PolicyEngine
    from ctxpolicy.errors import CtxPolicyError, QueryPathError, UnknownProcessError

    loaded = _load_inputs(args)
    if isinstance(loaded, int):
        return loaded
    policy, state, system_prompt = loaded
    engine = PolicyEngine(tolerant_policy(policy))
    try:
        plan = engine.plan(args.process)
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
        result,
        plan,
        policy=policy,
        source=str(args.policy),
        fmt=args.format,
        color=args.output is None and _stdout_wants_color(),
    )
    return emit(rendered, output=args.output)


__all__ = ["EXAMPLES", "HELP", "add_arguments", "emit", "load_state", "render_preview", "run"]
