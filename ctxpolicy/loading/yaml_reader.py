"""YAML policy text -> plain data + source map.

Two readers give the same result (``tests/loading/test_yaml_events.py``):

* `ctxpolicy.loading.yaml_events` reads the common subset of YAML that policy files are
  written in, in one pass over libyaml's C event stream (a few hundred microseconds for
  a policy);
* `ctxpolicy.loading.yaml_roundtrip` reads everything else through ruamel.yaml
  round-trip mode (anchors, tags, merge keys, duplicate keys, syntax errors, ...), some
  twenty times slower.

The round-trip reader and ruamel.yaml are imported the first time a document needs them
(`_roundtrip`: one of the declared lazy imports, docs/design.md "Structure"): a run over
ordinary policy files never pays for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctxpolicy.diagnostics import PolicyIssue, SourceMap
from ctxpolicy.errors import PolicyFileRefusedError
from ctxpolicy.loading.yaml_events import read_events

if TYPE_CHECKING:
    from types import ModuleType


def _roundtrip() -> ModuleType:
    """The ruamel.yaml round-trip reader, imported the first time a document needs it."""
    from ctxpolicy.loading import yaml_roundtrip  # declared lazy import (docs/design.md)

    return yaml_roundtrip


def parse_yaml(text: str, file: str) -> tuple[Any, SourceMap, list[PolicyIssue]]:
    """Parse YAML policy text.

    Args:
        text: The decoded file content.
        file: The file name to put in locations and issues.

    Returns:
        ``(data, sourcemap, issues)``; ``data`` is None when there are issues or the
        document is empty.
    """
    try:
        fast = read_events(text, file)
    except PolicyFileRefusedError as refused:
        return None, {}, [refused.issue]
    if fast is not None:
        return fast[0], fast[1], []
    result: tuple[Any, SourceMap, list[PolicyIssue]] = _roundtrip().parse_yaml_roundtrip(text, file)
    return result


__all__ = ["parse_yaml"]
