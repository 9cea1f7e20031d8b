"""Patch one node of a YAML policy, keeping every other byte (ruamel round-trip positions)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError
from ruamel.yaml.nodes import MappingNode, ScalarNode, SequenceNode

from ctxpolicy.editing.values import (
    EditError,
    _plain,
    _splice,
    _verify,
    _yaml_float,
    quote_double,
)

# --------------------------------------------------------------------------- YAML rendering


_PLAIN_FIRST_BAD = frozenset("-?:,[]{}#&*!|>'\"%@`")


def _plain_syntax_ok(value: str, *, flow: bool) -> bool:
    """Whether nothing in ``value`` would end or change a plain YAML scalar."""
    if not value or value != value.strip() or not value.isprintable():
        return False
    if value[0] in _PLAIN_FIRST_BAD or ": " in value or " #" in value or value.endswith(":"):
        return False
    return not (flow and any(c in value for c in ",[]{}"))


def _yaml_plain_ok(value: str, *, flow: bool) -> bool:
    """Whether ``value`` can be written unquoted (and read back as the same string)."""
    if not _plain_syntax_ok(value, flow=flow):
        return False
    try:
        return bool(YAML(typ="safe", pure=True).load(value) == value)
    except Exception:  # noqa: BLE001 - any parse failure just means "quote it"
        return False


def _yaml_str(value: str, *, style: str | None, flow: bool) -> str:
    if style == "'" and value.isprintable():
        return "'" + value.replace("'", "''") + "'"
    if style is None and _yaml_plain_ok(value, flow=flow):
        return value
    return quote_double(value)


def _yaml_scalar(value: Any) -> str:
    """YAML text of a null, boolean or number."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _yaml_float(value)
    raise EditError(f"VALUE: cannot write a value of type {type(value).__name__}")


def _yaml_flow(value: Any, *, style: str | None = None, flow: bool = True) -> str:
    """One-line YAML text for plain data; strings keep the old node's quoting.

    ``flow`` says whether the text lands inside a flow collection (where ``,[]{}``
    end a plain scalar); items of collections are always in flow context.
    """
    if isinstance(value, str):
        return _yaml_str(value, style=style, flow=flow)
    if isinstance(value, list):
        return "[" + ", ".join(_yaml_flow(v) for v in value) + "]"
    if isinstance(value, Mapping):
        items = (f"{_yaml_flow(str(k))}: {_yaml_flow(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    return _yaml_scalar(value)


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
    try:
        return YAML(typ="rt").compose(text)
    except YAMLError as exc:
        detail = " ".join(str(exc).split())
        raise EditError(f"the file is not valid YAML: {detail}") from None


def _load_yaml_data(text: str) -> Any:
    try:
        return _plain(YAML(typ="safe", pure=True).load(text))
    except YAMLError as exc:
        detail = " ".join(str(exc).split())
        raise EditError(f"the file is not valid YAML: {detail}") from None


def _is_empty_scalar(node: Any, text: str) -> bool:
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
    if not key:
        raise EditError("KEY: empty key")
    root = _compose(text)
    if not isinstance(root, MappingNode):
        raise EditError("the document is not a mapping of policy keys")
    newline = "\r\n" if "\r\n" in text else "\n"
    doc = _YamlDoc(text=text, newline=newline, step=_guess_step(root))
    new_text = _edit(doc, root, key, value)
    _verify(text, new_text, key, value, loader=_load_yaml_data)
    return new_text


def _find_key(mapping: MappingNode, segment: str) -> tuple[Any, Any] | None:
    """The (key node, value node) pair of ``segment`` in a mapping node, or None."""
    return next(
        ((k, v) for k, v in mapping.value if isinstance(k, ScalarNode) and str(k.value) == segment),
        None,
    )


def _list_item(node: SequenceNode, key: Sequence[str], depth: int) -> Any:
    segment = key[depth]
    if not segment.isdigit() or int(segment) >= len(node.value):
        raise EditError(
            f"KEY {'.'.join(key)!r}: {'.'.join(key[:depth])} is a list of "
            f"{len(node.value)} item(s); {segment!r} is not an index in it"
        )
    return node.value[int(segment)]


def _edit(doc: _YamlDoc, root: MappingNode, key: Sequence[str], value: Any) -> str:
    """Walk ``key`` down from ``root``; replace the node found, or insert what is missing."""
    node: Any = root
    key_node: Any = None
    in_flow = False
    for depth, segment in enumerate(key):
        in_flow = in_flow or bool(getattr(node, "flow_style", False))
        _check_no_anchor(node, ".".join(key[:depth]) or "the document")
        if isinstance(node, MappingNode):
            pair = _find_key(node, segment)
            if pair is None:
                return _insert_into_mapping(doc, node, key[depth:], value)
            key_node, node = pair
        elif isinstance(node, SequenceNode):
            key_node, node = None, _list_item(node, key, depth)
        elif _is_empty_scalar(node, doc.text) and key_node is not None:
            return _insert_under_empty(doc, key_node, key[depth:], value)
        else:
            raise EditError(
                f"KEY {'.'.join(key)!r}: {'.'.join(key[:depth])} holds a single value, not a "
                f"mapping, so it has no key {segment!r}"
            )
    _check_no_anchor(node, ".".join(key))
    return _replace_node(doc, key_node, node, value, in_flow=in_flow)


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
    if isinstance(node, ScalarNode):
        return _replace_scalar(doc, key_node, node, value, in_flow=in_flow)
    if node.flow_style:
        start, end = node.start_mark.index, node.end_mark.index
        return _splice(doc.text, start, end, _yaml_flow(value, flow=in_flow))
    return _replace_block(doc, key_node, node, value)


def _replace_block(doc: _YamlDoc, key_node: Any, node: Any, value: Any) -> str:
    """Replace a block collection: as a block of the same kind, else as a flow value."""
    text = doc.text
    end = _content_end(node, text, fallback=node.end_mark.index)
    start = int(node.start_mark.index)
    column = int(node.start_mark.column)
    if isinstance(node, SequenceNode) and isinstance(value, list) and value:
        pad = doc.newline + " " * column
        body = pad.join(f"- {_yaml_flow(item, flow=False)}" for item in value)
        return text[:start] + body + text[end:]
    if isinstance(node, MappingNode) and isinstance(value, Mapping) and value:
        lines: list[str] = []
        for sub_key, sub_value in value.items():
            lines += _yaml_block_lines(str(sub_key), sub_value, indent=column, step=doc.step)
        return text[:start] + doc.newline.join(lines)[column:] + text[end:]
    if key_node is None:
        raise EditError("cannot replace a block collection inside a list; edit it by hand")
    at_colon = _colon_after(text, key_node)
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
