"""Issue 14, item 5: what a new user ran into (one system message, a current turn larger
than the history cap, the prompt-cache warning)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from ctxpolicy.engine import PolicyEngine
from ctxpolicy.errors import BudgetExceededError
from ctxpolicy.history import check_history
from ctxpolicy.testing import assert_composed_valid
from ctxpolicy.tokens import get_tokenizer
from tests.engine.conftest import design_data, make_policy

# ----------------------------------------------------------- one system message


def _engine(system_messages: str | None) -> PolicyEngine:
    data = design_data()
    if system_messages is not None:
        data["model"]["system_messages"] = system_messages
    return PolicyEngine(make_policy(data))


def _compose(engine: PolicyEngine) -> Any:
    return engine.compose(
        system_prompt="You are the SQL agent.",
        state={
            "messages": [HumanMessage("count the rows")],
            "todo": [{"title": "plan", "done": False}],
        },
        contexts={"knowledge__context": "Table t has 3 rows.\n"},
    )


def test_separate_is_the_default_one_system_message_per_layer() -> None:
    result = _compose(_engine(None))
    systems = [m for m in result.messages if isinstance(m, SystemMessage)]
    assert len(systems) == 4  # system_prompt, framework, knowledge, todo


def test_merge_sends_one_system_message_and_keeps_the_layers_in_the_report() -> None:
    engine = _engine("merge")
    result = _compose(engine)
    first, *rest = result.messages
    assert isinstance(first, SystemMessage)
    assert not any(isinstance(m, SystemMessage) for m in rest)
    assert first.content == (
        "You are the SQL agent.\n\nYou run inside Datapillar. Answer in JSON.\n\n"
        "Table t has 3 rows.\n\n\n- [ ] plan\n"
    )
    report = result.report
    tok = get_tokenizer("cl100k_base")
    merged = ["system_prompt", "framework__context", "knowledge__context", "todo__context"]
    assert [report.layer(n).messages for n in merged] == [1, 0, 0, 0]
    assert all(report.layer(n).tokens > 0 for n in merged)
    # the merged message's count is exactly what the layers account for
    assert sum(report.layer(n).tokens for n in merged) == tok.count_message(first)
    assert tok.count_messages(result.messages) == report.total_tokens
    assert report.layer("knowledge__context").source == "contexts"
    assert any(
        "merged into the first system message" in n for n in report.layer("todo__context").notes
    )
    assert_composed_valid(result, engine.plan())


def test_merge_stops_at_the_first_layer_that_is_not_a_system_message() -> None:
    data = design_data()
    data["model"]["system_messages"] = "merge"
    data["layers"]["knowledge__context"]["role"] = "human"
    result = _compose(PolicyEngine(make_policy(data)))
    kinds = [type(m).__name__ for m in result.messages]
    assert kinds == ["SystemMessage", "HumanMessage", "SystemMessage", "HumanMessage"]
    assert "You run inside Datapillar" in str(result.messages[0].content)


# ----------------------------------------------------------- clear_tool_results


def _big_turn() -> list[Any]:
    ids = ["c1", "c2", "c3"]
    return [
        HumanMessage("older question"),
        AIMessage("older answer"),
        HumanMessage("check the three tables"),
        AIMessage("", tool_calls=[{"name": "sql", "args": {"t": i}, "id": i} for i in ids]),
        *[ToolMessage("row value " * 120, tool_call_id=i) for i in ids],
    ]


def _small_window(clear: bool | None) -> PolicyEngine:
    data = design_data()
    data["model"]["context_window"] = 700
    if clear is not None:
        data["layers"]["checkpoint_messages"]["clear_tool_results"] = clear
    return PolicyEngine(make_policy(data))


def test_a_current_turn_larger_than_the_cap_fails_without_clearing() -> None:
    with pytest.raises(BudgetExceededError):
        _small_window(None).compose(system_prompt="Agent.", state={"messages": _big_turn()})


def test_clear_tool_results_clears_the_oldest_tool_results_first() -> None:
    history = _big_turn()
    engine = _small_window(True)
    result = engine.compose(system_prompt="Agent.", state={"messages": history})
    assert_composed_valid(result, engine.plan())
    sent = [m for m in result.messages if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in sent] == ["c1", "c2", "c3"]  # every pair kept
    cleared = [m for m in sent if str(m.content).startswith("[tool result cleared: ")]
    assert cleared and cleared == sent[: len(cleared)]  # oldest first
    assert "row value" in str(sent[-1].content)  # the newest kept when it fits
    assert str(cleared[0].content) == (
        f"[tool result cleared: {get_tokenizer('cl100k_base').count_message(history[4])} tokens]"
    )
    assert any(m is history[2] for m in result.messages)  # the input, untouched
    assert "row value" in str(history[4].content)  # the state is never changed
    cut = next(
        c for c in result.report.layer("checkpoint_messages").cuts if c.rule == "clear_tool_results"
    )
    assert cut.action == "cleared_tool_results" and cut.messages == len(cleared) and cut.tokens
    part = [m for m in result.messages if m.type in ("human", "ai", "tool")]
    assert check_history(part) == []


# ----------------------------------------------------------- the prompt-cache rule

CACHE_POLICY = """\
version: 1
name: cachy
order:
  - system_prompt
  - knowledge__context
  - todo__context
  - checkpoint_messages
  - query
