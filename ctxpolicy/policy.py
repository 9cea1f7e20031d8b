"""The policy format: pydantic models that are its single source (see docs/design.md).

These models define the format. The JSON Schema that editors and CI see
(``ctxpolicy/schemas/ctxpolicy.schema.json``) is generated from them by
`ctxpolicy.schemas.generate` (``python -m ctxpolicy.schemas.generate --write``): every
description, default, enumeration, bound and conditional rule of the schema is written
here, on the fields (``Field(description=...)``) and the models (``model_config``'s
``json_schema_extra``), and tests/validation/test_schema_generated.py fails when the
shipped file and the models drift apart. The fixed sets of values come from
`ctxpolicy.layers`.

The models check structure only; semantic rules (order, persistence, ...) live in
``ctxpolicy.validation.semantic``. `Policy.model_validate` accepts and rejects exactly
what the schema does (tests/validation/test_schema_parity.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Literal, NamedTuple, TypeVar, cast

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    StrictBool,
    WrapSerializer,
    field_validator,
    model_validator,
)
from typing_extensions import TypeAliasType

from ctxpolicy.diagnostics import Location
from ctxpolicy.layers import (
    BLOCK_LAYER_PATTERN,
    CHECKPOINT_MESSAGES,
    DEFAULT_ORDER,
    DEFAULT_PROCESSES,
    OVERFLOW_RULES,
    QUERY,
    SYSTEM_PROMPT,
    FileToolName,
    LayerKind,
    MemorySource,
    MemoryStrategy,
    MemoryTier,
    OverflowRule,
    QueryPath,
    Role,
    SystemMessagesMode,
    TokenizerName,
    layer_kind,
)
from ctxpolicy.policy_views import PolicyViews

POLICY_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]*$"
CALLABLE_TARGET_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_.]*$"
PROCESS_NAME_PATTERN = r"^[a-z][a-z0-9_]*$"
LAYER_NAME_PATTERN = r"^(system_prompt|checkpoint_messages|query|[a-z][a-z0-9_]*__context)$"
SERVICE_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.-]*$"
FIELD_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
ENV_VAR_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
_PROCESS_NAME_RE = re.compile(PROCESS_NAME_PATTERN)

_V = TypeVar("_V")


def _freeze(value: Mapping[str, _V]) -> Mapping[str, _V]:
    return MappingProxyType(dict(value))


def _thaw(value: Mapping[str, Any], handler: SerializerFunctionWrapHandler) -> Any:
    return handler(dict(value))


def _json_number(value: Any) -> Any:
    # JSON Schema's number/integer never accept a bool or a numeric string; pydantic's lax
    # mode would. Refusing them here keeps the models and the schema in step.
    if isinstance(value, bool | str | bytes):
        raise ValueError("Input should be a number")  # noqa: TRY004 - pydantic wants ValueError
    return value


def _json_integral(value: Any) -> Any:
    value = _json_number(value)
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _schema(description: str, **keywords: Any) -> ConfigDict:
    """A model's JSON Schema text: its ``description`` (and any other schema keywords).

    The docstring is written for Python readers; this is what an editor shows.
    """
    return ConfigDict(json_schema_extra={"description": description, **keywords})


def _not_both(first: str, second: str) -> dict[str, Any]:
    """The schema rule "not both ``first`` and ``second``" (a model validator's twin)."""
    return {"not": {"required": [first, second]}}


#: An integer as JSON Schema sees it (5 and 5.0 yes; True and "5" no).
JsonInt = Annotated[int, BeforeValidator(_json_number)]
#: A finite number as JSON Schema sees it (no bool, no numeric string, no NaN/inf).
JsonFloat = Annotated[float, BeforeValidator(_json_number), Field(allow_inf_nan=False)]
LayerName = TypeAliasType(
    "LayerName",
    Annotated[
        str,
        Field(
            pattern=LAYER_NAME_PATTERN,
            description="A reserved layer (system_prompt, checkpoint_messages, query) or a "
            "block layer `*__context`.",
        ),
    ],
)
BlockLayerName = TypeAliasType(
    "BlockLayerName",
    Annotated[
        str, Field(pattern=BLOCK_LAYER_PATTERN, description="A block layer name `*__context`.")
    ],
)
Ratio = TypeAliasType(
    "Ratio",
    Annotated[JsonFloat, Field(ge=0, le=1, description="Share of the available tokens.")],
)

#: Validation freezes a mapping (read-only view); serialization thaws it back to a dict.
_FROZEN = (AfterValidator(_freeze), WrapSerializer(_thaw))
_FREE_TEXT = "Free text for humans."


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=False)


_SCALARS = frozenset({str, int, float, bool})


def _entries(data: Any) -> Iterable[tuple[str | int, Any]]:
    """The (key, value) pairs of a mapping or the (index, item) pairs of a list."""
    if type(data) in _SCALARS:  # most values: skip the slow Mapping check
        return ()
    if isinstance(data, Mapping):
        return data.items()
    if isinstance(data, list | tuple):
        return enumerate(data)
    return ()


def _find_null(data: Any, path: tuple[str | int, ...] = ()) -> tuple[str | int, ...] | None:
    """Path of the first null in policy data (``vars`` values are free-form and may be null)."""
    for key, value in _entries(data):
        if value is None:
            return (*path, key)
        if type(value) in _SCALARS or (not path and key == "vars"):
            continue  # a leaf (most values), or free-form
        found = _find_null(value, (*path, key))
        if found is not None:
            return found
    return None


