"""Safe file writes: a reader never sees a half-written policy file.

`write_text_atomic` writes a temporary file in the destination's own folder (so the
final ``os.replace`` is a rename on one filesystem, atomic on POSIX and Windows),
flushes and fsyncs it, gives it the destination's permission bits and renames it over
the destination. On any failure the temporary file is removed and the destination is
left exactly as it was.

`sibling_temp_file` puts candidate text next to a file for a moment (so relative paths
such as ``extends`` resolve exactly as they will once the text is written) and always
removes it. `locked_for_update` serializes read-modify-write cycles on one file between
threads and processes, so concurrent editors never lose each other's edits.

The lock is an advisory ``flock`` on the policy file itself, not a library lock file
(``filelock`` and the like): those lock a separate ``NAME.lock`` that stays behind in
the team's policy folder after every edit, and cannot lock the policy file itself
because `write_text_atomic` replaces it with a new inode, which a waiter has to notice
(see `locked_for_update`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from ctxpolicy.errors import NotRegularFileError

fcntl: ModuleType | None
try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: only the in-process lock applies
    fcntl = None

__all__ = ["locked_for_update", "sibling_temp_file", "write_text_atomic"]

_TEMP_PREFIX = ".ctxpolicy-"
_DEFAULT_MODE = 0o666


def _current_umask() -> int:
    # os.umask has no read-only form; set and restore under a lock (threads share it).
    with _UMASK_LOCK:
        mask = os.umask(0)
        os.umask(mask)
    return mask


_UMASK_LOCK = threading.Lock()


def _fsync_dir(folder: Path) -> None:
    """Make a rename durable (POSIX); a no-op where folders cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_temp(folder: Path, data: bytes, *, suffix: str, mode: int) -> Path:
    fd, name = tempfile.mkstemp(prefix=_TEMP_PREFIX, suffix=suffix, dir=folder)
    temp = Path(name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        temp.chmod(mode)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return temp


def write_text_atomic(
    path: str | os.PathLike[str],
    text: str,
    *,
    encoding: str = "utf-8",
    overwrite: bool = True,
) -> None:
    """Replace ``path``'s content with ``text`` in one atomic step.

    Args:
        path: The destination file. Its folder must exist.
        text: The complete new content (written verbatim: no newline translation).
        encoding: Text encoding of the file.
        overwrite: When False, fail with `FileExistsError` if ``path`` exists (checked
            atomically where the filesystem supports hard links).

    Raises:
        FileExistsError: ``overwrite`` is False and ``path`` exists.
        OSError: the folder is not writable, the disk is full, ... The destination is
            then unchanged and no temporary file is left behind.
    """
    dest = Path(path)
    folder = dest.parent if str(dest.parent) else Path()
    try:
        mode = stat.S_IMODE(dest.stat().st_mode)
    except FileNotFoundError:
        mode = _DEFAULT_MODE & ~_current_umask()
    if not overwrite and dest.exists():
        raise FileExistsError(f"{dest}: file exists (use --force to overwrite)")
    temp = _write_temp(folder, text.encode(encoding), suffix=dest.suffix + ".tmp", mode=mode)
    try:
        if overwrite:
            temp.replace(dest)
        else:
            _link_no_clobber(temp, dest)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    _fsync_dir(folder)


def _link_no_clobber(temp: Path, dest: Path) -> None:
    """Move ``temp`` to ``dest`` only if ``dest`` does not exist (race-free via link)."""
    try:
        os.link(temp, dest)
    except FileExistsError:
        raise FileExistsError(f"{dest}: file exists (use --force to overwrite)") from None
    except OSError:
        # No hard links on this filesystem: fall back to check-then-rename.
        if dest.exists():
            raise FileExistsError(f"{dest}: file exists (use --force to overwrite)") from None
        temp.replace(dest)
        return
    temp.unlink(missing_ok=True)


@contextlib.contextmanager
def sibling_temp_file(
    path: str | os.PathLike[str], text: str, *, encoding: str = "utf-8"
) -> Iterator[Path]:
    """Write ``text`` to a hidden temporary file next to ``path`` for the ``with`` block.

    The temporary file keeps ``path``'s suffix (``.yaml``/``.toml``) so loaders treat it
    the same way, and it is removed when the block exits, whatever happens inside.

    Yields:
        The temporary file's path.
    """
    dest = Path(path)
    folder = dest.parent if str(dest.parent) else Path()
    temp = _write_temp(folder, text.encode(encoding), suffix=dest.suffix, mode=0o600)
    try:
        yield temp
    finally:
        temp.unlink(missing_ok=True)


_THREAD_LOCKS: dict[str, threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


def _thread_lock(path: Path) -> threading.Lock:
    key = os.path.realpath(path)
    with _THREAD_LOCKS_GUARD:
        return _THREAD_LOCKS.setdefault(key, threading.Lock())


def _require_regular_file(mode: int, path: Path) -> None:
    """Refuse FIFOs, sockets and devices: reading one blocks forever or never ends."""
    if not stat.S_ISREG(mode):
        raise NotRegularFileError(
            errno.EINVAL, "not a regular file (a FIFO, socket or device)", str(path)
        )


def _open_current(dest: Path, locks: ModuleType) -> int | None:
    """A descriptor of the file at ``dest`` with an exclusive ``flock`` (from ``locks``,
    the ``fcntl`` module) held on it, or None when ``dest`` was replaced while waiting
    for the lock (then retry)."""
    # O_NONBLOCK: a FIFO swapped in after the first check must not block the open.
    fd = os.open(dest, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        _require_regular_file(os.fstat(fd).st_mode, dest)
        locks.flock(fd, locks.LOCK_EX)
        held = os.fstat(fd)
        current = dest.stat()
    except FileNotFoundError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    if (current.st_ino, current.st_dev) != (held.st_ino, held.st_dev):
        os.close(fd)
        return None
    return fd


@contextlib.contextmanager
def locked_for_update(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive update lock on an existing file for a read-modify-write cycle.

    Threads of one process are serialized with an in-process lock; processes with an
    advisory ``flock`` on the file itself (POSIX). Because `write_text_atomic` replaces
    the file (a new inode), a waiter re-checks after locking that it holds the file
    currently at ``path`` and retries if not. No lock file is created. Where ``fcntl``
    is unavailable only the in-process lock applies.

    Raises:
        OSError: ``path`` cannot be opened or is not a regular file.
    """
    dest = Path(path)
    _require_regular_file(dest.stat().st_mode, dest)
    with _thread_lock(dest):
        if fcntl is None:  # pragma: no cover - Windows
            yield
            return
        fd = None
        while fd is None:
            fd = _open_current(dest, fcntl)
        try:
            yield
        finally:
            os.close(fd)  # closing releases the flock
