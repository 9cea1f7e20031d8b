"""Confinement to a root folder: every path is checked *before* anything is opened.

The rules (docs/design.md, 'Files as context'): a path is relative, and once every
symlink is resolved it is still inside the (resolved) root. Absolute paths, ``..`` that
leaves the root, symlinks that point outside, NUL bytes and backslashes are refused with a
`PathEscapeError`; devices, FIFOs and sockets are refused as "not a regular file";
files over a size limit are refused with a `FileAccessError`. Reading opens the
*resolved* path component by component from the root (``dir_fd`` + ``O_NOFOLLOW``,
``O_NONBLOCK``) and re-checks it with ``fstat``, so a file or folder swapped for a
symlink or a FIFO between check and open is refused too.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath, PureWindowsPath

from ctxpolicy.errors import FileAccessError, PathEscapeError

DEFAULT_MAX_FILE_BYTES = 1_000_000
"""Largest file the blocks package reads (bytes)."""

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_HAS_DIR_FD = os.open in os.supports_dir_fd and bool(_O_DIRECTORY)


def resolve_root(root: str | os.PathLike[str], *, base_dir: Path | None = None) -> Path:
    """The real path of a root folder.

    With ``base_dir``, ``root`` must be relative and stay inside ``base_dir`` (the rule for
    a policy's ``files`` root); without it, ``root`` may be any existing folder (the
    caller chose it).

    Raises:
        PathEscapeError: ``root`` leaves ``base_dir``.
        FileAccessError: the root is missing or not a folder.
    """
    if base_dir is not None:
        path = resolve_inside(base_dir, os.fspath(root), must_exist=True)
    else:
        try:
            path = Path(root).resolve(strict=True)
        except (OSError, RuntimeError) as exc:
            missing = isinstance(exc, FileNotFoundError)
            raise FileAccessError(
                os.fspath(root), f"root folder does not exist ({exc})", missing=missing
            ) from None
    if not path.is_dir():
        raise FileAccessError(os.fspath(root), "root is not a folder")
    return path


def check_relative(path: str) -> None:
    """Refuse a path string that is not a plain relative path (checked before any I/O).

    Raises:
        PathEscapeError: empty, absolute (POSIX or Windows style), a NUL byte or a backslash.
    """
    if not path or not path.strip():
        raise PathEscapeError(path, "empty path")
    if "\x00" in path:
        raise PathEscapeError(path, "NUL byte in path")
    if "\\" in path:
        raise PathEscapeError(path, "backslash in path (use '/')")
    if PurePosixPath(path).is_absolute() or PureWindowsPath(path).anchor:
        raise PathEscapeError(
            path, "absolute paths are not allowed; give a path relative to the root"
        )


def resolve_inside(root: Path, path: str, *, must_exist: bool = True) -> Path:
    """The real path of ``root/path``, guaranteed to lie inside ``root``'s real path.

    Args:
        root: The root folder.
        path: A relative path, ``/``-separated.
        must_exist: With False, a missing final component is allowed (for writing);
            its parent must still exist inside the root.

    Raises:
        PathEscapeError: the path is absolute, or leaves the root (``..``, a symlink).
        FileAccessError: the path (or, with ``must_exist=False``, its parent) is missing.
    """
    check_relative(path)
    real_root = root.resolve()
    candidate = real_root / path
    try:
        real = candidate.resolve(strict=True)
    except FileNotFoundError:
        if must_exist:
            # Say "escapes" rather than "missing" when the lexical path already leaves.
            _refuse_lexical_escape(path)
            raise FileAccessError(path, "no such file", missing=True) from None
        parent = resolve_inside(root, str(PurePosixPath(path).parent) or ".", must_exist=True)
        real = parent / PurePosixPath(path).name
        if PurePosixPath(path).name in {"", ".", ".."}:
            raise PathEscapeError(path, "not a file name") from None
    except (OSError, RuntimeError) as exc:  # symlink loops, permission denied, ...
        raise FileAccessError(path, str(exc)) from None
    if real != real_root and not real.is_relative_to(real_root):
        raise PathEscapeError(path, "it resolves outside the root folder")
    return real


def _refuse_lexical_escape(path: str) -> None:
    depth = 0
    for part in PurePosixPath(path).parts:
        depth += -1 if part == ".." else (0 if part == "." else 1)
        if depth < 0:
            raise PathEscapeError(path, "'..' leaves the root folder")


def _open_beneath(real_root: Path, real: Path) -> int:
    """Open ``real`` walking down from ``real_root`` one component at a time.

    Every component is opened relative to its parent's descriptor with ``O_NOFOLLOW``,
    so a folder swapped for a symlink after the check fails instead of being followed.
    Falls back to a plain ``O_NOFOLLOW`` open where ``dir_fd`` is unsupported.
    """
    flags = os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK
    if not _HAS_DIR_FD:
        return os.open(real, flags)
    parts = real.relative_to(real_root).parts
    fd = os.open(real_root, os.O_RDONLY | _O_DIRECTORY)
    try:
        for part in parts[:-1]:
            child = os.open(part, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = child
        return os.open(parts[-1], flags, dir_fd=fd)
    finally:
        os.close(fd)


def read_text_inside(root: Path, path: str, *, max_bytes: int = DEFAULT_MAX_FILE_BYTES) -> str:
    """Read a UTF-8 text file inside ``root``; nothing outside the root is ever opened.

    Raises:
        PathEscapeError: the path leaves the root, or is not a regular file (device,
            FIFO, socket).
        FileAccessError: missing, a folder, larger than ``max_bytes``, or not UTF-8.
    """
    real = resolve_inside(root, path)
    real_root = root.resolve()
    try:
        info = real.lstat()
    except OSError as exc:
        raise FileAccessError(path, str(exc)) from None
    if stat.S_ISDIR(info.st_mode):
        raise FileAccessError(path, "is a folder, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise PathEscapeError(path, "not a regular file (device, FIFO or socket)")
    if info.st_size > max_bytes:
        raise FileAccessError(path, f"{info.st_size} bytes is over the limit of {max_bytes}")
    try:
        fd = _open_beneath(real_root, real)
    except OSError as exc:
        raise FileAccessError(path, str(exc)) from None
    with os.fdopen(fd, "rb") as handle:
        opened = os.fstat(handle.fileno())
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (
            info.st_dev,
            info.st_ino,
        ):
            raise PathEscapeError(path, "the file changed between check and open")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise FileAccessError(path, f"larger than the limit of {max_bytes} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileAccessError(path, f"not UTF-8 text (byte {exc.start})") from None