# --------------------------------------------------------------------------- collectors

#: The ``type`` field of every collector (the discriminator of `CollectorSpec`).
_COLLECTOR_TYPE = Field(description="Collector type.")


class _CollectorBase(_Frozen):
    on_error: Literal["skip", "fail"] = Field(
        default="fail",
        description="What a failure of this collector does: `fail` raises CollectorError, "
        "`skip` leaves the layer empty for this call.",
    )
    timeout_s: Annotated[JsonFloat, Field(gt=0, le=3600)] | None = Field(
        default=None,
        description="Seconds the collector may take before it counts as failed "
        "(async composition).",
    )


class _TemplateSource(_CollectorBase):
    template: str | None = Field(
        default=None,
        description="Inline Jinja2 template (sandboxed; `vars`, `state`, `query` and the "
        "collected value are available). Give either this or `template_file`.",
    )
    template_file: Annotated[str, Field(min_length=1)] | None = Field(
        default=None,
        description="Path of a Jinja2 template file, relative to the folder of the policy "
        "file that declares it; may not leave that folder.",
    )

    @model_validator(mode="after")
    def _one_template(self) -> _TemplateSource:
        if self.template is not None and self.template_file is not None:
            raise ValueError("give either 'template' or 'template_file', not both")
        return self


class TemplateCollectorSpec(_TemplateSource):
    """Renders a Jinja2 template (inline or from ``template_file``)."""

    model_config = _schema(
        "Renders a Jinja2 template (inline `template` or `template_file`).",
        allOf=[
            _not_both("template", "template_file"),
            {"anyOf": [{"required": ["template"]}, {"required": ["template_file"]}]},
        ],
    )

    type: Annotated[Literal["template"], _COLLECTOR_TYPE]

    @model_validator(mode="after")
    def _needs_template(self) -> TemplateCollectorSpec:
        if self.template is None and self.template_file is None:
            raise ValueError("a template collector needs 'template' or 'template_file'")
        return self


class StateCollectorSpec(_TemplateSource):
    """Reads one field of the Blackboard, optionally through a template."""

    model_config = _schema(
        "Reads one field of the Blackboard state, optionally rendered through a template.",
        allOf=[_not_both("template", "template_file")],
    )

    type: Annotated[Literal["state"], _COLLECTOR_TYPE]
    field: Annotated[str, Field(min_length=1, pattern=FIELD_NAME_PATTERN)] = Field(
        description="Name of the state field to read, e.g. `todo`."
    )


class RetrieverCollectorSpec(_TemplateSource):
    """Queries a retriever service (any LangChain retriever or runnable returning Documents)."""

    model_config = _schema(
        "Queries a retriever service (any LangChain retriever or runnable returning Documents).",
        allOf=[_not_both("template", "template_file")],
    )

    type: Annotated[Literal["retriever"], _COLLECTOR_TYPE]
    service: Annotated[str, Field(pattern=SERVICE_NAME_PATTERN)] = Field(
        description="Name of the runtime service that provides the retriever."
    )
    top_k: Annotated[JsonInt, Field(ge=1, le=1000)] = Field(
        default=5, description="Largest number of documents to include."
    )
    separator: str = Field(default="\n\n", description="Text placed between documents.")


class CallableCollectorSpec(_CollectorBase):
    """Calls ``module:attr`` (sync or async) with the collector context."""

    model_config = _schema(
        "Calls a Python function `module:attr` (sync or async) with the collect request."
    )

    type: Annotated[Literal["callable"], _COLLECTOR_TYPE]
    target: Annotated[str, Field(pattern=CALLABLE_TARGET_PATTERN)] = Field(
        description="Import path `package.module:function`."
    )


class MemoryTiers(_Frozen):
    """Tier sizes of a memory the engine keeps itself (see `MemoryCollectorSpec.tiers`)."""

    l1: Annotated[JsonInt, Field(ge=1, le=100_000)] = Field(
        default=50, description="Most recent items kept in L1."
    )
    l2: Annotated[JsonInt, Field(ge=1, le=100_000)] = Field(
        default=100, description="Size of the L2 working set."
    )
    l3: Annotated[JsonInt, Field(ge=1, le=100_000)] = Field(
        default=500, description="Summaries kept in L3."
    )
    l2_policy: Literal["refresh", "seed"] = Field(
        default="refresh",
        description="How L2 takes items: `refresh` (a newer item about the same subject "
        "replaces the older one; a full L2 takes an item at least as important as its "
        "minimum) or `seed` (the design's literal rule: above the threshold while not full, "
        "once full only by beating the minimum).",
    )


#: What each memory source's share in ``shares`` reads (`MemoryCollectorSpec.shares`).
MEMORY_SHARE_DESCRIPTIONS: Mapping[MemorySource, str] = MappingProxyType(
    {
        "search": "Share of the cap for the units of memory most relevant to the query (a "
        "line of a long tool output is its own unit; newer statements first).",
        "l1": "Share of the cap for the most recent items (L1), newest first.",
        "l2": "Share of the cap for the working set (L2), most important first.",
        "l3": "Share of the cap for the most recent summaries (L3), newest first.",
    }
)


