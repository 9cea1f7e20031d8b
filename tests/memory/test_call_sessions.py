"""Which sessions a call reads: the one it is checked for, and only sessions that exist.

`PolicyEngine.compose` outside a graph with ``thread_id=`` reads that thread's session
(the one `check_sessions_active` checks), never every open one; naming a session the
store does not hold opens none.
"""

from __future__ import annotations

from pathlib import Path

import pytest

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
