"""Seed 002: three sessions of one agent, memory scoped L1-L4, driven by a policy file.

- `policies/seed002-sessions.yaml` reads a ``memory`` service; here it is a
  `MemorySessions(agent="analyst")` on a LangGraph ``BaseStore`` (SQLite here;
  LangGraph's Postgres store across processes): every tier of every session is written
  through, so a restarted process finds each session as it was;
- a session is a LangGraph thread (SQLite checkpointer): `agent_node` records each turn
  into the thread's session, and the memory layer of a call shows that session's L1/L2,
  the agent's L3 and global L4 hits;
- session A states a fact and ends (L2 → the agent's L3 → global L4);
- session B is paused (it takes no distributed item), resumed, and sees A's fact
  through the agent's L3 but never A's L1;
- an item distributed to the active sessions lands in their L2 (C has it, paused B not).

Run:  .venv/bin/python examples/seed002_sessions.py
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.store.sqlite import SqliteStore
from pydantic import Field

from ctxpolicy.integrations.langgraph import agent_node, init_context_engine, state_schema
from ctxpolicy.memory import MemorySessions

POLICY = Path(__file__).resolve().parents[1] / "policies" / "seed002-sessions.yaml"


class Recording(FakeMessagesListChatModel):
    """A scripted model that keeps every prompt it was sent."""

    prompts: list[list[BaseMessage]] = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.prompts.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def memory_layer(prompt: list[BaseMessage]) -> str:
    """The memory layer's items in a prompt: the lines of the system message that list
    them (agent_node sends one SystemMessage: the prompt, then the memory layer)."""
    system = (str(m.content) for m in prompt if m.type == "system")
    return "\n".join(line for text in system for line in text.splitlines() if line.startswith("- "))


def open_store(folder: Path) -> SqliteStore:
    connection = sqlite3.connect(
        str(folder / "store.sqlite"), check_same_thread=False, isolation_level=None
    )
    store = SqliteStore(connection)
    store.setup()
    return store


def main() -> None:
    model = Recording(responses=[AIMessage(f"noted ({i})") for i in range(6)])

    def turn(app: Any, session: str, text: str) -> str:
        app.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": session}})
        return memory_layer(model.prompts[-1])

    with tempfile.TemporaryDirectory() as tmp:
        sessions = MemorySessions(agent="analyst", store=open_store(Path(tmp)), l1_size=3)
        engine = init_context_engine(POLICY, services={"memory": sessions})
        graph = StateGraph(state_schema(engine))
        graph.add_node(
            "analyst", agent_node(engine, name="analyst", system_prompt="S", model=model)
        )
        graph.add_edge(START, "analyst")
        saver = SqliteSaver(
            sqlite3.connect(str(Path(tmp) / "ckpt.sqlite"), check_same_thread=False)
        )
        app = graph.compile(checkpointer=saver)
        turn(app, "session-a", "Remember: the deploy region is eu-west-3.")
        turn(app, "session-a", "Our on-call host is ops-7.internal.")
        written = sessions.end("session-a")
        print("A ended:", sessions.status("session-a"), "| L4 items written:", len(written))
        print("agent L3:", [s.content for s in sessions.agent_l3()])

        turn(app, "session-b", "hello from B")
        sessions.pause("session-b")
        got = sessions.distribute(
            "deploy freeze at 18:00", session_ids=["session-b", "session-c"], importance=0.9
        )
        print("distributed to:", sorted(got))
        print("B status:", sessions.status("session-b"))
        sessions.resume("session-b")
        seen_b = turn(app, "session-b", "which deploy region do we use?")
        print("B sees A's fact (agent L3):", "eu-west-3" in seen_b)
        print("B sees A's L1 (its reply 'noted (0)'):", "noted (0)" in seen_b)
        print("B (paused then) got the distributed item:", "deploy freeze" in seen_b)

        seen_c = turn(app, "session-c", "what is planned for the deploy today?")
        print("C got the distributed item (L2):", "deploy freeze" in seen_c)
        print("C L1 private:", [i.content for i in sessions.session("session-c").get_l1()])
        found = sessions.global_memory()
        assert found is not None
        print("global L4 search:", [h.content for h in found.search("deploy region", 1)])
        # a restarted process: new sessions on the same store restore C's tiers
        again = MemorySessions(agent="analyst", store=open_store(Path(tmp)), l1_size=3)
        print(
            "C L1 after a restart:",
            [i.content for i in again.session("session-c").get_l1()]
            == [i.content for i in sessions.session("session-c").get_l1()],
        )


if __name__ == "__main__":
    main()