def _shares_schema(schema: dict[str, Any]) -> None:
    """``shares`` in the schema: one described property per source (default 0), no other."""
    # pydantic's own generator wraps the mapping in anyOf [mapping, null]
    mapping = next((s for s in schema.get("anyOf", ()) if s.get("type") == "object"), schema)
    share = mapping.get("additionalProperties")
    if isinstance(share, dict):
        mapping["properties"] = {
            source: {"description": text, **share, "default": 0}
            for source, text in MEMORY_SHARE_DESCRIPTIONS.items()
        }
        mapping["additionalProperties"] = False


class MemoryCollectorSpec(_CollectorBase):
    """Reads tiered memory (``ctxpolicy.memory``) by strategy or by single tier.

    A strategy gives each source (``search`` hits for the query, ``l1`` recent items,
    ``l2`` working set, ``l3`` summaries) a share of the layer's cap; ``shares`` replaces
    the strategy's (each in [0, 1]; a sum above 1 is scaled down; a source left out or at
    0 is not read). The collector reads a memory service (tier sizes belong to it); with
    ``tiers`` and no such service the engine keeps a memory of those sizes per
    conversation and records the history it is given.
    """

    model_config = _schema(
        "Reads tiered memory (L1-L4) by strategy (token shares of the cap per source) or by "
        "a single tier.",
        **_not_both("strategy", "tier"),
        dependentSchemas={"shares": {"not": {"required": ["tier"]}}},
    )

    type: Annotated[Literal["memory"], _COLLECTOR_TYPE]
    service: Annotated[str, Field(pattern=SERVICE_NAME_PATTERN)] = Field(
        default="memory", description="Name of the runtime service that provides the TieredMemory."
    )
    strategy: MemoryStrategy | None = Field(
        default=None,
        description="Token shares of the cap per memory source: minimal (nothing), balanced "
        "(search hits 0.5, recent 0.2, working set 0.3) or comprehensive (search 0.45, recent "
        "0.2, working set 0.2, summaries 0.15); unused share goes to the other sources, "
        "search hits first. Default balanced. Give either this or `tier`.",
    )
    tier: MemoryTier | None = Field(
        default=None,
        description="A single tier: l1 (recent), l2 (important), l3 (archive), l4 (semantic "
        "search). Give either this or `strategy`.",
    )
    limit: Annotated[JsonInt, Field(ge=1, le=100_000)] | None = Field(
        default=None,
        description="Largest number of memory items to include (a single tier: items read; "
        "a strategy: items packed in all).",
    )
    shares: (
        Annotated[
            Mapping[MemorySource, Annotated[JsonFloat, Field(ge=0, le=1)]],
            Field(min_length=1),
            *_FROZEN,
        ]
        | None
    ) = Field(
        default=None,
        description="Token shares of the layer's cap per memory source, replacing the "
        "strategy's: `search` (units most relevant to the query, bm25 over every item), `l1` "
        "(recent items), `l2` (working set), `l3` (summaries). Each source packs whole items "
        "into its share, then the rest of the cap goes to the remaining items, search hits "
        "first. A source left out or at 0 is not read; shares adding up to more than 1 are "
        "scaled down. Default: the strategy's (balanced: search 0.5, l1 0.2, l2 0.3; "
        "comprehensive: search 0.45, l1 0.2, l2 0.2, l3 0.15). Not with `tier`.",
        json_schema_extra=_shares_schema,
    )
    tiers: MemoryTiers | None = Field(
        default=None,
        description="Tier sizes of a memory the engine keeps itself, one per conversation "
        "(thread), when no service or state entry named `service` exists: the engine records "
        "the history it is given (new message ids only) and the layer reads it. Ignored when "
        "the service is given (its own sizes apply).",
    )

    @model_validator(mode="after")
    def _strategy_or_tier(self) -> MemoryCollectorSpec:
        if self.strategy is not None and self.tier is not None:
            raise ValueError("give either 'strategy' or 'tier', not both")
        if self.shares is not None and self.tier is not None:
            raise ValueError("'shares' applies to strategies; give either 'shares' or 'tier'")
        return self


class FilesCollectorSpec(_CollectorBase):
    """Selects Markdown/JSON blocks and line ranges under ``root`` (relative to the policy)."""

    model_config = _schema("Selects Markdown/JSON blocks and line ranges from files under `root`.")

    type: Annotated[Literal["files"], _COLLECTOR_TYPE]
    root: Annotated[str, Field(min_length=1)] = Field(
        description="Folder of the files, relative to the policy file that declares it; may "
        "not leave that folder. It may name the session: `data/{thread_id}` (the call's "
        "LangGraph thread) or `data/{session_id}` (the state's `session_id`), each filled "
        "per call with one plain folder name; a session without its folder yet gets an "
        "empty layer and a report warning."
    )
    select: Annotated[tuple[Annotated[str, Field(min_length=1)], ...], Field(min_length=1)] = Field(
        description="References such as `profile.md#Goals` or `guide.md:12:30`."
    )


class ToolsCollectorSpec(_CollectorBase):
    """Renders the definitions of LangChain tools from a service.

    See docs/design.md, 'Context sources'.
    """

    model_config = _schema("Renders the definitions of the LangChain tools provided by a service.")

    type: Annotated[Literal["tools"], _COLLECTOR_TYPE]
    service: Annotated[str, Field(pattern=SERVICE_NAME_PATTERN)] = Field(
        default="tools", description="Name of the runtime service that provides the tools."
    )


