"""Issue 32, seed 002 (sessions and scopes) inside a real LangGraph graph.

Each test runs `agent_node` on a SQLite checkpointer; "a restarted process" is a new
graph, engine, memory and store connection on the same files. The Postgres variant
(two OS processes) is tests/integrations/test_issue32_postgres.py.
"""

from __future__ import annotations

import sqlite3
import warnings
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.graph import START, StateGraph
from langgraph.store.sqlite import SqliteStore

from ctxpolicy.integrations.langgraph import agent_node, init_context_engine, state_schema
from ctxpolicy.memory import MemoryNotDurableWarning, MemorySessions, SessionInactiveError
from ctxpolicy.state import Blackboard, DroppedStateKeyError
from tests.integrations.fakes import RecordingChatModel
from tests.integrations.graphs import open_saver

ROOT = Path(__file__).resolve().parents[2]
SESSIONS = ROOT / "policies" / "seed002-sessions.yaml"
LOOM = ROOT / "policies" / "loom-sources.yaml"


def prompt_text(prompt: list[BaseMessage]) -> str:
    return "\n".join(str(m.content) for m in prompt)


def build(engine: Any, model: RecordingChatModel, saver: Any) -> Any:
    graph = StateGraph(state_schema(engine))
    graph.add_node("agent", agent_node(engine, name="analyst", system_prompt="S", model=model))
    graph.add_edge(START, "agent")
    return graph.compile(checkpointer=saver)


def open_store(path: Path) -> SqliteStore:
    store = SqliteStore(sqlite3.connect(str(path), check_same_thread=False, isolation_level=None))
    store.setup()
    return store


def config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


# ------------------------------------------------------------- state keys and scopes


def test_a_schema_that_would_drop_a_key_the_policy_reads_is_an_error_when_built() -> None:
    engine = init_context_engine(SESSIONS, services={"memory": MemorySessions(store=False)})
    model = RecordingChatModel(responses=[AIMessage("x")])
    with pytest.raises(DroppedStateKeyError, match=r"'context_strategy'.*'session_ids'"):
        agent_node(engine, name="a", system_prompt="S", model=model, schema=Blackboard)
    assert {"session_ids", "context_strategy", "memory"} <= set(
        state_schema(engine).__annotations__
    )


def test_session_ids_in_the_graph_input_choose_the_sessions_and_no_other_l1_leaks(
    tmp_path: Path,
) -> None:
    sessions = MemorySessions(store=False)  # no agent=: aggregates the sessions named
    for sid in ("A", "B", "Z"):
        sessions.session(sid).add(f"L1-MARK-{sid} private note of {sid}", kind="agent")
    engine = init_context_engine(SESSIONS, services={"memory": sessions})
    model = RecordingChatModel(responses=[AIMessage(f"ok {i}") for i in range(3)])
    app = build(engine, model, open_saver(tmp_path / "c.sqlite"))

    app.invoke({"messages": [HumanMessage("note?")], "session_ids": ["A", "B"]}, config("C"))
    seen = prompt_text(model.seen[-1])
    assert "L1-MARK-A" in seen and "L1-MARK-B" in seen
    assert "L1-MARK-Z" not in seen  # before: session_ids dropped, every session's L1 shown
    assert app.get_state(config("C")).values["session_ids"] == ["A", "B"]

    # naming no session: the thread's own (none here), never every open one
    app.invoke({"messages": [HumanMessage("note?")]}, config("D"))
    assert "L1-MARK" not in prompt_text(model.seen[-1])
    app.invoke({"messages": [HumanMessage("note?")]}, config("Z"))
    assert "L1-MARK-Z" in prompt_text(model.seen[-1])
    assert "L1-MARK-A" not in prompt_text(model.seen[-1])


def test_agent_sessions_keep_l1_private_across_threads(tmp_path: Path) -> None:
    sessions = MemorySessions(agent="analyst", store=False)
    engine = init_context_engine(SESSIONS, services={"memory": sessions})
    model = RecordingChatModel(responses=[AIMessage(f"ok {i}") for i in range(3)])
    app = build(engine, model, open_saver(tmp_path / "c.sqlite"))
    app.invoke({"messages": [HumanMessage("Z-SECRET the vault code is 4711")]}, config("Z"))
    app.invoke({"messages": [HumanMessage("what is the vault code?")]}, config("C"))
    assert "Z-SECRET" not in prompt_text(model.seen[-1])


# ------------------------------------------------------------- restart


