"""References: ``[file.md:12:30]`` (lines) and ``[file.md#父/子]`` (a block).

See docs/design.md, 'Files as context'.

Parsing and slicing are pure; `resolve_reference` is the one function here that reads
a file, and it reads only inside the root (see `ctxpolicy.blocks.sandbox`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxpolicy.blocks.json_blocks import parse_json_blocks
from ctxpolicy.blocks.markdown import parse_markdown_blocks, split_lines
from ctxpolicy.blocks.model import Block, block_ids, find_block
from ctxpolicy.blocks.sandbox import DEFAULT_MAX_FILE_BYTES, check_relative, read_text_inside
from ctxpolicy.errors import BlockNotFoundError, LineRangeError, ReferenceSyntaxError


@dataclass(frozen=True, slots=True)
class LineReference:
    """Lines ``start_line..end_line`` (1-based, inclusive) of ``path``."""

    path: str
    start_line: int
    end_line: int

    def __str__(self) -> str:
        return f"[{self.path}:{self.start_line}:{self.end_line}]"


@dataclass(frozen=True, slots=True)
class BlockReference:
    """The block ``block`` (a heading path such as ``父/子``) of ``path``."""

    path: str
    block: str

    def __str__(self) -> str:
        return f"[{self.path}#{self.block}]"


@dataclass(frozen=True, slots=True)
class FileReference:
    """The whole file ``path``."""

    path: str

    def __str__(self) -> str:
        return f"[{self.path}]"


Reference = LineReference | BlockReference | FileReference


@dataclass(frozen=True, slots=True)
class ResolvedReference:
    """A reference with the text it points at.

    Attributes:
        reference: What was asked for.
        start_line: First line of ``text`` in the file (1-based).
        end_line: Last line of ``text`` in the file (inclusive).
        text: The referenced lines (a block: its heading, content and children).
    """

    reference: Reference
    start_line: int
    end_line: int
    text: str

    @property
    def label(self) -> str:
        """Where the text came from: ``guide.md:12-30`` or ``profile.md#Goals (lines 3-9)``."""
        ref = self.reference
        if isinstance(ref, BlockReference):
            return f"{ref.path}#{ref.block} (lines {self.start_line}-{self.end_line})"
        return f"{ref.path}:{self.start_line}-{self.end_line}"

    def format(self) -> str:
        """The text prefixed with its origin, as it goes into a prompt."""
        return f"[{self.label}]\n{self.text}"


_PATH = r"[^\[\]\s:#]+\.[A-Za-z0-9_-]+"
# Inline, a bracket counts as a reference when its path has an extension, or when it is
# absolute or starts with "..": those are refused when resolved, never silently ignored.
_INLINE_PATH = rf"{_PATH}|/[^\[\]\s:#]*|\.\.[^\[\]\s:#]*"
_INLINE_RE = re.compile(rf"\[({_INLINE_PATH})(?::(\d+)(?::(\d+))?|#([^\[\]\n]+))\]")
_SELECT_RE = re.compile(rf"^({_PATH}|[^\[\]\s:#]+)(?::(\d+)(?::(\d+))?|#(.+))?$")


def _line_reference(path: str, start: str, end: str | None, *, source: str) -> LineReference:
    first = int(start)
    last = int(end) if end is not None else first
    if first < 1 or last < first:
        raise ReferenceSyntaxError(
            f"reference {source!r}: line range {first}-{last} must satisfy 1 <= start <= end"
        )
    return LineReference(path, first, last)


def parse_reference(text: str) -> Reference:
    """Parse one reference: ``file.md:12:30``, ``file.md:12``, ``file.md#a/b`` or ``file.md``.

    Surrounding ``[...]`` are optional. The path is only checked for shape here; it is
    confined to the root when resolved.

    Raises:
        ReferenceSyntaxError: the text is not a reference.
    """
    body = text.strip()
    if body.startswith("[") and body.endswith("]"):
        body = body[1:-1].strip()
    match = _SELECT_RE.match(body)
    if match is None:
        raise ReferenceSyntaxError(
            f"reference {text!r}: expected 'file:START:END', 'file#block/path' or 'file'"
        )
    path, start, end, block = match.groups()
    if start is not None:
        return _line_reference(path, start, end, source=text)
    if block is not None:
        if not block.strip():
            raise ReferenceSyntaxError(f"reference {text!r}: empty block id after '#'")
        return BlockReference(path, block.strip())
    return FileReference(path)


def reference_from_data(data: Mapping[str, Any] | str) -> Reference:
    """A reference from a manifest entry.

    Accepts ``{"path", "startLine", "endLine"}`` (or ``start_line``/``end_line``),
    ``{"path", "block"}``, ``{"path"}`` or a reference string.

    Raises:
        ReferenceSyntaxError: the entry has neither shape.
    """
    if isinstance(data, str):
        return parse_reference(data)
    path = data.get("path")
    if not isinstance(path, str) or not path:
        raise ReferenceSyntaxError(f"reference {dict(data)!r}: 'path' must be a non-empty string")
    start = data.get("startLine", data.get("start_line"))
    end = data.get("endLine", data.get("end_line"))
    block = data.get("block")
    if start is not None or end is not None:
        _check_line_entry(data, start, end, block)
        return _line_reference(path, str(start), None if end is None else str(end), source=path)
    if block is not None:
        if not isinstance(block, str) or not block.strip():
            raise ReferenceSyntaxError(
                f"reference {dict(data)!r}: 'block' must be a non-empty string"
            )
        return BlockReference(path, block.strip())
    return FileReference(path)