class AgentOutputsCollectorSpec(_CollectorBase):
    """Earlier agent outputs (the history's AI messages), decaying by age.

    See docs/memory.md, 'Agent outputs and skills'.
    """

    model_config = _schema(
        "Earlier agent outputs (Loom's agent output source): the AI messages of a state field "
        "(default the history), each weighted 0.5 ** (age / half_life), the newest at age 0; "
        "an output's share of the cap is proportional to its weight (older outputs are "
        "shortened, and left out below min_weight); printed oldest first."
    )

    type: Annotated[Literal["agent_outputs"], _COLLECTOR_TYPE]
    field: Annotated[str, Field(min_length=1, pattern=FIELD_NAME_PATTERN)] = Field(
        default="messages",
        description="State key holding the messages (LangChain messages or {type/role, "
        "content, name} dicts); it becomes a field of the graph's state schema.",
    )
    half_life: Annotated[JsonFloat, Field(gt=0, le=10_000)] = Field(
        default=2.0,
        description="Age (in agent outputs; the newest is 0) at which an output's weight halves.",
    )
    min_weight: Annotated[JsonFloat, Field(ge=0, le=1)] = Field(
        default=0.05, description="Outputs weighing less are left out."
    )
    limit: Annotated[JsonInt, Field(ge=1, le=10_000)] = Field(
        default=20, description="At most this many outputs (the newest)."
    )


class SkillsCollectorSpec(_CollectorBase):
    """Skill definitions from a service, activated on demand (state key or query).

    See docs/memory.md, 'Agent outputs and skills'.
    """

    model_config = _schema(
        "Skill definitions (Loom's skill source) from a service (a mapping name -> text or "
        "{description, instructions, triggers}, or a callable returning one; looked up in "
        "services, then in state), activated on demand: the names listed in the state key "
        "`field`, then (with match_query) the skills whose name or a trigger occurs in the "
        "query. Whole definitions packed into the cap, in activation order."
    )

    type: Annotated[Literal["skills"], _COLLECTOR_TYPE]
    service: Annotated[str, Field(pattern=SERVICE_NAME_PATTERN)] = Field(
        default="skills", description="Name of the runtime service that provides the skills."
    )
    field: Annotated[str, Field(min_length=1, pattern=FIELD_NAME_PATTERN)] = Field(
        default="active_skills",
        description="State key listing the activated skill names; it becomes a field of the "
        "graph's state schema.",
    )
    match_query: bool = Field(
        default=True,
        description="Also activate the skills whose name or a trigger occurs in the query.",
    )


class AggregateCollectorSpec(_CollectorBase):
    """Several sessions' whole contexts for one agent (`MemorySessions.aggregate_context`).

    See docs/memory.md, 'Aggregating session contexts'.
    """

    model_config = _schema(
        "Several sessions' whole contexts for one agent (the design's aggregation flow): each "
        "session named by the state key `session_ids` (else `session_id`, else the running "
        "thread) gives its persisted __context layers (from the `contexts` service) and its "
        "memory (the `service` MemorySessions); pieces ranked by importance, repeats once, "
        "whole pieces packed into the cap."
    )

    type: Annotated[Literal["aggregate"], _COLLECTOR_TYPE]
    service: Annotated[str, Field(pattern=SERVICE_NAME_PATTERN)] = Field(
        default="memory",
        description="Name of the runtime service that provides the MemorySessions.",
    )
    contexts: Annotated[str, Field(pattern=SERVICE_NAME_PATTERN)] | None = Field(
        default=None,
        description="Name of the runtime service giving each session's state (a mapping "
        "session id -> state, or a callable (session id) -> state, e.g. the values of the "
        "session's LangGraph thread); its __context layers join the aggregate. None: memory "
        "only.",
    )
    layers: (
        Annotated[
            tuple[Annotated[str, Field(pattern=BLOCK_LAYER_PATTERN)], ...], Field(min_length=1)
        ]
        | None
    ) = Field(default=None, description="Only these __context layers (default: every one).")
    strategy: MemoryStrategy | None = Field(
        default=None,
        description="Memory strategy of each session's part (default balanced).",
    )
    context_importance: Annotated[JsonFloat, Field(ge=0, le=1)] = Field(
        default=0.8, description="Rank of a persisted layer against memory items."
    )


class RecallWeights(_Frozen):
    """Weights of the two rankings fused by reciprocal rank fusion."""

    bm25: Annotated[JsonFloat, Field(ge=0, le=100)] = Field(
        default=1.0, description="Weight of the full-text (bm25) ranking."
    )
    dense: Annotated[JsonFloat, Field(ge=0, le=100)] = Field(
        default=1.0, description="Weight of the dense (embeddings) ranking."
    )


