"""The Blackboard: the one state contract of a LangGraph app (docs/design.md, 'State rules').

Every field a node may read or write is declared here, with its reducer where it has
one. Adding a field means changing `Blackboard` first (or extending it with
`blackboard_schema` for a policy's own persisted ``__context`` layers).

Reducer fields:

- ``messages``: LangGraph's ``add_messages`` (append; a message whose id is already
  present replaces it; ``RemoveMessage(id=REMOVE_ALL_MESSAGES)`` clears).
- ``mapreduce_results``: `merge_results`, an append that de-duplicates by task id, so a
  re-run worker never adds its result twice; ``Overwrite([])`` resets.
- ``deliverable_keys``: `merge_keys`, an ordered set union (parallel writers cannot
  conflict, a re-run cannot duplicate a key).

This module imports langgraph: it is the LangGraph state side. ``import ctxpolicy``
never imports it.
"""

# No ``from __future__ import annotations`` here: LangGraph evaluates these TypedDict
# annotations at graph build time and needs the reducers as real objects.

import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages

from ctxpolicy.errors import PersistenceError
from ctxpolicy.layers import COMPRESSION, EXPERIENCE, KNOWLEDGE, TODO, is_block_layer

#: What `routing.finish_agent` records about the last agent run.
AgentStatus = Literal["completed", "failed", "aborted"]


class MapReduceTask(TypedDict):
    """One task of a MapReduce plan. ``id`` is stable within the plan."""

    id: str
    description: str


class MapReduceResult(TypedDict, total=False):
    """One worker's result. ``task_id`` is the de-duplication key."""

    task_id: str
    output: str
    status: str
    error: str
    agent: str


class TimelineEntry(TypedDict, total=False):
    """One entry of the run timeline (free-form beyond ``event``)."""

    event: str
    agent: str
    detail: str


_OVERWRITE_KEY = "__overwrite__"


def _unwrap_overwrite(value: Any) -> tuple[bool, Any]:
    """``(True, inner)`` for LangGraph's ``Overwrite`` (typed or JSON-erased forms)."""
    from langgraph.types import Overwrite

    if isinstance(value, Overwrite):
        return True, value.value
    if isinstance(value, Mapping):
        if len(value) == 1 and _OVERWRITE_KEY in value:
            return True, value[_OVERWRITE_KEY]
        if value.get("type") == _OVERWRITE_KEY and "value" in value:
            return True, value["value"]
    return False, None


def result_key(result: Mapping[str, Any]) -> str:
    """The stable de-duplication key of a MapReduce result: its ``task_id``.

    Raises:
        ValueError: ``result`` is not a mapping with a non-empty string ``task_id``.
    """
    if not isinstance(result, Mapping):
        raise TypeError(f"a mapreduce result must be a mapping, got {type(result).__name__}")
    key = result.get("task_id")
    if not isinstance(key, str) or not key:
        raise ValueError(f"a mapreduce result needs a non-empty string 'task_id', got {key!r}")
    return key


def _as_items(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, Mapping):
        return [value]
    if isinstance(value, Iterable) and not isinstance(value, str | bytes):
        return list(value)
    raise ValueError(f"expected a list of items, got {type(value).__name__}")


def merge_results(left: Sequence[MapReduceResult] | None, right: Any) -> list[MapReduceResult]:
    """Reducer of ``mapreduce_results``: append, de-duplicating by task id.

    A result whose ``task_id`` is already present replaces the earlier one in place
    (a retried worker's latest answer wins, and the list never holds a task twice).
    ``Overwrite(value)`` replaces the whole list (``Overwrite([])`` is the reset).
    """
    is_overwrite, inner = _unwrap_overwrite(right)
    base: list[Any] = [] if is_overwrite else list(left or [])
    merged: list[MapReduceResult] = []
    index: dict[str, int] = {}
    for item in base + _as_items(inner if is_overwrite else right):
        key = result_key(item)
        if key in index:
            merged[index[key]] = item
        else:
            index[key] = len(merged)
            merged.append(item)
    return merged


def merge_keys(left: Sequence[str] | None, right: Any) -> list[str]:
    """Reducer of ``deliverable_keys``: ordered set union (``Overwrite`` replaces)."""
    is_overwrite, inner = _unwrap_overwrite(right)
    base: list[Any] = [] if is_overwrite else list(left or [])
    merged: list[str] = []
    seen: set[str] = set()
    for key in base + _as_items(inner if is_overwrite else right):
        if not isinstance(key, str):
            raise TypeError(f"a deliverable key must be a string, got {key!r}")
        if key not in seen:
            seen.add(key)
            merged.append(key)
    return merged


class Blackboard(TypedDict, total=False):
    """The graph state of a Datapillar-style multi-agent app.

    Read and write it only through `ctxpolicy.state.StateBuilder`.
    """

    # session
    namespace: str
    session_id: str
    # routing
    active_agent: str | None
    assigned_task: str | None
    last_agent_status: AgentStatus | None
    last_agent_failure_kind: str | None
    last_agent_error: str | None
    # memory (reducer)
    messages: Annotated[list[AnyMessage], add_messages]
    # deliverables (reducer: ordered union)
    deliverable_keys: Annotated[list[str], merge_keys]
    # todo (structured snapshot)
    todo: dict[str, Any] | list[Any] | None
    # persisted __context layers (written only through contexts.persist / compression)
    compression__context: str
    todo__context: str
    knowledge__context: str
    experience__context: str
    # react
    goal: str | None
    plan: list[str] | None
    reflection: str | None
    error_retry_count: int
    # mapreduce
    mapreduce_goal: str | None
    mapreduce_understanding: str | None
    mapreduce_tasks: list[MapReduceTask]
    mapreduce_task: MapReduceTask | None
    mapreduce_results: Annotated[list[MapReduceResult], merge_results]
    # timeline
    timeline: list[TimelineEntry]


