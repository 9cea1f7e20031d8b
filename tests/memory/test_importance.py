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