class RecallCollectorSpec(_CollectorBase):
    """Recalls the units of the session (and long-term memory) that best answer the query."""

    model_config = _schema(
        "Recalls the units (lines, paragraphs, JSON records) of this session that best answer "
        "the call's query, from the part of the history the history layer did not keep and "
        "from long-term memory, ranked by a full-text search engine (SQLite FTS5 or "
        "PostgreSQL), packed into the layer's cap, labelled with their source, in session "
        "order."
    )

    type: Annotated[Literal["recall"], _COLLECTOR_TYPE]
    backend: Literal["memory", "sqlite", "postgres"] = Field(
        default="memory",
        description="Search engine of the index: `memory` (SQLite FTS5 in this process), "
        "`sqlite` (SQLite FTS5 in a file, durable across restarts) or `postgres` (PostgreSQL "
        "full-text search, shared by several processes or machines).",
    )
    path: Annotated[str, Field(min_length=1)] | None = Field(
        default=None,
        description="Database file of the `sqlite` backend (relative to the working "
        "directory). The variable named by `path_env` overrides it.",
    )
    path_env: Annotated[str, Field(pattern=ENV_VAR_PATTERN)] = Field(
        default="CTXPOLICY_RECALL_PATH",
        description="Environment variable that supplies the `sqlite` database file.",
    )
    dsn_env: Annotated[str, Field(pattern=ENV_VAR_PATTERN)] = Field(
        default="CTXPOLICY_RECALL_DSN",
        description="Environment variable that supplies the PostgreSQL connection string of "
        "the `postgres` backend (a DSN is a secret: it never goes in the policy file).",
    )
    index: Annotated[str, Field(pattern=SERVICE_NAME_PATTERN)] | None = Field(
        default=None,
        description="Name of a runtime service that provides the index object itself (a "
        "custom `RecallIndex`); overrides `backend`.",
    )
    candidates: Annotated[JsonInt, Field(ge=1, le=5000)] = Field(
        default=200, description="How many search hits are considered before packing."
    )
    min_unit_chars: Annotated[JsonInt, Field(ge=1, le=2000)] = Field(
        default=40,
        description="Prose is split into sentences (a log dump or table into lines, JSON into "
        "records); a sentence shorter than this many characters is joined with the next.",
    )
    max_unit_chars: Annotated[JsonInt, Field(ge=40, le=20_000)] = Field(
        default=600,
        description="Longest unit in characters; longer lines are cut at whitespace.",
    )
    turn_chars: Annotated[JsonInt, Field(ge=0, le=20_000)] = Field(
        default=600,
        description="Sentences are searched, but a recalled sentence of a prose message up "
        "to this many characters (and `max_unit_chars`) shows the whole message, with its "
        "speaker and date. 0 shows the sentence alone.",
    )
    memory: Annotated[str, Field(pattern=SERVICE_NAME_PATTERN)] | None = Field(
        default=None,
        description="Name of a runtime service with long-term memory (`search(query, limit)`, "
        "e.g. a TieredMemory) searched as well.",
    )
    memory_limit: Annotated[JsonInt, Field(ge=1, le=1000)] = Field(
        default=20, description="Most long-term memory items considered."
    )
    embeddings: Annotated[str, Field(pattern=SERVICE_NAME_PATTERN)] | None = Field(
        default=None,
        description="Name of a runtime service providing a langchain-core `Embeddings`; its "
        "dense ranking is fused with bm25 (reciprocal rank fusion).",
    )
    weights: RecallWeights = Field(
        default=RecallWeights(), description="Weights of the fused rankings."
    )
    header: str | None = Field(
        default=None,
        description="First line of the layer (default: a line saying the units are recalled, "
        "oldest first).",
    )


#: One collector, picked by its ``type`` (each value of `ctxpolicy.layers.CollectorType`
#: names one of these models; tests/test_layers.py holds them equal).
CollectorSpec = TypeAliasType(
    "CollectorSpec",
    Annotated[
        TemplateCollectorSpec
        | StateCollectorSpec
        | RetrieverCollectorSpec
        | CallableCollectorSpec
        | MemoryCollectorSpec
        | FilesCollectorSpec
        | ToolsCollectorSpec
        | RecallCollectorSpec
        | AgentOutputsCollectorSpec
        | SkillsCollectorSpec
        | AggregateCollectorSpec,
        Field(
            discriminator="type",
            description="Where the layer's text comes from. Discriminated by `type`: template, "
            "state, retriever, callable, memory, files, tools, recall, agent_outputs, skills, "
            "aggregate.",
        ),
    ],
)

# --------------------------------------------------------------------------- layers


class QueryReferencesSpec(_Frozen):
    """``layers.query.references``: resolve ``[file:s:e]`` / ``[file#a/b]`` in the query.

    ``root`` is relative to the policy file that declares it and must stay inside its
    folder (the ``files`` collector's rule); see docs/files.md.
    """

    root: Annotated[str, Field(min_length=1)] = Field(
        description="Folder the references resolve in, relative to the policy file that "
        "declares it; may not leave that folder (absolute paths, `..` and symlinks out are "
        "refused)."
    )
    on_error: Literal["fail", "skip"] = Field(
        default="fail",
        description="A reference that escapes the root or points at nothing: `fail` raises "
        "CollectorError naming it, `skip` leaves its text as written and reports it.",
    )


