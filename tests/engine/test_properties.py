"""Property tests: the DESIGN §4 invariants hold for any sizes, histories and budgets."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from ctxpolicy.engine import PolicyEngine
from ctxpolicy.errors import BudgetExceededError
from ctxpolicy.history import check_history
from ctxpolicy.testing import assert_composed_valid
from ctxpolicy.tokens import get_tokenizer
from tests.engine.conftest import design_data, make_policy

WORDS = ["alpha", "beta", "表格", "数据", "x1", "🙂", "SELECT", "*", "\n", "naïve", "tool"]
BLOCKS = [
    "framework__context",
    "experience__context",
    "knowledge__context",
    "todo__context",
    "compression__context",
]
LAYERS = ["system_prompt", *BLOCKS, "checkpoint_messages", "query"]
SYSTEM_PROMPT = "SYSTEM-PROMPT-7f3a " * 3


def text(max_words: int = 300) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(WORDS), max_size=max_words).map(" ".join)


@st.composite
def histories(draw: st.DrawFn, min_units: int = 0) -> list[Any]:
    """Histories with tool calls; sometimes broken (orphans, system messages)."""
    messages: list[Any] = [HumanMessage("first " + draw(text(30)))]
    n = 0
    kinds = st.sampled_from(["human", "ai", "tools", "tools", "broken"])
    for kind in draw(st.lists(kinds, min_size=min_units, max_size=min_units + 25)):
        if kind == "human":
            messages.append(HumanMessage(draw(text(40))))
        elif kind == "ai":
            messages.append(AIMessage(draw(text(40))))
        elif kind == "tools":
            k = draw(st.integers(1, 3))
            ids = [f"call{n + i}" for i in range(k)]
            n += k
            messages.append(
                AIMessage(
                    draw(text(5)),
                    tool_calls=[{"name": "sql", "args": {"i": i}, "id": i} for i in ids],
                )
            )
            messages += [ToolMessage(draw(text(40)), tool_call_id=i) for i in ids]
        else:
            broken = draw(st.sampled_from(["orphan", "system", "unanswered"]))
            if broken == "orphan":
                messages.append(ToolMessage("orphan", tool_call_id=f"none{n}"))
            elif broken == "system":
                messages.append(SystemMessage("stray"))
            else:
                messages.append(
                    AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": f"u{n}"}])
                )
            n += 1
    return messages


@st.composite
def policies(draw: st.DrawFn) -> Any:
    data = design_data()
    chosen = draw(st.lists(st.sampled_from(LAYERS), unique=True))
    weights = [draw(st.floats(0.01, 1.0)) for _ in chosen]
    scale = draw(st.floats(0.3, 1.0)) / (sum(weights) or 1)
    data["model"] = {
        "context_window": draw(st.integers(150, 6000)),
        "tokenizer": draw(st.sampled_from(["cl100k_base", "o200k_base", "approximate"])),
        "system_messages": draw(st.sampled_from(["separate", "merge"])),
    }
    data["budget"] = {
        "output_reserve": draw(st.sampled_from([0.0, 0.1, 0.25])),
        "ratios": {name: round(w * scale, 4) * 0.999 for name, w in zip(chosen, weights)},
        "redistribute": draw(st.booleans()),
    }
    for name in BLOCKS:
        layer = data["layers"].setdefault(name, {})
        layer["overflow"] = draw(
            st.sampled_from(["truncate_tail", "truncate_head", "drop", "error"])
        )
    data["layers"]["todo__context"]["persist"] = draw(st.booleans())
    data["layers"]["checkpoint_messages"] = {
        "overflow": draw(st.sampled_from(["drop_oldest", "error"]))
    }
    data["layers"]["query"] = {"overflow": draw(st.sampled_from(["error", "truncate_tail"]))}
    data["layers"]["system_prompt"] = {
        "overflow": draw(st.sampled_from(["error", "truncate_tail"]))
    }
    return make_policy(data).with_share_context(draw(st.booleans()))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    policy=policies(),
    process=st.sampled_from(["react", "mapreduce_worker", "mapreduce_planner"]),
    history=histories(),
    blocks=st.dictionaries(st.sampled_from(BLOCKS[1:]), text(), max_size=4),
    query=text(200).map(lambda q: "QUERY " + q),
    state_summary=text(50),
)
def test_invariants_hold_or_budget_exceeded(
    policy: Any,
    process: str,
    history: list[Any],
    blocks: dict[str, str],
    query: str,
    state_summary: str,
) -> None:
    engine = PolicyEngine(policy)
    plan = engine.plan(process)
    runtime = plan.query_path == "runtime"
    state = {"messages": history, "compression__context": state_summary}
    try:
        result = engine.compose(
            process=process,
            system_prompt=SYSTEM_PROMPT,
            state=state,
            contexts=blocks,
            query=query if runtime else None,
        )
    except BudgetExceededError as exc:
        assert exc.tokens > exc.cap
        event(f"budget exceeded: {exc.layer}")
        return
    event("composed")
    if result.report.layer("checkpoint_messages").cuts:
        event("history cut")
    tok = get_tokenizer(plan.tokenizer)
    messages = result.messages
    # total <= available, and the report agrees with the messages
    assert tok.count_messages(messages) == result.report.total_tokens <= plan.available_tokens
    assert_composed_valid(result, plan)  # order, system prompt first, history valid, persist
    # system prompt only first
    assert all(SYSTEM_PROMPT not in str(m.content) for m in messages[1:])
    # the query exactly once
    if runtime:
        assert messages[-1].type == "human"  # the query's message, last
        if result.report.layer("query").cuts:
            # truncate_tail under a cap smaller than the query: the message may keep no
            # more than the cut marker (a cap of a few tokens), but it is still sent once
            assert sum("QUERY" in str(m.content) for m in messages) <= 1
            assert "tokens cut" in str(messages[-1].content)
        else:
            assert sum("QUERY" in str(m.content) for m in messages) == 1
            assert str(messages[-1].content).startswith("QUERY")
        assert all(m.type not in ("ai", "tool") for m in messages)  # history never used
    else:
        last_human = next(m for m in reversed(history) if m.type == "human")
        assert sum(m is last_human for m in messages) == 1
        assert not any("QUERY" in str(m.content) for m in messages)
    # the history part is structurally valid
    start = sum(layer.messages for layer in result.report.layers[:6])
    part = messages[start : start + result.report.layer("checkpoint_messages").messages]
    assert check_history(part) == []
    # runtime-only layers never persisted; a value read back from state never re-persisted
    persistent = {layer.name for layer in plan.layers if layer.persist}
    assert set(result.persist) <= persistent
    assert "compression__context" not in result.persist or blocks.get(
        "compression__context"
    ) not in (None, state_summary)
    # per layer: tokens within its cap
    for layer in result.report.layers:
        if layer.included and layer.cap is not None:
            assert layer.tokens <= layer.cap


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    history=histories(min_units=15),
    window=st.integers(150, 900),
    summary_words=st.integers(1, 80),
    previous=st.one_of(st.none(), text(40)),
)
def test_summarize_keeps_every_invariant(
    history: list[Any], window: int, summary_words: int, previous: str | None
) -> None:
    data = design_data()
    data["model"] = {"context_window": window, "tokenizer": "cl100k_base"}
    data["layers"]["checkpoint_messages"] = {"overflow": "summarize"}
    policy = make_policy(data)

    def summarizer(messages: Any, previous_summary: str | None) -> str:
        return "SUMMARY " + "s " * summary_words

    engine = PolicyEngine(policy, services={"summarizer": summarizer})
    state: dict[str, Any] = {"messages": history}
    if previous:
        state["compression__context"] = previous
    try:
        result = engine.compose(system_prompt=SYSTEM_PROMPT, state=state)
    except BudgetExceededError as exc:
        assert exc.tokens > exc.cap
        event(f"budget exceeded: {exc.layer}")
        return
    plan = engine.plan()
    assert_composed_valid(result, plan)
    last_human = next(m for m in reversed(history) if m.type == "human")
    assert sum(m is last_human for m in result.messages) == 1
    assert set(result.persist) <= {"compression__context"}
    if result.report.summarized:
        event("summarized")
        assert result.persist["compression__context"].startswith("SUMMARY")
        assert result.compacted_history is not None
        assert check_history(result.compacted_history) == []
        assert any(m is last_human for m in result.compacted_history)
        # the compacted history is a suffix of the history: nothing reordered or invented
        assert all(m in history for m in result.compacted_history)
    else:
        assert result.persist == {} and result.compacted_history is None
