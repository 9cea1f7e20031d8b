"""Schema-valid policy data read as the semantic rules read a `Policy`, without pydantic.

``ctxpolicy validate`` builds no `Policy`: it reports findings. Importing pydantic and
building the policy models is about half of its start-up, more than the whole run on
100 small team files. Once the JSON Schema has accepted a document (the schema and the
models accept the same documents: tests/validation/test_schema_parity.py), its structure
is known, and `PlainPolicy` reads it as a `Policy` would be read:

- every object of the document becomes a `Section`: its keys as attributes, over the
  defaults of its model (`DEFAULTS`); lists become tuples and free mappings read-only
  mappings, as the models freeze them;
- `PlainPolicy` has the policy's views from the same code as `Policy`
  (`ctxpolicy.policy_views.PolicyViews`): `layer`, `process`, `available_tokens`,
  `layer_base_dir` and the rest.

Tests hold `DEFAULTS` equal to the models' defaults, a `PlainPolicy` equal field by field
to the `Policy` of the same data, and the findings of both equal
(tests/validation/test_plain.py). Only schema-valid documents are read this way; a
document with schema errors is still checked through the models
(`ctxpolicy.validation.build_policy`). See docs/design.md, 'Validation without the
models'.
"""

from __future__ import annotations

import functools
from collections.abc import Hashable, Mapping, MutableMapping
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, cast

from ctxpolicy.layers import DEFAULT_ORDER, DEFAULT_PROCESSES
from ctxpolicy.policy_views import PolicyViews

if TYPE_CHECKING:
    from ctxpolicy.policy import Policy, ResolvedLayer

_COLLECTOR = {"on_error": "fail", "timeout_s": None}
_TEMPLATE_SOURCE = {**_COLLECTOR, "template": None, "template_file": None}

#: Each model's optional fields with their defaults, by model name (required fields have
#: none: the schema made sure the document sets them). Nested objects are written as
#: data, as a policy file would write them.
DEFAULTS: Mapping[str, Mapping[str, Any]] = {
    "Policy": {
        "description": None,
        "extends": None,
        "enable_share_context": True,
        "model": {},
        "budget": {},
        "order": DEFAULT_ORDER,
        "vars": {},
        "layers": {},
        "processes": DEFAULT_PROCESSES,
        "default_process": "react",
        "tools": None,
    },
    "ModelSpec": {
        "context_window": 128_000,
        "tokenizer": "cl100k_base",
        "system_messages": "auto",
    },
    "BudgetSpec": {"output_reserve": 0.1, "ratios": {}, "redistribute": True},
    "LayerSpec": dict.fromkeys(
        (
            "shared",
            "persist",
            "role",
            "overflow",
            "collector",
            "references",
            "curate",
            "clear_tool_results",
            "cache",
            "description",
        )
    ),
    "QueryReferencesSpec": {"on_error": "fail"},
    "ProcessRule": {
        "checkpoint_messages": True,
        "share_context": True,
        "query": "checkpoint",
        "include": (),
        "exclude": (),
        "tools": None,
        "description": None,
    },
    "FileToolsSpec": {
        "allow": ("read_file", "list_files", "search", "read_block"),
        "write_file": False,
        "max_output_chars": None,
        "max_results": None,
    },
    "TemplateCollectorSpec": _TEMPLATE_SOURCE,
    "StateCollectorSpec": _TEMPLATE_SOURCE,
    "RetrieverCollectorSpec": {**_TEMPLATE_SOURCE, "top_k": 5, "separator": "\n\n"},
    "CallableCollectorSpec": _COLLECTOR,
    "MemoryCollectorSpec": {
        **_COLLECTOR,
        "service": "memory",
        "strategy": None,
        "tier": None,
        "limit": None,
        "shares": None,
        "tiers": None,
    },
    "MemoryTiers": {"l1": 50, "l2": 100, "l3": 500, "l2_policy": "refresh"},
    "FilesCollectorSpec": _COLLECTOR,
    "ToolsCollectorSpec": {**_COLLECTOR, "service": "tools"},
    "RecallCollectorSpec": {
        **_COLLECTOR,
        "backend": "memory",
        "path": None,
        "path_env": "CTXPOLICY_RECALL_PATH",
        "dsn_env": "CTXPOLICY_RECALL_DSN",
        "index": None,
        "candidates": 200,
        "min_unit_chars": 40,
        "max_unit_chars": 600,
        "turn_chars": 600,
        "memory": None,
        "memory_limit": 20,
        "embeddings": None,
        "weights": {},
        "header": None,
    },
    "RecallWeights": {"bm25": 1.0, "dense": 1.0},
    "AgentOutputsCollectorSpec": {
        **_COLLECTOR,
        "field": "messages",
        "half_life": 2.0,
        "min_weight": 0.05,
        "limit": 20,
    },
    "SkillsCollectorSpec": {
        **_COLLECTOR,
        "service": "skills",
        "field": "active_skills",
        "match_query": True,
    },
    "AggregateCollectorSpec": {
        **_COLLECTOR,
        "service": "memory",
        "contexts": None,
        "layers": None,
        "strategy": None,
        "context_importance": 0.8,
    },
}

#: The model of each collector ``type``.
COLLECTOR_MODELS: Mapping[str, str] = {
    "template": "TemplateCollectorSpec",
    "state": "StateCollectorSpec",
    "retriever": "RetrieverCollectorSpec",
    "callable": "CallableCollectorSpec",
    "memory": "MemoryCollectorSpec",
    "files": "FilesCollectorSpec",
    "tools": "ToolsCollectorSpec",
    "recall": "RecallCollectorSpec",
    "agent_outputs": "AgentOutputsCollectorSpec",
    "skills": "SkillsCollectorSpec",
    "aggregate": "AggregateCollectorSpec",
}

