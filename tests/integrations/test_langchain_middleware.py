"""ContextPolicyMiddleware on real LangChain 1.x ``create_agent`` agents (no mocks).

The agent, its tool node, LangChain's own middleware and the SQLite checkpointer are
all real; only the chat model is a langchain-core fake that answers from a script and
records what it was sent.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("CTXPOLICY_REQUIRE_AGENTS"):  # make test: run, never skip
    import langchain.agents  # noqa: F401
else:
    pytest.importorskip("langchain.agents", reason="needs the langchain extra (langchain>=1.0)")

from langchain.agents import create_agent
from langchain.agents.middleware import (
    HumanInTheLoopMiddleware,
    ModelRequest,
    ModelRetryMiddleware,
    ToolCallLimitMiddleware,
    wrap_model_call,
)
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import BaseTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.types import Command
from pydantic import Field

from ctxpolicy.engine import ComposeResult
from ctxpolicy.errors import BudgetExceededError, UnknownProcessError
from ctxpolicy.history import check_history
from ctxpolicy.integrations.langchain import (
    ContextPolicyMiddleware,
    ContextPolicyState,
    context_policy_state_schema,
)
from ctxpolicy.loading import load_policy
from ctxpolicy.testing import ScriptedSummarizer
from ctxpolicy.tokens import get_tokenizer
from tests.integrations.fakes import ModelDown, RecordingChatModel
from tests.integrations.graphs import open_saver

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ROOT / "policies"
SYSTEM = "You are the data-platform agent."
FRAMEWORK = "You run inside Datapillar. Answer in JSON."


# --------------------------------------------------------------------------- fixtures


class ToolCallingModel(RecordingChatModel):
    """`RecordingChatModel` that accepts ``bind_tools`` (the tools are only recorded)."""

    bound: list[list[str]] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        self.bound.append([getattr(t, "name", None) or str(t) for t in tools])
        return self


def policy_file(tmp_path: Path, body: str = "", *, base: str = "base.yaml") -> Path:
    """A team policy in ``tmp_path`` extending a copy of ``policies/<base>``.

    One SystemMessage per layer (``model.system_messages: separate``) unless ``body``
    sets the mode: these tests look at each layer's own message; the default under the
    middleware (one SystemMessage) is tests/integrations/test_one_system_message.py's.
    """
    shutil.copy(POLICIES / base, tmp_path / base)
    if not (tmp_path / "templates").exists():
        shutil.copytree(POLICIES / "templates", tmp_path / "templates")
    if "system_messages" not in body and "model: {" in body:
        body = body.replace("model: {", "model: {system_messages: separate, ", 1)
    elif "system_messages" not in body:
        body = f"model: {{system_messages: separate}}\n{body}"
    path = tmp_path / f"agent-{base}"
    path.write_text(f"version: 1\nname: agent-test\nextends: {base}\n{body}", encoding="utf-8")
    return path


def make_tools(log: list[tuple[str, str]]) -> list[BaseTool]:
    @tool
    def get_rows(table: str) -> str:
        """Count the rows of a warehouse table."""
        log.append(("get_rows", table))
        return f"{table}: 42 rows"

    @tool
    def get_owner(table: str) -> str:
        """The team that owns a warehouse table."""
        log.append(("get_owner", table))
        return f"{table} is owned by data-eng"

    @tool
    def drop_table(table: str) -> str:
        """Drop a warehouse table (needs approval)."""
        log.append(("drop_table", table))
        return f"dropped {table}"

    @tool
    def get_logs(day: int) -> str:
        """The ETL log of one day."""
        log.append(("get_logs", str(day)))
        lines = [f"day {day} line {i}: partition {i} written, job ok" for i in range(12)]
        return "\n".join(lines)

    return [get_rows, get_owner, drop_table, get_logs]


def calls(*specs: tuple[str, dict[str, Any], str]) -> AIMessage:
    """An AIMessage asking for the tool calls ``(name, args, id)`` (in parallel)."""
    return AIMessage("", tool_calls=[{"name": n, "args": a, "id": i} for n, a, i in specs])


def config(thread: str = "thread-1") -> Any:
    return {"configurable": {"thread_id": thread}}


def layer_parts(result: ComposeResult) -> dict[str, list[BaseMessage]]:
    """The composed messages of each layer, by the report's per-layer counts."""
    parts: dict[str, list[BaseMessage]] = {}
    position = 0
    for layer in result.report.layers:
        if layer.included and layer.messages:
            parts[layer.name] = list(result.messages[position : position + layer.messages])
            position += layer.messages
    assert position == len(result.messages)
    return parts


