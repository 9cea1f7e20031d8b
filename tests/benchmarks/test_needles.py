"""The needle generator of the retention benchmark (benchmarks/needles.py) and its runner."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, ToolMessage

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import needles  # noqa: E402
import quality  # noqa: E402

N = 40


@pytest.fixture(scope="module")
def session() -> needles.Session:
    return needles.make_session(N, seed=7, per_cell=2)


def _dump(session: needles.Session) -> list[tuple[str | None, str, str]]:
    return [(m.id, m.type, needles.message_text(m)) for m in session.messages]


def test_deterministic_for_a_seed(session):
    again = needles.make_session(N, seed=7, per_cell=2)
    assert _dump(again) == _dump(session)
    assert again.facts == session.facts
    assert [q.text for q in again.queries] == [q.text for q in session.queries]
    other = needles.make_session(N, seed=8, per_cell=2)
    assert _dump(other) != _dump(session)


def test_shape(session):
    cells = len(needles.KINDS) * (len(needles.DEPTHS) - 1)
    assert len(session.facts) == 2 * cells + needles.RECENT_PER_KIND * len(needles.KINDS)
    assert len(session.queries) == 2 * len(session.facts)
    ids = [m.id for m in session.messages]
    assert all(ids) and len(set(ids)) == len(ids)
    assert session.messages[0].type == "human"
    calls = {}
    for m in session.messages:
        if isinstance(m, AIMessage):
            calls.update({c["id"]: c for c in m.tool_calls})
        if isinstance(m, ToolMessage):
            assert m.tool_call_id in calls
    for fact in session.facts:
        assert fact.queries["own"] != fact.queries["paraphrased"]
        assert fact.value not in fact.queries["own"] + fact.queries["paraphrased"]


def test_every_value_appears_once_where_planted(session):
    session.verify()
    texts = [needles.message_text(m) for m in session.messages]
    whole = "\n".join(texts)
    by_id = dict(zip((m.id for m in session.messages), texts, strict=True))
    for fact in session.facts:
        assert fact.value in by_id[fact.message_id]
        for value in fact.values:
            assert whole.count(value) == 1, (fact.id, value)


def test_depths(session):
    for fact in session.facts:
        lo, hi = needles.depth_range(fact.depth, N)
        assert lo <= fact.interaction < hi
        if fact.depth == "recent":
            assert fact.interaction >= N - needles.RECENT


def test_corrected_new_value_later_than_old(session):
    corrected = [f for f in session.facts if f.kind == "corrected"]
    assert corrected
    texts = [needles.message_text(m) for m in session.messages]
    for fact in corrected:
        assert fact.old_value is not None and fact.old_value != fact.value
        old_at = next(i for i, t in enumerate(texts) if fact.old_value in t)
        new_at = next(i for i, t in enumerate(texts) if fact.value in t)
        assert old_at < new_at
        assert fact.old_interaction is not None and fact.old_interaction < fact.interaction


def test_buried_facts_sit_in_a_long_tool_message(session):
    buried = [f for f in session.facts if f.kind == "buried"]
    assert buried
    by_id = {m.id: m for m in session.messages}
    for fact in buried:
        message = by_id[fact.message_id]
        assert isinstance(message, ToolMessage)
        lines = str(message.content).split("\n")
        assert len(lines) >= needles.DUMP_LINES[0]
        assert sum(fact.value in line for line in lines) == 1
        assert lines[0].find(fact.value) == -1 and lines[-1].find(fact.value) == -1


def test_decoys_differ_from_the_value(session):
    decoys = [f for f in session.facts if f.kind == "decoy"]
    assert decoys
    whole = "\n".join(needles.message_text(m) for m in session.messages)
    for fact in decoys:
        assert len(fact.decoys) == 2
        for decoy in fact.decoys:
            assert decoy != fact.value
            assert decoy not in fact.value and fact.value not in decoy
            assert decoy in whole
        assert "production" in fact.queries["own"]


def test_history_for_appends_the_query(session):
    query = session.queries[0]
    history = session.history_for(query)
    assert history[:-1] == session.messages
    assert history[-1].type == "human" and history[-1].content == query.text
    assert history[-1].id == query.id


def test_quick_runner_at_100(tmp_path, capsys):
    assert quality.main(["--quick", "--sizes", "100", "--out-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| method | overall |" in out
    for name in quality.METHODS:
        assert f"| {name}" in out
    report = json.loads((tmp_path / "quality-quick.json").read_text())
    assert (tmp_path / "quality-quick.md").read_text().startswith("# Needle retention")
    results = report["results"]["100"]
    for name in ("trim_messages", "drop_oldest", "bm25", "long-session"):
        assert "error" not in results[name], results[name]
        assert results[name]["over_budget"] == 0
        assert results[name]["asked"] == results[name]["of"] == 32
    # keeping the newest turns retains the recent facts
    assert results["drop_oldest"]["by_depth"]["recent"] == 100.0
    assert report["targets"]["n"] == 100
    assert not list(tmp_path.glob(".*.tmp"))


def test_readme_block_is_regenerated_from_a_report(tmp_path):
    report = {
        "results": {
            "100": {"m": {"retention": 50.0}},
            "10000": {
                "m": {
                    "retention": 25.0,
                    "by_wording": {"own": 40.0, "paraphrased": 10.0},
                    "by_kind": {"buried": 30.0},
                    "stale_only": 0.0,
                    "compose_p50_ms": 12.5,
                },
                "x": {"error": "boom"},
            },
        }
    }
    readme = tmp_path / "README.md"
    readme.write_text(
        f"intro\n{quality.README_START}\nold table\n{quality.README_END}\nafter\n", encoding="utf-8"
    )
    assert quality.update_readme(report, path=readme)
    text = readme.read_text(encoding="utf-8")
    assert "old table" not in text
    assert text.startswith("intro\n") and text.endswith("after\n")
    assert "| m | 50.0 | 25.0 | 40.0 | 10.0 | 30.0 | 0.0 | 12.50 |" in text
    assert "| x | - | error |" in text
    (tmp_path / "plain.md").write_text("no markers\n", encoding="utf-8")
    assert not quality.update_readme(report, path=tmp_path / "plain.md")
