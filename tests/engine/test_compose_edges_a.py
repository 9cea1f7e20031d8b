"""Edges of the composer: clear_tool_results, history errors, text cuts, exact messages."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxpolicy import compose as compose_module
from ctxpolicy.compose import compose_layers, tool_result_marker
from ctxpolicy.errors import BudgetExceededError, QueryPathError
from ctxpolicy.plan import LayerPlan, plan_layers
from ctxpolicy.report import LayerCut
from ctxpolicy.tokens import get_tokenizer
from tests.engine.conftest import design_data, make_policy

TOK = get_tokenizer("cl100k_base")
LONG = " ".join(f"word{i}" for i in range(600))
HISTORY = "checkpoint_messages"
NO_FIT = (
    "the input (last HumanMessage) and the messages after it do not fit; "
    "raise the ratio of checkpoint_messages"
)


def plan_of(
    process: str = "react",
    *,
    window: int = 1000,
    redistribute: bool = False,
    layers: dict[str, Any] | None = None,
) -> LayerPlan:
    data = design_data()
    data["model"] = {"context_window": window, "tokenizer": "cl100k_base"}
    data["budget"] = {**data["budget"], "output_reserve": 0.0, "redistribute": redistribute}
    for name, spec in (layers or {}).items():
        data["layers"][name] = {**data["layers"].get(name, {}), **spec}
    return plan_layers(make_policy(data), process)


def clearing_plan(clear: bool = True) -> LayerPlan:
    return plan_of(layers={HISTORY: {"clear_tool_results": clear}})


def _tool_as_long_as_its_marker(call_id: str) -> ToolMessage:
    """A ToolMessage whose cleared copy has exactly as many tokens as itself."""
    text = "y"
    while True:
        message = ToolMessage(text, tool_call_id=call_id)
        tokens = TOK.count_message(message)
        marker = ToolMessage(tool_result_marker(tokens), tool_call_id=call_id)
        if TOK.count_message(marker) == tokens:
            return message
        text += " y"


def _big_turn_history() -> list[BaseMessage]:
    ids = ["a", "b", "c", "d"]
    return [
        HumanMessage("older question"),
        AIMessage("older answer"),
        HumanMessage("check the four tables"),
        AIMessage("", tool_calls=[{"name": "sql", "args": {}, "id": i} for i in ids]),
        _tool_as_long_as_its_marker("a"),
        ToolMessage("row value " * 85, tool_call_id="b"),
        ToolMessage("row value " * 85, tool_call_id="c"),
        ToolMessage("row value " * 85, tool_call_id="d"),
    ]


def _cleared(message: BaseMessage) -> ToolMessage:
    assert isinstance(message, ToolMessage)
    marker = tool_result_marker(TOK.count_message(message))
    return ToolMessage(marker, tool_call_id=message.tool_call_id)


# ----------------------------------------------------------------------------- clearing


def test_clear_tool_results_clears_oldest_results_of_the_turn_until_it_fits() -> None:
    plan = clearing_plan()
    cap = plan.caps[HISTORY]
    history = _big_turn_history()
    before = [m.model_copy() for m in history]
    comp = compose_layers(plan, system_prompt="s", checkpoint_messages=history)
    b, c = _cleared(history[5]), _cleared(history[6])
    expected = [*history[:5], b, c, history[7]]
    assert [(m.type, m.content) for m in comp.kept_history] == [
        (m.type, m.content) for m in expected
    ]
    assert [getattr(m, "tool_call_id", None) for m in comp.kept_history[4:]] == ["a", "b", "c", "d"]
    assert comp.kept_history[2] is history[2]
    assert history == before  # the given history is never changed
    removed = (
        TOK.count_message(history[5])
        - TOK.count_message(b)
        + TOK.count_message(history[6])
        - TOK.count_message(c)
    )
    layer = comp.report.layer(HISTORY)
    assert list(layer.cuts) == [
        LayerCut("cleared_tool_results", removed, 2, cap, "clear_tool_results")
    ]
    assert layer.source == "history"
    assert layer.tokens == TOK.count_messages(expected)
    assert layer.demand == TOK.count_messages(expected)


def test_without_clear_tool_results_the_same_turn_raises() -> None:
    plan = clearing_plan(clear=False)
    with pytest.raises(BudgetExceededError) as info:
        compose_layers(plan, system_prompt="s", checkpoint_messages=_big_turn_history())
    assert info.value.layer == HISTORY
    assert info.value.cap == plan.caps[HISTORY]
    assert str(info.value).endswith(f"but its cap is {plan.caps[HISTORY]}: {NO_FIT}")


def test_clearing_that_does_not_suffice_raises() -> None:
    plan = clearing_plan()
    history = [
        HumanMessage(LONG),
        AIMessage("", tool_calls=[{"name": "sql", "args": {}, "id": "a"}]),
        ToolMessage("row value " * 85, tool_call_id="a"),
    ]
    with pytest.raises(BudgetExceededError) as info:
        compose_layers(plan, system_prompt="s", checkpoint_messages=history)
    assert str(info.value).endswith(f": {NO_FIT}")
    assert info.value.layer == HISTORY


def test_clearing_stops_when_the_turn_fits_the_cap_exactly() -> None:
    plan = clearing_plan()
    cap = plan.caps[HISTORY]
    calls = [{"name": "sql", "args": {}, "id": i} for i in ("a", "b")]
    tools = [ToolMessage("row value " * 120, tool_call_id="a"), ToolMessage("r", tool_call_id="b")]
    padding = ""
    while True:
        turn = [HumanMessage("q" + padding), AIMessage("", tool_calls=calls), *tools]
        after = [*turn[:2], _cleared(tools[0]), tools[1]]
        if TOK.count_messages(after) >= cap:
            break
        padding += " x"
    assert TOK.count_messages(after) == cap
    comp = compose_layers(plan, system_prompt="s", checkpoint_messages=turn)
    assert [m.content for m in comp.kept_history] == [m.content for m in after]
    (cut,) = comp.report.layer(HISTORY).cuts
    assert cut.messages == 1


def test_clearing_finds_an_input_at_the_start_of_the_history() -> None:
    calls = [{"name": "sql", "args": {}, "id": i} for i in ("a", "b")]
    history = [
        HumanMessage("q"),
        AIMessage("", tool_calls=calls),
        ToolMessage("row value " * 200, tool_call_id="a"),
        ToolMessage("r", tool_call_id="b"),
    ]
    cut_history, cut = compose_module._clear_tool_results(TOK, history, history[0], 100)
    assert list(cut_history) == [*history[:2], _cleared(history[2]), history[3]]
    removed = TOK.count_message(history[2]) - TOK.count_message(_cleared(history[2]))
    assert cut == LayerCut("cleared_tool_results", removed, 1, 100, "clear_tool_results")


def test_clearing_starts_at_the_last_occurrence_of_the_input() -> None:
    question = HumanMessage("q")
    history = [
        question,
        AIMessage("", tool_calls=[{"name": "sql", "args": {}, "id": "a"}]),
        ToolMessage("row value " * 200, tool_call_id="a"),
        AIMessage("done"),
        question,
    ]
    out, cut = compose_module._clear_tool_results(TOK, history, question, 100)
    assert out is history and cut is None


def test_clearing_without_the_input_in_the_history_changes_nothing() -> None:
    history = [HumanMessage("q"), ToolMessage("row value " * 200, tool_call_id="a")]
    assert compose_module._clear_tool_results(TOK, history, HumanMessage("q"), 10) == (
        history,
        None,
    )
    empty: list[BaseMessage] = []
    assert compose_module._clear_tool_results(TOK, empty, HumanMessage("q"), 10) == (empty, None)


def test_an_orphan_tool_result_after_a_kept_input_is_repaired_not_cleared() -> None:
    plan = clearing_plan()
    history = [
        HumanMessage("older"),
        AIMessage("answer"),
        HumanMessage("q"),
        ToolMessage("row value " * 300, tool_call_id="zz"),
    ]
    comp = compose_layers(plan, system_prompt="s", checkpoint_messages=history)
    assert list(comp.kept_history) == history[:3]
    actions = [cut.action for cut in comp.report.layer(HISTORY).cuts]
    assert actions == ["repaired"]
    # the repaired message still counts as demand
    assert comp.report.layer(HISTORY).demand == TOK.count_messages(history)


# ----------------------------------------------------------------------------- history


def test_history_error_rule_message_and_drop_oldest_cut() -> None:
    plan = plan_of(layers={HISTORY: {"overflow": "error"}})
    cap = plan.caps[HISTORY]
    history: list[BaseMessage] = []
    for t in range(40):
        history += [HumanMessage(f"q{t} " + "x " * 5), AIMessage(f"a{t}")]
    with pytest.raises(BudgetExceededError) as info:
        compose_layers(plan, system_prompt="s", checkpoint_messages=history)
    total = TOK.count_messages(history)
    assert str(info.value) == (
        f"layer 'checkpoint_messages' needs {total} tokens but its cap is {cap}: "
        "overflow rule 'error'"
    )
    drop = plan_of()
    comp = compose_layers(drop, system_prompt="s", checkpoint_messages=history)
    (cut,) = comp.report.layer(HISTORY).cuts
    assert (cut.action, cut.rule, cut.cap) == ("dropped_oldest", "drop_oldest", cap)
    assert cut.messages == len(history) - len(comp.kept_history)


def test_contains_uses_identity_then_equality() -> None:
    contains = compose_module._contains
    assert contains([HumanMessage("a")], HumanMessage("a")) is True
    assert contains([AIMessage("b")], HumanMessage("a")) is False
    assert contains([], HumanMessage("a")) is False


# ----------------------------------------------------------------------------- text layers


def _long_block(overflow: str) -> tuple[Any, int, int]:
    """The report of a ``todo__context`` block holding LONG, its cap and its demand."""
    plan = plan_of(layers={"todo__context": {"overflow": overflow}})
    comp = compose_layers(
        plan,
        system_prompt="s",
        checkpoint_messages=[HumanMessage("hi")],
        contexts={"todo__context": LONG},
    )
    demand = TOK.count_message(SystemMessage(LONG))
    return comp.report.layer("todo__context"), plan.caps["todo__context"], demand


def test_block_drop_cut_is_exact() -> None:
    layer, cap, demand = _long_block("drop")
    assert list(layer.cuts) == [LayerCut("dropped", demand, 0, cap, "drop")]
    assert layer.tokens == 0 and layer.messages == 0


def test_block_truncate_and_marker_cuts_are_exact() -> None:
    layer, cap, demand = _long_block("truncate_tail")
    assert list(layer.cuts) == [
        LayerCut("truncated", demand - layer.tokens, 0, cap, "truncate_tail")
    ]
    tiny = plan_of(window=40, layers={"todo__context": {"overflow": "truncate_tail"}})
    comp = compose_layers(
        tiny,
        system_prompt="s",
        checkpoint_messages=[HumanMessage("hi")],
        contexts={"todo__context": LONG},
    )
    assert list(comp.report.layer("todo__context").cuts) == [
        LayerCut(
            "dropped",
            demand,
            0,
            tiny.caps["todo__context"],
            "truncate_tail: marker does not fit",
        )
    ]


def test_block_error_message_is_exact() -> None:
    plan = plan_of(layers={"todo__context": {"overflow": "error"}})
    cap = plan.caps["todo__context"]
    demand = TOK.count_message(SystemMessage(LONG))
    with pytest.raises(BudgetExceededError) as info:
        compose_layers(
            plan,
            system_prompt="s",
            checkpoint_messages=[HumanMessage("hi")],
            contexts={"todo__context": LONG},
        )
    assert str(info.value) == (
        f"layer 'todo__context' needs {demand} tokens but its cap is {cap}: overflow rule 'error'"
    )


def test_empty_block_is_noted_and_other_layers_are_not() -> None:
    plan = plan_of()
    comp = compose_layers(
        plan,
        system_prompt="s",
        checkpoint_messages=[HumanMessage("hi")],
        contexts={"todo__context": ""},
    )
    assert list(comp.report.layer("todo__context").notes) == ["empty: no value this call"]
    assert list(comp.report.layer("system_prompt").notes) == []
    assert list(comp.report.layer("query").notes) == []


def test_reserved_layers_demand_their_whole_cap() -> None:
    plan = plan_of(redistribute=True)
    comp = compose_layers(
        plan,
        system_prompt="s",
        checkpoint_messages=[HumanMessage("hi")],
        reserved=["knowledge__context"],
    )
    layer = comp.report.layer("knowledge__context")
    assert layer.demand == plan.caps["knowledge__context"]


# ----------------------------------------------------------------------------- assemble


def test_assemble_raises_when_the_layers_together_exceed_the_available_tokens() -> None:
    layer = SimpleNamespace(name="a")
    plan = SimpleNamespace(layers=[layer], available_tokens=5)
    tally = SimpleNamespace(messages=[HumanMessage("x")], tokens=7)
    with pytest.raises(BudgetExceededError) as info:
        compose_module._assemble(plan, {"a": tally})  # type: ignore[arg-type]
    assert str(info.value) == "layer 'total' needs 7 tokens but its cap is 5: the layers together"
    assert (info.value.layer, info.value.tokens, info.value.cap) == ("total", 7, 5)


# ----------------------------------------------------------------------------- messages


def test_context_key_errors_are_exact() -> None:
    plan = plan_of("mapreduce_worker")
    with pytest.raises(ValueError) as info:
        compose_layers(plan, system_prompt="s", query="q", contexts={"todo": "x"})
    assert str(info.value) == (
        "contexts: key 'todo' must end in '__context' (only __context block "
        "layers can be given at runtime)"
    )
    with pytest.raises(ValueError) as info:
        compose_layers(plan, system_prompt="s", query="q", contexts={"nope__context": "x"})
    assert str(info.value) == (
        "contexts: key 'nope__context' is not a layer of policy 'data-platform' (its block "
        "layers: framework__context, experience__context, knowledge__context, todo__context, "
        "compression__context)"
    )


def test_query_path_errors_are_exact() -> None:
    worker = plan_of("mapreduce_worker")
    with pytest.raises(QueryPathError) as info:
        compose_layers(worker, system_prompt="s", query=" ")
    assert str(info.value) == (
        "process 'mapreduce_worker' takes its input at runtime (query: runtime): "
        "pass a non-empty query="
    )
    react = plan_of()
    with pytest.raises(QueryPathError) as info:
        compose_layers(react, system_prompt="s", checkpoint_messages=[HumanMessage("a")], query="a")
    assert str(info.value) == (
        "process 'react' takes its input from the history (query: checkpoint): the input "
        "must be the last HumanMessage of checkpoint_messages; do not also pass query="
    )
    with pytest.raises(QueryPathError) as info:
        compose_layers(react, system_prompt="s", checkpoint_messages=[AIMessage("a")])
    assert str(info.value) == (
        "process 'react' takes its input from the history (query: checkpoint) but "
        "checkpoint_messages has no HumanMessage"
    )


def test_runtime_query_sent_twice_and_checkpoint_without_history_are_exact() -> None:
    data = design_data()
    data["processes"]["both"] = {
        "checkpoint_messages": True,
        "share_context": False,
        "query": "runtime",
    }
    data["processes"]["blind"] = {
        "checkpoint_messages": False,
        "share_context": False,
        "query": "checkpoint",
    }
    policy = make_policy(data)
    with pytest.raises(QueryPathError) as info:
        compose_layers(
            plan_layers(policy, "both"),
            system_prompt="s",
            checkpoint_messages=[HumanMessage("a")],
            query="a",
        )
    assert str(info.value) == (
        "process 'both': the query is already the last HumanMessage of "
        "checkpoint_messages; passing it as query= too would send it twice"
    )
    with pytest.raises(QueryPathError) as info:
        compose_layers(plan_layers(policy, "blind"), system_prompt="s")
    assert str(info.value) == (
        "process 'blind' has query: checkpoint but checkpoint_messages: false, so "
        "its input cannot arrive"
    )


def test_clearing_stops_as_soon_as_the_running_total_fits() -> None:
    calls = [{"name": "sql", "args": {}, "id": i} for i in ("a", "b", "c")]
    turn: list[BaseMessage] = [
        HumanMessage("q"),
        AIMessage("", tool_calls=calls),
        *[ToolMessage("row value " * 50, tool_call_id=i) for i in ("a", "b", "c")],
    ]
    one = [*turn[:2], _cleared(turn[2]), *turn[3:]]
    two = [*one[:3], _cleared(turn[3]), turn[4]]
    fits = TOK.count_messages(one)
    out, cut = compose_module._clear_tool_results(TOK, turn, turn[0], fits)
    assert list(out) == one
    assert cut is not None and (cut.messages, cut.tokens) == (
        1,
        TOK.count_messages(turn) - fits,
    )
    out, cut = compose_module._clear_tool_results(TOK, turn, turn[0], fits - 1)
    assert list(out) == two
    assert cut is not None and (cut.messages, cut.tokens) == (
        2,
        TOK.count_messages(turn) - TOK.count_messages(two),
    )
