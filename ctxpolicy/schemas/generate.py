"""Generate the policy JSON Schema from the models, its single source.

The pydantic models of `ctxpolicy.policy` define the policy format: descriptions,
defaults, enumerations, patterns, bounds and the conditional rules are written on them.
This module turns them into the editor schema shipped as
``ctxpolicy/schemas/ctxpolicy.schema.json`` (draft 2020-12): pydantic's generator, tuned
to the format's conventions (no null, no auto titles, ``oneOf`` for unions, every model
closed), then the few shapes pydantic cannot say by itself: stable ``$defs`` names, small
models written inline, one definition per kind of layer, and a discriminated collector
union that names its ``type`` values for completion.

After changing a model, rewrite the shipped file and commit it with the change::

    python -m ctxpolicy.schemas.generate --write

``--check`` exits 1 when the shipped file differs from what the models generate
(tests/validation/test_schema_generated.py asserts the same); with no option the
generated schema is printed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from ctxpolicy.layers import (
    BLOCK_LAYER_PATTERN,
    CHECKPOINT_MESSAGES,
    DEFAULT_OVERFLOW,
    OVERFLOW_RULES,
    QUERY,
    SYSTEM_PROMPT,
    LayerKind,
    layer_kind,
)
from ctxpolicy.policy import KIND_ONLY_FIELDS, LAYER_KINDS, LayerSpec, Policy
from ctxpolicy.schema import SCHEMA_FILE

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_ID = "https://ctxpolicy.dev/schemas/ctxpolicy.schema.json"
SHIPPED_SCHEMA = Path(__file__).resolve().with_name(SCHEMA_FILE)
REGENERATE = "python -m ctxpolicy.schemas.generate --write"

#: ``$defs`` names of the models and type aliases that stay definitions (the names
#: editors, docs and tests refer to); every other model is written where it is used.
DEFINITIONS: Mapping[str, str] = {
    "CollectorSpec": "collector",
    "TemplateCollectorSpec": "templateCollector",
    "StateCollectorSpec": "stateCollector",
    "RetrieverCollectorSpec": "retrieverCollector",
    "CallableCollectorSpec": "callableCollector",
    "MemoryCollectorSpec": "memoryCollector",
    "FilesCollectorSpec": "filesCollector",
    "ToolsCollectorSpec": "toolsCollector",
    "AgentOutputsCollectorSpec": "agentOutputsCollector",
    "SkillsCollectorSpec": "skillsCollector",
    "AggregateCollectorSpec": "aggregateCollector",
    "RecallCollectorSpec": "recallCollector",
    "LayerName": "layerName",
    "BlockLayerName": "blockLayerName",
    "Ratio": "ratio",
    "FileToolsSpec": "fileTools",
    "ProcessRule": "process",
}
#: The definition of each kind of layer (`LayerSpec` is split into them).
LAYER_DEFINITIONS: Mapping[LayerKind, str] = {
    "block": "blockLayer",
    "system_prompt": "systemPromptLayer",
    "history": "historyLayer",
    "query": "queryLayer",
}
_DISCRIMINATED = ("collector", "type")  # the one discriminated union and its key

#: Keywords in the order the shipped file lists them (others follow, as generated).
_KEY_ORDER = (
    "$schema",
    "$id",
    "title",
    "$ref",
    "description",
    "type",
    "const",
    "enum",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "minItems",
    "items",
    "additionalProperties",
    "minProperties",
    "required",
    "properties",
    "patternProperties",
    "propertyNames",
    "default",
    "oneOf",
    "allOf",
    "anyOf",
    "not",
    "dependentSchemas",
    "$defs",
)
#: pydantic writes the bounds of a validated number under annotated-types' names.
_BOUNDS = {"ge": "minimum", "gt": "exclusiveMinimum", "le": "maximum", "lt": "exclusiveMaximum"}
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "dependentSchemas")
_SCHEMA_VALUES = ("items", "additionalProperties", "propertyNames", "not")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf")


def _plain(value: Any) -> Any:
    """A default as JSON data (models without their unset keys, mappings as dicts)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    return value


