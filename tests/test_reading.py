"""`read_regular_file`: the one safe read of a user-named path (policies, templates, set)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ctxpolicy.errors import CtxPolicyError
from ctxpolicy.loading.read import FileTooLargeError, NotRegularFileError, read_regular_file


def test_reads_a_regular_file(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_bytes(b"version: 1\n")
    assert read_regular_file(path, max_bytes=100) == b"version: 1\n"


def test_refuses_fifo_folder_and_device(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    for path in (fifo, tmp_path, Path("/dev/zero")):
        with pytest.raises(NotRegularFileError):
            read_regular_file(path, max_bytes=100)


def test_a_fifo_swapped_in_after_the_check_is_refused_not_waited_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first check passes (it sees a regular file); the opened descriptor is a FIFO
    with no writer. A blocking open would hang here: the non-blocking open plus the
    fstat check refuse it."""
    fifo = tmp_path / "swapped.yaml"
    os.mkfifo(fifo)
    real_stat = Path.stat

    def lying_stat(self: Path, **kwargs: object) -> os.stat_result:
        result = real_stat(self, **kwargs)  # type: ignore[arg-type]
        if self == fifo:
            fields = list(result)
            fields[0] = stat.S_IFREG | 0o644
            return os.stat_result(fields)
        return result

    monkeypatch.setattr(Path, "stat", lying_stat)
    with pytest.raises(NotRegularFileError):
        read_regular_file(fifo, max_bytes=100)


def test_size_limit_before_and_while_reading(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"x" * 101)
    with pytest.raises(FileTooLargeError) as info:
        read_regular_file(path, max_bytes=100)
    assert (info.value.size, info.value.limit, info.value.grew) == (101, 100, False)


def test_read_errors_are_ctxpolicy_errors_and_os_errors() -> None:
    for error in (NotRegularFileError, FileTooLargeError):
        assert issubclass(error, CtxPolicyError) and issubclass(error, OSError)


def _stat_reporting_size(monkeypatch: pytest.MonkeyPatch, path: Path, size: int) -> None:
    """``path.stat()`` reports ``size`` bytes (the file grew after the check)."""
    real_stat = Path.stat

    def stale_stat(self: Path, **kwargs: object) -> os.stat_result:
        result = real_stat(self, **kwargs)  # type: ignore[arg-type]
        if self == path:
            fields = list(result)
            fields[stat.ST_SIZE] = size
            return os.stat_result(fields)
        return result

    monkeypatch.setattr(Path, "stat", stale_stat)


def test_a_file_that_grew_after_the_check_is_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The read follows the checked size (+1): growth within the limit is read on."""
    path = tmp_path / "grown.yaml"
    path.write_bytes(b"version: 1\nname: grown\n")
    _stat_reporting_size(monkeypatch, path, 3)
    assert read_regular_file(path, max_bytes=100) == b"version: 1\nname: grown\n"


def test_a_file_that_grew_past_the_limit_after_the_check_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "grown.yaml"
    path.write_bytes(b"x" * 150)
    _stat_reporting_size(monkeypatch, path, 10)
    with pytest.raises(FileTooLargeError) as info:
        read_regular_file(path, max_bytes=100)
    assert (info.value.size, info.value.limit, info.value.grew) == (101, 100, True)
