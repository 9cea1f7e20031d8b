"""The pure composer: a `LayerPlan` plus explicit values in, ``list[BaseMessage]`` out.

No state, no I/O: it receives ``system_prompt``, ``checkpoint_messages``, ``contexts``
and ``query`` only (see docs/design.md, 'Two sides: the prompt and the state').
`compose_layers` is the one implementation; it also returns the report and, when the
history's overflow rule is ``summarize``, what should be summarized. `compose_messages`
is the public thin wrapper; `ctxpolicy.engine.PolicyEngine` adds collectors and the
summarizer on top.

Invariants (docs/design.md, 'Invariants of a composition'), checked here and pinned by
property tests: total tokens (``count_messages``) ≤ available, or `BudgetExceededError`;
messages in policy order; the query exactly once; the system prompt only first; the
history structurally valid.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ctxpolicy.errors import BudgetExceededError, QueryPathError
from ctxpolicy.layers import (
    BLOCK_SUFFIX,
    CHECKPOINT_MESSAGES,
    COMPRESSION,
    layer_kind,
)
from ctxpolicy.report import (
    ComposeReport,
    LayerCut,
    LayerReport,
    LayerSource,
    PrefixHashes,
    SkippedCollector,
)

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

    from ctxpolicy.history import HistoryFit
    from ctxpolicy.plan import LayerPlan, PlannedLayer
    from ctxpolicy.tokens import Tokenizer

#: Label of the whole input in a `BudgetExceededError` about the total.
TOTAL = "total"


_Text = tuple[str, "Callable[[str], BaseMessage]", "BaseMessage"]
"""A single-message layer's text, its message class, and the message built from it."""


@dataclass(frozen=True, slots=True)
class SummarizeRequest:
    """Older history that did not fit and should be folded into a summary.

    Attributes:
        dropped: The older prefix that did not fit (oldest first; a read-only view of
            the input history, see `ctxpolicy.history.PrefixView`).
        previous_summary: The ``compression__context`` text this call had.
        kept: The history that fits.
    """

    dropped: Sequence[BaseMessage]
    previous_summary: str | None
    kept: tuple[BaseMessage, ...]


@dataclass(frozen=True, slots=True)
class Composition:
    """Result of `compose_layers`.

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
class _Fitted:
    """Mutable scratch record of one layer while composing (never escapes)."""

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


def message_factory(role: str) -> Callable[[str], BaseMessage]:
    """The message class of a block role (``system``/``human``/``ai``)."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    if role == "human":
        return HumanMessage
    if role == "ai":
        return AIMessage
    return SystemMessage


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
        if value is not None and not isinstance(value, str):
            raise TypeError(f"contexts[{key!r}] must be a str or None, got {type(value).__name__}")
        out[key] = value
    return out


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
    process = plan.process
    if plan.query_path == "runtime":
        if query is None or not query.strip():
            raise QueryPathError(
                f"process {process!r} takes its input at runtime (query: runtime): "
                "pass a non-empty query="
            )
        if history and history[-1].type == "human" and history[-1].content == query:
            raise QueryPathError(
                f"process {process!r}: the query is already the last HumanMessage of "
                "checkpoint_messages; passing it as query= too would send it twice"
            )
        return None
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


def _fit_text(
    tok: Tokenizer,
    layer: PlannedLayer,
    text: str,
    make: Callable[[str], BaseMessage],
    cap: int,
    *,
    message: BaseMessage | None = None,
) -> tuple[BaseMessage | None, int, list[LayerCut]]:
    """Fit one text layer to ``cap``: (message or None, tokens, cuts).

    ``message`` is ``make(text)`` when the caller built it already.
    """
    if message is None:
        message = make(text)
    demand = tok.count_message(message)
    if demand <= cap:
        return message, demand, []
    rule = layer.overflow
    if rule == "error":
        raise BudgetExceededError(layer.name, demand, cap, detail="overflow rule 'error'")
    if rule == "drop":
        return None, 0, [LayerCut("dropped", demand, 0, cap, rule)]
    keep: Literal["head", "tail"] = "tail" if rule == "truncate_head" else "head"
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
            return fitted, tokens, [LayerCut("truncated", demand - tokens, 0, cap, rule)]
        budget -= tokens - cap
    if layer.kind != "block":
        raise BudgetExceededError(
            layer.name, demand, cap, detail=f"{rule}: not even a cut marker fits"
        )
    return None, 0, [LayerCut("dropped", demand, 0, cap, f"{rule}: marker does not fit")]


