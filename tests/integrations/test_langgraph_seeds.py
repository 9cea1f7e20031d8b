"""Issue 13: seeds 002/003/004 run from the policy file, inside a LangGraph graph."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.store.memory import InMemoryStore
from pydantic import Field

from ctxpolicy.blocks.tools import policy_file_tools
from ctxpolicy.errors import PathEscapeError
from ctxpolicy.integrations.langgraph import agent_node, init_context_engine, policy_tools
from ctxpolicy.integrations.langgraph import state_schema as schema_of
from ctxpolicy.loading import load_policy, validate_paths
from ctxpolicy.memory import MemorySessions, TieredMemory
from tests.integrations.fakes import RecordingChatModel
from tests.integrations.graphs import open_saver

ROOT = Path(__file__).resolve().parents[2]


class ToolModel(RecordingChatModel):
    bound: list[str] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        self.bound = [t.name for t in tools]
        return self


POLICY = """version: 1
name: tools-demo
model: {{context_window: 16000}}
budget: {{ratios: {{memory__context: 0.3}}}}
order: [system_prompt, memory__context, checkpoint_messages, query]
tools:
  root: {root}
  allow: [read_file, search, write_file]
  write_file: {write}
layers:
  memory__context:
    collector: {{type: memory, service: memory, strategy: balanced}}
processes:
  react: {{}}
  reader:
    tools: {{root: docs, allow: [read_block]}}
