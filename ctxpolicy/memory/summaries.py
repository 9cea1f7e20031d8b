"""L3 summaries: a summarizer service when given, a deterministic extractive summary otherwise."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctxpolicy.memory.items import MemoryItem

Summarizer = Callable[[str], str]
"""A summarizer callable: full text in, summary out."""

EXTRACTIVE_MAX_CHARS = 200
_SENTENCE_END = re.compile(r"(?<=[.!?\u3002\uff01\uff1f])\s+")
_SPACES = re.compile(r"\s+")
SUMMARY_PROMPT = (
    "Summarize the following agent memory item in one or two short sentences. "
    "Keep names, numbers, errors and decisions.\n\n{text}"
)


def summarize_extractive(text: str, *, max_chars: int = EXTRACTIVE_MAX_CHARS) -> str:
    """A deterministic extractive summary: leading whole sentences, at most ``max_chars``.

    Whitespace is collapsed. When even the first sentence is longer than ``max_chars``, it
    is cut at a word boundary and ends with ``…``.

    Raises:
        ValueError: ``max_chars`` < 8.
    """
    if max_chars < 8:
        raise ValueError(f"max_chars must be >= 8, got {max_chars}")
    flat = _SPACES.sub(" ", text).strip()
    if len(flat) <= max_chars:
        return flat
    summary = ""
    for sentence in _SENTENCE_END.split(flat):
        candidate = f"{summary} {sentence}".strip()
        if len(candidate) > max_chars:
            break
        summary = candidate
    if summary:
        return summary
    cut = flat[: max_chars - 1]
    space = cut.rfind(" ")
    if space >= max_chars // 2:
        cut = cut[:space]
    return cut.rstrip() + "…"


def summarize_item(item: MemoryItem, summarizer: Any) -> str:
    """Summarize ``item`` with ``summarizer`` (a ``BaseChatModel``, a callable or None).

    Raises:
        TypeError: ``summarizer`` is neither a chat model nor callable, or returned a non-string.
    """
    if summarizer is None:
        return summarize_extractive(item.content)
    from langchain_core.language_models import BaseChatModel

    if isinstance(summarizer, BaseChatModel):
        reply = summarizer.invoke(SUMMARY_PROMPT.format(text=item.content))
        result: Any = str(reply.text)
    elif callable(summarizer):
        result = summarizer(item.content)
    else:
        raise TypeError(
            f"summarizer must be a BaseChatModel or a callable (text) -> str, got {summarizer!r}"
        )
    if not isinstance(result, str):
        raise TypeError(f"summarizer returned {type(result).__name__}, expected str")
    return result.strip()


def check_summarizer(summarizer: Any) -> None:
    """Raise ``ValueError`` naming ``summarizer`` unless it is None, a chat model or callable."""
    if summarizer is not None and not callable(summarizer):
        from langchain_core.language_models import BaseChatModel

        if not isinstance(summarizer, BaseChatModel):
            raise ValueError(
                "summarizer must be a BaseChatModel or a callable (text) -> str, "
                f"got {summarizer!r}"
            )