def test_session_tiers_survive_a_restart_and_end_moves_the_whole_session(
    tmp_path: Path,
) -> None:
    facts = [
        "Remember: the deploy region is eu-west-3.",
        "Remember: the on-call host is ops-7.internal.",
    ]
    store = open_store(tmp_path / "store.sqlite")
    sessions = MemorySessions(agent="analyst", store=store, l1_size=3)
    engine = init_context_engine(SESSIONS, services={"memory": sessions})
    model = RecordingChatModel(responses=[AIMessage(f"noted {i}") for i in range(2)])
    app = build(engine, model, open_saver(tmp_path / "ckpt.sqlite"))
    for fact in facts:
        app.invoke({"messages": [HumanMessage(fact)]}, config("A"))
    before_l1 = [i.content for i in sessions.session("A").get_l1()]
    before_l2 = [i.content for i in sessions.session("A").get_l2()]
    assert set(facts) <= set(before_l2)

    # a restarted process: new store connection, sessions, engine, graph, checkpointer
    store = open_store(tmp_path / "store.sqlite")
    sessions = MemorySessions(agent="analyst", store=store, l1_size=3)
    engine = init_context_engine(SESSIONS, services={"memory": sessions})
    model = RecordingChatModel(responses=[AIMessage("noted 2")])
    app = build(engine, model, open_saver(tmp_path / "ckpt.sqlite"))
    assert [i.content for i in sessions.session("A").get_l1()] == before_l1
    assert [i.content for i in sessions.session("A").get_l2()] == before_l2
    app.invoke(
        {"messages": [HumanMessage("Remember: the backup window is 02:00 UTC.")]}, config("A")
    )
    assert "eu-west-3" in prompt_text(model.seen[-1])  # L1/L2 of before the restart shown
    sessions.end("A")
    l3 = " ".join(s.content for s in sessions.agent_l3())
    assert "eu-west-3" in l3 and "ops-7" in l3 and "02:00" in l3


def test_end_right_after_a_restart_moves_the_session_into_l3(tmp_path: Path) -> None:
    store = open_store(tmp_path / "store.sqlite")
    sessions = MemorySessions(agent="analyst", store=store)
    engine = init_context_engine(SESSIONS, services={"memory": sessions})
    app = build(engine, RecordingChatModel(responses=[AIMessage("ok")]), open_saver(tmp_path / "c"))
    app.invoke({"messages": [HumanMessage("Remember: the DB port is 6543.")]}, config("A"))
    again = MemorySessions(agent="analyst", store=open_store(tmp_path / "store.sqlite"))
    written = again.end("A")  # no turn since the restart
    assert any("6543" in s.content for s in written)


# ------------------------------------------------------------- lifecycle


def test_a_paused_session_is_refused_before_the_model_with_nothing_added(
    tmp_path: Path,
) -> None:
    sessions = MemorySessions(agent="analyst", store=False)
    engine = init_context_engine(SESSIONS, services={"memory": sessions})
    model = RecordingChatModel(responses=[AIMessage("first"), AIMessage("second")])
    app = build(engine, model, open_saver(tmp_path / "c.sqlite"))
    app.invoke({"messages": [HumanMessage("hello")]}, config("A"))
    before = [m.content for m in app.get_state(config("A")).values["messages"]]
    sessions.pause("A")
    state = app.invoke({"messages": [HumanMessage("are you there?")]}, config("A"))
    assert model.calls == 1  # the model was not called (not paid for)
    assert [m.content for m in state["messages"]] == before  # the refused input is gone
    assert state["last_agent_status"] == "aborted"
    assert "paused" in state["last_agent_error"]
    with pytest.raises(SessionInactiveError, match="'A' is paused"):
        engine.compose(system_prompt="S", state={"messages": [HumanMessage("x")]}, thread_id="A")
    sessions.resume("A")
    state = app.invoke({"messages": [HumanMessage("back again")]}, config("A"))
    assert [m.content for m in state["messages"]][-2:] == ["back again", "second"]
    sessions.end("A")
    state = app.invoke({"messages": [HumanMessage("after the end")]}, config("A"))
    assert model.calls == 2 and "ended" in state["last_agent_error"]
    assert [m.content for m in state["messages"]][-1] == "second"


# ------------------------------------------------------------- user input (loom sources)


def _loom_engine(memory: Any) -> Any:
    return init_context_engine(
        LOOM, services={"memory": memory, "tools": [], "skills": {}, "knowledge": None}
    )


def test_the_users_runtime_input_reaches_messages_and_memory_once(tmp_path: Path) -> None:
    from ctxpolicy.memory import TieredMemory

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MemoryNotDurableWarning)
        memory = TieredMemory()
        engine = _loom_engine(memory)
    model = RecordingChatModel(responses=[AIMessage("refund is late"), AIMessage("again")])
    app = build(engine, model, open_saver(tmp_path / "c.sqlite"))
    question = "USER-ASK why was the refund for invoice 7 late?"
    state = app.invoke({"assigned_task": question}, config("T"))
    assert [m.type for m in state["messages"]] == ["human", "ai"]
    assert state["messages"][0].content == question
    recorded = [i for i in memory.get_l1() if i.content == question]
    assert len(recorded) == 1 and recorded[0].importance >= 0.9  # the seed's user rule
    # the same turn resumed (the node re-run on the same input) adds nothing twice
    app.invoke({"assigned_task": "a second question"}, config("T"))
    assert sum(i.content == question for i in memory.get_l1()) == 1


