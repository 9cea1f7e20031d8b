"""The compose report: what each layer got, why, and what was cut (see docs/design.md,
'Invariants of a composition').

Frozen dataclasses with ``to_dict()`` for JSON. `prefix_hashes` lets two calls be
compared for how much of their prompt a provider cache can reuse.

`build_report` is the one place a report is made: the composer hands it what it recorded
per layer (`ctxpolicy.compose.LayerTally`) and what the engine knows about the call (`ReportExtras`:
skipped collectors, recalled units, inline references, curation, earlier summaries);
nothing edits a report afterwards.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeVar, overload

from ctxpolicy.layers import CHECKPOINT_MESSAGES, QUERY, layer_kind
from ctxpolicy.logs import Event, log_events

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

    from ctxpolicy.blocks.inline import QueryReference
    from ctxpolicy.compose import LayerTally
    from ctxpolicy.plan import LayerPlan
    from ctxpolicy.recall.recaller import RecallResult
    from ctxpolicy.recall.select import RecalledUnit

LayerSource = Literal["argument", "collector", "contexts", "summary", "history", "none"]


@dataclass(frozen=True, slots=True)
class LayerCut:
    """Something removed from a layer to make it fit.

    Attributes:
        action: ``truncated`` (tokens cut, marker added), ``dropped`` (the whole block
            removed), ``dropped_oldest`` (older history units removed),
            ``summarized`` (older history folded into ``compression__context``) or
            ``repaired`` (messages removed to keep the history structurally valid) or
            ``cleared_tool_results`` (tool results of the current turn replaced by a
            marker, ``clear_tool_results``).
        tokens: Tokens removed, or None when they were not counted: a history prefix
            dropped by ``drop_oldest`` is counted only as far as fitting counted anyway
            (trimming costs what is kept, not the length of the history).
        messages: Messages removed (history), else 0.
        cap: The token cap that forced the cut (None for a repair).
        rule: The overflow rule applied.
    """

    action: Literal[
        "truncated", "dropped", "dropped_oldest", "summarized", "repaired", "cleared_tool_results"
    ]
    tokens: int | None
    messages: int
    cap: int | None
    rule: str

    def describe(self) -> str:
        """One line, e.g. ``truncated 120 tokens to fit cap 800 (truncate_tail)``."""
        parts = [f"{self.messages} message(s)"] if self.messages else []
        if self.tokens is not None:
            parts.append(f"{self.tokens} tokens")
        fit = f" to fit cap {self.cap}" if self.cap is not None else ""
        return f"{self.action} {', '.join(parts)}{fit} ({self.rule})"

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON output."""
        return {
            "action": self.action,
            "tokens": self.tokens,
            "messages": self.messages,
            "cap": self.cap,
            "rule": self.rule,
        }


