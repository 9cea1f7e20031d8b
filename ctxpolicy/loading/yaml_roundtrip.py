"""YAML policy text -> plain data + source map, through ruamel.yaml round-trip mode.

The reader of every document the libyaml event reader (`ctxpolicy.loading.yaml_events`)
leaves aside: anchors, tags, merge keys, duplicate keys, syntax errors, ... (and the
reference that reader is tested against). Two passes over the text. The first walks the
*event* stream only (cheap, no objects built) and refuses documents nested deeper than
`MAX_DEPTH` or whose aliases would expand past `MAX_NODES` nodes ("billion laughs"), so
the second pass, which composes the round-trip tree (every node keeps its line and
column), never sees a hostile document.
"""

from __future__ import annotations

import math
from datetime import date, datetime, time
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml import events as ruamel_events
from ruamel.yaml.comments import CommentedMap, CommentedSeq, TaggedScalar
from ruamel.yaml.constructor import ConstructorError, DuplicateKeyError, RoundTripConstructor
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.scalarbool import ScalarBoolean
from ruamel.yaml.scalarstring import FoldedScalarString, LiteralScalarString

from ctxpolicy.diagnostics import (
    JsonPath,
    Location,
    PolicyIssue,
    SourceMap,
    issue_at,
)
from ctxpolicy.errors import PolicyFileRefusedError
from ctxpolicy.loading.yaml_events import libyaml, scan_events

_PLAIN_DATA = "use plain strings, numbers, booleans, lists and mappings"


def _mark_issue(file: str, exc: Any, rule: str, message: str | None = None) -> PolicyIssue:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    line = mark.line + 1 if mark is not None else 1
    column = mark.column + 1 if mark is not None else 1
    if message is None:
        problem = getattr(exc, "problem", None)
        context = getattr(exc, "context", None)
        parts = [p for p in (context, problem) if p]
        message = "; ".join(str(p) for p in parts) or str(exc).splitlines()[0]
    return PolicyIssue(file, line, column, "$", f"YAML: {message}", rule)


class _LocatedConstructor(RoundTripConstructor):
    """A round-trip constructor whose conversion failures carry the node's position.

    ruamel.yaml raises a bare ``ValueError`` for ``2001-02-30``, ``!!int x`` or an
    integer past Python's digit limit, and crashes on a few other values (a plain ``-_``,
    which YAML 1.2 resolves as an integer with no digits; ``!!set`` on a scalar); this
    turns each into a marked ``ConstructorError``.
    """

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except ValueError as exc:
            problem = f"cannot read this value: {exc}"
            raise ConstructorError(None, None, problem, node.start_mark) from None
        except (IndexError, AttributeError, TypeError):
            tag = getattr(node.tag, "value", node.tag)
            problem = f"cannot read this value as {tag}"
            raise ConstructorError(None, None, problem, node.start_mark) from None


def _yaml() -> YAML:
    yaml = YAML(typ="rt", pure=True)
    yaml.Constructor = _LocatedConstructor
    yaml.allow_duplicate_keys = False
    return yaml


def _load(text: str) -> Any:
    """The round-trip tree of ``text``.

    Raises:
        YAMLError: also for a mapping used as a key of a mapping inside a key, which
            ruamel.yaml cannot hash (a ``TypeError`` of its own).
    """
    try:
        return _yaml().load(text)
    except TypeError as exc:
        raise YAMLError(f"cannot read this document: {exc}") from None


def _prescan(text: str, file: str) -> None:
    """Refuse deep nesting, alias expansion and giant documents from the event stream alone.

    The events come from libyaml's C parser when PyYAML has it (the prescan is then a
    small part of reading a file); a document libyaml cannot parse is scanned again with
    ruamel.yaml, so what is refused and every message stay those of ruamel.yaml.
    """
    if libyaml is not None:
        try:
            scan_events(libyaml.parse(text, Loader=libyaml.CSafeLoader), libyaml.events, file)
        except libyaml.YAMLError:
            pass  # ruamel.yaml decides (and reports) below
        else:
            return
    scan_events(YAML(typ="safe", pure=True).parse(text), ruamel_events, file)


def _unsupported(kind: str, where: Location, path: JsonPath) -> PolicyFileRefusedError:
    message = f"unsupported YAML {kind}; {_PLAIN_DATA}"
    return PolicyFileRefusedError(issue_at(where, path, message, "yaml.tag"))


def _number(value: int | float, where: Location, path: JsonPath) -> int | float:
    if isinstance(value, int):
        return int(value)
    if not math.isfinite(value):
        message = f"{value!r} is not a finite number"
        raise PolicyFileRefusedError(issue_at(where, path, message, "value.non-finite"))
    return float(value)