class LayerSpec(_Frozen):
    """How one layer behaves. Unset fields take the defaults of the layer's kind.

    One model serves every kind of layer: `LAYER_KINDS` says what each kind's schema
    definition adds, `KIND_ONLY_FIELDS` which fields only one kind takes.
    """

    shared: StrictBool | None = Field(
        default=None,
        description="Part of the shared agent context: injected only when "
        "`enable_share_context` and the process's `share_context` allow it (default true for "
        "block layers; `system_prompt` is never shared).",
    )
    persist: StrictBool | None = Field(
        default=None,
        description="Written to graph state so it survives a checkpoint restore (default "
        "false; true for compression__context). framework__context and system_prompt may "
        "never persist.",
    )
    role: Role | None = Field(default=None, description="Message role the layer renders as.")
    #: Each kind of layer has its own rules, description and default (`LAYER_KINDS`).
    overflow: OverflowRule | None = None
    collector: CollectorSpec | None = None
    references: QueryReferencesSpec | None = Field(
        default=None,
        description="Resolve inline references (`[guide.md:12:30]`, `[profile.md#Goals]`) in "
        "the query (the runtime query or the checkpoint's input HumanMessage, in the prompt "
        "only): each referenced piece follows the query once, labelled with its file and "
        "lines, and counts in the query's budget.",
    )
    curate: StrictBool | None = Field(
        default=None,
        description="Apply memory curation: a tool result the model dismissed with the "
        "`dismiss_memory` tool (its call and answer are in the history) is shown as a "
        "placeholder in every later call; the stored history is never changed.",
        json_schema_extra={"default": False},
    )
    clear_tool_results: StrictBool | None = Field(
        default=None,
        description="When the current turn (the input HumanMessage and what follows it) does "
        "not fit the history's cap, replace its tool results, oldest first, by a marker "
        "`[tool result cleared: N tokens]` until it fits, instead of failing; the input and "
        "the tool-call pairs are kept. Reported as a `cleared_tool_results` cut.",
        json_schema_extra={"default": False},
    )
    cache: Literal["volatile-ok"] | None = Field(
        default=None,
        description="`volatile-ok`: this layer changes with every query (retriever, memory, "
        "recall collector) and is ordered before stable layers on purpose; acknowledges the "
        "prompt-cache warning (`order.cache-breaker`) so neither `validate` nor the engine "
        "reports it.",
    )
    description: str | None = Field(default=None, description=_FREE_TEXT)


class LayerKindFormat(NamedTuple):
    """What the format says about one kind of layer beyond `LayerSpec`'s fields."""

    #: The kind's JSON Schema definition (what an editor shows for ``layers.<name>``).
    description: str
    #: Its ``overflow`` field (the rules are `ctxpolicy.layers.OVERFLOW_RULES`).
    overflow: str


#: Per kind of layer: the schema text of its definition and of its ``overflow``.
LAYER_KINDS: Mapping[LayerKind, LayerKindFormat] = MappingProxyType(
    {
        "block": LayerKindFormat(
            "A `__context` block layer: one message rendered from its collector.",
            "What happens when the block exceeds its token cap.",
        ),
        "system_prompt": LayerKindFormat(
            "The agent's own system prompt (private: never shared, never persisted).",
            "What happens when the system prompt exceeds its cap.",
        ),
        "history": LayerKindFormat(
            "The checkpoint history (state `messages`).",
            "What happens when the history exceeds its cap: drop the oldest whole turns, "
            "summarize them into compression__context, or fail.",
        ),
        "query": LayerKindFormat(
            "This call's input (appears exactly once).",
            "What happens when the query exceeds its cap.",
        ),
    }
)

#: `LayerSpec` fields only one kind of layer takes, with the error for any other layer.
KIND_ONLY_FIELDS: Mapping[str, tuple[LayerKind, str]] = MappingProxyType(
    {
        "collector": ("block", "only __context block layers take a collector"),
        "references": ("query", "only the query layer takes 'references'"),
        "curate": ("history", "only checkpoint_messages takes 'curate'"),
        "clear_tool_results": ("history", "only checkpoint_messages takes 'clear_tool_results'"),
        "cache": ("block", "only __context block layers take 'cache'"),
    }
)


def _check_layer(name: str, spec: LayerSpec) -> None:
    """Refuse what a layer of this name does not take (its kind's overflow rules and fields).

    Raises:
        ValueError: ``name`` is no layer name, or ``spec`` sets something its kind refuses.
    """
    try:
        kind = layer_kind(name)
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    rules = OVERFLOW_RULES[kind]
    if spec.overflow is not None and spec.overflow not in rules:
        raise ValueError(
            f"layers.{name}.overflow: {spec.overflow!r} is not one of {', '.join(rules)}"
        )
    for field, (owner, message) in KIND_ONLY_FIELDS.items():
        if owner != kind and getattr(spec, field) is not None:
            raise ValueError(f"layers.{name}: {message}")


class ResolvedLayer(_Frozen):
    """A layer with every default filled in (what the engine uses)."""

    name: str
    kind: LayerKind
    shared: bool
    persist: bool
    role: Role
    overflow: str
    collector: CollectorSpec | None = None


# --------------------------------------------------------------------------- the rest


class ModelSpec(_Frozen):
    """The target model's window and tokenizer."""

    context_window: Annotated[JsonInt, Field(gt=0, le=100_000_000)] = Field(
        default=128_000,
        description="Context window in tokens (CTXPOLICY_CONTEXT_WINDOW overrides).",
    )
    tokenizer: TokenizerName = Field(
        default="cl100k_base",
        description="Tokenizer used to count tokens (CTXPOLICY_TOKENIZER overrides). "
        "`approximate` is the only non-exact one.",
    )
    system_messages: SystemMessagesMode = Field(
        default="auto",
        description="`auto` (default): one SystemMessage where ctxpolicy hands the call to a "
        "model (ContextPolicyMiddleware, agent_node: several chat-model integrations take one "
        "system message only), one per system-role layer from PolicyEngine.compose. "
        "`merge`: always one: the system prompt and the system-role block layers that "
        "follow it, texts joined by a blank line; the report still gives each layer's "
        "tokens and the message it went into. `separate`: always one SystemMessage per "
        "system-role layer (OpenAI, and Anthropic and Gemini through LangChain, accept "
        "consecutive leading system messages).",
    )


