"""Pass 1: JSON Schema validation, every error, each at its most precise path.

A document is first checked by the schema compiled into closures
(`ctxpolicy.validation.schema_fast`); only one it rejects is validated by ``jsonschema``,
which explains each error. ``jsonschema`` (and its validator) is loaded then, the first
time a document is invalid: it costs ``ctxpolicy validate`` ~40 ms of start-up, which a
run over valid files never pays. (The one import of this module made at run time, by
name: `_jsonschema`.)
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Hashable, Iterable, Iterator, MutableMapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ctxpolicy.diagnostics import Finding, JsonPath
from ctxpolicy.layers import DEFAULT_ORDER
from ctxpolicy.schema import load_schema
from ctxpolicy.validation.schema_fast import (
    Check,
    UnsupportedSchemaError,
    compile_schema,
    compile_sections,
)

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

_RANGE = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
_LENGTH = frozenset({"minLength", "maxLength", "minItems", "maxItems"})
_TYPE_PROPERTY = ["properties", "type"]
_EXCLUSIVE_PAIRS = {
    ("template", "template_file"): "give either 'template' or 'template_file', not both",
    ("strategy", "tier"): "give either 'strategy' or 'tier', not both",
    ("shares", "tier"): "give either 'shares' or 'tier', not both",
}
_LAYER_HINT = " (a layer is system_prompt, checkpoint_messages, query or *__context)"


@lru_cache(maxsize=1)
def _validator() -> Draft202012Validator:
    # The schema is a file shipped in the package, meta-validated by the test suite
    # (tests/validation/test_schema_parity.py); doing it again on every run would cost
    # ``ctxpolicy validate`` ~60 ms of start-up.
    validator: Draft202012Validator = _jsonschema().Draft202012Validator(load_schema())
    return validator


def _jsonschema() -> Any:
    """The ``jsonschema`` package, imported the first time a document is invalid."""
    import jsonschema  # declared lazy import (docs/design.md)

    return jsonschema


@lru_cache(maxsize=1)
def _fast_check() -> Check | None:
    """The shipped schema as one compiled yes/no check (None: it cannot be compiled)."""
    try:
        return compile_schema(load_schema())
    except UnsupportedSchemaError:
        return None


@lru_cache(maxsize=1)
def _fast_sections() -> tuple[frozenset[str], dict[str, Check]] | None:
    """The compiled check split by top-level key (None: it cannot be split)."""
    try:
        return compile_sections(load_schema())
    except UnsupportedSchemaError:
        return None


def _valid_sections(
    data: dict[str, Any],
    sections: tuple[frozenset[str], dict[str, Check]],
    memo: MutableMapping[Hashable, Any],
) -> bool:
    """The compiled check, section by section; the verdict on a mapping or list is
    remembered by identity (a base's sections are the same objects in every team file)."""
    required, checks = sections
    if not required <= data.keys():
        return False
    for key, value in data.items():
        check = checks.get(key)
        if check is None:
            return False  # a key the schema does not know
        if type(value) is dict or type(value) is list:
            found = memo.get(("schema", key, id(value)))
            if found is None or found[0] is not value:
                found = memo[("schema", key, id(value))] = (value, check(value))
            valid = found[1]
        else:
            valid = check(value)
        if not valid:
            return False
    return True


def _valid(data: Any, memo: MutableMapping[Hashable, Any] | None) -> bool:
    """Whether the compiled schema accepts ``data`` (False: jsonschema must say why)."""
    sections = _fast_sections() if memo is not None and isinstance(data, dict) else None
    if sections is not None and memo is not None:
        return _valid_sections(data, sections, memo)
    fast = _fast_check()
    return fast is not None and fast(data)


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest candidate, or ``""``."""
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _key_hint(key: str, properties: dict[str, Any], *, layers: bool) -> str:
    """`` (did you mean 'x'?)`` for an unknown key; for a layer, the usual names too."""
    known = list(properties)
    if layers:
        known += [name for name in DEFAULT_ORDER if name not in known]
    return did_you_mean(key, known) or (_LAYER_HINT if layers else "")


def _unknown_keys(error: ValidationError, path: JsonPath) -> Iterator[Finding]:
    schema: dict[str, Any] = error.schema if isinstance(error.schema, dict) else {}
    properties = schema.get("properties", {})
    patterns = [re.compile(p) for p in schema.get("patternProperties", {})]
    layers = bool(patterns)  # the layers mapping is the one with name patterns
    where = "layers" if layers else (str(path[-1]) if path else "the policy")
    instance = error.instance if isinstance(error.instance, dict) else {}
    for key in instance:
        if key in properties or any(p.search(key) for p in patterns):
            continue
        hint = _key_hint(key, properties, layers=layers)
        yield Finding((*path, key), f"unknown key {key!r} in {where}{hint}", "schema.unknown-key")


def _matching_branches(error: ValidationError) -> list[ValidationError]:
    """The errors of the union branches whose ``type`` constant matches the instance."""
    context = list(error.context or ())
    wrong_type = {
        s.relative_schema_path[0]
        for s in context
        if s.validator == "const" and list(s.relative_schema_path)[-3:-1] == _TYPE_PROPERTY
    }
    return [
        s for s in context if s.relative_schema_path and s.relative_schema_path[0] not in wrong_type
    ]


def _one_of(error: ValidationError, path: JsonPath) -> Iterator[Finding]:
    instance = error.instance
    branches = error.schema.get("oneOf", []) if isinstance(error.schema, dict) else []
    if len(branches) > 2:
        # a discriminated union (collectors): explain the branch whose `type` matches; an
        # unknown or missing `type` is already reported by its `enum`/`required` error, and
        # a value that is no mapping by its `type` error
        if isinstance(instance, dict) and "type" in instance:
            for sub in _matching_branches(error):
                yield from explain_error(sub)
        return
    # the one plain union of the format: `extends`
    message = f"{instance!r} is not a file path or a non-empty list of file paths"
    yield Finding(path, message, "schema.type")


def _property_name(error: ValidationError, path: JsonPath) -> Iterator[Finding]:
    what = "layer" if "ratios" in path else "process"
    yield Finding(
        (*path, str(error.instance)),
        f"{error.instance!r} is not a valid {what} name (must match {error.validator_value})",
        "schema.pattern",
    )


def _required(error: ValidationError, path: JsonPath) -> Iterator[Finding]:
    missing = re.findall(r"'([^']*)' is a required property", error.message)
    key = missing[0] if missing else "?"
    yield Finding(path, f"missing required key {key!r}", "schema.required")


def _any_of(error: ValidationError, path: JsonPath) -> Iterator[Finding]:
    instance = error.instance
    if isinstance(instance, dict) and "type" in instance:
        yield Finding(path, "needs 'template' or 'template_file'", "schema.required")
    else:
        yield _plain(error, path)


def _exclusive(error: ValidationError, path: JsonPath) -> Iterator[Finding]:
    keys = set(error.instance) if isinstance(error.instance, dict) else set()
    pair = next((m for pair, m in _EXCLUSIVE_PAIRS.items() if set(pair) <= keys), None)
    yield Finding(path, pair or error.message, "schema.exclusive")


def _type(error: ValidationError, path: JsonPath) -> Iterator[Finding]:
    expected: Any = error.validator_value
    yield Finding(path, f"{error.instance!r} is not of type {expected!r}", "schema.type")


def _enum(error: ValidationError, path: JsonPath) -> Iterator[Finding]:
    instance = error.instance
    expected: Any = error.validator_value
    allowed: list[Any] = list(expected) if error.validator == "enum" else [expected]
    hint = did_you_mean(instance, map(str, allowed)) if isinstance(instance, str) else ""
    listed = ", ".join(repr(a) for a in allowed)
    yield Finding(path, f"{instance!r} is not one of {listed}{hint}", "schema.enum")


def _pattern(error: ValidationError, path: JsonPath) -> Iterator[Finding]:
    message = f"{error.instance!r} does not match {error.validator_value}"
    yield Finding(path, message, "schema.pattern")


def _plain(error: ValidationError, path: JsonPath) -> Finding:
    """jsonschema's own message, under the rule of its validator."""
    kind = str(error.validator)
    if kind in _RANGE:
        return Finding(path, error.message, "schema.range")
    if kind in _LENGTH:
        return Finding(path, error.message, "schema.length")
    return Finding(path, error.message, f"schema.{kind}")


_Explain = Callable[["ValidationError", JsonPath], Iterator[Finding]]

#: How each kind of jsonschema error is explained (others: `_plain`).
_EXPLAIN: dict[str, _Explain] = {
    "additionalProperties": _unknown_keys,
    "oneOf": _one_of,
    "required": _required,
    "anyOf": _any_of,
    "not": _exclusive,
    "type": _type,
    "enum": _enum,
    "const": _enum,
    "pattern": _pattern,
}


def explain_error(error: ValidationError) -> Iterator[Finding]:
    """Findings for one jsonschema error (several for unknown keys and unions)."""
    path: JsonPath = tuple(error.absolute_path)
    if "propertyNames" in list(error.schema_path):
        yield from _property_name(error, path)
        return
    explain = _EXPLAIN.get(str(error.validator))
    if explain is None:
        yield _plain(error, path)
    else:
        yield from explain(error, path)


def check_schema(data: Any, *, memo: MutableMapping[Hashable, Any] | None = None) -> list[Finding]:
    """Validate plain policy data against the JSON Schema; every error, none hidden.

    Args:
        data: The policy data.
        memo: Where a run remembers the verdict on each mapping and list of its documents
            (by identity: they must not change while it runs); None checks all again.
    """
    if _valid(data, memo):
        return []  # jsonschema finds nothing in a document the compiled schema accepts
    findings: list[Finding] = []
    seen: set[tuple[JsonPath, str, str]] = set()
    for error in _validator().iter_errors(data):
        for finding in explain_error(error):
            key = (finding.path, finding.message, finding.rule)
            if key not in seen:
                seen.add(key)
                findings.append(finding)
    return findings


__all__ = ["check_schema", "did_you_mean", "explain_error"]
