"""ContextPolicyMiddleware in a deepagents ``create_deep_agent`` agent (no mocks).

deepagents assembles its own middleware stack (filesystem, subagents, its
``SummarizationMiddleware``, prompt caching, ...) and keeps ``messages`` in a
``DeltaChannel``; the policy middleware either sits beside that stack or, named
``SummarizationMiddleware``, takes the place of deepagents' summarization.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("CTXPOLICY_REQUIRE_AGENTS"):  # make test: run, never skip
    import deepagents  # noqa: F401
else:
    pytest.importorskip("deepagents", reason="deepagents is not installed")

from deepagents import create_deep_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ctxpolicy.engine import ComposeResult
from ctxpolicy.history import check_history
from ctxpolicy.integrations.langchain import ContextPolicyMiddleware
from ctxpolicy.testing import ScriptedSummarizer
from tests.integrations.graphs import open_saver
from tests.integrations.test_langchain_middleware import (
    POLICIES,
    ToolCallingModel,
    assert_prompt,
    calls,
    config,
    make_tools,
    policy_file,
    text,
)

SYSTEM = "You are the data-platform agent."


def recorder(results: list[ComposeResult]) -> ContextPolicyMiddleware:
    return ContextPolicyMiddleware(
        POLICIES / "base.yaml", on_compose=lambda _name, result: results.append(result)
    )


def test_beside_the_deepagents_stack_every_call_is_composed(tmp_path: Path) -> None:
    log: list[tuple[str, str]] = []
    model = ToolCallingModel(
        responses=[
            calls(("get_rows", {"table": "t"}, "c1"), ("get_owner", {"table": "t"}, "c2")),
            AIMessage("t has 42 rows and belongs to data-eng."),
        ]
    )
    results: list[ComposeResult] = []
    agent = create_deep_agent(
        model=model,
        tools=make_tools(log)[:2],
        system_prompt=SYSTEM,
        middleware=[recorder(results)],
        checkpointer=open_saver(tmp_path / "cp.sqlite"),
    )
    assert "_summarization_event" in agent.channels  # deepagents' own summarization stays

    state = agent.invoke({"messages": [HumanMessage("Rows and owner of t?")]}, config())

    assert sorted(log) == [("get_owner", "t"), ("get_rows", "t")]
    assert [m.type for m in state["messages"]] == ["human", "ai", "tool", "tool", "ai"]
    for seen, result in zip(model.seen, results, strict=True):
        assert_prompt(seen, result, query="Rows and owner of t?", system=None)
        assert text(seen[0]).startswith(SYSTEM)
    # deepagents binds its filesystem and task tools too: all of them count
    assert model.bound and {"get_rows", "ls", "read_file", "task"} <= set(model.bound[0])
    middleware_budget = results[0].report.available_tokens
    assert middleware_budget < recorder([]).engine.policy.available_tokens - 1000


def test_named_summarization_middleware_it_replaces_deepagents_summaries(tmp_path: Path) -> None:
    summarizer = ScriptedSummarizer()
    path = policy_file(
        tmp_path,
        "model: {context_window: 4000}\nlayers:\n  checkpoint_messages: {overflow: summarize}\n",
    )
    db = tmp_path / "cp.sqlite"
    script: list[BaseMessage] = []
    for day in range(8):
        script += [calls(("get_logs", {"day": day}, f"c{day}")), AIMessage(f"day {day} was fine")]
    model = ToolCallingModel(responses=script)
    results: list[ComposeResult] = []

    def build(model: ToolCallingModel, results: list[ComposeResult]) -> Any:
        policy = ContextPolicyMiddleware(
            path,
            services={"summarizer": summarizer},
            name="SummarizationMiddleware",
            on_compose=lambda _name, result: results.append(result),
        )
        return create_deep_agent(
            model=model,
            tools=make_tools([])[3:],
            system_prompt=SYSTEM,
            middleware=[policy],
            checkpointer=open_saver(db),
        )

    agent = build(model, results)
    assert "_summarization_event" not in agent.channels
    for day in range(8):
        state = agent.invoke({"messages": [HumanMessage(f"How was day {day}?")]}, config())

    assert summarizer.calls, "the session never overflowed"
    summary = state["compression__context"]
    assert len(state["messages"]) < 8 * 4  # the folded prefix left the DeltaChannel
    assert check_history(state["messages"]) == []
    for index, (seen, result) in enumerate(zip(model.seen, results, strict=True)):
        assert_prompt(seen, result, query=f"How was day {index // 2}?", system=None)

    fresh_model = ToolCallingModel(responses=[AIMessage("All days were fine.")])
    fresh_results: list[ComposeResult] = []
    fresh = build(fresh_model, fresh_results)
    fresh.invoke({"messages": [HumanMessage("Summarize the week.")]}, config())
    names = [layer.name for layer in fresh_results[0].report.layers if layer.sent]
    assert names[:2] == ["system_prompt", "framework__context"]
    assert "compression__context" in names
    assert any(summary in text(m) for m in fresh_model.seen[0])
