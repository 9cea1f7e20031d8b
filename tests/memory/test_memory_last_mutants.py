"""Exact behaviour of `ctxpolicy.memory.facts` signals and subjects and of
`ctxpolicy.memory.tiered` search weights, subjects and task summaries."""

from __future__ import annotations

import pytest

from ctxpolicy.memory.facts import (
    content_bonus,
    content_signals,
    is_chitchat,
    is_question,
    subject_keys,
)
from ctxpolicy.memory.items import MemoryItem
from ctxpolicy.memory.tasks import TASK_KEY, TaskRecord
from ctxpolicy.memory.tiered import TieredMemory, item_subjects

# ------------------------------------------------------------------ facts


def test_subject_of_a_later_copula_starts_after_the_previous_one():
    # "eighty - 99" before the second "is" has a subject word of its own.
    assert subject_keys("port is eighty - 99 is 5") == frozenset({"port", "eighty"})
    # nothing but a number between the copulas: no second subject.
    assert subject_keys("port is 8080 - 99 is 5") == frozenset({"port"})


def test_a_question_with_cues_gets_at_most_005():
    text = "Remember: what is the port 8080?"
    signals = content_signals(text)
    assert signals.question is True
    assert signals.remember is True
    assert content_bonus(text, kind=None) == 0.05


def test_question_signal_needs_every_clause_to_ask():
    assert content_signals("What is it? Why?").question is True
    assert content_signals("What is it? It is 5.").question is False


def test_cues_past_the_short_text_head_are_not_read():
    text = "x" * 700 + " remember this"
    signals = content_signals(text)
    assert signals.short is False
    assert signals.remember is False
    assert content_signals("x" * 10 + " remember this").remember is True


def test_chitchat_is_at_most_80_characters():
    assert is_chitchat("thanks" + " " * 74) is True  # 80 characters
    assert is_chitchat("thanks" + " " * 75) is False  # 81 characters


def test_is_question_ignores_trailing_spaces():
    assert is_question("why? ") is True
    assert is_question(" why") is False


# ------------------------------------------------------------------ tiered


def test_item_subjects_drops_the_tool_prefix():
    item = MemoryItem(
        id="i",
        content="lookup -> port is 8080",
        importance=0.5,
        seq=0,
        metadata={"tool": "lookup"},
    )
    assert item_subjects(item) == frozenset({"port"})


def test_l2_threshold_error_names_the_argument():
    with pytest.raises(ValueError) as err:
        TieredMemory(2, 3, 4, l2_threshold=2.0)
    assert str(err.value) == "l2_threshold must be a number in [0, 1], got 2.0"


def test_search_weights_by_the_share_of_query_terms():
    mem = TieredMemory(4, 3, 4)
    mem.add("alpha port zeta eta theta iota kappa", importance=0.5)
    mem.add("alpha alpha", importance=0.5)
    mem.add("alpha omega", importance=0.5)
    mem.add("port omega", importance=0.5)
    hits = mem.search("alpha port", 5)
    assert [h.content for h in hits][:2] == [
        "alpha port zeta eta theta iota kappa",
        "alpha alpha",
    ]


def test_search_weight_reads_a_tool_result_without_its_prefix():
    mem = TieredMemory(4, 3, 4)
    mem.add("lookup -> 5432", importance=0.5, metadata={"tool": "lookup"}, item_id="tool")
    mem.add("lookup -> 5432", importance=0.5, item_id="note")
    hits = {h.id: h for h in mem.search("lookup", 5)}
    # the note reads as a statement holding a value (x1.3); the tool result does not.
    assert hits["tool"].score < hits["note"].score


def _task_item_memory(result: str, **kwargs) -> TieredMemory:
    mem = TieredMemory(1, 3, 4, l2_threshold=1.0, **kwargs)
    record = TaskRecord("call-1", "lookup", {}, result, True)
    mem.add("lookup done", importance=0.1, metadata={TASK_KEY: record.to_data()})
    mem.add("next", importance=0.1)
    return mem


def test_task_summary_uses_the_given_summarizer_for_the_result():
    calls: list[str] = []

    def summarizer(text: str) -> str:
        calls.append(text)
        return "SUM"

    mem = _task_item_memory("port is 5432", summarizer=summarizer)
    assert [s.content for s in mem.get_l3()] == ["lookup() -> ok: SUM"]
    assert calls == ["port is 5432"]


def test_task_summary_skips_a_blank_result():
    calls: list[str] = []

    def summarizer(text: str) -> str:
        calls.append(text)
        return "SUM"

    mem = _task_item_memory("   ", summarizer=summarizer)
    assert [s.content for s in mem.get_l3()] == ["lookup() -> ok:"]
    assert calls == []


def test_task_result_summary_keeps_summary_tokens():
    result = " ".join(f"word{i}" for i in range(200))
    mem = _task_item_memory(result, summary_tokens=5)
    assert [s.content for s in mem.get_l3()] == ["lookup() -> ok: word0 word1 word2\u2026"]


def test_a_later_line_of_a_tool_dump_keeps_its_text_for_newer_first():
    mem = TieredMemory(4, 3, 4)
    mem.add(
        "zeta zeta zeta is what we need to find out about today.", importance=0.9, item_id="old"
    )
    dump = "lookup -> header line of the dump\nalpha beta gamma delta line two\n"
    dump += "lookup -> zeta 5432\nomega line four"
    mem.add(dump, importance=0.1, metadata={"tool": "lookup"}, item_id="new")
    hits = mem.search("zeta", 5)
    # only a first unit loses its "name -> " prefix: line 3 reads as a newer statement
    # about "zeta" and goes before the older, better scored hit.
    assert [(h.id, h.part, h.content) for h in hits] == [
        ("new", 2, "lookup -> zeta 5432"),
        ("old", 0, "zeta zeta zeta is what we need to find out about today."),
    ]
    assert hits[0].score < hits[1].score
