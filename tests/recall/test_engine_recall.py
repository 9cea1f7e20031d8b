"""The recall layer through PolicyEngine: the long-session contract, end to end."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from ctxpolicy import CollectorError, PolicyEngine, PolicyValidationError, load_policy
from ctxpolicy.tokens import get_tokenizer

from .conftest import LONG_SESSION

SYSTEM = "You are the on-call SRE agent."
TOK = get_tokenizer("cl100k_base")


def session(turns: int, *, facts: dict[int, str] | None = None) -> list:
    """A ReAct-like session; ``facts`` puts a line into the tool dump of turn i."""
    facts = facts or {}
    out: list = []
    for i in range(turns):
        out.append(
            HumanMessage(f"Turn {i}: check service svc{i % 13} and the dashboards.", id=f"h{i}")
        )
        out.append(
            AIMessage(
                "",
                tool_calls=[{"name": "get_logs", "args": {"svc": i % 13}, "id": f"c{i}"}],
                id=f"a{i}",
            )
        )
        lines = [f"10:{j:02d} svc{i % 13} INFO request ok latency={j}ms" for j in range(30)]
        if i in facts:
            lines.insert(17, facts[i])
        out.append(ToolMessage("\n".join(lines), tool_call_id=f"c{i}", id=f"t{i}"))
        out.append(AIMessage(f"svc{i % 13} looks fine at turn {i}.", id=f"r{i}"))
    return out


def prompt_text(messages) -> str:
    return "\n".join(str(m.content) for m in messages)


def ask(engine: PolicyEngine, history: list, question: str, qid: str = "q", **kw):
    return engine.compose(
        process="react",
        system_prompt=SYSTEM,
        state={"messages": [*history, HumanMessage(question, id=qid)]},
        **kw,
    )


def test_bundled_policy_needs_no_wiring_and_recalls_a_buried_line() -> None:
    engine = PolicyEngine.from_file(LONG_SESSION)
    history = session(400, facts={3: "10:17 svc3 WARN failover region switched to eu-west-3"})
    result = ask(engine, history, "Which region did the failover switch to?")
    assert "eu-west-3" in prompt_text(result.messages)
    layer = result.report.layer("recall__context")
    assert layer.included and layer.source == "collector"
    (unit,) = [u for u in layer.recalled if "eu-west-3" in u.text]
    assert unit.label == "#14 tool get_logs L18"
    assert unit.source == "session" and unit.score > 0
    assert "1601 new message(s) indexed" in " ".join(layer.notes)
    # the next call indexes only the new message, and the index is still warm
    result = ask(engine, history, "failover region?", qid="q2")
    assert "1 new message(s) indexed" in " ".join(result.report.layer("recall__context").notes)
    assert "eu-west-3" in prompt_text(result.messages)


def test_recalled_units_never_repeat_the_kept_history(long_session) -> None:
    engine = PolicyEngine.from_file(long_session(window=6000))
    history = session(
        200,
        facts={
            i: f"10:17 svc{i % 13} WARN disk usage at {80 + i % 10}% on db-{i}"
            for i in range(0, 200, 7)
        },
    )
    result = ask(engine, history, "disk usage warnings on the db hosts?")
    layer = result.report.layer("recall__context")
    assert layer.recalled
    kept_ids = {m.id for m in result.messages if m.id}
    assert not {u.message_id for u in layer.recalled} & kept_ids
    assert result.report.total_tokens <= result.report.available_tokens
    assert TOK.count_messages(result.messages) == result.report.total_tokens
    # the report's JSON carries the recalled units with label, source and score
    data = json.loads(json.dumps(result.report.to_dict()))
    recalled = next(x for x in data["layers"] if x["name"] == "recall__context")["recalled"]
    assert {"label", "source", "score", "tokens", "message_id", "text"} <= set(recalled[0])


def test_correction_wins_in_the_prompt(long_session) -> None:
    engine = PolicyEngine.from_file(long_session(window=6000))
    history = session(300, facts={5: "10:17 the orders replica host is db-old-1"})
    history[4 * 150] = HumanMessage(
        "Correction: the orders replica host is now db-new-9.", id="h150"
    )
    result = ask(engine, history, "What is the orders replica host?")
    text = prompt_text(result.messages)
    assert "db-new-9" in text
    assert text.index("db-old-1") < text.index("db-new-9")


def test_threads_are_kept_apart(long_session) -> None:
    engine = PolicyEngine.from_file(long_session(window=6000))
    one = session(150, facts={2: "10:17 the vault token id is TOK-111"})
    two = session(150, facts={2: "10:17 the vault token id is TOK-222"})
    r1 = ask(engine, one, "vault token id?", thread_id="thread-1")
    r2 = ask(engine, two, "vault token id?", thread_id="thread-2")
    assert "TOK-111" in prompt_text(r1.messages) and "TOK-222" not in prompt_text(r1.messages)
    assert "TOK-222" in prompt_text(r2.messages) and "TOK-111" not in prompt_text(r2.messages)


def test_sqlite_file_backend_survives_a_restart(long_session, tmp_path: Path, monkeypatch) -> None:
    db = tmp_path / "recall.sqlite3"
    monkeypatch.setenv("CTXPOLICY_RECALL_PATH", str(db))
    path = long_session(window=6000, recall="backend: sqlite")
    history = session(150, facts={1: "10:17 build artifact digest is sha-7f3a9c"})
    first = ask(PolicyEngine.from_file(path), history, "artifact digest?")
    assert "sha-7f3a9c" in prompt_text(first.messages)
    second = ask(PolicyEngine.from_file(path), history, "artifact digest?", qid="q2")
    notes = " ".join(second.report.layer("recall__context").notes)
    assert "1 new message(s) indexed" in notes
    assert "sha-7f3a9c" in prompt_text(second.messages)


def test_sqlite_backend_without_a_path_fails_clearly_or_is_skipped(
    long_session, monkeypatch
) -> None:
    monkeypatch.delenv("CTXPOLICY_RECALL_PATH", raising=False)
    engine = PolicyEngine.from_file(long_session(recall="backend: sqlite"))
    with pytest.raises(CollectorError, match="CTXPOLICY_RECALL_PATH"):
        ask(engine, session(3), "anything?")
    engine = PolicyEngine.from_file(
        long_session(recall="backend: sqlite\non_error: skip", name="s")
    )
    result = ask(engine, session(3), "anything?")
    (skip,) = result.report.skipped
    assert skip.layer == "recall__context" and "CTXPOLICY_RECALL_PATH" in skip.error


def test_acompose_recalls_too() -> None:
    engine = PolicyEngine.from_file(LONG_SESSION)
    history = session(300, facts={4: "10:17 the canary weight is 17 percent"})
    result = asyncio.run(
        engine.acompose(
            process="react",
            system_prompt=SYSTEM,
            state={"messages": [*history, HumanMessage("canary weight?", id="q")]},
        )
    )
    assert "17 percent" in prompt_text(result.messages)


def test_record_indexes_ahead_of_compose_and_only_once() -> None:
    engine = PolicyEngine.from_file(LONG_SESSION)
    history = session(20)
    assert engine.record(history, thread_id="x") == 80
    assert engine.record(history, thread_id="x") == 0
    result = ask(engine, history, "svc4?", thread_id="x")
    assert "1 new message(s) indexed" in " ".join(result.report.layer("recall__context").notes)


def test_contexts_override_replaces_recall() -> None:
    engine = PolicyEngine.from_file(LONG_SESSION)
    result = ask(engine, session(5), "x?", contexts={"recall__context": "given"})
    assert result.report.layer("recall__context").source == "contexts"
    assert "given" in prompt_text(result.messages)


def test_a_recall_layer_given_at_runtime_holds_no_room_for_recall() -> None:
    engine = PolicyEngine.from_file(LONG_SESSION)
    history = session(300)
    recalled = ask(engine, history, "x?").report
    given = ask(engine, history, "x?", contexts={"recall__context": "given"}).report
    # a recall layer's whole cap is held while its text is still to come; a text given
    # at runtime is all the layer gets, and the room it leaves goes to the history
    assert given.layer("recall__context").tokens < 10
    assert given.layer("checkpoint_messages").cap > recalled.layer("checkpoint_messages").cap


@pytest.mark.parametrize(
    ("snippet", "message"),
    [
        ("backend: mongo", "backend"),
        ("memory_limit: 0", "memory_limit"),
        ("max_unit_chars: 5", "max_unit_chars"),
        ("weights: {bm25: -1}", "bm25"),
        ("colour: red", "colour"),
        ("dsn_env: 9BAD", "dsn_env"),
    ],
)
def test_bad_recall_keys_are_reported_with_their_line(
    long_session, snippet: str, message: str
) -> None:
    path = long_session(recall=snippet)
    with pytest.raises(PolicyValidationError) as info:
        load_policy(path)
    lines = path.read_text().splitlines()
    expected = next(
        i
        for i, line in enumerate(lines, 1)
        if snippet.split(":", maxsplit=1)[0] in line and "    " in line
    )
    issue = info.value.issues[0]
    assert message in (issue.message + issue.path)
    assert issue.line == expected


def test_recall_takes_the_room_the_history_leaves_without_moving_its_cut(long_session) -> None:
    engine = PolicyEngine.from_file(long_session(window=9000))
    facts = {
        i: f"10:17 svc{i % 13} WARN cache shard {i} at 9{i}% on db-{i}" for i in range(0, 300, 2)
    }
    history = session(300, facts=facts)
    result = ask(engine, history, "cache shard warnings on the db hosts?")
    report = result.report
    recall = report.layer("recall__context")
    assert recall.cap is not None and recall.base_cap is not None
    assert recall.cap > recall.base_cap  # it was given room the others left
    assert not recall.cuts  # and its text fitted that room whole
    assert report.total_tokens <= report.available_tokens
    # the history kept exactly what it keeps when recall finds nothing (a query of
    # stopwords only, as many tokens as the real one)
    question = "cache shard warnings on the db hosts?"
    nothing = "the" + " the" * (TOK.count(question) - 1)
    assert TOK.count(nothing) == TOK.count(question)
    empty = ask(engine, history, nothing)
    assert empty.report.layer("recall__context").tokens == 0
    assert report.layer("checkpoint_messages").messages == (
        empty.report.layer("checkpoint_messages").messages
    )


def test_an_engine_with_a_smaller_window_shares_the_warm_index(long_session) -> None:
    engine = PolicyEngine.from_file(long_session(window=8000))
    history = session(100, facts={2: "10:17 the artifact digest is sha-51f0"})
    ask(engine, history, "artifact digest?")
    smaller = engine.with_context_window(6000)
    assert smaller.plan("react").available_tokens < engine.plan("react").available_tokens
    result = ask(smaller, history, "artifact digest?", qid="q2")
    notes = " ".join(result.report.layer("recall__context").notes)
    assert "1 new message(s) indexed" in notes  # only the new query: the index was warm
    assert "sha-51f0" in prompt_text(result.messages)
    with pytest.raises(ValueError, match="> 0"):
        engine.with_context_window(0)
    with pytest.raises(TypeError, match="int"):
        engine.with_context_window(1.5)  # type: ignore[arg-type]


def test_a_wide_cap_that_does_not_hold_falls_back_to_the_held_cap(
    long_session, monkeypatch
) -> None:
    engine = PolicyEngine.from_file(long_session(window=6000))
    facts = {
        i: f"10:17 svc{i % 13} WARN cache shard {i} at 9{i}% on db-{i}" for i in range(0, 200, 2)
    }
    history = session(200, facts=facts)
    ask(engine, history, "warm up the index", qid="w")
    # claim far more room than the prompt has: the composed layer would be cut
    monkeypatch.setattr(PolicyEngine, "_wide_cap", staticmethod(lambda call, comp, name: 50_000))
    index = engine.recaller("recall__context").index
    searches: list[object] = []
    original = index.search
    monkeypatch.setattr(index, "search", lambda *a, **k: searches.append(a) or original(*a, **k))
    result = ask(engine, history, "cache shard warnings on the db hosts?")
    recall = result.report.layer("recall__context")
    assert recall.recalled and not recall.cuts  # packed again within its own cap
    assert recall.tokens <= (recall.base_cap or 0)
    assert result.report.total_tokens <= result.report.available_tokens
    assert len(searches) == 1  # the second packing reused the first search
