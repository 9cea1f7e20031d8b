"""Edge cases of the Blackboard schema helpers, the reducers and the patch buffer:
exact error messages, freshly built extended schemas, and the buffer's read/has rules."""

from __future__ import annotations

import typing
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ChatMessage, HumanMessage, SystemMessage
from langgraph.graph.message import add_messages

import ctxpolicy.state.blackboard as blackboard_module
from ctxpolicy.errors import PersistenceError
from ctxpolicy.state import (
    Blackboard,
    UnknownStateKeyError,
    blackboard_schema,
    merge_results,
    result_key,
    state_keys,
)
from ctxpolicy.state.buffer import PatchBuffer
from ctxpolicy.state.ids import ID_PREFIX

SEED_KEYS = state_keys()


@pytest.fixture(autouse=True)
def fresh_schema_cache() -> Iterator[None]:
    """Each test builds its extended schemas itself (no class cached by another test)."""
    saved = dict(blackboard_module._EXTENDED)
    blackboard_module._EXTENDED.clear()
    try:
        yield
    finally:
        blackboard_module._EXTENDED.clear()
        blackboard_module._EXTENDED.update(saved)


def hints(schema: type[Any]) -> dict[str, Any]:
    return typing.get_type_hints(schema, include_extras=True)


# ----------------------------------------------------------------------------- reducers


def test_merge_results_names_the_type_of_a_scalar_update() -> None:
    with pytest.raises(ValueError, match=r"^expected a list of items, got int$"):
        merge_results([], 3)


def test_result_key_names_the_type_of_a_non_mapping() -> None:
    with pytest.raises(TypeError, match=r"^a mapreduce result must be a mapping, got str$"):
        result_key("task-1")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- state_keys


def test_state_keys_refuses_a_class_with_only_required_keys() -> None:
    class Half:
        __required_keys__ = frozenset({"a"})

    with pytest.raises(TypeError) as info:
        state_keys(Half)
    assert str(info.value) == f"schema must be a TypedDict class, got {Half!r}"


# ----------------------------------------------------------------------------- blackboard_schema


def test_extended_schema_keeps_base_fields_and_reducers_and_adds_str_layers() -> None:
    schema = blackboard_schema(["profile__context"])
    assert schema.__name__ == "PolicyBlackboard"
    assert state_keys(schema) == SEED_KEYS | {"profile__context"}
    found = hints(schema)
    assert found["profile__context"] is str
    assert found["mapreduce_results"].__metadata__ == (merge_results,)
    assert found["messages"].__metadata__ == (add_messages,)
    assert found == {**hints(Blackboard), "profile__context": str}


def test_extended_schema_is_a_non_total_typeddict() -> None:
    schema = blackboard_schema(["profile__context"])
    assert schema.__total__ is False
    assert schema.__required_keys__ == frozenset()
    assert schema.__optional_keys__ == SEED_KEYS | {"profile__context"}


def test_extended_schema_uses_the_given_name() -> None:
    assert blackboard_schema(["profile__context"], name="TeamState").__name__ == "TeamState"


def test_extended_schemas_differ_by_layers_and_are_cached_per_layers() -> None:
    first = blackboard_schema(["alpha__context"])
    second = blackboard_schema(["beta__context"])
    assert first is not second
    assert state_keys(first) == SEED_KEYS | {"alpha__context"}
    assert state_keys(second) == SEED_KEYS | {"beta__context"}
    assert blackboard_schema(["alpha__context"]) is first
    assert blackboard_schema(["beta__context"]) is second


def test_other_fields_become_any_fields() -> None:
    schema = blackboard_schema([], fields=["active_skills", "zone"])
    assert state_keys(schema) == SEED_KEYS | {"active_skills", "zone"}
    found = hints(schema)
    assert found["active_skills"] is Any
    assert found["zone"] is Any
    assert found["messages"].__metadata__ == (add_messages,)


