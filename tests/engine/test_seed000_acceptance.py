"""Seed 000's four acceptance criteria ("重构验收标准"), one test each."""

from __future__ import annotations

import inspect

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from ctxpolicy.compose import compose_messages
from ctxpolicy.engine import PolicyEngine
from ctxpolicy.errors import QueryPathError
from ctxpolicy.testing import ListRetriever, ScriptedSummarizer, assert_history_valid
from tests.engine.conftest import design_data, make_policy


def test_1_composer_takes_no_state_only_explicit_arguments() -> None:
    """Composer 不接收 state 入参; 只接收 system_prompt/checkpoint_messages/contexts/query."""
    params = inspect.signature(compose_messages).parameters
    assert list(params) == ["plan", "system_prompt", "checkpoint_messages", "contexts", "query"]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for n, p in params.items() if n != "plan")
    plan = PolicyEngine(make_policy()).plan("react")
    with pytest.raises(TypeError):
        compose_messages(plan, system_prompt="s", state={"messages": []})  # type: ignore[call-arg]
    # the same explicit values always give the same messages: nothing else is read
    history = [HumanMessage("hi")]
    contexts = {"todo__context": "- [ ] one"}
    first = compose_messages(
        plan, system_prompt="s", checkpoint_messages=history, contexts=contexts
    )
    again = compose_messages(
        plan, system_prompt="s", checkpoint_messages=history, contexts=contexts
    )
    assert first == again
    assert [m.content for m in first] == ["s", "- [ ] one", "hi"]


def test_2_collector_keys_all_end_in_context_and_call_sites_concatenate_nothing() -> None:
    """Collector 输出的所有块 key 必须以 __context 结尾; 调用点不再拼任何提示词字符串."""
    engine = PolicyEngine(
        make_policy(), services={"knowledge": ListRetriever(["Hive stores the tables."])}
    )
    state = {
        "messages": [HumanMessage("which tables?")],
        "todo": [{"title": "list tables", "done": False}],
        "compression__context": "earlier: user wants a report",
    }
    collected = engine.collect(process="react", state=state)
    assert collected
    assert all(key.endswith("__context") for key in collected)
    assert set(collected) == {
        "framework__context",
        "knowledge__context",
        "todo__context",
        "compression__context",
    }
    # the call site only passes the blocks; the composer renders them
    result = engine.compose(process="react", system_prompt="You are an analyst.", state=state)
    assert [m.content for m in result.messages][1:5] == [
        collected["framework__context"],
        collected["knowledge__context"],
        collected["todo__context"],
        collected["compression__context"],
    ]
    with pytest.raises(ValueError, match="'todo' must end in '__context'"):
        engine.compose(system_prompt="s", state=state, contexts={"todo": "x"})


def test_3_query_has_exactly_one_path() -> None:
    """query 注入只有一条路径 (入口写入 checkpoint_messages 或 runtime human_message), 绝不双轨."""
    engine = PolicyEngine(make_policy())
    state = {"messages": [HumanMessage("count rows of t1")]}
    # checkpoint path: the input is the last HumanMessage of the history, sent once
    result = engine.compose(process="react", system_prompt="s", state=state)
    humans = [m for m in result.messages if m.type == "human"]
    assert [m.content for m in humans] == ["count rows of t1"]
    with pytest.raises(QueryPathError, match="do not also pass query"):
        engine.compose(process="react", system_prompt="s", state=state, query="count rows of t1")
    # runtime path: the engine appends HumanMessage(query); the history is never used
    worker = engine.compose(
        process="mapreduce_worker", system_prompt="s", state=state, query="count rows of t2"
    )
    assert [m.content for m in worker.messages if m.type == "human"] == ["count rows of t2"]
    assert worker.messages[-1] == HumanMessage("count rows of t2")
    with pytest.raises(QueryPathError, match="pass a non-empty query"):
        engine.compose(process="mapreduce_worker", system_prompt="s", state=state)


def test_4_summary_goes_to_compression_context_and_survives_a_restore() -> None:
    """压缩结果必须进入 compression__context (可持久化), 恢复后不丢摘要且不重复写入 HumanMessage.

    The summary goes to compression__context, survives a restore, no HumanMessage twice.
    """
    data = design_data()
    data["model"] = {"context_window": 1200, "tokenizer": "cl100k_base"}
    data["layers"]["checkpoint_messages"] = {"overflow": "summarize"}
    summarizer = ScriptedSummarizer()
    engine = PolicyEngine(make_policy(data), services={"summarizer": summarizer})
    history = []
    for turn in range(30):
        history += [
            HumanMessage(f"question {turn}: " + "detail " * 20),
            AIMessage("", tool_calls=[{"name": "sql", "args": {"q": turn}, "id": f"c{turn}"}]),
            ToolMessage("rows " * 10, tool_call_id=f"c{turn}"),
            AIMessage(f"answer {turn}"),
        ]
    history.append(HumanMessage("final question"))
    state = {"messages": history}

    first = engine.compose(process="react", system_prompt="s", state=state)
    summary = first.persist["compression__context"]
    assert summarizer.calls and summarizer.calls[0][1] is None
    assert first.report.summarized
    assert summary in [m.content for m in first.messages]  # used in this same call
    assert first.compacted_history is not None
    assert first.compacted_history[-1] == HumanMessage("final question")
    assert_history_valid(first.compacted_history)

    # the checkpoint holds what StateBuilder writes: memory.replace + contexts.persist
    restored = {"messages": [*first.compacted_history], **first.persist}
    restored["messages"] += [AIMessage("final answer"), HumanMessage("follow-up")]
    second = engine.compose(process="react", system_prompt="s", state=restored)
    contents = [m.content for m in second.messages]
    assert contents[contents.index(summary)] == summary  # the summary survived the restore
    humans = [m.content for m in second.messages if m.type == "human"]
    assert len(humans) == len(set(humans))  # no HumanMessage written twice
    assert humans[-1] == "follow-up"
    assert "compression__context" not in second.persist or second.report.summarized
