"""YAML policy text -> plain data + source map, straight from libyaml's event stream.

The fast path of `ctxpolicy.loading.yaml_reader`. PyYAML built with libyaml parses in C
and gives every event its line and column; one pass over the events applies the
reader's limits (the *pre-scan*: depth, node count with aliases expanded, huge
integers) and builds the plain data and its source map.

It reads the subset of YAML that policy files are written in, and for that subset gives
exactly what the ruamel.yaml round-trip reader gives: YAML 1.2 scalars (``yes``/``on``
are strings; ``true``/``false``, decimal integers and floats as YAML 1.2 reads them) and
the same positions (key line and column, value line, the line after ``|``/``>``).
Anything outside the subset makes `read_events` return None, and the caller reads the
text with ruamel.yaml, so every message and position of an unusual document stays
ruamel.yaml's: anchors and aliases, tags, directives, merge keys (``<<``), keys that are
not strings, duplicate keys, null values, timestamps, integers written in another base
or with ``_``, ``.inf``/``.nan``, several documents, and any text libyaml refuses.
``tests/loading/test_yaml_events.py`` holds the equivalence on every YAML file of the
repository and on generated documents.
"""

from __future__ import annotations

import math
import re
from types import ModuleType
from typing import Any

import yaml as pyyaml  # type: ignore[import-untyped]

from ctxpolicy.diagnostics import MAX_DEPTH, MAX_NODES, Location, SourceMap, issue_at
from ctxpolicy.errors import PolicyFileRefusedError

#: PyYAML when it is built with libyaml (its C parser); None without it.
libyaml: ModuleType | None = pyyaml if getattr(pyyaml, "__with_libyaml__", False) else None

_INT_LIKE = re.compile(r"[-+]?[0-9_]+")

#: Longest plain scalar that may be converted to an int (Python refuses > 4300 digits).
MAX_INT_DIGITS = 4000


def refused(mark: Any, file: str, message: str, rule: str) -> PolicyFileRefusedError:
    """A refusal at an event's ``start_mark`` (0-based line and column)."""
    where = Location(file, mark.line + 1, mark.column + 1)
    return PolicyFileRefusedError(issue_at(where, (), message, rule))


def refuse_huge_integer(event: Any, file: str) -> None:
    """Refuse a plain scalar that would be an integer of more than `MAX_INT_DIGITS` digits."""
    value = event.value
    # plain style: None for ruamel.yaml, "" for libyaml
    if not event.style and len(value) > MAX_INT_DIGITS and _INT_LIKE.fullmatch(value):
        message = f"a number with {len(value)} digits; numbers in a policy are small"
        raise refused(event.start_mark, file, message, "value.too-long")


class NodeCount:
    """The pre-scan's counts: nodes so far (aliases expanded) and open collections.

    Fed with the events of one stream (libyaml's or ruamel.yaml's); raises
    `PolicyFileRefusedError` at the first event past a limit.
    """

    def __init__(self, file: str) -> None:
        self.file = file
        self.anchors: dict[str, int] = {}
        # one frame per open collection: [anchor, expanded node count]
        self.stack: list[list[Any]] = [[None, 0]]
        self.total = 0

    def node(self, event: Any) -> None:
        """One more scalar or collection."""
        self.total += 1
        if self.total > MAX_NODES:
            message = f"the document has more than {MAX_NODES} values"
            raise refused(event.start_mark, self.file, message, "file.too-many-nodes")

    def open(self, event: Any) -> None:
        """A mapping or sequence starts."""
        self.stack.append([event.anchor, 1])
        if len(self.stack) - 1 > MAX_DEPTH:
            message = f"nesting deeper than {MAX_DEPTH} levels"
            raise refused(event.start_mark, self.file, message, "yaml.too-deep")

    def close(self) -> None:
        """A mapping or sequence ends: its size counts in its parent."""
        anchor, size = self.stack.pop()
        if anchor is not None:
            self.anchors[anchor] = size
        self.stack[-1][1] += size

    def scalar(self, event: Any) -> None:
        """A scalar (refused when it is a huge integer)."""
        refuse_huge_integer(event, self.file)
        if event.anchor is not None:
            self.anchors[event.anchor] = 1
        self.stack[-1][1] += 1

    def alias(self, event: Any) -> None:
        """An alias: the nodes of its anchor count again."""
        size = self.anchors.get(event.anchor, 1)
        self.stack[-1][1] += size
        self.total += size
        if self.total > MAX_NODES:
            message = (
                f"aliases expand the document past {MAX_NODES} nodes "
                f"(alias *{event.anchor}); write the values out or use 'extends'"
            )
            raise refused(event.start_mark, self.file, message, "yaml.alias-expansion")


