"""Composing reads what it keeps, not the whole history (behaviour, never timings).

The history is wrapped in a sequence that records which indices are read: trimming a
long history must read only its newest part, the dropped prefix must be a view (no
copy), and bad items are reported (with their index) only when they are read.
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxpolicy.compose import compose_layers
from ctxpolicy.engine import PolicyEngine
from ctxpolicy.history import MessagesView, PrefixView, fit_history
from ctxpolicy.plan import plan_layers
from ctxpolicy.policy import Policy
from ctxpolicy.report import PrefixHashes, prefix_hashes
from ctxpolicy.tokens import get_tokenizer

TOK = get_tokenizer("cl100k_base")


class Spy(Sequence[Any]):
    """A sequence that records every index read."""

    def __init__(self, items: list[Any]) -> None:
        self.items = items
        self.read: set[int] = set()

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            self.read.update(range(*index.indices(len(self.items))))
        else:
            self.read.add(index if index >= 0 else index + len(self.items))
        return self.items[index]


def history(turns: int) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for t in range(turns):
        out += [
            HumanMessage(f"question {t} " + "word " * 20),
            AIMessage("", tool_calls=[{"name": "sql", "args": {"t": t}, "id": f"id{t}"}]),
            ToolMessage(f"result {t} " + "row " * 20, tool_call_id=f"id{t}"),
            AIMessage(f"answer {t} " + "text " * 20),
        ]
    return out


def policy(*, redistribute: bool, overflow: str = "drop_oldest") -> Policy:
    return Policy.model_validate(
        {
            "version": 1,
            "name": "perf",
            "model": {"context_window": 2_000, "tokenizer": "cl100k_base"},
            "budget": {
                "output_reserve": 0.0,
                "ratios": {"system_prompt": 0.1, "checkpoint_messages": 0.8, "query": 0.1},
                "redistribute": redistribute,
            },
            "order": ["system_prompt", "checkpoint_messages", "query"],
            "layers": {"checkpoint_messages": {"overflow": overflow}},
            "processes": {"react": {"checkpoint_messages": True, "query": "checkpoint"}},
            "default_process": "react",
        }
    )


# ----------------------------------------------------------------------------- PrefixView


def test_prefix_view_behaves_like_the_tuple_of_the_prefix() -> None:
    base = history(5)
    view = PrefixView(base, 7)
    expected = tuple(base[:7])
    assert len(view) == 7 and view == expected and expected == view
    assert view[0] is base[0] and view[-1] is base[6] and view[2:5] == expected[2:5]
    assert list(reversed(view)) == list(reversed(expected))
    assert list(view) == list(expected)
    with pytest.raises(TypeError):  # like the tuple: messages are unhashable
        hash(view)
    assert view != tuple(base[:6]) and view != PrefixView(base, 6)
    assert view == PrefixView(base, 7) and view.count(base[0]) == 1 and base[3] in view
    assert base[7] not in view
    with pytest.raises(IndexError):
        view[7]
    with pytest.raises(IndexError):
        view[-8]
    assert pickle.loads(pickle.dumps(view)) == expected
    assert PrefixView(view, 3) == expected[:3] and PrefixView(view, 99) == expected
    assert PrefixView(base, -1) == () and PrefixView(base, 999) == tuple(base)


def test_fit_history_reads_only_the_newest_part_and_views_the_rest() -> None:
    items = history(500)
    spy = Spy(items)
    fit = fit_history(spy, max_tokens=600, count=TOK.count_message)
    assert isinstance(fit.dropped, PrefixView)
    assert len(fit.dropped) + len(fit.kept) == len(items)
    assert fit.kept == tuple(items[len(fit.dropped) :])
    # the walk reads the kept part and the unit that did not fit, nothing older
    assert min(spy.read) >= len(fit.dropped) - 4
    assert len(spy.read) <= len(fit.kept) + 4
    assert fit.dropped[-1] is items[len(fit.dropped) - 1]  # a view of the input, no copy


# ----------------------------------------------------------------------------- compose


@pytest.mark.parametrize("redistribute", [False, True])
def test_compose_reads_only_what_it_keeps(redistribute: bool) -> None:
    items = history(2_000)
    spy = Spy(items)
    plan = plan_layers(policy(redistribute=redistribute), "react")
    comp = compose_layers(plan, system_prompt="You are terse.", checkpoint_messages=spy)
    kept = len(comp.kept_history)
    assert 0 < kept < 100
    assert min(spy.read) >= len(items) - kept - 8
    (cut,) = comp.report.layer("checkpoint_messages").cuts
    assert cut.action == "dropped_oldest" and cut.messages == len(items) - kept
    assert cut.tokens is None  # the long dropped prefix is not counted
    layer = comp.report.layer("checkpoint_messages")
    assert layer.demand > layer.cap  # still says the history did not fit


def test_dropped_tokens_are_given_when_the_prefix_was_counted_anyway() -> None:
    items = history(3)  # the unit that does not fit is most of what is dropped
    plan = plan_layers(policy(redistribute=False), "react")
    big = [HumanMessage("old " * 1_700), AIMessage("ok"), *items]
    comp = compose_layers(plan, system_prompt="s", checkpoint_messages=big)
    (cut,) = comp.report.layer("checkpoint_messages").cuts
    assert cut.messages == 2
    assert cut.tokens == TOK.count_messages(big[:2])


def test_summarize_gets_the_whole_dropped_prefix_counted() -> None:
    items = history(300)
    plan = plan_layers(policy(redistribute=False, overflow="summarize"), "react")
    comp = compose_layers(plan, system_prompt="s", checkpoint_messages=items)
    assert comp.summarize is not None and comp.summarize.dropped == comp.dropped_history
    (cut,) = comp.report.layer("checkpoint_messages").cuts
    assert cut.action == "summarized"
    assert cut.tokens == TOK.count_messages(items[: cut.messages])


def test_compose_total_equals_the_count_of_the_messages() -> None:
    plan = plan_layers(policy(redistribute=True), "react")
    comp = compose_layers(plan, system_prompt="You are terse.", checkpoint_messages=history(50))
    assert comp.report.total_tokens == TOK.count_messages(comp.messages)


# ----------------------------------------------------------------------------- engine input


def test_engine_reads_and_converts_only_the_newest_messages() -> None:
    engine = PolicyEngine(policy(redistribute=True))
    items: list[Any] = [("user", "old")] * 5_000 + history(40)  # old tuples never read
    spy = Spy(items)
    result = engine.compose(system_prompt="s", checkpoint_messages=spy)
    assert min(spy.read) > 5_000
    assert result.messages[-1] is items[-1]


def test_engine_converts_dict_items_when_read_and_names_a_bad_item() -> None:
    engine = PolicyEngine(policy(redistribute=False))
    converted = engine.compose(
        system_prompt="s",
        checkpoint_messages=[{"role": "user", "content": "hi"}, ("ai", "hello"), ("user", "q")],
    )
    assert [m.type for m in converted.messages] == ["system", "human", "ai", "human"]
    bad: list[Any] = [HumanMessage("a"), {"type": "alien", "content": "x"}, HumanMessage("q")]
    with pytest.raises(ValueError, match=r"checkpoint_messages\[1\]"):
        engine.compose(system_prompt="s", checkpoint_messages=bad)
    # a bad item in a prefix that is dropped unread is not an error of this call
    unread: list[Any] = [object(), *history(200)]
    assert engine.compose(system_prompt="s", checkpoint_messages=unread).messages


def test_messages_view_converts_once_and_slices() -> None:
    view = MessagesView([("user", "a"), HumanMessage("b"), ("ai", "c")], argument="history")
    first = view[0]
    assert view[0] is first and view[-3] is first
    assert [m.content for m in view[0:3]] == ["a", "b", "c"]
    assert [m.content for m in reversed(view)] == ["c", "b", "a"]
    assert len(view) == 3


# ----------------------------------------------------------------------------- report


def test_prefix_hashes_are_computed_when_read_and_equal_the_eager_ones() -> None:
    messages = history(3)
    lazy = PrefixHashes(messages)
    assert len(lazy) == len(messages)
    eager = prefix_hashes(messages)
    assert lazy == eager and eager == lazy and lazy[1:] == eager[1:] and list(lazy) == list(eager)
    assert lazy == PrefixHashes(messages) and hash(lazy) == hash(eager)
    assert pickle.loads(pickle.dumps(lazy)) == eager
    engine = PolicyEngine(policy(redistribute=False))
    result = engine.compose(system_prompt="s", checkpoint_messages=messages)
    assert result.report.prefix_hashes == prefix_hashes(result.messages)
    assert result.report.to_dict()["prefix_hashes"] == list(prefix_hashes(result.messages))


def test_layer_reports_are_made_when_read_and_behave_as_the_tuple(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ctxpolicy.report as report_module

    made: list[str] = []
    included, excluded = report_module._included_report, report_module._excluded_report

    def count_included(tally: Any, **options: Any) -> Any:
        made.append(tally.layer.name)
        return included(tally, **options)

    def count_excluded(plan: Any, name: str, *args: Any) -> Any:
        made.append(name)
        return excluded(plan, name, *args)

    monkeypatch.setattr(report_module, "_included_report", count_included)
    monkeypatch.setattr(report_module, "_excluded_report", count_excluded)
    engine = PolicyEngine(policy(redistribute=False))
    result = engine.compose(system_prompt="s", checkpoint_messages=history(30))
    report = result.report
    assert made == []  # composing made no layer report
    assert report.layer("checkpoint_messages").messages == len(result.messages) - 1
    assert made == ["checkpoint_messages"]  # reading one layer made that one only
    layers = report.layers
    assert isinstance(layers, report_module.LayerReports) and len(layers) == 3
    eager = tuple(layers)
    assert made == ["checkpoint_messages", "system_prompt", "query"]  # each made once
    assert [layer.name for layer in eager] == ["system_prompt", "checkpoint_messages", "query"]
    assert layers[1] is report.layer("checkpoint_messages") and layers[-3] is eager[0]
    assert layers == eager and eager == layers and hash(layers) == hash(eager)
    assert layers[1:] == eager[1:] and layers[::-1] == eager[::-1] and repr(layers) == repr(eager)
    for bad in (3, -4):
        with pytest.raises(IndexError):
            layers[bad]
    with pytest.raises(KeyError, match="no layer 'nope'"):
        report.layer("nope")
    assert pickle.loads(pickle.dumps(layers)) == eager
    assert type(pickle.loads(pickle.dumps(report)).layers) is tuple
    assert pickle.loads(pickle.dumps(report)) == report
    assert layers != eager[:2] and layers != list(eager)
    # the same call composed again reports equal layers, made afresh
    again = engine.compose(system_prompt="s", checkpoint_messages=history(30)).report
    assert again == report and again.layers == layers and again.to_dict() == report.to_dict()
    # a report built by hand with a tuple reads the same way
    plain = dataclasses.replace(report, layers=eager)
    assert plain.layer("query") is eager[2] and plain == report
    with pytest.raises(KeyError, match="no layer 'nope'"):
        plain.layer("nope")
