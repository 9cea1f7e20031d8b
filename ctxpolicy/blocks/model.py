"""The block tree: frozen `Block` nodes and the helpers that walk them.

See docs/design.md, 'Files as context'.

A file is made of blocks. Markdown files split at ATX headings, JSON files at object
keys; blocks nest. A block's ``id`` is its heading path joined by ``/``
(``基本信息/教育背景``), so the same content always gives the same ids.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

ID_SEPARATOR = "/"
DUPLICATE_MARK = "~"


@dataclass(frozen=True, slots=True)
class BlockSource:
    """Where a block lives. Lines are 1-based and inclusive.

    Attributes:
        file: The file the block was parsed from (as given to the parser).
        start_line: The heading (or JSON key) line.
        end_line: The last non-blank line of the block's own content, children
            excluded (the heading line when the block has no own content).
        tree_end_line: The last line of the block *with* its children (for JSON, the
            line that closes the value).
    """

    file: str
    start_line: int
    end_line: int
    tree_end_line: int


@dataclass(frozen=True, slots=True)
class Block:
    """One block of a file.

    Attributes:
        id: Heading path joined by ``/``; unique within the file.
        heading: The heading text (or JSON key).
        level: 1 for ``#``, 2 for ``##``, ...; for JSON the key depth.
        content: The block's own text without its children, blank edges stripped.
        children: Nested blocks, in file order.
        source: File and line span.
    """

    id: str
    heading: str
    level: int
    content: str
    children: tuple[Block, ...]
    source: BlockSource


def escape_segment(heading: str) -> str:
    """The id segment of a heading: ``%`` and ``/`` are percent-escaped, so ids split cleanly."""
    text = heading.replace("%", "%25").replace(ID_SEPARATOR, "%2F")
    return text if text else "%20"


def unique_segment(segment: str, used: set[str]) -> str:
    """``segment``, or ``segment~2``, ``segment~3``, ... the first one not in ``used``.

    Adds the result to ``used``. The n-th sibling with the same heading always gets the
    same suffix, so ids are stable as long as the earlier siblings stay.
    """
    candidate = segment
    n = 1
    while candidate in used:
        n += 1
        candidate = f"{segment}{DUPLICATE_MARK}{n}"
    used.add(candidate)
    return candidate


def iter_blocks(blocks: Sequence[Block]) -> Iterator[Block]:
    """Every block of the tree, depth first, in file order."""
    for block in blocks:
        yield block
        yield from iter_blocks(block.children)


def flatten_blocks(blocks: Sequence[Block]) -> list[Block]:
    """The tree as a flat list, depth first, in file order (parents before children)."""
    return list(iter_blocks(blocks))


def get_block_by_id(blocks: Sequence[Block], block_id: str) -> Block | None:
    """The block whose id is exactly ``block_id``, or None."""
    for block in iter_blocks(blocks):
        if block.id == block_id:
            return block
    return None


def find_block(blocks: Sequence[Block], block_id: str) -> Block | None:
    """Like `get_block_by_id`, with forgiving fallbacks for short and stale ids.

    When no id matches exactly, the blocks whose id *ends* with ``/block_id`` are
    looked at (``学习目标`` finds ``基本信息/学习目标``); when none does, the same is
    tried with the id's leading segments dropped one by one, so a reference survives a
    renamed parent heading (``旧标题/学习目标`` finds ``新标题/学习目标``). The longest
    remaining path that matches decides: one block is returned, several are ambiguous
    (None). See docs/files.md, 'Renamed headings'.
    """
    exact = get_block_by_id(blocks, block_id)
    if exact is not None:
        return exact
    segments = block_id.split(ID_SEPARATOR)
    for start in range(len(segments)):
        tail = ID_SEPARATOR.join(segments[start:])
        suffix = ID_SEPARATOR + tail
        matches = [
            b for b in iter_blocks(blocks) if b.id.endswith(suffix) or (start and b.id == tail)
        ]
        if matches:
            return matches[0] if len(matches) == 1 else None
    return None


def renamed_from(requested: str, found: str) -> bool:
    """Whether ``found`` was reached by dropping leading segments of ``requested`` (its
    parent path no longer exists), not as the same id or a shorthand suffix of it."""
    return found != requested and not found.endswith(ID_SEPARATOR + requested)


def block_ids(blocks: Sequence[Block]) -> tuple[str, ...]:
    """All ids of the tree, in file order."""
    return tuple(b.id for b in iter_blocks(blocks))
