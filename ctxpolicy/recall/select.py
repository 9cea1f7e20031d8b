"""Choosing and packing recalled units (pure: hits in, text and choices out).

Rules, in order:

1. **Only what the prompt lacks.** A hit from a message the history layer keeps, from a
   message that is not in this call's history (another branch), or whose text already
   appears in another layer of the prompt is skipped; of units with the same text the
   newest is kept.
2. **Best first, whole units.** Units are taken in rank order while they fit the cap;
   one that does not fit is skipped and smaller ones may still fill the space.
3. **Statements first** (decided by the index, see `ctxpolicy.recall.units.states_value`):
   a unit that states a value ranks above the units that only mention its subject.
4. **Corrections win.** Two statements are about the same subject when they match the
   same query terms. An older statement is taken only if every newer candidate statement
   about the same subject (matching at least the terms it matches) is taken too, or is
   already in the kept history; if the newer one does not fit, the older one is left
   out. So a prompt never holds only the stale value of a corrected fact that the
   search found.
5. **Session order.** The chosen units are shown oldest first, each labelled with its
   position, role and tool, so a correction reads after what it corrects.

See docs/recall.md, "Selection".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from ctxpolicy.recall.floor import terms_pattern
from ctxpolicy.recall.index import RecallHit

DEFAULT_HEADER = (
    "Recalled from earlier in this session (oldest first; a later line supersedes an "
    "earlier one about the same thing):"
)
_SPACE = re.compile(r"\s+")
#: Where a sentence ends: ``. ! ? ;`` and a space, or their full-width (Chinese) forms.
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|(?<=[\u3002\uff01\uff1f\uff1b])")
#: Fewer tokens than a label and a word: packing stops when less than this is left.
MIN_LINE_TOKENS = 8
#: A value: a token with a digit, or words joined by ``- _ . / : # @``.
_VALUE = re.compile(r"\w*\d\w*|\w+(?:[-]*[_./:#@]+[-\w]+)+|#[\w-]+", re.UNICODE)
#: A connector followed by a capitalised name (``owner is Ingrid Solberg``).
_NAMED = re.compile(r"(?:\bis|\bare|\bnow|\bto|=|->|:)\s+[\"'`]?[A-Z][a-z]")


@dataclass(frozen=True, slots=True)
class RecalledUnit:
    """A unit recall put into the prompt (for the report and ``preview``).

    Attributes:
        label: Where it came from, e.g. ``#412 tool search_logs L57``.
        source: ``session`` or a memory tier.
        score: Its search score (higher is better).
        tokens: Tokens its line uses in the layer.
        message_id: The id of its message.
        text: The unit's text.
    """

    label: str
    source: str
    score: float
    tokens: int
    message_id: str
    text: str

    def to_dict(self) -> dict[str, object]:
        """Plain data for JSON output."""
        return {
            "label": self.label,
            "source": self.source,
            "score": round(self.score, 4),
            "tokens": self.tokens,
            "message_id": self.message_id,
            "text": self.text,
        }


def _normal(text: str) -> str:
    return _SPACE.sub(" ", text).strip().lower()


def _statement_subject(text: str, pattern: re.Pattern[str] | None) -> frozenset[str]:
    """The query terms a statement is about, or empty when ``text`` states no value.

    A sentence states a value for its subject when a value (a token with a digit or
    joined by ``_ . / : # @``, or a capitalised name after a connector) follows the last
    query term it names. A whole turn is about the subjects of its sentences that do:
    a later sentence that only mentions the subject again does not hide the statement.
    """
    if pattern is None:
        return frozenset()
    found: set[str] = set()
    for sentence in _SENTENCE.split(text):
        found |= _sentence_subject(sentence, pattern)
    return frozenset(found)


def _sentence_subject(text: str, pattern: re.Pattern[str]) -> set[str]:
    found: set[str] = set()
    last = -1
    for match in pattern.finditer(text):
        found.add(match.group(1).lower())
        last = match.end()
    if last < 0:
        return set()
    tail = text[last:]
    if _VALUE.search(tail) or _NAMED.search(tail):
        return found
    return set()


def render_line(hit: RecallHit) -> str:
    """The line a unit takes in the layer: ``[label] text``."""
    unit = hit.unit
    label = unit.label() if hit.source == "session" else f"{hit.source} {unit.label()}"
    return f"[{label}] {unit.text}"


def _missing_from_prompt(
    hits: Sequence[RecallHit],
    *,
    in_history: Callable[[int, str], bool],
    kept_from: int,
    prompt_text: str,
) -> list[RecallHit]:
    """Rule 1: the hits the prompt lacks, best first; the newest copy of repeated text."""
    prompt = _normal(prompt_text)
    candidates: list[RecallHit] = []
    seen_text: dict[str, int] = {}
    for hit in hits:
        unit = hit.unit
        if unit.position >= 0 and (
            unit.position >= kept_from or not in_history(unit.position, unit.message_id)
        ):
            continue
        normal = _normal(unit.text)
        if not normal or normal in prompt:
            continue
        earlier = seen_text.get(normal)
        if earlier is not None:
            if candidates[earlier].unit.position < unit.position:
                candidates[earlier] = hit  # the newest copy of a repeated line
            continue
        seen_text[normal] = len(candidates)
        candidates.append(hit)
    return candidates


def select_units(
    hits: Sequence[RecallHit],
    *,
    terms: Collection[str],
    in_history: Callable[[int, str], bool],
    kept_from: int,
    prompt_text: str,
    cap_tokens: int,
    count_tokens: Callable[[str], int],
    header: str = DEFAULT_HEADER,
) -> tuple[str | None, tuple[RecalledUnit, ...]]:
    """Choose units from ``hits`` (best first) and render the layer text.

    Args:
        hits: Search hits, best first.
        terms: The query's search terms (to tell units about the same subject).
        in_history: ``(position, message id) -> bool``: whether the unit's message is
            part of this call's history (memory hits have position -1 and pass).
        kept_from: Position of the oldest history message the prompt keeps: hits at or
            after it are already in the prompt.
        prompt_text: The text of the prompt's other layers (for rule 1).
        cap_tokens: Most tokens the layer text may use.
        count_tokens: The policy's token counter.
        header: First line of the layer.

    Returns:
        ``(text or None, chosen units in session order)``.
    """
    header_tokens = count_tokens(header + "\n") if header else 0
    budget = cap_tokens - header_tokens
    if budget <= 0:
        return None, ()
    candidates = _missing_from_prompt(
        hits, in_history=in_history, kept_from=kept_from, prompt_text=prompt_text
    )
    packing = _Packing(candidates, terms_pattern(terms), count_tokens)
    order = packing.choose(budget)
    if not order:
        return None, ()
    lines = [packing.lines[j] for j in order]
    text = "\n".join([header, *lines] if header else lines)
    units = tuple(
        RecalledUnit(
            label=candidates[j].unit.label(),
            source=candidates[j].source,
            score=candidates[j].score,
            tokens=packing.costs[j],
            message_id=candidates[j].unit.message_id,
            text=candidates[j].unit.text,
        )
        for j in order
    )
    return text, units


class _Packing:
    """Rules 2 and 3 of `select_units` over the candidates (best first): each taken with
    the newer statements about the same subject, or not at all; lines rendered and
    counted once."""

    def __init__(
        self,
        candidates: Sequence[RecallHit],
        pattern: re.Pattern[str] | None,
        count_tokens: Callable[[str], int],
    ) -> None:
        self.candidates = candidates
        self.count_tokens = count_tokens
        # only a statement can be corrected (the index marked them; memory units are checked)
        self.subjects = [
            _statement_subject(h.unit.text, pattern)
            if h.unit.statement or h.unit.position < 0
            else frozenset()
            for h in candidates
        ]
        self.lines: dict[int, str] = {}
        self.costs: dict[int, int] = {}

    def cost_of(self, j: int) -> int:
        """Tokens of candidate ``j``'s line (rendered on first use)."""
        found = self.costs.get(j)
        if found is None:
            self.lines[j] = render_line(self.candidates[j])
            found = self.costs[j] = self.count_tokens(self.lines[j] + "\n")
        return found

    def newer_about_same(self, i: int) -> list[int]:
        """The candidates newer than ``i`` that state something about its subject."""
        mine = self.subjects[i]
        if not mine:
            return []
        position = self.candidates[i].unit.position
        return [
            j
            for j, other in enumerate(self.subjects)
            if j != i and self.candidates[j].unit.position > position and mine <= other
        ]

    def choose(self, budget: int) -> list[int]:
        """The chosen candidates within ``budget`` tokens, in session order."""
        chosen: set[int] = set()
        refused: set[int] = set()
        used = 0
        for i in range(len(self.candidates)):
            if budget - used < MIN_LINE_TOKENS:
                break
            if i in chosen or i in refused:
                continue
            group, cost = self._group_with_cost(i, chosen, refused)
            if cost is None or used + cost > budget:
                refused.add(i)
                continue
            chosen.update(group)
            used += cost
        return sorted(
            chosen,
            key=lambda j: (self.candidates[j].unit.position, self.candidates[j].unit.part),
        )

    def _group_with_cost(
        self, i: int, chosen: set[int], refused: set[int]
    ) -> tuple[list[int], int | None]:
        """Candidate ``i`` with its newer statements not yet chosen, and their cost.

        The cost is None when one of those newer statements was already refused: ``i``
        cannot be taken without it.
        """
        group = [i, *(j for j in self.newer_about_same(i) if j not in chosen)]
        cost = None if any(j in refused for j in group[1:]) else self._cost(group)
        return group, cost

    def _cost(self, group: Sequence[int]) -> int:
        return sum(self.cost_of(j) for j in group)


__all__ = [
    "DEFAULT_HEADER",
    "RecalledUnit",
    "render_line",
    "select_units",
]