def test_other_fields_with_layers_extend_both() -> None:
    schema = blackboard_schema(["profile__context"], fields=["active_skills"])
    assert state_keys(schema) == SEED_KEYS | {"profile__context", "active_skills"}
    found = hints(schema)
    assert found["profile__context"] is str
    assert found["active_skills"] is Any


def test_known_fields_keep_their_declaration() -> None:
    assert blackboard_schema([], fields=["goal", "messages"]) is Blackboard
    schema = blackboard_schema(["profile__context"], fields=["messages", "goal"])
    assert hints(schema) == {**hints(Blackboard), "profile__context": str}


def test_a_field_that_is_also_a_persisted_layer_stays_str() -> None:
    schema = blackboard_schema(["profile__context"], fields=["profile__context"])
    assert hints(schema)["profile__context"] is str
    assert state_keys(schema) == SEED_KEYS | {"profile__context"}


@pytest.mark.parametrize("bad", ["not a name", "1st", ""])
def test_a_field_that_is_not_an_identifier_is_refused(bad: str) -> None:
    with pytest.raises(ValueError) as info:
        blackboard_schema([], fields=[bad])
    assert str(info.value) == f"fields: {bad!r} is not a state key name"


# ----------------------------------------------------------------------------- history checks


def buffer(state: dict[str, Any] | None = None, *keys: str) -> PatchBuffer:
    return PatchBuffer(state or {}, keys=frozenset(keys or SEED_KEYS))


def test_system_message_in_delta_is_refused_with_the_full_explanation() -> None:
    with pytest.raises(PersistenceError) as info:
        buffer().append_messages([HumanMessage("hi"), SystemMessage("prompt")])
    assert str(info.value) == (
        "delta[1] is a SystemMessage: the history holds only Human/AI/Tool messages "
        "(the system prompt is runtime-only; a summary belongs in compression__context). "
        "Did you pass the composed prompt instead of the delta?"
    )


def test_other_message_types_are_refused_naming_the_type() -> None:
    with pytest.raises(PersistenceError) as info:
        buffer().append_messages([ChatMessage(content="x", role="critic")])
    assert str(info.value) == (
        "delta[0] has type 'chat': the history holds only Human/AI/Tool messages"
    )


def test_a_delta_that_is_not_a_sequence_names_its_type() -> None:
    with pytest.raises(TypeError, match=r"^delta must be a sequence of messages, got int$"):
        buffer().append_messages(3)  # type: ignore[arg-type]


def test_a_delta_item_that_is_not_a_message_names_its_type() -> None:
    with pytest.raises(TypeError, match=r"^delta\[1\] must be a langchain BaseMessage, got str$"):
        buffer().append_messages([HumanMessage("hi"), "hello"])  # type: ignore[list-item]


def test_replace_names_its_argument_in_errors() -> None:
    with pytest.raises(TypeError, match=r"^messages must be a sequence of messages, got str$"):
        buffer().replace_messages("hello")  # type: ignore[arg-type]
    with pytest.raises(PersistenceError) as info:
        buffer().replace_messages([SystemMessage("prompt")])
    assert str(info.value).startswith("messages[0] is a SystemMessage: ")


def test_replace_after_append_is_refused_with_the_full_explanation() -> None:
    buf = buffer()
    buf.append_messages([HumanMessage("hi")])
    with pytest.raises(PersistenceError) as info:
        buf.replace_messages([HumanMessage("all")])
    assert str(info.value) == (
        "memory.replace() after memory.append() in the same node would drop the "
        "appended delta: call replace(all) first, then append(delta)"
    )


# ----------------------------------------------------------------------------- buffer keys


def test_unknown_key_in_the_input_state_message() -> None:
    with pytest.raises(UnknownStateKeyError) as info:
        PatchBuffer({"bogus": 1}, keys=frozenset({"b", "a"}))
    assert str(info.value) == (
        "unknown state key 'bogus' (in the input state): not a field of the Blackboard; "
        "known keys: a, b"
    )
    assert info.value.key == "bogus"