layers:
  knowledge__context:
    collector: {type: retriever, service: knowledge, on_error: skip}
  todo__context:
    collector: {type: state, field: todo}
"""


def test_a_cache_breaker_is_reported_at_its_line_by_validate_and_compose(tmp_path: Path) -> None:
    from ctxpolicy.loading.loader import resolve_policy

    file = tmp_path / "cachy.yaml"
    file.write_text(CACHE_POLICY)
    loaded = resolve_policy(file)
    [issue] = [i for i in loaded.issues if i.rule == "order.cache-breaker"]
    assert (issue.line, issue.column, issue.severity) == (5, 5, "warning")
    assert loaded.policy is not None
    engine = PolicyEngine(loaded.policy)
    result = engine.compose(system_prompt="A.", state={"messages": [HumanMessage("q")]})
    [warning] = [w for w in result.report.warnings if "prompt-cache" in w]
    assert warning == f"{issue.file}:5:5: {issue.message}"


def test_cache_volatile_ok_acknowledges_the_rule(tmp_path: Path) -> None:
    from ctxpolicy.loading.loader import resolve_policy

    file = tmp_path / "cachy.yaml"
    file.write_text(
        CACHE_POLICY.replace("on_error: skip}", "on_error: skip}\n    cache: volatile-ok")
    )
    loaded = resolve_policy(file)
    assert not [i for i in loaded.issues if i.rule == "order.cache-breaker"]
    assert loaded.policy is not None
    result = PolicyEngine(loaded.policy).compose(
        system_prompt="A.", state={"messages": [HumanMessage("q")]}
    )
    assert not [w for w in result.report.warnings if "prompt-cache" in w]


@pytest.mark.parametrize(
    "name",
    [
        "base.yaml",
        "long-session.yaml",
        "loom-sources.yaml",
        "docs-demo.yaml",
        "teams/analytics.toml",
        "teams/data-platform.yaml",
    ],
)
def test_the_bundled_policies_are_free_of_the_cache_warning(name: str) -> None:
    from ctxpolicy.loading.loader import resolve_policy

    loaded = resolve_policy(Path(__file__).parents[2] / "policies" / name)
    assert not [i for i in loaded.issues if i.rule == "order.cache-breaker"]
    assert loaded.policy is not None
    for process in loaded.policy.processes:
        assert not [
            w for w in PolicyEngine(loaded.policy).plan(process).warnings if "prompt-cache" in w
        ]