def _demands(
    tok: Tokenizer,
    plan: LayerPlan,
    *,
    texts: Mapping[str, _Text],
    history: Sequence[BaseMessage],
    reserved: Collection[str] = (),
) -> dict[str, int]:
    """Tokens each layer would use uncut, counting the history only as far as it matters.

    Text layers are one message each. The history is counted newest-first only when
    caps are redistributed, and only until it exceeds the most it could be given
    (``available`` minus what the other layers keep): past that point its exact size
    cannot change any cap, so the cost follows what is kept, not the history's length.
    Without redistribution `_fit_history_layer` sets the history's demand from what
    fitting counted.
    """
    demands: dict[str, int] = {}
    history_layer: PlannedLayer | None = None
    for layer in plan.layers:
        if layer.kind == "history":
            history_layer = layer
            demands[layer.name] = 0
        elif layer.name in texts:
            demands[layer.name] = tok.count_message(texts[layer.name][2])
        else:
            demands[layer.name] = 0
        if layer.name in reserved:
            demands[layer.name] = max(demands[layer.name], plan.caps.get(layer.name, 0))
    if history_layer is not None and plan.redistribute and history:
        caps = plan.caps
        others = sum(
            min(caps.get(name, 0), demand)
            for name, demand in demands.items()
            if name != history_layer.name
        )
        limit = max(plan.available_tokens - others, caps.get(history_layer.name, 0))
        demands[history_layer.name] = count_newest(tok, history, limit)[0]
    return demands


def count_newest(tok: Tokenizer, messages: Sequence[BaseMessage], limit: int) -> tuple[int, bool]:
    """Tokens of ``messages`` counted newest-first, stopping once above ``limit``.

    Returns:
        ``(tokens, complete)``: the tokens counted and whether every message was counted.
    """
    total = 0
    count_message = tok.count_message
    left = len(messages)
    for message in reversed(messages):
        total += count_message(message)
        left -= 1
        if total > limit and left:
            return total, False
    return total, True


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
    """Compose one call's messages and report (pure).

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
            redistributed, whatever their text (recall layers: their text is made
            after the history is cut, and the cut must not move when it arrives).

    Returns:
        The `Composition`.

    Raises:
        QueryPathError: query missing (runtime), given (checkpoint), or sent twice.
        BudgetExceededError: a layer with overflow ``error`` does not fit, or the
            input of a checkpoint call does not fit the history's cap.
        ValueError: a bad ``contexts`` key.
        TypeError: a value of the wrong type.
    """
    from ctxpolicy.budget import redistribute_caps
    from ctxpolicy.tokens import get_tokenizer

    if not isinstance(system_prompt, str):
        raise TypeError(f"system_prompt must be a str, got {type(system_prompt).__name__}")
    values = check_contexts(plan, contexts)
    extra_notes: dict[str, list[str]] = {k: list(v) for k, v in (notes or {}).items()}
    history = _select_history(plan, checkpoint_messages, values, extra_notes)
    input_message = check_query_path(plan, query, history)
    tok = get_tokenizer(plan.tokenizer)
    available = plan.available_tokens

    texts = _layer_texts(plan, system_prompt=system_prompt, values=values, query=query)
    demands = _demands(tok, plan, texts=texts, history=history, reserved=reserved)
    caps = plan.caps
    if plan.redistribute:
        caps = redistribute_caps(caps, demands, order=plan.names, available=available)

    fitted: dict[str, _Fitted] = {}
    history_fit = _HistoryOutcome((), (), None)
    for layer in plan.layers:
        source: LayerSource = "argument"
        if layer.kind == "block":
            source = (sources or {}).get(layer.name, "contexts" if layer.name in values else "none")
        record = _Fitted(layer, [], 0, demands[layer.name], caps.get(layer.name, 0), [], [], source)
        fitted[layer.name] = record
        if layer.kind == "history":
            history_fit = _fit_history_layer(
                tok,
                record,
                history,
                input_message=input_message,
                previous_summary=values.get(COMPRESSION) if request_summary else None,
                request_summary=request_summary,
            )
        elif layer.name in texts:
            text, make, built = texts[layer.name]
            message, tokens, cuts = _fit_text(tok, layer, text, make, record.cap, message=built)
            record.cuts.extend(cuts)
            if message is not None:
                record.messages, record.tokens = [message], tokens
        elif layer.kind == "block":
            record.notes.append("empty: no value this call")

    if plan.merge_system:
        _merge_leading_system(tok, plan, fitted)
    messages: list[BaseMessage] = []
    message_layers: list[str] = []
    total = 0  # == count_messages(messages): every record's tokens are its messages' counts
    for layer in plan.layers:
        record = fitted[layer.name]
        messages.extend(record.messages)
        message_layers.extend([layer.name] * len(record.messages))
        total += record.tokens
    if total > available:
        raise BudgetExceededError(TOTAL, total, available, detail="the layers together")
    report = _build_report(
        plan,
        fitted=fitted,
        total=total,
        skipped=skipped,
        notes=extra_notes,
        messages=messages,
        summarized=history_fit.summarize is not None,
    )
    return Composition(
        messages=tuple(messages),
        report=report,
        message_layers=tuple(message_layers),
        kept_history=history_fit.kept,
        dropped_history=history_fit.dropped,
        summarize=history_fit.summarize,
        contexts={k: v for k, v in values.items() if v},
    )


