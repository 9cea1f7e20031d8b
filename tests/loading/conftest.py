"""Fixtures for loader tests: write policy files into a temporary folder."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("ENABLE_SHARE_CONTEXT", "POLICY", "TOKENIZER", "CONTEXT_WINDOW"):
        monkeypatch.delenv(f"CTXPOLICY_{name}", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str, str | bytes], Path]:
    """``write(relative_name, content) -> Path`` under ``tmp_path``."""

    def _write(name: str, content: str | bytes) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return Path(name)

    return _write
