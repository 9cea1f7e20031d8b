"""Atomic writes: all or nothing, mode kept, no temporary file left behind."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ctxpolicy import atomic
from ctxpolicy.atomic import locked_for_update, sibling_temp_file, write_text_atomic


def test_write_replaces_content_and_keeps_mode(tmp_path: Path) -> None:
    target = tmp_path / "p.yaml"
    target.write_text("old\n")
    target.chmod(0o604)
    write_text_atomic(target, "new\r\n")
    assert target.read_bytes() == b"new\r\n"  # no newline translation
    assert stat.S_IMODE(target.stat().st_mode) == 0o604
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.yaml"]


def test_new_file_gets_umask_mode_not_0600(tmp_path: Path) -> None:
    target = tmp_path / "new.yaml"
    old = os.umask(0o022)
    try:
        write_text_atomic(target, "x\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_failure_during_rename_leaves_file_and_no_temp(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "p.yaml"
    target.write_text("old\n")

    def boom(self: Path, other: Path) -> Path:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "replace", boom)
    with pytest.raises(OSError, match="No space"):
        write_text_atomic(target, "new\n")
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.yaml"]


def test_failure_during_write_leaves_no_temp(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "p.yaml"
    target.write_text("old\n")

    def boom(fd: int) -> None:
        raise OSError(5, "I/O error")

    monkeypatch.setattr(atomic.os, "fsync", boom)
    with pytest.raises(OSError, match="I/O"):
        write_text_atomic(target, "new\n")
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.yaml"]


def test_no_overwrite_mode(tmp_path: Path) -> None:
    target = tmp_path / "p.yaml"
    write_text_atomic(target, "first\n", overwrite=False)
    with pytest.raises(FileExistsError):
        write_text_atomic(target, "second\n", overwrite=False)
    assert target.read_text() == "first\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.yaml"]


def test_sibling_temp_file_is_removed_even_on_error(tmp_path: Path) -> None:
    target = tmp_path / "p.toml"
    with pytest.raises(RuntimeError), sibling_temp_file(target, "x = 1\n") as temp:
        assert temp.parent == tmp_path and temp.suffix == ".toml"
        assert temp.read_text() == "x = 1\n"
        raise RuntimeError
    assert list(tmp_path.iterdir()) == []


def test_lock_follows_replaced_file(tmp_path: Path) -> None:
    target = tmp_path / "p.yaml"
    target.write_text("a\n")
    with locked_for_update(target):
        write_text_atomic(target, "b\n")
    with locked_for_update(target):  # re-acquires on the new inode without deadlock
        assert target.read_text() == "b\n"


def test_lock_on_missing_file_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError), locked_for_update(tmp_path / "missing.yaml"):
        pass
