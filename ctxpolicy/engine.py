"""`PolicyEngine`: plan → check → collect → compose, for one policy
(see docs/design.md, 'Budget and overflow' and 'Invariants of a composition').

The engine holds only immutable data (the policy, default services, one `LayerPlan`
per process computed up front), so one engine can serve many threads and tasks. Each
call: check every argument once into a `ctxpolicy.compose.ComposeCall` (`_prepare`) →
run the collectors of the process's block layers (concurrently under `acompose`) →
compose with the pure `ctxpolicy.compose.compose_call` → when the history overflow is
``summarize``, have `ctxpolicy.summarize` fold the dropped prefix into
``compression__context`` and compose again → fill the recall layers once the history's
cut is known. The composer writes the whole report (`ctxpolicy.report.ReportExtras`
carries what only the engine knows); the engine adds what to persist.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import threading
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from langchain_core.messages import BaseMessage

from ctxpolicy.blocks.curation import curated_by_tool_calls
from ctxpolicy.blocks.inline import QueryReference, expand_query
from ctxpolicy.blocks.sandbox import resolve_root
from ctxpolicy.budget import wide_recall_cap
from ctxpolicy.collectors.base import CollectRequest
from ctxpolicy.collectors.items import unique_items
from ctxpolicy.collectors.memory import check_sessions_active, warn_volatile_memory
from ctxpolicy.collectors.needs import missing_services
from ctxpolicy.collectors.run import CollectOutcome, arun_collectors, run_collectors
from ctxpolicy.compose import (
    ComposeCall,
    Composition,
    SummarizeRequest,
    check_contexts,
    check_query_path,
    check_system_prompt,
    compose_call,
    compose_next_turn,
    input_notes,
)
from ctxpolicy.errors import BlocksError, CollectorError, MissingServiceError
from ctxpolicy.history import MessagesView, as_messages
from ctxpolicy.layers import CHECKPOINT_MESSAGES, COMPRESSION, QUERY
from ctxpolicy.loading import load_policy
from ctxpolicy.memory import TieredMemory
from ctxpolicy.plan import LayerPlan, PlannedLayer, plan_layers
from ctxpolicy.policy import CollectorSpec, Policy, RecallCollectorSpec
from ctxpolicy.recall.ingest import thread_key
from ctxpolicy.recall.recaller import Recaller, RecallRequest, RecallResult
from ctxpolicy.report import (
    NO_EXTRAS,
    ComposeReport,
    LayerCut,
    LayerSource,
    ReportExtras,
    SkippedCollector,
)
from ctxpolicy.summarize import (
    MAX_SUMMARY_PASSES,
    asummarize_history,
    summarize_history,
    summarizer_of,
)
from ctxpolicy.tokens import Tokenizer, get_tokenizer, text_cap

#: What a call's history argument is called in the errors about its items.
CHECKPOINT_ARGUMENT = "checkpoint_messages"
#: The collector type filled after the history is cut (see `PolicyEngine._recall_steps`).
RECALL = "recall"


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


class _Input(NamedTuple):
    """A call's history and input once curation and the query's references are applied."""

    #: the history the prompt shows (references expanded, dismissals as placeholders)
    history: Sequence[BaseMessage]
    #: the runtime query the prompt shows (references expanded), else None
    query: str | None
    #: the input's text as the caller gave it (what collectors and recall search for)
    text: str | None
    #: the input HumanMessage of a checkpoint call, as the prompt shows it
    message: BaseMessage | None
    references: tuple[QueryReference, ...] = ()
    #: (stored message, its prompt copy): a compacted history maps back to the stored ones
    swapped: tuple[tuple[BaseMessage, BaseMessage], ...] = ()
    #: dismissals applied to the history (``checkpoint_messages.curate``), for the report
    curated: tuple[str, ...] = ()


class _Call(NamedTuple):
    """Everything one compose call needs, checked once (immutable; a named tuple: one is
    made per call, and a tuple is the cheapest record to make)."""

    inputs: ComposeCall
    state: Mapping[str, Any]
    requests: tuple[CollectRequest, ...]
    services: Mapping[str, Any]
    #: the history as stored (``inputs.history`` may show the input expanded)
    stored_history: Sequence[BaseMessage]
    swapped: tuple[tuple[BaseMessage, BaseMessage], ...]
    #: what the report says beyond the composition (references, curation, fallbacks)
    extras: ReportExtras
    can_summarize: bool
    recall_layers: tuple[PlannedLayer, ...] = ()
    recall_query: str | None = None
    thread_id: str | None = None


@dataclass(frozen=True, slots=True)
class RecallStep:
    """A recall layer to fill once the history's cut is known (yielded by the compose loop).

    Attributes:
        layer: The recall layer.
        request: What its `Recaller` needs.
    """

    layer: PlannedLayer
    request: RecallRequest


def _text_of(message: BaseMessage) -> str:
    """A message's text (its content when that is a string: no text accessor built)."""
    content = message.content
    return content if type(content) is str else str(message.text)