@dataclass(frozen=True, slots=True)
class LayerReport:
    """One layer of one call.

    Attributes:
        name: Layer name.
        kind: ``system_prompt``, ``block``, ``history`` or ``query``.
        included: Whether the process gets the layer at all.
        reason: The rule that included or excluded it.
        source: Where the value came from (``collector``, ``contexts``, ``summary``,
            ``argument``, ``history`` or ``none``).
        tokens: Tokens the layer's message(s) use in the result.
        cap: The layer's token cap for this call (after redistribution).
        base_cap: The cap from its ratio alone.
        messages: Number of messages of its own the layer contributes (0 for a layer
            whose text went into another layer's message: see ``merged_into``).
        demand: Tokens the layer would have used uncut.
        cuts: What was truncated, dropped, summarized or repaired, and why.
        error: The error text of a collector skipped with ``on_error: skip``.
        notes: Other facts worth knowing (ignored inputs, empty values, ...).
        recalled: For a recall layer, the units it shows (source, label, score).
        references: For the query layer, each inline reference (``[guide.md:12:30]``)
            resolved or skipped by ``layers.query.references``: ref, file, lines, tokens.
        merged_into: The layer whose SystemMessage carries this layer's text
            (``model.system_messages: merge``, or ``auto`` under a model host), else None.
    """

    name: str
    kind: str
    included: bool
    reason: str
    source: LayerSource = "none"
    tokens: int = 0
    cap: int | None = None
    base_cap: int | None = None
    messages: int = 0
    demand: int = 0
    cuts: tuple[LayerCut, ...] = ()
    error: str | None = None
    notes: tuple[str, ...] = ()
    recalled: tuple[RecalledUnit, ...] = ()
    references: tuple[QueryReference, ...] = ()
    merged_into: str | None = None

    @property
    def sent(self) -> bool:
        """Whether the layer's text reached the model: in messages of its own, or merged
        into another layer's SystemMessage."""
        return self.messages > 0 or self.merged_into is not None

    @property
    def truncated_tokens(self) -> int:
        """Tokens cut by truncation."""
        return sum(c.tokens or 0 for c in self.cuts if c.action == "truncated")

    @property
    def dropped_messages(self) -> int:
        """History messages removed (dropped, summarized or repaired)."""
        return sum(c.messages for c in self.cuts)

    @property
    def dropped(self) -> bool:
        """True when the whole block was dropped."""
        return any(c.action == "dropped" for c in self.cuts)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON output."""
        return {
            "name": self.name,
            "kind": self.kind,
            "included": self.included,
            "reason": self.reason,
            "source": self.source,
            "tokens": self.tokens,
            "cap": self.cap,
            "base_cap": self.base_cap,
            "messages": self.messages,
            "demand": self.demand,
            "cuts": [c.to_dict() for c in self.cuts],
            "error": self.error,
            "notes": list(self.notes),
            "recalled": [u.to_dict() for u in self.recalled],
            "references": [r.to_dict() for r in self.references],
            "merged_into": self.merged_into,
        }


@dataclass(frozen=True, slots=True)
class SkippedCollector:
    """A collector that failed with ``on_error: skip``: the layer stayed empty."""

    layer: str
    collector: str
    error: str

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON output."""
        return {"layer": self.layer, "collector": self.collector, "error": self.error}

    def describe(self) -> str:
        """One line, as ``report.warnings`` and the ``ctxpolicy`` logger give it."""
        return f"{self.layer}: {self.collector} collector skipped (on_error: skip): {self.error}"