"""


def _policy(tmp_path: Path, *, root: str = "docs", write: str = "false") -> Path:
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    (docs / "guide.md").write_text("# Guide\n\nThe port is 5432.\n", encoding="utf-8")
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY.format(root=root, write=write), encoding="utf-8")
    return path


def _graph(engine: Any, model: ToolModel, saver: Any, process: str = "react") -> Any:
    graph = StateGraph(schema_of(engine))
    graph.add_node(
        "agent", agent_node(engine, name="agent", system_prompt="S", model=model, process=process)
    )
    graph.add_node("tools", ToolNode(policy_tools(engine, process)))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=saver)


# ----------------------------------------------------------------- 1. file tools


def test_policy_file_tools_are_bound_and_run_in_a_graph(tmp_path: Path) -> None:
    memory = TieredMemory()
    engine = init_context_engine(_policy(tmp_path), services={"memory": memory})
    read = {"name": "read_file", "args": {"path": "guide.md"}, "id": "c1"}
    escape = {"name": "read_file", "args": {"path": "../policy.yaml"}, "id": "c2"}
    model = ToolModel(
        responses=[
            AIMessage("", tool_calls=[read]),
            AIMessage("", tool_calls=[escape]),
            AIMessage("port 5432"),
        ]
    )
    app = _graph(engine, model, open_saver(tmp_path / "c.sqlite"))
    state = app.invoke(
        {"messages": [HumanMessage("port?", id="h1")]}, {"configurable": {"thread_id": "t"}}
    )
    assert model.bound == ["read_file", "search"]  # write_file listed but write_file: false
    tools = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert "The port is 5432." in tools[0].content
    assert "refused path" in tools[1].content and tools[1].status == "error"
    # seed 004: each tool step of the turn is a task record of the policy's memory
    tasks = memory.tasks()
    assert [(t.task_id, t.action, t.success, t.parent_task_id) for t in tasks] == [
        ("c1", "read_file", True, "h1"),
        ("c2", "read_file", False, "h1"),
    ]
    assert tasks[0].parameters == {"path": "guide.md"} and "5432" in tasks[0].result


def test_write_file_needs_both_switches_and_a_process_may_replace_the_tools(
    tmp_path: Path,
) -> None:
    policy = load_policy(_policy(tmp_path, write="true"))
    assert [t.name for t in policy_file_tools(policy, "react")] == [
        "read_file",
        "search",
        "write_file",
    ]
    assert [t.name for t in policy_file_tools(policy, "reader")] == ["read_block"]
    engine = init_context_engine(policy, services={"memory": TieredMemory()})
    model = ToolModel(responses=[AIMessage("x")])
    agent_node(engine, name="a", system_prompt="S", model=model, tools=None)
    assert model.bound == []  # tools=None: none bound
    agent_node(engine, name="a", system_prompt="S", model=model, process="reader")
    assert model.bound == ["read_block"]


def test_a_tools_root_that_escapes_is_a_validation_error_with_its_location(
    tmp_path: Path,
) -> None:
    path = _policy(tmp_path, root="../..")
    issues = [i for i in validate_paths([path]) if i.severity == "error"]
    assert len(issues) == 1 and issues[0].rule == "path.outside"
    assert (issues[0].line, issues[0].column) == (7, 3)
    assert "policy.yaml:7:3: $.tools.root" in issues[0].format_text()


def test_policy_file_tools_refuse_an_escaping_root_at_build_time(tmp_path: Path) -> None:
    from ctxpolicy.policy import Policy

    policy = load_policy(_policy(tmp_path))
    data = policy.to_data()
    data["tools"] = {"root": "../.."}
    bad = Policy.model_validate(data)
    bad._source = policy.source
    with pytest.raises(PathEscapeError):
        policy_file_tools(bad, "react")


# ----------------------------------------------------------------- 2. tasks


def test_task_summaries_keep_action_parameters_and_result() -> None:
    memory = TieredMemory(l1_size=1)
    call = {"name": "query_db", "args": {"sql": "SELECT 1", "db": "dw"}, "id": "q1"}
    memory.record(
        [
            HumanMessage("count orders", id="h"),
            AIMessage("", tool_calls=[call], id="a"),
            ToolMessage("42 rows", tool_call_id="q1", name="query_db", id="t"),
            AIMessage("42", id="f"),
        ]
    )
    (summary,) = [s for s in memory.get_l3() if "task_summary" in s.metadata]
    fields = summary.metadata["task_summary"]
    assert fields["action"] == "query_db" and fields["param_summary"] == "sql=SELECT 1, db=dw"
    assert fields["result_summary"] == "42 rows" and fields["parent_task_id"] == "h"
    assert summary.content == "query_db(sql=SELECT 1, db=dw) -> ok: 42 rows"
    assert summary.importance == pytest.approx(0.7, abs=0.2)  # the tool rule (+content)


def test_a_tool_result_recorded_after_its_call_still_becomes_a_task() -> None:
    memory = TieredMemory()
    call = {"name": "search", "args": {"pattern": "x"}, "id": "s1"}
    memory.record([HumanMessage("find x", id="h"), AIMessage("", tool_calls=[call], id="a")])
    memory.record([ToolMessage("boom", tool_call_id="s1", name="search", status="error", id="t")])
    (task,) = memory.tasks()
    assert task.success is False and task.parent_task_id == "h"
    assert memory.original("t").importance >= 0.8  # a failure is remembered (seed rule)


def test_context_strategy_overrides_the_memory_layer_per_call(tmp_path: Path) -> None:
    memory = TieredMemory()
    memory.add("the deploy region is eu-west-3", kind="user")
    engine = init_context_engine(_policy(tmp_path), services={"memory": memory})
    normal = engine.compose(
        process="react", system_prompt="S", state={"messages": [HumanMessage("region?")]}
    )
    minimal = engine.compose(
        process="react",
        system_prompt="S",
        state={"messages": [HumanMessage("region?")], "context_strategy": "minimal"},
    )
    assert any("eu-west-3" in str(m.content) for m in normal.messages)
    assert not any("eu-west-3" in str(m.content) for m in minimal.messages)
    with pytest.raises(Exception, match="context_strategy must be one of"):
        engine.compose(
            process="react",
            system_prompt="S",
            state={"messages": [HumanMessage("region?")], "context_strategy": "all"},
        )


# ----------------------------------------------------------------- 3. sessions


def test_session_scopes_lifecycle_and_durable_l4_across_instances() -> None:
    store = InMemoryStore()
    one = MemorySessions(agent="analyst", store=store)
    one.session("a").add("The deploy region is eu-west-3.", kind="user")
    one.session("a").add("hello", kind="agent", importance=0.2)
    one.session("b")
    one.pause("b")
    assert one.distribute("freeze at 18:00", importance=0.9) and one.status("b") == "paused"
    assert "b" not in one.distribute("second", session_ids=["b"])
    with pytest.raises(ValueError, match="paused"):
        one.record([HumanMessage("x", id="x")], session_id="b")
    written = one.end("a")
    assert one.status("a") == "ended"
    assert {s.content for s in written} == {"The deploy region is eu-west-3.", "freeze at 18:00"}
    with pytest.raises(ValueError, match="ended"):
        one.resume("a")
    # a "new process": another instance on the same store restores L3, L4 and the status
    two = MemorySessions(agent="analyst", store=store)
    assert two.status("a") == "ended" and two.status("b") == "paused"
    assert {s.content for s in two.agent_l3()} >= {"The deploy region is eu-west-3."}
    found = two.global_memory()
    assert found is not None and "eu-west-3" in found.search("deploy region", 1)[0].content
    other_agent = MemorySessions(agent="writer", store=store)
    assert other_agent.agent_l3() == []  # L3 is per agent; L4 is global
    assert other_agent.global_memory().search("deploy region", 1)  # type: ignore[union-attr]


def test_timer_persists_l3_to_l4() -> None:
    sessions = MemorySessions(agent="a", store=InMemoryStore(), persist_interval=60)
    sessions.session("s").add("The API key rotates every 30 days.", kind="user")
    assert sessions.maybe_persist(now=0) == []
    assert [i.content for i in sessions.maybe_persist(now=10**9)] == [
        "The API key rotates every 30 days."
    ]
    with pytest.raises(ValueError, match="persist_interval"):
        MemorySessions(persist_interval=0)


# ----------------------------------------------------------------- 4. examples


def _run(name: str) -> str:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout


def test_example_seed004_tasks() -> None:
    out = _run("seed004_tasks.py")
    assert "bound tools: ['read_file', 'list_files', 'search', 'read_block']" in out
    assert "t2 read_block{'path': 'handbook.md', 'block_id': 'Goals'} ok parent=u1" in out
    assert "t4 read_file{'path': '../seed004-tasks.yaml'} failed parent=u1" in out
    assert "tasks after a restart: ['t1', 't2', 't3', 't4']" in out  # a durable service
    assert "memory layer in the minimal call: False" in out
    assert "search | pattern=dw.orders | search(pattern=dw.orders) -> ok:" in out


def test_example_seed002_sessions() -> None:
    out = _run("seed002_sessions.py")
    assert "A ended: ended | L4 items written: 2" in out
    assert "distributed to: ['session-c']" in out
    assert "B sees A's fact (agent L3): True" in out
    assert "B sees A's L1 (its reply 'noted (0)'): False" in out
    assert "B (paused then) got the distributed item: False" in out
    assert "C got the distributed item (L2): True" in out
    assert "global L4 search: ['Remember: the deploy region is eu-west-3.']" in out
    assert "C L1 after a restart: True" in out
