"""Fixtures for the editing tests: a private copy of the bundled policies."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def policies(tmp_path: Path) -> Path:
    """A copy of the repository's ``policies/`` folder (safe to edit)."""
    target = tmp_path / "policies"
    shutil.copytree(REPO / "policies", target)
    return target


def run_cli(*argv: str) -> int:
    """Run ``ctxpolicy ARGV...`` in-process and return its exit code."""
    from ctxpolicy.cli import main

    return main(list(argv))


def changed_lines(before: bytes, after: bytes) -> list[tuple[int, bytes, bytes]]:
    """(line number, old, new) for every line that differs; line counts must match."""
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    assert len(old) == len(new), "the edit added or removed lines"
    return [(i + 1, a, b) for i, (a, b) in enumerate(zip(old, new)) if a != b]


def stray_files(folder: Path) -> list[str]:
    """Temporary files an edit might have left behind."""
    return sorted(p.name for p in folder.rglob(".ctxpolicy-*"))