@dataclass(frozen=True, slots=True)
class ComposeReport:
    """Everything about one composed call.

    Attributes:
        process: The process of the call.
        query_path: ``runtime`` or ``checkpoint``.
        tokenizer: The tokenizer that counted.
        available_tokens: Tokens the input may use.
        total_tokens: Tokens the composed messages use (``count_messages``).
        layers: Every layer of the policy order, included or not, in order. A tuple,
            or for a composed call a `LayerReports` (each layer's report made when
            first read; compares equal to the tuple).
        skipped: Collectors that failed with ``on_error: skip``.
        prefix_hashes: For each message position ``i``, a stable hash of messages
            ``0..i``; equal hashes between two calls mean a cacheable common prefix.
            Computed when first read (`PrefixHashes`; compares equal to the tuple).
        warnings: Advice (prompt-cache breakers, repairs, fallbacks), then the events
            a layer's report holds too (`layer_events`).
        summarized: Whether this call folded old history into a new summary.
        layer_events: How many of ``warnings``, the last ones, a layer's report holds
            too: a collector skipped (the layer's ``error``), a block layer's cut (its
            ``cuts``). `call_warnings` leaves them out.
    """

    process: str
    query_path: str
    tokenizer: str
    available_tokens: int
    total_tokens: int
    layers: Sequence[LayerReport]
    skipped: tuple[SkippedCollector, ...] = ()
    prefix_hashes: Sequence[str] = ()
    warnings: tuple[str, ...] = ()
    summarized: bool = False
    layer_events: int = 0

    @property
    def call_warnings(self) -> tuple[str, ...]:
        """``warnings`` less those a layer's report holds too (`layer_events`): what a
        preview lists besides its layer rows, each problem once."""
        return self.warnings[: len(self.warnings) - self.layer_events]

    def layer(self, name: str) -> LayerReport:
        """The report of layer ``name``.

        Raises:
            KeyError: ``name`` is not a layer of the policy order.
        """
        layers = self.layers
        if isinstance(layers, LayerReports):  # makes only the report asked for
            return layers.named(name)
        for layer in layers:
            if layer.name == name:
                return layer
        raise KeyError(f"no layer {name!r} in this report")

    @property
    def included(self) -> tuple[str, ...]:
        """Names of the included layers, in order."""
        return tuple(layer.name for layer in self.layers if layer.included)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON output."""
        return {
            "process": self.process,
            "query_path": self.query_path,
            "tokenizer": self.tokenizer,
            "available_tokens": self.available_tokens,
            "total_tokens": self.total_tokens,
            "summarized": self.summarized,
            "layers": [layer.to_dict() for layer in self.layers],
            "skipped": [s.to_dict() for s in self.skipped],
            "prefix_hashes": list(self.prefix_hashes),
            "warnings": list(self.warnings),
        }


def _field(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def canonical_message(message: BaseMessage) -> str:
    """A stable text form of a message: type, content, name, tool calls, tool call id.

    Fields are length-prefixed, so no content can imitate a field boundary.
    """
    kind = message.type
    content = message.content
    text = content if isinstance(content, str) else _field(content)
    calls = ""
    call_id = ""
    if kind == "ai":
        tool_calls = message.tool_calls  # type: ignore[attr-defined]
        if tool_calls:
            calls = _field(
                [
                    {"name": c.get("name"), "args": c.get("args"), "id": c.get("id")}
                    for c in tool_calls
                ]
            )
    elif kind == "tool":
        call_id = message.tool_call_id or ""  # type: ignore[attr-defined]
    name = message.name or ""
    return (
        f"{len(kind)}:{kind}{len(text)}:{text}{len(name)}:{name}"
        f"{len(calls)}:{calls}{len(call_id)}:{call_id}"
    )


def prefix_hashes(messages: Iterable[BaseMessage]) -> tuple[str, ...]:
    """Hash of every prefix of ``messages`` (blake2b-128 over canonical forms).

    ``prefix_hashes(a)[i] == prefix_hashes(b)[i]`` iff the first ``i + 1`` messages of
    ``a`` and ``b`` are the same (up to hash collisions).
    """
    digest = hashlib.blake2b(digest_size=16)
    out: list[str] = []
    for message in messages:
        encoded = canonical_message(message).encode("utf-8")
        digest.update(len(encoded).to_bytes(8, "big"))
        digest.update(encoded)
        out.append(digest.copy().hexdigest())
    return tuple(out)


_T = TypeVar("_T")


class _TupleStandIn(Sequence[_T]):
    """A sequence that stands for a tuple it makes when first needed (`PrefixHashes`,
    `LayerReports`): equal to and hashing as that tuple, shown and pickled as it."""

    __slots__ = ()

    def _as_tuple(self) -> tuple[_T, ...]:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _TupleStandIn):
            return self._as_tuple() == other._as_tuple()
        if isinstance(other, tuple):
            return self._as_tuple() == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._as_tuple())

    def __repr__(self) -> str:
        return repr(self._as_tuple())

    def __reduce__(self) -> tuple[Any, ...]:
        return (tuple, (self._as_tuple(),))


class PrefixHashes(_TupleStandIn[str]):
    """`prefix_hashes` of a call's messages, computed when first read (then kept).

    Most calls never read their prefix hashes; hashing every message on every call would
    cost more than the rest of a warm compose. Behaves like the tuple `prefix_hashes`
    returns (indexing, slices as tuples, ``len``, equality with tuples), and pickles as it.
    """

    __slots__ = ("_messages", "_value")

    def __init__(self, messages: Iterable[BaseMessage]) -> None:
        self._messages: tuple[BaseMessage, ...] | None = tuple(messages)
        self._value: tuple[str, ...] | None = None

    def _as_tuple(self) -> tuple[str, ...]:
        value = self._value
        if value is None:
            value = prefix_hashes(self._messages or ())
            self._value, self._messages = value, None
        return value

    def __len__(self) -> int:
        value = self._value
        if value is not None:
            return len(value)
        return len(self._messages or ())

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[str, ...]: ...

    def __getitem__(self, index: int | slice) -> str | tuple[str, ...]:
        return self._as_tuple()[index]

    def __iter__(self) -> Iterator[str]:
        return iter(self._as_tuple())


class LayerReports(_TupleStandIn[LayerReport]):
    """The `LayerReport` of each layer of a composed call, each made when first read.

    Every compose call has a report, but most callers read few of its layers (the
    LangChain middleware reads one); making every layer's frozen report up front was about
    15 % of the engine's own work on a next turn (docs/design.md, "The next turn costs
    what is new").
    Behaves like the tuple it stands for (indexing, slices as tuples, ``len``, equality
    and hash as that tuple) and pickles as it. What it reads is the composer's record
    of the call, which nothing changes once the call returned.
    """

    __slots__ = ("_made", "_make", "_names")

    def __init__(self, names: Sequence[str], make: Callable[[int], LayerReport]) -> None:
        self._names = tuple(names)
        self._make = make
        self._made: list[LayerReport | None] = [None] * len(self._names)

    def _at(self, index: int) -> LayerReport:
        made = self._made[index]
        if made is None:
            made = self._made[index] = self._make(index)
        return made

    def named(self, name: str) -> LayerReport:
        """The report of layer ``name`` (made if not yet).

        Raises:
            KeyError: no layer of this report is called ``name``.
        """
        try:
            index = self._names.index(name)
        except ValueError:
            raise KeyError(f"no layer {name!r} in this report") from None
        return self._at(index)

    def _as_tuple(self) -> tuple[LayerReport, ...]:
        return tuple(self._at(index) for index in range(len(self._names)))

    def __len__(self) -> int:
        return len(self._names)

    @overload
    def __getitem__(self, index: int) -> LayerReport: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[LayerReport, ...]: ...

    def __getitem__(self, index: int | slice) -> LayerReport | tuple[LayerReport, ...]:
        if isinstance(index, slice):
            return tuple(self._at(i) for i in range(*index.indices(len(self._names))))
        size = len(self._names)
        position = index + size if index < 0 else index
        if not 0 <= position < size:
            raise IndexError("LayerReports index out of range")
        return self._at(position)

    def __iter__(self) -> Iterator[LayerReport]:
        for index in range(len(self._names)):
            yield self._at(index)


def common_prefix(a: ComposeReport, b: ComposeReport) -> int:
    """How many leading messages two calls share (what a prompt cache can reuse)."""
    count = 0
    for left, right in zip(a.prefix_hashes, b.prefix_hashes, strict=False):
        if left != right:
            break
        count += 1
    return count


# ----------------------------------------------------------------------------- building


_NO_RECALL: Mapping[str, RecallResult] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ReportExtras:
    """What a call's report says beyond what the composer saw (the engine's side).

    Attributes:
        skipped: Collectors that failed with ``on_error: skip``.
        warnings: Call-level advice (e.g. a ``summarize`` overflow that fell back).
        recalled: Per recall layer, what its `Recaller` returned.
        references: The query's inline references (``layers.query.references``).
        curated: Targets dismissed from the history (``checkpoint_messages.curate``).
        summary_cuts: The ``summarized`` cuts of this call's earlier passes.
        summarized: Whether this call folded old history into a new summary.
    """

    skipped: tuple[SkippedCollector, ...] = ()
    warnings: tuple[str, ...] = ()
    recalled: Mapping[str, RecallResult] = field(default_factory=lambda: _NO_RECALL)
    references: tuple[QueryReference, ...] = ()
    curated: tuple[str, ...] = ()
    summary_cuts: tuple[LayerCut, ...] = ()
    summarized: bool = False

    @property
    def annotates_layers(self) -> bool:
        """Whether any layer gets notes, units or references from these extras."""
        return bool(self.recalled or self.references or self.curated)


#: A call with nothing beyond what the composer sees.
NO_EXTRAS = ReportExtras()


def skip_note(error: str) -> str:
    """The note of a layer whose collector was skipped (its ``error`` holds the reason)."""
    return f"collector skipped (on_error: skip): {error}"


def recall_note(result: RecallResult) -> str:
    """The note a recall layer's report carries: the thread by the id the caller gave, an
    index keyed by the conversation's first message (an internal ``~...`` key) in words."""
    thread = (
        "this conversation (no thread_id: keyed by its first message)"
        if result.thread.startswith("~")
        else f"thread {result.thread!r}"
    )
    return (
        f"recall: {thread}, {result.indexed} new message(s) indexed, "
        f"{len(result.units)} unit(s) recalled"
    )