class BudgetSpec(_Frozen):
    """Token budget: output reserve and per-layer ratios of the available window."""

    output_reserve: Annotated[JsonFloat, Field(ge=0, le=0.9)] = Field(
        default=0.10, description="Share of the context window kept free for the answer."
    )
    ratios: Annotated[Mapping[LayerName, Ratio], *_FROZEN] = Field(
        default_factory=lambda: MappingProxyType({}),
        description="Share of context_window × (1 − output_reserve) per layer; the sum must "  # noqa: RUF001
        "be ≤ 1. Layers without a ratio split the rest equally.",
    )
    redistribute: StrictBool = Field(
        default=True,
        description="Share a layer leaves unused may be used by the layers that need more, "
        "in policy order.",
    )


class FileToolsSpec(_Frozen):
    """File tools (``ctxpolicy.blocks.tools``) an agent gets, confined to ``root``.

    ``root`` is relative to the policy file that declares it and must stay inside its
    folder (the ``files`` collector's rule); ``write_file`` is given only when listed in
    ``allow`` *and* ``write_file: true``. See docs/files.md.
    """

    model_config = _schema(
        "Sandboxed file tools (ctxpolicy.blocks.tools) bound to an agent by agent_node; every "
        "path stays inside `root`."
    )

    root: Annotated[str, Field(min_length=1)] = Field(
        description="Folder the tools may see, relative to the policy file that declares it; "
        "may not leave that folder."
    )
    allow: Annotated[tuple[FileToolName, ...], Field(min_length=1)] = Field(
        default=("read_file", "list_files", "search", "read_block"),
        description="Which tools the agent gets. `dismiss_memory` lets the model drop a tool "
        "result it no longer needs; with `layers.checkpoint_messages.curate: true` every "
        "later call shows it as a placeholder.",
    )
    write_file: StrictBool = Field(
        default=False,
        description="Allow `write_file` (atomic writes under `root`); it is given only when "
        "also listed in `allow`.",
    )
    max_output_chars: Annotated[JsonInt, Field(ge=100, le=1_000_000)] | None = Field(
        default=None,
        description="Largest tool answer in characters (longer answers end with a note saying "
        "how to get the rest).",
    )
    max_results: Annotated[JsonInt, Field(ge=1, le=100_000)] | None = Field(
        default=None, description="Most entries `list_files` / matches `search` return."
    )


class ProcessRule(_Frozen):
    """Per-process rules (see docs/design.md, 'Which layers a call gets')."""

    model_config = _schema("Rules of one process (see docs/design.md, 'Which layers a call gets').")

    checkpoint_messages: StrictBool = Field(
        default=True,
        description="Whether the history (state `messages`) is injected. Must be false for "
        "`mapreduce_*` processes.",
    )
    share_context: StrictBool = Field(
        default=True,
        description="Whether shared `__context` layers are injected (together with "
        "`enable_share_context`).",
    )
    query: QueryPath = Field(
        default="checkpoint",
        description="The single path the input takes: `runtime` (the engine appends "
        "HumanMessage(query)) or `checkpoint` (it is already the last HumanMessage of the "
        "history).",
    )
    include: tuple[BlockLayerName, ...] = Field(
        default=(),
        description="Block layers always injected for this process, even when shared context "
        "is off.",
    )
    exclude: tuple[BlockLayerName, ...] = Field(
        default=(), description="Block layers never injected for this process."
    )
    tools: FileToolsSpec | None = Field(
        default=None,
        description="File tools of this process's agents (replaces the top-level `tools`).",
    )
    description: str | None = Field(default=None, description=_FREE_TEXT)


def _seed_processes() -> Mapping[str, ProcessRule]:
    return MappingProxyType(
        {name: ProcessRule.model_validate(rule) for name, rule in DEFAULT_PROCESSES.items()}
    )


