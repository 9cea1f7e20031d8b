"""Stable message ids and the idempotent user turn input."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph.message import add_messages

from ctxpolicy.state import stable_message_id, user_turn, with_stable_ids


def test_stable_id_is_deterministic_and_depends_on_anchor_and_content() -> None:
    a = stable_message_id(HumanMessage("hi"), anchor=None)
    assert a == stable_message_id(HumanMessage("hi"), anchor=None)
    assert a != stable_message_id(HumanMessage("hi"), anchor="x")
    assert a != stable_message_id(HumanMessage("hello"), anchor=None)
    assert a != stable_message_id(AIMessage("hi"), anchor=None)


def test_stable_id_covers_tool_calls_and_tool_call_id() -> None:
    call = AIMessage("", tool_calls=[{"name": "f", "args": {"x": 1}, "id": "c1"}])
    other = AIMessage("", tool_calls=[{"name": "f", "args": {"x": 2}, "id": "c1"}])
    assert stable_message_id(call, anchor=None) != stable_message_id(other, anchor=None)
    t1 = ToolMessage("r", tool_call_id="c1")
    t2 = ToolMessage("r", tool_call_id="c2")
    assert stable_message_id(t1, anchor=None) != stable_message_id(t2, anchor=None)


def test_with_stable_ids_chains_and_keeps_given_ids() -> None:
    out = with_stable_ids([HumanMessage("a", id="keep"), AIMessage("b")], anchor=None)
    assert out[0].id == "keep"
    assert out[1].id == stable_message_id(AIMessage("b"), anchor="keep")


def test_with_stable_ids_force_replaces_ids() -> None:
    out = with_stable_ids([AIMessage("b", id="run-random")], anchor="h", force=True)
    assert out[0].id == stable_message_id(AIMessage("b"), anchor="h")


def test_user_turn_resubmitted_is_not_duplicated() -> None:
    history = add_messages([], user_turn("hello", turn_id="req-1")["messages"])
    history = add_messages(history, user_turn("hello", turn_id="req-1")["messages"])
    history = add_messages(history, user_turn("hello", turn_id="req-2")["messages"])
    assert [m.content for m in history] == ["hello", "hello"]


def test_user_turn_needs_a_turn_id() -> None:
    import pytest

    with pytest.raises(ValueError, match="turn_id"):
        user_turn("x", turn_id="")


def test_appends_after_id_less_histories_get_distinct_ids() -> None:
    """Two different turns whose last message has no id must not collide (a collision
    would make add_messages replace the earlier reply instead of appending)."""
    from langchain_core.messages import AIMessage, HumanMessage

    from ctxpolicy.state import StateBuilder

    first = StateBuilder({"messages": [HumanMessage("hi")]})
    first.memory.append([AIMessage("OK")])
    (reply_1,) = first.patch()["messages"]
    second = StateBuilder({"messages": [HumanMessage("hi"), reply_1, HumanMessage("again")]})
    second.memory.append([AIMessage("OK")])
    (reply_2,) = second.patch()["messages"]
    assert reply_1.id and reply_2.id and reply_1.id != reply_2.id
