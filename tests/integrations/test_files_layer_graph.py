"""A ``files`` layer inside a running graph (issue 32, seed 003).

Real LangGraph graphs on the SQLite checkpointer, policies written as files:

* finding 11: a ``files`` root that names the session (``data/{thread_id}``,
  ``data/{session_id}``) reads each thread's own folder; unknown placeholders and roots
  that leave the policy's folder are policy errors with file:line:col;
* finding 12: a renamed parent heading no longer fails every call of the layer — the
  block is found by its remaining path, and the report warns (never silent); a block
  that is gone is a reported skip of that piece under ``on_error: skip`` and a layer
  error naming it under ``on_error: fail``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.graph import END, START, StateGraph

from ctxpolicy.engine import ComposeResult
from ctxpolicy.errors import CollectorError
from ctxpolicy.integrations.langgraph import agent_node, init_context_engine, state_schema
from ctxpolicy.state import user_turn
from tests.integrations.fakes import RecordingChatModel, replies
from tests.integrations.graphs import open_saver

HANDBOOK = """\
# 数据手册

## 目标
每天 06:00 前产出订单日报。

## SQL 规范
多表关联时列名必须带表别名。

# 附录
无。
"""

POLICY = """\
version: 1
name: files-in-a-graph
model: {{context_window: 16000, tokenizer: cl100k_base}}
order: [system_prompt, knowledge__context, checkpoint_messages, query]
layers:
  knowledge__context:
    collector:
      type: files
      root: {root}
      on_error: {on_error}
      select: [{select}]
processes:
  react: {{checkpoint_messages: true}}
