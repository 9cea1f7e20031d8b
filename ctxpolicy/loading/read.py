"""Read one policy file into plain data + source map, or issues (never an exception).

Reading a file the user named is done safely, by one rule for every place that reads a
path from a policy or the command line (policy files, ``template_file``, ``ctxpolicy
set``): a FIFO would block forever and a device such as ``/dev/zero`` never ends, so
anything but a regular file is refused, and the read stops one byte past the limit. The
check is made on the opened descriptor too (``O_NONBLOCK`` open, then ``fstat``), so a
file swapped for a FIFO after the first check cannot hang the reader. (`ctxpolicy.blocks`
has a stricter opener that also walks the path from its root without following
symlinks.)
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxpolicy.builtin import is_builtin, missing_message
from ctxpolicy.diagnostics import (
    MAX_FILE_BYTES,
    POLICY_SUFFIXES,
    PolicyIssue,
    SourceMap,
    display_name,
)
from ctxpolicy.errors import FileTooLargeError, NotRegularFileError
from ctxpolicy.loading.toml_reader import parse_toml
from ctxpolicy.loading.yaml_reader import parse_yaml


def read_regular_file(path: Path, *, max_bytes: int, follow_symlinks: bool = True) -> bytes:
    """The bytes of ``path``, refusing anything but a regular file of at most ``max_bytes``.

    Raises:
        NotRegularFileError: ``path`` is not a regular file.
        FileTooLargeError: ``path`` holds more than ``max_bytes`` bytes (``grew`` is True
            when it grew between the size check and the read).
        OSError: ``path`` cannot be opened or read.
    """
    info = path.stat()
    if not stat.S_ISREG(info.st_mode):
        raise NotRegularFileError(errno.EINVAL, "not a regular file", str(path))
    if info.st_size > max_bytes:
        raise FileTooLargeError(path, info.st_size, max_bytes)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(path, flags), "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):  # swapped since the check
            raise NotRegularFileError(errno.EINVAL, "not a regular file", str(path))
        # read what the check saw (+1 to notice growth): a read of ``max_bytes`` would
        # allocate the whole limit for every small file
        data = handle.read(info.st_size + 1)
        if len(data) > info.st_size:  # it grew since the check: read on to the limit
            data += handle.read(max_bytes + 1 - len(data))
    if len(data) > max_bytes:
        raise FileTooLargeError(path, len(data), max_bytes, grew=True)
    return data


@dataclass(frozen=True, slots=True)
class ParsedDocument:
    """One parsed policy file.

    Attributes:
        file: The path as given (shown in issues).
        data: The top-level mapping, as plain data.
        sourcemap: JSON path -> location in this file.
    """

    file: Path
    data: dict[str, Any]
    sourcemap: SourceMap = field(default_factory=dict)


def _decode(raw: bytes, name: str) -> tuple[str | None, list[PolicyIssue]]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = raw[: exc.start]
        line = before.count(b"\n") + 1
        column = exc.start - (before.rfind(b"\n") + 1) + 1
        return None, [
            PolicyIssue(
                name,
                line,
                column,
                "$",
                f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})",
                "file.encoding",
            )
        ]
    return text.removeprefix("\ufeff"), []


def _refused(path: Path, name: str) -> PolicyIssue | None:
    """Why ``path`` is not read at all, if it is not."""
    # a ``builtin:`` name that names no file of the bundle (also one that would leave it:
    # ``builtin:../x`` resolves to no file) is not found, whatever its suffix
    if is_builtin(name) and not path.is_file():
        return PolicyIssue(name, 0, 0, "$", missing_message(name), "file.missing")
    suffix = path.suffix.lower()
    if suffix not in POLICY_SUFFIXES:
        message = f"not a policy file: expected {', '.join(POLICY_SUFFIXES)}, got {suffix!r}"
        return PolicyIssue(name, 1, 1, "$", message, "file.type")
    return None


def _read_bytes(path: Path, name: str) -> tuple[bytes | None, list[PolicyIssue]]:
    refused = _refused(path, name)
    if refused is not None:
        return None, [refused]
    try:
        raw = read_regular_file(path, max_bytes=MAX_FILE_BYTES)
    except NotRegularFileError:  # a FIFO or a device would block or never end
        message = "cannot read file: not a regular file (a FIFO, socket or device)"
        return None, [PolicyIssue(name, 0, 0, "$", message, "file.unreadable")]
    except FileTooLargeError as exc:
        message = (
            f"file is over the limit of {MAX_FILE_BYTES} bytes"
            if exc.grew
            else f"file is {exc.size} bytes; the limit is {MAX_FILE_BYTES} bytes"
        )
        return None, [PolicyIssue(name, 1, 1, "$", message, "file.too-large")]
    except FileNotFoundError:
        return None, [PolicyIssue(name, 0, 0, "$", missing_message(name), "file.missing")]
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        message = f"cannot read file: {reason}"
        return None, [PolicyIssue(name, 0, 0, "$", message, "file.unreadable")]
    return raw, []


def _top_level_issue(data: Any, text: str, name: str) -> PolicyIssue | None:
    """Why parsed ``data`` is not a policy document (empty, or not a mapping), if it is not."""
    if data is None or (data == {} and not text.strip()):
        return PolicyIssue(name, 1, 1, "$", "the file is empty", "file.empty")
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"a {type(data).__name__}"
        message = f"the top level must be a mapping of policy keys, got {kind}"
        return PolicyIssue(name, 1, 1, "$", message, "file.not-mapping")
    return None


def read_document(path: Path) -> tuple[ParsedDocument | None, list[PolicyIssue]]:
    """Read, size-check, decode and parse one policy file.

    Args:
        path: A ``.yaml``, ``.yml`` or ``.toml`` file.

    Returns:
        The document (None when it could not be read) and the issues found.
    """
    name = display_name(path)
    raw, issues = _read_bytes(path, name)
    if raw is None:
        return None, issues
    text, issues = _decode(raw, name)
    if text is None:
        return None, issues
    parse = parse_toml if path.suffix.lower() == ".toml" else parse_yaml
    data, smap, issues = parse(text, name)
    if issues:
        return None, issues
    problem = _top_level_issue(data, text, name)
    if problem is not None:
        return None, [problem]
    return ParsedDocument(path, data, smap), []


__all__ = [
    "FileTooLargeError",
    "NotRegularFileError",
    "ParsedDocument",
    "read_document",
    "read_regular_file",
]