#: The fields that hold another model: ``(model, field) -> model of the value``, or of
#: each value of a mapping (``"{Model}"``); ``"collector"`` is chosen by its ``type``.
NESTED: Mapping[tuple[str, str], str] = {
    ("Policy", "model"): "ModelSpec",
    ("Policy", "budget"): "BudgetSpec",
    ("Policy", "layers"): "{LayerSpec}",
    ("Policy", "processes"): "{ProcessRule}",
    ("Policy", "tools"): "FileToolsSpec",
    ("LayerSpec", "collector"): "collector",
    ("LayerSpec", "references"): "QueryReferencesSpec",
    ("ProcessRule", "tools"): "FileToolsSpec",
    ("MemoryCollectorSpec", "tiers"): "MemoryTiers",
    ("RecallCollectorSpec", "weights"): "RecallWeights",
}


class Section:
    """One object of a policy: its fields as attributes. Immutable, and equal (and
    hashed) by its fields, as a frozen model is (a field holding a mapping makes it
    unhashable, as it makes the model)."""

    def __init__(self, fields: Mapping[str, Any]) -> None:
        self.__dict__.update(fields)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only (setting {name!r})")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    def __hash__(self) -> int:
        return hash(tuple(vars(self).items()))

    def __repr__(self) -> str:
        fields = ", ".join(f"{key}={value!r}" for key, value in vars(self).items())
        return f"{type(self).__name__}({fields})"


def _value(value: Any) -> Any:
    """A free value as a model freezes it: lists as tuples, mappings read-only."""
    if isinstance(value, list | tuple):
        return tuple(_value(item) for item in value)
    if isinstance(value, Mapping):
        return MappingProxyType({key: _value(item) for key, item in value.items()})
    return value


def _field(model: str, name: str, value: Any) -> Any:
    nested = NESTED.get((model, name))
    if nested is None or value is None:
        return _value(value)
    if nested == "collector":
        return section(COLLECTOR_MODELS[value["type"]], value)
    if nested.startswith("{"):
        inner = nested[1:-1]
        return MappingProxyType({key: section(inner, item) for key, item in value.items()})
    return section(nested, value)


@functools.cache
def _default(model: str, name: str) -> Any:
    """Field ``name`` of ``model`` when a document leaves it out (read once: a `Section`
    is immutable, so every section may share it)."""
    return _field(model, name, DEFAULTS[model][name])


_ABSENT: Any = object()


def section(
    model: str, data: Mapping[str, Any], *, read: Mapping[str, Any] | None = None
) -> Section:
    """The object ``data`` of model ``model`` (a name in `DEFAULTS`), defaults filled in.

    Fields come in the models' order: the defaults' first, then the set ones not among
    them (the required fields). ``read`` gives fields already read (`PlainPolicy`'s memo).
    """
    fields = {}
    for name in DEFAULTS[model]:
        value = data.get(name, _ABSENT)
        if value is _ABSENT:
            fields[name] = _default(model, name)
        elif read is not None and name in read:
            fields[name] = read[name]
        else:
            fields[name] = _field(model, name, value)
    for name, value in data.items():
        if name not in fields:  # a required field: never one that holds a model
            fields[name] = _value(value)
    return Section(fields)


def _policy_section(data: Mapping[str, Any], memo: MutableMapping[Hashable, Any] | None) -> Section:
    """`section` of the policy, each top-level mapping or list read once per run."""
    if memo is None:
        return section("Policy", data)
    read = {}
    for name, value in data.items():
        if type(value) is dict or type(value) is list:
            key = ("plain", name, id(value))
            found = memo.get(key)
            if found is None or found[0] is not value:
                found = memo[key] = (value, _field("Policy", name, value))
            read[name] = found[1]
    return section("Policy", data, read=read)


class PlainPolicy(Section, PolicyViews):
    """A schema-valid policy document, read as the semantic rules read a `Policy`.

    Besides the fields and the views, it has what the rules read of a model:
    ``model_fields_set`` (the top-level keys the document sets) and the private values
    (``_source``, ``_base_dirs``, ``_order_locations``).
    """

    __slots__ = ("_private", "model_fields_set")

    def __init__(
        self,
        data: Mapping[str, Any],
        *,
        source: Path | None = None,
        base_dirs: Mapping[str, Path] | None = None,
        memo: MutableMapping[Hashable, Any] | None = None,
    ) -> None:
        """Read ``data`` (a document the schema accepts).

        Args:
            data: The policy data.
            source: The policy file (relative paths resolve against its folder).
            base_dirs: The folder each relative path resolves against (see `Policy`).
            memo: Where a run remembers each top-level section it read, by identity (the
                run's ``DocumentCache.checks``: a base's sections are the same objects in
                every team file that extends it, so each is read once); None reads all.
        """
        super().__init__(vars(_policy_section(data, memo)))
        extra = object.__setattr__  # the slots: not fields (`Section` compares its fields)
        extra(self, "model_fields_set", frozenset(data))
        extra(self, "_private", {"_source": source, "_base_dirs": dict(base_dirs or {})})

    @property
    def _order_locations(self) -> Mapping[str, str]:
        """Where each layer's ``order`` entry is: only a loaded `Policy` knows (the rules
        never read it)."""
        return {}

    def _resolved_layer(self, fields: dict[str, Any]) -> ResolvedLayer:
        return cast("ResolvedLayer", Section(fields))

    def as_policy(self) -> Policy:
        """This policy typed as the `Policy` it reads as, for the rules' signatures."""
        return cast("Policy", self)


__all__ = ["COLLECTOR_MODELS", "DEFAULTS", "NESTED", "PlainPolicy", "Section", "section"]
