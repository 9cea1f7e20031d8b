"""Policies and graphs shared by the LangGraph tests (and their subprocess)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from ctxpolicy.engine import PolicyEngine
from ctxpolicy.integrations.langgraph import (
    ComposeHook,
    add_mapreduce,
    agent_node,
    init_context_engine,
    mapreduce_planner_node,
    mapreduce_reducer_node,
    mapreduce_worker_node,
    state_schema,
)
from ctxpolicy.policy import Policy

Saver = TypeVar("Saver", bound=SqliteSaver)

FRAMEWORK = "FRAMEWORK RULES: answer briefly."


def make_policy(
    *, window: int = 100_000, overflow: str = "drop_oldest", redistribute: bool = True
) -> Policy:
    """A small policy on the approximate tokenizer."""
    return Policy.model_validate(
        {
            "version": 1,
            "name": "test-graphs",
            "model": {"context_window": window, "tokenizer": "approximate"},
            "budget": {
                "output_reserve": 0.0,
                "redistribute": redistribute,
                "ratios": {
                    "system_prompt": 0.1,
                    "framework__context": 0.1,
                    "knowledge__context": 0.1,
                    "compression__context": 0.2,
                    "checkpoint_messages": 0.3,
                    "query": 0.2,
                },
            },
            "order": [
                "system_prompt",
                "framework__context",
                "knowledge__context",
                "compression__context",
                "checkpoint_messages",
                "query",
            ],
            "layers": {
                "framework__context": {"collector": {"type": "template", "template": FRAMEWORK}},
                "compression__context": {
                    "persist": True,
                    "collector": {"type": "state", "field": "compression__context"},
                },
                "checkpoint_messages": {"overflow": overflow},
            },
            "processes": {
                "react": {"checkpoint_messages": True, "share_context": True},
                "mapreduce_planner": {
                    "checkpoint_messages": False,
                    "share_context": False,
                    "query": "runtime",
                    "include": ["framework__context"],
                },
                "mapreduce_worker": {
                    "checkpoint_messages": False,
                    "share_context": False,
                    "query": "runtime",
                    "include": ["framework__context"],
                },
                "mapreduce_reducer": {
                    "checkpoint_messages": False,
                    "share_context": False,
                    "query": "runtime",
                    "include": ["framework__context"],
                },
            },
        }
    )


# the default is the bound itself, which mypy cannot see for a TypeVar default
def open_saver(path: Path, kind: type[Saver] = SqliteSaver) -> Saver:  # type: ignore[assignment]
    """A SQLite checkpointer of class ``kind`` on ``path`` (a new connection each time)."""
    return kind(sqlite3.connect(str(path), check_same_thread=False))


class SignallingSaver(SqliteSaver):
    """`SqliteSaver` that lets a test wait until chosen task writes are saved.

    LangGraph saves each finished task's writes from the task's completion callback, on
    its background executor; a test that needs "these writes are in the checkpoint before
    that happens" waits for them here instead of sleeping.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        super().__init__(conn)
        self._saved = threading.Condition()
        self.channels: list[tuple[str, ...]] = []  # per saved put_writes, its channels

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        super().put_writes(config, writes, task_id, task_path)
        with self._saved:
            self.channels.append(tuple(channel for channel, _ in writes))
            self._saved.notify_all()

    def wait_for_writes(
        self, matches: Callable[[tuple[str, ...]], bool], count: int, *, timeout: float = 60.0
    ) -> None:
        """Block until ``count`` saved task writes have channels that ``matches`` accepts.

        Raises:
            AssertionError: not within ``timeout`` seconds (a hang, never a pass).
        """
        with self._saved:
            if not self._saved.wait_for(lambda: sum(map(matches, self.channels)) >= count, timeout):
                raise AssertionError(f"{count} matching writes not saved in {timeout} s")


def open_checkpointer(location: str) -> Any:
    """A Postgres checkpointer for a ``postgresql://`` DSN, else SQLite on a file path."""
    if location.startswith("postgresql://"):
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg import Connection
        from psycopg.rows import dict_row

        conn = Connection.connect(
            location, autocommit=True, prepare_threshold=0, row_factory=dict_row
        )
        saver = PostgresSaver(conn)
        saver.setup()
        return saver
    return open_saver(Path(location))