class Policy(_Frozen, PolicyViews):
    """A validated, fully resolved, immutable context policy.

    Build one with `ctxpolicy.load_policy` (which validates the file and resolves
    ``extends`` and the environment); constructing it directly checks structure only.
    """

    model_config = ConfigDict(
        title="ctxpolicy policy (version 1)",
        json_schema_extra={
            "description": "A context policy: what goes into the input messages of every LLM "
            "call (layer order, persistence, budget ratios, per-process rules, "
            "enable_share_context)."
        },
    )

    version: Annotated[Literal[1], BeforeValidator(_json_integral)] = Field(
        description="Format version of this file. Always 1."
    )
    name: Annotated[str, Field(pattern=POLICY_NAME_PATTERN, max_length=128)] = Field(
        description="Policy name: lowercase letters, digits, `_` and `-`."
    )
    description: str | None = Field(default=None, description=_FREE_TEXT)
    extends: (
        Annotated[str, Field(min_length=1)]
        | Annotated[tuple[Annotated[str, Field(min_length=1)], ...], Field(min_length=1)]
        | None
    ) = Field(
        default=None,
        description="Parent policy file(s), relative to this file (.yaml, .yml or .toml). "
        "Mappings deep-merge (this file wins); lists replace.",
    )
    enable_share_context: StrictBool = Field(
        default=True,
        description="The central switch: inject shared `__context` layers. Overridden by "
        "CTXPOLICY_ENABLE_SHARE_CONTEXT and by the load_policy argument.",
    )
    model: ModelSpec = Field(default_factory=ModelSpec, description="The target model.")
    budget: BudgetSpec = Field(default_factory=BudgetSpec, description="Token budget.")
    order: tuple[LayerName, ...] = Field(
        default=DEFAULT_ORDER,
        description="Assembly order: starts with system_prompt, ends with query, contains "
        "checkpoint_messages, each name once.",
    )
    vars: Annotated[Mapping[str, Any], *_FROZEN] = Field(
        default_factory=lambda: MappingProxyType({}),
        description="Free values available to templates as `vars`.",
    )
    #: The schema gives each kind of layer its own definition (`LAYER_KINDS`).
    layers: Annotated[Mapping[str, LayerSpec], *_FROZEN] = Field(
        default_factory=lambda: MappingProxyType({}),
        description="Per-layer settings. Reserved layers take no collector.",
    )
    processes: Annotated[Mapping[str, ProcessRule], *_FROZEN] = Field(
        default_factory=_seed_processes,
        description="Per-process rules by process name (react, sequential, dynamic, "
        "hierarchical, mapreduce_planner, mapreduce_worker, mapreduce_reducer, or your own). "
        "Default: the seven default processes.",
        json_schema_extra={"propertyNames": {"pattern": PROCESS_NAME_PATTERN}},
    )
    default_process: Annotated[str, Field(pattern=PROCESS_NAME_PATTERN)] = Field(
        default="react",
        description="Process used when a call names none; must be declared in `processes`.",
    )
    tools: FileToolsSpec | None = Field(
        default=None,
        description="File tools every agent gets (a process's own `tools` replaces them); "
        "see docs/files.md.",
    )

    _source: Path | None = PrivateAttr(default=None)
    _base_dirs: Mapping[str, Path] = PrivateAttr(default_factory=dict)
    #: ``file:line:col`` of each layer's entry in ``order`` (loaded policies only).
    _order_locations: Mapping[str, str] = PrivateAttr(default_factory=dict)
    #: where each value of a loaded policy was set (`ctxpolicy.diagnostics.locate`)
    _sourcemap: Mapping[tuple[str | int, ...], Location] = PrivateAttr(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _no_nulls(cls, data: Any) -> Any:
        # The policy format has no null (TOML cannot even write one, and the schema
        # refuses it): an empty YAML value is an error, not a silent default.
        found = _find_null(data)
        if found is not None:
            where = ".".join(str(p) for p in found)
            raise ValueError(f"{where}: null is not allowed; leave the key out instead")
        return data

    @field_validator("layers")
    @classmethod
    def _layer_names_and_overflow(cls, value: Mapping[str, LayerSpec]) -> Mapping[str, LayerSpec]:
        for name, spec in value.items():
            _check_layer(name, spec)
        return value

    @field_validator("processes")
    @classmethod
    def _process_names(cls, value: Mapping[str, ProcessRule]) -> Mapping[str, ProcessRule]:
        for name in value:
            if not _PROCESS_NAME_RE.match(name):
                raise ValueError(f"process name {name!r} must match {PROCESS_NAME_PATTERN}")
        return value

    # ---------------------------------------------------------------- derived views

    @property
    def _private(self) -> dict[str, Any]:
        """The private attributes, read directly: pydantic's ``__getattr__`` finds them in
        ``__pydantic_private__`` (never None on a model that declares some) ~30x slower,
        and validating team files reads them for every layer of every file."""
        return cast("dict[str, Any]", self.__pydantic_private__)

    def _resolved_layer(self, fields: dict[str, Any]) -> ResolvedLayer:
        return ResolvedLayer(**fields)

    def with_share_context(self, enabled: bool) -> Policy:
        """A copy with the central ``enable_share_context`` switch set."""
        copy = self.model_copy(update={"enable_share_context": enabled})
        copy._source = self._source
        copy._base_dirs = self._base_dirs
        copy._order_locations = self._order_locations
        copy._sourcemap = self._sourcemap
        return copy

    def to_data(self) -> dict[str, Any]:
        """The effective policy as plain data (what ``ctxpolicy show`` prints)."""
        return self.model_dump(mode="json", exclude_none=True)


__all__ = [
    "CHECKPOINT_MESSAGES",
    "KIND_ONLY_FIELDS",
    "LAYER_KINDS",
    "MEMORY_SHARE_DESCRIPTIONS",
    "QUERY",
    "SYSTEM_PROMPT",
    "AgentOutputsCollectorSpec",
    "AggregateCollectorSpec",
    "BudgetSpec",
    "CallableCollectorSpec",
    "CollectorSpec",
    "FileToolsSpec",
    "FilesCollectorSpec",
    "LayerKindFormat",
    "LayerSpec",
    "MemoryCollectorSpec",
    "MemoryTiers",
    "ModelSpec",
    "Policy",
    "ProcessRule",
    "QueryReferencesSpec",
    "RecallCollectorSpec",
    "RecallWeights",
    "ResolvedLayer",
    "RetrieverCollectorSpec",
    "SkillsCollectorSpec",
    "StateCollectorSpec",
    "TemplateCollectorSpec",
    "ToolsCollectorSpec",
]
