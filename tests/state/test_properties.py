"""Invariants of the state side, checked on generated histories."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.graph.message import add_messages

from ctxpolicy.state import StateBuilder

contents = st.sampled_from(["ok", "yes", "hi", "42", ""])
message = st.builds(
    lambda kind, text: HumanMessage(text) if kind == "h" else AIMessage(text),
    st.sampled_from(["h", "a"]),
    contents,
)
histories = st.lists(message, max_size=6)


def stored(messages: list[BaseMessage]) -> list[BaseMessage]:
    """A history as LangGraph stores it (every message has an id)."""
    return list(add_messages([], messages))  # type: ignore[arg-type]


def run_node(state: dict[str, Any], delta: list[BaseMessage]) -> dict[str, Any]:
    sb = StateBuilder(state)
    sb.memory.append(delta)
    return sb.patch()


@given(histories, histories)
def test_rerunning_an_append_on_the_restored_state_never_duplicates(
    history: list[BaseMessage], delta: list[BaseMessage]
) -> None:
    state = {"messages": stored(history)}
    once = add_messages(state["messages"], run_node(state, delta).get("messages", []))
    twice = add_messages(once, run_node(state, delta).get("messages", []))
    assert [(m.type, m.content) for m in twice] == [(m.type, m.content) for m in once]
    assert len(once) == len(history) + len(delta)
    ids = [m.id for m in once]
    assert len(ids) == len(set(ids))


@given(histories, histories)
def test_replace_then_append_holds_exactly_the_new_history(
    history: list[BaseMessage], kept: list[BaseMessage]
) -> None:
    state = {"messages": stored(history)}
    sb = StateBuilder(state)
    sb.memory.replace(kept)
    sb.memory.append([AIMessage("reply")])
    result = add_messages(state["messages"], sb.patch()["messages"])
    assert [(m.type, m.content) for m in result] == [
        *((m.type, m.content) for m in kept),
        ("ai", "reply"),
    ]