def run_turn(location: str, thread: str, text: str, reply: str) -> dict[str, Any]:
    """One chat turn on a fresh graph object; what the model saw and the resulting history."""
    from langchain_core.messages import HumanMessage

    from tests.integrations.fakes import RecordingChatModel, replies

    model = RecordingChatModel(responses=replies(reply))
    graph = chat_graph(PolicyEngine(make_policy()), model, open_checkpointer(location))
    state = graph.invoke(
        {"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}}
    )
    return {
        "seen": [[m.type, m.content] for m in model.seen[-1]],
        "state": [[m.type, m.content] for m in state["messages"]],
    }


def chat_graph(
    engine: PolicyEngine,
    model: BaseChatModel,
    saver: SqliteSaver,
    *,
    hook: ComposeHook | None = None,
) -> Any:
    """START → analyst (agent_node, react) → END."""
    graph = StateGraph(state_schema(engine))
    graph.add_node(
        "analyst",
        agent_node(
            engine,
            name="analyst",
            system_prompt="You analyse data.",
            model=model,
            on_compose=hook,
        ),
    )
    graph.add_edge(START, "analyst")
    graph.add_edge("analyst", END)
    return graph.compile(checkpointer=saver)


def mapreduce_graph(
    engine: PolicyEngine,
    *,
    planner_model: BaseChatModel,
    worker_model: BaseChatModel,
    reducer_model: BaseChatModel,
    saver: SqliteSaver,
    hook: ComposeHook | None = None,
) -> Any:
    """START → planner → workers (Send) → reducer → END."""
    graph = StateGraph(state_schema(engine))
    entry, exit_ = add_mapreduce(
        graph,
        planner=mapreduce_planner_node(
            engine,
            name="planner",
            system_prompt="Split the goal into tasks.",
            model=planner_model,
            on_compose=hook,
            reducer="reducer",
        ),
        worker=mapreduce_worker_node(
            engine,
            name="worker",
            system_prompt="Do one task.",
            model=worker_model,
            on_compose=hook,
        ),
        reducer=mapreduce_reducer_node(
            engine,
            name="reducer",
            system_prompt="Merge the results.",
            model=reducer_model,
            on_compose=hook,
        ),
    )
    graph.add_edge(START, entry)
    graph.add_edge(exit_, END)
    return graph.compile(checkpointer=saver)


#: The time-travel scenario of the edit tests: a fact, then its correction under the same id.
DEPLOY_TOLD = "Deploy to replica walrus-3."
DEPLOY_CORRECTED = "Deploy to replica narwhal-5."
DEPLOY_QUESTION = "Which replica did the nightly load go to?"


def time_travel_deploy(app: Any, config: dict[str, Any], *, turns: int) -> None:
    """Tell ``app`` (a compiled graph with a checkpointer) to deploy to walrus-3; fork from
    the checkpoint before the reply and correct it to narwhal-5 under the same message id
    (LangGraph time travel: ``update_state``); then ``turns`` turns about other things and
    `DEPLOY_QUESTION`. The model needs ``turns + 3`` replies: the abandoned branch's, the
    fork's, one per turn and the answer.
    """
    app.invoke({"messages": [HumanMessage(DEPLOY_TOLD, id="deploy")]}, config)
    fork = next(
        s
        for s in app.get_state_history(config)
        if s.next == ("agent",) and s.values["messages"][-1].id == "deploy"
    )
    forked = app.update_state(
        fork.config, {"messages": [HumanMessage(DEPLOY_CORRECTED, id="deploy")]}
    )
    app.invoke(None, forked)
    for i in range(turns):
        app.invoke({"messages": [HumanMessage(f"How did batch {i} go?")]}, config)
    app.invoke({"messages": [HumanMessage(DEPLOY_QUESTION)]}, config)


__all__ = [
    "DEPLOY_CORRECTED",
    "DEPLOY_QUESTION",
    "DEPLOY_TOLD",
    "chat_graph",
    "init_context_engine",
    "make_policy",
    "mapreduce_graph",
    "open_checkpointer",
    "open_saver",
    "run_turn",
]


if __name__ == "__main__":  # python -m tests.integrations.graphs LOCATION THREAD TEXT REPLY
    import json
    import sys

    print(json.dumps(run_turn(*sys.argv[1:5])))
