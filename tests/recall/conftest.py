"""Fixtures for the recall tests: the bundled long-session policy at a chosen window, and
PostgreSQL recall indexes on tables of each test's own."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ctxpolicy.recall.postgres import PostgresRecallIndex

ROOT = Path(__file__).resolve().parents[2]
LONG_SESSION = ROOT / "policies" / "long-session.yaml"


@pytest.fixture
def long_session(tmp_path: Path) -> Callable[..., Path]:
    """Write a copy of policies/long-session.yaml with another window or recall keys."""

    def make(*, window: int = 128000, recall: str = "backend: memory", name: str = "p") -> Path:
        text = LONG_SESSION.read_text(encoding="utf-8")
        text = text.replace("context_window: 128000", f"context_window: {window}")
        text = text.replace(
            "      backend: memory            # memory | sqlite (path / CTXPOLICY_RECALL_PATH) "
            "| postgres (CTXPOLICY_RECALL_DSN)",
            "\n".join(f"      {line}" for line in recall.splitlines()),
        )
        path = tmp_path / f"{name}.yaml"
        path.write_text(text, encoding="utf-8")
        return path

    return make


@pytest.fixture
def prefix() -> str:
    """A table prefix of this test's own."""
    return f"t_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def open_index(postgres_dsn: str, prefix: str) -> Iterator[Callable[[], PostgresRecallIndex]]:
    """``open_index()`` opens a `PostgresRecallIndex` on this test's tables; all closed after."""
    pytest.importorskip("psycopg", reason="psycopg 3 (the postgres extra)")
    from ctxpolicy.recall.postgres import PostgresRecallIndex

    opened: list[PostgresRecallIndex] = []

    def make() -> PostgresRecallIndex:
        index = PostgresRecallIndex(postgres_dsn, schema_prefix=prefix)
        opened.append(index)
        return index

    yield make
    for index in opened:
        index.close()
