"""The relevance floor, and a builtin dense model named by the policy (with its fallback)."""

from __future__ import annotations

import logging
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ctxpolicy import PolicyEngine
from ctxpolicy.errors import EmbeddingsUnavailableError
from ctxpolicy.loading import load_policy
from ctxpolicy.recall import minilm
from ctxpolicy.recall.floor import distinctive_terms
from ctxpolicy.recall.postgres import PostgresRecallIndex
from ctxpolicy.recall.sqlite import SQLiteRecallIndex
from ctxpolicy.recall.units import Unit

LONG_SESSION = Path(__file__).resolve().parents[2] / "policies" / "long-session.yaml"


def chat(turns: int) -> list[BaseMessage]:
    """A long chat where the name Kate is in most turns and one turn says her hobby."""
    history: list[BaseMessage] = []
    for i in range(turns):
        history.append(HumanMessage(f"(day {i}) Elise: Hey Kate, how was day {i}?", id=f"h{i}"))
        history.append(AIMessage(f"(day {i}) Kate: Busy at work, thanks Elise.", id=f"a{i}"))
    history[40] = HumanMessage("(day 20) Elise: Kate, your pottery vase is lovely!", id="h20")
    return history


def test_a_term_held_by_many_units_is_common_and_a_short_session_keeps_every_term() -> None:
    assert distinctive_terms(
        1000, {"kate": 400, "pottery": 3, "ghost": 0}, ["kate", "pottery", "ghost"]
    ) == ["pottery"]
    # 15 of 20 units hold "kate": common by share, but too few units to judge
    assert distinctive_terms(20, {"kate": 15}, ["kate"]) == ["kate"]


def test_both_backends_find_nothing_by_common_terms_alone(postgres_dsn) -> None:
    def units(i: int, text: str) -> list[Unit]:
        return [Unit(f"m{i}", i, 0, "user", None, 1, 1, text)]

    talk = [(i, f"m{i}", units(i, f"Hey Kate, how was day {i}?")) for i in range(100)]
    talk.append((100, "m100", units(100, "Kate made pottery, 陶艺课很好玩")))
    for index in (
        SQLiteRecallIndex(),
        PostgresRecallIndex(postgres_dsn, schema_prefix="floor_test"),
    ):
        index.add_messages("t", talk)
        # "kate" is in 101 of 101 units: common (without the floor: found everywhere)
        assert index.search("t", ["kate"], limit=10, floor=True) == []
        assert len(index.search("t", ["kate"], limit=10)) == 10
        (hit,) = index.search("t", ["kate", "pottery"], limit=10, floor=True)
        assert hit.unit.message_id == "m100"
        (hit,) = index.search("t", ["kate", "陶艺"], limit=10, floor=True)
        assert hit.unit.message_id == "m100"
        index.close()


def recall_text(engine: PolicyEngine, history: list[BaseMessage], question: str) -> str:
    result = engine.compose(
        process="react",
        system_prompt="s",
        state={"messages": [*history, HumanMessage(question, id="q")]},
    )
    return (
        result.report.layer("recall__context").recalled
        and "\n".join(u.text for u in result.report.layer("recall__context").recalled)
    ) or ""


def small(policy):
    """``policy`` with a 3,000-token window: a 600-turn chat no longer fits."""
    return policy.model_copy(
        update={"model": policy.model.model_copy(update={"context_window": 3000})}
    )


def test_greetings_that_share_only_a_name_with_the_question_are_not_recalled() -> None:
    engine = PolicyEngine(small(load_policy(LONG_SESSION)))
    history = chat(300)
    shown = recall_text(engine, history, "What does Kate do for fun, her hobby?")
    assert shown == ""  # nothing but the name matched: below the floor
    assert "pottery" in recall_text(engine, history, "What did Kate make in pottery?")


