"""Read one policy file into plain data + source map, or issues (never an exception)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxpolicy.issues import PolicyIssue
from ctxpolicy.loading.limits import MAX_FILE_BYTES, POLICY_SUFFIXES
from ctxpolicy.loading.sourcemap import SourceMap
from ctxpolicy.loading.toml_reader import parse_toml
from ctxpolicy.loading.yaml_reader import parse_yaml


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


def display_name(path: Path) -> str:
    """How a file is named in issues: the path as given, with forward slashes."""
    return path.as_posix()


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


def _read_bytes(path: Path, name: str) -> tuple[bytes | None, list[PolicyIssue]]:
    suffix = path.suffix.lower()
    if suffix not in POLICY_SUFFIXES:
        message = f"not a policy file: expected {', '.join(POLICY_SUFFIXES)}, got {suffix!r}"
        return None, [PolicyIssue(name, 1, 1, "$", message, "file.type")]
    from ctxpolicy.reading import FileTooLargeError, NotRegularFileError, read_regular_file

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
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        message = f"cannot read file: {reason}"
        return None, [PolicyIssue(name, 0, 0, "$", message, "file.unreadable")]
    return raw, []


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
    if data is None or (data == {} and not text.strip()):
        return None, [PolicyIssue(name, 1, 1, "$", "the file is empty", "file.empty")]
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"a {type(data).__name__}"
        message = f"the top level must be a mapping of policy keys, got {kind}"
        return None, [PolicyIssue(name, 1, 1, "$", message, "file.not-mapping")]
    return ParsedDocument(path, data, smap), []


__all__ = ["ParsedDocument", "display_name", "read_document"]
