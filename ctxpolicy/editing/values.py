"""Keys, values and the check every edit passes: parse, compare, verify."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from ctxpolicy.diagnostics import PolicyIssue
from ctxpolicy.errors import CtxPolicyError

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
        return _same_mapping(a, b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if _both_nan(a, b):
        return True
    return type(a) is type(b) and bool(a == b)


def _same_mapping(a: Mapping[Any, Any], b: Mapping[Any, Any]) -> bool:
    return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)


def _both_nan(a: Any, b: Any) -> bool:
    return isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)


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


# ------------------------------------------------------------------ text shared by both formats


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
