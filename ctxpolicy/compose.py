"""The composer: one checked call plus the layers' values in, messages and report out.

No state, no I/O: a call's inputs are ``system_prompt``, ``checkpoint_messages``,
``contexts`` and ``query`` only (see docs/design.md, 'Two sides: the prompt and the
state'). They are checked once, into a `ComposeCall` (`check_call`, or the engine's
preparation); `compose_call` trusts it and composes: it measures each layer's demand,
applies the caps `ctxpolicy.budget` gives, fits the texts and the history
(`ctxpolicy.history.fit_history`), and has `ctxpolicy.report.build_report` write the
report. When the history's overflow rule is ``summarize`` it also says what should be
summarized. `compose_layers` and the public `compose_messages` check and compose in one
go; `ctxpolicy.engine.PolicyEngine` adds collectors, recall and the summarizer on top.

Invariants (docs/design.md, 'Invariants of a composition'), checked here and pinned by
property tests: total tokens (``count_messages``) ≤ available, or `BudgetExceededError`;
messages in policy order; the query exactly once; the system prompt only first; the
history structurally valid.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter, is_
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from ctxpolicy.budget import call_caps, history_room, layer_demands
from ctxpolicy.errors import BudgetExceededError, QueryPathError
from ctxpolicy.history import (
    HistoryFit,
    MessagesView,
    TurnWalk,
    _items_as_given,
    count_newest,
    fit_history,
    latest_walk,
)
from ctxpolicy.layers import BLOCK_SUFFIX, CHECKPOINT_MESSAGES, COMPRESSION
from ctxpolicy.next_turn import KeptPart, advance_walk
from ctxpolicy.report import (
    NO_EXTRAS,
    ComposeReport,
    LayerCut,
    LayerSource,
    ReportExtras,
    SkippedCollector,
    TallyWarnings,
    build_report,
    tally_warnings,
)
from ctxpolicy.tokens import Tokenizer, get_tokenizer

if TYPE_CHECKING:
    from ctxpolicy.plan import LayerPlan, PlannedLayer

#: Label of the whole input in a `BudgetExceededError` about the total.
TOTAL = "total"
#: Joins the texts of system-role layers merged into one SystemMessage.
SYSTEM_JOIN = "\n\n"

_Text = tuple[str, Callable[[str], BaseMessage], BaseMessage]
"""A single-message layer's text, its message class, and the message built from it."""

