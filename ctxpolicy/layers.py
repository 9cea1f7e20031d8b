"""Names of the context layers and the facts the format fixes about them.

See docs/design.md, 'Layers and their kinds'.
"""

from __future__ import annotations

import re
from typing import Final, Literal

SYSTEM_PROMPT: Final = "system_prompt"
CHECKPOINT_MESSAGES: Final = "checkpoint_messages"
QUERY: Final = "query"
RESERVED_LAYERS: Final = frozenset({SYSTEM_PROMPT, CHECKPOINT_MESSAGES, QUERY})

FRAMEWORK: Final = "framework__context"
EXPERIENCE: Final = "experience__context"
KNOWLEDGE: Final = "knowledge__context"
TODO: Final = "todo__context"
COMPRESSION: Final = "compression__context"

BLOCK_SUFFIX: Final = "__context"
BLOCK_LAYER_PATTERN: Final = r"^[a-z][a-z0-9_]*__context$"
_BLOCK_RE: Final = re.compile(BLOCK_LAYER_PATTERN)

DEFAULT_ORDER: Final[tuple[str, ...]] = (
    SYSTEM_PROMPT,
    FRAMEWORK,
    EXPERIENCE,
    KNOWLEDGE,
    TODO,
    COMPRESSION,
    CHECKPOINT_MESSAGES,
    QUERY,
)

#: Layers persisted by default: the history summary must survive a restore (see
#: docs/design.md, 'Lifecycle and persistence').
PERSISTED_BY_DEFAULT: Final = frozenset({COMPRESSION})
#: Layers that may never be persisted.
NEVER_PERSISTED: Final = frozenset({SYSTEM_PROMPT, FRAMEWORK, QUERY})

LayerKind = Literal["system_prompt", "block", "history", "query"]

BlockOverflow = Literal["truncate_tail", "truncate_head", "drop", "error"]
HistoryOverflow = Literal["drop_oldest", "summarize", "error"]
QueryOverflow = Literal["error", "truncate_tail"]
Role = Literal["system", "human", "ai"]


def is_block_layer(name: str) -> bool:
    """True for a ``__context`` block layer name (built-in or a team's own)."""
    return bool(_BLOCK_RE.match(name))


def layer_kind(name: str) -> LayerKind:
    """The kind of a layer name.

    Raises:
        ValueError: ``name`` is neither a reserved layer nor a valid block layer name.
    """
    if name == SYSTEM_PROMPT:
        return "system_prompt"
    if name == CHECKPOINT_MESSAGES:
        return "history"
    if name == QUERY:
        return "query"
    if is_block_layer(name):
        return "block"
    raise ValueError(f"{name!r} is not a layer name (expected a reserved name or *__context)")