def test_unknown_key_written_by_the_node_message() -> None:
    buf = buffer({}, "b", "a")
    with pytest.raises(UnknownStateKeyError) as info:
        buf.write("zone", 1)
    assert str(info.value) == (
        "unknown state key 'zone' (written by this node): not a field of the Blackboard; "
        "known keys: a, b"
    )


def test_state_that_is_not_a_mapping_names_its_type() -> None:
    with pytest.raises(TypeError, match=r"^state must be a mapping, got list$"):
        PatchBuffer([], keys=frozenset({"a"}))  # type: ignore[arg-type]


@pytest.mark.parametrize("field", ["messages", "mapreduce_results"])
def test_reducer_field_write_message(field: str) -> None:
    with pytest.raises(PersistenceError) as info:
        buffer().write(field, [])
    assert str(info.value) == (
        f"{field!r} is a reducer field: write it through its module "
        "(memory.append/replace, mapreduce.append_result/reset_results)"
    )


# ----------------------------------------------------------------------------- buffer reads


def test_read_falls_back_to_the_state_then_to_the_default() -> None:
    buf = buffer({"goal": "g"}, "goal", "plan", "reflection")
    buf.write("plan", ["p"])
    assert buf.read("plan", "unused") == ["p"]
    assert buf.read("goal", "unused") == "g"
    assert buf.read("reflection", "fallback") == "fallback"
    assert buf.read("reflection") is None


def test_has_sees_writes_and_state_values_only() -> None:
    buf = buffer({"goal": "g"}, "goal", "plan", "reflection")
    buf.write("plan", ["p"])
    assert buf.has("goal") is True
    assert buf.has("plan") is True
    assert buf.has("reflection") is False
    buf.write("goal", None)
    assert buf.has("goal") is True


def test_results_include_this_nodes_pending_appends() -> None:
    buf = buffer({"mapreduce_results": [{"task_id": "a", "output": "old"}]})
    buf.append_results([{"task_id": "b", "output": "1"}, {"task_id": "a", "output": "new"}])
    assert buf.results() == [{"task_id": "a", "output": "new"}, {"task_id": "b", "output": "1"}]
    assert buf.to_patch() == {
        "mapreduce_results": [{"task_id": "b", "output": "1"}, {"task_id": "a", "output": "new"}]
    }


# ----------------------------------------------------------------------------- message ids


def test_force_ids_replaces_existing_ids_with_stable_ones() -> None:
    history = [HumanMessage("hi", id="h1")]
    kept = buffer({"messages": history})
    kept.append_messages([AIMessage("reply", id="run-1")])
    assert [m.id for m in kept.appended_messages()] == ["run-1"]

    forced = buffer({"messages": history})
    forced.append_messages([AIMessage("reply", id="run-1")], force_ids=True)
    again = buffer({"messages": history})
    again.append_messages([AIMessage("reply", id="run-2")], force_ids=True)
    (stored,) = forced.appended_messages()
    assert stored.id is not None
    assert stored.id.startswith(ID_PREFIX)
    assert [m.id for m in again.appended_messages()] == [stored.id]


def test_an_append_after_a_message_with_an_empty_id_gets_fresh_ids() -> None:
    """An id of "" is no id: the next append chains through the history, never reuses ids.

    LangGraph's add_messages fills only ids that are None, so a stored message may keep
    the id "". Anchoring the next append on it would give the same ids as an append to
    an empty history, and add_messages would then overwrite the first message.
    """
    first = buffer()
    first.append_messages([HumanMessage("ok")])
    (stored,) = first.appended_messages()
    history = [stored, AIMessage("reply", id="")]
    second = buffer({"messages": history})
    second.append_messages([HumanMessage("ok")])
    (appended,) = second.appended_messages()
    assert appended.id != stored.id
    merged = add_messages(history, [appended])
    assert [m.content for m in merged] == ["ok", "reply", "ok"]