def text(message: BaseMessage) -> str:
    return str(message.text)


def assert_prompt(
    seen: list[BaseMessage],
    result: ComposeResult,
    *,
    query: str,
    system: str | None = SYSTEM,
) -> dict[str, list[BaseMessage]]:
    """The model saw exactly the composition, in policy order, with the query once."""
    assert [(m.type, text(m)) for m in seen] == [(m.type, text(m)) for m in result.messages]
    parts = layer_parts(result)
    names = list(parts)
    order = [layer.name for layer in result.report.layers]
    assert names == sorted(names, key=order.index), "layers out of policy order"
    if system is not None:
        assert names[0] == "system_prompt"
        assert text(seen[0]) == system
        assert sum(text(m) == system for m in seen) == 1, "system prompt sent twice"
    history = parts["checkpoint_messages"]
    assert check_history(history) == []
    assert not any(isinstance(m, SystemMessage) for m in history)
    humans = [m for m in seen if isinstance(m, HumanMessage)]
    assert text(humans[-1]) == query, "the input is the last HumanMessage"
    assert sum(query in text(m) for m in seen) == 1, "the query is sent exactly once"
    assert result.report.total_tokens <= result.report.available_tokens
    return parts


def build(
    policy: Path | str,
    model: ToolCallingModel,
    tools: list[BaseTool],
    saver: Any,
    *,
    results: list[ComposeResult] | None = None,
    services: dict[str, Any] | None = None,
    before: Sequence[Any] = (),
    after: Sequence[Any] = (),
    system_prompt: str | SystemMessage | None = SYSTEM,
) -> tuple[Any, ContextPolicyMiddleware]:
    """``create_agent`` with the middleware between ``before`` and ``after``."""
    hook: Callable[[str, ComposeResult], None] | None = None
    if results is not None:
        hook = lambda _name, result: results.append(result)  # noqa: E731
    middleware = ContextPolicyMiddleware(policy, services=services, on_compose=hook)
    agent = create_agent(
        model,
        tools,
        system_prompt=system_prompt,
        middleware=[*before, middleware, *after],
        checkpointer=saver,
    )
    return agent, middleware


# --------------------------------------------------------------------------- the basics


def test_parallel_tool_calls_over_two_turns_on_sqlite(tmp_path: Path) -> None:
    log: list[tuple[str, str]] = []
    tools = make_tools(log)
    model = ToolCallingModel(
        responses=[
            calls(("get_rows", {"table": "t"}, "c1"), ("get_owner", {"table": "t"}, "c2")),
            AIMessage("t has 42 rows and belongs to data-eng."),
            calls(("get_rows", {"table": "u"}, "c3")),
            AIMessage("u has 42 rows."),
        ]
    )
    results: list[ComposeResult] = []
    agent, _ = build(
        policy_file(tmp_path), model, tools, open_saver(tmp_path / "cp.sqlite"), results=results
    )

    agent.invoke({"messages": [HumanMessage("How many rows has t, and who owns it?")]}, config())
    state = agent.invoke({"messages": [HumanMessage("And table u?")]}, config())

    assert sorted(log[:2]) == [("get_owner", "t"), ("get_rows", "t")]  # ran in parallel
    assert log[2:] == [("get_rows", "u")]
    assert [m.type for m in state["messages"]] == [
        *("human", "ai", "tool", "tool", "ai"),
        *("human", "ai", "tool", "ai"),
    ]
    assert len(model.seen) == len(results) == 4
    queries = ["How many rows has t, and who owns it?"] * 2 + ["And table u?"] * 2
    for seen, result, query in zip(model.seen, results, queries, strict=True):
        parts = assert_prompt(seen, result, query=query)
        assert [text(m) for m in parts["framework__context"]] == [FRAMEWORK]
    # the second call of turn 1 sees both parallel results after their AIMessage
    history = layer_parts(results[1])["checkpoint_messages"]
    assert [m.type for m in history] == ["human", "ai", "tool", "tool"]
    assert [m.tool_call_id for m in history if isinstance(m, ToolMessage)] == ["c1", "c2"]
    # turn 2 sees turn 1 whole, every message once
    assert [m.type for m in layer_parts(results[3])["checkpoint_messages"]] == [
        *("human", "ai", "tool", "tool", "ai", "human", "ai", "tool"),
    ]
    assert "compression__context" not in state  # nothing was summarized
    assert model.bound and all(set(names) >= {"get_rows", "get_owner"} for names in model.bound)