def dense_policy(tmp_path, name: str):
    policy = load_policy(LONG_SESSION)
    layer = policy.layers["recall__context"]
    collector = layer.collector.model_copy(update={"embeddings": name})
    layers = {**policy.layers, "recall__context": layer.model_copy(update={"collector": collector})}
    return small(policy.model_copy(update={"layers": layers}))


def test_a_missing_builtin_model_falls_back_to_lexical_search_with_a_warning(
    tmp_path, monkeypatch, caplog
) -> None:
    def unavailable(name: str):
        raise EmbeddingsUnavailableError("needs numpy: pip install 'ctxpolicy[embeddings]'")

    monkeypatch.setattr(minilm, "load_builtin_embeddings", unavailable)
    engine = PolicyEngine(dense_policy(tmp_path, "minilm"))
    history = chat(300)
    with caplog.at_level(logging.WARNING, logger="ctxpolicy"):
        first = engine.compose(
            process="react",
            system_prompt="s",
            state={"messages": [*history, HumanMessage("pottery?", id="q1")]},
        )
        second = engine.compose(
            process="react",
            system_prompt="s",
            state={"messages": [*history, HumanMessage("pottery vase?", id="q2")]},
        )
    for result in (first, second):
        assert any("lexical search only" in w for w in result.report.warnings)
        assert "pottery" in "\n".join(str(m.content) for m in result.messages)
    # logged once, however many calls fall back
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1


def test_the_builtin_minilm_finds_a_paraphrase_that_shares_no_word(tmp_path) -> None:
    engine = PolicyEngine(dense_policy(tmp_path, "minilm"))
    history = chat(40)
    history[10] = AIMessage("(day 5) Kate: I adopted a puppy, a golden retriever.", id="a5")
    result = engine.compose(
        process="react",
        system_prompt="s",
        state={"messages": [*history, HumanMessage("Does Kate have a dog?", id="q")]},
    )
    assert "golden retriever" in "\n".join(str(m.content) for m in result.messages)
    assert not any("lexical" in w for w in result.report.warnings)


def test_a_recalled_sentence_of_a_short_turn_shows_the_whole_turn() -> None:
    engine = PolicyEngine(small(load_policy(LONG_SESSION)))
    history = chat(300)
    turn = (
        "(day 20) Elise: Guess what happened at the weekend, Kate! My sister got married "
        "in Lisbon, by the sea. We danced until two in the morning, it was lovely."
    )
    history[40] = HumanMessage(turn, id="h20")
    result = engine.compose(
        process="react",
        system_prompt="s",
        state={"messages": [*history, HumanMessage("Where was the wedding, in Lisbon?", id="q")]},
    )
    (unit,) = result.report.layer("recall__context").recalled
    # the sentence that matched, with the turn's speaker, date and the line after it
    assert unit.text == turn
    assert unit.label == "#40 user"


def test_the_floor_counts_terms_per_thread_in_a_shared_index() -> None:
    def units(i: int, text: str) -> list[Unit]:
        return [Unit(f"m{i}", i, 0, "user", None, 1, 1, text)]

    index = SQLiteRecallIndex()
    index.add_messages("a", [(i, f"m{i}", units(i, f"Hey Kate, day {i}")) for i in range(100)])
    index.add_messages("b", [(i, f"m{i}", units(i, f"status {i} ok")) for i in range(100)])
    assert index.search("a", ["kate"], limit=5, floor=True) == []  # common in thread a
    index.add_messages("b", [(100, "m100", units(100, "Kate joined the on-call rota"))])
    # 1 of thread b's 101 units: not common there, though 101 of the index's 201 hold it
    (hit,) = index.search("b", ["kate"], limit=5, floor=True)
    assert hit.unit.message_id == "m100"
    index.add_messages("b", [(i, f"m{i}", units(i, f"Kate again {i}")) for i in range(101, 140)])
    assert index.search("b", ["kate"], limit=5, floor=True) == []  # now 40 of 140 units