def scan_events(stream: Any, events: Any, file: str) -> None:
    """The pre-scan over an event stream (``events``: the module of its event classes)."""
    count = NodeCount(file)
    for event in stream:
        if isinstance(event, events.ScalarEvent | events.CollectionStartEvent):
            count.node(event)
        if isinstance(event, events.CollectionStartEvent):
            count.open(event)
        elif isinstance(event, events.CollectionEndEvent):
            count.close()
        elif isinstance(event, events.ScalarEvent):
            count.scalar(event)
        elif isinstance(event, events.AliasEvent):
            count.alias(event)


# ----------------------------------------------------------------- YAML 1.2 scalars

# The implicit resolvers of ruamel.yaml for YAML 1.2 (ruamel/yaml/resolver.py), in the
# order it tries them; `plain_scalar` reads what they resolve to.
_FLOAT_12 = re.compile(
    r"""^(?:
     [-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |[-+]?\.[0-9_]+(?:[eE][-+][0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)
_INT_12 = re.compile(
    r"""^(?:[-+]?0b[0-1_]+
    |[-+]?0o?[0-7_]+
    |[-+]?[0-9_]+
    |[-+]?0x[0-9a-fA-F_]+)$""",
    re.X,
)
_TIMESTAMP = re.compile(
    r"""^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]
    |[0-9][0-9][0-9][0-9] -[0-9][0-9]? -[0-9][0-9]?
    (?:[Tt]|[ \t]+)[0-9][0-9]?
    :[0-9][0-9] :[0-9][0-9] (?:\.[0-9]*)?
    (?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$""",
    re.X,
)
_BOOLEANS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False}
_BOOLEANS["FALSE"] = False
#: Plain scalars resolved as null, merge (``<<``) or value (``=``): left to ruamel.yaml.
_OTHER_TAGS = frozenset({"", "~", "null", "Null", "NULL", "<<", "="})
#: A decimal integer written the one way YAML 1.1 and 1.2 read alike.
_DECIMAL = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")
#: The first characters of every plain scalar that is not a string in YAML 1.2.
_NOT_ALWAYS_STR = frozenset("-+0123456789.<=~nNtTfF")


#: Characters libyaml (YAML 1.1) and ruamel.yaml (YAML 1.2) treat differently: a tab
#: between tokens, and the line breaks of YAML 1.1 alone (NEL, LS, PS).
_RISKY_CHARACTERS = re.compile("[\t\x85\u2028\u2029]")


class UnsupportedError(Exception):
    """The document is outside the subset `read_events` reads (ruamel.yaml reads it)."""


def _number(value: str) -> int | float:
    """A plain scalar that YAML 1.2 resolves to a number (`UnsupportedError` for the rare forms)."""
    if _FLOAT_12.match(value):
        if "_" in value or "n" in value or "N" in value:  # 1_0.5, .inf, .nan
            raise UnsupportedError
        number = float(value)
        if not math.isfinite(number):  # 1e999: ruamel.yaml's reader refuses it
            raise UnsupportedError
        return number
    if _INT_12.match(value):
        if not _DECIMAL.fullmatch(value):  # 0o17, 0x1f, 017, 1_000
            raise UnsupportedError
        return int(value)
    if _TIMESTAMP.match(value):
        raise UnsupportedError
    raise LookupError  # a string


def plain_scalar(value: str) -> Any:
    """The value of an untagged plain scalar as YAML 1.2 (ruamel.yaml) reads it.

    Raises:
        UnsupportedError: a null, a timestamp, a merge key, or a number written in a form
            the fast reader leaves to ruamel.yaml.
    """
    if not value or value[0] not in _NOT_ALWAYS_STR:
        if not value:
            raise UnsupportedError
        return value
    if value in _BOOLEANS:
        return _BOOLEANS[value]
    if value in _OTHER_TAGS:
        raise UnsupportedError
    try:
        return _number(value)
    except LookupError:
        return value


# --------------------------------------------------------------------------- building

_BLOCK_STYLES = frozenset({"|", ">"})
#: The header of a block scalar as ruamel.yaml accepts it: the indicator, chomping and
#: indentation, then a space or the end of the line (libyaml also takes ``|#``).
_BLOCK_HEADER = re.compile(r"[|>](?:[1-9][-+]?|[-+][1-9]?)?(?:[ \r\n]|\Z)")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _refused_indentation(text: str, header: int) -> bool:
    """Whether ruamel.yaml refuses the leading blank lines of a block scalar whose
    indentation it detects (libyaml reads them): the first is indented by some spaces and
    a later one, or the first line of text, by more ("more indented follow up line")."""
    found = _LINE_BREAK.search(text, header)
    if found is None:
        return False
    first, deepest, column = -1, 0, 0
    for char in text[found.end() :]:
        if char == " ":
            column += 1
            deepest = max(deepest, column)
        elif char in "\r\n":
            if first < 0:
                first = column
            column = 0
        else:
            break
    return first > 0 and deepest > first


class _Builder:
    """Plain data and source map from node events, each placed where ruamel.yaml puts it.

    A mapping entry sits at its key's line and column, with its value's line (the line
    after the indicator for a ``|``/``>`` block scalar); a sequence item at its own line
    and column.
    """

    def __init__(self, text: str, file: str) -> None:
        self.text = text
        self.file = file
        self.root = Location(file, 1, 1, 1)
        self.smap: SourceMap = {(): self.root}
        self.data: Any = None
        # open collections: [container, path, key, key mark] (key None: a key comes next)
        self.stack: list[list[Any]] = []

    def place(self, mark: Any, value: Any, block: int = 0) -> tuple[Any, ...] | None:
        """Put one node's value in its parent; its JSON path (None when it is a key).

        Args:
            mark: The node's start mark.
            value: Its value (an empty container for a collection).
            block: 1 for a ``|``/``>`` block scalar (its text starts on the next line).
        """
        if not self.stack:
            self.data = value
            return ()
        frame = self.stack[-1]
        container, path = frame[0], frame[1]
        if type(container) is list:
            child: tuple[Any, ...] = (*path, len(container))
            line = mark.line + 1
            self.smap[child] = Location(self.file, line, mark.column + 1, line + block)
            container.append(value)
            return child
        key = frame[2]
        if key is None:
            if type(value) is not str or value in container:  # not a string, or duplicate
                raise UnsupportedError
            frame[2], frame[3] = value, mark
            return None
        key_mark = frame[3]
        child = (*path, key)
        self.smap[child] = Location(
            self.file, key_mark.line + 1, key_mark.column + 1, mark.line + 1 + block
        )
        container[key] = value
        frame[2] = None
        return child

    def scalar(self, event: Any) -> None:
        """A scalar: a key, an item, an entry's value or the whole document."""
        if event.anchor is not None or event.tag is not None:
            raise UnsupportedError
        style = event.style
        value = event.value if style else plain_scalar(event.value)
        block = 0
        if style in _BLOCK_STYLES:
            header = _BLOCK_HEADER.match(self.text, event.start_mark.index)
            if header is None or (
                not any(c.isdigit() for c in header.group())
                and _refused_indentation(self.text, header.start())
            ):
                raise UnsupportedError
            block = 1
        self.place(event.start_mark, value, block)

    def start(self, event: Any, container: dict[str, Any] | list[Any]) -> None:
        """A mapping or sequence opens (never as a key)."""
        if event.anchor is not None or event.tag is not None:
            raise UnsupportedError
        if self.stack and type(self.stack[-1][0]) is dict and self.stack[-1][2] is None:
            raise UnsupportedError  # a collection as a mapping key
        path = self.place(event.start_mark, container)
        self.stack.append([container, path, None, None])


def _document(loader: Any, events: Any, build: _Builder, count: NodeCount) -> None:
    """The node events of the one document, from its root to the end of the stream."""
    scalar, alias = events.ScalarEvent, events.AliasEvent
    mapping, sequence = events.MappingStartEvent, events.SequenceStartEvent
    ends = (events.MappingEndEvent, events.SequenceEndEvent)
    while True:
        event = loader.get_event()
        kind = type(event)
        if kind is scalar:
            count.node(event)
            count.scalar(event)
            build.scalar(event)
        elif kind is mapping or kind is sequence:
            count.node(event)
            count.open(event)
            build.start(event, {} if kind is mapping else [])
        elif kind in ends:
            count.close()
            build.stack.pop()
        elif kind is alias:
            raise UnsupportedError
        if not build.stack:
            return


def _stream(loader: Any, events: Any, build: _Builder, count: NodeCount) -> None:
    """Stream start, at most one document without directives, stream end."""
    loader.get_event()  # StreamStartEvent
    event = loader.get_event()
    if type(event) is events.StreamEndEvent:
        return  # no document at all: nothing but comments and blank lines
    if event.version is not None or event.tags:
        raise UnsupportedError  # %YAML / %TAG directives
    _document(loader, events, build, count)
    if type(loader.get_event()) is not events.DocumentEndEvent:
        raise UnsupportedError
    if type(loader.get_event()) is not events.StreamEndEvent:
        raise UnsupportedError  # a second document


def read_events(text: str, file: str) -> tuple[Any, SourceMap] | None:
    """Plain data and source map of YAML ``text``, or None when ruamel.yaml must read it.

    Raises:
        PolicyFileRefusedError: the text is past a reader limit (the pre-scan's refusals,
            at the same event and with the same message).
    """
    if libyaml is None or _RISKY_CHARACTERS.search(text):
        return None
    build = _Builder(text, file)
    loader = libyaml.CSafeLoader(text)
    try:
        _stream(loader, libyaml.events, build, NodeCount(file))
    except (UnsupportedError, libyaml.YAMLError):
        return None
    finally:
        loader.dispose()
    return build.data, build.smap


__all__ = ["NodeCount", "UnsupportedError", "libyaml", "plain_scalar", "read_events", "scan_events"]