def test_the_system_prompt_is_sent_once_and_inner_middleware_see_the_composed_request(
    tmp_path: Path,
) -> None:
    seen_requests: list[ModelRequest[Any]] = []

    @wrap_model_call
    def spy(request: ModelRequest[Any], handler: Callable[[Any], Any]) -> Any:
        seen_requests.append(request)
        return handler(request)

    prompt = SystemMessage(
        content=[{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
    )
    model = ToolCallingModel(responses=[AIMessage("hello")])
    results: list[ComposeResult] = []
    agent, _ = build(
        policy_file(tmp_path),
        model,
        [],
        None,
        results=results,
        after=[spy],
        system_prompt=prompt,
    )
    agent.invoke({"messages": [HumanMessage("hi")]})

    (request,) = seen_requests
    assert request.system_message is prompt  # the agent's own message, blocks and all
    assert [text(m) for m in request.messages] == [FRAMEWORK, "hi"]
    assert_prompt(model.seen[0], results[0], query="hi")


def test_an_agent_without_system_prompt_gets_no_empty_system_message(tmp_path: Path) -> None:
    model = ToolCallingModel(responses=[AIMessage("hello")])
    results: list[ComposeResult] = []
    agent, _ = build(policy_file(tmp_path), model, [], None, results=results, system_prompt=None)
    agent.invoke({"messages": [HumanMessage("hi")]})
    assert [(m.type, text(m)) for m in model.seen[0]] == [("system", FRAMEWORK), ("human", "hi")]
    assert_prompt(model.seen[0], results[0], query="hi", system=None)


def test_system_messages_merge_gives_the_model_one_leading_system_message(
    tmp_path: Path,
) -> None:
    model = ToolCallingModel(responses=[AIMessage("hello")])
    results: list[ComposeResult] = []
    body = "model: {system_messages: merge}\n"
    agent, _ = build(policy_file(tmp_path, body), model, [], None, results=results)
    agent.invoke({"messages": [HumanMessage("hi")]})
    sent = model.seen[0]
    assert [(m.type, text(m)) for m in sent] == [
        ("system", f"{SYSTEM}\n\n{FRAMEWORK}"),
        ("human", "hi"),
    ]
    report = results[0].report
    assert report.layer("framework__context").messages == 0
    assert get_tokenizer("cl100k_base").count_messages(sent) == report.total_tokens


# --------------------------------------------------------------------------- tools vs budget


def test_tool_schemas_are_taken_off_the_budget(tmp_path: Path) -> None:
    tools = make_tools([])
    policy_path = policy_file(tmp_path)
    policy = load_policy(policy_path)
    schema_json = json.dumps([convert_to_openai_tool(t) for t in tools], ensure_ascii=False)
    expected = get_tokenizer("cl100k_base").count(schema_json)

    model = ToolCallingModel(responses=[AIMessage("ok")])
    results: list[ComposeResult] = []
    agent, middleware = build(policy_path, model, tools, None, results=results)
    agent.invoke({"messages": [HumanMessage("hi")]})

    assert middleware.tool_tokens(tools) == expected > 100
    assert results[0].report.available_tokens == policy.available_tokens - expected
    assert middleware.engine_for(expected) is middleware.engine_for(expected)  # cached
    assert middleware.engine_for(0) is middleware.engine
    # without tools the whole budget is the layers'
    bare, _ = build(policy_path, ToolCallingModel(responses=[AIMessage("ok")]), [], None,
                    results=results)  # fmt: skip
    bare.invoke({"messages": [HumanMessage("hi")]})
    assert results[1].report.available_tokens == policy.available_tokens


def test_tools_larger_than_the_budget_fail_before_the_model_is_called(tmp_path: Path) -> None:
    path = policy_file(tmp_path, "model: {context_window: 150}\n")
    model = ToolCallingModel(responses=[AIMessage("never")])
    agent, _ = build(path, model, make_tools([]), None)
    with pytest.raises(BudgetExceededError, match="tools"):
        agent.invoke({"messages": [HumanMessage("hi")]})
    assert model.calls == 0


# --------------------------------------------------------------------------- failures


def test_a_resume_after_a_model_failure_mid_turn_runs_no_tool_twice(tmp_path: Path) -> None:
    log: list[tuple[str, str]] = []
    model = ToolCallingModel(
        responses=[
            calls(("get_rows", {"table": "t"}, "c1"), ("get_owner", {"table": "t"}, "c2")),
            AIMessage("t: 42 rows, data-eng."),
        ],
        fail_on={1},  # the call after the tools ran
    )
    results: list[ComposeResult] = []
    agent, _ = build(
        policy_file(tmp_path),
        model,
        make_tools(log),
        open_saver(tmp_path / "cp.sqlite"),
        results=results,
    )
    query = "Rows and owner of t?"
    with pytest.raises(ModelDown):
        agent.invoke({"messages": [HumanMessage(query)]}, config())
    stored = agent.get_state(config()).values
    assert [m.type for m in stored["messages"]] == ["human", "ai", "tool", "tool"]

    state = agent.invoke(None, config())  # resume: the model node runs again

    assert sorted(log) == [("get_owner", "t"), ("get_rows", "t")]  # no tool ran twice
    assert [m.type for m in state["messages"]] == ["human", "ai", "tool", "tool", "ai"]
    assert [text(m) for m in state["messages"] if m.type == "human"] == [query]
    assert model.calls == 3
    assert_prompt(model.seen[2], results[2], query=query)
    assert [(m.type, text(m)) for m in model.seen[1]] == [(m.type, text(m)) for m in model.seen[2]]


@pytest.mark.parametrize("order", ["policy-first", "hitl-first"])
def test_human_in_the_loop_interrupt_then_resume(tmp_path: Path, order: str) -> None:
    log: list[tuple[str, str]] = []
    model = ToolCallingModel(
        responses=[
            calls(("drop_table", {"table": "tmp_t"}, "c1"), ("get_rows", {"table": "t"}, "c2")),
            AIMessage("Dropped tmp_t; t has 42 rows."),
        ]
    )
    hitl = HumanInTheLoopMiddleware(interrupt_on={"drop_table": True})
    results: list[ComposeResult] = []
    agent, _ = build(
        policy_file(tmp_path),
        model,
        make_tools(log),
        open_saver(tmp_path / "cp.sqlite"),
        results=results,
        before=[hitl] if order == "hitl-first" else [],
        after=[hitl] if order == "policy-first" else [],
    )
    query = "Drop tmp_t and count t."
    first = agent.invoke({"messages": [HumanMessage(query)]}, config())
    assert "__interrupt__" in first
    assert log == [] and model.calls == 1

    state = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config())

    assert sorted(log) == [("drop_table", "tmp_t"), ("get_rows", "t")]
    assert [m.type for m in state["messages"]] == ["human", "ai", "tool", "tool", "ai"]
    assert model.calls == 2  # the interrupted step did not call the model again
    parts = assert_prompt(model.seen[1], results[1], query=query)
    assert {m.tool_call_id for m in parts["checkpoint_messages"] if isinstance(m, ToolMessage)} == {
        "c1",
        "c2",
    }


@pytest.mark.parametrize("order", ["retry-outside", "retry-inside"])
def test_retry_middleware_in_either_order(tmp_path: Path, order: str) -> None:
    folded: list[int] = []

    def summarizer(messages: Sequence[BaseMessage], previous: str | None) -> str:
        folded.append(len(messages))  # deterministic: every attempt folds alike
        return (f"{previous} | " if previous else "") + f"{len(messages)} messages: batches ok"

    path = policy_file(
        tmp_path,
        "model: {context_window: 700}\nlayers:\n  checkpoint_messages: {overflow: summarize}\n",
    )
    model = ToolCallingModel(responses=[AIMessage("All batches ran.")], fail_on={0})
    retry = ModelRetryMiddleware(max_retries=2, initial_delay=0, jitter=False)
    results: list[ComposeResult] = []
    agent, _ = build(
        path,
        model,
        [],
        open_saver(tmp_path / "cp.sqlite"),
        results=results,
        services={"summarizer": summarizer},
        before=[retry] if order == "retry-outside" else [],
        after=[retry] if order == "retry-inside" else [],
    )
    earlier: list[BaseMessage] = []
    for i in range(12):
        earlier += [
            HumanMessage(f"status of batch {i}? " + "detail " * 20),
            AIMessage(f"batch {i} done; partitions written and exported. " + "ok " * 20),
        ]
    query = "Did every batch run?"

    state = agent.invoke({"messages": [*earlier, HumanMessage(query)]}, config())

    assert model.calls == 2  # one failure, one answer
    composed = 2 if order == "retry-outside" else 1  # outside: each attempt is composed
    assert len(results) == composed
    per_composition = len(folded) // composed  # the same passes on every attempt
    assert per_composition >= 1 and folded == folded[:per_composition] * composed
    assert [(m.type, text(m)) for m in model.seen[0]] == [(m.type, text(m)) for m in model.seen[1]]
    parts = assert_prompt(model.seen[1], results[-1], query=query)
    summary = state["compression__context"]
    assert [text(m) for m in parts["compression__context"]] == [summary]
    # the state holds what was kept plus the answer, once: no duplicate, no orphan
    kept = [text(m) for m in parts["checkpoint_messages"]]
    assert [text(m) for m in state["messages"]] == [*kept, "All batches ran."]
    assert check_history(state["messages"]) == []


@pytest.mark.parametrize("order", ["policy-first", "limit-first"])
def test_tool_call_limit_middleware_in_either_order(tmp_path: Path, order: str) -> None:
    log: list[tuple[str, str]] = []
    model = ToolCallingModel(
        responses=[
            calls(("get_rows", {"table": "a"}, "c1"), ("get_rows", {"table": "b"}, "c2")),
            AIMessage("Only a could be counted: 42 rows."),
        ]
    )
    limit = ToolCallLimitMiddleware(run_limit=1, exit_behavior="continue")
    results: list[ComposeResult] = []
    agent, _ = build(
        policy_file(tmp_path),
        model,
        make_tools(log),
        open_saver(tmp_path / "cp.sqlite"),
        results=results,
        before=[limit] if order == "limit-first" else [],
        after=[limit] if order == "policy-first" else [],
    )
    state = agent.invoke({"messages": [HumanMessage("Count a and b.")]}, config())
    assert log == [("get_rows", "a")]  # the second call was blocked
    assert [m.type for m in state["messages"]] == ["human", "ai", "tool", "tool", "ai"]
    assert_prompt(model.seen[1], results[1], query="Count a and b.")


# --------------------------------------------------------------------------- long sessions


def test_a_long_session_summarizes_and_the_summary_survives_a_restore(tmp_path: Path) -> None:
    summarizer = ScriptedSummarizer()
    path = policy_file(
        tmp_path,
        "model: {context_window: 1500}\nlayers:\n  checkpoint_messages: {overflow: summarize}\n",
    )
    db = tmp_path / "cp.sqlite"
    log: list[tuple[str, str]] = []
    tools = make_tools(log)
    script: list[BaseMessage] = []
    for day in range(8):
        script += [calls(("get_logs", {"day": day}, f"c{day}")), AIMessage(f"day {day} was fine")]
    model = ToolCallingModel(responses=script)
    results: list[ComposeResult] = []
    agent, _ = build(
        path, model, tools, open_saver(db), results=results, services={"summarizer": summarizer}
    )
    appended = 0
    for day in range(8):
        state = agent.invoke({"messages": [HumanMessage(f"How was day {day}?")]}, config())
        appended += 4

    assert summarizer.calls, "the session never overflowed"
    summary = state["compression__context"]
    assert summary.startswith("summary #1")
    assert len(state["messages"]) < appended  # the folded prefix left the state
    assert check_history(state["messages"]) == []
    assert text(state["messages"][-1]) == "day 7 was fine"
    for index, (seen, result) in enumerate(zip(model.seen, results, strict=True)):
        parts = assert_prompt(seen, result, query=f"How was day {index // 2}?")
        if "compression__context" in parts:
            names = list(parts)
            assert names.index("compression__context") == names.index("checkpoint_messages") - 1
    # each summary folds the previous one in (never the same turns twice)
    folded = [m.id for messages, _ in summarizer.calls for m in messages]
    assert len(folded) == len(set(folded))
    assert all(previous is not None for _, previous in summarizer.calls[1:])
    assert f"summary #{len(summarizer.calls)} " in summary

    # a new agent object on the same checkpointer file: the summary is restored
    fresh_model = ToolCallingModel(responses=[AIMessage("All eight days were fine.")])
    fresh_results: list[ComposeResult] = []
    fresh, _ = build(
        path,
        fresh_model,
        make_tools([]),
        open_saver(db),
        results=fresh_results,
        services={"summarizer": ScriptedSummarizer()},
    )
    restored = fresh.get_state(config()).values
    assert restored["compression__context"] == summary
    fresh.invoke({"messages": [HumanMessage("Summarize the week.")]}, config())
    parts = assert_prompt(fresh_model.seen[0], fresh_results[0], query="Summarize the week.")
    assert summary in text(parts["compression__context"][0])


def test_recall_brings_back_a_trimmed_tool_line_and_the_answer_is_recorded(
    tmp_path: Path,
) -> None:
    path = policy_file(tmp_path, "model: {context_window: 2500}\n", base="long-session.yaml")
    log: list[tuple[str, str]] = []
    tools = make_tools(log)

    @tool
    def get_incident(service: str) -> str:
        """The incident log of a service."""
        lines = [f"02:{i:02d} {service} INFO ok" for i in range(30)]
        return "\n".join([*lines, f"02:41 {service} ERROR pool exhausted on pg-replica-7"])

    script: list[BaseMessage] = [
        calls(("get_incident", {"service": "checkout"}, "c0")),
        AIMessage("Checkout failed at 02:41."),
    ]
    for day in range(8):
        script += [calls(("get_logs", {"day": day}, f"d{day}")), AIMessage(f"day {day} fine")]
    script.append(AIMessage("pg-replica-7 ran out of connections."))
    model = ToolCallingModel(responses=script)
    results: list[ComposeResult] = []
    agent, middleware = build(
        path, model, [*tools, get_incident], open_saver(tmp_path / "cp.sqlite"), results=results
    )
    agent.invoke({"messages": [HumanMessage("Why did checkout fail last night?")]}, config())
    for day in range(8):
        agent.invoke({"messages": [HumanMessage(f"How was day {day}?")]}, config())
    query = "Which replica ran out of connections?"
    state = agent.invoke({"messages": [HumanMessage(query)]}, config())

    parts = assert_prompt(model.seen[-1], results[-1], query=query)
    history_text = " ".join(text(m) for m in parts["checkpoint_messages"])
    assert "pg-replica-7" not in history_text  # trimmed away ...
    assert "pg-replica-7" in text(parts["recall__context"][0])  # ... and recalled
    # the answers were recorded after each call: nothing is left to index
    engine = middleware.engine_for(middleware.tool_tokens([*tools, get_incident]))
    assert engine.record(state["messages"], thread_id="thread-1") == 0


@pytest.mark.parametrize("base", ["base.yaml", "long-session.yaml"])
def test_async_agent_composes_with_acompose(tmp_path: Path, base: str) -> None:
    log: list[tuple[str, str]] = []
    model = ToolCallingModel(
        responses=[
            calls(("get_rows", {"table": "t"}, "c1"), ("get_owner", {"table": "t"}, "c2")),
            AIMessage("42 rows, data-eng."),
        ]
    )
    results: list[ComposeResult] = []
    agent, middleware = build(
        policy_file(tmp_path, base=base), model, make_tools(log), None, results=results
    )

    state = asyncio.run(
        agent.ainvoke({"messages": [HumanMessage("Rows and owner of t?")]}, config("async"))
    )

    assert [m.type for m in state["messages"]] == ["human", "ai", "tool", "tool", "ai"]
    for seen, result in zip(model.seen, results, strict=True):
        assert_prompt(seen, result, query="Rows and owner of t?")
    engine = middleware.engine_for(middleware.tool_tokens(make_tools([])))
    assert engine.record(state["messages"], thread_id="async") == 0  # recorded in a thread


# --------------------------------------------------------------------------- construction


def test_state_schema_declares_every_persisted_layer(tmp_path: Path) -> None:
    assert ContextPolicyMiddleware(POLICIES / "base.yaml").state_schema is ContextPolicyState
    path = policy_file(
        tmp_path,
        "order: [system_prompt, framework__context, experience__context, knowledge__context,\n"
        "        todo__context, profile__context, compression__context, checkpoint_messages,\n"
        "        query]\n"
        "layers:\n"
        "  profile__context:\n"
        "    persist: true\n"
        "    collector: {type: state, field: profile__context}\n",
    )
    schema = context_policy_state_schema(load_policy(path))
    assert {"messages", "compression__context", "profile__context"} <= set(schema.__annotations__)
    assert ContextPolicyMiddleware(path).state_schema is schema


def test_processes_without_the_history_or_with_a_runtime_query_are_refused() -> None:
    with pytest.raises(ValueError, match="query: checkpoint"):
        ContextPolicyMiddleware(POLICIES / "base.yaml", process="mapreduce_worker")
    with pytest.raises(UnknownProcessError):
        ContextPolicyMiddleware(POLICIES / "base.yaml", process="nope")


def test_the_central_switch_reaches_the_engine() -> None:
    middleware = ContextPolicyMiddleware(POLICIES / "base.yaml", enable_share_context=False)
    assert middleware.engine.policy.enable_share_context is False
    shared = ContextPolicyMiddleware(middleware.engine)
    assert shared.engine is middleware.engine  # an engine is used as given
    assert ContextPolicyMiddleware(middleware.engine, name="Policy").name == "Policy"


def test_import_ctxpolicy_does_not_import_langchain() -> None:
    code = "import sys, ctxpolicy; assert 'langchain' not in sys.modules, sorted(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_the_quickstart_example_runs_offline() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "create_agent_quickstart.py")],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert "--- prompt of model call 1" in out
    assert "--- prompt of model call 2" in out
    assert "final answer:" in out


def test_without_langchain_the_error_names_the_extra() -> None:
    code = "import sys\nsys.modules['langchain'] = None\nimport ctxpolicy.integrations.langchain"
    out = subprocess.run(
        [sys.executable, "-c", code], check=False, cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode != 0
    assert "pip install 'ctxpolicy[langchain]'" in out.stderr