def _scalar(value: Any, where: Location, path: JsonPath) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, ScalarBoolean):
        return bool(value)
    if isinstance(value, int | float):
        return _number(value, where, path)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    # a custom tag (!foo) or a type the format has no use for (!!binary, !!set, ...)
    tag = getattr(value, "tag", None) if isinstance(value, TaggedScalar) else None
    kind = str(getattr(tag, "value", tag)) if tag is not None else type(value).__name__
    raise _unsupported(f"value ({kind})", where, path)


def _block_scalar(value: Any) -> bool:
    return isinstance(value, LiteralScalarString | FoldedScalarString)


def _refuse_collection_tag(node: Any, where: Location, path: JsonPath) -> None:
    # !!python/object:..., !!python/tuple, !custom on a mapping or a sequence: never a policy
    tag = getattr(node, "tag", None)
    value = getattr(tag, "value", None)
    if value is not None:
        raise _unsupported(f"tag {value}", where, path)


def _key_location(node: CommentedMap, key: Any, value: Any, where: Location) -> Location:
    """Where a mapping entry is (merged ``<<`` keys keep the mapping's place)."""
    try:
        kl, kc = node.lc.key(key)
        vl, _ = node.lc.value(key)
    except (KeyError, TypeError, AttributeError):
        kl, kc, vl = where.line - 1, where.column - 1, where.line - 1
    return Location(where.file, kl + 1, kc + 1, vl + 1 + (1 if _block_scalar(value) else 0))


def _item_location(node: CommentedSeq, index: int, value: Any, where: Location) -> Location:
    """Where a sequence item is."""
    try:
        il, ic = node.lc.item(index)
    except (KeyError, TypeError, AttributeError):
        il, ic = where.line - 1, where.column - 1
    return Location(where.file, il + 1, ic + 1, il + 1 + (1 if _block_scalar(value) else 0))


def _mapping(node: CommentedMap, path: JsonPath, where: Location, smap: SourceMap) -> Any:
    out: dict[str, Any] = {}
    for key, value in node.items():
        here = _key_location(node, key, value, where)
        if not isinstance(key, str):
            message = f"mapping keys must be strings, got {key!r}"
            raise PolicyFileRefusedError(issue_at(here, path, message, "yaml.key-type"))
        child = (*path, str(key))
        smap[child] = here
        out[str(key)] = _convert(value, child, here, smap)
    return out


def _sequence(node: CommentedSeq, path: JsonPath, where: Location, smap: SourceMap) -> Any:
    items: list[Any] = []
    for index, value in enumerate(node):
        here = _item_location(node, index, value, where)
        child = (*path, index)
        smap[child] = here
        items.append(_convert(value, child, here, smap))
    return items


def _convert(node: Any, path: JsonPath, where: Location, smap: SourceMap) -> Any:
    if isinstance(node, CommentedMap):
        _refuse_collection_tag(node, where, path)
        return _mapping(node, path, where, smap)
    if isinstance(node, CommentedSeq):
        _refuse_collection_tag(node, where, path)
        return _sequence(node, path, where, smap)
    return _scalar(node, where, path)


def _duplicate_key_issue(file: str, exc: DuplicateKeyError) -> PolicyIssue:
    key = str(getattr(exc, "problem", "")).split('"')
    name = key[1] if len(key) > 1 else "?"
    return _mark_issue(file, exc, "yaml.duplicate-key", f"duplicate key {name!r}")


def parse_yaml_roundtrip(text: str, file: str) -> tuple[Any, SourceMap, list[PolicyIssue]]:
    """Parse YAML policy text through ruamel.yaml.

    Args:
        text: The decoded file content.
        file: The file name to put in locations and issues.

    Returns:
        ``(data, sourcemap, issues)``; ``data`` is None when there are issues or the
        document is empty.
    """
    smap: SourceMap = {}
    try:
        _prescan(text, file)
        tree = _load(text)
        root = Location(file, 1, 1, 1)
        smap[()] = root
        data = _convert(tree, (), root, smap)
    except PolicyFileRefusedError as refused:
        return None, {}, [refused.issue]
    except DuplicateKeyError as exc:
        return None, {}, [_duplicate_key_issue(file, exc)]
    except (MarkedYAMLError, YAMLError) as exc:
        return None, {}, [_mark_issue(file, exc, "yaml.syntax")]
    except RecursionError:
        return None, {}, [PolicyIssue(file, 1, 1, "$", "YAML nesting too deep", "yaml.too-deep")]
    return data, smap, []


__all__ = ["parse_yaml_roundtrip"]
