"""A small Datapillar-style multi-agent app on LangGraph, fully offline.

- loads the team policy ONCE at start-up (`init_context_engine`, with the central
  ``enable_share_context`` switch);
- a ReAct analyst (process ``react``: history + shared context) and a MapReduce
  planner / workers / reducer (``mapreduce_*``: no history, only the layers each
  process includes);
- scripted langchain-core fake chat models (no network);
- a SQLite checkpointer file in a temp folder; after the run a brand-new graph
  object on the same file continues the thread;
- prints the prompt every agent saw, layer by layer.

Run:  .venv/bin/python examples/langgraph_datapillar.py [--no-share-context]
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableLambda
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from ctxpolicy.engine import ComposeResult, PolicyEngine
from ctxpolicy.integrations.langgraph import (
    add_mapreduce,
    agent_node,
    init_context_engine,
    mapreduce_planner_node,
    mapreduce_reducer_node,
    mapreduce_worker_node,
    state_schema,
)
from ctxpolicy.state import user_turn

POLICY = Path(__file__).resolve().parents[1] / "policies" / "teams" / "data-platform.yaml"


def scripted(*texts: str) -> FakeMessagesListChatModel:
    """A fake chat model answering ``texts`` in order."""
    return FakeMessagesListChatModel(responses=[AIMessage(t) for t in texts])


def knowledge_retriever(query: str) -> list[Document]:
    """A stand-in knowledge base: any runnable returning Documents is a retriever."""
    return [
        Document(page_content="orders(order_id, customer_id, amount, created_at) in sales."),
        Document(page_content=f"Search hint for {query[:40]!r}: partitioned by created_at."),
    ]


def show_prompt(agent: str, result: ComposeResult) -> None:
    """The ``on_compose`` hook: print what the agent is about to send to its model."""
    print(f"\n--- prompt of {agent} ({len(result.messages)} messages) ---")
    for message in result.messages:
        text = str(message.content).replace("\n", " | ")
        print(f"  [{message.type:6}] {text[:110]}{'…' if len(text) > 110 else ''}")
    if result.persist:
        print(f"  persisted: {sorted(result.persist)}")


def app_services() -> dict[str, Any]:
    """The runtime services the policy's collectors use (knowledge retriever, summarizer)."""
    return {
        "knowledge": RunnableLambda(knowledge_retriever),
        "summarizer": scripted("Summary of the earlier conversation."),
    }


def build_graph(engine: PolicyEngine, saver: SqliteSaver, *, analyst_replies: list[str]) -> Any:
    """START → (analyst | planner → workers → reducer) → END."""
    graph = StateGraph(state_schema(engine))
    graph.add_node(
        "analyst",
        agent_node(
            engine,
            name="analyst",
            system_prompt="You are Datapillar's data analyst. Be precise.",
            model=scripted(*analyst_replies),
            on_compose=show_prompt,
        ),
    )
    entry, exit_ = add_mapreduce(
        graph,
        planner=mapreduce_planner_node(
            engine,
            name="planner",
            system_prompt="Split the goal into independent profiling tasks (JSON).",
            model=scripted(
                '{"understanding": "profile one table", "tasks": '
                '["count rows", "measure null rates", "range of amount"]}'
            ),
            on_compose=show_prompt,
            reducer="reducer",
        ),
        worker=mapreduce_worker_node(
            engine,
            name="worker",
            system_prompt="Do exactly one profiling task.",
            model=scripted("1.2M rows", "customer_id 0.3% null", "amount in [1, 950]"),
            on_compose=show_prompt,
        ),
        reducer=mapreduce_reducer_node(
            engine,
            name="reducer",
            system_prompt="Merge the task results into one answer.",
            model=scripted("Profile: 1.2M rows; customer_id 0.3% null; amount 1-950."),
            on_compose=show_prompt,
        ),
    )

    def choose(state: dict[str, Any]) -> str:
        last = state["messages"][-1]
        return entry if "profile" in str(last.content).lower() else "analyst"

    graph.add_conditional_edges(START, choose, ["analyst", entry])
    graph.add_edge("analyst", END)
    graph.add_edge(exit_, END)
    return graph.compile(checkpointer=saver)


def main() -> None:
    """Run three turns, restart on the same checkpoint file, run one more."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-share-context", action="store_true")
    args = parser.parse_args()

    # Application initialization: the policy is loaded and validated exactly once.
    engine = init_context_engine(
        POLICY,
        enable_share_context=not args.no_share_context,
        services=app_services(),
    )
    share = engine.policy.enable_share_context
    print(f"policy {engine.policy.name!r}, enable_share_context={share}")

    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "datapillar.sqlite"
        config: Any = {"configurable": {"thread_id": "session-42"}, "max_concurrency": 1}

        graph = build_graph(
            engine,
            SqliteSaver(sqlite3.connect(db, check_same_thread=False)),
            analyst_replies=[
                "Orders live in sales.orders (see knowledge).",
                "We profiled sales.orders: 1.2M rows, 0.3% null customer_id, amounts 1-950.",
            ],
        )
        for n, text in enumerate(
            ["Which table holds the orders?", "Profile the orders table.", "What did we learn?"],
            start=1,
        ):
            print(f"\n===== turn {n}: {text}")
            graph.invoke({**user_turn(text, turn_id=f"turn-{n}"), "namespace": "sales"}, config)

        # A restart: a brand-new graph object (and engine) on the same SQLite file.
        restarted = build_graph(
            init_context_engine(
                POLICY, enable_share_context=not args.no_share_context, services=app_services()
            ),
            SqliteSaver(sqlite3.connect(db, check_same_thread=False)),
            analyst_replies=["Nothing else: the profile of sales.orders above still stands."],
        )
        print("\n===== after restart, turn 4")
        state = restarted.invoke(user_turn("Anything else?", turn_id="turn-4"), config)

        humans = [m.content for m in state["messages"] if isinstance(m, HumanMessage)]
        print("\nthread history:")
        for message in state["messages"]:
            print(f"  [{message.type:5}] {message.content}")
        assert len(humans) == len(set(humans)) == 4, "every user turn exactly once"
        print(f"\nmapreduce results: {[r['task_id'] for r in state['mapreduce_results']]}")
        checkpoints = sum(1 for _ in restarted.checkpointer.list(config))
        print(f"{checkpoints} checkpoints of thread session-42 in {db.name}")


if __name__ == "__main__":
    main()