#: The state of a call given none (read-only).
_NO_STATE: Mapping[str, Any] = MappingProxyType({})


def _check_state(state: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if state is None:
        return {}
    if not isinstance(state, Mapping):
        raise TypeError(f"state must be a mapping, got {type(state).__name__}")
    return state


def _check_query(query: object) -> None:
    if query is not None and not isinstance(query, str):
        raise TypeError(f"query must be a str or None, got {type(query).__name__}")


def _check_thread_id(thread_id: object) -> None:
    if thread_id is not None and not isinstance(thread_id, str):
        raise TypeError(f"thread_id must be a str or None, got {type(thread_id).__name__}")


def _stored_history(
    takes_history: bool, state: Mapping[str, Any], checkpoint_messages: Sequence[Any] | None
) -> Sequence[BaseMessage]:
    """The history a call reads: ``checkpoint_messages``, else ``state["messages"]``.

    Empty when the process takes no history (``takes_history`` false).

    Raises:
        TypeError: the history is not a sequence (or is a string).
    """
    if not takes_history:
        return ()
    if checkpoint_messages is not None:
        return as_messages(checkpoint_messages, argument=CHECKPOINT_ARGUMENT)
    return as_messages(state.get("messages"), argument="state['messages']")


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


def _langgraph_thread_id() -> str | None:
    """The ``thread_id`` of the LangGraph run this call is part of, if any."""
    if "langgraph.config" not in sys.modules:
        return None
    from langgraph.config import get_config  # an optional extra, loaded when in use

    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:  # not inside a runnable
        return None
    found = configurable.get("thread_id")
    return None if found is None else str(found)


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
    curated, log = curated_by_tool_calls(history)
    pairs = [(a, b) for a, b in zip(history, curated, strict=True) if a is not b]
    return curated, tuple(dict.fromkeys(r.target_id for r in log.records)), pairs


def _expand_query_references(
    policy: Policy, tok: Tokenizer, query: str
) -> tuple[str, tuple[QueryReference, ...]]:
    """``query`` with the inline references of ``layers.query.references`` resolved.

    Raises:
        CollectorError: (``on_error: fail``) a reference escapes the root or points at
            nothing; the message names it.
    """
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
        expanded = expand_query(query, root, on_error=spec.on_error, count_tokens=tok.count)
    except BlocksError as exc:
        raise CollectorError(QUERY, str(exc)) from exc
    return expanded.text, expanded.references


def _expanded(given: _Input, text: str, references: tuple[QueryReference, ...]) -> _Input:
    """``given`` with its input shown as ``text`` (its references expanded)."""
    if text == given.text:
        return given._replace(references=references)
    message = given.message
    if message is None:
        return given._replace(query=text, references=references)
    # the prompt gets the expanded copy; state keeps the stored message
    shown = message.model_copy(update={"content": text})
    stored = next((a for a, b in given.swapped if b is message), message)
    history = given.history
    index = next(i for i in range(len(history) - 1, -1, -1) if history[i] is message)
    return given._replace(
        history=MessagesView(history).replaced(index, shown),
        message=shown,
        references=references,
        swapped=(*given.swapped, (stored, shown)),
    )


_CollectedLayer = tuple[str, CollectorSpec, int, Path | None]
"""A layer a collector fills: its name and collector, its text's cap, its files' folder."""


def _collected_layers(policy: Policy, plan: LayerPlan) -> tuple[_CollectedLayer, ...]:
    """The block layers of ``plan`` a collector fills before composing (recall: after)."""
    return tuple(
        (layer.name, layer.collector, text_cap(layer.cap), policy.layer_base_dir(layer.name))
        for layer in plan.layers
        if layer.kind == "block" and layer.collector is not None and layer.collector.type != RECALL
    )


#: The collector types whose text is whole items a later layer may show again.
_ITEM_COLLECTORS = frozenset({"memory", "agent_outputs"})
#: The collector types that read the sessions of the call's thread.
_THREAD_COLLECTORS = frozenset({"memory", "aggregate"})


class _ProcessFacts(NamedTuple):
    """What every call of one process needs from its plan (worked out once, see `_facts`)."""

    #: the block layers a collector fills before composing (`_collected_layers`)
    collected: tuple[_CollectedLayer, ...]
    #: the recall layers (filled after the history is cut), in plan order
    recall_layers: tuple[PlannedLayer, ...]
    #: their names (the layers whose cap is held for them, `ComposeCall.reserved`)
    reserved: frozenset[str]
    #: whether a call may summarize its history, and the fallback's warning
    can_summarize: bool
    summarize_warning: str | None
    tokenizer: Tokenizer
    #: whether the input is shown as given (no curation, no query references to expand)
    plain_input: bool
    #: the memory layers with ``tiers`` the plan includes (the engine may keep their memory)
    tiered: tuple[str, ...]
    #: whether the plan has a ``persist`` block layer (else a call persists nothing)
    persists: bool
    #: whether the plan includes the history
    takes_history: bool
    #: the notes of a call given no contexts and a history it takes (`input_notes`)
    notes: Mapping[str, tuple[str, ...]]
    plan: LayerPlan
    #: what every call's report says beyond the composition, when the call's own
    #: arguments add nothing (`PolicyEngine._compose_plain`)
    extras: ReportExtras
    #: whether a call given no state, contexts, services nor thread id takes
    #: `PolicyEngine._compose_plain`: no collector, recall, summary, curation, query
    #: reference nor kept memory
    plain: bool
    #: whether such a call may be a next turn `compose_next_turn` composes: the plan takes
    #: the history and its input from it, and does not redistribute caps
    next_turns: bool
    #: whether a ``files`` layer's root names the call's thread (``data/{thread_id}``)
    thread_roots: bool = False
    #: the specs of the memory layers among ``collected`` (a call checks their session)
    memory_specs: tuple[CollectorSpec, ...] = ()
    #: whether two or more collected layers give whole items (memory, agent outputs), so
    #: one item may show twice (`unique_items`)
    unique_items: bool = False
    #: whether a call given no thread id asks the LangGraph run for one: recall layers,
    #: memories the engine keeps, a thread root, memory or aggregate layers read by thread
    asks_thread: bool = False


def _plain_input(policy: Policy) -> bool:
    """Whether ``policy`` shows a call's input as given: no curation, no query references."""
    history = policy.layers.get(CHECKPOINT_MESSAGES)
    query = policy.layers.get(QUERY)
    return (history is None or not history.curate) and (query is None or query.references is None)


def _facts(policy: Policy, plan: LayerPlan, tiered_services: Mapping[str, str]) -> _ProcessFacts:
    """The `_ProcessFacts` of ``plan`` (a plan of ``policy``; ``tiered_services``: the
    engine's memory layers with ``tiers``)."""
    can_summarize, warning = _can_summarize(plan)
    recall_layers = tuple(
        layer
        for layer in plan.layers
        if layer.collector is not None and layer.collector.type == RECALL
    )
    plain_input = _plain_input(policy)
    collected = _collected_layers(policy, plan)
    tiered = tuple(name for name in tiered_services if plan.includes(name))
    thread_roots = _thread_roots(collected)
    return _ProcessFacts(
        collected=collected,
        recall_layers=recall_layers,
        reserved=frozenset(layer.name for layer in recall_layers),
        can_summarize=can_summarize,
        summarize_warning=warning,
        tokenizer=get_tokenizer(plan.tokenizer),
        plain_input=plain_input,
        tiered=tiered,
        persists=any(layer.kind == "block" and layer.persist for layer in plan.layers),
        takes_history=plan.includes(CHECKPOINT_MESSAGES),
        notes=input_notes(plan, {}, ()),
        plan=plan,
        extras=ReportExtras(warnings=(warning,)) if warning else NO_EXTRAS,
        plain=plain_input and not (collected or recall_layers or can_summarize or tiered),
        next_turns=_plain_next_turns(plan),
        thread_roots=thread_roots,
        memory_specs=_memory_specs(collected),
        unique_items=_count_types(collected, _ITEM_COLLECTORS) > 1,
        asks_thread=_asks_thread(collected, recall_layers, tiered, thread_roots),
    )


def _count_types(collected: tuple[_CollectedLayer, ...], types: frozenset[str]) -> int:
    """How many layers of ``collected`` a collector of one of ``types`` fills."""
    return sum(spec.type in types for _, spec, _, _ in collected)


def _memory_specs(collected: tuple[_CollectedLayer, ...]) -> tuple[CollectorSpec, ...]:
    """The specs of the memory layers among ``collected``."""
    return tuple(spec for _, spec, _, _ in collected if spec.type == "memory")


def _asks_thread(
    collected: tuple[_CollectedLayer, ...],
    recall_layers: tuple[PlannedLayer, ...],
    tiered: tuple[str, ...],
    thread_roots: bool,
) -> bool:
    """Whether a call asks for its thread: it has recall layers, memories the engine
    keeps, a thread root, or a layer that reads the thread's sessions."""
    if recall_layers or tiered or thread_roots:
        return True
    return _count_types(collected, _THREAD_COLLECTORS) > 0


def _thread_roots(collected: tuple[_CollectedLayer, ...]) -> bool:
    """Whether a ``files`` layer among ``collected`` has a root naming the thread."""
    return any(spec.type == "files" and "{thread_id}" in spec.root for _, spec, _, _ in collected)


def _plain_next_turns(plan: LayerPlan) -> bool:
    """Whether a plain call of ``plan`` may be a next turn `compose_next_turn` composes."""
    return (
        plan.includes(CHECKPOINT_MESSAGES)
        and plan.query_path == "checkpoint"
        and not plan.redistribute
    )


def _can_summarize(plan: LayerPlan) -> tuple[bool, str | None]:
    """Whether a call of ``plan`` may summarize its history, and the fallback's warning."""
    history = plan.get(CHECKPOINT_MESSAGES)
    if history is None or history.overflow != "summarize":
        return False, None
    if not plan.includes(COMPRESSION):
        return False, (
            f"checkpoint_messages overflow 'summarize' but process {plan.process} does "
            f"not include {COMPRESSION}: fell back to drop_oldest"
        )
    return True, None


def _produced(layer: PlannedLayer, source: LayerSource | None) -> bool:
    """Whether this call made the layer's value (not merely read it back from state)."""
    if source in ("summary", "contexts"):
        return True
    return source == "collector" and layer.collector is not None and layer.collector.type != "state"


def _persisted(
    plan: LayerPlan,
    values: Mapping[str, str | None],
    sources: Mapping[str, LayerSource],
    state: Mapping[str, Any],
) -> dict[str, str]:
    """``{layer: text}`` this call persists: values it produced for ``persist`` block layers.

    ``PlannedLayer.persist`` already applies the never-persist rule
    (`ctxpolicy.plan.may_persist`); a value equal to the one in state is not written again.
    """
    persist: dict[str, str] = {}
    for layer in plan.layers:
        if layer.kind != "block" or not layer.persist:
            continue
        value = values.get(layer.name)
        if value and _produced(layer, sources.get(layer.name)) and value != state.get(layer.name):
            persist[layer.name] = value
    return persist


def _recall_moved(
    composition: Composition, first: Composition, steps: Mapping[str, RecallStep]
) -> bool:
    """Whether a wide recall layer got cut or moved the history's cut."""
    if len(composition.kept_history) != len(first.kept_history):
        return True
    return any(composition.report.layer(name).cuts for name in steps)


def _with_collected(
    extras: ReportExtras, skipped: Sequence[SkippedCollector], warnings: tuple[str, ...]
) -> ReportExtras:
    """``extras`` with the collectors' skips and warnings (the same object when none)."""
    if not skipped and not warnings:
        return extras
    return dataclasses.replace(
        extras, skipped=tuple(skipped), warnings=(*extras.warnings, *warnings)
    )


def _summarized_cut(composition: Composition) -> LayerCut:
    """The cut of the history's prefix a composition asks to summarize."""
    cuts = composition.report.layer(CHECKPOINT_MESSAGES).cuts
    return next(c for c in reversed(cuts) if c.action == "summarized")


class PolicyEngine:
    """Composes the input messages of every LLM call from one policy.

    Args:
        policy: A validated `Policy` (e.g. from `ctxpolicy.load_policy`).
        services: Runtime services by name (retrievers, ``summarizer``, memory, ...);
            a call's ``services=`` adds to and overrides them.

    The engine is immutable after construction and safe to share across threads.
    """

    __slots__ = (
        "_facts",
        "_memories",
        "_plain",
        "_plans",
        "_policy",
        "_recall_lock",
        "_recallers",
        "_services",
        "_tiered_services",
    )

    def __init__(self, policy: Policy, *, services: Mapping[str, Any] | None = None) -> None:
        if not isinstance(policy, Policy):
            raise TypeError(f"policy must be a ctxpolicy.Policy, got {type(policy).__name__}")
        self._setup(policy, MappingProxyType(dict(services or {})))
        warn_volatile_memory(policy, self._services)  # said now, not after a restart

    def _setup(self, policy: Policy, services: Mapping[str, Any]) -> None:
        """Work out everything the engine's calls need from ``policy`` (no warning: an
        engine `_derived` from another was warned about as that one)."""
        self._policy = policy
        self._services: Mapping[str, Any] = services
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
        # per process: what every call needs from its plan (decided once: every call asks)
        self._facts: Mapping[str, _ProcessFacts] = MappingProxyType(
            {
                name: _facts(policy, plan, self._tiered_services)
                for name, plan in self._plans.items()
            }
        )
        # process (None: the default one) -> its facts, for the processes whose calls
        # may take `_compose_plain`
        plain: dict[str | None, _ProcessFacts] = {
            name: facts for name, facts in self._facts.items() if facts.plain
        }
        if policy.default_process in plain:
            plain[None] = plain[policy.default_process]
        self._plain: Mapping[str | None, _ProcessFacts] = MappingProxyType(plain)

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
            MissingServiceError: the policy needs a service ``services`` lacks
                (`check_services`).
        """
        policy = load_policy(path, enable_share_context=enable_share_context)
        engine = cls(policy, services=services)
        engine.check_services()
        return engine

    def check_services(self) -> None:
        """Refuse an engine without the services its policy needs (docs/app-start.md).

        A ``retriever``, ``memory`` (without ``tiers``), ``skills`` or ``aggregate``
        layer with ``on_error: fail`` needs its service, and a ``summarize`` history overflow the
        ``summarizer``; `from_file` calls this, so a missing one fails at start-up, not
        on the first call that needs it. Services given only per call
        (``compose(services=...)``) or in state are not seen here: build such an engine
        with ``PolicyEngine(load_policy(path))``.

        Raises:
            MissingServiceError: one issue per missing service: the layer, the policy
                key and its ``file:line:col``.
        """
        issues = missing_services(self._policy, self._plans, self._services)
        if issues:
            raise MissingServiceError(issues)

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
        return self._derived({"context_window": context_window})

    def for_model_host(self) -> PolicyEngine:
        """The engine a host that hands the call to a chat model composes with
        (`ContextPolicyMiddleware`, ``agent_node``): ``model.system_messages: auto``
        there means one SystemMessage (``merge``); any other mode, and recall indexes
        and memories, are this engine's own (shared)."""
        if self._policy.model.system_messages != "auto":
            return self
        return self._derived({"system_messages": "merge"})

    def _derived(self, model_update: Mapping[str, Any]) -> PolicyEngine:
        """This engine with ``model_update`` applied to the policy's ``model`` section.

        Same services; the recall indexes (one per layer), the memories it keeps and
        their lock are shared, and nothing is warned again (this engine was).
        """
        model = self._policy.model.model_copy(update=dict(model_update))
        other = type(self).__new__(type(self))
        other._setup(self._policy.model_copy(update={"model": model}), self._services)
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
        thread_id: str | None = None,
    ) -> tuple[CollectRequest, ...]:
        facts = self._facts[plan.process]
        layers = facts.collected
        if not layers:
            return ()
        count = facts.tokenizer.count
        view = MappingProxyType(state) if isinstance(state, dict) else state
        return tuple(
            CollectRequest(
                layer=name,
                spec=spec,
                policy=self._policy,
                process=plan.process,
                state=view,
                query=query,
                services=services,
                cap_tokens=cap_tokens,
                count_tokens=count,
                base_dir=base_dir,
                vars=self._policy.vars,
                thread_id=thread_id,
            )
            for name, spec, cap_tokens, base_dir in layers
            if name not in skip
        )

    def _input(
        self, plan: LayerPlan, stored: Sequence[BaseMessage], query: str | None, *, plain: bool
    ) -> _Input:
        """The history and input the prompt shows: curated, references expanded.

        ``plain``: the policy neither curates the history nor expands query references
        (`_ProcessFacts.plain_input`), so both are shown as given.

        Raises:
            QueryPathError: see `ctxpolicy.compose.check_query_path`.
            CollectorError: a query reference failed (``on_error: fail``).
        """
        if plain:
            found = check_query_path(plan, query, stored)
            return _Input(stored, query, query if found is None else _text_of(found), found)
        history, curated, swapped = _curated_history(self._policy, stored)
        message = check_query_path(plan, query, history)
        text = query if message is None else _text_of(message)
        given = _Input(history, query, text, message, (), tuple(swapped), curated)
        spec = self._policy.layers.get(QUERY)
        if spec is None or spec.references is None or not text:
            return given
        expanded, references = _expand_query_references(
            self._policy, get_tokenizer(plan.tokenizer), text
        )
        return _expanded(given, expanded, references)

    def _call_services(
        self,
        plan: LayerPlan,
        *,
        services: Mapping[str, Any] | None,
        skip: Mapping[str, Any],
        state: Mapping[str, Any],
        history: Sequence[BaseMessage],
        thread_id: str | None,
    ) -> Mapping[str, Any]:
        """The call's services, with the memories the engine keeps."""
        merged = self._merged_services(services)
        tiered = self._facts[plan.process].tiered
        if not tiered:
            return merged
        owned = [
            name for name in tiered if name not in skip and self._owns_memory(name, merged, state)
        ]
        if owned:
            merged = self._with_owned_memories(owned, merged, history, thread_id=thread_id)
        return merged

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
        """Check every argument of a call, once: the composer trusts the result."""
        plan = self.plan(process)
        check_system_prompt(system_prompt)
        state = _check_state(state)
        _check_query(query)
        overrides = check_contexts(plan, contexts)
        facts = self._facts[plan.process]
        stored = _stored_history(facts.takes_history, state, checkpoint_messages)
        given = self._input(plan, stored, query, plain=facts.plain_input)
        _check_thread_id(thread_id)
        if thread_id is None and facts.asks_thread:  # once: memories, sessions, collectors
            thread_id = _langgraph_thread_id()
        recall_layers, reserved = facts.recall_layers, facts.reserved
        if overrides and recall_layers:  # a recall layer given at runtime is not recalled
            recall_layers = tuple(layer for layer in recall_layers if layer.name not in overrides)
            reserved = frozenset(layer.name for layer in recall_layers)
        merged = self._call_services(
            plan,
            services=services,
            skip=overrides,
            state=state,
            history=given.history,
            thread_id=thread_id,
        )
        if facts.memory_specs:  # a paused or ended session's turn: refused before any model call
            check_sessions_active(facts.memory_specs, merged, state, thread_id=thread_id)
        warning = facts.summarize_warning
        # positional (in field order): a frozen dataclass sets keyword arguments more slowly
        inputs = ComposeCall(
            plan,  # plan
            system_prompt,  # system_prompt
            given.history,  # history
            given.query,  # query
            given.message,  # input_message
            overrides,  # contexts
            input_notes(plan, overrides, ()),  # notes
            reserved,  # reserved
            facts.tokenizer,  # tokenizer
        )
        return _Call(
            inputs=inputs,
            state=state,
            requests=self._requests(
                plan,
                state=state,
                query=given.text,
                services=merged,
                skip=overrides,
                thread_id=thread_id,
            ),
            services=merged,
            stored_history=stored,
            swapped=given.swapped,
            extras=(
                ReportExtras(
                    warnings=(warning,) if warning else (),
                    references=given.references,
                    curated=given.curated,
                )
                if warning or given.references or given.curated
                else NO_EXTRAS
            ),
            can_summarize=facts.can_summarize,
            recall_layers=recall_layers,
            recall_query=given.text,
            thread_id=thread_id,
        )

    # ------------------------------------------------------------------ collection

    def _collected(
        self, call: _Call, outcomes: Sequence[CollectOutcome]
    ) -> tuple[
        dict[str, str | None], dict[str, LayerSource], list[SkippedCollector], tuple[str, ...]
    ]:
        """The collectors' values and sources, the skipped ones, and their warnings."""
        values: dict[str, str | None] = {}
        sources: dict[str, LayerSource] = {}
        skipped: list[SkippedCollector] = []
        warnings: list[str] = []
        for outcome in outcomes:
            if outcome.error is not None:
                skipped.append(SkippedCollector(outcome.layer, outcome.collector, outcome.error))
                continue
            warnings.extend(outcome.warnings)
            values[outcome.layer] = outcome.text
            if outcome.text:
                sources[outcome.layer] = "collector"
        # one item once per prompt: the earlier layer keeps it
        if len(values) > 1 and self._facts[call.inputs.plan.process].unique_items:
            values = unique_items(call.inputs.plan.names, values)
            sources = {k: v for k, v in sources.items() if values.get(k)}
        for key, value in call.inputs.contexts.items():
            values[key] = value
            sources[key] = "contexts"
        return values, sources, skipped, tuple(warnings)

    def collect(
        self,
        *,
        process: str | None = None,
        state: Mapping[str, Any] | None = None,
        query: str | None = None,
        services: Mapping[str, Any] | None = None,
        thread_id: str | None = None,
    ) -> dict[str, str]:
        """Run the collectors of ``process``'s block layers.

        ``thread_id`` names the conversation (a ``files`` root's ``{thread_id}``; default:
        the LangGraph ``thread_id`` when called inside a graph).

        Returns:
            ``{layer: text}`` for every layer whose collector produced text (keys end
            in ``__context``). Collectors skipped with ``on_error: skip`` are absent.

        Raises:
            CollectorError: a collector failed with ``on_error: fail``.
        """
        plan = self.plan(process)
        state = {} if state is None else state
        if query is None and plan.query_path == "checkpoint":
            history = as_messages(state.get("messages"), argument="state['messages']")
            last = next((m for m in reversed(history) if m.type == "human"), None)
            query = None if last is None else str(last.text)
        _check_thread_id(thread_id)
        requests = self._requests(
            plan,
            state=state,
            query=query,
            services=self._merged_services(services),
            skip={},
            thread_id=thread_id if thread_id is not None else _langgraph_thread_id(),
        )
        return {o.layer: o.text for o in run_collectors(requests) if o.text}

    # ------------------------------------------------------------------ composition

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
        plain = self._plain.get(process)
        if (
            plain is not None
            and state is None
            and contexts is None
            and services is None
            and thread_id is None
        ):
            return self._compose_plain(plain, system_prompt, query, checkpoint_messages)
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
        collected = self._collected(call, run_collectors(call.requests) if call.requests else ())
        if not call.recall_layers and not call.can_summarize:
            return self._composed(call, *collected)
        steps = self._steps(call, *collected)
        try:
            request = next(steps)
            while True:
                if isinstance(request, RecallStep):
                    request = steps.send(self._run_recall(request, call.services))
                    continue
                summarizer = summarizer_of(call.services)
                summary = summarize_history(summarizer, request.dropped, request.previous_summary)
                request = steps.send(summary)
        except StopIteration as done:
            result: ComposeResult = done.value
            return result

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
        if not call.recall_layers and not call.can_summarize:
            return self._composed(call, *collected)
        steps = self._steps(call, *collected)
        try:
            request = next(steps)
            while True:
                if isinstance(request, RecallStep):
                    outcome = await asyncio.to_thread(self._run_recall, request, call.services)
                    request = steps.send(outcome)
                    continue
                summarizer = summarizer_of(call.services)
                summary = await asummarize_history(
                    summarizer, request.dropped, request.previous_summary
                )
                request = steps.send(summary)
        except StopIteration as done:
            result: ComposeResult = done.value
            return result

    @staticmethod
    def _compose_plain(
        facts: _ProcessFacts,
        system_prompt: str,
        query: str | None,
        checkpoint_messages: Sequence[Any] | None,
    ) -> ComposeResult:
        """`compose` of a plain process (`_ProcessFacts.plain`) given only its system
        prompt, query and history: what `_prepare` then `_composed` return, without
        the steps that have nothing to do (no state, contexts, services, collectors,
        recall, summary, curation, references nor memory).

        Checks the same arguments, with the same functions, in the same order as
        `_prepare`, so a bad one raises the same error. A next turn is tried first: it
        takes only a system prompt equal to its frame's (a string) and no query, and
        declines anything else, which is then checked.
        """
        plan = facts.plan
        if facts.next_turns and query is None and checkpoint_messages is not None:
            turn = compose_next_turn(
                plan,
                system_prompt=system_prompt,
                history=checkpoint_messages,
                argument=CHECKPOINT_ARGUMENT,
                notes=facts.notes,
                extras=facts.extras,
            )
            if turn is not None:
                return ComposeResult(list(turn.messages), turn.report, {})
        check_system_prompt(system_prompt)
        _check_query(query)
        stored = _stored_history(facts.takes_history, _NO_STATE, checkpoint_messages)
        message = check_query_path(plan, query, stored)
        inputs = ComposeCall(  # positional: see `_prepare`
            plan,
            system_prompt,
            stored,
            query,
            message,
            {},
            facts.notes,
            facts.reserved,
            facts.tokenizer,
        )
        composition = compose_call(
            inputs,
            values={},
            sources={},
            request_summary=False,
            extras=facts.extras,
        )
        return ComposeResult(list(composition.messages), composition.report, {})

    def _composed(
        self,
        call: _Call,
        values: dict[str, str | None],
        sources: dict[str, LayerSource],
        skipped: Sequence[SkippedCollector],
        warnings: tuple[str, ...] = (),
    ) -> ComposeResult:
        """The result of a call that neither summarizes nor recalls: one composition.

        What `_steps` returns for such a call (it yields nothing then), without driving
        a generator (a plain call given only its prompt, query and history takes the
        shorter `_compose_plain`).
        """
        extras = _with_collected(call.extras, skipped, warnings)
        plan = call.inputs.plan
        facts = self._facts[plan.process]
        composition = compose_call(
            call.inputs,
            values=values,
            sources=sources,
            request_summary=False,
            extras=extras,
        )
        return ComposeResult(  # positional: see `_prepare`
            list(composition.messages),
            composition.report,
            _persisted(plan, values, sources, call.state) if facts.persists else {},
        )

    def _steps(
        self,
        call: _Call,
        values: dict[str, str | None],
        sources: dict[str, LayerSource],
        skipped: Sequence[SkippedCollector],
        warnings: tuple[str, ...] = (),
    ) -> Generator[SummarizeRequest | RecallStep, Any, ComposeResult]:
        """Compose, yielding each history prefix to summarize and each recall layer to fill.

        `compose` and `acompose` only drive it, with a sync or an async summarizer and
        recall call, so the engine's own logic stays free of I/O.
        """
        extras = _with_collected(call.extras, skipped, warnings)
        inputs, composition, summary, extras = yield from self._summary_passes(
            call, values, sources, extras
        )
        if call.recall_layers:
            composition = yield from self._recall_passes(
                call, inputs, composition, values=values, sources=sources, extras=extras
            )
        persist = _persisted(inputs.plan, values, sources, call.state)
        compacted: tuple[BaseMessage, ...] | None = None
        if summary is not None and COMPRESSION in persist:
            # never write an expanded query or a placeholder to state
            stored_of = {id(shown): stored for stored, shown in call.swapped}
            compacted = tuple(stored_of.get(id(m), m) for m in inputs.history)
        return ComposeResult(
            messages=list(composition.messages),
            report=composition.report,
            persist=persist,
            compacted_history=compacted,
        )

    @staticmethod
    def _summary_passes(
        call: _Call,
        values: dict[str, str | None],
        sources: dict[str, LayerSource],
        extras: ReportExtras,
    ) -> Generator[
        SummarizeRequest, str, tuple[ComposeCall, Composition, str | None, ReportExtras]
    ]:
        """Compose until the history fits, folding each dropped prefix into a summary.

        The one place the ``summarize`` overflow rule loops (at most
        `MAX_SUMMARY_PASSES` summaries; later overflow falls back to ``drop_oldest``).

        Returns:
            The inputs of the last pass (their history is what was kept), its
            composition, the last summary (None: none made) and the report extras.
        """
        inputs = call.inputs
        summary: str | None = None
        passes = 0
        while True:
            composition = compose_call(
                inputs,
                values=values,
                sources=sources,
                request_summary=call.can_summarize and passes < MAX_SUMMARY_PASSES,
                extras=extras,
            )
            request = composition.summarize
            if request is None:
                return inputs, composition, summary, extras
            passes += 1
            summary = yield request
            values[COMPRESSION] = summary
            sources[COMPRESSION] = "summary"
            extras = dataclasses.replace(
                extras,
                summary_cuts=(*extras.summary_cuts, _summarized_cut(composition)),
                summarized=True,
            )
            inputs = dataclasses.replace(inputs, history=request.kept)

    def _recall_passes(
        self,
        call: _Call,
        inputs: ComposeCall,
        first: Composition,
        *,
        values: dict[str, str | None],
        sources: dict[str, LayerSource],
        extras: ReportExtras,
    ) -> Generator[RecallStep, RecallResult | SkippedCollector, Composition]:
        """Fill the recall layers once the history's cut is known, and compose again.

        A lone recall layer first asks for the room the others leave; when that moved
        the history's cut or got the layer cut, recall again within the held caps.
        """
        recalled: dict[str, RecallResult] = {}
        skipped = list(extras.skipped)
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
        extras = dataclasses.replace(extras, skipped=tuple(skipped), recalled=dict(recalled))
        composition = compose_call(
            inputs, values=values, sources=sources, request_summary=False, extras=extras
        )
        if not _recall_moved(composition, first, steps):
            return composition
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
        extras = dataclasses.replace(extras, skipped=tuple(skipped), recalled=dict(recalled))
        return compose_call(
            inputs, values=values, sources=sources, request_summary=False, extras=extras
        )

    @staticmethod
    def _wide_cap(call: _Call, composition: Composition, name: str) -> int | None:
        """The cap a lone recall layer can take (`ctxpolicy.budget.wide_recall_cap`)."""
        return wide_recall_cap(
            call.inputs.plan,
            composition.report.layers,
            name,
            recall_layers=len(call.recall_layers),
        )

    def _recall_steps(
        self, call: _Call, composition: Composition, *, wide: bool
    ) -> Iterator[RecallStep]:
        """One `RecallStep` per recall layer, once the history's cut is known.

        The recall layers' caps were held for them (``reserved``), so giving them text
        cannot move the history's cut; a unit from a kept message is never recalled.
        With ``wide`` a lone recall layer asks for the room the others leave
        (`ctxpolicy.budget.wide_recall_cap`).
        """
        inputs = call.inputs
        tok = inputs.tokenizer
        names = {layer.name for layer in call.recall_layers}
        prompt_text = "\n".join(
            text for name, text in composition.contexts.items() if name not in names
        )
        kept_from = _kept_from(inputs.history, composition.kept_history)
        for layer in call.recall_layers:
            report = composition.report.layer(layer.name)
            cap = report.cap if report.cap is not None else layer.cap
            if wide:
                cap = max(cap, self._wide_cap(call, composition, layer.name) or 0)
            yield RecallStep(
                layer,
                RecallRequest(
                    layer=layer.name,
                    query=call.recall_query,
                    history=call.stored_history,
                    kept_from=kept_from,
                    prompt_text=prompt_text,
                    cap_tokens=text_cap(cap),
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
        recorded walking back from the newest to the first one it holds as it reads now
        (same key and fingerprint, `TieredMemory.is_recorded`), so a message edited under
        its id is recorded again (docs/memory.md, 'Edits').
        """
        spec = self._policy.layer(layer).collector
        assert spec is not None and spec.type == "memory" and spec.tiers is not None
        key = (layer, thread_key(history, thread_id))
        with self._recall_lock:
            memory = self._memories.get(key)
            if memory is None:
                tiers = spec.tiers
                memory = TieredMemory(
                    l1_size=tiers.l1, l2_size=tiers.l2, l3_size=tiers.l3, l2_policy=tiers.l2_policy
                )
                self._memories[key] = memory
        start = len(history)
        while start > 0 and not memory.is_recorded(history[start - 1]):
            start -= 1
        if start < len(history):
            memory.record(history[start:], forget_abandoned=True)
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
        history = as_messages(messages, argument="messages")
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


__all__ = ["ComposeResult", "PolicyEngine", "RecallStep"]