#: Joins the texts of system-role layers merged into one SystemMessage.
SYSTEM_JOIN = "\n\n"


def _merge_leading_system(tok: Tokenizer, plan: LayerPlan, fitted: Mapping[str, _Fitted]) -> None:
    """``model.system_messages: merge``: one SystemMessage for the leading system layers.

    The system prompt and the system-role blocks that follow it (empty layers aside)
    become the first layer's message, texts joined by a blank line. Each layer keeps
    its report: its tokens are what its text adds to the merged message (counted
    exactly, so the layers' tokens still sum to the merged message's count), its
    ``messages`` 0 past the first.
    """
    from langchain_core.messages import SystemMessage

    group: list[_Fitted] = []
    for layer in plan.layers:
        record = fitted[layer.name]
        if not record.messages:
            continue
        only = record.messages[0] if len(record.messages) == 1 else None
        system = layer.kind == "system_prompt" or (layer.kind == "block" and layer.role == "system")
        if not system or not isinstance(only, SystemMessage) or not isinstance(only.content, str):
            break
        group.append(record)
    if len(group) < 2:
        return
    text = ""
    counted = 0
    for index, record in enumerate(group):
        part = str(record.messages[0].content)
        text = part if index == 0 else f"{text}{SYSTEM_JOIN}{part}"
        merged_tokens = tok.count_message(SystemMessage(text))
        record.tokens, counted = merged_tokens - counted, merged_tokens
        record.merged = True
        if index:
            record.messages = []
            record.notes.append(
                f"merged into the first system message (model.system_messages: merge), "
                f"after {group[0].layer.name}"
            )
    group[0].messages = [SystemMessage(text)]


def _select_history(
    plan: LayerPlan,
    checkpoint_messages: Sequence[BaseMessage],
    values: Mapping[str, str | None],
    notes: dict[str, list[str]],
) -> Sequence[BaseMessage]:
    """The history this call uses (empty when the process forbids history)."""
    for key, value in values.items():
        if not plan.includes(key) and value:
            notes.setdefault(key, []).append(
                f"contexts value ignored: process {plan.process} excludes this layer"
            )
    if not plan.includes(CHECKPOINT_MESSAGES):
        if checkpoint_messages:
            notes.setdefault(CHECKPOINT_MESSAGES, []).append(
                f"ignored {len(checkpoint_messages)} message(s): process {plan.process} "
                "takes no history"
            )
        return ()
    given: object = checkpoint_messages
    if isinstance(given, str | bytes):
        raise TypeError("checkpoint_messages must be a sequence of messages, not a string")
    return checkpoint_messages  # fit_history names any walked element that is no message


def _layer_texts(
    plan: LayerPlan,
    *,
    system_prompt: str,
    values: Mapping[str, str | None],
    query: str | None,
) -> dict[str, _Text]:
    """Non-empty text, message class and message of every single-message layer."""
    out: dict[str, _Text] = {}
    for layer in plan.layers:
        if layer.kind == "system_prompt":
            text: str | None = system_prompt
            role = "system"
        elif layer.kind == "query":
            text = query if plan.query_path == "runtime" else None
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


@dataclass(frozen=True, slots=True)
class _HistoryOutcome:
    kept: tuple[BaseMessage, ...]
    dropped: Sequence[BaseMessage]
    summarize: SummarizeRequest | None


def _contains(messages: Sequence[BaseMessage], target: BaseMessage) -> bool:
    """Whether ``target`` is in ``messages`` (newest first, identity before equality)."""
    return any(m is target for m in reversed(messages)) or target in messages


