"""The policy JSON Schema compiled into one yes/no check: is a document valid?

``jsonschema`` explains every error of a document (`ctxpolicy.validation.schema_check`)
but takes milliseconds for a policy, and tens of milliseconds to import. Most documents
``ctxpolicy validate`` sees are valid, and for a valid document the explanation is
empty: `compile_schema` turns the schema into nested closures that answer "valid?"
for a policy in tens of microseconds, and only a document they reject goes through
``jsonschema``. The findings are therefore the same; the closures must accept exactly
the documents ``jsonschema`` (draft 2020-12, no format assertions) accepts, which
``tests/validation/test_schema_fast.py`` checks on the corpus and on generated documents.

Only the keywords the policy schema uses are compiled; a schema with any other keyword
raises `UnsupportedSchemaError` when it is compiled (``jsonschema`` then checks every
document), so a keyword added to the models can never be silently skipped.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

Check = Callable[[Any], bool]

#: Keywords that never make a document invalid (annotations, and ``$defs``, which
#: ``$ref`` reads).
_ANNOTATIONS = frozenset(
    {
        "$schema",
        "$id",
        "$defs",
        "$comment",
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "format",  # an annotation only: the validator is built without a format checker
    }
)


class UnsupportedSchemaError(ValueError):
    """The schema uses a keyword (or a ``$ref``) that `compile_schema` does not compile."""


def _unbool(value: Any, true: object = object(), false: object = object()) -> Any:
    if value is True:
        return true
    if value is False:
        return false
    return value


def json_equal(one: Any, two: Any) -> bool:
    """``jsonschema``'s equality for ``enum`` and ``const``: ``True`` is not ``1``."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, Sequence) and isinstance(two, Sequence):
        return len(one) == len(two) and all(json_equal(a, b) for a, b in zip(one, two, strict=True))
    if isinstance(one, Mapping) and isinstance(two, Mapping):
        return len(one) == len(two) and all(
            k in two and json_equal(v, two[k]) for k, v in one.items()
        )
    return bool(_unbool(one) == _unbool(two))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_integer(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


_TYPES: dict[str, Check] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": _is_number,
    "integer": _is_integer,
}


def _all(checks: list[Check]) -> Check:
    """One check that passes when every one of ``checks`` passes (in their order)."""
    if not checks:
        return lambda _value: True
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks
        return lambda value: first(value) and second(value)

    def check(value: Any) -> bool:
        for one in checks:  # noqa: SIM110 - a loop is faster than all() over a generator
            if not one(value):
                return False
        return True

    return check


