"""Chinese and mixed zh/en text in recall: segmentation, the SQLite index (and its upgrade
from the layout before segmentation), and the long-session policy end to end.

The PostgreSQL backend runs the same session in tests/recall/test_chinese_postgres.py.
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxpolicy import PolicyEngine
from ctxpolicy.recall.index import RecallIndex, RecallIndexVersionError, query_terms
from ctxpolicy.recall.ingest import HistorySync
from ctxpolicy.recall.segment import segment_text, words
from ctxpolicy.recall.sqlite import SCHEMA_VERSION, SQLiteRecallIndex
from ctxpolicy.recall.units import Unit

ROOT = Path(__file__).resolve().parents[2]

OWNER = "用户画像表 ads.user_profile 的负责人是王磊，有问题直接找他。"
SCHEDULE = "数据仓库的每日调度时间改到凌晨三点（03:00），避开业务高峰。"
MIXED = "把 dwd.orders_daily 的分区改成 dt=2024-06-01，然后重跑下游任务。"
ENGLISH = "The nightly export job writes to bucket s3://warehouse-exports every day."
FILLER = (
    "好的，收到。",
    "我先看一下监控面板，稍等。",
    "今天的任务都跑完了吗？",
    "都跑完了，没有报错。",
    "辛苦了，明天见。",
    "这个问题我晚点再确认一下。",
)


def zh_session(turns: int = 40) -> list[BaseMessage]:
    """A Chinese data-platform chat: filler turns, three facts (one mixed zh/en), an English
    line and a tool result, each with a stable id."""
    facts = {3: OWNER, 9: SCHEDULE, 15: MIXED, 21: ENGLISH}
    history: list[BaseMessage] = []
    for i in range(turns):
        history.append(HumanMessage(FILLER[i % len(FILLER)] + f"（第{i}轮）", id=f"h{i}"))
        history.append(AIMessage(facts.get(i, FILLER[(i + 3) % len(FILLER)]), id=f"a{i}"))
        if i == 27:
            call = {"name": "run_sql", "args": {"sql": "select 1"}, "id": "c27"}
            history.append(AIMessage("", tool_calls=[call], id="call27"))
            history.append(
                ToolMessage(
                    "表名 | 行数\ndwd.orders_daily | 1203311\nads.user_profile | 88210",
                    tool_call_id="c27",
                    id="t27",
                )
            )
    return history


def best(index: RecallIndex, question: str) -> str:
    """The text of the best unit for ``question`` (empty when nothing matches)."""
    hits = index.search("t", query_terms(question), limit=3)
    return hits[0].unit.text if hits else ""


def check_session(index: RecallIndex) -> None:
    """The questions every backend answers from `zh_session`."""
    HistorySync(index).sync("t", zh_session())
    # a Chinese question finds the Chinese turn that states the fact
    assert best(index, "用户画像表的负责人是谁？") == OWNER
    assert best(index, "每天的调度时间是几点？") == SCHEDULE
    # mixed text, by either language
    assert best(index, "dwd.orders_daily dt") == MIXED
    assert best(index, "分区改成了什么") == MIXED
    assert best(index, "orders_daily 的分区") == MIXED
    # English is found as before (stemmed: exports -> export)
    assert best(index, "Which bucket does the export use?") == ENGLISH
    # a tool result: its header line by Chinese words, its row by the table name
    hits = index.search("t", query_terms("orders_daily 行数"), limit=2)
    assert [(h.unit.message_id, h.unit.tool) for h in hits] == [("t27", "run_sql")] * 2
    assert "1203311" in hits[1].unit.text
    # forgetting a Chinese message removes its segmented words from the index too
    assert index.forget_messages("t", ["a3"]) == 1
    assert index.search("t", ["王磊"], limit=3) == []
    assert best(index, "每日调度") == SCHEDULE


def test_segment_text_cuts_han_runs_and_leaves_everything_else_as_it_is() -> None:
    assert segment_text(ENGLISH) is ENGLISH  # not even copied: English indexes as before
    assert segment_text("数据仓库的调度") == " 数据 仓库 数据仓库 的 调度 "
    assert segment_text("把 dwd.orders_daily 的分区改成dt=2024") == (
        " 把  dwd.orders_daily  的 分区 改成 dt=2024"
    )
    assert words("分区改成DT=2024-06-01") == ["分区", "改成", "dt", "2024", "06", "01"]
    assert words(ENGLISH) == re.findall(r"\w+", ENGLISH.lower())


def test_query_terms_cut_chinese_and_drop_chinese_stopwords() -> None:
    assert query_terms("用户画像表的负责人是谁？") == [
        "用户",
        "画像",
        "表",  # a one-character Han word is kept (a one-letter Latin word is not)
        "负责",
        "责人",
        "负责人",
    ]
    assert query_terms(MIXED) == [
        "dwd",
        "orders_daily",
        "分区",
        "改成",
        "dt",
        "2024",
        "06",
        "01",
        "重跑",
        "下游",
        "任务",
    ]
    # English is split exactly as before
    assert query_terms("What is the orders_daily partition now?") == [
        "orders_daily",
        "partition",
    ]
    assert query_terms("现在是什么？吗呢") == []
    assert query_terms("x 表 y 的 7") == ["表", "7"]


def test_sqlite_finds_chinese_and_mixed_turns() -> None:
    index = SQLiteRecallIndex()
    check_session(index)
    (problems,) = index._conn.execute(
        "SELECT count(*) FROM recall_fts WHERE recall_fts MATCH '王磊'"
    ).fetchone()
    assert problems == 0
    index._conn.execute("INSERT INTO recall_fts (recall_fts) VALUES ('integrity-check')")


def test_english_units_are_indexed_and_scored_as_before() -> None:
    index = SQLiteRecallIndex()
    units = [
        Unit(f"m{i}", i, 0, "user", None, 1, 1, f"deploy step {i} of the api") for i in range(5)
    ]
    index.add_messages("t", [(u.position, u.message_id, [u]) for u in units])
    stored = index._conn.execute(
        "SELECT count(*) FROM recall_unit WHERE search_text IS NOT NULL "
        "OR search_context IS NOT NULL"
    ).fetchone()
    assert stored == (0,)  # no copy kept: FTS reads the text itself
    assert index.search("t", ["step", "3"], limit=2)[0].unit.message_id == "m3"


#: The layout written by ctxpolicy before segmentation (layout version 0).
OLD_LAYOUT = """
CREATE TABLE recall_message (
    thread TEXT NOT NULL, message_id TEXT NOT NULL, position INTEGER NOT NULL,
    fingerprint TEXT, PRIMARY KEY (thread, message_id)
) WITHOUT ROWID;
CREATE TABLE recall_unit (
    id INTEGER PRIMARY KEY, thread TEXT NOT NULL, message_id TEXT NOT NULL,
    position INTEGER NOT NULL, part INTEGER NOT NULL, role TEXT NOT NULL, tool TEXT,
    start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, text TEXT NOT NULL,
    context TEXT NOT NULL, statement INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX recall_unit_message ON recall_unit (thread, message_id);
CREATE VIRTUAL TABLE recall_fts USING fts5(
    text, context, tool, thread UNINDEXED,
    content='recall_unit', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
);
"""


def old_index(path: Path, texts: dict[str, str]) -> None:
    """A file as the previous version wrote it: whole Han runs as single FTS tokens."""
    with sqlite3.connect(path) as conn:
        conn.executescript(OLD_LAYOUT)
        for position, (message_id, text) in enumerate(texts.items()):
            conn.execute(
                "INSERT INTO recall_message VALUES ('t', ?, ?, NULL)", (message_id, position)
            )
            row = conn.execute(
                "INSERT INTO recall_unit (thread, message_id, position, part, role, tool, "
                "start_line, end_line, text, context) "
                "VALUES ('t', ?, ?, 0, 'user', NULL, 1, 1, ?, '')",
                (message_id, position, text),
            ).lastrowid
            conn.execute(
                "INSERT INTO recall_fts (rowid, text, context, tool, thread) "
                "VALUES (?, ?, '', '', 't')",
                (row, text),
            )


def test_a_file_of_the_previous_layout_is_upgraded_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old_index(path, {"owner": OWNER, "mixed": MIXED, "english": ENGLISH})
    with sqlite3.connect(path) as conn:  # what the old layout gave a Chinese question
        found = conn.execute("SELECT rowid FROM recall_fts WHERE recall_fts MATCH '负责人'")
        assert found.fetchall() == []
    index = SQLiteRecallIndex(path)
    assert index._conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    assert best(index, "用户画像表的负责人是谁") == OWNER
    assert best(index, "orders_daily 的分区") == MIXED
    assert best(index, "export bucket") == ENGLISH
    index._conn.execute("INSERT INTO recall_fts (recall_fts) VALUES ('integrity-check')")
    assert index.forget_messages("t", ["owner"]) == 1
    assert index.search("t", ["负责人"], limit=3) == []
    index.close()
    # opened again: already up to date, nothing redone, everything still found
    again = SQLiteRecallIndex(path)
    assert best(again, "分区") == MIXED
    assert again.indexed_messages("t") == [(1, "mixed", None), (2, "english", None)]


def test_a_file_of_a_newer_layout_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    SQLiteRecallIndex(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(RecallIndexVersionError, match="layout version 2"):
        SQLiteRecallIndex(path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION + 1,)


def test_the_long_session_policy_recalls_a_chinese_fact(
    long_session: Callable[..., Path],
) -> None:
    engine = PolicyEngine.from_file(long_session(window=3000))
    history = zh_session(300)
    result = engine.compose(
        process="react",
        system_prompt="你是数据平台的值班助手。",
        state={"messages": [*history, HumanMessage("用户画像表的负责人是谁？", id="q")]},
    )
    text = "\n".join(str(m.content) for m in result.messages)
    assert "王磊" in text
    layer = result.report.layer("recall__context")
    assert any("王磊" in unit.text for unit in layer.recalled)
    assert "h3" not in {getattr(m, "id", None) for m in result.messages}  # not the history


SUBPROCESS = """
import socket, sys
def refused(*args, **kwargs):
    raise OSError("network is off in this test")
socket.socket = refused
socket.create_connection = refused
from ctxpolicy.recall.index import query_terms
from ctxpolicy.recall.sqlite import SQLiteRecallIndex
from ctxpolicy.recall.units import Unit
index = SQLiteRecallIndex()
english = Unit("e", 0, 0, "user", None, 1, 1, "the export bucket is warehouse")
index.add_messages("t", [(0, "e", [english])])
index.search("t", query_terms("export bucket?"), limit=3)
print("rjieba" in sys.modules)
chinese = Unit("z", 1, 0, "user", None, 1, 1, "用户画像表的负责人是王磊")
index.add_messages("t", [(1, "z", [chinese])])
print(index.search("t", query_terms("负责人是谁"), limit=3)[0].unit.message_id)
print("rjieba" in sys.modules)
"""


def test_the_segmenter_loads_only_for_han_text_offline_silent_and_writing_nothing(
    tmp_path: Path,
) -> None:
    home, cache, temp, work = (tmp_path / name for name in ("home", "cache", "tmp", "work"))
    for folder in (home, cache, temp, work):
        folder.mkdir()
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_CACHE_HOME": str(cache),
        "TMPDIR": str(temp),
        "PYTHONPATH": str(ROOT),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    done = subprocess.run(
        [sys.executable, "-c", SUBPROCESS],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "z", "True"]
    assert done.stderr == ""  # nothing printed (jieba would log its dictionary loading)
    assert [p for folder in (home, cache, temp, work) for p in folder.rglob("*")] == []
