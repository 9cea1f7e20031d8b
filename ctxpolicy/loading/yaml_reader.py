"""YAML policy text -> plain data + source map, through ruamel.yaml round-trip mode.

Two passes over the text. The first walks the *event* stream only (cheap, no
objects built) and refuses documents nested deeper than `MAX_DEPTH` or whose
aliases would expand past `MAX_NODES` nodes ("billion laughs"), so the
second pass, which composes the round-trip tree (every node keeps its line and
column), never sees a hostile document.
"""

from __future__ import annotations

import functools
import math
import re
from datetime import date, datetime, time
from typing import Any

from ctxpolicy.issues import PolicyIssue
from ctxpolicy.loading.limits import MAX_DEPTH, MAX_NODES
from ctxpolicy.loading.sourcemap import JsonPath, Location, SourceMap, format_path

_INT_LIKE = re.compile(r"[-+]?[0-9_]+")


class _RefusedError(Exception):
    def __init__(self, issue: PolicyIssue) -> None:
        super().__init__(issue.message)
        self.issue = issue


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


@functools.cache
def _located_constructor() -> Any:
    """A round-trip constructor whose conversion failures carry the node's position.

    ruamel.yaml raises a bare ``ValueError`` for ``2001-02-30``, ``!!int x`` or an
    integer past Python's digit limit; this turns it into a marked ``ConstructorError``.
    """
    from ruamel.yaml.constructor import ConstructorError, RoundTripConstructor

    class LocatedConstructor(RoundTripConstructor):
        def construct_object(self, node: Any, deep: bool = False) -> Any:
            try:
                return super().construct_object(node, deep=deep)
            except ValueError as exc:
                problem = f"cannot read this value: {exc}"
                raise ConstructorError(None, None, problem, node.start_mark) from None

    return LocatedConstructor


def _yaml() -> Any:
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt", pure=True)
    yaml.Constructor = _located_constructor()
    yaml.allow_duplicate_keys = False
    return yaml


#: Longest plain scalar that may be converted to an int (Python refuses > 4300 digits).
_MAX_INT_DIGITS = 4000


def _refuse_huge_integer(event: Any, file: str) -> None:
    value = event.value
    # plain style: None for ruamel.yaml, "" for libyaml
    if not event.style and len(value) > _MAX_INT_DIGITS and _INT_LIKE.fullmatch(value):
        mark = event.start_mark
        raise _RefusedError(
            PolicyIssue(
                file,
                mark.line + 1,
                mark.column + 1,
                "$",
                f"a number with {len(value)} digits; numbers in a policy are small",
                "value.too-long",
            )
        )


@functools.cache
def _libyaml() -> Any:
    """PyYAML when it is built with libyaml (its C event parser), else None."""
    try:
        import yaml  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - PyYAML comes with langchain-core
        return None
    return yaml if getattr(yaml, "__with_libyaml__", False) else None


def _prescan(text: str, file: str) -> None:
    """Refuse deep nesting, alias expansion and giant documents from the event stream alone.

    The events come from libyaml's C parser when PyYAML has it (the prescan is then a
    small part of reading a file); a document libyaml cannot parse is scanned again with
    ruamel.yaml, so what is refused and every message stay those of ruamel.yaml.
    """
    fast = _libyaml()
    if fast is not None:
        try:
            _scan_events(fast.parse(text, Loader=fast.CSafeLoader), fast.events, file)
        except fast.YAMLError:
            pass  # ruamel.yaml decides (and reports) below
        else:
            return
    from ruamel.yaml import YAML, events

    _scan_events(YAML(typ="safe", pure=True).parse(text), events, file)


def _scan_events(stream: Any, events: Any, file: str) -> None:
    """The checks of `_prescan` over an event stream (``events``: the event classes)."""
    anchors: dict[str, int] = {}
    # one frame per open collection: [anchor, expanded node count]
    stack: list[list[Any]] = [[None, 0]]
    total = 0  # nodes so far, aliases expanded
    for event in stream:
        mark = event.start_mark
        if isinstance(event, events.ScalarEvent | events.CollectionStartEvent):
            total += 1
            if total > MAX_NODES:
                raise _RefusedError(
                    PolicyIssue(
                        file,
                        mark.line + 1,
                        mark.column + 1,
                        "$",
                        f"the document has more than {MAX_NODES} values",
                        "file.too-many-nodes",
                    )
                )
        if isinstance(event, events.CollectionStartEvent):
            stack.append([event.anchor, 1])
            if len(stack) - 1 > MAX_DEPTH:
                raise _RefusedError(
                    PolicyIssue(
                        file,
                        mark.line + 1,
                        mark.column + 1,
                        "$",
                        f"nesting deeper than {MAX_DEPTH} levels",
                        "yaml.too-deep",
                    )
                )
        elif isinstance(event, events.CollectionEndEvent):
            anchor, size = stack.pop()
            if anchor is not None:
                anchors[anchor] = size
            stack[-1][1] += size
        elif isinstance(event, events.ScalarEvent):
            _refuse_huge_integer(event, file)
            if event.anchor is not None:
                anchors[event.anchor] = 1
            stack[-1][1] += 1
        elif isinstance(event, events.AliasEvent):
            size = anchors.get(event.anchor, 1)
            stack[-1][1] += size
            total += size
            if total > MAX_NODES:
                raise _RefusedError(
                    PolicyIssue(
                        file,
                        mark.line + 1,
                        mark.column + 1,
                        "$",
                        f"aliases expand the document past {MAX_NODES} nodes "
                        f"(alias *{event.anchor}); write the values out or use 'extends'",
                        "yaml.alias-expansion",
                    )
                )


