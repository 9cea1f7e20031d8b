"""Edit one value of a policy file in place, keeping everything else byte for byte.

`ctxpolicy set` must keep a team's comments, key order, quoting, alignment and blank
lines. Re-dumping a round-trip document does not: it realigns ``key:   {...}`` flow
mappings, rewraps long flow collections and normalizes indentation. So the edit is a
*patch of one node*: ruamel.yaml's round-trip composer gives the exact start and end of
every node, and only the characters of the node being changed are replaced (or, for a
new key, one block of lines is inserted right after its siblings). Every edit is then
checked: the edited text is parsed again and must equal the old data with exactly that
one value set, or the edit is refused and nothing is written.

TOML files are supported with the same guarantee for the common cases: replacing a
value written on one line (``key = value`` under its ``[table]``, or a dotted key), and
adding a key to an existing ``[table]``, the top level, or a new ``[table]`` appended at
the end. Anything else (multi-line values, keys inside inline tables, arrays of tables)
is refused with a message saying so; the file is never rewritten from scratch.

Pure functions: `parse_key`, `parse_value`, `set_yaml_value`, `set_toml_value`,
`set_text_value`. The one I/O entry point is `set_policy_value` (lock, edit, validate the
candidate next to the file, atomic write).
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ctxpolicy.errors import CtxPolicyError, PolicyValidationError
from ctxpolicy.issues import PolicyIssue

__all__ = [
    "EditError",
    "EditResult",
    "check_candidate",
    "file_format",
    "format_yaml_value",
    "parse_key",
    "parse_value",
    "quote_double",
    "set_policy_value",
    "set_text_value",
    "set_toml_value",
    "set_yaml_value",
]

FileFormat = Literal["yaml", "toml"]

_SEGMENT_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]*$")
_BARE_TOML_KEY_RE = re.compile(r"^[A-Za-z0-9_-]+$")


class EditError(CtxPolicyError):
    """An edit that cannot be applied: bad key syntax, a path through a non-mapping,
    an unparsable value, or a construct the editor refuses to touch. Nothing is written.
    """


@dataclass(frozen=True, slots=True)
class EditResult:
    """What `set_policy_value` did.

    Attributes:
        path: The edited file.
        key: The dotted key as segments.
        changed: False when the file already held that value (nothing written).
        warnings: Validation warnings of the written policy.
    """

    path: Path
    key: tuple[str, ...]
    changed: bool
    warnings: tuple[PolicyIssue, ...] = ()


# --------------------------------------------------------------------------- keys, values


def parse_key(key: str) -> tuple[str, ...]:
    """Split a dotted key (``budget.ratios.query``) into its segments.

    Segments are mapping keys (letters, digits, ``_``, ``-``); a segment of digits
    indexes a list (``order.1``).

    Raises:
        EditError: the key is empty or a segment is not a valid name.
    """
    if not key or not key.strip():
        raise EditError("KEY: empty key (expected a dotted key such as budget.ratios.query)")
    segments = tuple(key.split("."))
    for segment in segments:
        if not _SEGMENT_RE.match(segment):
            raise EditError(
                f"KEY {key!r}: segment {segment!r} is not a key name "
                "(letters, digits, '_' and '-', separated by '.')"
            )
    return segments


def parse_value(text: str) -> Any:
    """Parse a command-line value as YAML: a scalar or a flow collection.

    ``0.1`` is a float, ``false`` a bool, ``[a, b]`` a list, ``{x: 1}`` a mapping,
    ``'"true"'`` the string ``true``.

    Raises:
        EditError: the text is not a single YAML value.
    """
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    loader = YAML(typ="safe", pure=True)
    try:
        value = loader.load(text)
    except YAMLError as exc:
        detail = " ".join(str(exc).split())
        raise EditError(f"VALUE {text!r} is not a YAML value: {detail}") from None
    return _plain(value)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    # dates and other YAML-only types: keep their text form.
    return str(value)


def _same(a: Any, b: Any) -> bool:
    """Structural equality that also compares types (``True`` is not ``1``)."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and bool(a == b)


