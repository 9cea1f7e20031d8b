"""Shared helpers of the file-safety tests: a private policy folder and candidate texts."""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Temporary files of `ctxpolicy.atomic` (the write's ``.tmp`` and the candidate checked).
TEMP_GLOB = ".ctxpolicy-*"


def copy_policies(into: Path) -> Path:
    """A private copy of ``policies/`` (base.yaml, templates, teams)."""
    target = into / "policies"
    shutil.copytree(ROOT / "policies", target)
    return target


def temp_files(folder: Path) -> set[str]:
    return {p.name for p in folder.rglob(TEMP_GLOB)}


def run_set(*argv: str) -> tuple[int, str]:
    """``ctxpolicy set ARGV`` in-process: (exit code, stdout + stderr)."""
    from ctxpolicy.cli import main

    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        code = main(["set", *argv])
    return code, sink.getvalue()


def text_after(policy: Path, scratch: Path, edits: list[tuple[str, str]]) -> bytes:
    """The bytes ``policy`` has after ``edits`` (applied to a copy of its folder)."""
    copy = scratch / f"s{len(list(scratch.glob('s*')))}"
    shutil.copytree(policy.parent, copy)
    target = copy / policy.name
    for key, value in edits:
        code, out = run_set(str(target), key, value)
        assert code == 0, out
    return target.read_bytes()
