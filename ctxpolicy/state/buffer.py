"""The patch buffer behind `StateBuilder`: one place that knows the reducer rules.

Plain fields: last write wins. ``messages``: append(delta) or replace(all) (with
``RemoveMessage(id=REMOVE_ALL_MESSAGES)`` first); never a diff against a transcript.
``mapreduce_results``: append or reset (``Overwrite``). Reads see the restored state
with this node's pending writes applied.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, RemoveMessage

from ctxpolicy.errors import PersistenceError
from ctxpolicy.state.blackboard import MapReduceResult, merge_results, result_key
from ctxpolicy.state.ids import with_stable_ids

MESSAGES = "messages"
RESULTS = "mapreduce_results"
_REDUCER_FIELDS = frozenset({MESSAGES, RESULTS})
_HISTORY_TYPES = frozenset({"human", "ai", "tool"})


class UnknownStateKeyError(PersistenceError):
    """A state key that the Blackboard (or the policy's persisted layers) does not declare."""

    def __init__(self, key: str, known: Iterable[str], *, where: str) -> None:
        self.key = key
        super().__init__(
            f"unknown state key {key!r} ({where}): not a field of the Blackboard; "
            f"known keys: {', '.join(sorted(known))}"
        )


def _check_history_messages(messages: Sequence[Any], *, argument: str) -> list[BaseMessage]:
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence | Iterable):
        raise TypeError(f"{argument} must be a sequence of messages, got {type(messages).__name__}")
    checked: list[BaseMessage] = []
    for i, message in enumerate(messages):
        if not isinstance(message, BaseMessage):
            raise TypeError(
                f"{argument}[{i}] must be a langchain BaseMessage, got {type(message).__name__}"
            )
        if message.type == "remove":
            raise PersistenceError(
                f"{argument}[{i}] is a RemoveMessage: use memory.replace(all) to rewrite history"
            )
        if message.type == "system":
            raise PersistenceError(
                f"{argument}[{i}] is a SystemMessage: the history holds only Human/AI/Tool "
                "messages (the system prompt is runtime-only; a summary belongs in "
                "compression__context). Did you pass the composed prompt instead of the delta?"
            )
        if message.type not in _HISTORY_TYPES:
            raise PersistenceError(
                f"{argument}[{i}] has type {message.type!r}: the history holds only "
                "Human/AI/Tool messages"
            )
        checked.append(message)
    return checked


class PatchBuffer:
    """Accumulates one node's writes and renders them as one LangGraph update dict."""

    def __init__(self, state: Mapping[str, Any], *, keys: frozenset[str]) -> None:
        if not isinstance(state, Mapping):
            raise TypeError(f"state must be a mapping, got {type(state).__name__}")
        for key in state:
            if key not in keys:
                raise UnknownStateKeyError(str(key), keys, where="in the input state")
        self._state = dict(state)
        self._keys = keys
        self._writes: dict[str, Any] = {}
        self._appended: list[BaseMessage] = []
        self._replacement: list[BaseMessage] | None = None
        self._results: list[MapReduceResult] = []
        self._results_reset = False

    # ------------------------------------------------------------------ plain fields

    def check_key(self, key: str) -> None:
        """Raise `UnknownStateKeyError` unless ``key`` is a declared field."""
        if key not in self._keys:
            raise UnknownStateKeyError(key, self._keys, where="written by this node")

    def read(self, key: str, default: Any = None) -> Any:
        """The current value of a plain field (this node's write, else the state's)."""
        if key in self._writes:
            return self._writes[key]
        return self._state.get(key, default)

    def has(self, key: str) -> bool:
        """Whether the field has a value (written now or present in the state)."""
        return key in self._writes or key in self._state

    def write(self, key: str, value: Any) -> None:
        """Set a plain field (last write wins)."""
        self.check_key(key)
        if key in _REDUCER_FIELDS:
            raise PersistenceError(
                f"{key!r} is a reducer field: write it through its module "
                "(memory.append/replace, mapreduce.append_result/reset_results)"
            )
        self._writes[key] = value

    # ------------------------------------------------------------------ messages

    def state_messages(self) -> list[BaseMessage]:
        """The restored history (as LangGraph gave it to the node)."""
        return list(self._state.get(MESSAGES) or ())

    def messages(self) -> list[BaseMessage]:
        """The history with this node's pending append/replace applied."""
        base = self._replacement if self._replacement is not None else self.state_messages()
        if not self._appended:
            return list(base)
        from langgraph.graph.message import add_messages

        left: list[Any] = list(base)
        right: list[Any] = list(self._appended)
        merged: list[BaseMessage] = add_messages(left, right)  # type: ignore[assignment]
        return list(merged)

    def appended_messages(self) -> tuple[BaseMessage, ...]:
        """This node's pending appends, with the ids they will be stored under."""
        return tuple(self._appended)

    def append_messages(self, delta: Sequence[BaseMessage], *, force_ids: bool = False) -> None:
        """Append ``delta`` (stable ids for messages without one)."""
        self.check_key(MESSAGES)
        checked = _check_history_messages(delta, argument="delta")
        current = self.messages()
        anchor = current[-1].id if current else None
        if current and not anchor:
            # A history without ids (built outside LangGraph's reducer): chain ids through
            # it, so the anchor depends on every earlier message and their positions.
            anchor = with_stable_ids(current, anchor=None)[-1].id
        self._appended.extend(with_stable_ids(checked, anchor=anchor, force=force_ids))

    def replace_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Replace the whole history with ``messages``."""
        self.check_key(MESSAGES)
        if self._appended:
            raise PersistenceError(
                "memory.replace() after memory.append() in the same node would drop the "
                "appended delta: call replace(all) first, then append(delta)"
            )
        checked = _check_history_messages(messages, argument="messages")
        self._replacement = with_stable_ids(checked, anchor=None)

    # ------------------------------------------------------------------ mapreduce results

    def results(self) -> list[MapReduceResult]:
        """The results with this node's pending append/reset applied."""
        base: list[MapReduceResult] = (
            [] if self._results_reset else list(self._state.get(RESULTS) or ())
        )
        return merge_results(base, list(self._results))

    def append_results(self, items: Iterable[Mapping[str, Any]]) -> None:
        """Append results (de-duplicated by task id by the reducer)."""
        self.check_key(RESULTS)
        for item in items:
            result_key(item)
            self._results = merge_results(self._results, [dict(item)])

    def reset_results(self) -> None:
        """Clear the results (``Overwrite([])``); later appends of this node follow it."""
        self.check_key(RESULTS)
        self._results = []
        self._results_reset = True

    # ------------------------------------------------------------------ output

    def to_patch(self) -> dict[str, Any]:
        """The single update dict of this node."""
        patch: dict[str, Any] = dict(self._writes)
        if self._replacement is not None:
            from langgraph.graph.message import REMOVE_ALL_MESSAGES

            patch[MESSAGES] = [
                RemoveMessage(id=REMOVE_ALL_MESSAGES),
                *self._replacement,
                *self._appended,
            ]
        elif self._appended:
            patch[MESSAGES] = list(self._appended)
        if self._results_reset:
            from langgraph.types import Overwrite

            patch[RESULTS] = Overwrite(list(self._results))
        elif self._results:
            patch[RESULTS] = list(self._results)
        return patch


__all__ = ["PatchBuffer", "UnknownStateKeyError"]