def curation_note(targets: Sequence[str]) -> str:
    """The note the history's report carries when dismissed messages were replaced."""
    return (
        f"curated: {len(targets)} dismissed message(s) shown as placeholders ({', '.join(targets)})"
    )


@dataclass(frozen=True, slots=True)
class _Annotation:
    notes: tuple[str, ...] = ()
    recalled: tuple[RecalledUnit, ...] = ()
    references: tuple[QueryReference, ...] = ()


_PLAIN = _Annotation()


def _annotation(name: str, extras: ReportExtras, references_layer: str) -> _Annotation:
    """The notes, recalled units and references ``extras`` give layer ``name``."""
    notes: list[str] = []
    recalled: tuple[RecalledUnit, ...] = ()
    result = extras.recalled.get(name)
    if result is not None:
        recalled = result.units
        notes.append(recall_note(result))  # its warnings (a fallback) are the call's
    references: tuple[QueryReference, ...] = ()
    if name == references_layer and extras.references:
        references = extras.references
        notes.extend(
            f"reference {r.ref} skipped (on_error: skip): {r.error}"
            for r in references
            if r.error is not None
        )
    if name == CHECKPOINT_MESSAGES and extras.curated:
        notes.append(curation_note(extras.curated))
    return _Annotation(tuple(notes), recalled, references)