class _PolicySchemaGenerator(GenerateJsonSchema):
    """pydantic's generator with the policy format's conventions."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        """No auto titles: editors show the descriptions."""
        del schema
        return False

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        """A model's schema, titled only when its config says so (the policy itself)."""
        json_schema = super().model_schema(schema)
        if schema["cls"].model_config.get("title") is None:
            json_schema.pop("title", None)
        return json_schema

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        """The format has no null: an optional key is one left out."""
        return self.generate_inner(schema["schema"])

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        """A default of None means "unset" and is not written."""
        if "default" in schema and schema["default"] is None:
            return self.generate_inner(schema["schema"])
        return super().default_schema(schema)

    def get_default_value(self, schema: core_schema.WithDefaultSchema) -> Any:
        """Defaults made by a factory are written too (``processes``, ``vars``, ...)."""
        factory = schema.get("default_factory")
        if factory is not None and not schema.get("default_factory_takes_data"):
            return _plain(factory())  # type: ignore[call-arg]
        return _plain(super().get_default_value(schema))

    def literal_schema(self, schema: core_schema.LiteralSchema) -> JsonSchemaValue:
        """``enum``/``const`` alone (a ``type`` beside them would only repeat errors)."""
        json_schema = super().literal_schema(schema)
        json_schema.pop("type", None)
        return json_schema

    def union_schema(self, schema: core_schema.UnionSchema) -> JsonSchemaValue:
        """Exactly one branch (the format's unions have disjoint branches)."""
        json_schema = super().union_schema(schema)
        if "anyOf" in json_schema:
            json_schema["oneOf"] = json_schema.pop("anyOf")
        return json_schema

    def sort(self, value: JsonSchemaValue, parent_key: str | None = None) -> JsonSchemaValue:
        """Keep the models' order (`generate_policy_schema` orders the keywords)."""
        del parent_key
        return value


# ------------------------------------------------------------------ reshaping the output