def _scalar(value: Any, file: str, where: Location, path: JsonPath) -> Any:
    from ruamel.yaml.comments import TaggedScalar
    from ruamel.yaml.scalarbool import ScalarBoolean

    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, ScalarBoolean):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _RefusedError(
                PolicyIssue(
                    file,
                    where.line,
                    where.column,
                    format_path(path),
                    f"{value!r} is not a finite number",
                    "value.non-finite",
                )
            )
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    # a custom tag (!foo) or a type the format has no use for (!!binary, !!set, ...)
    tag = getattr(value, "tag", None) if isinstance(value, TaggedScalar) else None
    kind = str(getattr(tag, "value", tag)) if tag is not None else type(value).__name__
    raise _RefusedError(
        PolicyIssue(
            file,
            where.line,
            where.column,
            format_path(path),
            f"unsupported YAML value ({kind}); use plain strings, numbers, booleans, "
            "lists and mappings",
            "yaml.tag",
        )
    )


def _block_scalar(value: Any) -> bool:
    from ruamel.yaml.scalarstring import FoldedScalarString, LiteralScalarString

    return isinstance(value, LiteralScalarString | FoldedScalarString)


def _refuse_collection_tag(node: Any, file: str, where: Location, path: JsonPath) -> None:
    # !!python/object:..., !!python/tuple, !custom on a mapping or a sequence: never a policy
    tag = getattr(node, "tag", None)
    value = getattr(tag, "value", None)
    if value is not None:
        raise _RefusedError(
            PolicyIssue(
                file,
                where.line,
                where.column,
                format_path(path),
                f"unsupported YAML tag {value}; use plain strings, numbers, booleans, "
                "lists and mappings",
                "yaml.tag",
            )
        )


def _convert(node: Any, file: str, path: JsonPath, where: Location, smap: SourceMap) -> Any:
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if isinstance(node, CommentedMap | CommentedSeq):
        _refuse_collection_tag(node, file, where, path)
    if isinstance(node, CommentedMap):
        out: dict[str, Any] = {}
        for key, value in node.items():
            try:
                kl, kc = node.lc.key(key)
                vl, _ = node.lc.value(key)
            except (KeyError, TypeError, AttributeError):  # merged (<<) keys keep the map's place
                kl, kc, vl = where.line - 1, where.column - 1, where.line - 1
            here = Location(file, kl + 1, kc + 1, vl + 1 + (1 if _block_scalar(value) else 0))
            if not isinstance(key, str):
                raise _RefusedError(
                    PolicyIssue(
                        file,
                        here.line,
                        here.column,
                        format_path(path),
                        f"mapping keys must be strings, got {key!r}",
                        "yaml.key-type",
                    )
                )
            child = (*path, str(key))
            smap[child] = here
            out[str(key)] = _convert(value, file, child, here, smap)
        return out
    if isinstance(node, CommentedSeq):
        items: list[Any] = []
        for index, value in enumerate(node):
            try:
                il, ic = node.lc.item(index)
            except (KeyError, TypeError, AttributeError):
                il, ic = where.line - 1, where.column - 1
            here = Location(file, il + 1, ic + 1, il + 1 + (1 if _block_scalar(value) else 0))
            child = (*path, index)
            smap[child] = here
            items.append(_convert(value, file, child, here, smap))
        return items
    return _scalar(node, file, where, path)


def parse_yaml(text: str, file: str) -> tuple[Any, SourceMap, list[PolicyIssue]]:
    """Parse YAML policy text.

    Args:
        text: The decoded file content.
        file: The file name to put in locations and issues.

    Returns:
        ``(data, sourcemap, issues)``; ``data`` is None when there are issues or the
        document is empty.
    """
    from ruamel.yaml.constructor import DuplicateKeyError
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    smap: SourceMap = {}
    try:
        _prescan(text, file)
        tree = _yaml().load(text)
        root = Location(file, 1, 1, 1)
        smap[()] = root
        data = _convert(tree, file, (), root, smap)
    except _RefusedError as refused:
        return None, {}, [refused.issue]
    except DuplicateKeyError as exc:
        key = str(getattr(exc, "problem", "")).split('"')
        name = key[1] if len(key) > 1 else "?"
        return None, {}, [_mark_issue(file, exc, "yaml.duplicate-key", f"duplicate key {name!r}")]
    except MarkedYAMLError as exc:
        return None, {}, [_mark_issue(file, exc, "yaml.syntax")]
    except YAMLError as exc:
        return None, {}, [_mark_issue(file, exc, "yaml.syntax")]
    except RecursionError:
        return None, {}, [PolicyIssue(file, 1, 1, "$", "YAML nesting too deep", "yaml.too-deep")]
    return data, smap, []


__all__ = ["parse_yaml"]
