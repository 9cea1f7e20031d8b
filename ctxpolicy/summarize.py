"""Summarizing the history that no longer fits (the ``summarize`` overflow).

The ``summarizer`` service is a chat model (a LangChain ``Runnable``: it gets
`summary_prompt`) or a callable ``(messages, previous_summary) -> str`` (sync or
async). `summarize_history` / `asummarize_history` call it on the dropped prefix and the
previous ``compression__context``; the engine decides when (see
`ctxpolicy.engine.PolicyEngine`) and composes again with the new summary.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable

from ctxpolicy.collectors.run import run_awaitable
from ctxpolicy.errors import CollectorError
from ctxpolicy.layers import COMPRESSION, SUMMARIZER_SERVICE

__all__ = [
    "MAX_SUMMARY_PASSES",
    "SUMMARIZER_SERVICE",
    "SUMMARY_INSTRUCTIONS",
    "asummarize_history",
    "summarize_history",
    "summarizer_of",
    "summary_prompt",
    "transcript",
]

#: Summaries made per call at most; later overflow falls back to ``drop_oldest``.
MAX_SUMMARY_PASSES = 3

SUMMARY_INSTRUCTIONS = (
    "You maintain the running summary of a conversation between a user, an AI agent and "
    "its tools. Merge the previous summary with the older messages below into one concise "
    "summary that keeps every fact, decision, open task, identifier and tool result the "
    "agent may still need. Reply with the summary text only."
)


def transcript(messages: Sequence[BaseMessage]) -> str:
    """The messages as plain text, one ``type: text`` line each (tool calls indented)."""
    lines: list[str] = []
    for message in messages:
        line = f"{message.type}: {message.text}"
        for call in getattr(message, "tool_calls", None) or ():
            line += f"\n  tool call {call.get('name')}({call.get('args')})"
        lines.append(line)
    return "\n".join(lines)


def summary_prompt(
    dropped: Sequence[BaseMessage], previous_summary: str | None
) -> list[BaseMessage]:
    """The messages sent to a chat-model summarizer."""
    body = (
        f"Previous summary:\n{previous_summary or '(none)'}\n\n"
        f"Older messages to fold in:\n{transcript(dropped)}"
    )
    return [SystemMessage(SUMMARY_INSTRUCTIONS), HumanMessage(body)]


def summarizer_of(services: Mapping[str, Any]) -> Any:
    """The ``summarizer`` service of a call.

    Raises:
        CollectorError: there is none.
    """
    found = services.get(SUMMARIZER_SERVICE)
    if found is None:
        raise CollectorError(
            COMPRESSION,
            "checkpoint_messages overflow 'summarize' needs a 'summarizer' service (a chat "
            "model, or a callable (messages, previous_summary) -> str)",
        )
    return found


def _summary_text(value: Any) -> str:
    text = str(value.text) if isinstance(value, BaseMessage) else value
    if not isinstance(text, str) or not text.strip():
        raise CollectorError(
            COMPRESSION, f"the summarizer returned {type(value).__name__}, not a non-empty text"
        )
    return text


def summarize_history(
    summarizer: Any, dropped: Sequence[BaseMessage], previous_summary: str | None
) -> str:
    """Call ``summarizer`` (chat model or callable) on ``dropped`` and the old summary.

    Raises:
        CollectorError: the summarizer failed or returned no text.
    """
    try:
        if isinstance(summarizer, Runnable):
            value = summarizer.invoke(summary_prompt(dropped, previous_summary))
        else:
            value = summarizer(tuple(dropped), previous_summary)
            if inspect.isawaitable(value):
                value = run_awaitable(value)
    except CollectorError:
        raise
    except Exception as exc:
        raise CollectorError(COMPRESSION, f"summarizer failed: {exc!r}") from exc
    return _summary_text(value)


async def asummarize_history(
    summarizer: Any, dropped: Sequence[BaseMessage], previous_summary: str | None
) -> str:
    """Async `summarize_history` (``ainvoke`` for chat models; awaits coroutines)."""
    try:
        if isinstance(summarizer, Runnable):
            value = await summarizer.ainvoke(summary_prompt(dropped, previous_summary))
        else:
            value = summarizer(tuple(dropped), previous_summary)
            if inspect.isawaitable(value):
                value = await value
    except CollectorError:
        raise
    except Exception as exc:
        raise CollectorError(COMPRESSION, f"summarizer failed: {exc!r}") from exc
    return _summary_text(value)