def _with_value(data: Any, key: Sequence[str], value: Any) -> Any:
    """A copy of ``data`` with ``key`` set to ``value`` (missing mappings created)."""
    if not key:
        return value
    head, rest = key[0], key[1:]
    if isinstance(data, list):
        index = int(head)
        copy = list(data)
        copy[index] = _with_value(copy[index], rest, value)
        return copy
    base = dict(data) if isinstance(data, Mapping) else {}
    base[head] = _with_value(base.get(head), rest, value)
    return base


def set_text_value(text: str, key: Sequence[str], value: Any, *, fmt: FileFormat) -> str:
    """Set ``key`` to ``value`` in a policy document, changing only that value's text.

    Args:
        text: The document.
        key: Key segments (see `parse_key`).
        value: Plain data (see `parse_value`).
        fmt: ``yaml`` or ``toml``.

    Raises:
        EditError: the edit cannot be applied safely (the message says why).
    """
    if fmt == "toml":
        return set_toml_value(text, key, value)
    return set_yaml_value(text, key, value)


# --------------------------------------------------------------------------- YAML rendering


def _yaml_float(value: float) -> str:
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    text = repr(value)
    if "e" in text and "." not in text.split("e")[0]:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}.0e{exponent}"
    return text


_PLAIN_FIRST_BAD = frozenset("-?:,[]{}#&*!|>'\"%@`")


def _yaml_plain_ok(value: str, *, flow: bool) -> bool:
    """Whether ``value`` can be written unquoted (and read back as the same string)."""
    if not value or value != value.strip() or not value.isprintable():
        return False
    if value[0] in _PLAIN_FIRST_BAD or ": " in value or " #" in value or value.endswith(":"):
        return False
    if flow and any(c in value for c in ",[]{}"):
        return False
    from ruamel.yaml import YAML

    try:
        return bool(YAML(typ="safe", pure=True).load(value) == value)
    except Exception:  # noqa: BLE001 - any parse failure just means "quote it"
        return False


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def quote_double(value: str) -> str:
    """A double-quoted string valid in both YAML and TOML, on one line.

    Quotes, backslashes and line breaks are escaped; every other non-printable character
    (controls, NEL, line/paragraph separators, ...) becomes a ``\\u``/``\\U`` escape.
    """
    out = []
    for char in value:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif not char.isprintable() or char == "\x7f":
            code = ord(char)
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _yaml_str(value: str, *, style: str | None, flow: bool) -> str:
    if style == "'" and value.isprintable():
        return "'" + value.replace("'", "''") + "'"
    if style is None and _yaml_plain_ok(value, flow=flow):
        return value
    return quote_double(value)