def _rewrite(node: dict[str, Any], step: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
    """``node`` with ``step`` applied to it and, first, to every schema inside it."""
    out = dict(node)
    for key in _SCHEMA_MAPS:
        if key in out:
            out[key] = {name: _rewrite(child, step) for name, child in out[key].items()}
    for key in _SCHEMA_VALUES:
        if isinstance(out.get(key), dict):
            out[key] = _rewrite(out[key], step)
    for key in _SCHEMA_LISTS:
        if key in out:
            out[key] = [_rewrite(child, step) for child in out[key]]
    return step(out)


def _ref_name(node: Mapping[str, Any]) -> str | None:
    ref = node.get("$ref")
    return ref.removeprefix("#/$defs/") if isinstance(ref, str) else None


def _resolve_refs(node: dict[str, Any], defs: Mapping[str, dict[str, Any]]) -> Any:
    """Refs renamed to `DEFINITIONS`; a ref to any other model replaced by its schema."""

    def step(schema: dict[str, Any]) -> dict[str, Any]:
        name = _ref_name(schema)
        if name is None:
            return schema
        siblings = {key: value for key, value in schema.items() if key != "$ref"}
        if name in DEFINITIONS:
            return {"$ref": f"#/$defs/{DEFINITIONS[name]}", **siblings}
        # written inline; the field's own description wins over the model's
        return {**_resolve_refs(defs[name], defs), **siblings}

    return _rewrite(node, step)


def _tidy(schema: dict[str, Any]) -> dict[str, Any]:
    """JSON Schema names for bounds, no ``additionalProperties: true``, keywords in order."""
    out = {_BOUNDS.get(key, key): value for key, value in schema.items()}
    if out.get("additionalProperties") is True:
        del out["additionalProperties"]
    rank = {key: index for index, key in enumerate(_KEY_ORDER)}
    return dict(sorted(out.items(), key=lambda item: rank.get(item[0], len(rank))))


def _ref(definition: str) -> dict[str, str]:
    return {"$ref": f"#/$defs/{definition}"}


def _layer_definition(kind: LayerKind, layer: Mapping[str, Any]) -> dict[str, Any]:
    """`LayerSpec`'s schema cut to what a layer of ``kind`` takes."""
    properties = {
        field: prop
        for field, prop in layer["properties"].items()
        if KIND_ONLY_FIELDS.get(field, (kind, ""))[0] == kind
    }
    properties["overflow"] = {
        "description": LAYER_KINDS[kind].overflow,
        "enum": list(OVERFLOW_RULES[kind]),
        "default": DEFAULT_OVERFLOW[kind],
    }
    return {
        "type": "object",
        "description": LAYER_KINDS[kind].description,
        "additionalProperties": False,
        "properties": properties,
    }


def _split_layers(policy: dict[str, Any], defs: dict[str, Any]) -> None:
    """``layers``: each reserved layer and the block layers get their kind's definition."""
    layer = defs.pop(LayerSpec.__name__)
    for kind, definition in LAYER_DEFINITIONS.items():
        defs[definition] = _layer_definition(kind, layer)
    layers = policy["properties"]["layers"]
    layers["additionalProperties"] = False
    layers["properties"] = {
        name: _ref(LAYER_DEFINITIONS[layer_kind(name)])
        for name in (SYSTEM_PROMPT, CHECKPOINT_MESSAGES, QUERY)
    }
    layers["patternProperties"] = {BLOCK_LAYER_PATTERN: _ref(LAYER_DEFINITIONS["block"])}


def _name_discriminator(defs: dict[str, Any]) -> None:
    """The collector union lists its ``type`` values (completion) and requires one; each
    branch lists ``type`` first."""
    name, key = _DISCRIMINATED
    union = defs[name]
    tags = list(union.pop("discriminator")["mapping"])
    branches = [defs[_ref_name(branch) or ""] for branch in union["oneOf"]]
    for branch in branches:
        branch["properties"] = {key: branch["properties"][key], **branch["properties"]}
    description = branches[0]["properties"][key]["description"]
    union.update(
        type="object",
        required=[key],
        properties={key: {"description": description, "enum": tags}},
    )


def generate_policy_schema() -> dict[str, Any]:
    """The policy JSON Schema (draft 2020-12), generated from `ctxpolicy.policy.Policy`."""
    generated = Policy.model_json_schema(schema_generator=_PolicySchemaGenerator)
    raw_defs: dict[str, Any] = generated.pop("$defs")
    policy: dict[str, Any] = _resolve_refs(generated, raw_defs)
    defs: dict[str, Any] = {
        DEFINITIONS[name]: _resolve_refs(schema, raw_defs)
        for name, schema in raw_defs.items()
        if name in DEFINITIONS
    }
    defs[LayerSpec.__name__] = _resolve_refs(raw_defs[LayerSpec.__name__], raw_defs)
    _split_layers(policy, defs)
    _name_discriminator(defs)
    document = {"$schema": SCHEMA_DIALECT, "$id": SCHEMA_ID, **policy, "$defs": defs}
    tidied: dict[str, Any] = _rewrite(document, _tidy)
    return tidied


def render_policy_schema() -> str:
    """The generated schema as the shipped file's text."""
    return json.dumps(generate_policy_schema(), indent=2, ensure_ascii=False) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ctxpolicy.schemas.generate [--write | --check]``."""
    parser = argparse.ArgumentParser(
        prog="python -m ctxpolicy.schemas.generate",
        description="Generate the policy JSON Schema from the models (ctxpolicy.policy).",
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help=f"rewrite {SHIPPED_SCHEMA}")
    group.add_argument("--check", action="store_true", help="exit 1 when the shipped file is stale")
    args = parser.parse_args(argv)
    text = render_policy_schema()
    if args.write:
        SHIPPED_SCHEMA.write_text(text, encoding="utf-8")
        sys.stdout.write(f"wrote {SHIPPED_SCHEMA}\n")
        return 0
    if args.check:
        if SHIPPED_SCHEMA.read_text(encoding="utf-8") != text:
            sys.stderr.write(f"{SHIPPED_SCHEMA} is stale; run: {REGENERATE}\n")
            return 1
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["generate_policy_schema", "main", "render_policy_schema"]
