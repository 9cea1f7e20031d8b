"""The vocabulary of the policy format: layer names and every fixed set of values.

Each set of values is spelled once, here, as a ``Literal`` type (what type checkers and
the models see) with its tuple of values (``get_args`` of it, what code iterates). The
models of `ctxpolicy.policy` and the JSON Schema generated from them use these; other
modules import them rather than spelling the values again.

See docs/design.md, 'Layers and their kinds' and 'Budget and overflow'.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, Literal, NamedTuple, Protocol, get_args

SYSTEM_PROMPT: Final = "system_prompt"
CHECKPOINT_MESSAGES: Final = "checkpoint_messages"
QUERY: Final = "query"

FRAMEWORK: Final = "framework__context"
EXPERIENCE: Final = "experience__context"
KNOWLEDGE: Final = "knowledge__context"
TODO: Final = "todo__context"
COMPRESSION: Final = "compression__context"
#: The service a ``summarize`` history overflow calls to fill `COMPRESSION`
#: (`ctxpolicy.summarize.SUMMARIZER_SERVICE`).
SUMMARIZER_SERVICE: Final = "summarizer"

BLOCK_SUFFIX: Final = "__context"
BLOCK_LAYER_PATTERN: Final = r"^[a-z][a-z0-9_]*__context$"
_BLOCK_RE: Final = re.compile(BLOCK_LAYER_PATTERN)

DEFAULT_ORDER: Final[tuple[str, ...]] = (
    SYSTEM_PROMPT,
    FRAMEWORK,
    EXPERIENCE,
    KNOWLEDGE,
    TODO,
    COMPRESSION,
    CHECKPOINT_MESSAGES,
    QUERY,
)

#: Layers persisted by default: the history summary must survive a restore (see
#: docs/design.md, 'Lifecycle and persistence').
PERSISTED_BY_DEFAULT: Final = frozenset({COMPRESSION})
#: Layers that may never be persisted.
NEVER_PERSISTED: Final = frozenset({SYSTEM_PROMPT, FRAMEWORK, QUERY})


def may_persist(layer: str) -> bool:
    """The never-persist rule: whether layer ``layer`` may ever be written to state.

    ``system_prompt``, ``framework__context`` and ``query`` are runtime-only, whatever a
    policy says (docs/design.md, 'Lifecycle and persistence'): a plan never marks them
    ``persist``, validation rejects ``persist: true`` on them, state refuses to write them.
    """
    return layer not in NEVER_PERSISTED


LayerKind = Literal["system_prompt", "block", "history", "query"]
Role = Literal["system", "human", "ai"]

#: The processes a policy that declares none gets, by name: what each sets (the rest of
#: `ctxpolicy.policy.ProcessRule` keeps its defaults). MapReduce processes take no
#: history and only the framework and knowledge blocks (docs/design.md, 'Which layers a
#: call gets').
DEFAULT_PROCESSES: Final[Mapping[str, Mapping[str, object]]] = MappingProxyType(
    {
        "react": {},
        "sequential": {},
        "dynamic": {},
        "hierarchical": {},
        "mapreduce_planner": {
            "checkpoint_messages": False,
            "share_context": False,
            "query": "runtime",
            "include": (FRAMEWORK, EXPERIENCE, KNOWLEDGE),
        },
        "mapreduce_worker": {
            "checkpoint_messages": False,
            "share_context": False,
            "query": "runtime",
            "include": (FRAMEWORK, KNOWLEDGE),
        },
        "mapreduce_reducer": {
            "checkpoint_messages": False,
            "share_context": False,
            "query": "runtime",
            "include": (FRAMEWORK, EXPERIENCE, KNOWLEDGE),
        },
    }
)

# ----------------------------------------------------------------------------- overflow

#: Overflow rules of each kind of layer, the default first (docs/design.md, 'Budget and
#: overflow'). The system prompt takes the query's rules.
BlockOverflow = Literal["truncate_tail", "truncate_head", "drop", "error"]
HistoryOverflow = Literal["drop_oldest", "summarize", "error"]
QueryOverflow = Literal["error", "truncate_tail"]
SystemPromptOverflow = QueryOverflow
OverflowRule = BlockOverflow | HistoryOverflow | QueryOverflow

OVERFLOW_RULES: Final[Mapping[LayerKind, tuple[str, ...]]] = MappingProxyType(
    {
        "system_prompt": get_args(SystemPromptOverflow),
        "block": get_args(BlockOverflow),
        "history": get_args(HistoryOverflow),
        "query": get_args(QueryOverflow),
    }
)
#: The rule a layer of each kind follows when the policy gives none (the first one).
DEFAULT_OVERFLOW: Final[Mapping[LayerKind, str]] = MappingProxyType(
    {kind: rules[0] for kind, rules in OVERFLOW_RULES.items()}
)

# ----------------------------------------------------------------------- other settings

#: ``model.tokenizer``: the exact encodings shipped in the package, or a character count.
TokenizerName = Literal["cl100k_base", "o200k_base", "approximate"]
TOKENIZER_NAMES: Final[tuple[TokenizerName, ...]] = get_args(TokenizerName)

#: ``model.system_messages``: how the leading system-role layers reach the model
#: (docs/design.md, 'One system message or several').
SystemMessagesMode = Literal["auto", "separate", "merge"]

#: ``collector.type``: the built-in collectors, in the order the schema lists them.
CollectorType = Literal[
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
    "aggregate",
]
COLLECTOR_TYPES: Final[tuple[CollectorType, ...]] = get_args(CollectorType)

#: ``processes.<name>.query``: the one path a call's input takes (docs/design.md,
#: 'The query path').
QueryPath = Literal["runtime", "checkpoint"]

#: The ``memory`` collector's strategies, single tiers and the sources a strategy reads.
MemoryStrategy = Literal["minimal", "balanced", "comprehensive"]
MemoryTier = Literal["l1", "l2", "l3", "l4"]
MemorySource = Literal["search", "l1", "l2", "l3"]

#: The tools a process may ``allow``: the file tools, and ``dismiss_memory`` (memory
#: curation, applied by ``layers.checkpoint_messages.curate``).
FileToolName = Literal[
    "read_file", "list_files", "search", "read_block", "write_file", "dismiss_memory"
]


#: The placeholders a ``files`` collector's ``root`` may name (``data/{thread_id}``):
#: the LangGraph thread of the call, the state's ``session_id``. See docs/files.md,
#: 'A folder per session'.
ROOT_PLACEHOLDERS: Final[tuple[str, ...]] = ("thread_id", "session_id")
_PLACEHOLDER_RE: Final = re.compile(r"\{([^{}]*)\}")


def root_placeholders(root: str) -> tuple[str, ...]:
    """The names of the ``{name}`` placeholders of a root, in order (unknown ones too).

    Raises:
        ValueError: a ``{`` or ``}`` that opens or closes no placeholder.
    """
    if set("{}").isdisjoint(root):
        return ()
    if "{" in _PLACEHOLDER_RE.sub("", root) or "}" in _PLACEHOLDER_RE.sub("", root):
        raise ValueError(f"root {root!r} has a brace that is not part of a {{name}} placeholder")
    return tuple(_PLACEHOLDER_RE.findall(root))


def fill_root(root: str, values: Mapping[str, str]) -> str:
    """``root`` with each ``{name}`` replaced by ``values[name]`` (every name must be given)."""
    return _PLACEHOLDER_RE.sub(lambda match: values[match.group(1)], root)


def static_root(root: str) -> str:
    """The folders of ``root`` before its first segment with a placeholder (``.``: none)."""
    kept: list[str] = []
    for segment in root.split("/"):
        if "{" in segment:
            break
        kept.append(segment)
    return "/".join(kept) or "."


def is_block_layer(name: str) -> bool:
    """True for a ``__context`` block layer name (built-in or a team's own)."""
    return bool(_BLOCK_RE.match(name))


def layer_kind(name: str) -> LayerKind:
    """The kind of a layer name.

    Raises:
        ValueError: ``name`` is neither a reserved layer nor a valid block layer name.
    """
    if name == SYSTEM_PROMPT:
        return "system_prompt"
    if name == CHECKPOINT_MESSAGES:
        return "history"
    if name == QUERY:
        return "query"
    if is_block_layer(name):
        return "block"
    raise ValueError(f"{name!r} is not a layer name (expected a reserved name or *__context)")


# ------------------------------------------------------------------- resolved settings


class LayerSettings(Protocol):
    """What a policy sets on one layer (`ctxpolicy.policy.LayerSpec`); None: unset."""

    @property
    def shared(self) -> bool | None: ...
    @property
    def persist(self) -> bool | None: ...
    @property
    def role(self) -> Role | None: ...
    @property
    def overflow(self) -> str | None: ...


class ResolvedSettings(NamedTuple):
    """A layer's settings with the defaults of its kind filled in."""

    kind: LayerKind
    shared: bool
    persist: bool
    role: Role
    overflow: str


def resolve_layer_settings(name: str, spec: LayerSettings | None) -> ResolvedSettings:
    """The settings of layer ``name``: what ``spec`` sets, else its kind's defaults.

    The one place the defaults of a layer are decided (`Policy.layer`, and the plain
    policies ``ctxpolicy validate`` checks, `ctxpolicy.validation.plain`).

    Raises:
        ValueError: ``name`` is not a layer name.
    """
    kind = layer_kind(name)
    default_persist = name in PERSISTED_BY_DEFAULT or kind == "history"
    default_role: Role = "human" if kind == "query" else "system"
    if spec is None:
        return ResolvedSettings(
            kind, kind == "block", default_persist, default_role, DEFAULT_OVERFLOW[kind]
        )
    return ResolvedSettings(
        kind,
        (kind == "block") if spec.shared is None else spec.shared,
        default_persist if spec.persist is None else spec.persist,
        default_role if spec.role is None else spec.role,
        DEFAULT_OVERFLOW[kind] if spec.overflow is None else spec.overflow,
    )
