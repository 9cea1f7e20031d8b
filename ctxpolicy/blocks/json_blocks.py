"""JSON → block tree, by object key path (nested keys nest blocks; docs/design.md,
'Files as context').

Every key of an object is a block; a key whose value is a non-empty object has the
inner keys as children and no own content; any other value (string, number, array, …)
is the block's content, as its JSON source text. Ids are key paths joined by ``/``
(``chatHistory/strategy``), duplicate keys get ``~2``... like duplicate headings.

Line spans come from a small position-tracking walk over the text: the standard
library decodes every scalar and array (``JSONDecoder.raw_decode``), the walk only
tracks where objects and keys start and end.
"""

from __future__ import annotations

import json
from bisect import bisect_right

from ctxpolicy.blocks.model import Block, BlockSource, escape_segment, unique_segment
from ctxpolicy.errors import BlocksError

_WS = " \t\n\r"
_DECODER = json.JSONDecoder()
_MAX_DEPTH = 200


class _Walker:
    def __init__(self, text: str, file: str) -> None:
        self.text = text
        self.file = file
        self.line_starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]

    def line_of(self, offset: int) -> int:
        return bisect_right(self.line_starts, offset)

    def fail(self, offset: int, message: str) -> BlocksError:
        line = self.line_of(offset)
        column = offset - self.line_starts[line - 1] + 1
        return BlocksError(f"{self.file}:{line}:{column}: invalid JSON: {message}")

    def skip(self, offset: int) -> int:
        while offset < len(self.text) and self.text[offset] in _WS:
            offset += 1
        return offset

    def value_end(self, offset: int) -> int:
        """End offset (exclusive) of the non-object value starting at ``offset``."""
        try:
            _, end = _DECODER.raw_decode(self.text, offset)
        except json.JSONDecodeError as exc:
            raise self.fail(exc.pos, exc.msg) from None
        except RecursionError:
            raise self.fail(offset, "nested too deeply") from None
        return end

    def at(self, offset: int, char: str) -> bool:
        """Whether the text has ``char`` at ``offset``."""
        return offset < len(self.text) and self.text[offset] == char

    def walk_object(self, offset: int, prefix: str, level: int) -> tuple[list[Block], int]:
        """Blocks of the object at ``offset`` (a ``{``) and the offset after its ``}``."""
        if level > _MAX_DEPTH:
            raise self.fail(offset, f"nested deeper than {_MAX_DEPTH} objects")
        blocks: list[Block] = []
        used: set[str] = set()
        offset = self.skip(offset + 1)
        if self.at(offset, "}"):
            return blocks, offset + 1
        while True:
            block, offset = self.walk_member(offset, prefix, level, used)
            blocks.append(block)
            offset = self.skip(offset)
            if self.at(offset, ","):
                offset = self.skip(offset + 1)
                continue
            if self.at(offset, "}"):
                return blocks, offset + 1
            raise self.fail(offset, "expected ',' or '}'")

    def read_key(self, offset: int) -> tuple[str, int]:
        """The key at ``offset`` (a ``"``) and the offset of its value (after the ``:``)."""
        if not self.at(offset, '"'):
            raise self.fail(offset, "expected a key in double quotes")
        try:
            key, offset = json.decoder.scanstring(self.text, offset + 1)  # type: ignore[attr-defined]
        except json.JSONDecodeError as exc:
            raise self.fail(exc.pos, exc.msg) from None
        offset = self.skip(offset)
        if not self.at(offset, ":"):
            raise self.fail(offset, "expected ':' after a key")
        return str(key), self.skip(offset + 1)

    def walk_member(
        self, offset: int, prefix: str, level: int, used: set[str]
    ) -> tuple[Block, int]:
        """The block of the object member at ``offset`` and the offset after its value."""
        key_start = offset
        key, offset = self.read_key(offset)
        segment = unique_segment(escape_segment(key), used)
        block_id = f"{prefix}/{segment}" if prefix else segment
        value_start = offset
        if self.at(offset, "{"):
            children, offset = self.walk_object(offset, block_id, level + 1)
            content = "" if children else "{}"
        else:
            offset = self.value_end(offset)
            children = []
            content = self.text[value_start:offset]
        start_line = self.line_of(key_start)
        own_end = start_line if children else self.line_of(offset - 1)
        block = Block(
            id=block_id,
            heading=key,
            level=level,
            content=content,
            children=tuple(children),
            source=BlockSource(
                file=self.file,
                start_line=start_line,
                end_line=own_end,
                tree_end_line=self.line_of(offset - 1),
            ),
        )
        return block, offset


def parse_json_blocks(text: str, file: str) -> list[Block]:
    """Parse a JSON document into a tree of blocks by key path.

    A document whose top level is not an object has no blocks.

    Args:
        text: The JSON source.
        file: The file name recorded in every block's ``source.file``.

    Raises:
        BlocksError: the text is not valid JSON (``file:line:column`` in the message).
    """
    walker = _Walker(text, file)
    offset = walker.skip(0)
    if offset < len(text) and text[offset] == "{":
        blocks, end = walker.walk_object(offset, "", 1)
    else:
        blocks, end = [], walker.value_end(offset)
    end = walker.skip(end)
    if end != len(text):
        raise walker.fail(end, "extra data after the JSON value")
    return blocks
