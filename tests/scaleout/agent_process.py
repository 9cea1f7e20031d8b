"""A long-lived agent process for the scale-out tests.

Run as ``python -m tests.scaleout.agent_process DSN``.

It opens its own connection to PostgreSQL through LangGraph's ``PostgresSaver`` and
answers JSON commands, one per stdin line, with one JSON line on stdout:

- ``{"op": "chat", "thread", "text", "reply", "policy", "turn_id"?, "block"?}``: one
  user turn of the chat agent. ``policy`` is ``plain`` or ``summarize`` (a tiny window
  whose history overflow is folded into ``compression__context``). With ``block`` (a
  path), the model writes ``<block>.entered`` and then waits forever: the test kills
  the process mid-turn.
- ``{"op": "resume", "thread", "policy"}``: continue an interrupted run (``invoke(None)``).
- ``{"op": "mapreduce", "thread", "goal", "block_task"?, "block"?}``: planner -> one
  worker per task -> reducer; the worker of ``block_task`` blocks like above.
- ``{"op": "mapreduce_resume", "thread"}``.

Every answer holds what the model saw last and the thread's stored values.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from ctxpolicy.engine import PolicyEngine
from ctxpolicy.state import user_turn
from tests.integrations.graphs import chat_graph, make_policy, mapreduce_graph, open_checkpointer

PLAN = "Tasks:\n- count rows\n- check nulls\n- sample values"


def _block(marker: str) -> None:
    Path(marker + ".entered").write_text("entered")
    while True:  # until SIGKILL
        time.sleep(0.05)


class ScriptedModel(FakeMessagesListChatModel):
    """Answers ``reply`` (or ``result of <query>`` when ``echo``); may block mid-call.

    Records every prompt. Thread-safe enough for LangGraph's parallel ``Send`` workers
    (each call only appends).
    """

    responses: list[BaseMessage] = Field(default_factory=lambda: [AIMessage("unused")])
    reply: str = ""
    echo: bool = False
    block_on: str | None = None
    block: str | None = None
    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.seen.append(list(messages))
        query = str(messages[-1].content)
        if self.block and (self.block_on is None or self.block_on in query):
            _block(self.block)
        text = f"result of {query}" if self.echo else self.reply
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])


def summarizer(dropped: tuple[BaseMessage, ...], previous: str | None) -> str:
    """Keeps the first word of every folded message, after the previous summary."""
    words = " ".join(str(m.content).split()[0] for m in dropped if str(m.content).split())
    return f"{previous} {words}" if previous else f"SUMMARY: {words}"


def engine(policy: str) -> PolicyEngine:
    if policy == "summarize":
        return PolicyEngine(
            make_policy(window=260, overflow="summarize", redistribute=False),
            services={"summarizer": summarizer},
        )
    return PolicyEngine(make_policy())


def _dump(values: dict[str, Any], seen: list[BaseMessage] | None) -> dict[str, Any]:
    return {
        "messages": [[m.type, str(m.content)] for m in values.get("messages", [])],
        "summary": values.get("compression__context"),
        "results": [dict(r) for r in values.get("mapreduce_results") or []],
        "tasks": [dict(t) for t in values.get("mapreduce_tasks") or []],
        "seen": [[m.type, str(m.content)] for m in seen] if seen is not None else None,
    }


def handle(saver: Any, command: dict[str, Any]) -> dict[str, Any]:
    op = command["op"]
    config = {"configurable": {"thread_id": command["thread"]}}
    if op in ("chat", "resume"):
        model = ScriptedModel(reply=command.get("reply", "resumed"), block=command.get("block"))
        graph = chat_graph(engine(command.get("policy", "plain")), model, saver)
        if op == "resume":
            values = graph.invoke(None, config)
        elif command.get("turn_id"):
            values = graph.invoke(user_turn(command["text"], turn_id=command["turn_id"]), config)
        else:
            values = graph.invoke({"messages": [HumanMessage(command["text"])]}, config)
        return _dump(values, model.seen[-1] if model.seen else None)
    planner = ScriptedModel(reply=PLAN)
    worker = ScriptedModel(
        echo=True, block_on=command.get("block_task"), block=command.get("block")
    )
    reducer = ScriptedModel(echo=True)
    graph = mapreduce_graph(
        engine("plain"),
        planner_model=planner,
        worker_model=worker,
        reducer_model=reducer,
        saver=saver,
    )
    if op == "mapreduce":
        values = graph.invoke({"messages": [HumanMessage(command["goal"])]}, config)
    else:
        values = graph.invoke(None, config)
    out = _dump(values, reducer.seen[-1] if reducer.seen else None)
    out["worker_calls"] = len(worker.seen)
    return out


def main(dsn: str) -> None:
    saver = open_checkpointer(dsn)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        print(json.dumps(handle(saver, json.loads(line))), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
