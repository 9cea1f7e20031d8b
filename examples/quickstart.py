"""ctxpolicy quickstart: compose the input messages of a ReAct agent and a MapReduce worker.

Run from the repository root:

    .venv/bin/python examples/quickstart.py

The policy (policies/base.yaml) decides the layers, their order, their token budgets and
which process sees what; the code below only passes explicit values. The "LLM" is a
langchain-core fake chat model, so this runs offline.
"""

from __future__ import annotations

from pathlib import Path

from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from ctxpolicy import PolicyEngine
from ctxpolicy.testing import ListRetriever

ROOT = Path(__file__).resolve().parent.parent


def show(title: str, result) -> None:
    print(f"\n=== {title}: {len(result.messages)} messages, {result.report.total_tokens} tokens")
    for message in result.messages:
        text = message.content if isinstance(message.content, str) else str(message.content)
        calls = [c["name"] for c in getattr(message, "tool_calls", None) or []]
        suffix = f"  [tool calls: {', '.join(calls)}]" if calls else ""
        print(f"  {message.type:>6}: {' '.join(text.split())[:90]}{suffix}")
    for layer in result.report.layers:
        if not layer.included:
            print(f"  (excluded {layer.name}: {layer.reason})")


def main() -> None:
    # Load once at start-up. Services are the runtime sources collectors read from.
    knowledge = ListRetriever(
        [
            Document(page_content="dwd.orders_daily is partitioned by dt (yyyy-mm-dd)."),
            Document(page_content="The orders ETL job loads dwd.orders_daily at 02:00 UTC."),
        ]
    )
    engine = PolicyEngine.from_file(
        ROOT / "policies" / "base.yaml", services={"knowledge": knowledge}
    )

    # --- a ReAct agent: the input is already the last HumanMessage of the Blackboard
    state = {
        "messages": [
            HumanMessage("Which tables feed the orders report?"),
            AIMessage(
                "",
                tool_calls=[{"name": "lineage", "args": {"table": "ads.orders"}, "id": "call_1"}],
            ),
            ToolMessage('{"upstream": ["dwd.orders_daily"]}', tool_call_id="call_1"),
            AIMessage("It reads dwd.orders_daily."),
            HumanMessage("Why did yesterday's partition lose rows?"),
        ],
        "todo": {"locate source tables": "done", "compare partitions": "in progress"},
        "compression__context": "The user works on the prod Hive catalog and wants JSON answers.",
    }
    react = engine.compose(process="react", system_prompt="You are a data analyst.", state=state)
    show("react", react)

    model = FakeMessagesListChatModel(responses=[AIMessage('{"cause": "late upstream load"}')])
    answer = model.invoke(react.messages)
    print(f"  model answered: {answer.content}")
    # What goes back to the Blackboard is only the delta (the answer) plus result.persist
    # (empty here: nothing was summarized this turn).
    print(f"  persist: {react.persist}")

    # --- a MapReduce worker: no history, its own runtime input, only framework + knowledge
    worker = engine.compose(
        process="mapreduce_worker",
        system_prompt="You check one partition.",
        state=state,  # ignored for history: mapreduce_worker has checkpoint_messages false
        query="Count rows of dwd.orders_daily for dt=2024-06-01.",
    )
    show("mapreduce_worker", worker)

    # The plan explains the rules behind those lists before anything is composed.
    plan = engine.plan("mapreduce_worker")
    print(
        "\nplan of mapreduce_worker:",
        ", ".join(f"{layer.name}<={layer.cap}" for layer in plan.layers),
    )


if __name__ == "__main__":
    main()