def _excluded_report(
    plan: LayerPlan, name: str, notes: Sequence[str], annotation: _Annotation
) -> LayerReport:
    exclusion = plan.exclusion(name)
    return LayerReport(
        name=name,
        kind=layer_kind(name),
        included=False,
        reason=exclusion.reason if exclusion else "not in the plan",
        notes=(*notes, *annotation.notes),
        recalled=annotation.recalled,
        references=annotation.references,
    )


def _empty_source(tally: LayerTally) -> LayerSource:
    if tally.layer.kind == "history":
        return "history"
    return tally.source if tally.cuts else "none"


def _included_report(
    tally: LayerTally,
    *,
    notes: Sequence[str],
    error: str | None,
    cuts_before: tuple[LayerCut, ...],
    annotation: _Annotation,
) -> LayerReport:
    layer_notes = [*tally.notes, *notes]
    if error is not None:
        layer_notes.append(skip_note(error))
    layer_notes.extend(tally.repairs)
    layer_notes.extend(annotation.notes)
    layer = tally.layer
    return LayerReport(
        name=layer.name,
        kind=layer.kind,
        included=True,
        reason=layer.reason,
        source=tally.source if tally.messages or tally.merged else _empty_source(tally),
        tokens=tally.tokens,
        cap=tally.cap,
        base_cap=layer.cap,
        messages=len(tally.messages),
        demand=tally.demand,
        cuts=(*cuts_before, *tally.cuts) if cuts_before else tuple(tally.cuts),
        error=error,
        notes=tuple(layer_notes),
        recalled=annotation.recalled,
        references=annotation.references,
        merged_into=tally.merged_into,
    )


def call_events(
    extras: ReportExtras, skips: Sequence[str], cuts: Sequence[str]
) -> tuple[Event, ...]:
    """What went differently in a fresh composition, as `ctxpolicy.logs` events: each
    fallback, each collector skipped (``skips``), each block layer cut (``cuts``,
    `TallyWarnings.cuts`)."""
    events: list[Event] = [(logging.WARNING, text) for text in extras.warnings]
    events += [(logging.WARNING, text) for text in skips]
    events += [(logging.INFO, text) for text in cuts]
    return tuple(events)


def build_report(
    plan: LayerPlan,
    tallies: Mapping[str, LayerTally],
    *,
    total: int,
    messages: Sequence[BaseMessage],
    notes: Mapping[str, Sequence[str]],
    summarized: bool,
    extras: ReportExtras = NO_EXTRAS,
    warnings: TallyWarnings | None = None,
) -> ComposeReport:
    """The report of one composition: every layer of the policy order, in order.

    Each layer's `LayerReport` is made when first read (`LayerReports`), from
    ``tallies`` and ``notes``, which the caller must not change afterwards.

    Args:
        plan: The call's plan.
        tallies: What the composer recorded, per included layer.
        total: Tokens of ``messages``.
        messages: The composed messages (for the prefix hashes).
        notes: Notes about the call's inputs, per layer (ignored values, ...).
        summarized: Whether this composition asks for a summary.
        extras: What the engine knows about the call.
        warnings: `tally_warnings` of ``plan`` and ``tallies`` when the caller has them
            (a next turn: its last call's, whose events are not logged again); None:
            made here.
    """
    order = plan.order or plan.names
    texts, layer_events = _report_warnings(plan, tallies, extras, warnings)
    # positional (in field order): a frozen dataclass sets keyword arguments more slowly
    return ComposeReport(
        plan.process,
        plan.query_path,
        plan.tokenizer,
        plan.available_tokens,
        total,
        LayerReports(order, _layer_maker(plan, tallies, order, notes, extras)),
        extras.skipped,
        PrefixHashes(messages),
        texts,
        summarized or extras.summarized,
        layer_events,
    )