def _yaml_flow(  # noqa: PLR0911 - one return per type
    value: Any, *, style: str | None = None, flow: bool = True
) -> str:
    """One-line YAML text for plain data; strings keep the old node's quoting.

    ``flow`` says whether the text lands inside a flow collection (where ``,[]{}``
    end a plain scalar); items of collections are always in flow context.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _yaml_float(value)
    if isinstance(value, str):
        return _yaml_str(value, style=style, flow=flow)
    if isinstance(value, list):
        return "[" + ", ".join(_yaml_flow(v) for v in value) + "]"
    if isinstance(value, Mapping):
        items = (f"{_yaml_flow(str(k))}: {_yaml_flow(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    raise EditError(f"VALUE: cannot write a value of type {type(value).__name__}")


def format_yaml_value(value: Any) -> str:
    """One-line YAML text for a block-context value, quoted only where YAML needs it.

    ``"true"`` becomes ``"true"`` (quoted, so it stays a string), ``team-a`` stays plain.
    """
    return _yaml_flow(value, flow=False)


def _nested(rest: Sequence[str], value: Any) -> Any:
    for segment in reversed(rest):
        value = {segment: value}
    return value


def _yaml_block_lines(key: str, value: Any, *, indent: int, step: int) -> list[str]:
    """Block-style lines for ``key: value``; nested new mappings go one level deeper."""
    pad = " " * indent
    if isinstance(value, Mapping) and value:
        lines = [f"{pad}{_yaml_flow(key, flow=False)}:"]
        for sub_key, sub_value in value.items():
            lines += _yaml_block_lines(str(sub_key), sub_value, indent=indent + step, step=step)
        return lines
    return [f"{pad}{_yaml_flow(key, flow=False)}: {_yaml_flow(value, flow=False)}"]


# --------------------------------------------------------------------------- YAML patching


@dataclass(frozen=True, slots=True)
class _YamlDoc:
    text: str
    newline: str
    step: int


def _compose(text: str) -> Any:
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        return YAML(typ="rt").compose(text)
    except YAMLError as exc:
        detail = " ".join(str(exc).split())
        raise EditError(f"the file is not valid YAML: {detail}") from None


def _load_yaml_data(text: str) -> Any:
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        return _plain(YAML(typ="safe", pure=True).load(text))
    except YAMLError as exc:
        detail = " ".join(str(exc).split())
        raise EditError(f"the file is not valid YAML: {detail}") from None


def _is_empty_scalar(node: Any, text: str) -> bool:
    from ruamel.yaml.nodes import ScalarNode

    return (
        isinstance(node, ScalarNode)
        and not text[node.start_mark.index : node.end_mark.index].strip()
    )


def _colon_after(text: str, key_node: Any) -> int:
    """Index just after the ``:`` that follows a mapping key."""
    index = int(key_node.end_mark.index)
    while index < len(text) and text[index] in " \t":
        index += 1
    if index >= len(text) or text[index] != ":":
        raise EditError("cannot locate the ':' after the key; edit this key by hand")
    return index + 1


def _content_end(node: Any, text: str, *, fallback: int) -> int:
    """Index just after the last character that belongs to ``node``'s own content."""
    from ruamel.yaml.nodes import MappingNode, ScalarNode, SequenceNode

    if isinstance(node, ScalarNode):
        span = text[node.start_mark.index : node.end_mark.index]
        if not span.strip():
            return fallback
        return int(node.start_mark.index) + len(span.rstrip())
    if getattr(node, "flow_style", False):
        return int(node.end_mark.index)
    if isinstance(node, MappingNode) and node.value:
        key_node, value_node = node.value[-1]
        return _content_end(value_node, text, fallback=_colon_after(text, key_node))
    if isinstance(node, SequenceNode) and node.value:
        last = node.value[-1]
        dash = text.rfind("-", 0, last.start_mark.index + 1)
        return _content_end(last, text, fallback=dash + 1)
    return int(node.end_mark.index)


def _line_end(text: str, index: int) -> int:
    """Index just after the newline of the line holding ``index`` (len(text) at EOF)."""
    found = text.find("\n", index)
    return len(text) if found < 0 else found + 1


def _guess_step(root: Any) -> int:
    """Indentation step of nested block mappings in this document (default 2)."""
    from ruamel.yaml.nodes import MappingNode

    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, MappingNode) and not node.flow_style:
            for key_node, value_node in node.value:
                if (
                    isinstance(value_node, MappingNode)
                    and not value_node.flow_style
                    and value_node.value
                ):
                    step = value_node.value[0][0].start_mark.column - key_node.start_mark.column
                    if step > 0:
                        return int(step)
                stack.append(value_node)
    return 2


def _check_no_anchor(node: Any, where: str) -> None:
    if getattr(node, "anchor", None):
        raise EditError(
            f"{where} uses the YAML anchor &{node.anchor} (shared by aliases); "
            "edit it by hand so every use changes knowingly"
        )