"""


def write_policy(
    tmp_path: Path, *, select: str, root: str = "docs", on_error: str = "fail"
) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY.format(root=root, on_error=on_error, select=select), encoding="utf-8")
    return path


def build(policy: Path, db: Path, model: RecordingChatModel, reports: list[ComposeResult]) -> Any:
    engine = init_context_engine(policy)
    graph = StateGraph(state_schema(engine))
    graph.add_node(
        "agent",
        agent_node(
            engine,
            name="agent",
            system_prompt="S",
            model=model,
            on_compose=lambda name, result: reports.append(result),
        ),
    )
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    return graph.compile(checkpointer=open_saver(db))


def layer_text(model: RecordingChatModel, call: int) -> str:
    """The text of the call's system message(s): the files layer is merged into one
    SystemMessage with the system prompt by default."""
    return "\n\n".join(str(m.content) for m in model.seen[call] if m.type == "system")


# --------------------------------------------------------------------------- finding 12


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "handbook.md").write_text(HANDBOOK, encoding="utf-8")
    (folder / "notes.md").write_text("# Notes\nkeep me\n", encoding="utf-8")
    return folder


def test_a_renamed_parent_heading_resolves_by_the_remaining_path(
    tmp_path: Path, docs: Path
) -> None:
    policy = write_policy(tmp_path, select='"handbook.md#数据手册/目标"')
    config = {"configurable": {"thread_id": "t-rename"}}
    model = RecordingChatModel(responses=replies("a1", "a2", "a3"))
    reports: list[ComposeResult] = []
    graph = build(policy, tmp_path / "c.sqlite", model, reports)
    graph.invoke(user_turn("日报几点出？", turn_id="1"), config)
    assert "每天 06:00 前产出订单日报" in layer_text(model, 0)
    assert reports[0].report.warnings == ()

    # someone renames the parent heading in the document; the policy still says 数据手册
    (docs / "handbook.md").write_text(
        HANDBOOK.replace("# 数据手册", "# 数据平台手册"), encoding="utf-8"
    )
    state = graph.invoke(user_turn("再说一次？", turn_id="2"), config)
    assert [m.content for m in state["messages"]][-1] == "a2"  # no BlockNotFoundError
    assert "[handbook.md#数据平台手册/目标 (lines 3-4)]" in layer_text(model, 1)
    assert "每天 06:00 前产出订单日报" in layer_text(model, 1)
    (warning,) = reports[1].report.warnings
    assert "'数据手册/目标'" in warning and "'数据平台手册/目标'" in warning
    assert warning.startswith("knowledge__context:")

    # a restarted process sees the same
    again: list[ComposeResult] = []
    build(policy, tmp_path / "c.sqlite", model, again).invoke(
        user_turn("第三次", turn_id="3"), config
    )
    assert "每天 06:00 前产出订单日报" in layer_text(model, 2)
    assert len(again[0].report.warnings) == 1


def test_a_block_that_is_gone_is_a_reported_skip_of_that_piece(tmp_path: Path, docs: Path) -> None:
    policy = write_policy(
        tmp_path, select='"handbook.md#数据手册/已删除", "notes.md#Notes"', on_error="skip"
    )
    model = RecordingChatModel(responses=replies("a1"))
    reports: list[ComposeResult] = []
    build(policy, tmp_path / "c.sqlite", model, reports).invoke(
        user_turn("q", turn_id="1"), {"configurable": {"thread_id": "t-gone"}}
    )
    assert "keep me" in layer_text(model, 0)  # the other piece is kept
    (warning,) = reports[0].report.warnings
    assert "'[handbook.md#数据手册/已删除]' skipped" in warning
    assert "数据手册/目标" in warning  # the error lists the blocks the file has
    assert reports[0].report.skipped == ()  # the layer itself was collected


def test_a_block_that_is_gone_fails_the_layer_under_on_error_fail(
    tmp_path: Path, docs: Path
) -> None:
    policy = write_policy(tmp_path, select='"handbook.md#数据手册/已删除", "notes.md#Notes"')
    model = RecordingChatModel(responses=replies("a1"))
    graph = build(policy, tmp_path / "c.sqlite", model, [])
    with pytest.raises(CollectorError, match="已删除") as caught:
        graph.invoke(user_turn("q", turn_id="1"), {"configurable": {"thread_id": "t-fail"}})
    assert caught.value.layer == "knowledge__context"
    assert model.calls == 0


# --------------------------------------------------------------------------- finding 11


def session_folders(tmp_path: Path) -> None:
    for session, goal in (("会话-甲", "甲的目标：学分布式系统"), ("t-b", "B's goal: learn SQL")):
        folder = tmp_path / "data" / session
        folder.mkdir(parents=True)
        (folder / "profile.md").write_text(f"# 学习目标\n{goal}\n", encoding="utf-8")


def test_a_root_that_names_the_thread_reads_each_sessions_folder(tmp_path: Path) -> None:
    session_folders(tmp_path)
    policy = write_policy(tmp_path, root="data/{thread_id}", select='"profile.md#学习目标"')
    model = RecordingChatModel(responses=replies("a1", "a2", "a3", "a4"))
    reports: list[ComposeResult] = []
    graph = build(policy, tmp_path / "c.sqlite", model, reports)
    graph.invoke(user_turn("我的目标？", turn_id="1"), {"configurable": {"thread_id": "会话-甲"}})
    graph.invoke(user_turn("my goal?", turn_id="1"), {"configurable": {"thread_id": "t-b"}})
    assert "甲的目标：学分布式系统" in layer_text(model, 0)
    assert "B's goal" not in layer_text(model, 0)
    assert "B's goal: learn SQL" in layer_text(model, 1)
    assert "甲的目标" not in layer_text(model, 1)

    # a restarted process on the same checkpoint file still reads the thread's folder
    build(policy, tmp_path / "c.sqlite", model, reports).invoke(
        user_turn("again", turn_id="2"), {"configurable": {"thread_id": "会话-甲"}}
    )
    assert "甲的目标：学分布式系统" in layer_text(model, 2)

    # a thread without its folder yet: an empty layer, said in the report; the turn runs
    state = graph.invoke(user_turn("hi", turn_id="1"), {"configurable": {"thread_id": "new"}})
    assert state["messages"][-1].content == "a4"
    assert [m.type for m in model.seen[3]] == ["system", "human"]
    assert reports[-1].report.warnings == (
        "knowledge__context: no folder 'data/new' for this session yet; the layer is empty",
    )


def test_a_root_that_names_the_session_id_reads_the_state(tmp_path: Path) -> None:
    session_folders(tmp_path)
    policy = write_policy(tmp_path, root="data/{session_id}", select='"profile.md"')
    model = RecordingChatModel(responses=replies("a1"))
    graph = build(policy, tmp_path / "c.sqlite", model, [])
    graph.invoke(
        {**user_turn("q", turn_id="1"), "namespace": "edu", "session_id": "t-b"},
        {"configurable": {"thread_id": "thread-9"}},
    )
    assert "B's goal: learn SQL" in layer_text(model, 0)


@pytest.mark.parametrize("thread", ["..", ".", "a/../../etc", "x\\y"])
def test_a_thread_id_never_leads_out_of_the_policys_folder(tmp_path: Path, thread: str) -> None:
    session_folders(tmp_path)
    (tmp_path.parent / "secret.md").write_text("SECRET", encoding="utf-8")
    policy = write_policy(tmp_path, root="data/{thread_id}", select='"profile.md"')
    model = RecordingChatModel(responses=replies("a1"))
    graph = build(policy, tmp_path / "c.sqlite", model, [])
    with pytest.raises(CollectorError, match="plain folder name"):
        graph.invoke(user_turn("q", turn_id="1"), {"configurable": {"thread_id": thread}})
    assert model.calls == 0


@pytest.mark.parametrize(
    ("root", "rule", "message"),
    [
        ("data/{user_id}", "files.root-placeholder", "unknown placeholder {user_id}"),
        ("data/{thread_id", "files.root-placeholder", "brace"),
        ("../{thread_id}", "path.outside", "'../{thread_id}' leaves the policy's folder"),
        ("data/{thread_id}/../../..", "path.outside", "leaves the policy's folder"),
    ],
)
def test_a_bad_root_placeholder_is_a_policy_error_at_its_line(
    tmp_path: Path, root: str, rule: str, message: str
) -> None:
    from ctxpolicy.errors import PolicyValidationError

    session_folders(tmp_path)
    policy = write_policy(tmp_path, root=root, select='"profile.md"')
    with pytest.raises(PolicyValidationError) as caught:
        init_context_engine(policy)
    (issue,) = caught.value.issues
    assert (issue.rule, issue.path) == (rule, "$.layers.knowledge__context.collector.root")
    assert (Path(issue.file).name, issue.line, issue.column) == ("policy.yaml", 9, 7)
    assert message in issue.message
