"""`PolicyEngine`: plan → collect → budget → compose, for one policy
(see docs/design.md, 'Budget and overflow' and 'Invariants of a composition').

The engine holds only immutable data (the policy, default services, one `LayerPlan`
per process computed up front), so one engine can serve many threads and tasks. Each
call: check the query path and ``contexts=`` → run the collectors of the process's
block layers (concurrently under `acompose`) → compose with the pure
`ctxpolicy.compose.compose_layers` → when the history overflow is ``summarize``, call the
``summarizer`` service on the dropped prefix and the previous ``compression__context``,
and compose again with the new summary.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import sys
import threading
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, overload

from ctxpolicy.collectors.base import CollectRequest
from ctxpolicy.compose import (
    Composition,
    SummarizeRequest,
    check_contexts,
    check_query_path,
    compose_layers,
    message_factory,
)
from ctxpolicy.errors import CollectorError
from ctxpolicy.layers import CHECKPOINT_MESSAGES, COMPRESSION, QUERY
from ctxpolicy.plan import LayerPlan, PlannedLayer, plan_layers
from ctxpolicy.report import ComposeReport, LayerCut, LayerSource, SkippedCollector

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

    from ctxpolicy.blocks.inline import QueryReference
    from ctxpolicy.collectors.run import CollectOutcome
    from ctxpolicy.policy import Policy
    from ctxpolicy.recall.recaller import Recaller, RecallRequest, RecallResult

#: The collector type filled after the history is cut (see `PolicyEngine._recall_steps`).
RECALL = "recall"

#: Summaries made per call at most; later overflow falls back to ``drop_oldest``.
MAX_SUMMARY_PASSES = 3
#: The service name of the history summarizer.
SUMMARIZER_SERVICE = "summarizer"

SUMMARY_INSTRUCTIONS = (
    "You maintain the running summary of a conversation between a user, an AI agent and "
    "its tools. Merge the previous summary with the older messages below into one concise "
    "summary that keeps every fact, decision, open task, identifier and tool result the "
    "agent may still need. Reply with the summary text only."
)


@dataclass(frozen=True, slots=True)
class ComposeResult:
    """The result of one `PolicyEngine.compose` call.

    Attributes:
        messages: The model's input messages, in policy order.
        report: Per layer: included or not and why, tokens, cap, cuts.
        persist: ``{layer: text}`` for ``persist: true`` layers whose value this call
            produced (e.g. a new ``compression__context`` summary); never a runtime-only
            layer, never a value merely read back from state.
        compacted_history: When a ``summarize`` overflow folded an old prefix into
            ``compression__context``: the history the state should now hold
            (``memory.replace(...)``); None otherwise.
    """

    messages: list[BaseMessage]
    report: ComposeReport
    persist: dict[str, str]
    compacted_history: tuple[BaseMessage, ...] | None = None


@dataclass(frozen=True, slots=True)
class _Call:
    """Everything one compose call needs after validation (immutable)."""

    plan: LayerPlan
    system_prompt: str
    state: Mapping[str, Any]
    history: Sequence[BaseMessage]
    query: str | None
    overrides: Mapping[str, str | None]
    requests: tuple[CollectRequest, ...]
    services: Mapping[str, Any]
    recall_layers: tuple[PlannedLayer, ...] = ()
    recall_query: str | None = None
    thread_id: str | None = None
    references: tuple[QueryReference, ...] = ()
    #: (stored message, its prompt copy): the input with references expanded, dismissed
    #: messages shown as placeholders; a compacted history maps back to the stored ones
    swapped_input: tuple[tuple[BaseMessage, BaseMessage], ...] = ()
    #: dismissals applied to the history (``checkpoint_messages.curate``), for the report
    curated: tuple[str, ...] = ()
    #: the history as stored (``history`` may show the input expanded)
    source_history: Sequence[BaseMessage] | None = None


@dataclass(frozen=True, slots=True)
class RecallStep:
    """A recall layer to fill once the history's cut is known (yielded by the compose loop).

    Attributes:
        layer: The recall layer.
        request: What its `Recaller` needs.
    """

    layer: PlannedLayer
    request: RecallRequest


class MessagesView(Sequence["BaseMessage"]):
    """A read-only view of a caller's history that converts items only when read.

    ``checkpoint_messages`` (or ``state["messages"]``) is neither copied nor checked
    whole: composing reads the newest messages and stops once the budget is full, so
    its cost grows with what is kept, not with the length of the history. An item that
    is not a ``BaseMessage`` (a dict, a ``(role, content)`` pair, ...) is converted with
    langchain-core's ``convert_to_messages`` when it is read (once; the result is kept),
    and an item that cannot be converted raises ``ValueError`` naming its index.

    The caller's list must not change while a call runs (the engine reads it, it never
    writes it).
    """

    __slots__ = ("_argument", "_converted", "_items", "_message_type")

    def __init__(self, items: Sequence[Any], *, argument: str) -> None:
        from langchain_core.messages import BaseMessage

        self._items = items
        self._argument = argument
        self._converted: dict[int, BaseMessage] = {}
        self._message_type = BaseMessage

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> BaseMessage: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[BaseMessage, ...]: ...

    def __getitem__(self, index: int | slice) -> BaseMessage | tuple[BaseMessage, ...]:
        if isinstance(index, slice):
            items = self._items
            message_type = self._message_type
            return tuple(
                item if isinstance(item, message_type) else self._convert(i, item)
                for i, item in zip(range(*index.indices(len(items))), items[index], strict=True)
            )
        item = self._items[index]
        if isinstance(item, self._message_type):
            return item
        return self._convert(index.__index__(), item)

    def _convert(self, index: int, item: Any) -> BaseMessage:
        if index < 0:
            index += len(self._items)
        found = self._converted.get(index)
        if found is not None:
            return found
        from langchain_core.messages import convert_to_messages

        try:
            (message,) = convert_to_messages([item])
        except Exception as exc:  # langchain raises ValueError/NotImplementedError/KeyError
            raise ValueError(
                f"{self._argument}[{index}]: not a message ({type(item).__name__}): {exc}"
            ) from exc
        self._converted[index] = message
        return message

    def __iter__(self) -> Iterator[BaseMessage]:
        for i in range(len(self._items)):
            yield self[i]

    def __reversed__(self) -> Iterator[BaseMessage]:
        for i in range(len(self._items) - 1, -1, -1):
            yield self[i]


def _as_messages(value: Any, *, argument: str) -> Sequence[BaseMessage]:
    """The history argument as a sequence of messages, without copying or walking it.

    Raises:
        TypeError: ``value`` is not a sequence (or is a string).
    """
    if value is None:
        return ()
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise TypeError(f"{argument} must be a sequence of messages, got {type(value).__name__}")
    if isinstance(value, MessagesView) or not value:
        return value
    return MessagesView(value, argument=argument)


def _text_of(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    parts = [
        p if isinstance(p, str) else str(p.get("text", ""))
        for p in content
        if isinstance(p, str) or p.get("type") == "text"
    ]
    return "".join(parts)


def _transcript(messages: Sequence[BaseMessage]) -> str:
    lines: list[str] = []
    for message in messages:
        line = f"{message.type}: {_text_of(message)}"
        for call in getattr(message, "tool_calls", None) or ():
            line += f"\n  tool call {call.get('name')}({call.get('args')})"
        lines.append(line)
    return "\n".join(lines)


def summary_prompt(
    dropped: Sequence[BaseMessage], previous_summary: str | None
) -> list[BaseMessage]:
    """The messages sent to a chat-model summarizer."""
    from langchain_core.messages import HumanMessage, SystemMessage

    body = (
        f"Previous summary:\n{previous_summary or '(none)'}\n\n"
        f"Older messages to fold in:\n{_transcript(dropped)}"
    )
    return [SystemMessage(SUMMARY_INSTRUCTIONS), HumanMessage(body)]


def _check_thread_id(thread_id: object) -> None:
    if thread_id is not None and not isinstance(thread_id, str):
        raise TypeError(f"thread_id must be a str or None, got {type(thread_id).__name__}")


def _kept_from(history: Sequence[BaseMessage], kept: Sequence[BaseMessage]) -> int:
    """Position in ``history`` of the oldest message of ``kept`` (its cut, repairs aside).

    ``kept`` is a suffix of ``history`` less the messages a repair removed, so the cut
    is at most ``len(history) - len(kept)``; walk back from there to the first kept one.
    """
    if not kept:
        return len(history)
    first = kept[0]
    for position in range(len(history) - len(kept), -1, -1):
        if history[position] is first:
            return position
    return len(history) - len(kept)  # pragma: no cover - kept comes from history


def _recall_note(result: RecallResult) -> str:
    return (
        f"recall: thread {result.thread!r}, {result.indexed} new message(s) indexed, "
        f"{len(result.units)} unit(s) recalled"
    )


def _langgraph_thread_id() -> str | None:
    """The ``thread_id`` of the LangGraph run this call is part of, if any."""
    if "langgraph.config" not in sys.modules:
        return None
    from langgraph.config import get_config

    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:  # not inside a runnable
        return None
    found = configurable.get("thread_id")
    return None if found is None else str(found)


def _is_runnable(value: Any) -> bool:
    from langchain_core.runnables import Runnable

    return isinstance(value, Runnable)


def _summary_text(value: Any) -> str:
    text = _text_of(value) if hasattr(value, "content") else value
    if not isinstance(text, str) or not text.strip():
        raise CollectorError(
            COMPRESSION, f"the summarizer returned {type(value).__name__}, not a non-empty text"
        )
    return text


def _summarizer(services: Mapping[str, Any]) -> Any:
    found = services.get(SUMMARIZER_SERVICE)
    if found is None:
        raise CollectorError(
            COMPRESSION,
            "checkpoint_messages overflow 'summarize' needs a 'summarizer' service (a chat "
            "model, or a callable (messages, previous_summary) -> str)",
        )
    return found


def summarize_history(
    summarizer: Any, dropped: Sequence[BaseMessage], previous_summary: str | None
) -> str:
    """Call ``summarizer`` (chat model or callable) on ``dropped`` and the old summary.

    Raises:
        CollectorError: the summarizer failed or returned no text.
    """
    try:
        if _is_runnable(summarizer):
            value = summarizer.invoke(summary_prompt(dropped, previous_summary))
        else:
            value = summarizer(tuple(dropped), previous_summary)
            if inspect.isawaitable(value):
                from ctxpolicy.collectors.run import _run_awaitable

                value = _run_awaitable(value)
    except CollectorError:
        raise
    except Exception as exc:
        raise CollectorError(COMPRESSION, f"summarizer failed: {exc!r}") from exc
    return _summary_text(value)


async def asummarize_history(
    summarizer: Any, dropped: Sequence[BaseMessage], previous_summary: str | None
) -> str:
    """Async `summarize_history` (``ainvoke`` for chat models; awaits coroutines)."""
    try:
        if _is_runnable(summarizer):
            value = await summarizer.ainvoke(summary_prompt(dropped, previous_summary))
        else:
            value = summarizer(tuple(dropped), previous_summary)
            if inspect.isawaitable(value):
                value = await value
    except CollectorError:
        raise
    except Exception as exc:
        raise CollectorError(COMPRESSION, f"summarizer failed: {exc!r}") from exc
    return _summary_text(value)


class _SwappedHistory(Sequence["BaseMessage"]):
    """``history`` with the message at ``index`` replaced, without copying the history."""

    __slots__ = ("_history", "_index", "_message")

    def __init__(self, history: Sequence[BaseMessage], index: int, message: BaseMessage) -> None:
        self._history, self._index, self._message = history, index, message

    def __len__(self) -> int:
        return len(self._history)

    @overload
    def __getitem__(self, index: int) -> BaseMessage: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[BaseMessage, ...]: ...

    def __getitem__(self, index: int | slice) -> BaseMessage | tuple[BaseMessage, ...]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self._history))))
        position = index.__index__()
        if position < 0:
            position += len(self._history)
        return self._message if position == self._index else self._history[index]


def _curated_history(
    policy: Policy, history: Sequence[BaseMessage]
) -> tuple[Sequence[BaseMessage], tuple[str, ...], list[tuple[BaseMessage, BaseMessage]]]:
    """``history`` with the ``dismiss_memory`` dismissals recorded in it applied.

    Only with ``layers.checkpoint_messages.curate: true``. A dismissal is a
    ``dismiss_memory`` tool call answered by a ToolMessage that is not an error; it
    lives in the history, so it survives every checkpoint restore. Returns the curated
    history, the dismissed targets and the (stored, shown) pairs.
    """
    spec = policy.layers.get(CHECKPOINT_MESSAGES)
    if not history or spec is None or not spec.curate:
        return history, (), []
    from ctxpolicy.blocks.curation import curated_by_tool_calls

    curated, log = curated_by_tool_calls(history)
    pairs = [(a, b) for a, b in zip(history, curated, strict=True) if a is not b]
    return curated, tuple(dict.fromkeys(r.target_id for r in log.records)), pairs


def _curation_note(targets: Sequence[str]) -> str:
    return (
        f"curated: {len(targets)} dismissed message(s) shown as placeholders ({', '.join(targets)})"
    )


def _expand_query_references(
    policy: Policy, plan: LayerPlan, query: str
) -> tuple[str, tuple[QueryReference, ...]]:
    """``query`` with the inline references of ``layers.query.references`` resolved.

    Raises:
        CollectorError: (``on_error: fail``) a reference escapes the root or points at
            nothing; the message names it.
    """
    from ctxpolicy.blocks.errors import BlocksError
    from ctxpolicy.blocks.inline import expand_query
    from ctxpolicy.blocks.sandbox import resolve_root
    from ctxpolicy.tokens import get_tokenizer

    spec = policy.layers[QUERY].references
    assert spec is not None
    base = policy.layer_base_dir(QUERY)

    def root() -> Path:
        if base is None:
            raise BlocksError(
                f"references root {spec.root!r} is relative to the policy file, but this "
                "policy was not loaded from a file"
            )
        return resolve_root(spec.root, base_dir=base)

    try:
        expanded = expand_query(
            query, root, on_error=spec.on_error, count_tokens=get_tokenizer(plan.tokenizer).count
        )
    except BlocksError as exc:
        raise CollectorError(QUERY, str(exc)) from exc
    return expanded.text, expanded.references


class PolicyEngine:
    """Composes the input messages of every LLM call from one policy.

    Args:
        policy: A validated `Policy` (e.g. from `ctxpolicy.load_policy`).
        services: Runtime services by name (retrievers, ``summarizer``, memory, ...);
            a call's ``services=`` adds to and overrides them.

    The engine is immutable after construction and safe to share across threads.
    """

    __slots__ = (
        "_memories",
        "_plans",
        "_policy",
        "_recall_lock",
        "_recallers",
        "_services",
        "_tiered_services",
    )

    def __init__(self, policy: Policy, *, services: Mapping[str, Any] | None = None) -> None:
        from ctxpolicy.policy import Policy

        if not isinstance(policy, Policy):
            raise TypeError(f"policy must be a ctxpolicy.Policy, got {type(policy).__name__}")
        self._policy = policy
        self._services: Mapping[str, Any] = MappingProxyType(dict(services or {}))
        self._plans: Mapping[str, LayerPlan] = MappingProxyType(
            {name: plan_layers(policy, name) for name in policy.processes}
        )
        # one index per recall layer, opened on first use and kept for later calls
        self._recallers: dict[str, Recaller] = {}
        # memory layers with ``tiers`` and no service: one memory per (layer, thread)
        self._memories: dict[tuple[str, str], Any] = {}
        # layer -> its memory service name, for the memory layers that declare ``tiers``
        # (decided once here: every compose asks, see `_owns_memory`)
        self._tiered_services: Mapping[str, str] = MappingProxyType(
            {
                name: spec.service
                for name, spec in (
                    (name, policy.layer(name).collector) for name in policy.block_layers
                )
                if spec is not None and spec.type == "memory" and spec.tiers is not None
            }
        )
        self._recall_lock = threading.Lock()

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        *,
        enable_share_context: bool | None = None,
        services: Mapping[str, Any] | None = None,
    ) -> PolicyEngine:
        """Load, validate and resolve a policy file, and build an engine on it.

        Raises:
            PolicyValidationError: the file is invalid (holds every issue).
        """
        from ctxpolicy.loading import load_policy

        policy = load_policy(path, enable_share_context=enable_share_context)
        return cls(policy, services=services)

    @property
    def policy(self) -> Policy:
        """The effective policy."""
        return self._policy

    def with_context_window(self, context_window: int) -> PolicyEngine:
        """This engine with another ``model.context_window``, sharing its recall indexes.

        For callers that send tokens outside the messages (tool schemas bound to the
        model): every ratio then applies to the smaller budget, and the recall layers
        keep their warm indexes (one per layer, shared by both engines).

        Raises:
            TypeError: ``context_window`` is not an integer.
            ValueError: ``context_window`` is not positive.
        """
        if isinstance(context_window, bool) or not isinstance(context_window, int):
            raise TypeError(f"context_window must be an int, got {context_window!r}")
        if context_window <= 0:
            raise ValueError(f"context_window must be > 0, got {context_window}")
        model = self._policy.model.model_copy(update={"context_window": context_window})
        other = PolicyEngine(
            self._policy.model_copy(update={"model": model}), services=self._services
        )
        other._recallers = self._recallers  # one index per recall layer, shared
        other._memories = self._memories  # same layers: same tiered memories
        other._recall_lock = self._recall_lock
        return other

    @property
    def services(self) -> Mapping[str, Any]:
        """The default services (read-only)."""
        return self._services

    def plan(self, process: str | None = None) -> LayerPlan:
        """The `LayerPlan` of ``process`` (default: the policy's ``default_process``).

        Raises:
            UnknownProcessError: the policy does not declare ``process``.
        """
        name = self._policy.default_process if process is None else process
        found = self._plans.get(name)
        if found is None:
            self._policy.process(name)  # raises UnknownProcessError
            return plan_layers(self._policy, name)  # pragma: no cover - process exists
        return found

    # ------------------------------------------------------------------ preparation

    def _merged_services(self, services: Mapping[str, Any] | None) -> Mapping[str, Any]:
        if not services:
            return self._services
        return MappingProxyType({**self._services, **services})

    def _requests(
        self,
        plan: LayerPlan,
        *,
        state: Mapping[str, Any],
        query: str | None,
        services: Mapping[str, Any],
        skip: Mapping[str, Any],
    ) -> tuple[CollectRequest, ...]:
        from ctxpolicy.tokens import get_tokenizer

        tok = get_tokenizer(plan.tokenizer)
        view = MappingProxyType(state) if isinstance(state, dict) else state
        requests: list[CollectRequest] = []
        for layer in plan.layers:
            if layer.kind != "block" or layer.collector is None or layer.name in skip:
                continue
            if layer.collector.type == RECALL:
                continue
            overhead = tok.count_message(message_factory(layer.role)(""))
            requests.append(
                CollectRequest(
                    layer=layer.name,
                    spec=layer.collector,
                    policy=self._policy,
                    process=plan.process,
                    state=view,
                    query=query,
                    services=services,
                    cap_tokens=max(0, layer.cap - overhead),
                    count_tokens=tok.count,
                    base_dir=self._policy.layer_base_dir(layer.name),
                    vars=self._policy.vars,
                )
            )
        return tuple(requests)

    def _prepare(
        self,
        *,
        process: str | None,
        system_prompt: str,
        state: Mapping[str, Any] | None,
        query: str | None,
        contexts: Mapping[str, str | None] | None,
        checkpoint_messages: Sequence[Any] | None,
        services: Mapping[str, Any] | None,
        thread_id: str | None = None,
    ) -> _Call:
        plan = self.plan(process)
        if state is None:
            state = {}
        if not isinstance(state, Mapping):
            raise TypeError(f"state must be a mapping, got {type(state).__name__}")
        if query is not None and not isinstance(query, str):
            raise TypeError(f"query must be a str or None, got {type(query).__name__}")
        overrides = check_contexts(plan, contexts)
        if plan.includes(CHECKPOINT_MESSAGES):
            if checkpoint_messages is not None:
                history = _as_messages(checkpoint_messages, argument="checkpoint_messages")
            else:
                history = _as_messages(state.get("messages"), argument="state['messages']")
        else:
            history = ()
        source_history = history
        history, curated, swapped = _curated_history(self._policy, history)
        input_message = check_query_path(plan, query, history)
        effective_query = query if input_message is None else _text_of(input_message)
        references: tuple[QueryReference, ...] = ()
        spec = self._policy.layers.get(QUERY)
        if spec is not None and spec.references is not None and effective_query:
            text, references = _expand_query_references(self._policy, plan, effective_query)
            if text != effective_query and input_message is None:
                query = text
            elif text != effective_query and input_message is not None:
                # the prompt gets the expanded copy; state keeps the stored message
                shown = input_message.model_copy(update={"content": text})
                stored = next((a for a, b in swapped if b is input_message), input_message)
                swapped.append((stored, shown))
                index = next(
                    i for i in range(len(history) - 1, -1, -1) if history[i] is input_message
                )
                history = _SwappedHistory(history, index, shown)
        merged = self._merged_services(services)
        recall_layers = tuple(
            layer
            for layer in plan.layers
            if layer.collector is not None
            and layer.collector.type == RECALL
            and layer.name not in overrides
        )
        _check_thread_id(thread_id)
        owned = [
            name
            for name in self._tiered_services
            if plan.includes(name)
            and name not in overrides
            and self._owns_memory(name, merged, state)
        ]
        if (recall_layers or owned) and thread_id is None:
            thread_id = _langgraph_thread_id()
        if owned:
            merged = self._with_owned_memories(owned, merged, history, thread_id=thread_id)
        requests = self._requests(
            plan, state=state, query=effective_query, services=merged, skip=overrides
        )
        return _Call(
            plan=plan,
            system_prompt=system_prompt,
            state=state,
            history=history,
            query=query,
            overrides=overrides,
            requests=requests,
            services=merged,
            recall_layers=recall_layers,
            recall_query=effective_query,
            thread_id=thread_id,
            references=references,
            swapped_input=tuple(swapped),
            source_history=source_history,
            curated=curated,
        )

    # ------------------------------------------------------------------ collection

    def _collected(
        self, call: _Call, outcomes: Sequence[CollectOutcome]
    ) -> tuple[dict[str, str | None], dict[str, LayerSource], list[SkippedCollector]]:
        values: dict[str, str | None] = {}
        sources: dict[str, LayerSource] = {}
        skipped: list[SkippedCollector] = []
        for outcome in outcomes:
            if outcome.error is not None:
                skipped.append(SkippedCollector(outcome.layer, outcome.collector, outcome.error))
                continue
            values[outcome.layer] = outcome.text
            if outcome.text:
                sources[outcome.layer] = "collector"
        for key, value in call.overrides.items():
            values[key] = value
            sources[key] = "contexts"
        return values, sources, skipped

    def collect(
        self,
        *,
        process: str | None = None,
        state: Mapping[str, Any] | None = None,
        query: str | None = None,
        services: Mapping[str, Any] | None = None,
    ) -> dict[str, str]:
        """Run the collectors of ``process``'s block layers.

        Returns:
            ``{layer: text}`` for every layer whose collector produced text (keys end
            in ``__context``). Collectors skipped with ``on_error: skip`` are absent.

        Raises:
            CollectorError: a collector failed with ``on_error: fail``.
        """
        from ctxpolicy.collectors.run import run_collectors

        plan = self.plan(process)
        state = {} if state is None else state
        if query is None and plan.query_path == "checkpoint":
            history = _as_messages(state.get("messages"), argument="state['messages']")
            last = next((m for m in reversed(history) if m.type == "human"), None)
            query = None if last is None else _text_of(last)
        requests = self._requests(
            plan, state=state, query=query, services=self._merged_services(services), skip={}
        )
        return {o.layer: o.text for o in run_collectors(requests) if o.text}

    # ------------------------------------------------------------------ composition

    def _pass(
        self,
        call: _Call,
        *,
        history: Sequence[BaseMessage],
        values: Mapping[str, str | None],
        sources: Mapping[str, LayerSource],
        skipped: Sequence[SkippedCollector],
        request_summary: bool,
        notes: Mapping[str, Sequence[str]] | None = None,
    ) -> Composition:
        return compose_layers(
            call.plan,
            system_prompt=call.system_prompt,
            checkpoint_messages=history,
            contexts=values,
            query=call.query,
            sources=sources,
            skipped=skipped,
            notes=notes,
            request_summary=request_summary,
            reserved=[layer.name for layer in call.recall_layers],
        )

    def _can_summarize(self, plan: LayerPlan) -> tuple[bool, str | None]:
        history = plan.get(CHECKPOINT_MESSAGES)
        if history is None or history.overflow != "summarize":
            return False, None
        if not plan.includes(COMPRESSION):
            return False, (
                f"checkpoint_messages overflow 'summarize' but process {plan.process} does "
                f"not include {COMPRESSION}: fell back to drop_oldest"
            )
        return True, None

    def _result(
        self,
        call: _Call,
        final: Composition,
        *,
        values: Mapping[str, str | None],
        sources: Mapping[str, LayerSource],
        summary: str | None,
        summary_cuts: Sequence[LayerCut],
        compacted: Sequence[BaseMessage] | None,
        warning: str | None,
        recalled: Mapping[str, RecallResult] | None = None,
    ) -> ComposeResult:
        report = final.report
        if recalled:
            report = dataclasses.replace(
                report,
                layers=tuple(
                    dataclasses.replace(
                        layer,
                        recalled=recalled[layer.name].units,
                        notes=(*layer.notes, _recall_note(recalled[layer.name])),
                    )
                    if layer.name in recalled
                    else layer
                    for layer in report.layers
                ),
            )
        if summary is not None or warning is not None:
            layers = tuple(
                dataclasses.replace(layer, cuts=(*summary_cuts, *layer.cuts))
                if layer.name == CHECKPOINT_MESSAGES
                else layer
                for layer in report.layers
            )
            warnings = (*report.warnings, warning) if warning else report.warnings
            report = dataclasses.replace(
                report,
                layers=layers,
                warnings=warnings,
                summarized=report.summarized or summary is not None,
            )
        if call.references:
            report = self._with_references(report, call.references)
        if call.curated:
            report = dataclasses.replace(
                report,
                layers=tuple(
                    dataclasses.replace(
                        layer,
                        notes=(*layer.notes, _curation_note(call.curated)),
                    )
                    if layer.name == CHECKPOINT_MESSAGES
                    else layer
                    for layer in report.layers
                ),
            )
        if compacted is not None and call.swapped_input:
            # never write an expanded query or a placeholder to state
            stored_of = {id(shown): stored for stored, shown in call.swapped_input}
            compacted = [stored_of.get(id(m), m) for m in compacted]
        persist: dict[str, str] = {}
        for layer in call.plan.layers:
            if layer.kind != "block" or not layer.persist:
                continue
            value = values.get(layer.name)
            produced = sources.get(layer.name) in ("summary", "contexts") or (
                sources.get(layer.name) == "collector"
                and layer.collector is not None
                and layer.collector.type != "state"
            )
            if produced and value and value != call.state.get(layer.name):
                persist[layer.name] = value
        persisted_summary = COMPRESSION in persist and summary is not None
        return ComposeResult(
            messages=list(final.messages),
            report=report,
            persist=persist,
            compacted_history=(
                tuple(compacted) if persisted_summary and compacted is not None else None
            ),
        )

    @staticmethod
    def _with_references(
        report: ComposeReport, references: tuple[QueryReference, ...]
    ) -> ComposeReport:
        """The report with the query's inline references on the query layer."""
        names = [layer.name for layer in report.layers]
        target = QUERY if QUERY in names else CHECKPOINT_MESSAGES
        notes = tuple(
            f"reference {r.ref} skipped (on_error: skip): {r.error}"
            for r in references
            if r.error is not None
        )
        return dataclasses.replace(
            report,
            layers=tuple(
                dataclasses.replace(layer, references=references, notes=(*layer.notes, *notes))
                if layer.name == target
                else layer
                for layer in report.layers
            ),
        )

    def compose(
        self,
        *,
        process: str | None = None,
        system_prompt: str,
        state: Mapping[str, Any] | None = None,
        query: str | None = None,
        contexts: Mapping[str, str | None] | None = None,
        checkpoint_messages: Sequence[Any] | None = None,
        services: Mapping[str, Any] | None = None,
        thread_id: str | None = None,
    ) -> ComposeResult:
        """Compose the input messages of one call.

        Args:
            process: The process (default: the policy's ``default_process``).
            system_prompt: The agent's private prompt.
            state: The Blackboard (read-only): collectors read it; its ``messages``
                are the history unless ``checkpoint_messages`` is given.
            query: The input of a ``query: runtime`` process (forbidden for
                ``query: checkpoint`` processes, whose input is the history's last
                HumanMessage).
            contexts: Runtime values of ``__context`` layers; they replace those
                layers' collectors.
            checkpoint_messages: Overrides ``state["messages"]``; ignored when the
                process takes no history.
            services: Extra or overriding services for this call.
            thread_id: The conversation's id for recall layers (default: the LangGraph
                ``thread_id`` when called inside a graph, else derived from the
                history's first message).

        Returns:
            The `ComposeResult`.

        Raises:
            QueryPathError: the query is missing, forbidden or sent twice.
            BudgetExceededError: a layer with overflow ``error`` does not fit.
            CollectorError: a collector with ``on_error: fail`` (or the summarizer) failed.
            UnknownProcessError: the policy does not declare ``process``.
            ValueError: a bad ``contexts`` key.
        """
        from ctxpolicy.collectors.run import run_collectors

        call = self._prepare(
            process=process,
            system_prompt=system_prompt,
            state=state,
            query=query,
            contexts=contexts,
            checkpoint_messages=checkpoint_messages,
            services=services,
            thread_id=thread_id,
        )
        collected = self._collected(call, run_collectors(call.requests))
        steps = self._summarize_steps(call, *collected)
        try:
            request = next(steps)
            while True:
                if isinstance(request, RecallStep):
                    request = steps.send(self._run_recall(request, call.services))
                    continue
                summarizer = _summarizer(call.services)
                summary = summarize_history(summarizer, request.dropped, request.previous_summary)
                request = steps.send(summary)
        except StopIteration as done:
            result: ComposeResult = done.value
            return result

    def _summarize_steps(
        self,
        call: _Call,
        values: dict[str, str | None],
        sources: dict[str, LayerSource],
        skipped: Sequence[SkippedCollector],
    ) -> Generator[SummarizeRequest | RecallStep, Any, ComposeResult]:
        """Compose, yielding each history prefix to summarize and receiving its summary.

        The one place the ``summarize`` overflow rule loops (at most
        `MAX_SUMMARY_PASSES` summaries); `compose` and `acompose` only drive it, with a
        sync or an async summarizer call, so the engine's own logic stays free of I/O.
        """
        can, warning = self._can_summarize(call.plan)
        skipped = list(skipped)
        history: Sequence[BaseMessage] = call.history
        summary: str | None = None
        cuts: list[LayerCut] = []
        passes = 0
        while True:
            composition = self._pass(
                call,
                history=history,
                values=values,
                sources=sources,
                skipped=skipped,
                request_summary=can and passes < MAX_SUMMARY_PASSES,
            )
            request = composition.summarize
            if request is None:
                break
            passes += 1
            summary = yield request
            history = self._fold(
                request,
                summary=summary,
                values=values,
                sources=sources,
                cuts=cuts,
                composition=composition,
            )
        recalled: dict[str, RecallResult] = {}
        if call.recall_layers:
            first = composition
            steps: dict[str, RecallStep] = {}
            for step in self._recall_steps(call, first, wide=True):
                outcome = yield step
                if isinstance(outcome, SkippedCollector):
                    skipped.append(outcome)
                    continue
                steps[step.layer.name] = step
                recalled[step.layer.name] = outcome
                values[step.layer.name] = outcome.text
                if outcome.text:
                    sources[step.layer.name] = "collector"
            composition = self._pass(
                call,
                history=history,
                values=values,
                sources=sources,
                skipped=skipped,
                request_summary=False,
            )
            if self._recall_moved(composition, first, steps):
                # the wide cap was not all there after all: recall within the held caps
                for step in self._recall_steps(call, first, wide=False):
                    if step.layer.name not in steps:
                        continue
                    repeat = dataclasses.replace(step.request, repeat=True)
                    outcome = yield RecallStep(step.layer, repeat)
                    if isinstance(outcome, SkippedCollector):
                        skipped.append(outcome)
                        continue
                    recalled[step.layer.name] = outcome
                    values[step.layer.name] = outcome.text
                composition = self._pass(
                    call,
                    history=history,
                    values=values,
                    sources=sources,
                    skipped=skipped,
                    request_summary=False,
                )
        return self._result(
            call,
            composition,
            values=values,
            sources=sources,
            summary=summary,
            summary_cuts=cuts,
            compacted=history if summary is not None else None,
            warning=warning,
            recalled=recalled,
        )

    @staticmethod
    def _wide_cap(call: _Call, composition: Composition, name: str) -> int | None:
        """The cap a lone recall layer can take without moving anything else.

        The history is cut newest-first in whole units, so the prompt often has room
        that nothing uses. With ``redistribute`` and one recall layer, recall may take
        it: every other layer keeps what the composer gives it first (its demand up to
        its own cap) or what it uses, whichever is more; recall gets the rest.
        """
        if not call.plan.redistribute or len(call.recall_layers) != 1:
            return None
        kept = 0
        for layer in composition.report.layers:
            if layer.included and layer.name != name:
                kept += max(min(layer.demand, layer.base_cap or 0), layer.tokens)
        return call.plan.available_tokens - kept

    @staticmethod
    def _recall_moved(
        composition: Composition, first: Composition, steps: Mapping[str, RecallStep]
    ) -> bool:
        """Whether a wide recall layer got cut or moved the history's cut."""
        if len(composition.kept_history) != len(first.kept_history):
            return True
        return any(composition.report.layer(name).cuts for name in steps)

    def _recall_steps(
        self, call: _Call, composition: Composition, *, wide: bool
    ) -> Iterator[RecallStep]:
        """One `RecallStep` per recall layer, once the history's cut is known.

        The recall layers' caps were held for them (``reserved``), so giving them text
        cannot move the history's cut; a unit from a kept message is never recalled.
        With ``wide`` a lone recall layer asks for the room the others leave
        (`_wide_cap`).
        """
        from ctxpolicy.recall.recaller import RecallRequest
        from ctxpolicy.tokens import get_tokenizer

        tok = get_tokenizer(call.plan.tokenizer)
        names = {layer.name for layer in call.recall_layers}
        prompt_text = "\n".join(
            text for name, text in composition.contexts.items() if name not in names
        )
        kept_from = _kept_from(call.history, composition.kept_history)
        for layer in call.recall_layers:
            report = composition.report.layer(layer.name)
            overhead = tok.count_message(message_factory(layer.role)(""))
            cap = report.cap if report.cap is not None else layer.cap
            if wide:
                cap = max(cap, self._wide_cap(call, composition, layer.name) or 0)
            yield RecallStep(
                layer,
                RecallRequest(
                    layer=layer.name,
                    query=call.recall_query,
                    history=call.history if call.source_history is None else call.source_history,
                    kept_from=kept_from,
                    prompt_text=prompt_text,
                    cap_tokens=max(0, cap - overhead),
                    count_tokens=tok.count,
                    thread_id=call.thread_id,
                    services=call.services,
                ),
            )

    def _owns_memory(
        self, layer: str, services: Mapping[str, Any], state: Mapping[str, Any]
    ) -> bool:
        """Whether the engine keeps layer ``layer``'s memory itself (``tiers``, no service)."""
        service = self._tiered_services.get(layer)
        return service is not None and service not in services and service not in state

    def _with_owned_memories(
        self,
        layers: Sequence[str],
        services: Mapping[str, Any],
        history: Sequence[BaseMessage],
        *,
        thread_id: str | None,
    ) -> Mapping[str, Any]:
        """``services`` plus the memories the engine keeps for ``layers``, under their names."""
        memories: dict[str, Any] = {}
        for name in layers:
            spec = self._policy.layer(name).collector
            assert spec is not None and spec.type == "memory"
            memories[spec.service] = self._owned_memory(name, history, thread_id=thread_id)
        return MappingProxyType({**services, **memories})

    def _owned_memory(
        self, layer: str, history: Sequence[BaseMessage], *, thread_id: str | None
    ) -> Any:
        """The memory the engine keeps for ``layer`` in this conversation, fed its new messages.

        One `TieredMemory` of the layer's ``tiers`` sizes per (layer, thread); messages are
        recorded by id, walking back from the newest to the first one it already holds.
        """
        from ctxpolicy.memory import TieredMemory
        from ctxpolicy.memory.messages import message_key
        from ctxpolicy.recall.ingest import thread_key

        spec = self._policy.layer(layer).collector
        assert spec is not None and spec.type == "memory" and spec.tiers is not None
        key = (layer, thread_key(history, thread_id))
        with self._recall_lock:
            memory = self._memories.get(key)
            if memory is None:
                tiers = spec.tiers
                memory = TieredMemory(l1_size=tiers.l1, l2_size=tiers.l2, l3_size=tiers.l3)
                self._memories[key] = memory
        start = len(history)
        while start > 0 and not memory.has(message_key(history[start - 1])):
            start -= 1
        if start < len(history):
            memory.record(history[start:])
        return memory

    def recaller(self, layer: str, *, services: Mapping[str, Any] | None = None) -> Recaller:
        """The `Recaller` (index) of recall layer ``layer``, opened on first use.

        Raises:
            ValueError: ``layer`` is not a recall layer of the policy.
            CollectorError: the index cannot be opened.
        """
        found = self._recallers.get(layer)
        if found is not None:
            return found
        from ctxpolicy.policy import RecallCollectorSpec
        from ctxpolicy.recall.recaller import Recaller

        spec = self._policy.layer(layer).collector if layer in self._policy.order else None
        if not isinstance(spec, RecallCollectorSpec):
            raise ValueError(  # noqa: TRY004 - a bad layer name, not a bad type
                f"layer {layer!r} of policy {self._policy.name!r} is no recall layer"
            )
        with self._recall_lock:
            found = self._recallers.get(layer)
            if found is None:
                found = Recaller(spec, services=self._merged_services(services))
                self._recallers[layer] = found
        return found

    def _run_recall(
        self, step: RecallStep, services: Mapping[str, Any]
    ) -> RecallResult | SkippedCollector:
        """Run one recall step, honouring the layer's ``on_error``."""
        spec = step.layer.collector
        assert spec is not None
        try:
            return self.recaller(step.layer.name, services=services).recall(step.request)
        except Exception as exc:
            message = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            if spec.on_error == "fail":
                if isinstance(exc, CollectorError):
                    raise
                raise CollectorError(step.layer.name, message) from exc
            return SkippedCollector(step.layer.name, RECALL, message)

    def record(
        self,
        messages: Sequence[Any],
        *,
        thread_id: str | None = None,
        services: Mapping[str, Any] | None = None,
        since: int = 0,
    ) -> int:
        """Record a conversation's messages into the policy's recall indexes and memory.

        Composing indexes the history it is given; a node calls this after the model
        answered, so the answer and its tool calls are searchable at once and the
        memory of every ``memory`` layer (its service's ``record(messages)``, e.g.
        `ctxpolicy.memory.TieredMemory.record`) holds the turn. Both skip messages they
        already have (by id), so recording again after a resume adds nothing.

        Args:
            messages: The whole history (recall positions are session positions).
            thread_id: The conversation (default: the LangGraph ``thread_id`` when
                called inside a graph, else derived from the first message).
            services: Extra or overriding services (the memory objects).
            since: Only ``messages[since:]`` go to the memory services (the turn).

        Returns:
            Messages newly indexed by the recall layers (summed over them).
        """
        history = _as_messages(messages, argument="messages")
        if thread_id is None:
            thread_id = _langgraph_thread_id()
        merged = self._merged_services(services)
        added = 0
        fed: set[int] = set()
        for name in self._policy.block_layers:
            spec = self._policy.layer(name).collector
            if spec is None:
                continue
            if spec.type == RECALL:
                added += self.recaller(name, services=merged).record(history, thread_id=thread_id)
            elif spec.type == "memory":
                if self._owns_memory(name, merged, {}):
                    self._owned_memory(name, history, thread_id=thread_id)  # records new ones
                    continue
                memory = merged.get(spec.service)
                record = getattr(memory, "record", None)
                if record is not None and id(memory) not in fed:
                    fed.add(id(memory))
                    record(list(history[since:]))
        return added

    @staticmethod
    def _fold(
        request: SummarizeRequest,
        *,
        summary: str,
        values: dict[str, str | None],
        sources: dict[str, LayerSource],
        cuts: list[LayerCut],
        composition: Composition,
    ) -> tuple[BaseMessage, ...]:
        """Put ``summary`` into ``compression__context``; return the history kept."""
        values[COMPRESSION] = summary
        sources[COMPRESSION] = "summary"
        layer = composition.report.layer(CHECKPOINT_MESSAGES)
        cuts.extend(c for c in layer.cuts if c.action == "summarized")
        return request.kept

    async def acompose(
        self,
        *,
        process: str | None = None,
        system_prompt: str,
        state: Mapping[str, Any] | None = None,
        query: str | None = None,
        contexts: Mapping[str, str | None] | None = None,
        checkpoint_messages: Sequence[Any] | None = None,
        services: Mapping[str, Any] | None = None,
        thread_id: str | None = None,
    ) -> ComposeResult:
        """Async `compose`: collectors run concurrently (`asyncio.gather`).

        Same arguments, result and errors as `compose`.
        """
        from ctxpolicy.collectors.run import arun_collectors

        call = self._prepare(
            process=process,
            system_prompt=system_prompt,
            state=state,
            query=query,
            contexts=contexts,
            checkpoint_messages=checkpoint_messages,
            services=services,
            thread_id=thread_id,
        )
        collected = self._collected(call, await arun_collectors(call.requests))
        steps = self._summarize_steps(call, *collected)
        try:
            request = next(steps)
            while True:
                if isinstance(request, RecallStep):
                    outcome = await asyncio.to_thread(self._run_recall, request, call.services)
                    request = steps.send(outcome)
                    continue
                summarizer = _summarizer(call.services)
                summary = await asummarize_history(
                    summarizer, request.dropped, request.previous_summary
                )
                request = steps.send(summary)
        except StopIteration as done:
            result: ComposeResult = done.value
            return result


__all__ = [
    "MAX_SUMMARY_PASSES",
    "SUMMARIZER_SERVICE",
    "SUMMARY_INSTRUCTIONS",
    "ComposeResult",
    "PolicyEngine",
    "asummarize_history",
    "summarize_history",
    "summary_prompt",
]
