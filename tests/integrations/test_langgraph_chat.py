"""agent_node on real LangGraph graphs with the SQLite checkpointer (no mocks)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from ctxpolicy.engine import PolicyEngine
from ctxpolicy.state import user_turn
from tests.integrations.fakes import ModelDown, RecordingChatModel, replies
from tests.integrations.graphs import chat_graph, make_policy, open_saver

ROOT = Path(__file__).resolve().parents[2]
CONFIG = {"configurable": {"thread_id": "thread-1"}}


def texts(messages: list[BaseMessage], kind: str) -> list[str]:
    return [str(m.content) for m in messages if m.type == kind]


def test_three_turns_then_a_new_graph_object_continues_the_thread(tmp_path: Path) -> None:
    db = tmp_path / "checkpoints.sqlite"
    engine = PolicyEngine(make_policy())
    model = RecordingChatModel(responses=replies("a1", "a2", "a3"))
    graph = chat_graph(engine, model, open_saver(db))
    for n in (1, 2, 3):
        graph.invoke({"messages": [HumanMessage(f"q{n}")]}, CONFIG)

    fresh_model = RecordingChatModel(responses=replies("a4"))
    fresh = chat_graph(PolicyEngine(make_policy()), fresh_model, open_saver(db))
    state = fresh.invoke({"messages": [HumanMessage("q4")]}, CONFIG)

    assert texts(state["messages"], "human") == ["q1", "q2", "q3", "q4"]
    assert texts(state["messages"], "ai") == ["a1", "a2", "a3", "a4"]
    prompt = fresh_model.seen[-1]
    assert texts(prompt, "human") == ["q1", "q2", "q3", "q4"]  # earlier turns, each once
    assert texts(prompt, "ai") == ["a1", "a2", "a3"]
    # one SystemMessage under agent_node (model.system_messages: auto): prompt + framework
    assert prompt[0].content == "You analyse data.\n\nFRAMEWORK RULES: answer briefly."
    assert sum(m.type == "system" for m in prompt) == 1
    assert state["last_agent_status"] == "completed"
    assert state["active_agent"] is None


def test_a_separate_os_process_continues_the_thread(tmp_path: Path) -> None:
    db = tmp_path / "checkpoints.sqlite"
    graph = chat_graph(
        PolicyEngine(make_policy()),
        RecordingChatModel(responses=replies("a1", "a2", "a3")),
        open_saver(db),
    )
    for n in (1, 2, 3):
        graph.invoke({"messages": [HumanMessage(f"q{n}")]}, CONFIG)

    out = subprocess.run(
        [sys.executable, "-m", "tests.integrations.graphs", str(db), "thread-1", "q4", "a4"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    data = json.loads(out.stdout.strip().splitlines()[-1])
    assert [c for t, c in data["state"] if t == "human"] == ["q1", "q2", "q3", "q4"]
    assert [c for t, c in data["seen"] if t == "human"] == ["q1", "q2", "q3", "q4"]
    assert [c for t, c in data["seen"] if t == "ai"] == ["a1", "a2", "a3"]


def test_model_failure_then_resume_does_not_duplicate_the_input(tmp_path: Path) -> None:
    db = tmp_path / "checkpoints.sqlite"
    model = RecordingChatModel(responses=replies("a1", "a2"), fail_on={1})
    graph = chat_graph(PolicyEngine(make_policy()), model, open_saver(db))
    graph.invoke({"messages": [HumanMessage("q1")]}, CONFIG)
    with pytest.raises(ModelDown):
        graph.invoke({"messages": [HumanMessage("q2")]}, CONFIG)

    snapshot = graph.get_state(CONFIG)
    assert snapshot.next == ("analyst",)  # the failed node was not checkpointed
    assert texts(snapshot.values["messages"], "human") == ["q1", "q2"]
    assert snapshot.values["last_agent_status"] == "completed"  # from turn 1 only

    state = graph.invoke(None, CONFIG)
    assert texts(state["messages"], "human") == ["q1", "q2"]
    assert texts(state["messages"], "ai") == ["a1", "a2"]
    assert texts(model.seen[-1], "human") == ["q1", "q2"]


def test_resubmitted_user_turn_after_a_failure_is_not_duplicated(tmp_path: Path) -> None:
    model = RecordingChatModel(responses=replies("a1"), fail_on={0})
    graph = chat_graph(PolicyEngine(make_policy()), model, open_saver(tmp_path / "c.sqlite"))
    with pytest.raises(ModelDown):
        graph.invoke(user_turn("q1", turn_id="req-1"), CONFIG)
    state = graph.invoke(user_turn("q1", turn_id="req-1"), CONFIG)  # the client retries
    assert texts(state["messages"], "human") == ["q1"]
    assert texts(state["messages"], "ai") == ["a1"]
    assert texts(model.seen[-1], "human") == ["q1"]


def test_summarize_overflow_persists_the_summary_across_a_restore(tmp_path: Path) -> None:
    db = tmp_path / "checkpoints.sqlite"
    summaries: list[tuple[int, str | None]] = []

    def summarizer(dropped: tuple[BaseMessage, ...], previous: str | None) -> str:
        summaries.append((len(dropped), previous))
        return f"SUMMARY #{len(summaries)} of " + ", ".join(str(m.content)[:3] for m in dropped)

    def engine() -> PolicyEngine:
        policy = make_policy(window=260, overflow="summarize", redistribute=False)
        return PolicyEngine(policy, services={"summarizer": summarizer})

    long = " and more words" * 6
    model = RecordingChatModel(responses=[*replies(*(f"a{n}{long}" for n in range(1, 9)))])
    graph = chat_graph(engine(), model, open_saver(db))
    turn = 0
    while not summaries and turn < 8:
        turn += 1
        graph.invoke({"messages": [HumanMessage(f"q{turn}{long}")]}, CONFIG)
    assert summaries, "the history never overflowed: the test policy is too large"

    stored = graph.get_state(CONFIG).values
    summary = stored["compression__context"]
    assert summary.startswith("SUMMARY #1")
    assert all(m.type != "system" for m in stored["messages"])  # never inside messages
    kept_humans = texts(stored["messages"], "human")
    assert len(kept_humans) < turn  # the summarized prefix left the history
    assert len(kept_humans) == len(set(kept_humans))

    # a brand-new graph object on the same file: the summary survives and is in the prompt
    fresh_model = RecordingChatModel(responses=replies("final"))
    fresh = chat_graph(engine(), fresh_model, open_saver(db))
    state = fresh.invoke({"messages": [HumanMessage("next question")]}, CONFIG)
    prompt = fresh_model.seen[-1]
    system_texts = [str(m.content) for m in prompt if isinstance(m, SystemMessage)]
    assert any("\n\nSUMMARY #" in t for t in system_texts)  # merged into the one message
    humans = texts(state["messages"], "human")
    assert len(humans) == len(set(humans))
    assert humans[-1] == "next question"
    assert texts(prompt, "human")[-1] == "next question"
    assert texts(prompt, "human").count("next question") == 1
    assert state["compression__context"].startswith("SUMMARY #")
