"""Which sessions a call reads: the one it is checked for, and only sessions that exist.

`PolicyEngine.compose` outside a graph with ``thread_id=`` reads that thread's session
(the one `check_sessions_active` checks), never every open one; naming a session the
store does not hold opens none.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from langgraph.store.sqlite import SqliteStore

from ctxpolicy.engine import PolicyEngine
from ctxpolicy.loading import load_policy
from ctxpolicy.memory import MemorySessions, SessionInactiveError

ROOT = Path(__file__).resolve().parents[2]
SESSIONS = ROOT / "policies" / "seed002-sessions.yaml"


@pytest.mark.parametrize("agent", [None, "analyst"])
def test_compose_with_a_thread_id_outside_a_graph_reads_only_that_session(
    agent: str | None,
) -> None:
    sessions = MemorySessions(agent=agent, store=False)
    sessions.session("A").add("L1-MARK-A 会话 A 的私有笔记", kind="agent")
    sessions.session("B").add("L1-MARK-B private note of B", kind="agent")
    engine = PolicyEngine(load_policy(SESSIONS), services={"memory": sessions})
    result = engine.compose(
        system_prompt="S", state={"messages": [("human", "笔记? notes?")]}, thread_id="A"
    )
    text = "\n".join(str(m.content) for m in result.messages)
    assert "L1-MARK-A" in text
    assert "L1-MARK-B" not in text  # before: every open session's L1
    if agent is not None:  # the session checked is the session read
        sessions.pause("A")
        with pytest.raises(SessionInactiveError):
            engine.compose(
                system_prompt="S", state={"messages": [("human", "notes?")]}, thread_id="A"
            )


AGGREGATE_POLICY = """version: 1
name: aggregate-sessions
model: {context_window: 16000, tokenizer: cl100k_base}
budget: {ratios: {sessions__context: 0.4}}
order: [system_prompt, sessions__context, checkpoint_messages, query]
layers:
  sessions__context:
    collector: {type: aggregate, service: memory}
processes:
  react: {query: checkpoint, checkpoint_messages: true}
"""


def _stored_sessions(tmp_path: Path) -> tuple[MemorySessions, SqliteStore]:
    """Sessions on a SQLite store where another process wrote session ``A``."""
    store = SqliteStore(
        sqlite3.connect(str(tmp_path / "s.sqlite"), check_same_thread=False, isolation_level=None)
    )
    store.setup()
    MemorySessions(agent="lead", store=store).session("A").add(
        "STORED-A 部署冻结于 18:00", importance=0.9
    )
    return MemorySessions(agent="lead", store=store), store


@pytest.mark.parametrize("policy", ["aggregate", "memory"])
def test_naming_an_unknown_session_opens_none(tmp_path: Path, policy: str) -> None:
    sessions, _ = _stored_sessions(tmp_path)
    path = SESSIONS
    if policy == "aggregate":
        path = tmp_path / "aggregate.yaml"
        path.write_text(AGGREGATE_POLICY, encoding="utf-8")
    engine = PolicyEngine(load_policy(path), services={"memory": sessions})
    state = {"messages": [("human", "状态? status?")], "session_ids": ["A", "typo-A"]}
    text = "\n".join(
        str(m.content) for m in engine.compose(system_prompt="S", state=state).messages
    )
    assert "STORED-A" in text  # the stored session is restored and read
    assert sessions.session_ids == ("A",)  # before: an empty 'typo-A' stayed open


def test_ending_an_unknown_session_opens_none(tmp_path: Path) -> None:
    sessions, _ = _stored_sessions(tmp_path)
    sessions.end("never-seen")
    assert "never-seen" not in sessions
    sessions.end("A")  # a stored one is restored, so its L2 reaches the agent's L3
    assert any("STORED-A" in item.content for item in sessions.agent_l3())