#: ``__context`` layers the Blackboard declares as fields (persisted only if the policy says so).
CONTEXT_FIELDS: tuple[str, ...] = (COMPRESSION, TODO, KNOWLEDGE, EXPERIENCE)


def state_keys(schema: type[Any] = Blackboard) -> frozenset[str]:
    """The field names of a Blackboard-like TypedDict ``schema``.

    Raises:
        TypeError: ``schema`` is not a TypedDict class.
    """
    required = getattr(schema, "__required_keys__", None)
    optional = getattr(schema, "__optional_keys__", None)
    if required is None or optional is None:
        raise TypeError(f"schema must be a TypedDict class, got {schema!r}")
    return frozenset(required) | frozenset(optional)


class DroppedStateKeyError(PersistenceError, ValueError):
    """A graph state schema lacks a key the policy reads or writes: LangGraph would drop it."""


def check_schema_keys(schema: type[Any], keys: Iterable[str], *, policy: str) -> None:
    """Raise `DroppedStateKeyError` unless ``schema`` declares every one of ``keys``.

    LangGraph keeps only the fields its state schema declares and drops any other key
    of a graph's input or a node's patch without a word; the keys a policy's
    collectors read (``policy_state_fields``) and its persisted layers must be fields.

    Raises:
        TypeError: ``schema`` is not a TypedDict class.
    """
    missing = sorted(set(keys) - state_keys(schema))
    if missing:
        raise DroppedStateKeyError(
            f"state schema {getattr(schema, '__name__', schema)!r} lacks "
            f"{', '.join(map(repr, missing))}, which policy {policy!r} reads or persists: "
            "LangGraph would drop them from the graph's input and the nodes' patches; "
            "declare them, or extend the schema with blackboard_schema(persisted_layers"
            "(policy), fields=policy_state_fields(policy), base=YourState), or use "
            "state_schema(engine)"
        )


def blackboard_schema(
    persisted_layers: Iterable[str],
    *,
    base: type[Any] = Blackboard,
    name: str = "PolicyBlackboard",
    fields: Iterable[str] = (),
) -> type[Any]:
    """``base`` extended with a ``str`` field for each persisted ``__context`` layer it lacks
    and an ``Any`` field for each of ``fields`` it lacks.

    Use it when a team policy persists its own block layer (``profile__context`` with
    ``persist: true``) or its collectors read state keys of their own (a ``state``
    collector's ``field``, ``active_skills``): LangGraph only keeps fields its state
    schema declares.

    Args:
        persisted_layers: Layer names, e.g. ``persisted_layers(policy)``.
        base: The TypedDict to extend (default `Blackboard`).
        name: Name of the generated TypedDict.
        fields: Other state keys, e.g. ``policy_state_fields(policy)``.

    Raises:
        ValueError: a name is not a ``__context`` block layer name, or a field name is
            not an identifier.
    """
    layers = _checked_layers(persisted_layers)
    others = _checked_fields(fields)
    known = state_keys(base)
    extra = tuple(sorted({layer for layer in layers if layer not in known}))
    loose = tuple(sorted({f for f in others if f not in known and f not in extra}))
    if not extra and not loose:
        return base
    return _extended_schema(base, extra, name, loose)


def _checked_layers(persisted_layers: Iterable[str]) -> tuple[str, ...]:
    """The persisted layer names, each checked to be a ``__context`` block layer.

    Raises:
        ValueError: a name is not a block layer name.
    """
    layers = tuple(persisted_layers)
    for layer in layers:
        if not is_block_layer(layer):
            raise ValueError(f"persisted_layers: {layer!r} is not a __context block layer name")
    return layers


def _checked_fields(fields: Iterable[str]) -> tuple[str, ...]:
    """The other state keys, each checked to be an identifier.

    Raises:
        ValueError: a key is not a string or not an identifier.
    """
    others = tuple(fields)
    for field in others:
        if not isinstance(field, str) or not field.isidentifier():
            raise ValueError(f"fields: {field!r} is not a state key name")
    return others


#: Extended schemas by (base, extra layers, name, other fields): the same policy yields
#: the same class.
_EXTENDED: dict[tuple[type[Any], tuple[str, ...], str, tuple[str, ...]], type[Any]] = {}


def _extended_schema(
    base: type[Any], extra: tuple[str, ...], name: str, loose: tuple[str, ...] = ()
) -> type[Any]:
    key = (base, extra, name, loose)
    found = _EXTENDED.get(key)
    if found is None:
        hints = typing.get_type_hints(base, include_extras=True)
        fields = {**hints, **dict.fromkeys(extra, str), **dict.fromkeys(loose, Any)}
        created: type[Any] = TypedDict(name, fields, total=False)  # type: ignore[misc]
        found = _EXTENDED.setdefault(key, created)
    return found


__all__ = [
    "CONTEXT_FIELDS",
    "AgentStatus",
    "Blackboard",
    "DroppedStateKeyError",
    "MapReduceResult",
    "MapReduceTask",
    "TimelineEntry",
    "blackboard_schema",
    "check_schema_keys",
    "merge_keys",
    "merge_results",
    "result_key",
    "state_keys",
]