class _Compiler:
    """Compiles the schema's nodes; ``$ref`` targets once each (recursion allowed)."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.refs: dict[str, Check] = {}

    # ------------------------------------------------------------------ references

    def ref(self, ref: str) -> Check:
        found = self.refs.get(ref)
        if found is not None:
            return found
        if not ref.startswith("#/"):
            raise UnsupportedSchemaError(f"$ref {ref!r} is not local")
        target: Any = self.root
        for escaped in ref[2:].split("/"):
            part = escaped.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, Mapping) or part not in target:
                raise UnsupportedSchemaError(f"$ref {ref!r} points nowhere")
            target = target[part]
        slot: list[Check] = []

        def pending(value: Any) -> bool:  # a recursive $ref: its body is not compiled yet
            return slot[0](value)

        self.refs[ref] = pending
        slot.append(self.node(target))
        self.refs[ref] = slot[0]
        return slot[0]

    # ----------------------------------------------------------------------- nodes

    def node(self, schema: Any) -> Check:
        if schema is True:
            return lambda _value: True
        if schema is False:
            return lambda _value: False
        if not isinstance(schema, Mapping):
            raise UnsupportedSchemaError(f"not a schema: {schema!r}")
        unknown = set(schema) - _ANNOTATIONS - set(_KEYWORDS)
        if unknown:
            raise UnsupportedSchemaError(f"keywords not compiled: {sorted(unknown)}")
        if (
            "properties" in schema
            or "patternProperties" in schema
            or "additionalProperties" in schema
        ):
            object_checks = [self.object_shape(schema)]
        else:
            object_checks = []
        checks = [
            _KEYWORDS[key](self, value, schema)
            for key, value in schema.items()
            if key in _KEYWORDS and key not in _SHAPE
        ]
        return _all(object_checks + [c for c in checks if c is not None])

    def object_shape(self, schema: Mapping[str, Any]) -> Check:
        """``properties``, ``patternProperties`` and ``additionalProperties`` together.

        Properties with a ``const`` (the ``type`` of each collector in the ``oneOf``) are
        compared first: a branch of a union that does not match fails at once.
        """
        declared = schema.get("properties", {})
        properties = {k: self.node(v) for k, v in declared.items()}
        consts = [
            (key, sub["const"])
            for key, sub in declared.items()
            if isinstance(sub, Mapping) and "const" in sub
        ]
        patterns = [
            (re.compile(p), self.node(v)) for p, v in schema.get("patternProperties", {}).items()
        ]
        extra = schema.get("additionalProperties", True)
        extra_check = None if extra is True else self.node(extra)

        def check(value: Any) -> bool:
            if not isinstance(value, dict):
                return True
            for key, expected in consts:
                if key in value and not json_equal(value[key], expected):
                    return False
            for key, item in value.items():
                known = properties.get(key)
                if known is not None and not known(item):
                    return False
                matched = False
                for pattern, sub in patterns:
                    if pattern.search(key):
                        matched = True
                        if not sub(item):
                            return False
                if (
                    known is None
                    and not matched
                    and extra_check is not None
                    and not extra_check(item)
                ):
                    return False
            return True

        return check

    def many(self, schemas: Sequence[Any]) -> list[Check]:
        return [self.node(s) for s in schemas]


def _type(_c: _Compiler, types: Any, _s: Mapping[str, Any]) -> Check:
    names = [types] if isinstance(types, str) else list(types)
    checks = [_TYPES[name] for name in names]
    if len(checks) == 1:
        return checks[0]
    return lambda value: any(check(value) for check in checks)


def _enum(_c: _Compiler, allowed: Any, _s: Mapping[str, Any]) -> Check:
    options = list(allowed)
    if all(isinstance(o, str) for o in options):
        strings = frozenset(options)
        return lambda value: isinstance(value, str) and value in strings
    return lambda value: any(json_equal(option, value) for option in options)


def _const(_c: _Compiler, expected: Any, _s: Mapping[str, Any]) -> Check:
    return lambda value: json_equal(value, expected)


def _bound(
    _c: _Compiler, limit: Any, _s: Mapping[str, Any], *, test: Callable[[Any, Any], bool]
) -> Check:
    """``minimum``/``maximum`` and their exclusive forms (``test``: ``>=``, ``<=``, ...)."""
    return lambda value: not _is_number(value) or test(value, limit)


def _min_length(_c: _Compiler, limit: int, _s: Mapping[str, Any]) -> Check:
    return lambda value: not isinstance(value, str) or len(value) >= limit


def _max_length(_c: _Compiler, limit: int, _s: Mapping[str, Any]) -> Check:
    return lambda value: not isinstance(value, str) or len(value) <= limit


def _pattern(_c: _Compiler, pattern: str, _s: Mapping[str, Any]) -> Check:
    search = re.compile(pattern).search
    return lambda value: not isinstance(value, str) or search(value) is not None


def _min_items(_c: _Compiler, limit: int, _s: Mapping[str, Any]) -> Check:
    return lambda value: not isinstance(value, list) or len(value) >= limit


def _max_items(_c: _Compiler, limit: int, _s: Mapping[str, Any]) -> Check:
    return lambda value: not isinstance(value, list) or len(value) <= limit


def _items(c: _Compiler, items: Any, _s: Mapping[str, Any]) -> Check:
    item = c.node(items)
    return lambda value: not isinstance(value, list) or all(item(v) for v in value)


def _required(_c: _Compiler, names: list[str], _s: Mapping[str, Any]) -> Check:
    return lambda value: not isinstance(value, dict) or all(name in value for name in names)


def _min_properties(_c: _Compiler, limit: int, _s: Mapping[str, Any]) -> Check:
    return lambda value: not isinstance(value, dict) or len(value) >= limit


def _property_names(c: _Compiler, names: Any, _s: Mapping[str, Any]) -> Check:
    name = c.node(names)
    return lambda value: not isinstance(value, dict) or all(name(k) for k in value)


def _dependent_schemas(c: _Compiler, dependent: Mapping[str, Any], _s: Mapping[str, Any]) -> Check:
    checks = [(key, c.node(sub)) for key, sub in dependent.items()]
    return lambda value: (
        not isinstance(value, dict) or all(check(value) for key, check in checks if key in value)
    )


def _not(c: _Compiler, schema: Any, _s: Mapping[str, Any]) -> Check:
    inner = c.node(schema)
    return lambda value: not inner(value)


def _all_of(c: _Compiler, schemas: list[Any], _s: Mapping[str, Any]) -> Check:
    return _all(c.many(schemas))


def _any_of(c: _Compiler, schemas: list[Any], _s: Mapping[str, Any]) -> Check:
    checks = c.many(schemas)
    return lambda value: any(check(value) for check in checks)


def _one_of(c: _Compiler, schemas: list[Any], _s: Mapping[str, Any]) -> Check:
    checks = c.many(schemas)

    def check(value: Any) -> bool:
        found = False
        for one in checks:
            if one(value):
                if found:
                    return False  # a second match: not exactly one
                found = True
        return found

    return check


def _ref(c: _Compiler, ref: str, _s: Mapping[str, Any]) -> Check:
    return c.ref(ref)


def _shape(_c: _Compiler, _value: Any, _s: Mapping[str, Any]) -> None:
    return None  # compiled together by `_Compiler.object_shape`


#: Every keyword that can make a document invalid, and how it compiles.
_KEYWORDS: dict[str, Callable[[_Compiler, Any, Mapping[str, Any]], Check | None]] = {
    "type": _type,
    "enum": _enum,
    "const": _const,
    "minimum": partial(_bound, test=operator.ge),
    "maximum": partial(_bound, test=operator.le),
    "exclusiveMinimum": partial(_bound, test=operator.gt),
    "exclusiveMaximum": partial(_bound, test=operator.lt),
    "minLength": _min_length,
    "maxLength": _max_length,
    "pattern": _pattern,
    "minItems": _min_items,
    "maxItems": _max_items,
    "items": _items,
    "required": _required,
    "minProperties": _min_properties,
    "propertyNames": _property_names,
    "dependentSchemas": _dependent_schemas,
    "not": _not,
    "allOf": _all_of,
    "anyOf": _any_of,
    "oneOf": _one_of,
    "$ref": _ref,
    "properties": _shape,
    "patternProperties": _shape,
    "additionalProperties": _shape,
}
_SHAPE = frozenset({"properties", "patternProperties", "additionalProperties"})


#: The keywords of a root schema that `compile_sections` splits by top-level key.
_SECTIONED_ROOT = frozenset({"type", "additionalProperties", "required", "properties"})


def compile_sections(schema: Mapping[str, Any]) -> tuple[frozenset[str], dict[str, Check]] | None:
    """The root of ``schema`` split by top-level key: ``(required keys, {key: check})``.

    A document is then valid exactly when it is a mapping with every required key, no other
    key than those of the checks, and each value passes its key's check (so the check of a
    value shared by many documents can be remembered). None when the root has other
    keywords (it is not a closed object of independent properties).

    Raises:
        UnsupportedSchemaError: the schema uses a keyword this module does not compile.
    """
    keywords = set(schema) - _ANNOTATIONS
    if (
        not keywords <= _SECTIONED_ROOT
        or schema.get("type") != "object"
        or schema.get("additionalProperties") is not False
    ):
        return None
    compiler = _Compiler(schema)
    checks = {key: compiler.node(sub) for key, sub in schema.get("properties", {}).items()}
    return frozenset(schema.get("required", ())), checks


def compile_schema(schema: Mapping[str, Any]) -> Check:
    """``valid(document)`` for a draft 2020-12 ``schema`` (its local ``$ref``\\ s included).

    Raises:
        UnsupportedSchemaError: the schema uses a keyword this module does not compile.
    """
    return _Compiler(schema).node(schema)


__all__ = [
    "Check",
    "UnsupportedSchemaError",
    "compile_schema",
    "compile_sections",
    "json_equal",
]