def _fit_history_layer(
    tok: Tokenizer,
    record: _Fitted,
    history: Sequence[BaseMessage],
    *,
    input_message: BaseMessage | None,
    previous_summary: str | None,
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
    from ctxpolicy.history import fit_history

    layer, cap = record.layer, record.cap
    record.source = "history"
    fit = fit_history(history, max_tokens=cap, count=tok.count_message)
    cleared: LayerCut | None = None
    if layer.clear_tool_results and input_message is not None:
        history, fit, cleared = _clear_to_fit(tok, history, fit, input_message, cap)
    kept, dropped = fit.kept, fit.dropped
    record.messages = list(kept)
    record.tokens = fit.tokens
    # leading AI units removed next to the cut are part of the trim, not a repair
    trim = [r for r in fit.repairs if dropped and r.endswith("must start on a HumanMessage")]
    repairs = [r for r in fit.repairs if r not in trim]
    record.notes.extend(trim)
    if repairs:
        record.cuts.append(LayerCut("repaired", 0, len(repairs), None, "structure"))
        record.repairs.extend(repairs)
    summarize: SummarizeRequest | None = None
    if not dropped:
        # everything was walked; messages removed as repairs still count as demand
        whole = tok.count_messages(history) if repairs else fit.tokens
        record.demand = max(record.demand, whole)
    else:
        summarizing = layer.overflow == "summarize" and request_summary
        dropped_tokens: int | None
        if layer.overflow == "error" or summarizing:
            dropped_tokens = tok.count_messages(dropped)
        else:  # drop_oldest: count only as far as already counted (plus the unit over)
            counted, complete = count_newest(
                tok, dropped, max(record.demand - fit.tokens, cap - fit.tokens)
            )
            dropped_tokens = counted if complete else None
            record.demand = max(record.demand, fit.tokens + counted)
        if dropped_tokens is not None:
            record.demand = max(record.demand, fit.tokens + dropped_tokens)
        if layer.overflow == "error":
            raise BudgetExceededError(
                layer.name, record.demand, cap, detail="overflow rule 'error'"
            )
        action: Literal["summarized", "dropped_oldest"] = "dropped_oldest"
        if summarizing:
            summarize = SummarizeRequest(dropped, previous_summary, kept)
            action = "summarized"
        record.cuts.append(LayerCut(action, dropped_tokens, len(dropped), cap, layer.overflow))
    if cleared is not None:
        record.cuts.append(cleared)
    if input_message is not None and not _contains(kept, input_message):
        raise BudgetExceededError(
            layer.name,
            record.demand,
            cap,
            detail=(
                "the input (last HumanMessage) and the messages after it do not fit; "
                "raise the ratio of checkpoint_messages"
            ),
        )
    return _HistoryOutcome(kept, dropped, summarize)


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
    from ctxpolicy.history import fit_history

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


def _build_report(
    plan: LayerPlan,
    *,
    fitted: Mapping[str, _Fitted],
    total: int,
    skipped: Sequence[SkippedCollector],
    notes: Mapping[str, Sequence[str]],
    messages: Sequence[BaseMessage],
    summarized: bool,
) -> ComposeReport:
    errors = {s.layer: s.error for s in skipped}
    warnings = list(plan.warnings)
    reports: list[LayerReport] = []
    order = plan.order or plan.names
    planned = {layer.name: layer for layer in plan.layers}
    for name in order:
        record = fitted.get(name)
        if record is None:
            exclusion = plan.exclusion(name)
            reports.append(
                LayerReport(
                    name=name,
                    kind=layer_kind(name),
                    included=False,
                    reason=exclusion.reason if exclusion else "not in the plan",
                    notes=tuple(notes.get(name, ())),
                )
            )
            continue
        layer_notes = [*record.notes, *notes.get(name, ())]
        if name in errors:
            layer_notes.append(f"collector skipped (on_error: skip): {errors[name]}")
        if record.repairs:
            warnings.append(f"{name}: history repaired: {'; '.join(record.repairs)}")
            layer_notes.extend(record.repairs)
        reports.append(
            LayerReport(
                name=name,
                kind=record.layer.kind,
                included=True,
                reason=record.layer.reason,
                source=(
                    record.source if record.messages or record.merged else _empty_source(record)
                ),
                tokens=record.tokens,
                cap=record.cap,
                base_cap=planned[name].cap,
                messages=len(record.messages),
                demand=record.demand,
                cuts=tuple(record.cuts),
                error=errors.get(name),
                notes=tuple(layer_notes),
            )
        )
    return ComposeReport(
        process=plan.process,
        query_path=plan.query_path,
        tokenizer=plan.tokenizer,
        available_tokens=plan.available_tokens,
        total_tokens=total,
        layers=tuple(reports),
        skipped=tuple(skipped),
        prefix_hashes=PrefixHashes(messages),
        warnings=tuple(warnings),
        summarized=summarized,
    )


def _empty_source(record: _Fitted) -> LayerSource:
    if record.layer.kind == "history":
        return "history"
    return record.source if record.cuts else "none"


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
    "TOTAL",
    "Composition",
    "SummarizeRequest",
    "check_contexts",
    "check_query_path",
    "compose_layers",
    "compose_messages",
    "count_newest",
    "message_factory",
    "tool_result_marker",
]
