"""Seed 004's importance scoring."""

from __future__ import annotations

import pytest

from ctxpolicy.memory import TieredMemory, score_importance


@pytest.mark.parametrize(
    ("kind", "expected"),
    [("user", 0.9), ("tool_failure", 0.8), ("tool_success", 0.7), ("subtask", 0.5), (None, 0.5)],
)
def test_scores_by_kind(kind, expected):
    assert score_importance(kind=kind) == expected


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({"source": "user"}, 0.9),
        ({"role": "user"}, 0.9),
        ({"status": "failed"}, 0.8),
        ({"status": "ERROR"}, 0.8),
        ({"status": "completed"}, 0.7),
        ({"status": "running"}, 0.5),
        ({"importance": 0.33}, 0.33),
        ({}, 0.5),
    ],
)
def test_scores_from_metadata(metadata, expected):
    assert score_importance(metadata=metadata) == expected


def test_explicit_metadata_importance_wins_over_kind():
    assert score_importance(kind="user", metadata={"importance": 0.1}) == 0.1


def test_add_uses_scoring_only_when_importance_is_not_given():
    mem = TieredMemory()
    assert mem.add("x", kind="tool_failure").importance == 0.8
    assert mem.add("y", kind="tool_failure", importance=0.2).importance == 0.2
    assert mem.add("z", metadata={"status": "completed"}).importance == 0.7
    assert mem.add("w").importance == 0.5


def test_user_and_tool_items_reach_l2_subtasks_do_not():
    mem = TieredMemory()
    mem.add("user", kind="user")
    mem.add("failed", kind="tool_failure")
    mem.add("ok", kind="tool_success")
    mem.add("sub", kind="subtask")
    assert [i.content for i in mem.get_l2()] == ["user", "failed", "ok"]


# ------------------------------------------------------------------ content


@pytest.mark.parametrize(
    ("text", "kind", "expected"),
    [
        ("thanks!", "user", 0.3),  # small talk
        ("ok, makes sense.", "agent", 0.3),
        ("ok", "tool_success", 0.7),  # a tool's "ok" is a result, not small talk
        ("please look into the billing module", "user", 0.9),  # nothing more to say
        ("The API port is 8080.", "agent", 0.65),  # a stated fact
        ("Correction: the API port is now 9090.", "agent", 0.8),  # a correction (capped)
        ("Remember that the on-call owner is Priya.", None, 0.65),
        ("the nightly load failed again", "agent", 0.6),  # an error
        ("We decided to keep the retry budget.", "agent", 0.6),  # a decision
        ("boom", "tool_failure", 0.8),
    ],
)
def test_content_adjusts_the_kind_score(text, kind, expected):
    assert score_importance(kind=kind, content=text) == pytest.approx(expected)


def test_rates_corrections_facts_errors_and_decisions_above_chit_chat():
    chit = score_importance(kind="agent", content="Happy to help.")
    for text in (
        "Actually, the deploy region is us-east-1.",
        "The deploy region is eu-west-3.",
        "The deploy to eu-west-3 failed with a timeout.",
        "We decided to roll back the release.",
    ):
        assert score_importance(kind="agent", content=text) > chit, text


def test_long_dumps_get_a_small_bonus_only():
    dump = "\n".join(f"10:00:{i:02d} ERROR job failed status=500" for i in range(60))
    assert score_importance(kind="tool_success", content=dump) == pytest.approx(0.75)


def test_explicit_importance_is_final():
    assert score_importance(metadata={"importance": 0.2}, content="Correction: x is 5") == 0.2
    assert TieredMemory().add("thanks!", kind="user", importance=0.9).importance == 0.9