def _report_warnings(
    plan: LayerPlan,
    tallies: Mapping[str, LayerTally],
    extras: ReportExtras,
    carried: TallyWarnings | None,
) -> tuple[tuple[str, ...], int]:
    """`ComposeReport.warnings` and ``layer_events`` (see `build_report`): the same for
    a fresh composition and a next turn carrying its last call's `TallyWarnings`."""
    tallied = tally_warnings(plan, tallies) if carried is None else carried
    skips = tuple(s.describe() for s in extras.skipped) if extras.skipped else ()
    if carried is None and (extras.warnings or skips or tallied.cuts):
        # a fresh composition's events are logged, once, here (a next turn's were)
        log_events(call_events(extras, skips, tallied.cuts))
    # a recall fallback: on every call's report, logged once by its recaller
    fallbacks = [w for result in extras.recalled.values() for w in result.warnings]
    if not (extras.warnings or fallbacks or skips or tallied.cuts):
        return tallied.plan, 0
    # the call's own, then what a layer's report holds too (`ComposeReport.call_warnings`)
    warnings = (*tallied.plan, *extras.warnings, *fallbacks, *skips, *tallied.cuts)
    return warnings, len(skips) + len(tallied.cuts)


class TallyWarnings(NamedTuple):
    """The warnings a composition's tallies give its report (`tally_warnings`)."""

    #: the plan's, then each layer's history repairs, in the policy order (before the
    #: engine's, `ReportExtras.warnings`)
    plan: tuple[str, ...]
    #: each cut of a block layer (truncated or dropped), as ``"layer: cut"``: events a
    #: layer's report holds too (`ComposeReport.layer_events`)
    cuts: tuple[str, ...]


def tally_warnings(plan: LayerPlan, tallies: Mapping[str, LayerTally]) -> TallyWarnings:
    """The `TallyWarnings` of ``tallies``, composed under ``plan``."""
    warnings = list(plan.warnings)
    cuts: list[str] = []
    for name in plan.order or plan.names:
        tally = tallies.get(name)
        if tally is None:
            continue
        if tally.repairs:
            warnings.append(f"{name}: history repaired: {'; '.join(tally.repairs)}")
        if tally.cuts and tally.layer.kind == "block":
            cuts.extend(f"{name}: {cut.describe()}" for cut in tally.cuts)
    return TallyWarnings(tuple(warnings), tuple(cuts))


def _layer_maker(
    plan: LayerPlan,
    tallies: Mapping[str, LayerTally],
    order: Sequence[str],
    notes: Mapping[str, Sequence[str]],
    extras: ReportExtras,
) -> Callable[[int], LayerReport]:
    """What makes the report of the ``index``-th layer of ``order`` (see `build_report`)."""
    references_layer = QUERY if QUERY in order else CHECKPOINT_MESSAGES

    def make(index: int) -> LayerReport:
        name = order[index]
        annotation = (
            _annotation(name, extras, references_layer) if extras.annotates_layers else _PLAIN
        )
        tally = tallies.get(name)
        if tally is None:
            return _excluded_report(plan, name, notes.get(name, ()), annotation)
        errors = {s.layer: s.error for s in extras.skipped}
        return _included_report(
            tally,
            notes=notes.get(name, ()),
            error=errors.get(name),
            cuts_before=extras.summary_cuts if tally.layer.kind == "history" else (),
            annotation=annotation,
        )

    return make


__all__ = [
    "NO_EXTRAS",
    "ComposeReport",
    "LayerCut",
    "LayerReport",
    "LayerReports",
    "LayerSource",
    "PrefixHashes",
    "ReportExtras",
    "SkippedCollector",
    "TallyWarnings",
    "build_report",
    "call_events",
    "canonical_message",
    "common_prefix",
    "curation_note",
    "prefix_hashes",
    "recall_note",
    "skip_note",
    "tally_warnings",
]