_NO_NOTES: Mapping[str, tuple[str, ...]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class SummarizeRequest:
    """Older history that did not fit and should be folded into a summary.

    Attributes:
        dropped: The older prefix that did not fit (oldest first; a read-only view of
            the input history, see `ctxpolicy.history.MessagesView`).
        previous_summary: The ``compression__context`` text this call had.
        kept: The history that fits.
    """

    dropped: Sequence[BaseMessage]
    previous_summary: str | None
    kept: tuple[BaseMessage, ...]


@dataclass(frozen=True, slots=True)
class Composition:
    """Result of `compose_call`.

    Attributes:
        messages: The composed messages.
        report: The per-layer report.
        message_layers: For each message, the layer it belongs to.
        kept_history: The history messages sent (after trimming and repairs).
        dropped_history: The older history prefix that did not fit (a read-only view
            of the input, never a copy).
        summarize: Set when the history overflow is ``summarize`` and a prefix was
            dropped: the engine summarizes it and composes again.
        contexts: The block values used, uncut, by layer.
    """

    messages: tuple[BaseMessage, ...]
    report: ComposeReport
    message_layers: tuple[str, ...]
    kept_history: tuple[BaseMessage, ...]
    dropped_history: Sequence[BaseMessage] = ()
    summarize: SummarizeRequest | None = None
    contexts: Mapping[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class LayerTally:
    """What the composer records about one included layer while it composes.

    Mutable scratch that never leaves a compose call:
    `ctxpolicy.report.build_report` turns it into the layer's `LayerReport`.

    Attributes:
        layer: The planned layer.
        messages: Its messages in the result.
        tokens: Tokens they use.
        demand: Tokens the layer would have used uncut.
        cap: Its cap for this call (after redistribution).
        cuts: What was cut, and why.
        notes: Facts the composer noted (empty value, merged system message, ...).
        source: Where its value came from.
        repairs: Messages removed from the history for structural validity.
        merged: Whether its text went into the merged first system message.
        merged_into: The layer whose SystemMessage carries its text (a layer past the
            first of a merged system message), else None.
    """

    layer: PlannedLayer
    messages: list[BaseMessage]
    tokens: int
    demand: int
    cap: int
    cuts: list[LayerCut]
    notes: list[str]
    source: LayerSource
    repairs: list[str] = field(default_factory=list)
    merged: bool = False
    merged_into: str | None = None


@dataclass(frozen=True, slots=True)
class ComposeCall:
    """One call's inputs, checked once: `compose_call` trusts every field.

    Made by `check_call` (or the engine's preparation, which checks the same things).

    Attributes:
        plan: The process's `LayerPlan`.
        system_prompt: The agent's private prompt.
        history: The history the call uses (empty when the process takes none).
        query: The runtime input (``query: runtime`` processes), else None.
        input_message: The input HumanMessage of a ``query: checkpoint`` call, as the
            history shows it (an item of ``history``), else None.
        contexts: Runtime values of ``__context`` layers, checked.
        notes: Notes about the inputs, per layer (ignored values and histories).
        reserved: Block layers whose whole cap is held for them when caps are
            redistributed, whatever their text (recall layers: their text is made
            after the history is cut, and the cut must not move when it arrives).
        tokenizer: The plan's tokenizer.
    """

    plan: LayerPlan
    system_prompt: str
    history: Sequence[BaseMessage]
    query: str | None
    input_message: BaseMessage | None
    contexts: Mapping[str, str | None]
    notes: Mapping[str, tuple[str, ...]]
    reserved: frozenset[str]
    tokenizer: Tokenizer


def message_factory(role: str) -> Callable[[str], BaseMessage]:
    """The message class of a block role (``system``/``human``/``ai``)."""
    if role == "human":
        return HumanMessage
    if role == "ai":
        return AIMessage
    return SystemMessage


# ----------------------------------------------------------------------------- checks


def check_system_prompt(system_prompt: object) -> str:
    """``system_prompt`` when it is a string.

    Raises:
        TypeError: it is not.
    """
    if not isinstance(system_prompt, str):
        raise TypeError(f"system_prompt must be a str, got {type(system_prompt).__name__}")
    return system_prompt


def _check_context_key(plan: LayerPlan, key: object, known: Collection[str]) -> None:
    if not isinstance(key, str) or not key.endswith(BLOCK_SUFFIX):
        raise ValueError(
            f"contexts: key {key!r} must end in {BLOCK_SUFFIX!r} (only __context block "
            "layers can be given at runtime)"
        )
    if key not in known:
        layers = ", ".join(n for n in (plan.order or plan.names) if n.endswith(BLOCK_SUFFIX))
        raise ValueError(
            f"contexts: key {key!r} is not a layer of policy {plan.policy_name!r} "
            f"(its block layers: {layers})"
        )


def check_contexts(plan: LayerPlan, contexts: Mapping[str, Any] | None) -> dict[str, str | None]:
    """Validate ``contexts=``: keys end in ``__context`` and name layers of the plan.

    Returns:
        The contexts as a plain dict (values ``str`` or None).

    Raises:
        ValueError: a key does not end in ``__context`` or names no layer of the policy.
        TypeError: a value is neither ``str`` nor None.
    """
    if contexts is None:
        return {}
    known = set(plan.order) | {layer.name for layer in plan.layers}
    known |= {layer.name for layer in plan.excluded}
    out: dict[str, str | None] = {}
    for key, value in contexts.items():
        _check_context_key(plan, key, known)
        if value is not None and not isinstance(value, str):
            raise TypeError(f"contexts[{key!r}] must be a str or None, got {type(value).__name__}")
        out[key] = value
    return out


def _check_runtime_query(
    plan: LayerPlan, query: str | None, history: Sequence[BaseMessage]
) -> None:
    if query is None or not query.strip():
        raise QueryPathError(
            f"process {plan.process!r} takes its input at runtime (query: runtime): "
            "pass a non-empty query="
        )
    if history and history[-1].type == "human" and history[-1].content == query:
        raise QueryPathError(
            f"process {plan.process!r}: the query is already the last HumanMessage of "
            "checkpoint_messages; passing it as query= too would send it twice"
        )


def _checkpoint_input(
    plan: LayerPlan, query: str | None, history: Sequence[BaseMessage]
) -> BaseMessage:
    process = plan.process
    if query is not None:
        raise QueryPathError(
            f"process {process!r} takes its input from the history (query: checkpoint): "
            "the input must be the last HumanMessage of checkpoint_messages; do not also "
            "pass query="
        )
    if not plan.includes(CHECKPOINT_MESSAGES):
        raise QueryPathError(
            f"process {process!r} has query: checkpoint but checkpoint_messages: false, so "
            "its input cannot arrive"
        )
    for message in reversed(history):
        if message.type == "human":
            return message
    raise QueryPathError(
        f"process {process!r} takes its input from the history (query: checkpoint) but "
        "checkpoint_messages has no HumanMessage"
    )


def check_query_path(
    plan: LayerPlan, query: str | None, history: Sequence[BaseMessage]
) -> BaseMessage | None:
    """Enforce the single query path (docs/design.md, 'The query path').

    Returns:
        The input HumanMessage of a ``query: checkpoint`` call (None for ``runtime``).

    Raises:
        QueryPathError: query missing (runtime), given (checkpoint), sent twice, or a
            checkpoint call without a HumanMessage in its history.
    """
    if plan.query_path == "runtime":
        _check_runtime_query(plan, query, history)
        return None
    return _checkpoint_input(plan, query, history)


def input_notes(
    plan: LayerPlan, contexts: Mapping[str, str | None], history: Sequence[BaseMessage]
) -> Mapping[str, tuple[str, ...]]:
    """Notes about inputs the plan ignores: contexts of excluded layers, a history.

    ``history`` is the history as given: a process without history ignores it.
    """
    notes: dict[str, tuple[str, ...]] = {}
    for key, value in contexts.items():
        if value and not plan.includes(key):
            notes[key] = (f"contexts value ignored: process {plan.process} excludes this layer",)
    if history and not plan.includes(CHECKPOINT_MESSAGES):
        notes[CHECKPOINT_MESSAGES] = (
            f"ignored {len(history)} message(s): process {plan.process} takes no history",
        )
    return notes or _NO_NOTES


def check_call(
    plan: LayerPlan,
    *,
    system_prompt: str,
    checkpoint_messages: Sequence[BaseMessage] = (),
    contexts: Mapping[str, str | None] | None = None,
    query: str | None = None,
    reserved: Collection[str] = (),
) -> ComposeCall:
    """Check one call's inputs against ``plan`` (once) into a `ComposeCall`.

    Raises:
        QueryPathError: query missing (runtime), given (checkpoint), or sent twice.
        ValueError: a bad ``contexts`` key.
        TypeError: a value of the wrong type.
    """
    check_system_prompt(system_prompt)
    checked = check_contexts(plan, contexts)
    history: Sequence[BaseMessage] = ()
    if plan.includes(CHECKPOINT_MESSAGES):
        given: object = checkpoint_messages
        if isinstance(given, str | bytes):
            raise TypeError("checkpoint_messages must be a sequence of messages, not a string")
        history = checkpoint_messages  # fit_history names any walked item that is no message
    input_message = check_query_path(plan, query, history)
    return ComposeCall(
        plan=plan,
        system_prompt=system_prompt,
        history=history,
        query=query,
        input_message=input_message,
        contexts=checked,
        notes=input_notes(plan, checked, checkpoint_messages),
        reserved=frozenset(reserved),
        tokenizer=get_tokenizer(plan.tokenizer),
    )


# ----------------------------------------------------------------------------- composing


def _fit_other_layer(
    tok: Tokenizer,
    tally: LayerTally,
    text: _Text | None,
    counts: Mapping[str, int],
) -> None:
    """Fit a system prompt, block or query layer (its text, if it has one this call)."""
    name = tally.layer.name
    if text is not None:
        _fit_text_layer(tok, tally, text, counts[name])
    elif tally.layer.kind == "block":
        tally.notes.append("empty: no value this call")


class _Built(NamedTuple):
    """A fitted layer's message, built once with its frame (see `_message_of`)."""

    message: BaseMessage
    #: what ``message`` held when built (`_message_state`)
    state: _MessageState
    #: its class and text, to build another like it
    make: Callable[[str], BaseMessage]
    text: str


class _Fitted(NamedTuple):
    """A single-message layer fitted to its cap: what its tally gets (see `_Frame`)."""

    #: its message (cut when it was truncated), None: no message
    built: _Built | None
    tokens: int
    cuts: tuple[LayerCut, ...]
    notes: tuple[str, ...]
    source: LayerSource


_MessageState = tuple[dict[str, Any], dict[str, Any] | None, frozenset[str]]
"""A message's fields, extra fields and the names of the fields set, copied."""


def _message_state(message: BaseMessage) -> _MessageState:
    """What ``message`` holds, deep-copied: the message compares unequal to it once
    anything in it changes (a caller that edits a returned message, LangGraph's
    ``add_messages`` giving it an id)."""
    return (
        copy.deepcopy(dict(vars(message))),
        copy.deepcopy(message.model_extra),
        frozenset(message.model_fields_set),
    )


def _message_of(built: _Built) -> BaseMessage:
    """The message of a fitted layer: the one built with its frame while it is unchanged,
    else a new one of the same class and text.

    Building a message validates it with pydantic, the costliest single step of a next
    turn whose CPU caches are cold (docs/design.md, 'Budget and overflow', on the next
    turn), so the frame's message is given to every call that takes the frame (every
    conversation and thread of the process), as ``create_agent`` gives every model call
    its one SystemMessage: such messages are shared, to be read, not changed. A call after
    one is changed finds it changed and builds another, so a change never reaches a later
    call's result (it does show in the earlier results that hold that message).
    """
    if _unchanged_message(built):
        return built.message
    return built.make(built.text)


def _unchanged_message(built: _Built) -> bool:
    """Whether ``built``'s message still holds what it held when built."""
    message, state = built.message, built.state
    # pydantic's attributes behind ``model_extra`` and ``model_fields_set`` (read without
    # the properties' calls: this runs for each of the frame's messages on every turn)
    return (
        vars(message) == state[0]
        and message.__pydantic_extra__ == state[1]
        and message.__pydantic_fields_set__ == state[2]
    )


@dataclass(frozen=True, slots=True, eq=False)
class _Frame:
    """What a composition makes of everything but its history (the other layers).

    It depends only on the fields it is keyed on (`_frame_fits`), never on the history,
    so a call with the same ones (the next turn: same system prompt, same contexts) takes
    it as it is and composes only the history. Its caps and fits are those of a call
    whose history demands nothing; when caps are redistributed and a history is given
    they are worked out again (`compose_call`). Without redistribution the runtime query
    moves no other layer's cap: the frame leaves the query layer out (``query_free``) and
    every call fits its own query (`_query_tally`).
    """

    plan: LayerPlan
    system_prompt: str
    query: str | None
    values: Mapping[str, str | None]
    sources: Mapping[str, LayerSource] | None
    reserved: frozenset[str]
    texts: Mapping[str, _Text]
    counts: Mapping[str, int]
    demands: Mapping[str, int]
    caps: Mapping[str, int]
    #: where each layer's value comes from (`_source`)
    layer_sources: Mapping[str, LayerSource]
    #: each text's message (``texts``) with what it held when the frame was made: the
    #: message a call gives out while unchanged (`_message_of`), whatever fits it again
    built: Mapping[str, _Built]
    #: per layer but the history; None for a layer whose fit raised (fitted again, in
    #: order, on every call: the error must come from the same layer as without a frame)
    fits: Mapping[str, _Fitted | None]
    contexts: Mapping[str, str]
    #: the query layer is left out: fitted by every call (no redistribution)
    query_free: bool
    tokenizer: Tokenizer
    #: the history layer when a call's next turn can be composed from it (`_next_turn`),
    #: else None (`_turn_layer`)
    turn_layer: PlannedLayer | None
    #: whether a call given only a system prompt and a history may take this frame's
    #: next turn (`compose_next_turn`): a frame with a turn layer and no values, sources
    #: as such a call gives them, nothing reserved, caps not redistributed, and the input
    #: taken from the history
    plain_turns: bool
    #: the last caps a history moved the frame's to, with the layers fitted to them (a
    #: one-item list: the frame's one mutable part, replaced whole; see `_call_caps`)
    refit: list[tuple[Mapping[str, int], Mapping[str, _Fitted | None]] | None]


def _frame_fits(
    frame: _Frame,
    call: ComposeCall,
    values: Mapping[str, str | None],
    sources: Mapping[str, LayerSource] | None,
) -> bool:
    """Whether ``frame`` is what ``call`` makes of its other layers."""
    return (
        frame.plan is call.plan
        and frame.system_prompt == call.system_prompt
        and (frame.query_free or frame.query == call.query)
        and frame.values == values
        and frame.sources == sources
        and frame.reserved == call.reserved
    )


def _built_of(message: BaseMessage, make: Callable[[str], BaseMessage]) -> _Built:
    """``message``, just built by ``make``, with what it holds (`_message_state`)."""
    return _Built(message, _message_state(message), make, str(message.content))


def _fit_others(
    call: ComposeCall,
    texts: Mapping[str, _Text],
    counts: Mapping[str, int],
    caps: Mapping[str, int],
    sources: Mapping[str, LayerSource],
    *,
    built: Mapping[str, _Built],
    query_free: bool,
) -> dict[str, _Fitted | None]:
    """Each layer but the history (and the query when ``query_free``, see `_Frame`)
    fitted to ``caps`` (None: its fit raised).

    A layer that fits whole keeps its text's message as ``built`` holds it (with what it
    held when the frame was made, so a message a caller changed since is never taken as
    unchanged); a cut layer's message is new."""
    fits: dict[str, _Fitted | None] = {}
    tok = call.tokenizer
    skipped = ("history", "query") if query_free else ("history",)
    for layer in call.plan.layers:
        if layer.kind in skipped:
            continue
        name = layer.name
        tally = LayerTally(layer, [], 0, 0, caps[name], [], [], sources[name])
        text = texts.get(name)
        try:
            _fit_other_layer(tok, tally, text, counts)
        except BudgetExceededError:
            fits[name] = None
            continue
        fitted: _Built | None = None
        if tally.messages and text is not None:
            message = tally.messages[0]
            fitted = built[name] if message is text[2] else _built_of(message, text[1])
        fits[name] = _Fitted(
            fitted, tally.tokens, tuple(tally.cuts), tuple(tally.notes), tally.source
        )
    return fits


def _make_frame(
    call: ComposeCall,
    values: Mapping[str, str | None],
    sources: Mapping[str, LayerSource] | None,
    *,
    query_free: bool | None = None,
) -> _Frame:
    """The `_Frame` of ``call`` (its history aside; its query too when ``query_free``,
    by default when caps are not redistributed)."""
    plan = call.plan
    if query_free is None:
        query_free = not plan.redistribute
    texts = _layer_texts(call, values)
    counts = {name: call.tokenizer.count_message(text[2]) for name, text in texts.items()}
    demands = layer_demands(plan, counts, reserved=call.reserved)
    caps = call_caps(plan, demands)
    layer_sources = {layer.name: _source(layer, values, sources) for layer in plan.layers}
    built = {name: _built_of(text[2], text[1]) for name, text in texts.items()}
    turn_layer = _turn_layer(plan, query_free=query_free)
    return _Frame(
        plan=plan,
        system_prompt=call.system_prompt,
        query=call.query,
        values=dict(values),
        sources=None if sources is None else dict(sources),
        reserved=call.reserved,
        texts=texts,
        counts=counts,
        demands=demands,
        caps=caps,
        layer_sources=layer_sources,
        built=built,
        fits=_fit_others(
            call, texts, counts, caps, layer_sources, built=built, query_free=query_free
        ),
        contexts={k: v for k, v in values.items() if v},
        query_free=query_free,
        tokenizer=call.tokenizer,
        turn_layer=turn_layer,
        plain_turns=turn_layer is not None
        and not values
        and sources == {}
        and not call.reserved
        and not plan.redistribute
        and plan.query_path == "checkpoint",
        refit=[None],
    )


def _turn_layer(plan: LayerPlan, *, query_free: bool) -> PlannedLayer | None:
    """The history layer of ``plan`` when its calls' next turns can be composed from the
    last call (`_next_turn`): none merges system messages, fits a query of its own outside
    the frame, raises on overflow nor clears tool results; else None."""
    if plan.merge_system or (query_free and plan.query_path == "runtime"):
        return None
    for layer in plan.layers:
        if layer.kind == "history":
            if layer.overflow == "error" or layer.clear_tool_results:
                return None
            return layer
    return None


def _frame(
    call: ComposeCall,
    values: Mapping[str, str | None],
    sources: Mapping[str, LayerSource] | None,
) -> _Frame:
    """The `_Frame` of ``call``: the one its tokenizer remembers for the same inputs
    (`Tokenizer.frames`), else a new one, then remembered in place of its plan's last."""
    tok = call.tokenizer
    replacing = _plan_frame(tok, call.plan)
    if replacing is not None and _frame_fits(replacing, call, values, sources):
        return replacing
    frame = _make_frame(call, values, sources)
    if all(fit is not None for fit in frame.fits.values()):
        tok.remember_frame(frame, replacing=replacing)
    return frame


def _call_caps(
    call: ComposeCall, frame: _Frame
) -> tuple[Mapping[str, int], Mapping[str, int], Mapping[str, _Fitted | None]]:
    """The demands, caps and fits of ``call`` (the frame's, unless its history moves them).

    The history is counted newest-first only when caps are redistributed, and only until
    it exceeds the most it could be given (`ctxpolicy.budget.history_room`): past that
    point its exact size cannot change any cap, so the cost follows what is kept, not the
    history's length. Without redistribution `_fit_history_layer` sets the history's
    demand from what fitting counted.
    """
    plan = call.plan
    if not (plan.redistribute and call.history and CHECKPOINT_MESSAGES in frame.demands):
        return frame.demands, frame.caps, frame.fits
    demands = dict(frame.demands)
    room = history_room(plan, demands, CHECKPOINT_MESSAGES)
    demands[CHECKPOINT_MESSAGES] = count_newest(call.tokenizer, call.history, room)[0]
    caps = call_caps(plan, demands)
    if caps == frame.caps:
        return demands, caps, frame.fits
    refit = frame.refit[0]
    if refit is not None and refit[0] == caps:  # the caps of the frame's last re-fit
        return demands, caps, refit[1]
    fits = _fit_others(
        call,
        frame.texts,
        frame.counts,
        caps,
        frame.layer_sources,
        built=frame.built,
        query_free=frame.query_free,
    )
    frame.refit[0] = (caps, fits)  # one assignment: safe across threads
    return demands, caps, fits


def _other_tally(
    call: ComposeCall, layer: PlannedLayer, tally: LayerTally, fitted: _Fitted | None, frame: _Frame
) -> None:
    """Fill ``tally`` of a layer but the history with its fit (fitted here when None)."""
    if fitted is None:  # its fit raised when the frame was made: it raises here, in order
        tally.source = frame.layer_sources[layer.name]
        _fit_other_layer(call.tokenizer, tally, frame.texts.get(layer.name), frame.counts)
        return
    if fitted.built is not None:
        tally.messages = [_message_of(fitted.built)]
    tally.tokens = fitted.tokens
    if fitted.cuts:
        tally.cuts = list(fitted.cuts)
    if fitted.notes:
        tally.notes = list(fitted.notes)
    tally.source = fitted.source


def _query_tally(call: ComposeCall, tally: LayerTally) -> None:
    """Fit the query layer of a call whose frame leaves it out (``query_free``): its
    demand, message and cuts are the call's own (what `layer_demands` and
    `_fit_other_layer` make of it)."""
    text = call.query if call.plan.query_path == "runtime" else None
    if not text:  # no message: it asks for nothing (the frame's demand is another call's)
        tally.demand = 0
        return
    message = HumanMessage(text)
    # its demand is its size: only recall layers hold room (`ComposeCall.reserved`)
    tally.demand = tokens = call.tokenizer.count_message(message)
    _fit_text_layer(call.tokenizer, tally, (text, HumanMessage, message), tokens)


def compose_call(
    call: ComposeCall,
    *,
    values: Mapping[str, str | None] | None = None,
    sources: Mapping[str, LayerSource] | None = None,
    request_summary: bool = True,
    extras: ReportExtras = NO_EXTRAS,
) -> Composition:
    """Compose one checked call's messages and report (pure; nothing is checked again).

    Args:
        call: The checked inputs.
        values: Block texts by layer (default: ``call.contexts``).
        sources: Where each block value came from (for the report).
        request_summary: With history overflow ``summarize``, return a
            `SummarizeRequest` for a dropped prefix (else plain ``drop_oldest``).
        extras: What the report says beyond the composition (the engine's side).

    The layers but the history are composed once per plan and inputs (a `_Frame` its
    tokenizer remembers, `Tokenizer.frames`): a call whose system prompt, query, values,
    sources and reserved layers are those of the plan's last call takes them as they were
    and composes only its history (the next turn). The result is the same either way.

    Returns:
        The `Composition`.

    Raises:
        BudgetExceededError: a layer with overflow ``error`` does not fit, the input of
            a checkpoint call does not fit the history's cap, or the layers together
            exceed the available tokens.
    """
    plan = call.plan
    if values is None:
        values = call.contexts
    frame = _frame(call, values, sources)
    demands, caps, fits = _call_caps(call, frame)
    if call.history and frame.turn_layer is not None:
        turn = _next_turn(
            call, frame, demands, caps, fits, extras=extras, request_summary=request_summary
        )
        if turn is not None:
            return turn
    tallies: dict[str, LayerTally] = {}
    history = _NO_HISTORY
    for layer in plan.layers:
        name = layer.name
        tally = LayerTally(layer, [], 0, demands[name], caps[name], [], [], "argument")
        tallies[name] = tally
        if layer.kind == "history":
            summary = values.get(COMPRESSION) if request_summary else None
            history = _fit_history_layer(call, tally, summary, request_summary=request_summary)
        elif name in fits:
            _other_tally(call, layer, tally, fits[name], frame)
        else:  # the query, left out of the frame
            _query_tally(call, tally)
    if plan.merge_system:
        _merge_leading_system(call.tokenizer, plan, tallies)
    messages, message_layers, total = _assemble(plan, tallies)
    report = build_report(
        plan,
        tallies,
        total=total,
        messages=messages,
        notes=call.notes,
        summarized=history.summarize is not None,
        extras=extras,
    )
    if history.fit is not None and history.fit.walk is not None:
        _remember_turn(call, frame, fits, tallies, history)
    return Composition(  # positional (in field order): see `build_report`
        tuple(messages),
        report,
        tuple(message_layers),
        history.kept,
        history.dropped,
        history.summarize,
        dict(frame.contexts),
    )


def _source(
    layer: PlannedLayer, values: Mapping[str, str | None], sources: Mapping[str, LayerSource] | None
) -> LayerSource:
    if layer.kind != "block":
        return "argument"
    default: LayerSource = "contexts" if layer.name in values else "none"
    return default if sources is None else sources.get(layer.name, default)


def _layer_texts(call: ComposeCall, values: Mapping[str, str | None]) -> dict[str, _Text]:
    """Non-empty text, message class and message of every single-message layer."""
    plan = call.plan
    out: dict[str, _Text] = {}
    for layer in plan.layers:
        if layer.kind == "system_prompt":
            text: str | None = call.system_prompt
            role = "system"
        elif layer.kind == "query":
            text = call.query if plan.query_path == "runtime" else None
            role = "human"
        elif layer.kind == "block":
            text = values.get(layer.name)
            role = layer.role
        else:
            continue
        if text:
            make = message_factory(role)
            out[layer.name] = (text, make, make(text))
    return out


def _assemble(
    plan: LayerPlan, tallies: Mapping[str, LayerTally]
) -> tuple[list[BaseMessage], list[str], int]:
    """The messages in plan order, the layer of each, and their tokens.

    Raises:
        BudgetExceededError: the layers together exceed the available tokens.
    """
    messages: list[BaseMessage] = []
    message_layers: list[str] = []
    total = 0  # == count_messages(messages): every tally's tokens are its messages' counts
    for layer in plan.layers:
        tally = tallies[layer.name]
        if tally.messages:
            messages.extend(tally.messages)
            message_layers.extend([layer.name] * len(tally.messages))
        total += tally.tokens
    if total > plan.available_tokens:
        raise BudgetExceededError(TOTAL, total, plan.available_tokens, detail="the layers together")
    return messages, message_layers, total


# ----------------------------------------------------------------------------- text layers


def _fit_text_layer(tok: Tokenizer, tally: LayerTally, text: _Text, tokens: int) -> None:
    """Fit one single-message layer (its message has ``tokens``) to its cap and record it."""
    value, make, built = text
    message, tokens, cuts = _fit_text(
        tok, tally.layer, value, make, tally.cap, message=built, demand=tokens
    )
    tally.cuts.extend(cuts)
    if message is not None:
        tally.messages, tally.tokens = [message], tokens


def _fit_text(
    tok: Tokenizer,
    layer: PlannedLayer,
    text: str,
    make: Callable[[str], BaseMessage],
    cap: int,
    *,
    message: BaseMessage | None = None,
    demand: int | None = None,
) -> tuple[BaseMessage | None, int, list[LayerCut]]:
    """Fit one text layer to ``cap``: (message or None, tokens, cuts).

    ``message`` is ``make(text)`` and ``demand`` its tokens when the caller has them.
    """
    if message is None:
        message = make(text)
    if demand is None:
        demand = tok.count_message(message)
    if demand <= cap:
        return message, demand, []
    rule = layer.overflow
    if rule == "error":
        raise BudgetExceededError(layer.name, demand, cap, detail="overflow rule 'error'")
    if rule == "drop":
        return None, 0, [LayerCut("dropped", demand, 0, cap, rule)]
    fitted, tokens = _truncated(
        tok, text, make, cap, keep="tail" if rule == "truncate_head" else "head"
    )
    if fitted is not None:
        return fitted, tokens, [LayerCut("truncated", demand - tokens, 0, cap, rule)]
    if layer.kind != "block":
        raise BudgetExceededError(
            layer.name, demand, cap, detail=f"{rule}: not even a cut marker fits"
        )
    return None, 0, [LayerCut("dropped", demand, 0, cap, f"{rule}: marker does not fit")]


def _truncated(
    tok: Tokenizer,
    text: str,
    make: Callable[[str], BaseMessage],
    cap: int,
    *,
    keep: Literal["head", "tail"],
) -> tuple[BaseMessage | None, int]:
    """``text`` cut (with its marker) until its message fits ``cap``, and its tokens.

    Returns ``(None, 0)`` when not even the marker fits.
    """
    budget = cap - tok.count_message(make(""))
    for _ in range(8):
        if budget <= 0:
            break
        cut = tok.truncate(text, budget, keep=keep)
        if not cut:
            break
        fitted = make(cut)
        tokens = tok.count_message(fitted)
        if tokens <= cap:
            return fitted, tokens
        budget -= tokens - cap
    return None, 0


def _leading_system_group(plan: LayerPlan, tallies: Mapping[str, LayerTally]) -> list[LayerTally]:
    """The system prompt and the system-role blocks right after it (empty layers aside)."""
    group: list[LayerTally] = []
    for layer in plan.layers:
        tally = tallies[layer.name]
        if not tally.messages:
            continue
        only = tally.messages[0] if len(tally.messages) == 1 else None
        system = layer.kind == "system_prompt" or (layer.kind == "block" and layer.role == "system")
        if not system or not isinstance(only, SystemMessage) or not isinstance(only.content, str):
            break
        group.append(tally)
    return group


def _merge_leading_system(
    tok: Tokenizer, plan: LayerPlan, tallies: Mapping[str, LayerTally]
) -> None:
    """``model.system_messages: merge``: one SystemMessage for the leading system layers.

    The system prompt and the system-role blocks that follow it (empty layers aside)
    become the first layer's message, texts joined by a blank line. Each layer keeps
    its report: its tokens are what its text adds to the merged message (counted
    exactly, so the layers' tokens still sum to the merged message's count), its
    ``messages`` 0 past the first.
    """
    group = _leading_system_group(plan, tallies)
    if len(group) < 2:
        return
    text = ""
    counted = 0
    for index, tally in enumerate(group):
        part = str(tally.messages[0].content)
        text = part if index == 0 else f"{text}{SYSTEM_JOIN}{part}"
        merged_tokens = tok.count_message(SystemMessage(text))
        tally.tokens, counted = merged_tokens - counted, merged_tokens
        tally.merged = True
        if index:
            tally.messages = []
            tally.merged_into = group[0].layer.name
            tally.notes.append(
                f"merged into the first system message (model.system_messages: merge), "
                f"after {group[0].layer.name}"
            )
    group[0].messages = [SystemMessage(text)]


# ----------------------------------------------------------------------------- history


class _HistoryOutcome(NamedTuple):
    kept: tuple[BaseMessage, ...]
    dropped: Sequence[BaseMessage]
    summarize: SummarizeRequest | None
    #: the fit (its walk remembered by the tokenizer), None: no history fitted
    fit: HistoryFit | None = None


_NO_HISTORY = _HistoryOutcome((), (), None)


def _contains(messages: Sequence[BaseMessage], target: BaseMessage) -> bool:
    """Whether ``target`` is in ``messages`` (newest first, identity before equality)."""
    return any(map(is_, reversed(messages), repeat(target))) or target in messages


def _fit_history_layer(
    call: ComposeCall,
    tally: LayerTally,
    previous_summary: str | None,
    *,
    request_summary: bool,
) -> _HistoryOutcome:
    """Fit the history to its cap (newest-first, whole units) and apply its overflow.

    Cost follows what is kept: the dropped prefix is a view (never copied) and is
    counted only where its size is the point, i.e. for overflow ``error`` (the error
    names the history's full size) and ``summarize`` (the summarizer reads all of it
    anyway). For ``drop_oldest`` the report gives the number of dropped messages, and
    their tokens only when counting stopped inside them anyway (the unit that did not
    fit, and whatever the demand count already covered); else ``tokens`` is None.
    """
    tok, cap = call.tokenizer, tally.cap
    history, input_message = call.history, call.input_message
    tally.source = "history"
    # the next turn parses and counts only what was appended since the last walk
    previous = latest_walk(tok.walks, history)
    fit = fit_history(history, max_tokens=cap, count=tok.count_message, previous=previous)
    if fit.walk is not None:
        tok.remember_walk(fit.walk, replacing=previous)
    cleared: LayerCut | None = None
    if tally.layer.clear_tool_results and input_message is not None:
        history, fit, cleared = _clear_to_fit(tok, history, fit, input_message, cap)
    _record_fit(tally, fit)
    summarize: SummarizeRequest | None = None
    if not fit.dropped:
        # everything was walked; messages removed as repairs still count as demand
        whole = tok.count_messages(history) if tally.repairs else fit.tokens
        tally.demand = max(tally.demand, whole)
    else:
        summarizing = tally.layer.overflow == "summarize" and request_summary
        _cut_dropped(tok, tally, fit, summarizing=summarizing)
        if summarizing:
            summarize = SummarizeRequest(fit.dropped, previous_summary, fit.kept)
    if cleared is not None:
        tally.cuts.append(cleared)
    if input_message is not None and not _contains(fit.kept, input_message):
        raise BudgetExceededError(
            tally.layer.name,
            tally.demand,
            cap,
            detail=(
                "the input (last HumanMessage) and the messages after it do not fit; "
                "raise the ratio of checkpoint_messages"
            ),
        )
    return _HistoryOutcome(fit.kept, fit.dropped, summarize, fit)


def _record_fit(tally: LayerTally, fit: HistoryFit) -> None:
    """The kept messages, their tokens, and the repairs of ``fit`` into ``tally``."""
    tally.messages = list(fit.kept)
    tally.tokens = fit.tokens
    if not fit.repairs:
        return
    # leading AI units removed next to the cut are part of the trim, not a repair
    dropped = bool(fit.dropped)
    trim = [r for r in fit.repairs if dropped and r.endswith("must start on a HumanMessage")]
    repairs = [r for r in fit.repairs if r not in trim]
    tally.notes.extend(trim)
    if repairs:
        tally.cuts.append(LayerCut("repaired", 0, len(repairs), None, "structure"))
        tally.repairs.extend(repairs)


def _cut_dropped(tok: Tokenizer, tally: LayerTally, fit: HistoryFit, *, summarizing: bool) -> None:
    """Record the dropped prefix of ``fit`` (its demand and its cut) in ``tally``.

    Raises:
        BudgetExceededError: the history's overflow rule is ``error``.
    """
    layer, cap, dropped = tally.layer, tally.cap, fit.dropped
    dropped_tokens: int | None
    if layer.overflow == "error" or summarizing:
        dropped_tokens = tok.count_messages(dropped)
    else:  # drop_oldest: count only as far as already counted (plus the unit over)
        counted, complete = count_newest(
            tok,
            dropped,
            max(tally.demand - fit.tokens, cap - fit.tokens),
            counted=fit.dropped_counts,  # what the walk counted already
        )
        dropped_tokens = counted if complete else None
        tally.demand = max(tally.demand, fit.tokens + counted)
    if dropped_tokens is not None:
        tally.demand = max(tally.demand, fit.tokens + dropped_tokens)
    if layer.overflow == "error":
        raise BudgetExceededError(layer.name, tally.demand, cap, detail="overflow rule 'error'")
    action: Literal["summarized", "dropped_oldest"] = (
        "summarized" if summarizing else "dropped_oldest"
    )
    tally.cuts.append(LayerCut(action, dropped_tokens, len(dropped), cap, layer.overflow))


def tool_result_marker(tokens: int) -> str:
    """What a cleared tool result reads (``clear_tool_results``)."""
    return f"[tool result cleared: {tokens} tokens]"


def _clear_to_fit(
    tok: Tokenizer,
    history: Sequence[BaseMessage],
    fit: HistoryFit,
    input_message: BaseMessage,
    cap: int,
) -> tuple[Sequence[BaseMessage], HistoryFit, LayerCut | None]:
    """Fit again with the current turn's tool results cleared, when the input did not fit."""
    if _contains(fit.kept, input_message):
        return history, fit, None
    history, cleared = _clear_tool_results(tok, history, input_message, cap)
    if cleared is not None:
        fit = fit_history(history, max_tokens=cap, count=tok.count_message)
    return history, fit, cleared


def _clear_tool_results(
    tok: Tokenizer, history: Sequence[BaseMessage], input_message: BaseMessage, cap: int
) -> tuple[Sequence[BaseMessage], LayerCut | None]:
    """``clear_tool_results``: shorten the current turn until it fits ``cap``.

    The current turn is the input HumanMessage and everything after it. Its tool
    results are replaced, oldest first, by `tool_result_marker` (a copy: the given
    history is never changed; the ToolMessage stays, so no tool-call pair breaks) until
    the turn fits or none is left. Returns the history to fit and the cut (None when
    nothing was cleared).
    """
    start = next((i for i in range(len(history) - 1, -1, -1) if history[i] is input_message), None)
    if start is None:
        return history, None
    turn = list(history[start:])
    tokens = [tok.count_message(m) for m in turn]
    total = sum(tokens)
    cleared = removed = 0
    for index, message in enumerate(turn):
        if total <= cap:
            break
        if message.type != "tool":
            continue
        marker = tool_result_marker(tokens[index])
        short = message.model_copy(update={"content": marker})
        now = tok.count_message(short)
        if now >= tokens[index]:
            continue
        turn[index] = short
        removed += tokens[index] - now
        total -= tokens[index] - now
        cleared += 1
    if not cleared:
        return history, None
    cut = LayerCut("cleared_tool_results", removed, cleared, cap, "clear_tool_results")
    return (*history[:start], *turn), cut


# ----------------------------------------------------------------------------- next turn


class _TurnLayers(NamedTuple):
    """What a composition made of its layers but the history, for its next turn
    (`_advance_turn`): the same while its frame and fits are and the frame's messages are
    unchanged."""

    #: the fits it took (the frame's, or those of caps a history moved, `_call_caps`)
    fits: Mapping[str, _Fitted | None]
    #: each layer's tally but the history's (only read, by this and later reports)
    tallies: Mapping[str, LayerTally]
    #: the frame's messages the tallies give out (checked unchanged on every next turn)
    shared: tuple[_Built, ...]
    before: tuple[BaseMessage, ...]
    after: tuple[BaseMessage, ...]
    before_layers: tuple[str, ...]
    after_layers: tuple[str, ...]
    #: the tokens of ``before`` and ``after``
    tokens: int
    #: what the tallies give the report's warnings (`ctxpolicy.report.tally_warnings`):
    #: the history adds none (a next turn's dropped leading units are a note, not a
    #: repair; it is no block, so its cuts are not events)
    warnings: TallyWarnings


def _turn_layers(
    call: ComposeCall, fits: Mapping[str, _Fitted | None], tallies: Mapping[str, LayerTally]
) -> _TurnLayers | None:
    """The `_TurnLayers` of a composition whose tallies are final (see `_remember_turn`);
    None when a layer gives out a message other than its frame's (one a caller changed)."""
    others: dict[str, LayerTally] = {}
    shared: list[_Built] = []
    parts: tuple[list[BaseMessage], list[BaseMessage]] = ([], [])
    names: tuple[list[str], list[str]] = ([], [])
    tokens = 0
    side = 0  # before the history, then after it
    for layer in call.plan.layers:
        tally = tallies[layer.name]
        if layer.kind == "history":
            side = 1
            continue
        others[layer.name] = tally
        tokens += tally.tokens
        parts[side].extend(tally.messages)
        names[side].extend([layer.name] * len(tally.messages))
        fitted = fits.get(layer.name)
        if fitted is not None and fitted.built is not None:
            if tally.messages[0] is not fitted.built.message:
                return None
            shared.append(fitted.built)
    return _TurnLayers(
        fits,
        others,
        tuple(shared),
        tuple(parts[0]),
        tuple(parts[1]),
        tuple(names[0]),
        tuple(names[1]),
        tokens,
        tally_warnings(call.plan, others),
    )


def _remember_turn(
    call: ComposeCall,
    frame: _Frame,
    fits: Mapping[str, _Fitted | None],
    tallies: Mapping[str, LayerTally],
    history: _HistoryOutcome,
) -> None:
    """Remember the walk of a composition its next turn can take (`_next_turn`), with
    what it made of the other layers (a `TurnWalk` in its `HistoryWalk`'s place).

    Only a composition the next turn reproduces: no merged system message, no query of
    its own outside the frame (`_turn_layer`), a history dropped or kept whole without a
    repair (leading units dropped so it starts on a HumanMessage are not one), and the
    frame's messages given out as the frame built them.
    """
    layer = frame.turn_layer
    if layer is None or history.summarize is not None or tallies[layer.name].repairs:
        return
    layers = _turn_layers(call, fits, tallies)
    if layers is None:
        return
    fit = history.fit
    assert fit is not None
    walk = fit.walk
    assert walk is not None
    turn = TurnWalk(
        walk.window,
        walk.contents,
        walk.units,
        walk.prefix,
        walk.over,
        walk.start,
        walk.cut,
        walk.end,
        walk.reached_start,
        frame,
        layers,
    )
    call.tokenizer.remember_walk(turn, replacing=walk)


def _next_turn(
    call: ComposeCall,
    frame: _Frame,
    demands: Mapping[str, int],
    caps: Mapping[str, int],
    fits: Mapping[str, _Fitted | None],
    *,
    extras: ReportExtras,
    request_summary: bool,
) -> Composition | None:
    """`compose_call` of a conversation's next turn, from its last call (None: compose
    the general way; see `_advance_turn`)."""
    layer = frame.turn_layer
    if layer is None or (request_summary and layer.overflow == "summarize"):
        return None
    turn = _advance_turn(
        call.plan,
        frame,
        call.history,
        demand=demands[layer.name],
        cap=caps[layer.name],
        fits=fits,
        notes=call.notes,
        extras=extras,
        input_message=call.input_message,
    )
    if turn is None:
        return None
    layers, name, kept = turn.layers, layer.name, turn.kept
    return Composition(  # positional (in field order): see `build_report`
        turn.messages,
        turn.report,
        (*layers.before_layers, *repeat(name, len(kept)), *layers.after_layers),
        kept,
        turn.dropped,
        None,
        dict(frame.contexts),
    )


class NextTurn(NamedTuple):
    """A next turn composed from the conversation's last call (`compose_next_turn`)."""

    messages: tuple[BaseMessage, ...]
    report: ComposeReport
    #: the history sent
    kept: tuple[BaseMessage, ...]
    layers: _TurnLayers
    #: the call's history, or the caller's list, as `_advance_turn` was given it
    history: Sequence[Any]
    #: where the kept part starts in ``history``
    cut: int
    #: what the caller calls ``history`` (see `ctxpolicy.history.as_messages`)
    argument: str | None

    @property
    def dropped(self) -> Sequence[BaseMessage]:
        """The older history that did not fit (a read-only view of the input)."""
        return MessagesView(self.history, self.cut, argument=self.argument)


def compose_next_turn(
    plan: LayerPlan,
    *,
    system_prompt: str,
    history: Sequence[Any],
    argument: str,
    notes: Mapping[str, tuple[str, ...]],
    extras: ReportExtras = NO_EXTRAS,
) -> NextTurn | None:
    """The next turn of a call given only a system prompt and a history (no contexts, no
    runtime query), composed from the conversation's last call; None: not a next turn
    this can compose (compose it the general way).

    What `compose_call` composes for the same call (``request_summary=False``, the input
    the history's newest HumanMessage), reached without checking a `ComposeCall` first:
    the engine's plain path (`ctxpolicy.engine.PolicyEngine.compose`) tries it before
    anything else, and checks its arguments only when it declines (it takes none that a
    check would refuse: a system prompt equal to the frame's string). Only for plans whose
    caps are not redistributed (else the history moves the caps) and whose input comes
    from the history.

    Args:
        plan: The call's plan (``query: checkpoint``, no redistribution).
        system_prompt: The call's system prompt (anything but a string: None).
        history: The caller's list of messages (anything else: None).
        argument: What the caller calls it (as `ctxpolicy.history.as_messages` names it
            in the error about an item that is no message).
        notes: The call's notes (`input_notes` of no contexts).
        extras: What the call's report says beyond the composition.
    """
    frame = _plan_frame(get_tokenizer(plan.tokenizer), plan)
    if (
        frame is None
        or not frame.plain_turns
        or type(system_prompt) is not str
        or frame.system_prompt != system_prompt
        or type(history) is not list
    ):
        return None
    assert frame.turn_layer is not None  # a frame of plain turns has one
    name = frame.turn_layer.name
    return _advance_turn(
        plan,
        frame,
        history,
        argument=argument,
        demand=frame.demands[name],
        cap=frame.caps[name],
        fits=frame.fits,
        notes=notes,
        extras=extras,
    )


def _plan_frame(tok: Tokenizer, plan: LayerPlan) -> _Frame | None:
    """The frame ``tok`` remembers for ``plan`` (each plan has at most one), else None."""
    for frame in tok.frames:
        if type(frame) is _Frame and frame.plan is plan:
            return frame
    return None


def _advance_turn(
    plan: LayerPlan,
    frame: _Frame,
    history: Sequence[Any],
    *,
    argument: str | None = None,
    demand: int,
    cap: int,
    fits: Mapping[str, _Fitted | None],
    notes: Mapping[str, tuple[str, ...]],
    extras: ReportExtras,
    input_message: BaseMessage | None = None,
) -> NextTurn | None:
    """The composition of a conversation's next turn, from its last one (None: compose
    the general way).

    The last call's `TurnWalk` (same frame, same ``fits``: the other layers' fits to
    this call's caps) is advanced over the appended messages
    (`ctxpolicy.next_turn.advance_walk`), and the new history goes between the other
    layers' messages the last call made: the same messages and report as composing
    again, without making the other layers' records again. None whenever that would
    differ: a frame message the caller changed, a walk that cannot be advanced, an
    input that does not fit, a total over the available tokens.

    ``history``: the call's history, or the caller's list (``argument``: what the
    caller calls it, for the dropped part's view). ``input_message``: the call's input,
    which must be kept; None: the history's newest message of type 'human' when the
    plan takes its input from it (`_holds_input`).
    """
    tok = frame.tokenizer
    previous = latest_walk(tok.walks, history)
    if type(previous) is not TurnWalk or previous.frame is not frame:
        return None
    layers: _TurnLayers = previous.layers
    if layers.fits is not fits or not all(map(_unchanged_message, layers.shared)):
        return None
    items = _items_as_given(history)
    assert items is not None  # latest_walk found a walk: the items are read as given
    layer = frame.turn_layer
    assert layer is not None  # a frame without one has no TurnWalk
    name = layer.name
    advanced = advance_walk(
        previous, items, len(history), max_tokens=cap, count=tok.count_message, layers=layers
    )
    if advanced is None:
        return None
    walk, part = advanced
    kept = tuple(items[part.cut : walk.end])
    total = layers.tokens + part.tokens
    if total > plan.available_tokens or not (
        _contains(kept, input_message)
        if input_message is not None
        else plan.query_path == "runtime" or _holds_input(kept)
    ):
        return None  # the general way raises
    tok.remember_walk(walk, replacing=previous)
    messages = (*layers.before, *kept, *layers.after)
    draft = _HistoryDraft(tok, layer, kept, part, demand, cap, history)
    report = build_report(
        plan,
        _TurnTallies(layers.tallies, name, draft),
        total=total,
        messages=messages,
        notes=notes,
        summarized=False,
        extras=extras,
        warnings=layers.warnings,
    )
    return NextTurn(messages, report, kept, layers, history, part.cut, argument)


class _TurnTallies(Mapping[str, LayerTally]):
    """A next turn's tallies (`_advance_turn`): the other layers' as its last call left
    them, and the history's, made when read (`_history_tally`).

    The report reads a layer's tally only when that layer's report is first read
    (`ctxpolicy.report.LayerReports`), and most calls read none: the history's demand
    and cut are then never worked out (docs/design.md, on the next turn).
    """

    __slots__ = ("_draft", "_name", "_others")

    def __init__(self, others: Mapping[str, LayerTally], name: str, draft: _HistoryDraft) -> None:
        self._others, self._name, self._draft = others, name, draft

    def __getitem__(self, name: str) -> LayerTally:
        # made on each read: the report reads it once, and keeps the layer report it makes
        return _history_tally(self._draft) if name == self._name else self._others[name]

    def __iter__(self) -> Iterator[str]:
        yield from self._others
        yield self._name

    def __len__(self) -> int:
        return len(self._others) + 1


class _HistoryDraft(NamedTuple):
    """What a next turn's history tally is made of (`_history_tally`)."""

    tok: Tokenizer
    layer: PlannedLayer
    kept: tuple[BaseMessage, ...]
    part: KeptPart
    demand: int
    cap: int
    #: the call's history, or the caller's list
    history: Sequence[Any]


def _history_tally(draft: _HistoryDraft) -> LayerTally:
    """The history's tally of a next turn (`_advance_turn`): what `_fit_history_layer`
    and `_cut_dropped` record. The dropped part is counted, past the counts the walk
    made, from the history as it is when this runs (as `NextTurn.dropped` reads it)."""
    tok, layer, kept, part, demand, cap, history = draft
    tally = LayerTally(layer, list(kept), part.tokens, demand, cap, [], [], "history")
    note = part.note
    if note:
        tally.notes.append(note)
    if part.cut:
        # the count stops within the walked units (the lead units and the one the walk
        # stopped at exceed the cap's room), all messages: no item is converted or named
        dropped = MessagesView(history, part.cut)
        _cut_next(tok, tally, dropped, part.dropped_counts)
    else:  # the whole history is kept: it asks for what it uses
        tally.demand = max(demand, part.tokens)
    return tally


_type_of = attrgetter("type")


def _holds_input(kept: Sequence[BaseMessage]) -> bool:
    """Whether ``kept``, the newest messages of a history, hold its input: the newest
    message of type 'human' (`_checkpoint_input`). Not whenever they start on a
    HumanMessage: a `HumanMessageChunk` is one, of another type."""
    return "human" in map(_type_of, reversed(kept))


def _cut_next(
    tok: Tokenizer, tally: LayerTally, dropped: Sequence[BaseMessage], counted: Sequence[int]
) -> None:
    """The history's demand and cut on a next turn that dropped its ``dropped`` prefix:
    what `_fit_history_layer` and `_cut_dropped` record (``drop_oldest``)."""
    tokens, cap = tally.tokens, tally.cap
    limit = max(tally.demand - tokens, cap - tokens)
    found, complete = count_newest(tok, dropped, limit, counted=counted)
    tally.demand = max(tally.demand, tokens + found)
    cut = LayerCut(
        "dropped_oldest", found if complete else None, len(dropped), cap, tally.layer.overflow
    )
    tally.cuts.append(cut)


# ----------------------------------------------------------------------------- one go


def compose_layers(
    plan: LayerPlan,
    *,
    system_prompt: str,
    checkpoint_messages: Sequence[BaseMessage] = (),
    contexts: Mapping[str, str | None] | None = None,
    query: str | None = None,
    sources: Mapping[str, LayerSource] | None = None,
    skipped: Sequence[SkippedCollector] = (),
    notes: Mapping[str, Sequence[str]] | None = None,
    request_summary: bool = True,
    reserved: Collection[str] = (),
) -> Composition:
    """Check one call's inputs and compose its messages and report (pure).

    Args:
        plan: The process's `LayerPlan`.
        system_prompt: The agent's private prompt (first message).
        checkpoint_messages: The history; ignored when the process forbids history.
        contexts: Block texts by layer (keys end in ``__context``).
        query: The runtime input (``query: runtime`` processes only).
        sources: Where each block value came from (for the report).
        skipped: Collectors skipped with ``on_error: skip`` (for the report).
        notes: Extra per-layer notes for the report.
        request_summary: With history overflow ``summarize``, return a
            `SummarizeRequest` for a dropped prefix (else plain ``drop_oldest``).
        reserved: Block layers whose whole cap is held for them when caps are
            redistributed, whatever their text (see `ComposeCall`).

    Returns:
        The `Composition`.

    Raises:
        QueryPathError: query missing (runtime), given (checkpoint), or sent twice.
        BudgetExceededError: a layer with overflow ``error`` does not fit, or the
            input of a checkpoint call does not fit the history's cap.
        ValueError: a bad ``contexts`` key.
        TypeError: a value of the wrong type.
    """
    call = check_call(
        plan,
        system_prompt=system_prompt,
        checkpoint_messages=checkpoint_messages,
        contexts=contexts,
        query=query,
        reserved=reserved,
    )
    if notes:
        merged = {key: tuple(value) for key, value in notes.items()}
        for key, value in call.notes.items():
            merged[key] = (*merged.get(key, ()), *value)
        call = dataclasses.replace(call, notes=merged)
    return compose_call(
        call,
        sources=sources,
        request_summary=request_summary,
        extras=ReportExtras(skipped=tuple(skipped)) if skipped else NO_EXTRAS,
    )


def compose_messages(
    plan: LayerPlan,
    *,
    system_prompt: str,
    checkpoint_messages: Sequence[BaseMessage] = (),
    contexts: Mapping[str, str | None] | None = None,
    query: str | None = None,
) -> list[BaseMessage]:
    """Render one call's messages from explicit values (pure: no state, no I/O).

    The layers, order, caps and overflow rules come from ``plan``. A history overflow
    of ``summarize`` needs a summarizer, which a pure function cannot call: here it
    drops the oldest units (like ``drop_oldest``); `PolicyEngine.compose` summarizes.

    Args:
        plan: From `plan_layers` or `PolicyEngine.plan`.
        system_prompt: The agent's private prompt.
        checkpoint_messages: The history (ignored when the process forbids history).
        contexts: Block texts by ``__context`` layer.
        query: The runtime input (only for ``query: runtime`` processes).

    Returns:
        The messages, in policy order.

    Raises:
        QueryPathError: query missing, forbidden or sent twice.
        BudgetExceededError: a layer with overflow ``error`` does not fit.
        ValueError: a ``contexts`` key that is not a ``__context`` layer of the policy.
    """
    composition = compose_layers(
        plan,
        system_prompt=system_prompt,
        checkpoint_messages=checkpoint_messages,
        contexts=contexts,
        query=query,
        request_summary=False,
    )
    return list(composition.messages)


__all__ = [
    "SYSTEM_JOIN",
    "TOTAL",
    "ComposeCall",
    "Composition",
    "LayerTally",
    "NextTurn",
    "SummarizeRequest",
    "check_call",
    "check_contexts",
    "check_query_path",
    "check_system_prompt",
    "compose_call",
    "compose_layers",
    "compose_messages",
    "compose_next_turn",
    "input_notes",
    "message_factory",
    "tool_result_marker",
]
