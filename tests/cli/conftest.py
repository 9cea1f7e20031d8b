"""Helpers for CLI tests: run `ctxpolicy.cli.main` in a temporary folder."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from ctxpolicy.cli import main

Files = Mapping[str, str | bytes]


def write_files(root: Path, files: Files) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


@pytest.fixture
def run_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., tuple[int, str, str]]:
    """``run_cli(files, *argv) -> (exit code, stdout, stderr)`` inside ``tmp_path``."""
    monkeypatch.chdir(tmp_path)
    for name in ("ENABLE_SHARE_CONTEXT", "POLICY", "TOKENIZER", "CONTEXT_WINDOW"):
        monkeypatch.delenv(f"CTXPOLICY_{name}", raising=False)

    def run(files: Files, *argv: str) -> tuple[int, str, str]:
        write_files(tmp_path, files)
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run
