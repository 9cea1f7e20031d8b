"""The policy model: a frozen, fully resolved policy (see docs/design.md).

These pydantic models mirror ``schemas/ctxpolicy.schema.json`` one to one: the schema
is what editors and CI see, the models are what code uses, and a test proves they
accept and reject the same files. Semantic rules (order, persistence, ...) live in
``ctxpolicy.validation.semantic``; this module only checks structure.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Literal, TypeVar

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

from ctxpolicy.layers import (
    BLOCK_LAYER_PATTERN,
    CHECKPOINT_MESSAGES,
    DEFAULT_ORDER,
    PERSISTED_BY_DEFAULT,
    QUERY,
    SYSTEM_PROMPT,
    BlockOverflow,
    HistoryOverflow,
    QueryOverflow,
    Role,
    is_block_layer,
    layer_kind,
)

POLICY_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]*$"
CALLABLE_TARGET_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_.]*$"
PROCESS_NAME_PATTERN = r"^[a-z][a-z0-9_]*$"
LAYER_NAME_PATTERN = r"^(system_prompt|checkpoint_messages|query|[a-z][a-z0-9_]*__context)$"
SERVICE_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.-]*$"
MAX_EXTENDS_DEPTH = 8

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


#: An integer as JSON Schema sees it (5 and 5.0 yes; True and "5" no).
JsonInt = Annotated[int, BeforeValidator(_json_number)]
#: A finite number as JSON Schema sees it (no bool, no numeric string, no NaN/inf).
JsonFloat = Annotated[float, BeforeValidator(_json_number), Field(allow_inf_nan=False)]
LayerName = Annotated[str, Field(pattern=LAYER_NAME_PATTERN)]
BlockLayerName = Annotated[str, Field(pattern=BLOCK_LAYER_PATTERN)]

#: Validation freezes a mapping (read-only view); serialization thaws it back to a dict.
_FROZEN = (AfterValidator(_freeze), WrapSerializer(_thaw))


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=False)


def _find_null(data: Any, path: tuple[str | int, ...] = ()) -> tuple[str | int, ...] | None:
    """Path of the first null in policy data (``vars`` values are free-form and may be null)."""
    if isinstance(data, Mapping):
        for key, value in data.items():
            if value is None:
                return (*path, key)
            if not (path == () and key == "vars"):
                found = _find_null(value, (*path, key))
                if found is not None:
                    return found
    elif isinstance(data, list | tuple):
        for index, value in enumerate(data):
            found = _find_null(value, (*path, index)) if value is not None else (*path, index)
            if found is not None:
                return found
    return None


# --------------------------------------------------------------------------- collectors


class _CollectorBase(_Frozen):
    on_error: Literal["skip", "fail"] = "fail"
    timeout_s: Annotated[JsonFloat, Field(gt=0, le=3600)] | None = None


class _TemplateSource(_CollectorBase):
    template: str | None = None
    template_file: Annotated[str, Field(min_length=1)] | None = None

    @model_validator(mode="after")
    def _one_template(self) -> _TemplateSource:
        if self.template is not None and self.template_file is not None:
            raise ValueError("give either 'template' or 'template_file', not both")
        return self


class TemplateCollectorSpec(_TemplateSource):
    """Renders a Jinja2 template (inline or from ``template_file``)."""

    type: Literal["template"]

    @model_validator(mode="after")
    def _needs_template(self) -> TemplateCollectorSpec:
        if self.template is None and self.template_file is None:
            raise ValueError("a template collector needs 'template' or 'template_file'")
        return self


class StateCollectorSpec(_TemplateSource):
    """Reads one field of the Blackboard, optionally through a template."""

    type: Literal["state"]
    field: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]


class RetrieverCollectorSpec(_TemplateSource):
    """Queries a retriever service (any LangChain retriever or runnable returning Documents)."""

    type: Literal["retriever"]
    service: Annotated[str, Field(pattern=SERVICE_NAME_PATTERN)]
    top_k: Annotated[JsonInt, Field(ge=1, le=1000)] = 5
    separator: str = "\n\n"


class CallableCollectorSpec(_CollectorBase):
    """Calls ``module:attr`` (sync or async) with the collector context."""

    type: Literal["callable"]
    target: Annotated[str, Field(pattern=CALLABLE_TARGET_PATTERN)]


class MemoryTiers(_Frozen):
    """Tier sizes of a memory the engine keeps itself (see `MemoryCollectorSpec.tiers`)."""

    l1: Annotated[JsonInt, Field(ge=1, le=100_000)] = 50
    l2: Annotated[JsonInt, Field(ge=1, le=100_000)] = 100
    l3: Annotated[JsonInt, Field(ge=1, le=100_000)] = 500


class MemoryCollectorSpec(_CollectorBase):
    """Reads tiered memory (``ctxpolicy.memory``) by strategy or by single tier.

    A strategy gives each source (``search`` hits for the query, ``l1`` recent items,
    ``l2`` working set, ``l3`` summaries) a share of the layer's cap; ``shares`` replaces
    the strategy's (each in [0, 1]; a sum above 1 is scaled down; a source left out or at
    0 is not read). The collector reads a memory service (tier sizes belong to it); with
    ``tiers`` and no such service the engine keeps a memory of those sizes per
    conversation and records the history it is given.
    """

    type: Literal["memory"]
    service: Annotated[str, Field(pattern=SERVICE_NAME_PATTERN)] = "memory"
    strategy: Literal["minimal", "balanced", "comprehensive"] | None = None
    tier: Literal["l1", "l2", "l3", "l4"] | None = None
    limit: Annotated[JsonInt, Field(ge=1, le=100_000)] | None = None
    shares: (
        Annotated[
            Mapping[Literal["search", "l1", "l2", "l3"], Annotated[JsonFloat, Field(ge=0, le=1)]],
            Field(min_length=1),
            *_FROZEN,
        ]
        | None
    ) = None
    tiers: MemoryTiers | None = None

    @model_validator(mode="after")
    def _strategy_or_tier(self) -> MemoryCollectorSpec:
        if self.strategy is not None and self.tier is not None:
            raise ValueError("give either 'strategy' or 'tier', not both")
        if self.shares is not None and self.tier is not None:
            raise ValueError("'shares' applies to strategies; give either 'shares' or 'tier'")
        return self


class FilesCollectorSpec(_CollectorBase):
    """Selects Markdown/JSON blocks and line ranges under ``root`` (relative to the policy)."""

    type: Literal["files"]
    root: Annotated[str, Field(min_length=1)]
    select: Annotated[tuple[Annotated[str, Field(min_length=1)], ...], Field(min_length=1)]


class ToolsCollectorSpec(_CollectorBase):
    """Renders the definitions of LangChain tools from a service.

    See docs/design.md, 'Context sources'.
    """

    type: Literal["tools"]
    service: Annotated[str, Field(pattern=SERVICE_NAME_PATTERN)] = "tools"


class AgentOutputsCollectorSpec(_CollectorBase):
    """Earlier agent outputs (the history's AI messages), decaying by age.

    See docs/memory.md, 'Agent outputs and skills'.
    """

    type: Literal["agent_outputs"]
    field: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] = "messages"
    half_life: Annotated[JsonFloat, Field(gt=0, le=10_000)] = 2.0
    min_weight: Annotated[JsonFloat, Field(ge=0, le=1)] = 0.05
    limit: Annotated[JsonInt, Field(ge=1, le=10_000)] = 20


class SkillsCollectorSpec(_CollectorBase):
    """Skill definitions from a service, activated on demand (state key or query).

    See docs/memory.md, 'Agent outputs and skills'.
    """

    type: Literal["skills"]
    service: Annotated[str, Field(pattern=SERVICE_NAME_PATTERN)] = "skills"
    field: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] = (
        "active_skills"
    )
    match_query: bool = True


ENV_VAR_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"


class RecallWeights(_Frozen):
    """Weights of the two rankings fused by reciprocal rank fusion."""

    bm25: Annotated[JsonFloat, Field(ge=0, le=100)] = 1.0
    dense: Annotated[JsonFloat, Field(ge=0, le=100)] = 1.0


class RecallCollectorSpec(_CollectorBase):
    """Recalls the units of the session (and long-term memory) that best answer the query."""

    type: Literal["recall"]
    backend: Literal["memory", "sqlite", "postgres"] = "memory"
    path: Annotated[str, Field(min_length=1)] | None = None
    path_env: Annotated[str, Field(pattern=ENV_VAR_PATTERN)] = "CTXPOLICY_RECALL_PATH"
    dsn_env: Annotated[str, Field(pattern=ENV_VAR_PATTERN)] = "CTXPOLICY_RECALL_DSN"
    index: Annotated[str, Field(pattern=SERVICE_NAME_PATTERN)] | None = None
    candidates: Annotated[JsonInt, Field(ge=1, le=5000)] = 200
    min_unit_chars: Annotated[JsonInt, Field(ge=1, le=2000)] = 40
    max_unit_chars: Annotated[JsonInt, Field(ge=40, le=20_000)] = 600
    memory: Annotated[str, Field(pattern=SERVICE_NAME_PATTERN)] | None = None
    memory_limit: Annotated[JsonInt, Field(ge=1, le=1000)] = 20
    embeddings: Annotated[str, Field(pattern=SERVICE_NAME_PATTERN)] | None = None
    weights: RecallWeights = RecallWeights()
    header: str | None = None


CollectorSpec = Annotated[
    TemplateCollectorSpec
    | StateCollectorSpec
    | RetrieverCollectorSpec
    | CallableCollectorSpec
    | MemoryCollectorSpec
    | FilesCollectorSpec
    | ToolsCollectorSpec
    | RecallCollectorSpec
    | AgentOutputsCollectorSpec
    | SkillsCollectorSpec,
    Field(discriminator="type"),
]

COLLECTOR_TYPES: tuple[str, ...] = (
    "template",
    "state",
    "retriever",
    "callable",
    "memory",
    "files",
    "tools",
    "recall",
    "agent_outputs",
    "skills",
)

# --------------------------------------------------------------------------- layers

OverflowName = BlockOverflow | HistoryOverflow | QueryOverflow

_OVERFLOW_BY_KIND: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "block": ("truncate_tail", "truncate_head", "drop", "error"),
        "history": ("drop_oldest", "summarize", "error"),
        "query": ("error", "truncate_tail"),
        "system_prompt": ("error", "truncate_tail"),
    }
)
_DEFAULT_OVERFLOW: Mapping[str, str] = MappingProxyType(
    {"block": "truncate_tail", "history": "drop_oldest", "query": "error", "system_prompt": "error"}
)


def allowed_overflows(layer: str) -> tuple[str, ...]:
    """The overflow rules a layer of this name accepts."""
    return _OVERFLOW_BY_KIND[layer_kind(layer)]


class QueryReferencesSpec(_Frozen):
    """``layers.query.references``: resolve ``[file:s:e]`` / ``[file#a/b]`` in the query.

    ``root`` is relative to the policy file that declares it and must stay inside its
    folder (the ``files`` collector's rule); see docs/files.md.
    """

    root: Annotated[str, Field(min_length=1)]
    on_error: Literal["fail", "skip"] = "fail"


class LayerSpec(_Frozen):
    """How one layer behaves. Unset fields take the defaults of the layer's kind."""

    shared: StrictBool | None = None
    persist: StrictBool | None = None
    role: Role | None = None
    overflow: OverflowName | None = None
    collector: CollectorSpec | None = None
    references: QueryReferencesSpec | None = None
    curate: StrictBool | None = None
    clear_tool_results: StrictBool | None = None
    cache: Literal["volatile-ok"] | None = None
    description: str | None = None


class ResolvedLayer(_Frozen):
    """A layer with every default filled in (what the engine uses)."""

    name: str
    kind: Literal["system_prompt", "block", "history", "query"]
    shared: bool
    persist: bool
    role: Role
    overflow: str
    collector: CollectorSpec | None = None


# --------------------------------------------------------------------------- the rest


class ModelSpec(_Frozen):
    """The target model's window and tokenizer."""

    context_window: Annotated[JsonInt, Field(gt=0, le=100_000_000)] = 128_000
    tokenizer: Literal["cl100k_base", "o200k_base", "approximate"] = "cl100k_base"
    #: ``merge``: the leading system-role layers go out as one SystemMessage.
    system_messages: Literal["separate", "merge"] = "separate"


class BudgetSpec(_Frozen):
    """Token budget: output reserve and per-layer ratios of the available window."""

    output_reserve: Annotated[JsonFloat, Field(ge=0, le=0.9)] = 0.10
    ratios: Annotated[Mapping[LayerName, Annotated[JsonFloat, Field(ge=0, le=1)]], *_FROZEN] = (
        Field(default_factory=lambda: MappingProxyType({}))
    )
    redistribute: StrictBool = True


FILE_TOOL_NAMES: tuple[str, ...] = ("read_file", "list_files", "search", "read_block", "write_file")
FileToolName = Literal["read_file", "list_files", "search", "read_block", "write_file"]


class FileToolsSpec(_Frozen):
    """File tools (``ctxpolicy.blocks.tools``) an agent gets, confined to ``root``.

    ``root`` is relative to the policy file that declares it and must stay inside its
    folder (the ``files`` collector's rule); ``write_file`` is given only when listed in
    ``allow`` *and* ``write_file: true``. See docs/files.md.
    """

    root: Annotated[str, Field(min_length=1)]
    allow: Annotated[tuple[FileToolName, ...], Field(min_length=1)] = (
        "read_file",
        "list_files",
        "search",
        "read_block",
    )
    write_file: StrictBool = False
    max_output_chars: Annotated[JsonInt, Field(ge=100, le=1_000_000)] | None = None
    max_results: Annotated[JsonInt, Field(ge=1, le=100_000)] | None = None


class ProcessRule(_Frozen):
    """Per-process rules (see docs/design.md, 'Which layers a call gets')."""

    checkpoint_messages: StrictBool = True
    share_context: StrictBool = True
    query: Literal["runtime", "checkpoint"] = "checkpoint"
    include: tuple[BlockLayerName, ...] = ()
    exclude: tuple[BlockLayerName, ...] = ()
    tools: FileToolsSpec | None = None
    description: str | None = None


def _seed_processes() -> Mapping[str, ProcessRule]:
    blocks_mr = ("framework__context", "experience__context", "knowledge__context")
    shared = ProcessRule()
    return MappingProxyType(
        {
            "react": shared,
            "sequential": shared,
            "dynamic": shared,
            "hierarchical": shared,
            "mapreduce_planner": ProcessRule(
                checkpoint_messages=False, share_context=False, query="runtime", include=blocks_mr
            ),
            "mapreduce_worker": ProcessRule(
                checkpoint_messages=False,
                share_context=False,
                query="runtime",
                include=("framework__context", "knowledge__context"),
            ),
            "mapreduce_reducer": ProcessRule(
                checkpoint_messages=False, share_context=False, query="runtime", include=blocks_mr
            ),
        }
    )


class Policy(_Frozen):
    """A validated, fully resolved, immutable context policy.

    Build one with `ctxpolicy.load_policy` (which validates the file and resolves
    ``extends`` and the environment); constructing it directly checks structure only.
    """

    version: Annotated[Literal[1], BeforeValidator(_json_integral)]
    name: Annotated[str, Field(pattern=POLICY_NAME_PATTERN, max_length=128)]
    description: str | None = None
    extends: (
        Annotated[str, Field(min_length=1)]
        | Annotated[tuple[Annotated[str, Field(min_length=1)], ...], Field(min_length=1)]
        | None
    ) = None
    enable_share_context: StrictBool = True
    model: ModelSpec = Field(default_factory=ModelSpec)
    budget: BudgetSpec = Field(default_factory=BudgetSpec)
    order: tuple[LayerName, ...] = DEFAULT_ORDER
    vars: Annotated[Mapping[str, Any], *_FROZEN] = Field(
        default_factory=lambda: MappingProxyType({})
    )
    layers: Annotated[Mapping[str, LayerSpec], *_FROZEN] = Field(
        default_factory=lambda: MappingProxyType({})
    )
    processes: Annotated[Mapping[str, ProcessRule], *_FROZEN] = Field(
        default_factory=_seed_processes
    )
    default_process: Annotated[str, Field(pattern=PROCESS_NAME_PATTERN)] = "react"
    tools: FileToolsSpec | None = None

    _source: Path | None = PrivateAttr(default=None)
    _base_dirs: Mapping[str, Path] = PrivateAttr(default_factory=dict)
    #: ``file:line:col`` of each layer's entry in ``order`` (loaded policies only).
    _order_locations: Mapping[str, str] = PrivateAttr(default_factory=dict)

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
            try:
                kind = layer_kind(name)
            except ValueError as exc:
                raise ValueError(str(exc)) from None
            if spec.overflow is not None and spec.overflow not in _OVERFLOW_BY_KIND[kind]:
                raise ValueError(
                    f"layers.{name}.overflow: {spec.overflow!r} is not one of "
                    f"{', '.join(_OVERFLOW_BY_KIND[kind])}"
                )
            if kind != "block" and spec.collector is not None:
                raise ValueError(f"layers.{name}: only __context block layers take a collector")
            if name != QUERY and spec.references is not None:
                raise ValueError(f"layers.{name}: only the query layer takes 'references'")
            if name != CHECKPOINT_MESSAGES and spec.curate is not None:
                raise ValueError(f"layers.{name}: only checkpoint_messages takes 'curate'")
            if name != CHECKPOINT_MESSAGES and spec.clear_tool_results is not None:
                raise ValueError(
                    f"layers.{name}: only checkpoint_messages takes 'clear_tool_results'"
                )
            if kind != "block" and spec.cache is not None:
                raise ValueError(f"layers.{name}: only __context block layers take 'cache'")
        return value

    @field_validator("processes")
    @classmethod
    def _process_names(cls, value: Mapping[str, ProcessRule]) -> Mapping[str, ProcessRule]:
        import re

        for name in value:
            if not re.match(PROCESS_NAME_PATTERN, name):
                raise ValueError(f"process name {name!r} must match {PROCESS_NAME_PATTERN}")
        return value

    # ---------------------------------------------------------------- derived views

    @property
    def source(self) -> Path | None:
        """The file this policy was loaded from (None when built in code)."""
        return self._source

    @property
    def block_layers(self) -> tuple[str, ...]:
        """The ``__context`` layers in policy order."""
        return tuple(name for name in self.order if is_block_layer(name))

    @property
    def available_tokens(self) -> int:
        """``context_window * (1 - output_reserve)``, rounded down."""
        return int(self.model.context_window * (1 - self.budget.output_reserve))

    def layer(self, name: str) -> ResolvedLayer:
        """The layer ``name`` with the defaults of its kind filled in.

        Raises:
            ValueError: ``name`` is not a layer name.
        """
        kind = layer_kind(name)
        spec = self.layers.get(name, LayerSpec())
        default_persist = name in PERSISTED_BY_DEFAULT or kind == "history"
        default_role: Role = "human" if kind == "query" else "system"
        return ResolvedLayer(
            name=name,
            kind=kind,
            shared=(kind == "block") if spec.shared is None else spec.shared,
            persist=default_persist if spec.persist is None else spec.persist,
            role=default_role if spec.role is None else spec.role,
            overflow=_DEFAULT_OVERFLOW[kind] if spec.overflow is None else spec.overflow,
            collector=spec.collector,
        )

    def layer_base_dir(self, name: str) -> Path | None:
        """Folder of the policy file that declared layer ``name``'s collector.

        Relative ``template_file`` and ``files`` roots resolve against it (a layer
        inherited through ``extends`` resolves against the parent's folder).
        """
        found = self._base_dirs.get(name)
        if found is not None:
            return found
        return self._source.parent if self._source is not None else None

    def file_tools(self, process: str) -> tuple[FileToolsSpec | None, Path | None]:
        """The file tools of ``process`` (its own ``tools``, else the top-level ``tools``)
        and the folder their ``root`` is relative to (None for a policy built in code).

        Raises:
            UnknownProcessError: the policy does not declare ``process``.
        """
        own = self.process(process).tools
        key = f"@processes.{process}.tools" if own is not None else "@tools"
        spec = own if own is not None else self.tools
        if spec is None:
            return None, None
        found = self._base_dirs.get(key)
        if found is None and self._source is not None:
            found = self._source.parent
        return spec, found

    def process(self, name: str) -> ProcessRule:
        """The rule of process ``name``.

        Raises:
            UnknownProcessError: the policy does not declare ``name``.
        """
        try:
            return self.processes[name]
        except KeyError:
            from ctxpolicy.errors import UnknownProcessError

            raise UnknownProcessError(name, tuple(self.processes)) from None

    def ratio(self, layer: str) -> float:
        """The budget ratio of ``layer`` (0 when the policy gives none)."""
        return self.budget.ratios.get(layer, 0.0)

    def with_share_context(self, enabled: bool) -> Policy:
        """A copy with the central ``enable_share_context`` switch set."""
        copy = self.model_copy(update={"enable_share_context": enabled})
        copy._source = self._source
        copy._base_dirs = self._base_dirs
        copy._order_locations = self._order_locations
        return copy

    def to_data(self) -> dict[str, Any]:
        """The effective policy as plain data (what ``ctxpolicy show`` prints)."""
        return self.model_dump(mode="json", exclude_none=True)


__all__ = [
    "CHECKPOINT_MESSAGES",
    "COLLECTOR_TYPES",
    "MAX_EXTENDS_DEPTH",
    "QUERY",
    "SYSTEM_PROMPT",
    "AgentOutputsCollectorSpec",
    "BudgetSpec",
    "CallableCollectorSpec",
    "CollectorSpec",
    "FileToolsSpec",
    "FilesCollectorSpec",
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
    "allowed_overflows",
]
