"""Everything is a file: Markdown/JSON block trees, references, file tools.

See docs/design.md, 'Files as context'.

* `parse_markdown_blocks` / `parse_json_blocks` turn a file into a tree of `Block`;
  `get_block_by_id`, `flatten_blocks` walk it.
* `parse_reference`, `find_references`, `resolve_reference` handle ``[file.md:12:30]``
  and ``[file.md#父/子]``, confined to a root folder.
* The ``files`` collector that reads them into a layer is
  ``ctxpolicy.collectors.files:collect_files`` (collectors import blocks, never the reverse).
* ``ctxpolicy.blocks.manifest`` compiles a ``context-config.json`` into messages.
* ``ctxpolicy.blocks.tools`` / ``ctxpolicy.blocks.curation`` give agents sandboxed file
  tools and ``dismiss_memory``.

This package imports only the standard library until a tool or a manifest is built
(those import langchain-core lazily).
"""

from __future__ import annotations

import importlib
from typing import Any

from ctxpolicy.blocks.json_blocks import parse_json_blocks
from ctxpolicy.blocks.markdown import parse_markdown_blocks
from ctxpolicy.blocks.model import Block, BlockSource, find_block, flatten_blocks, get_block_by_id
from ctxpolicy.blocks.references import (
    BlockReference,
    FileReference,
    LineReference,
    Reference,
    ResolvedReference,
    find_references,
    parse_blocks,
    parse_reference,
    resolve_reference,
    slice_reference,
)
from ctxpolicy.blocks.sandbox import DEFAULT_MAX_FILE_BYTES, read_text_inside, resolve_inside
from ctxpolicy.errors import (
    BlockNotFoundError,
    BlocksError,
    FileAccessError,
    LineRangeError,
    ManifestError,
    PathEscapeError,
    ReferenceSyntaxError,
)

_LAZY: dict[str, str] = {
    "ContextManifest": "ctxpolicy.blocks.manifest",
    "CompiledContext": "ctxpolicy.blocks.manifest",
    "compile_manifest": "ctxpolicy.blocks.manifest",
    "load_manifest": "ctxpolicy.blocks.manifest",
    "create_file_tools": "ctxpolicy.blocks.tools",
    "CurationLog": "ctxpolicy.blocks.curation",
    "Dismissal": "ctxpolicy.blocks.curation",
    "create_dismiss_memory_tool": "ctxpolicy.blocks.curation",
    "curate_messages": "ctxpolicy.blocks.curation",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ctxpolicy.blocks' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "Block",
    "BlockNotFoundError",
    "BlockReference",
    "BlockSource",
    "BlocksError",
    "CompiledContext",
    "ContextManifest",
    "CurationLog",
    "Dismissal",
    "FileAccessError",
    "FileReference",
    "LineRangeError",
    "LineReference",
    "ManifestError",
    "PathEscapeError",
    "Reference",
    "ReferenceSyntaxError",
    "ResolvedReference",
    "compile_manifest",
    "create_dismiss_memory_tool",
    "create_file_tools",
    "curate_messages",
    "find_block",
    "find_references",
    "flatten_blocks",
    "get_block_by_id",
    "load_manifest",
    "parse_blocks",
    "parse_json_blocks",
    "parse_markdown_blocks",
    "parse_reference",
    "read_text_inside",
    "resolve_inside",
    "resolve_reference",
    "slice_reference",
]