def set_yaml_value(text: str, key: Sequence[str], value: Any) -> str:
    """Set ``key`` to ``value`` in YAML text, touching only that node's characters.

    Missing mappings on the way are created (as block lines after their siblings, or as
    ``key: value`` items of a flow mapping). The result is verified by parsing it again.

    Raises:
        EditError: the path runs through a scalar or a list index out of range, the
            document is not a mapping, or the edit could not be verified.
    """
    from ruamel.yaml.nodes import MappingNode, ScalarNode, SequenceNode

    if not key:
        raise EditError("KEY: empty key")
    root = _compose(text)
    if not isinstance(root, MappingNode):
        raise EditError("the document is not a mapping of policy keys")
    newline = "\r\n" if "\r\n" in text else "\n"
    doc = _YamlDoc(text=text, newline=newline, step=_guess_step(root))
    node: Any = root
    key_node: Any = None
    new_text: str | None = None
    in_flow = False
    for depth, segment in enumerate(key):
        in_flow = in_flow or bool(getattr(node, "flow_style", False))
        where = ".".join(key[: depth + 1])
        _check_no_anchor(node, ".".join(key[:depth]) or "the document")
        if isinstance(node, MappingNode):
            pair = next(
                (
                    (k, v)
                    for k, v in node.value
                    if isinstance(k, ScalarNode) and str(k.value) == segment
                ),
                None,
            )
            if pair is None:
                new_text = _insert_into_mapping(doc, node, key[depth:], value)
                break
            key_node, node = pair
        elif isinstance(node, SequenceNode):
            if not segment.isdigit() or int(segment) >= len(node.value):
                raise EditError(
                    f"KEY {'.'.join(key)!r}: {'.'.join(key[:depth])} is a list of "
                    f"{len(node.value)} item(s); {segment!r} is not an index in it"
                )
            key_node, node = None, node.value[int(segment)]
        elif _is_empty_scalar(node, text) and key_node is not None:
            new_text = _insert_under_empty(doc, key_node, key[depth:], value)
            break
        else:
            parent = ".".join(key[:depth])
            raise EditError(
                f"KEY {'.'.join(key)!r}: {parent} holds a single value, not a mapping, "
                f"so it has no key {segment!r}"
            )
        if depth == len(key) - 1:
            _check_no_anchor(node, where)
            new_text = _replace_node(doc, key_node, node, value, in_flow=in_flow)
    if new_text is None:  # pragma: no cover - the loop always sets it
        raise EditError("KEY: nothing to edit")
    _verify(text, new_text, key, value, loader=_load_yaml_data)
    return new_text


_COMMENT_GAP_RE = re.compile(r"[ \t]+(?=#)")


def _splice(text: str, start: int, end: int, new: str) -> str:
    """Replace ``text[start:end]`` by ``new``, keeping a trailing comment's column.

    When the replaced value is followed on its line by spaces and a ``#`` comment, the
    run of spaces grows or shrinks (never below one) so aligned comments stay aligned.
    """
    tail = text[end:]
    gap = _COMMENT_GAP_RE.match(tail)
    if gap and "\n" not in gap.group(0):
        delta = len(new) - (end - start)
        width = max(1, len(gap.group(0)) - delta)
        tail = " " * width + tail[gap.end() :]
    return text[:start] + new + tail


def _replace_scalar(doc: _YamlDoc, key_node: Any, node: Any, value: Any, *, in_flow: bool) -> str:
    text = doc.text
    if _is_empty_scalar(node, text):
        if key_node is None:
            raise EditError("cannot fill an empty list item; edit it by hand")
        at = _colon_after(text, key_node)
        return text[:at] + " " + _yaml_flow(value, flow=in_flow) + text[at:]
    start = int(node.start_mark.index)
    end = _content_end(node, text, fallback=node.end_mark.index)
    if node.style in ("|", ">") and key_node is not None:
        start = _colon_after(text, key_node)
        return text[:start] + " " + _yaml_flow(value, flow=in_flow) + text[end:]
    style = node.style if node.style in ("'", '"') else None
    return _splice(text, start, end, _yaml_flow(value, style=style, flow=in_flow))


