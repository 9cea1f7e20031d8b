"""Issue 13: the seed 003 example (`examples/seed003_docs.py`) on a real LangGraph graph."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxpolicy.loading import validate_paths

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "seed003_docs.py"
POLICY = ROOT / "policies" / "seed003-docs.yaml"

QUERY = "How do I join orders and customers? [handbook.md#SQL style]"
PIECE = "[handbook.md#Datapillar handbook/SQL style (lines 10-17)]"
RULE = "Always qualify columns when a query joins two or more tables."
WAREHOUSE_BODY = '"engine": "postgres"'
PLACEHOLDER = "[read warehouse.json — dismissed: schemas noted]"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("seed003_docs_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # pydantic resolves the fake model's annotations here
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def run() -> object:
    return _load().run()


def _text(prompt: list[BaseMessage]) -> str:
    return "\n".join(str(m.content) for m in prompt)


def _tool(prompt: list[BaseMessage], call_id: str) -> ToolMessage:
    (message,) = [m for m in prompt if getattr(m, "tool_call_id", None) == call_id]
    assert isinstance(message, ToolMessage)
    return message


def test_the_policy_validates_without_warnings() -> None:
    assert list(validate_paths([POLICY])) == []


def test_the_policy_tools_and_dismiss_memory_are_bound(run: object) -> None:
    assert run.bound == [  # type: ignore[attr-defined]
        "read_file",
        "list_files",
        "search",
        "read_block",
        "dismiss_memory",
    ]


def test_the_inline_reference_is_resolved_once_after_the_input(run: object) -> None:
    calls = run.calls  # type: ignore[attr-defined]
    turn_one = [c for c in calls if c[0].startswith("turn 1")]
    assert len(turn_one) == 3  # read_block, read_file, answer
    for _, prompt, result in turn_one:
        # the files layer: a labelled block of policies/docs/handbook.md, in the one
        # SystemMessage agent_node sends (model.system_messages: auto)
        assert isinstance(prompt[0], SystemMessage)
        assert "[handbook.md#Datapillar handbook/Goals (lines 6-8)]" in str(prompt[0].content)
        # the input keeps its text and the referenced block follows it, once
        query = prompt[1]
        assert isinstance(query, HumanMessage)
        assert str(query.content).startswith(QUERY + "\n\n" + PIECE + "\n")
        assert _text(prompt).count(PIECE) == 1 and _text(prompt).count(RULE) == 1
        (ref,) = result.report.layer("query").references
        assert (ref.ref, ref.file, ref.lines, ref.error) == (
            "[handbook.md#SQL style]",
            "handbook.md",
            (10, 17),
            None,
        )
    # the stored HumanMessage is never changed
    stored = [m for m in run.state["messages"] if isinstance(m, HumanMessage)]  # type: ignore[attr-defined]
    assert stored[0].content == QUERY
    # a later turn's input is the new HumanMessage: the old reference is not expanded again
    later = [c for c in calls if not c[0].startswith("turn 1")]
    assert all(PIECE not in _text(prompt) for _, prompt, _ in later)


def test_the_policy_tools_answer_inside_the_graph(run: object) -> None:
    _, prompt, _ = run.calls[2]  # type: ignore[attr-defined]
    assert "所有时间字段存储为 UTC" in str(_tool(prompt, "r1").content)  # read_block
    assert WAREHOUSE_BODY in str(_tool(prompt, "r2").content)  # read_file


def test_a_dismissal_is_a_placeholder_next_call_and_after_a_restore(run: object) -> None:
    labels = [c[0] for c in run.calls]  # type: ignore[attr-defined]
    assert labels == [
        "turn 1, call 1",
        "turn 1, call 2",
        "turn 1, call 3",
        "turn 2, call 1",
        "turn 2, call 2",
        "turn 3 (restored), call 1",
    ]
    by_label = {label: (prompt, result) for label, prompt, result in run.calls}  # type: ignore[attr-defined]
    before, _ = by_label["turn 2, call 1"]
    assert str(_tool(before, "r2").content).startswith("[warehouse.json:1-13 of 13 lines]")
    for label in ("turn 2, call 2", "turn 3 (restored), call 1"):
        prompt, result = by_label[label]
        shown = _tool(prompt, "r2")
        assert shown.content == PLACEHOLDER
        assert WAREHOUSE_BODY not in _text(prompt)
        notes = result.report.layer("checkpoint_messages").notes
        assert any(n.startswith("curated: 1 dismissed message(s)") and "r2" in n for n in notes)
    # the checkpointed state keeps the full result
    assert WAREHOUSE_BODY in str(_tool(run.state["messages"], "r2").content)  # type: ignore[attr-defined]


def test_the_example_runs_and_prints_what_the_model_saw() -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLE)], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    assert (
        "bound tools: ['read_file', 'list_files', 'search', 'read_block', 'dismiss_memory']" in out
    )
    assert "[query reference] [handbook.md#SQL style] -> handbook.md lines (10, 17)" in out
    assert f"    tool: {PLACEHOLDER}" in out
    assert "--- turn 3 (restored), call 1" in out
    assert out.count("[history] curated: 1 dismissed message(s) shown as placeholders (r2)") == 2
    assert "state keeps the dismissed result: True" in out
    assert f"stored input unchanged: {QUERY!r}" in out
