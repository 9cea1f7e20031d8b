"""Markdown → block tree, by ATX headings (``#`` … ``######``), with a line scanner.

Why a hand-written scanner and not a Markdown library: splitting at headings needs
exactly two CommonMark rules — what an ATX heading is and what a fenced code block is —
and exact 1-based line numbers for every block. A full parser (markdown-it-py, mistune)
would be a new runtime dependency, builds a token stream we would map back to lines
anyway, and still leaves id assignment, spans and duplicate handling to us. The scanner
is one pass, O(lines), and follows CommonMark for the rules it implements:

* a heading is 0-3 spaces, 1-6 ``#``, then a space/tab or the end of the line; an
  optional closing run of ``#`` (preceded by a space) is dropped;
* a fence opens with 0-3 spaces and ≥3 backticks or tildes (a backtick fence's info
  string has no backtick) and closes with the same character, at least as many, and
  nothing else on the line; an unclosed fence runs to the end of the file. Lines inside
  a fence are never headings.

Setext headings (text underlined with ``===``/``---``) are not split on: the format
chunks by ``#`` headings, and ``---`` is far more often a thematic break (docs/design.md,
'Files as context').
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ctxpolicy.blocks.model import Block, BlockSource, escape_segment, unique_segment

_HEADING_RE = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_CLOSING_RE = re.compile(r"(?:^|[ \t]+)#+$")
_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def split_lines(text: str) -> list[str]:
    """The lines of ``text`` as an editor numbers them (``\\n`` or ``\\r\\n`` ends a line)."""
    lines = text.replace("\r\n", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


@dataclass(frozen=True, slots=True)
class HeadingLine:
    """One heading found by `scan_headings` (``line`` is 1-based)."""

    line: int
    level: int
    text: str


def parse_heading(line: str) -> tuple[int, str] | None:
    """``(level, text)`` when ``line`` is an ATX heading, else None."""
    match = _HEADING_RE.match(line)
    if match is None:
        return None
    text = match.group(2) or ""
    text = _CLOSING_RE.sub("", text).strip()
    return len(match.group(1)), text


def _closes_fence(fence: tuple[str, int], fence_match: re.Match[str] | None) -> bool:
    """Whether a fence line closes the open ``fence`` (same character, no shorter, no info)."""
    if fence_match is None:
        return False
    run, rest = fence_match.group(1), fence_match.group(2)
    return run[0] == fence[0] and len(run) >= fence[1] and not rest.strip()


def _opened_fence(fence_match: re.Match[str] | None) -> tuple[str, int] | None:
    """The ``(character, run length)`` of the fence a line opens, or ``None``.

    A backtick run whose info string holds a backtick is inline code, not a fence.
    """
    if fence_match is None:
        return None
    run, info = fence_match.group(1), fence_match.group(2)
    if run[0] == "`" and "`" in info:
        return None
    return (run[0], len(run))


def scan_headings(lines: list[str]) -> list[HeadingLine]:
    """The ATX headings of a document, skipping fenced code blocks."""
    found: list[HeadingLine] = []
    fence: tuple[str, int] | None = None  # (character, run length) of the open fence
    for number, line in enumerate(lines, start=1):
        fence_match = _FENCE_RE.match(line)
        if fence is not None:
            if _closes_fence(fence, fence_match):
                fence = None
            continue
        fence = _opened_fence(fence_match)
        if fence is not None:
            continue
        heading = parse_heading(line)
        if heading is not None:
            found.append(HeadingLine(number, heading[0], heading[1]))
    return found


@dataclass(slots=True)
class _Node:
    heading: HeadingLine
    own_end: int  # last line before the first child / next heading (not blank-trimmed)
    id: str = ""
    children: list[_Node] = field(default_factory=list)
    used: set[str] = field(default_factory=set)


def _last_non_blank(lines: list[str], start: int, end: int) -> int:
    """The last line in ``start..end`` (1-based, inclusive) that is not blank, or ``start``."""
    for number in range(end, start, -1):
        if lines[number - 1].strip():
            return number
    return start


def _freeze(node: _Node, lines: list[str], file: str) -> Block:
    children = tuple(_freeze(child, lines, file) for child in node.children)
    start = node.heading.line
    end = _last_non_blank(lines, start, node.own_end)
    body = lines[start:end]  # the lines after the heading, up to `end`
    while body and not body[0].strip():
        body.pop(0)
    tree_end = children[-1].source.tree_end_line if children else end
    return Block(
        id=node.id,
        heading=node.heading.text,
        level=node.heading.level,
        content="\n".join(body),
        children=children,
        source=BlockSource(file=file, start_line=start, end_line=end, tree_end_line=tree_end),
    )


def parse_markdown_blocks(text: str, file: str) -> list[Block]:
    """Parse Markdown into a tree of blocks, one per ATX heading.

    A heading's children are the following headings of a deeper level, up to the next
    heading of the same or a higher level. Text before the first heading (the preamble)
    belongs to no block. Duplicate sibling headings get ``~2``, ``~3``... ids.

    Args:
        text: The Markdown source.
        file: The file name recorded in every block's ``source.file``.

    Returns:
        The top-level blocks in file order.

    Example:
        >>> blocks = parse_markdown_blocks("# A\\nx\\n## B\\ny\\n", "f.md")
        >>> [b.id for b in blocks], blocks[0].children[0].id
        (['A'], 'A/B')
    """
    lines = split_lines(text)
    headings = scan_headings(lines)
    roots: list[_Node] = []
    root_used: set[str] = set()
    stack: list[_Node] = []
    for index, heading in enumerate(headings):
        next_line = headings[index + 1].line if index + 1 < len(headings) else len(lines) + 1
        node = _Node(heading=heading, own_end=next_line - 1)
        while stack and stack[-1].heading.level >= heading.level:
            stack.pop()
        parent = stack[-1] if stack else None
        used = parent.used if parent is not None else root_used
        segment = unique_segment(escape_segment(heading.text), used)
        node.id = f"{parent.id}/{segment}" if parent is not None else segment
        (parent.children if parent is not None else roots).append(node)
        stack.append(node)
    return [_freeze(node, lines, file) for node in roots]


def markdown_preamble_end(text: str) -> int:
    """The last line number before the first heading (0 when the file starts with one)."""
    lines = split_lines(text)
    headings = scan_headings(lines)
    return headings[0].line - 1 if headings else len(lines)