def _replace_node(doc: _YamlDoc, key_node: Any, node: Any, value: Any, *, in_flow: bool) -> str:
    from ruamel.yaml.nodes import MappingNode, ScalarNode, SequenceNode

    text = doc.text
    if isinstance(node, ScalarNode):
        return _replace_scalar(doc, key_node, node, value, in_flow=in_flow)
    if node.flow_style:
        start, end = node.start_mark.index, node.end_mark.index
        return _splice(text, start, end, _yaml_flow(value, flow=in_flow))
    # A block collection.
    at_colon = None if key_node is None else _colon_after(text, key_node)
    end = _content_end(node, text, fallback=node.end_mark.index)
    column = int(node.start_mark.column)
    if isinstance(node, SequenceNode) and isinstance(value, list) and value:
        start = int(node.start_mark.index)
        pad = doc.newline + " " * column
        body = pad.join(f"- {_yaml_flow(item, flow=False)}" for item in value)
        return text[:start] + body + text[end:]
    if isinstance(node, MappingNode) and isinstance(value, Mapping) and value:
        start = int(node.start_mark.index)
        lines: list[str] = []
        for sub_key, sub_value in value.items():
            lines += _yaml_block_lines(str(sub_key), sub_value, indent=column, step=doc.step)
        body = doc.newline.join(lines)[column:]
        return text[:start] + body + text[end:]
    if at_colon is None:
        raise EditError("cannot replace a block collection inside a list; edit it by hand")
    return text[:at_colon] + " " + _yaml_flow(value, flow=False) + text[end:]


def _insert_into_mapping(doc: _YamlDoc, mapping: Any, rest: Sequence[str], value: Any) -> str:
    text = doc.text
    new_value = _nested(rest[1:], value)
    if mapping.flow_style:
        close = mapping.end_mark.index - 1
        if text[close] != "}":
            raise EditError("cannot locate the end of a flow mapping; edit it by hand")
        item = f"{_yaml_flow(rest[0])}: {_yaml_flow(new_value)}"
        if not mapping.value:
            return text[:close] + item + text[close:]
        key_node, value_node = mapping.value[-1]
        at = _content_end(value_node, text, fallback=_colon_after(text, key_node))
        return text[:at] + ", " + item + text[at:]
    if not mapping.value:
        raise EditError("cannot add a key to an empty block mapping; edit it by hand")
    column = mapping.value[0][0].start_mark.column
    end = _content_end(mapping, text, fallback=mapping.end_mark.index)
    lines = _yaml_block_lines(rest[0], new_value, indent=column, step=doc.step)
    return _insert_lines(doc, _line_end(text, end), lines)


def _insert_under_empty(doc: _YamlDoc, key_node: Any, rest: Sequence[str], value: Any) -> str:
    column = key_node.start_mark.column + doc.step
    lines = _yaml_block_lines(rest[0], _nested(rest[1:], value), indent=column, step=doc.step)
    return _insert_lines(doc, _line_end(doc.text, _colon_after(doc.text, key_node)), lines)


def _insert_lines(doc: _YamlDoc, at: int, lines: Sequence[str]) -> str:
    text = doc.text
    block = doc.newline.join(lines) + doc.newline
    if at > 0 and not text[:at].endswith("\n"):
        block = doc.newline + block
    return text[:at] + block + text[at:]


def _verify(old: str, new: str, key: Sequence[str], value: Any, *, loader: Any) -> None:
    """The edited text must hold exactly the old data with ``key`` set to ``value``."""
    try:
        got = loader(new)
    except EditError:
        got = _Unparsable
    expected = _with_value(loader(old), key, value)
    if got is _Unparsable or not _same(got, expected):
        raise EditError(
            f"could not edit {'.'.join(key)} without disturbing the rest of the file "
            "(unusual layout); nothing was written — edit this value by hand"
        )


class _Unparsable:
    pass


# --------------------------------------------------------------------------- TOML

_TOML_HEADER_RE = re.compile(r"^\s*\[(?!\[)\s*([^\]]+?)\s*\]\s*(?:#.*)?$")
_TOML_ARRAY_HEADER_RE = re.compile(r"^\s*\[\[")
_TOML_KV_RE = re.compile(r"^(\s*)([A-Za-z0-9_\-.\" ]+?)\s*=\s*(.*?)\r?\n?$")
_TOML_TAIL_RE = re.compile(r"^\s*(?:#.*)?$")


