"""Fixtures for the recall tests: the bundled long-session policy at a chosen window."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

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
