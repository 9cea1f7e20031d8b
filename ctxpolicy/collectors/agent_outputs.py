"""The ``agent_outputs`` collector: earlier agent outputs, decaying by age.

The agent output source of Loom's context sources (docs/memory.md, 'Agent outputs and
skills'): what the agents said before, the newest weighing most.

Policy::

    agent_output__context:
      collector: {type: agent_outputs, half_life: 2, min_weight: 0.05, limit: 20}

The collector reads the AI messages of the state key ``field`` (default ``messages``,
the history; LangChain messages or ``{"type"/"role", "content", "name"}`` dicts) that
carry text (tool-call-only steps are skipped). The newest output has age 0; an output
of age ``a`` weighs ``0.5 ** (a / half_life)``. Outputs weighing less than
``min_weight``, and all but the ``limit`` newest, are left out. Each kept output gets a
share of the layer's cap proportional to its weight (a share an output does not use
goes to the older ones); an output longer than its share is shortened to its head with
a marker. The layer prints the outputs oldest first, one ``- [name] text`` per output.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ctxpolicy.collectors.items import ItemsText
from ctxpolicy.memory.strategies import content_key

if TYPE_CHECKING:
    from ctxpolicy.collectors.base import CollectRequest

_ELLIPSIS = " …"


def _fields(message: Any) -> tuple[str, str, str]:
    """``(type, text, name)`` of a LangChain message or a message dict."""
    kind, content, name = _raw_fields(message)
    if kind == "assistant":
        kind = "ai"
    if isinstance(content, list):
        content = _text_of_parts(content)
    return kind, str(content or "").strip(), str(name or "agent")


def _raw_fields(message: Any) -> tuple[str, Any, Any]:
    """``(type, content, name)`` as stored in a message dict or a LangChain message."""
    if isinstance(message, Mapping):
        kind = str(message.get("type") or message.get("role") or "")
        return kind, message.get("content"), message.get("name")
    kind = str(getattr(message, "type", ""))
    return kind, getattr(message, "content", ""), getattr(message, "name", None)


def _text_of_parts(content: list[Any]) -> str:
    """The text parts of multi-part content (strings and ``{"type": "text"}`` parts), joined."""
    return "".join(
        part if isinstance(part, str) else str(part.get("text", ""))
        for part in content
        if isinstance(part, str) or (isinstance(part, Mapping) and part.get("type") == "text")
    )


def decay_weight(age: int, half_life: float) -> float:
    """The weight of an output ``age`` outputs old: ``0.5 ** (age / half_life)``."""
    return float(0.5 ** (age / half_life))


def _shorten(text: str, cap: int, count_tokens: Callable[[str], int]) -> str | None:
    """The longest head of ``text`` (plus a marker) within ``cap`` tokens, or None."""
    if count_tokens(text) <= cap:
        return text
    low, high = 0, len(text)
    best: str | None = None
    while low < high:  # binary search on characters; counts are monotone enough here
        mid = (low + high + 1) // 2
        candidate = text[:mid].rstrip() + _ELLIPSIS
        if count_tokens(candidate) <= cap:
            best, low = candidate, mid
        else:
            high = mid - 1
    return best if best and best.strip() != _ELLIPSIS.strip() else None


def select_outputs(
    messages: Sequence[Any],
    *,
    half_life: float,
    min_weight: float,
    limit: int,
) -> list[tuple[str, str, float]]:
    """``(name, text, weight)`` of the outputs to show, newest first."""
    outputs = [(name, text) for kind, text, name in map(_fields, messages) if kind == "ai" and text]
    chosen: list[tuple[str, str, float]] = []
    for age, (name, text) in enumerate(reversed(outputs)):
        weight = decay_weight(age, half_life)
        if weight < min_weight or len(chosen) >= limit:
            break
        chosen.append((name, text, weight))
    return chosen


def collect_agent_outputs(request: CollectRequest) -> str | None:
    """Earlier agent outputs, each within its weight's share of the cap, oldest first."""
    spec: Any = request.spec
    messages = request.state.get(spec.field)
    if not messages or isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        return None
    chosen = select_outputs(
        messages, half_life=spec.half_life, min_weight=spec.min_weight, limit=spec.limit
    )
    if not chosen or request.cap_tokens <= 0:
        return None
    lines = _output_lines(chosen, cap_tokens=request.cap_tokens, count=request.count_tokens)
    if not lines:
        return None
    ids = _ids_by_text(messages)
    lines.reverse()  # oldest first
    keys = [
        {content_key(text), *(f"id:{i}" for i in ids.get(text, ()))} for _, text in lines
    ]  # the whole output's: a memory item of it shows the same item (docs/memory.md)
    return ItemsText([line for line, _ in lines], keys)


def _ids_by_text(messages: Sequence[Any]) -> dict[str, list[str]]:
    """The ids of the AI messages, by their text (`_fields`)."""
    ids: dict[str, list[str]] = {}
    for message in messages:
        kind, text, _ = _fields(message)
        found = message.get("id") if isinstance(message, Mapping) else getattr(message, "id", None)
        if kind == "ai" and text and found:
            ids.setdefault(text, []).append(str(found))
    return ids


def _output_lines(
    chosen: Sequence[tuple[str, str, float]], *, cap_tokens: int, count: Callable[[str], int]
) -> list[tuple[str, str]]:
    """``(line, output text)`` of the chosen outputs (newest first), each line within its
    weight's share of what the newer ones left of ``cap_tokens``; within the cap together."""
    sep_cost = count("\n")
    remaining = cap_tokens
    left_weight = sum(weight for _, _, weight in chosen)
    lines: list[tuple[str, str]] = []
    for name, text, weight in chosen:  # newest first: it has the first claim
        share = int(remaining * weight / left_weight) if left_weight > 0 else 0
        left_weight -= weight
        prefix = f"- [{name}] "
        room = share - count(prefix) - (sep_cost if lines else 0)
        body = _shorten(" ".join(text.split()), room, count) if room > 0 else None
        if body is None:
            continue
        line = prefix + body
        remaining -= count(line) + (sep_cost if lines else 0)
        lines.append((line, text))
    while lines and count("\n".join(line for line, _ in reversed(lines))) > cap_tokens:
        lines.pop()
    return lines


__all__ = ["collect_agent_outputs", "decay_weight", "select_outputs"]
