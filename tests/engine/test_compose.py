"""The pure composer: overflow rules, query paths, contexts=, ignored histories."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from ctxpolicy import compose as compose_module
from ctxpolicy.compose import compose_layers, compose_messages
from ctxpolicy.engine import PolicyEngine
from ctxpolicy.errors import BudgetExceededError, CtxPolicyError, QueryPathError
from ctxpolicy.plan import LayerPlan, plan_layers
from ctxpolicy.policy import Policy
from ctxpolicy.testing import assert_history_valid
from ctxpolicy.tokens import MESSAGE_OVERHEAD, Tokenizer, get_tokenizer
from tests.engine.conftest import design_data, make_policy

TOK = get_tokenizer("cl100k_base")
LONG = " ".join(f"word{i}" for i in range(600))


def small_plan(
    process: str = "react",
    *,
    window: int = 1000,
    redistribute: bool = False,
    layers: dict[str, Any] | None = None,
    processes: dict[str, Any] | None = None,
) -> LayerPlan:
    data = design_data()
    data["model"] = {"context_window": window, "tokenizer": "cl100k_base"}
    data["budget"] = {**data["budget"], "output_reserve": 0.0, "redistribute": redistribute}
    for name, spec in (layers or {}).items():
        data["layers"][name] = {**data["layers"].get(name, {}), **spec}
    data["processes"].update(processes or {})
    return plan_layers(make_policy(data), process)


def history_with_tools(turns: int, *, words: int = 5) -> list[Any]:
    out: list[Any] = []
    for t in range(turns):
        out += [
            HumanMessage(f"q{t} " + "x " * words),
            AIMessage("", tool_calls=[{"name": "sql", "args": {"t": t}, "id": f"id{t}"}]),
            ToolMessage("r " * words, tool_call_id=f"id{t}"),
            AIMessage(f"a{t}"),
        ]
    return out


# ----------------------------------------------------------------------------- blocks


def test_block_truncate_tail_keeps_the_head_with_a_marker() -> None:
    plan = small_plan(layers={"todo__context": {"overflow": "truncate_tail"}})
    cap = plan.caps["todo__context"]
    comp = compose_layers(
        plan,
        system_prompt="s",
        checkpoint_messages=[HumanMessage("hi")],
        contexts={"todo__context": LONG},
    )
    (todo,) = [m for m, n in zip(comp.messages, comp.message_layers) if n == "todo__context"]
    assert todo.content.startswith("word0 word1")
    assert "tokens cut" in todo.content
    assert TOK.count_message(todo) <= cap
    layer = comp.report.layer("todo__context")
    assert layer.tokens == TOK.count_message(todo)
    (cut,) = layer.cuts
    assert (cut.action, cut.cap, cut.rule) == ("truncated", cap, "truncate_tail")
    assert cut.tokens == TOK.count_message(SystemMessage(LONG)) - layer.tokens
    assert layer.truncated_tokens == cut.tokens


def test_block_truncate_head_keeps_the_tail() -> None:
    plan = small_plan(layers={"todo__context": {"overflow": "truncate_head"}})
    messages = compose_messages(
        plan,
        system_prompt="s",
        checkpoint_messages=[HumanMessage("hi")],
        contexts={"todo__context": LONG},
    )
    todo = messages[1]
    assert todo.content.endswith("word599")
    assert "tokens cut" in todo.content
    assert TOK.count_message(todo) <= plan.caps["todo__context"]


def test_block_drop_removes_the_whole_block() -> None:
    plan = small_plan(layers={"todo__context": {"overflow": "drop"}})
    comp = compose_layers(
        plan,
        system_prompt="s",
        checkpoint_messages=[HumanMessage("hi")],
        contexts={"todo__context": LONG, "experience__context": "short"},
    )
    assert [m.content for m in comp.messages] == ["s", "short", "hi"]
    layer = comp.report.layer("todo__context")
    assert layer.dropped and layer.tokens == 0 and layer.cuts[0].cap == plan.caps["todo__context"]


def test_block_whose_cut_marker_does_not_fit_is_dropped() -> None:
    plan = small_plan(window=40, layers={"todo__context": {"overflow": "truncate_tail"}})
    comp = compose_layers(
        plan,
        system_prompt="s",
        checkpoint_messages=[HumanMessage("hi")],
        contexts={"todo__context": LONG},
    )
    assert [m.content for m in comp.messages] == ["s", "hi"]
    layer = comp.report.layer("todo__context")
    assert layer.dropped and layer.tokens == 0
    (cut,) = layer.cuts
    assert (cut.action, cut.rule) == ("dropped", "truncate_tail: marker does not fit")


def test_system_prompt_whose_cut_marker_does_not_fit_raises() -> None:
    plan = small_plan(window=40, layers={"system_prompt": {"overflow": "truncate_tail"}})
    with pytest.raises(BudgetExceededError, match="not even a cut marker fits") as info:
        compose_layers(plan, system_prompt=LONG, checkpoint_messages=[HumanMessage("hi")])
    assert info.value.layer == "system_prompt"
    assert info.value.cap == plan.caps["system_prompt"]


class _OvershootingTokenizer(Tokenizer):
    """cl100k_base whose ``truncate`` returns up to 3 tokens more than it is asked for."""

    def __init__(self) -> None:
        super().__init__("cl100k_base", encoding=TOK._encoding)
        self.budgets: list[int] = []

    def truncate(self, text: str, max_tokens: int, *, keep: Literal["head", "tail"]) -> str:
        self.budgets.append(max_tokens)
        return super().truncate(text, max_tokens + 3, keep=keep)


def test_truncation_retries_with_a_smaller_budget_until_the_message_fits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tok = _OvershootingTokenizer()
    monkeypatch.setattr(compose_module, "get_tokenizer", lambda name: tok)
    plan = small_plan(layers={"todo__context": {"overflow": "truncate_tail"}})
    cap = plan.caps["todo__context"]
    comp = compose_layers(
        plan,
        system_prompt="s",
        checkpoint_messages=[HumanMessage("hi")],
        contexts={"todo__context": LONG},
    )
    (todo,) = [m for m, n in zip(comp.messages, comp.message_layers) if n == "todo__context"]
    # the first cut is 3 over the cap; the retry asks for 3 fewer and fills the cap exactly
    assert tok.budgets == [cap - MESSAGE_OVERHEAD, cap - MESSAGE_OVERHEAD - 3]
    assert todo.content == TOK.truncate(LONG, cap - MESSAGE_OVERHEAD, keep="head")
    assert TOK.count_message(todo) == cap == comp.report.layer("todo__context").tokens
    (cut,) = comp.report.layer("todo__context").cuts
    assert cut.action == "truncated"


def _exact_text(make: Any, tokens: int) -> str:
    """A text whose ``make(text)`` message has exactly ``tokens`` tokens."""
    text = ""
    while TOK.count_message(make(text)) < tokens:
        text += " x"
    assert TOK.count_message(make(text)) == tokens
    return text


def test_layers_that_fill_exactly_the_available_tokens_compose() -> None:
    policy = Policy.model_validate(
        {
            "version": 1,
            "name": "exact",
            "model": {"context_window": 100, "tokenizer": "cl100k_base"},
            "budget": {
                "output_reserve": 0.0,
                "ratios": {"system_prompt": 0.5, "query": 0.5},
                "redistribute": False,
            },
            "order": ["system_prompt", "query"],
            "processes": {
                "worker": {"checkpoint_messages": False, "share_context": False, "query": "runtime"}
            },
            "default_process": "worker",
        }
    )
    plan = plan_layers(policy, "worker")
    system = _exact_text(SystemMessage, plan.caps["system_prompt"])
    query = _exact_text(HumanMessage, plan.caps["query"])
    comp = compose_layers(plan, system_prompt=system, query=query)
    assert [m.content for m in comp.messages] == [system, query]
    assert comp.report.total_tokens == plan.available_tokens == 100
    assert not any(layer.cuts for layer in comp.report.layers)


def test_block_error_raises_with_layer_tokens_and_cap() -> None:
    plan = small_plan(layers={"todo__context": {"overflow": "error"}})
    with pytest.raises(BudgetExceededError) as info:
        compose_messages(
            plan,
            system_prompt="s",
            checkpoint_messages=[HumanMessage("hi")],
            contexts={"todo__context": LONG},
        )
    assert info.value.layer == "todo__context"
    assert info.value.cap == plan.caps["todo__context"]
    assert info.value.tokens == TOK.count_message(SystemMessage(LONG))


def test_block_roles() -> None:
    plan = small_plan(
        layers={"todo__context": {"role": "human"}, "experience__context": {"role": "ai"}}
    )
    messages = compose_messages(
        plan,
        system_prompt="s",
        checkpoint_messages=[HumanMessage("hi")],
        contexts={"todo__context": "t", "experience__context": "e"},
    )
    assert [type(m) for m in messages] == [SystemMessage, AIMessage, HumanMessage, HumanMessage]


def test_redistribute_lends_unused_share_in_order() -> None:
    tight = small_plan(redistribute=False)
    loose = small_plan(redistribute=True)
    contexts = {"todo__context": LONG}
    fixed = compose_layers(
        tight, system_prompt="s", checkpoint_messages=[HumanMessage("hi")], contexts=contexts
    )
    shared = compose_layers(
        loose, system_prompt="s", checkpoint_messages=[HumanMessage("hi")], contexts=contexts
    )
    assert fixed.report.layer("todo__context").tokens <= tight.caps["todo__context"]
    assert shared.report.layer("todo__context").cap > loose.caps["todo__context"]
    assert shared.report.layer("todo__context").tokens > fixed.report.layer("todo__context").tokens
    assert shared.report.total_tokens <= loose.available_tokens


# ----------------------------------------------------------------------------- history


def test_history_drop_oldest_keeps_newest_whole_units() -> None:
    plan = small_plan()
    history = history_with_tools(40)
    comp = compose_layers(plan, system_prompt="s", checkpoint_messages=history)
    kept = comp.kept_history
    assert kept and kept == tuple(history[-len(kept) :])
    assert_history_valid(kept)
    layer = comp.report.layer("checkpoint_messages")
    assert layer.tokens <= plan.caps["checkpoint_messages"]
    (cut,) = layer.cuts
    assert cut.action == "dropped_oldest" and cut.messages == len(history) - len(kept)
    assert cut.cap == plan.caps["checkpoint_messages"]


def test_history_error_rule() -> None:
    plan = small_plan(layers={"checkpoint_messages": {"overflow": "error"}})
    with pytest.raises(BudgetExceededError) as info:
        compose_messages(plan, system_prompt="s", checkpoint_messages=history_with_tools(40))
    assert info.value.layer == "checkpoint_messages"
    assert info.value.tokens == TOK.count_messages(history_with_tools(40))


def test_pure_compose_messages_degrades_summarize_to_drop_oldest() -> None:
    plan = small_plan(layers={"checkpoint_messages": {"overflow": "summarize"}})
    history = history_with_tools(40)
    messages = compose_messages(plan, system_prompt="s", checkpoint_messages=history)
    assert messages[-1] == history[-1]
    comp = compose_layers(plan, system_prompt="s", checkpoint_messages=history)
    assert comp.summarize is not None and comp.summarize.dropped == comp.dropped_history
    assert comp.summarize.kept == comp.kept_history


def test_broken_history_is_repaired_and_reported() -> None:
    plan = small_plan()
    history = [
        ToolMessage("orphan", tool_call_id="zz"),
        HumanMessage("hi"),
        AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "a"}]),
        HumanMessage("next"),
    ]
    comp = compose_layers(plan, system_prompt="s", checkpoint_messages=history)
    assert_history_valid(comp.kept_history)
    assert comp.kept_history[-1] == HumanMessage("next")
    assert any("repaired" in w for w in comp.report.warnings)


def test_checkpoint_input_that_does_not_fit_raises() -> None:
    plan = small_plan(window=300)
    history = [HumanMessage("hello"), AIMessage("hi"), HumanMessage(LONG)]
    with pytest.raises(BudgetExceededError, match="last HumanMessage") as info:
        compose_messages(plan, system_prompt="s", checkpoint_messages=history)
    assert info.value.layer == "checkpoint_messages"


# ----------------------------------------------------------------------------- query / system


def test_query_error_and_truncate_tail() -> None:
    plan = small_plan("mapreduce_worker", window=400)
    with pytest.raises(BudgetExceededError) as info:
        compose_messages(plan, system_prompt="s", query=LONG)
    assert info.value.layer == "query"
    cut = small_plan(
        "mapreduce_worker", window=400, layers={"query": {"overflow": "truncate_tail"}}
    )
    messages = compose_messages(cut, system_prompt="s", query=LONG)
    assert messages[-1].type == "human" and messages[-1].content.startswith("word0")
    assert TOK.count_message(messages[-1]) <= cut.caps["query"]


def test_system_prompt_error_and_truncate_tail() -> None:
    plan = small_plan(window=400)
    with pytest.raises(BudgetExceededError) as info:
        compose_messages(plan, system_prompt=LONG, checkpoint_messages=[HumanMessage("q")])
    assert info.value.layer == "system_prompt"
    cut = small_plan(window=400, layers={"system_prompt": {"overflow": "truncate_tail"}})
    messages = compose_messages(cut, system_prompt=LONG, checkpoint_messages=[HumanMessage("q")])
    assert messages[0].type == "system" and "tokens cut" in messages[0].content


def test_query_path_errors() -> None:
    react = small_plan()
    worker = small_plan("mapreduce_worker")
    with pytest.raises(QueryPathError, match="do not also pass query"):
        compose_messages(
            react, system_prompt="s", checkpoint_messages=[HumanMessage("a")], query="a"
        )
    with pytest.raises(QueryPathError, match="has no HumanMessage"):
        compose_messages(react, system_prompt="s", checkpoint_messages=[])
    with pytest.raises(QueryPathError, match="non-empty query"):
        compose_messages(worker, system_prompt="s")
    with pytest.raises(QueryPathError, match="non-empty query"):
        compose_messages(worker, system_prompt="s", query="  ")
    both = small_plan(
        "chat",
        processes={"chat": {"checkpoint_messages": True, "query": "runtime"}},
    )
    with pytest.raises(QueryPathError, match="send it twice"):
        compose_messages(
            both, system_prompt="s", checkpoint_messages=[HumanMessage("x")], query="x"
        )
    ok = compose_messages(
        both, system_prompt="s", checkpoint_messages=[HumanMessage("x")], query="y"
    )
    assert [m.content for m in ok if m.type == "human"] == ["x", "y"]
    assert issubclass(QueryPathError, CtxPolicyError)


def test_history_is_ignored_for_processes_that_forbid_it() -> None:
    worker = small_plan("mapreduce_worker")
    history = history_with_tools(3)
    comp = compose_layers(worker, system_prompt="s", checkpoint_messages=history, query="task")
    assert [m.content for m in comp.messages] == ["s", "task"]
    layer = comp.report.layer("checkpoint_messages")
    assert not layer.included and "ignored 12 message(s)" in layer.notes[0]
    engine = PolicyEngine(make_policy())
    result = engine.compose(
        process="mapreduce_worker",
        system_prompt="s",
        state={"messages": history},
        checkpoint_messages=history,
        query="task",
    )
    assert not any(m.type in ("ai", "tool") for m in result.messages)


# ----------------------------------------------------------------------------- contexts=


def test_contexts_override_collectors_per_key() -> None:
    engine = PolicyEngine(make_policy())
    state = {"messages": [HumanMessage("q")], "todo": [{"title": "from state", "done": False}]}
    default = engine.compose(system_prompt="s", state=state)
    assert "from state" in default.messages[2].content
    override = engine.compose(
        system_prompt="s", state=state, contexts={"todo__context": "runtime todo"}
    )
    assert override.messages[2].content == "runtime todo"
    assert override.report.layer("todo__context").source == "contexts"
    emptied = engine.compose(system_prompt="s", state=state, contexts={"todo__context": None})
    assert all("from state" not in str(m.content) for m in emptied.messages)
    # a layer without a collector takes its value only from contexts=
    assert engine.plan().get("experience__context").collector is None  # type: ignore[union-attr]
    given = engine.compose(system_prompt="s", state=state, contexts={"experience__context": "exp"})
    assert given.messages[2].content == "exp"


def test_bad_contexts_keys_are_named() -> None:
    engine = PolicyEngine(make_policy())
    state = {"messages": [HumanMessage("q")]}
    with pytest.raises(ValueError, match="'todo' must end in '__context'"):
        engine.compose(system_prompt="s", state=state, contexts={"todo": "x"})
    with pytest.raises(ValueError, match="'memory__context' is not a layer of policy"):
        engine.compose(system_prompt="s", state=state, contexts={"memory__context": "x"})
    with pytest.raises(TypeError, match=r"contexts\['todo__context'\] must be a str"):
        engine.compose(system_prompt="s", state=state, contexts={"todo__context": 3})  # type: ignore[dict-item]


def test_contexts_for_an_excluded_layer_are_ignored_with_a_note() -> None:
    engine = PolicyEngine(make_policy())
    result = engine.compose(
        process="mapreduce_worker", system_prompt="s", query="q", contexts={"todo__context": "t"}
    )
    assert "t" not in [m.content for m in result.messages]
    assert "excludes this layer" in result.report.layer("todo__context").notes[0]
