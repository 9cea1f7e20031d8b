"""Chinese and mixed zh/en text in the PostgreSQL recall index, on the suite's real server:
the same session and questions as SQLite (tests/recall/test_chinese.py), and tables made
before segmentation upgraded when opened."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ctxpolicy.recall.index import query_terms
from ctxpolicy.recall.units import Unit

from .test_chinese import ENGLISH, MIXED, OWNER, best, check_session

psycopg = pytest.importorskip("psycopg", reason="psycopg 3 (the postgres extra)")

from ctxpolicy.recall.postgres import PostgresRecallIndex  # noqa: E402

pytestmark = pytest.mark.postgres


def test_postgres_finds_chinese_and_mixed_turns(
    open_index: Callable[[], PostgresRecallIndex],
) -> None:
    check_session(open_index())


def test_postgres_counts_segmented_words_as_bm25_length(
    postgres_dsn: str, prefix: str, open_index: Callable[[], PostgresRecallIndex]
) -> None:
    index = open_index()
    unit = Unit("m", 0, 0, "user", None, 1, 1, "数据仓库的调度", "")
    index.add_messages("t", [(0, "m", [unit])])
    with psycopg.connect(postgres_dsn) as conn:
        row = conn.execute(f"SELECT tokens, search_text FROM {prefix}_unit").fetchone()
        (units_tokens,) = conn.execute(f"SELECT tokens FROM {prefix}_message").fetchone()
    # 数据 仓库 数据仓库 的 调度: five words, as FTS5 counts them (not one Han run)
    assert row == (5, " 数据 仓库 数据仓库 的 调度 ")
    assert units_tokens == 5


#: The unit table as the version before segmentation made it (its generated column).
OLD_UNIT_TABLE = """
CREATE TABLE {p}_unit (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    thread text NOT NULL, message_id text NOT NULL, position bigint NOT NULL,
    part integer NOT NULL, role text NOT NULL, tool text,
    start_line integer NOT NULL, end_line integer NOT NULL,
    text text NOT NULL, context text NOT NULL, tokens integer NOT NULL,
    statement boolean NOT NULL DEFAULT false,
    search tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english'::regconfig, text), 'A') ||
        setweight(to_tsvector('english'::regconfig, coalesce(tool, '')), 'B') ||
        setweight(to_tsvector('english'::regconfig, context), 'C')) STORED)
"""


def test_postgres_tables_made_before_segmentation_are_upgraded_when_opened(
    postgres_dsn: str, prefix: str, open_index: Callable[[], PostgresRecallIndex]
) -> None:
    rows = [("owner", 0, OWNER, 1), ("mixed", 1, MIXED, 5), ("english", 2, ENGLISH, 11)]
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE {prefix}_message (thread text NOT NULL, message_id text NOT NULL, "
            "position bigint NOT NULL, units integer NOT NULL, tokens integer NOT NULL, "
            "fingerprint text, PRIMARY KEY (thread, message_id))"
        )
        conn.execute(OLD_UNIT_TABLE.format(p=prefix))
        for message_id, position, text, tokens in rows:
            conn.execute(
                f"INSERT INTO {prefix}_message VALUES ('t', %s, %s, 1, %s, NULL)",
                (message_id, position, tokens),
            )
            conn.execute(
                f"INSERT INTO {prefix}_unit (thread, message_id, position, part, role, "
                "start_line, end_line, text, context, tokens) "
                "VALUES ('t', %s, %s, 0, 'user', 1, 1, %s, '', %s)",
                (message_id, position, text, tokens),
            )
        # what the old table gives a Chinese question: nothing
        found = conn.execute(
            f"SELECT count(*) FROM {prefix}_unit WHERE search @@ phraseto_tsquery('english', "
            "'负责人')"
        ).fetchone()
        assert found == (0,)
    index = open_index()
    assert best(index, "用户画像表的负责人是谁") == OWNER
    assert best(index, "orders_daily 的分区") == MIXED
    assert best(index, "export bucket") == ENGLISH
    with psycopg.connect(postgres_dsn) as conn:
        tokens = dict(conn.execute(f"SELECT message_id, tokens FROM {prefix}_message"))
        copies = conn.execute(
            f"SELECT message_id FROM {prefix}_unit WHERE search_text IS NOT NULL "
            "ORDER BY message_id"
        ).fetchall()
    assert copies == [("mixed",), ("owner",)]  # the English unit keeps no copy
    assert tokens["english"] == 11  # untouched
    assert tokens["owner"] > 1  # recounted as words
    # a second index object on the same tables: already up to date
    assert index.search("t", query_terms("王磊"), limit=3)[0].unit.message_id == "owner"
    assert best(open_index(), "分区") == MIXED
