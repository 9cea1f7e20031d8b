"""Pass 1: JSON Schema validation, every error, each at its most precise path."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ctxpolicy.layers import DEFAULT_ORDER
from ctxpolicy.loading.sourcemap import JsonPath
from ctxpolicy.validation.findings import Finding

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

_RANGE = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}
_LENGTH = {"minLength", "maxLength", "minItems", "maxItems"}
_TYPE_PROPERTY = ["properties", "type"]
_EXCLUSIVE_PAIRS = {
    ("template", "template_file"): "give either 'template' or 'template_file', not both",
    ("strategy", "tier"): "give either 'strategy' or 'tier', not both",
    ("shares", "tier"): "give either 'shares' or 'tier', not both",
}


@lru_cache(maxsize=1)
def _validator() -> Draft202012Validator:
    from jsonschema import Draft202012Validator

    from ctxpolicy.schema import load_schema

    # The schema is a file shipped in the package, meta-validated by the test suite
    # (tests/validation/test_schema_parity.py); doing it again on every run would cost
    # ``ctxpolicy validate`` ~60 ms of start-up.
    return Draft202012Validator(load_schema())


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest candidate, or ``""``."""
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _unknown_keys(error: ValidationError, path: JsonPath) -> Iterator[Finding]:
    schema: dict[str, Any] = error.schema if isinstance(error.schema, dict) else {}
    known = list(schema.get("properties", {}))
    patterns = [re.compile(p) for p in schema.get("patternProperties", {})]
    if patterns:  # the layers mapping: suggest the usual layer names too
        known += [name for name in DEFAULT_ORDER if name not in known]
    instance = error.instance if isinstance(error.instance, dict) else {}
    for key in instance:
        if key in schema.get("properties", {}) or any(p.search(key) for p in patterns):
            continue
        where = "layers" if patterns else (str(path[-1]) if path else "the policy")
        hint = did_you_mean(key, known)
        if patterns and not hint:
            hint = " (a layer is system_prompt, checkpoint_messages, query or *__context)"
        yield Finding((*path, key), f"unknown key {key!r} in {where}{hint}", "schema.unknown-key")


def _one_of(error: ValidationError, path: JsonPath) -> Iterator[Finding]:
    instance = error.instance
    branches = error.schema.get("oneOf", []) if isinstance(error.schema, dict) else []
    if isinstance(instance, dict) and "type" in instance and len(branches) > 2:
        # a discriminated union (collectors): explain the branch whose `type` matches
        context = list(error.context or ())
        wrong_type = {
            s.relative_schema_path[0]
            for s in context
            if s.validator == "const" and list(s.relative_schema_path)[-3:-1] == _TYPE_PROPERTY
        }
        picked = [
            s
            for s in context
            if s.relative_schema_path and s.relative_schema_path[0] not in wrong_type
        ]
        if not picked:  # unknown type: the `enum` error on `type` already says so
            return
        for sub in picked:
            yield from explain_error(sub)
        return
    if isinstance(instance, dict) and "type" not in instance and len(branches) > 2:
        return  # the `required` error on `type` already says so
    # the one plain union of the format: `extends`
    message = f"{instance!r} is not a file path or a non-empty list of file paths"
    yield Finding(path, message, "schema.type")


def explain_error(error: ValidationError) -> Iterator[Finding]:
    """Findings for one jsonschema error (several for unknown keys and unions)."""
    path: JsonPath = tuple(error.absolute_path)
    kind = str(error.validator)
    instance = error.instance
    expected: Any = error.validator_value
    schema_path = list(error.schema_path)
    if "propertyNames" in schema_path:
        what = "layer" if "ratios" in path else "process"
        yield Finding(
            (*path, str(instance)),
            f"{instance!r} is not a valid {what} name (must match {error.validator_value})",
            "schema.pattern",
        )
    elif kind == "additionalProperties":
        yield from _unknown_keys(error, path)
    elif kind == "oneOf":
        yield from _one_of(error, path)
    elif kind == "required":
        missing = re.findall(r"'([^']*)' is a required property", error.message)
        key = missing[0] if missing else "?"
        yield Finding(path, f"missing required key {key!r}", "schema.required")
    elif kind == "anyOf" and isinstance(instance, dict) and "type" in instance:
        yield Finding(path, "needs 'template' or 'template_file'", "schema.required")
    elif kind == "not":
        keys = set(instance) if isinstance(instance, dict) else set()
        pair = next((m for pair, m in _EXCLUSIVE_PAIRS.items() if set(pair) <= keys), None)
        yield Finding(path, pair or error.message, "schema.exclusive")
    elif kind == "type":
        yield Finding(path, f"{instance!r} is not of type {expected!r}", "schema.type")
    elif kind in {"enum", "const"}:
        allowed: list[Any] = list(expected) if kind == "enum" else [expected]
        hint = did_you_mean(instance, map(str, allowed)) if isinstance(instance, str) else ""
        listed = ", ".join(repr(a) for a in allowed)
        yield Finding(path, f"{instance!r} is not one of {listed}{hint}", "schema.enum")
    elif kind in _RANGE:
        yield Finding(path, error.message, "schema.range")
    elif kind in _LENGTH:
        yield Finding(path, error.message, "schema.length")
    elif kind == "pattern":
        message = f"{instance!r} does not match {error.validator_value}"
        yield Finding(path, message, "schema.pattern")
    else:
        yield Finding(path, error.message, f"schema.{kind}")


def check_schema(data: Any) -> list[Finding]:
    """Validate plain policy data against the JSON Schema; every error, none hidden."""
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
