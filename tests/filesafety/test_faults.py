"""`ctxpolicy set` with failures injected in-process at every file-system step it takes
(temp file creation, write, fsync, chmod, rename): the policy is old or new, never
partial, no temporary file is left, and the CLI exits 2 with the reason, no traceback.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ctxpolicy.loading import load_policy
from tests.filesafety.support import copy_policies, run_set, temp_files, text_after

KEY, VALUE = "budget.ratios.query", "0.07"
#: The calls `ctxpolicy.atomic` makes that touch the disk, by module attribute.
STEPS: tuple[tuple[Any, str], ...] = (
    (tempfile, "mkstemp"),
    (os, "fdopen"),
    (os, "fsync"),
    (os, "chmod"),
    (os, "replace"),
    (os, "link"),
)


class InjectedFault(OSError):
    pass


@contextmanager
def faults(fail_at: int | None, error: Callable[[str], BaseException]) -> Iterator[list[str]]:
    """Count the disk steps; make the ``fail_at``-th (0-based) raise ``error(step)``."""
    calls: list[str] = []
    originals = [(module, name, getattr(module, name)) for module, name in STEPS]

    def wrap(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def step(*args: Any, **kwargs: Any) -> Any:
            index = len(calls)
            calls.append(name)
            if index == fail_at:
                raise error(name)
            return real(*args, **kwargs)

        return step

    for module, name, real in originals:
        setattr(module, name, wrap(name, real))
    try:
        yield calls
    finally:
        for module, name, real in originals:
            setattr(module, name, real)


def disk_full(step: str) -> OSError:
    return InjectedFault(errno.ENOSPC, f"No space left on device (injected at {step})")


@pytest.fixture
def policy(tmp_path: Path) -> tuple[Path, bytes, bytes]:
    folder = copy_policies(tmp_path)
    base = folder / "base.yaml"
    return base, base.read_bytes(), text_after(base, tmp_path, [(KEY, VALUE)])


@pytest.mark.parametrize(
    "error",
    [
        disk_full,
        lambda step: PermissionError(errno.EACCES, f"Permission denied (injected at {step})"),
        lambda step: InjectedFault(errno.EIO, f"Input/output error (injected at {step})"),
        lambda step: KeyboardInterrupt(),
    ],
    ids=["ENOSPC", "EACCES", "EIO", "KeyboardInterrupt"],
)
def test_a_failure_at_every_step_leaves_old_or_new_and_no_temp_file(
    policy: tuple[Path, bytes, bytes], error: Callable[[str], BaseException]
) -> None:
    base, old, new = policy
    with faults(None, disk_full) as calls:
        assert run_set(str(base), KEY, VALUE)[0] == 0
    steps = list(calls)
    assert {"mkstemp", "fsync", "replace"} <= set(steps), steps
    for fail_at, step in enumerate(steps):
        base.write_bytes(old)
        with faults(fail_at, error):
            code, out = run_set(str(base), KEY, VALUE)
        content = base.read_bytes()
        assert "Traceback" not in out
        assert temp_files(base.parent) == set(), (step, fail_at)
        assert content in (old, new), step
        assert code in (0, 2, 130), (step, code, out)
        if code == 0:  # e.g. the fsync of the folder after the rename, which is best effort
            assert content == new, step
        elif code == 2:  # an OSError before the rename: nothing changed, the reason shown
            assert content == old, step
            assert "injected" in out
        # 130: interrupted; before the rename the file is old, after it new


class HalfWrite:
    """A file object that writes half of what it is given, then finds the disk full."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def __enter__(self) -> HalfWrite:
        return self

    def __exit__(self, *exc: object) -> None:
        self.handle.close()

    def write(self, data: bytes) -> int:
        self.handle.write(data[: len(data) // 2])
        self.handle.flush()
        raise OSError(errno.ENOSPC, "No space left on device")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.handle, name)


def test_disk_full_mid_write_leaves_the_old_file(
    policy: tuple[Path, bytes, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    base, old, _ = policy
    real = os.fdopen
    monkeypatch.setattr(os, "fdopen", lambda *a, **k: HalfWrite(real(*a, **k)))
    code, out = run_set(str(base), KEY, VALUE)
    assert code == 2
    assert "No space left on device" in out
    assert "Traceback" not in out
    assert base.read_bytes() == old
    assert temp_files(base.parent) == set()


def test_read_only_folder_refuses_the_edit(
    policy: tuple[Path, bytes, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    base, old, _ = policy

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    code, out = run_set(str(base), KEY, VALUE)
    assert code == 2
    assert "Read-only file system" in out
    assert base.read_bytes() == old
    assert temp_files(base.parent) == set()


def test_after_every_failure_the_next_set_succeeds(policy: tuple[Path, bytes, bytes]) -> None:
    base, _, new = policy
    with faults(4, disk_full):
        assert run_set(str(base), KEY, VALUE)[0] == 2
    assert run_set(str(base), KEY, VALUE)[0] == 0
    assert base.read_bytes() == new
    assert load_policy(base).budget.ratios["query"] == 0.07


def test_set_on_a_fifo_is_refused_not_hung(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.filesafety.support import ROOT

    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    try:
        result = subprocess.run(
            [
                sys.executable,
                "-c",
                "from ctxpolicy.cli import console_main; console_main()",
                "set",
                str(fifo),
                "name",
                "x",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=8,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("ctxpolicy set hung on a FIFO")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "not a regular file" in result.stderr


def test_set_on_a_file_over_the_size_limit_is_refused_unchanged(tmp_path: Path) -> None:
    from ctxpolicy.cli import main
    from ctxpolicy.diagnostics import MAX_FILE_BYTES

    big = tmp_path / "big.yaml"
    body = b"version: 1\nname: big\n" + b"# padding\n" * (MAX_FILE_BYTES // 10 + 1)
    big.write_bytes(body)
    assert main(["set", str(big), "name", "x"]) == 2
    assert big.read_bytes() == body
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.yaml"]