def _check_line_entry(data: Mapping[str, Any], start: Any, end: Any, block: Any) -> None:
    """Refuse a line entry of a manifest that also names a block or has non-integer lines."""
    if block is not None:
        raise ReferenceSyntaxError(f"reference {dict(data)!r}: give lines or a block, not both")
    if not isinstance(start, int) or isinstance(start, bool):
        raise ReferenceSyntaxError(f"reference {dict(data)!r}: 'startLine' must be an integer")
    if end is not None and (not isinstance(end, int) or isinstance(end, bool)):
        raise ReferenceSyntaxError(f"reference {dict(data)!r}: 'endLine' must be an integer")


def find_references(text: str) -> list[Reference]:
    """The inline references of a text (a query), in order of appearance, without repeats.

    Only ``[path:N]``, ``[path:N:M]`` and ``[path#block]`` count; other brackets
    (``[see above]``) are left alone.

    Raises:
        ReferenceSyntaxError: a bracket has the shape of a reference but an invalid range.
    """
    found: list[Reference] = []
    for match in _INLINE_RE.finditer(text):
        path, start, end, block = match.groups()
        ref: Reference
        if start is not None:
            ref = _line_reference(path, start, end, source=match.group(0))
        else:
            ref = BlockReference(path, block.strip())
        if ref not in found:
            found.append(ref)
    return found


def parse_blocks(text: str, file: str) -> list[Block]:
    """Blocks of a file by its kind: ``.json`` by key path, anything else by Markdown headings."""
    if file.lower().endswith(".json"):
        return parse_json_blocks(text, file)
    return parse_markdown_blocks(text, file)


def slice_reference(reference: Reference, text: str) -> ResolvedReference:
    """Resolve ``reference`` against the file's ``text`` (pure; no I/O).

    A block reference yields the block's whole span, children included, and carries
    the block's full id (``薛定谔方程`` found as ``量子力学基础/薛定谔方程``).

    Raises:
        LineRangeError: the lines are not in the file.
        BlockNotFoundError: no such block.
    """
    lines = split_lines(text)
    if isinstance(reference, FileReference):
        return ResolvedReference(reference, 1 if lines else 0, len(lines), "\n".join(lines))
    if isinstance(reference, LineReference):
        if reference.start_line > len(lines):
            raise LineRangeError(
                f"{reference}: {reference.path!r} has {len(lines)} line(s); "
                f"line {reference.start_line} does not exist"
            )
        end = min(reference.end_line, len(lines))
        if end != reference.end_line:
            raise LineRangeError(
                f"{reference}: {reference.path!r} has {len(lines)} line(s); "
                f"asked for lines {reference.start_line}-{reference.end_line}"
            )
        chunk = lines[reference.start_line - 1 : end]
        return ResolvedReference(reference, reference.start_line, end, "\n".join(chunk))
    blocks = parse_blocks(text, reference.path)
    block = find_block(blocks, reference.block)
    if block is None:
        raise BlockNotFoundError(reference.path, reference.block, block_ids(blocks))
    start, end = block.source.start_line, block.source.tree_end_line
    canonical = BlockReference(reference.path, block.id)  # the full id, when found by suffix
    return ResolvedReference(canonical, start, end, "\n".join(lines[start - 1 : end]))


def resolve_reference(
    root: Path | str,
    reference: Reference | str | Mapping[str, Any],
    *,
    max_bytes: int = DEFAULT_MAX_FILE_BYTES,
) -> ResolvedReference:
    """Read what ``reference`` points at, inside ``root`` only.

    Args:
        root: The folder references are relative to.
        reference: A parsed reference, a string (``guide.md:12:30``, ``[p.md#a/b]``) or a
            manifest entry (``{"path": ..., "startLine": ..., "endLine": ...}``).
        max_bytes: Size limit of the file read.

    Raises:
        PathEscapeError: the path is absolute, leaves the root (``..``, a symlink) or is
            not a regular file; nothing outside the root is opened.
        FileAccessError: missing, too large or not UTF-8.
        ReferenceSyntaxError, LineRangeError, BlockNotFoundError: a bad reference.
    """
    if isinstance(reference, str):
        ref = parse_reference(reference)
    elif isinstance(reference, LineReference | BlockReference | FileReference):
        ref = reference
    else:
        ref = reference_from_data(reference)
    check_relative(ref.path)
    text = read_text_inside(Path(root), ref.path, max_bytes=max_bytes)
    return slice_reference(ref, text)


def dedupe_references(references: Sequence[Reference]) -> list[Reference]:
    """``references`` without repeats, first occurrence kept (a ref inline *and* listed)."""
    seen: list[Reference] = []
    for ref in references:
        if ref not in seen:
            seen.append(ref)
    return seen
