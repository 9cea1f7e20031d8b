"""One half of the issue 32 Postgres test, run in its own OS process.

``python -m tests.integrations.issue32_process write|read DSN`` runs seed 002's agent
(`MemorySessions(agent="analyst")`) and seed 004's memory service
(`TieredMemory.from_store`) on LangGraph's Postgres checkpointer and store, and prints
one JSON line with what the test checks.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import START, StateGraph
from langgraph.store.postgres import PostgresStore

from ctxpolicy.integrations.langgraph import agent_node, init_context_engine, state_schema
from ctxpolicy.memory import MemorySessions, TieredMemory
from tests.integrations.fakes import RecordingChatModel

ROOT = Path(__file__).resolve().parents[2]
SESSIONS = ROOT / "policies" / "seed002-sessions.yaml"
TASKS = ROOT / "policies" / "seed004-tasks.yaml"


class ToolModel(RecordingChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def _app(engine: Any, model: RecordingChatModel, saver: Any) -> Any:
    graph = StateGraph(state_schema(engine))
    graph.add_node("agent", agent_node(engine, name="analyst", system_prompt="S", model=model))
    graph.add_edge(START, "agent")
    return graph.compile(checkpointer=saver)


def _turn(app: Any, thread: str, text: str) -> None:
    app.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}})


def main(phase: str, dsn: str) -> dict[str, Any]:
    with PostgresSaver.from_conn_string(dsn) as saver, PostgresStore.from_conn_string(dsn) as store:
        if phase == "write":
            saver.setup()
            store.setup()
        sessions = MemorySessions(agent="analyst", store=store, l1_size=3)
        model = RecordingChatModel(responses=[AIMessage(f"noted {phase} {i}") for i in range(4)])
        app = _app(init_context_engine(SESSIONS, services={"memory": sessions}), model, saver)
        service = TieredMemory.from_store(store, namespace=("seed004", "analyst"), l1_size=4)
        tasks_model = ToolModel(responses=[AIMessage(f"SVC-ANSWER {phase}")])
        tasks = _app(init_context_engine(TASKS, services={"memory": service}), tasks_model, saver)
        out: dict[str, Any] = {}
        if phase == "write":
            _turn(app, "A", "Remember: the deploy region is eu-west-3.")
            _turn(app, "A", "Remember: the on-call host is ops-7.internal.")
            _turn(app, "Z", "Z-SECRET the vault code is 4711")
            _turn(tasks, "svc", "Which table has orders?")
        else:
            _turn(app, "C", "what is the vault code?")
            out["c_prompt"] = "\n".join(str(m.content) for m in model.seen[-1])
            out["a_l1_restored"] = [i.content for i in sessions.session("A").get_l1()]
        out["a_l1"] = [i.content for i in sessions.session("A").get_l1()]
        out["a_l2"] = [i.content for i in sessions.session("A").get_l2()]
        out["service_l1"] = [i.content for i in service.get_l1()]
        if phase == "read":
            _turn(app, "A", "Remember: the backup window is 02:00 UTC.")
            sessions.end("A")
            out["agent_l3"] = [s.content for s in sessions.agent_l3()]
        return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
