"""What a piece of text says, cheaply: facts, corrections, errors, decisions, chit-chat.

Deterministic regular-expression heuristics (no model) shared by importance scoring
(`content_signals`), the L2 refresh rule (`subject_keys`) and the extractive L3 summary
(`fact_score`). They are deliberately simple; docs/memory.md states them.

- A **statement** is a clause that is not a question and has a copula: ``X is Y``,
  ``X are Y``, ``X was Y``, ``X = Y``, ``X -> Y``, ``X changed to Y``, ``X is now Y``.
- A **value** is a token that carries a digit, or looks like a host, path, URL, version,
  ticket or ``key=value``.
- A **correction** says that something changed: ``actually``, ``correction``,
  ``instead``, ``changed to``, ``no longer``, ``from now on``, ``switched``, or ``now``
  in a statement.
- The **subject** of a statement ``X is Y`` (or ``... <value> as the X``) is the set of
  content words of ``X`` (stop words, fillers such as ``now``/``actually`` and plain
  numbers left out; a leading ``Label:`` and what comes before the last comma or
  ``that``/``while``/``and`` are dropped; ``..., it is Y`` takes the clause before the
  comma, less ``has changed``). Two statements are about the same subject when these
  word sets are equal.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from ctxpolicy.recall.index import STOPWORDS

#: Texts longer than this are treated as dumps (logs, tables): their content counts for
#: less in importance and they get no subject keys.
SHORT_TEXT_CHARS = 600

_WORD = re.compile(r"\w+", re.UNICODE)
_CLAUSES = re.compile(r"(?<=[.!?])\s+|;\s*|\n+")
_COPULA = re.compile(
    r"(?:\s(?:is|are|was|were|equals|becomes)\s+(?:now\s+|actually\s+|still\s+|currently\s+)?"
    r"|\s(?:has|have)\s+(?:been\s+)?(?:changed|switched|moved|set|updated)\s+to\s+"
    r"|\s(?:changed|switched|moved|set|updated)\s+to\s+"
    r"|\s*(?:=|->|→|:=)\s*)",
    re.IGNORECASE,
)
#: "we settled on 8080 as the API port": the subject follows "as (the)" after a value.
_AS_SUBJECT = re.compile(
    r"(?P<value>\S*\d\S*|\S+://\S+|#\S+)\s+as\s+(?:the\s+|our\s+|its\s+)?(?P<subject>[^.;,!?()]+)",
    re.IGNORECASE,
)
_SEGMENT = re.compile(r"[,:;(]\s|\s(?:that|which|while|whereas|and|but|so)\s", re.IGNORECASE)
#: "..., it is 5": the subject is in the clause before the pronoun.
_ANAPHORA = frozenset({"it", "this", "they", "its"})
_CHANGE_TAIL = re.compile(
    r"\s*(?:(?:has|have|had|was|were|is|got)\s+)?(?:been\s+)?"
    r"(?:changed|switched|updated|moved|corrected|fixed|modified|replaced)\s*$",
    re.IGNORECASE,
)
_SUBJECT_FILLER = frozenset(
    """
    now actually currently still also new old correction corrected update updated btw fyi
    ps quick note later record heads keep mind way just really small fix sorry earlier
    previous previously anymore instead
    """.split()  # noqa: SIM905 - a word list reads best as text
)
_VALUE = re.compile(
    r"\w*\d\w*"  # any token with a digit: ports, ids, versions, sizes, dates
    r"|\b[\w-]+(?:\.[\w-]+){2,}\b"  # host.like.names
    r"|\b\w+://\S+"  # URLs, s3://...
    r"|\b[\w.-]+/[\w./-]+"  # paths
    r"|\b\w+=\S+"  # key=value
    r"|#[\w-]+",  # channels, tags
)
_CORRECTION = re.compile(
    r"\b(?:actually|correction|corrected|instead|changed\s+to|switched|no\s+longer"
    r"|from\s+now\s+on|has\s+changed|have\s+changed|not\s+anymore|scratch\s+that"
    r"|update[ds]?:|i\s+meant|rather)\b",
    re.IGNORECASE,
)
_NOW = re.compile(r"\bnow\b", re.IGNORECASE)
_REMEMBER = re.compile(
    r"\b(?:remember|keep\s+in\s+mind|for\s+the\s+record|note\s+for\s+later|don'?t\s+forget"
    r"|important|fyi|heads-up|must|always|never)\b",
    re.IGNORECASE,
)
_ERROR = re.compile(
    r"\b(?:error|errors|failed|failure|fails|exception|traceback|timed\s+out|timeout"
    r"|denied|refused|unavailable|crash(?:ed)?|panic|fatal|5\d\d)\b",
    re.IGNORECASE,
)
_DECISION = re.compile(
    r"\b(?:decided|decision|we\s+will|we'll|let's\s+(?:go|use)|agreed|settled\s+on|chose"
    r"|choose|going\s+with|plan\s+is|approved|the\s+fix\s+is)\b",
    re.IGNORECASE,
)
#: Words of acknowledgements and small talk ("thanks", "ok, makes sense").
_CHITCHAT_WORDS = frozenset(
    """
    thanks thank thx ty ok okay k cool great nice perfect good fine sure yes yeah yep no nope
    hi hello hey bye cheers welcome glad happy help helped np problem awesome alright right
    sounds makes sense got it lol haha wow hm hmm interesting indeed agreed noted understood
    sorry wait moment later continue going keep let lets back brb break coffee meeting
    pulled quick take time next look should what tell want here will me you we i that this
    was is are it to a the of for and so on in at be
    """.split()  # noqa: SIM905 - a word list reads best as text
)


@dataclass(frozen=True, slots=True)
class Signals:
    """What `content_signals` found in a text."""

    statement: bool
    value: bool
    correction: bool
    remember: bool
    error: bool
    decision: bool
    question: bool
    chitchat: bool
    short: bool


def clauses(text: str) -> list[str]:
    """The clauses of ``text``: sentences, ``;``-separated parts and lines."""
    return [c.strip() for c in _CLAUSES.split(text) if c and c.strip()]


def is_question(clause: str) -> bool:
    """Whether a clause asks rather than states (ends with ``?``)."""
    return clause.rstrip().endswith("?")


def is_statement(clause: str) -> bool:
    """Whether a clause states something (``X is Y`` ..., not a question)."""
    return not is_question(clause) and _COPULA.search(f" {clause}") is not None


def has_value(text: str) -> bool:
    """Whether ``text`` holds a value-like token (number, id, host, path, key=value)."""
    return _VALUE.search(text) is not None


def is_correction(text: str) -> bool:
    """Whether ``text`` says that something changed (``actually``, ``now`` in a statement...)."""
    if _CORRECTION.search(text):
        return True
    return _NOW.search(text) is not None and any(is_statement(c) for c in clauses(text))


def is_chitchat(text: str) -> bool:
    """Whether ``text`` is only an acknowledgement or small talk (``thanks``, ``ok, cool``)."""
    words = _WORD.findall(text.lower())
    if not words or len(words) > 10 or len(text) > 80:
        return False
    return all(w in _CHITCHAT_WORDS for w in words)


def content_signals(text: str) -> Signals:
    """The signals of ``text`` (see the module docstring)."""
    short = len(text) <= SHORT_TEXT_CHARS
    head = text if short else text[:SHORT_TEXT_CHARS]
    parts = clauses(head)
    statement = any(is_statement(c) for c in parts)
    questions = [is_question(c) for c in parts]
    return Signals(
        statement=statement,
        value=has_value(head),
        correction=is_correction(head),
        remember=_REMEMBER.search(head) is not None,
        error=_ERROR.search(head) is not None,
        decision=_DECISION.search(head) is not None,
        question=bool(questions) and all(questions),
        chitchat=is_chitchat(text),
        short=short,
    )


def content_bonus(text: str, *, kind: str | None) -> float | None:
    """How much the content adds to the kind's importance, or None for chit-chat.

    Correction +0.2; stated fact (a statement holding a value) +0.15, else a statement
    or a value +0.05; ``remember``-like cue +0.1; error +0.1 (not for ``tool_failure``,
    whose kind already says so); decision +0.1. At most +0.3; a text longer than
    `SHORT_TEXT_CHARS` (a dump) gets at most +0.05.
    """
    signals = content_signals(text)
    if signals.chitchat and not signals.value:
        return None
    bonus = 0.2 if signals.correction else 0.0
    bonus += _fact_bonus(text, signals)
    bonus = _with_cues(bonus, signals, kind=kind)
    if signals.question and not signals.correction:
        bonus = min(bonus, 0.05)
    return min(bonus, 0.3 if signals.short else 0.05)


def _fact_bonus(text: str, signals: Signals) -> float:
    """+0.15 for a stated fact (a statement holding a value), else +0.05 for a statement
    or a value, else 0."""
    if any(is_statement(c) and has_value(c) for c in clauses(text[:SHORT_TEXT_CHARS])):
        return 0.15  # a stated fact
    if signals.statement or signals.value:
        return 0.05
    return 0.0


def _with_cues(bonus: float, signals: Signals, *, kind: str | None) -> float:
    """``bonus`` +0.1 each for a ``remember``-like cue, an error (not for ``tool_failure``,
    whose kind already says so) and a decision."""
    for cue in (signals.remember, signals.error and kind != "tool_failure", signals.decision):
        if cue:
            bonus += 0.1
    return bonus


def _subject_words(segment: str) -> frozenset[str]:
    words = (w for w in _WORD.findall(segment.lower()) if len(w) > 1 and not w.isdigit())
    return frozenset(w for w in words if w not in STOPWORDS and w not in _SUBJECT_FILLER)


def _subject_of(before: str) -> frozenset[str]:
    """The subject words of the text before a copula (see the module docstring)."""
    segments = [s for s in _SEGMENT.split(f" {before} ") if s.strip()]
    while segments:
        last = segments.pop()
        words = _WORD.findall(last.lower())
        if words and all(w in STOPWORDS for w in words):
            if any(w in _ANAPHORA for w in words):
                continue  # "..., it is 5": the subject is in the clause before
            return frozenset()  # "there are", "which is": no subject of its own
        subject = _subject_words(_CHANGE_TAIL.sub("", last))
        if subject:
            return subject
    return frozenset()


def subject_keys(text: str, *, limit: int = 4) -> frozenset[str]:
    """The subjects that ``text`` states something about (at most ``limit``).

    Each key is the sorted, space-joined subject word set of one statement. A text
    longer than `SHORT_TEXT_CHARS` gets none (a dump states too much to supersede
    anything by itself).
    """
    if len(text) > SHORT_TEXT_CHARS:
        return frozenset()
    keys: list[str] = []
    for clause in clauses(text):
        if is_question(clause):
            continue
        for subject in _stated_subjects(clause):
            if _add_subject_key(keys, subject, limit=limit):
                return frozenset(keys)
    return frozenset(keys)


def _stated_subjects(clause: str) -> Iterator[frozenset[str]]:
    """The subject word sets of a clause: those before each copula, then those of
    ``<value> as the X`` phrases (possibly empty sets)."""
    padded = f" {clause}"
    start = 0
    for match in _COPULA.finditer(padded):
        subject = _subject_of(padded[start : match.start()])
        start = match.end()
        yield subject
    for match in _AS_SUBJECT.finditer(clause):
        yield _subject_words(match.group("subject"))


def _add_subject_key(keys: list[str], subject: frozenset[str], *, limit: int) -> bool:
    """Append the key of ``subject`` (1 to 8 words) to ``keys`` unless already there.

    Returns:
        Whether ``keys`` is full (``limit`` reached) after a usable subject.
    """
    if not 0 < len(subject) <= 8:
        return False
    key = " ".join(sorted(subject))
    if key not in keys:
        keys.append(key)
    return len(keys) >= limit


def fact_score(piece: str) -> int:
    """How much a sentence or line carries facts (for the extractive L3 summary).

    Correction 3, stated fact 3 (statement with a value), ``remember``-like cue 2,
    decision 2, error 2, a value 1, a statement 1; questions and chit-chat 0.
    """
    if is_chitchat(piece):
        return 0
    question = is_question(piece)
    statement = not question and is_statement(piece)
    score = _statement_score(piece, statement=statement) + _cue_score(piece)
    return 0 if question and score < 3 else score


def _statement_score(piece: str, *, statement: bool) -> int:
    """Correction 3, stated fact 3 (statement with a value), else a value or a statement 1."""
    value = has_value(piece)
    score = 0
    if _CORRECTION.search(piece) or (statement and _NOW.search(piece)):
        score += 3
    if statement and value:
        score += 3
    elif statement or value:
        score += 1
    return score


def _cue_score(piece: str) -> int:
    """2 each for a ``remember``-like cue, a decision and an error."""
    return sum(2 for cue in (_REMEMBER, _DECISION, _ERROR) if cue.search(piece))


__all__ = [
    "SHORT_TEXT_CHARS",
    "Signals",
    "clauses",
    "content_bonus",
    "content_signals",
    "fact_score",
    "has_value",
    "is_chitchat",
    "is_correction",
    "is_question",
    "is_statement",
    "subject_keys",
]
