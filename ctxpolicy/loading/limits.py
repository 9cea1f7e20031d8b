"""Limits that keep hostile or broken policy files from crashing or hanging the loader."""

from __future__ import annotations

from typing import Final

#: Largest policy file read, in bytes (checked before reading).
MAX_FILE_BYTES: Final = 1024 * 1024
#: Deepest nesting of mappings/sequences accepted.
MAX_DEPTH: Final = 64
#: Largest number of nodes a YAML document may have, its aliases expanded (a real policy
#: has a few hundred; the cap keeps "billion laughs" and giant files fast to refuse).
MAX_NODES: Final = 50_000
#: Longest ``extends`` chain (see docs/design.md, 'Validation rules').
MAX_EXTENDS_DEPTH: Final = 8
#: Suffixes of policy files.
POLICY_SUFFIXES: Final = (".yaml", ".yml", ".toml")