def test_the_users_checkpoint_input_reaches_memory_once(tmp_path: Path) -> None:
    sessions = MemorySessions(agent="analyst", store=False)
    engine = init_context_engine(SESSIONS, services={"memory": sessions})
    model = RecordingChatModel(responses=[AIMessage("ok"), AIMessage("ok 2")])
    app = build(engine, model, open_saver(tmp_path / "c.sqlite"))
    app.invoke({"messages": [HumanMessage("USER-ASK the port is 5432", id="u1")]}, config("A"))
    app.invoke({"messages": [HumanMessage("USER-ASK the port is 5432", id="u1")]}, config("A"))
    items = [i for i in sessions.session("A").get_l1() if i.content.startswith("USER-ASK")]
    assert len(items) == 1 and items[0].importance >= 0.9


# ------------------------------------------------------------- one item once per prompt


def test_one_item_once_per_prompt_across_memory_and_agent_output_layers(
    tmp_path: Path,
) -> None:
    from ctxpolicy.memory import TieredMemory

    earlier = [
        HumanMessage("what is the refund SLA?", id="h1"),
        AIMessage("MEMORY-NOTE the refund SLA is 5 days for invoice refunds", id="a1"),
        HumanMessage("中文呢？", id="h2"),
        AIMessage("备忘 MEMORY-ZH：退款时限是五天，发票退款", id="a2"),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MemoryNotDurableWarning)
        memory = TieredMemory(l1_size=10)
        memory.record(earlier)
        engine = _loom_engine(memory)
    assert {i.id for i in memory.get_l2()} >= {"a1"}  # in L1, L2 and the search index
    reports: list[Any] = []
    model = RecordingChatModel(responses=[AIMessage("ok")])
    graph = StateGraph(state_schema(engine))
    graph.add_node(
        "agent",
        agent_node(
            engine,
            name="agent",
            system_prompt="S",
            model=model,
            tools=None,
            on_compose=lambda _n, r: reports.append(r.report),
        ),
    )
    graph.add_edge(START, "agent")
    app = graph.compile(checkpointer=open_saver(tmp_path / "c.sqlite"))
    app.invoke({"messages": earlier, "assigned_task": "refund SLA days? 退款时限"}, config("T"))
    prompt = prompt_text(model.seen[0])
    assert prompt.count("MEMORY-NOTE") == 1  # before: in agent outputs, L1, L2 and L4
    assert prompt.count("MEMORY-ZH") == 1
    # one SystemMessage by default: its layers are joined by a blank line
    parts = [p for m in model.seen[0] for p in str(m.content).split("\n\n")]
    layer = next(p for p in parts if "MEMORY-NOTE" in p)
    assert layer.startswith("- [agent]") and "备忘 MEMORY-ZH" in layer  # the earliest layer
    assert reports[0].layer("agent_output__context").included


# ------------------------------------------------------------- aggregate from the policy

AGGREGATE_POLICY = """version: 1
name: aggregate-sessions
model: {context_window: 16000, tokenizer: cl100k_base}
budget: {ratios: {sessions__context: 0.4}}
order: [system_prompt, sessions__context, checkpoint_messages, query]
layers:
  sessions__context:
    collector: {type: aggregate, service: memory, contexts: session_states}
processes:
  react: {query: checkpoint, checkpoint_messages: true}
"""


def test_aggregate_collector_from_the_policy_reads_only_the_named_sessions(
    tmp_path: Path,
) -> None:
    from ctxpolicy.loading import load_policy
    from ctxpolicy.validation import check_policy

    path = tmp_path / "aggregate.yaml"
    path.write_text(AGGREGATE_POLICY, encoding="utf-8")
    assert check_policy(load_policy(path)) == []
    sessions = MemorySessions(agent="lead", store=False)
    sessions.session("A").add("AGG-A the deploy froze at 18:00", importance=0.9)
    sessions.session("B").add("AGG-B 部署区域是 eu-west-3", importance=0.9)
    sessions.session("Z").add("AGG-Z unrelated secret", importance=0.9)
    states = {
        "A": {"todo__context": "AGG-TODO-A rotate keys"},
        "Z": {"todo__context": "AGG-TODO-Z"},
    }
    engine = init_context_engine(path, services={"memory": sessions, "session_states": states.get})
    model = RecordingChatModel(responses=[AIMessage("ok")])
    app = build(engine, model, open_saver(tmp_path / "c.sqlite"))
    app.invoke({"messages": [HumanMessage("status?")], "session_ids": ["A", "B"]}, config("L"))
    seen = prompt_text(model.seen[-1])
    assert "AGG-A" in seen and "AGG-B 部署区域" in seen and "AGG-TODO-A" in seen
    assert "AGG-Z" not in seen and "AGG-TODO-Z" not in seen
    assert "[A · todo__context]" in seen
