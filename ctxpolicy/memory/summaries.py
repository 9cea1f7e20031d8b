"""L3 summaries: a summarizer service when given, a deterministic extractive summary otherwise.

An L3 summary stands for an item that left L1; the item's full text stays in the
memory's search index (`TieredMemory.search`, `TieredMemory.original`), so a summary may
leave things out without losing them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel

from ctxpolicy.memory.facts import fact_score

if TYPE_CHECKING:
    from ctxpolicy.memory.items import MemoryItem

Summarizer = Callable[[str], str]
"""A summarizer callable: full text in, summary out."""

#: Token budget of an extractive summary (tokens estimated as characters / 4).
EXTRACTIVE_MAX_TOKENS = 96
#: Characters per token of the estimate (cl100k averages about 4 on English text).
CHARS_PER_TOKEN = 4
_SENTENCE_END = re.compile(r"(?<=[.!?\u3002\uff01\uff1f])\s+")
_SPACES = re.compile(r"\s+")
_WORDS = re.compile(r"[^\W\d_]\w*|\w+")
GAP = " … "
SUMMARY_PROMPT = (
    "Summarize the following agent memory item in one or two short sentences. "
    "Keep names, numbers, errors and decisions.\n\n{text}"
)


def _pieces(text: str) -> list[str]:
    """Lines of a multi-line text, sentences of each line; whitespace collapsed."""
    out: list[str] = []
    for line in text.splitlines():
        flat = _SPACES.sub(" ", line).strip()
        if flat:
            out.extend(s for s in _SENTENCE_END.split(flat) if s)
    return out


def _shape(piece: str) -> frozenset[str]:
    """The words of a piece without its values (a word found in no other piece of a dump
    marks a line unlike the others)."""
    return frozenset(w for w in _WORDS.findall(piece.lower()) if not any(c.isdigit() for c in w))


def _cut(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    cut = text[: max_chars - 1]
    space = cut.rfind(" ")
    if space >= max_chars // 2:
        cut = cut[:space]
    return cut.rstrip() + "…"


def summarize_extractive(
    text: str, *, max_tokens: int = EXTRACTIVE_MAX_TOKENS, max_chars: int | None = None
) -> str:
    """A deterministic extractive summary that keeps the lines carrying facts.

    A text within the budget is kept whole (whitespace collapsed). A longer one is cut
    into pieces (lines, then sentences); the first piece (what the text is about: a
    question, a command, a header) is kept, then the pieces with the highest
    `ctxpolicy.memory.facts.fact_score` (corrections, ``X is Y`` statements holding
    numbers/ids/hosts, ``key=value``, errors, decisions; earlier first among equals)
    while they fit, shown in text order, `GAP` marking left-out pieces. A piece longer
    than the whole budget is cut at a word boundary with ``…``.

    Args:
        text: The full text (it stays searchable in the memory's index; L3 points at it).
        max_tokens: Budget in estimated tokens (characters / `CHARS_PER_TOKEN`).
        max_chars: A budget in characters instead (``max_tokens`` is then ignored).

    Raises:
        ValueError: the budget is below 8 characters / 2 tokens.
    """
    budget = max_chars if max_chars is not None else max_tokens * CHARS_PER_TOKEN
    if budget < 8:
        raise ValueError(f"the summary budget must be >= 8 characters, got {budget}")
    flat = _SPACES.sub(" ", text).strip()
    if len(flat) <= budget:
        return flat
    pieces = _pieces(text)
    first = _cut(pieces[0], budget)
    chosen = _chosen_pieces(pieces, _piece_scores(pieces), budget - len(first))
    parts = [first]
    previous = 0
    for index in chosen:
        parts.append(GAP if index > previous + 1 else " ")
        parts.append(pieces[index])
        previous = index
    return "".join(parts).strip()


def _piece_scores(pieces: list[str]) -> list[int]:
    """`fact_score` of each piece; in a dump (6 pieces or more) a line unlike the others
    says more than its siblings (+1 per word no other line has, at most +3)."""
    scores = [fact_score(piece) for piece in pieces]
    if len(pieces) < 6:
        return scores
    shapes = [_shape(piece) for piece in pieces]
    counts = Counter(word for shape in shapes for word in shape)
    return [
        score + min(3, sum(counts[w] == 1 for w in shape)) if score > 0 else 0
        for score, shape in zip(scores, shapes, strict=True)
    ]


def _chosen_pieces(pieces: list[str], scores: list[int], budget: int) -> list[int]:
    """The pieces after the first with a positive score that fit ``budget`` characters
    (with their gap marks), best first, earlier first among equals; in text order."""
    chosen: list[int] = []
    used = 0
    for index in sorted(range(1, len(pieces)), key=lambda i: (-scores[i], i)):
        if scores[index] <= 0:
            break
        cost = len(pieces[index]) + len(GAP)
        if used + cost <= budget:
            chosen.append(index)
            used += cost
    return sorted(chosen)


def summarize_item(
    item: MemoryItem, summarizer: Any, *, max_tokens: int = EXTRACTIVE_MAX_TOKENS
) -> str:
    """Summarize ``item`` with ``summarizer`` (a ``BaseChatModel``, a callable or None).

    ``max_tokens`` is the budget of the extractive summary (None summarizer).

    Raises:
        TypeError: ``summarizer`` is neither a chat model nor callable, or returned a non-string.
    """
    if summarizer is None:
        return summarize_extractive(item.content, max_tokens=max_tokens)
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
    if (
        summarizer is not None
        and not callable(summarizer)
        and not isinstance(summarizer, BaseChatModel)
    ):
        raise ValueError(
            f"summarizer must be a BaseChatModel or a callable (text) -> str, got {summarizer!r}"
        )