def _toml_key_parts(raw: str) -> tuple[str, ...] | None:
    parts: list[str] = []
    for raw_piece in raw.split("."):
        piece = raw_piece.strip()
        if _BARE_TOML_KEY_RE.match(piece):
            parts.append(piece)
        elif len(piece) >= 2 and piece[0] == piece[-1] == '"' and '"' not in piece[1:-1]:
            parts.append(piece[1:-1])
        else:
            return None
    return tuple(parts)


def _toml_key(segment: str) -> str:
    return segment if _BARE_TOML_KEY_RE.match(segment) else quote_double(segment)


def _toml_render(value: Any) -> str:  # noqa: PLR0911 - one return per TOML type
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return _yaml_float(value)
    if isinstance(value, str):
        return quote_double(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_render(v) for v in value) + "]"
    if isinstance(value, Mapping):
        items = (f"{_toml_key(str(k))} = {_toml_render(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    if value is None:
        raise EditError("VALUE: TOML has no null; give a value (or remove the key by hand)")
    raise EditError(f"VALUE: cannot write a value of type {type(value).__name__}")


def _load_toml_data(text: str) -> Any:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise EditError(f"the file is not valid TOML: {exc}") from None


def _toml_value_end(rest: str) -> int | None:
    """Length of the single-line TOML value at the start of ``rest`` (None if none)."""
    for end in range(1, len(rest) + 1):
        if not _TOML_TAIL_RE.match(rest[end:]):
            continue
        try:
            tomllib.loads("x = " + rest[:end])
        except tomllib.TOMLDecodeError:
            continue
        return end
    return None


def _toml_scan(
    lines: Sequence[str],
) -> tuple[list[tuple[int, tuple[str, ...], re.Match[str]]], dict[tuple[str, ...], int]]:
    """Key-value lines (line number, full key, match) and each table's last line."""
    table: tuple[str, ...] | None = ()
    last_line: dict[tuple[str, ...], int] = {}
    entries: list[tuple[int, tuple[str, ...], re.Match[str]]] = []
    for number, line in enumerate(lines):
        if _TOML_ARRAY_HEADER_RE.match(line):
            table = None
            continue
        header = _TOML_HEADER_RE.match(line)
        if header:
            table = _toml_key_parts(header.group(1))
            if table is not None:
                last_line[table] = number
            continue
        match = _TOML_KV_RE.match(line)
        parts = None if match is None else _toml_key_parts(match.group(2))
        if table is None or match is None or parts is None:
            continue
        last_line[table] = number
        entries.append((number, (*table, *parts), match))
    return entries, last_line


def set_toml_value(text: str, key: Sequence[str], value: Any) -> str:
    """Set ``key`` to ``value`` in TOML text, touching only that value's characters.

    Supported: replacing a value written on one line; adding a key to an existing
    ``[table]`` or the top level; appending a new ``[table]`` for a missing parent.

    Raises:
        EditError: anything else (multi-line values, inline tables, arrays of tables),
            or an edit that could not be verified.
    """
    if not key:
        raise EditError("KEY: empty key")
    rendered = _toml_render(value)
    _load_toml_data(text)
    lines = re.findall(r"[^\n]*\n|[^\n]+$", text)  # only \n ends a TOML line
    newline = "\r\n" if "\r\n" in text else "\n"
    target = tuple(key)
    entries, last_line = _toml_scan(lines)
    for number, full_key, match in entries:
        if full_key != target:
            continue
        rest = match.group(3)
        size = _toml_value_end(rest)
        if size is None:
            raise EditError(
                f"{'.'.join(key)} is a multi-line TOML value; `set` only rewrites values "
                "written on one line — edit it by hand"
            )
        start = match.start(3)
        lines[number] = _splice(lines[number], start, start + size, rendered)
        return _toml_checked(text, "".join(lines), key, value)
    parent, last = target[:-1], target[-1]
    new_line = f"{_toml_key(last)} = {rendered}{newline}"
    if parent in last_line:
        at = last_line[parent] + 1
        if not lines[at - 1].endswith("\n"):
            lines[at - 1] += newline
        lines.insert(at, new_line)
    else:
        tail = "" if not text or text.endswith("\n") else newline
        header_text = ".".join(_toml_key(p) for p in parent)
        lines.append(f"{tail}{newline}[{header_text}]{newline}{new_line}")
    return _toml_checked(text, "".join(lines), key, value)


def _toml_checked(old: str, new: str, key: Sequence[str], value: Any) -> str:
    try:
        _verify(old, new, key, value, loader=_load_toml_data)
    except EditError:
        raise EditError(
            f"could not set {'.'.join(key)} in this TOML file safely (the key lives in an "
            "inline table, an array of tables or a dotted key elsewhere); nothing was "
            "written — edit it by hand"
        ) from None
    return new


# --------------------------------------------------------------------------- files


def file_format(path: Path) -> FileFormat:
    """``yaml`` or ``toml`` from the file name.

    Raises:
        EditError: the suffix is not ``.yaml``, ``.yml`` or ``.toml``.
    """
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml"):
        return "yaml"
    if suffix == ".toml":
        return "toml"
    raise EditError(f"{path}: not a policy file (expected .yaml, .yml or .toml)")


def _relabel(issue: PolicyIssue, temp: Path, path: Path) -> PolicyIssue:
    from dataclasses import replace

    if Path(issue.file).name != temp.name:
        return issue
    return replace(issue, file=str(path), message=issue.message.replace(temp.name, path.name))


def check_candidate(path: Path, text: str) -> list[PolicyIssue]:
    """Validate ``text`` as if it were the content of ``path``.

    The text is written to a hidden temporary file in ``path``'s folder (so ``extends``
    and template files resolve exactly as they will) and always removed afterwards.
    Issues name ``path``, not the temporary file.
    """
    from ctxpolicy.atomic import sibling_temp_file
    from ctxpolicy.loading import validate_paths

    with sibling_temp_file(path, text) as temp:
        issues = validate_paths([temp])
    return sorted((_relabel(i, temp, path) for i in issues), key=lambda i: i.sort_key)


def set_policy_value(path: str | Path, key: str, value: str) -> EditResult:
    """Set one value of a policy file in place (the engine of ``ctxpolicy set``).

    Under an exclusive update lock: read the file, patch the one node, validate the
    candidate text next to the file, then replace the file atomically (its permission
    bits kept). An invalid edit writes nothing.

    Args:
        path: A ``.yaml``/``.yml``/``.toml`` policy file.
        key: Dotted key, e.g. ``budget.ratios.query``.
        value: The new value as YAML text, e.g. ``0.1``, ``false``, ``"[a, b]"``.

    Returns:
        What was done (``changed`` is False when the value was already set).

    Raises:
        EditError: bad key or value syntax, or an edit that cannot be applied safely.
        PolicyValidationError: the edited policy would be invalid (the file is untouched).
        OSError: the file cannot be read or written.
    """
    from ctxpolicy.atomic import locked_for_update, write_text_atomic
    from ctxpolicy.loading.limits import MAX_FILE_BYTES

    target = Path(path)
    fmt = file_format(target)
    segments = parse_key(key)
    new_value = parse_value(value)
    # A symlinked policy is edited where it really lives, so the link survives; it is
    # validated where it is seen (relative paths such as extends resolve from there).
    real = target.resolve() if target.is_symlink() else target
    with locked_for_update(real):
        with real.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
        if len(raw) > MAX_FILE_BYTES:
            limit = f"the policy file limit of {MAX_FILE_BYTES} bytes"
            raise EditError(f"{target}: larger than {limit}")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise EditError(
                f"{target}: not UTF-8 text ({exc.reason} at byte {exc.start})"
            ) from None
        bom = "\ufeff" if text.startswith("\ufeff") else ""
        new_text = bom + set_text_value(text.removeprefix(bom), segments, new_value, fmt=fmt)
        if new_text == text:
            return EditResult(path=target, key=segments, changed=False)
        issues = check_candidate(target, new_text)
        errors = [i for i in issues if i.severity == "error"]
        if errors:
            raise PolicyValidationError(issues)
        write_text_atomic(real, new_text)
    warnings = tuple(i for i in issues if i.severity == "warning")
    return EditResult(path=target, key=segments, changed=True, warnings=warnings)
