"""Compile a context manifest (a ``context-config.json``) into messages.

See docs/design.md, 'Files as context'.

The manifest is the complete input spec of one LLM call; every value is a handle::

    {
      "systemPrompt": [{"type": "global", "file": "system-prompt.md"},
                       {"type": "session", "file": "session-prompt.md"}],
      "profileBlocks": ["学习目标", "已有基础"],
      "chatHistory": {"source": "messages.json", "strategy": "full"},
      "query": "这段是什么意思 [guidance.md:12:30]",
      "references": [{"path": "guidance.md", "startLine": 12, "endLine": 30},
                     {"path": "ground-truth.md", "block": "薛定谔方程"}]
    }

`read_sources` is the only step that touches the file system (inside the root only).
The five compile stages are pure functions over what it read:

1. `resolve_sources` — the system prompt: global + session prompt files, in order;
2. `select_blocks` — the profile blocks listed in ``profileBlocks``;
3. `merge_references` — the query plus every inline and listed reference, once each,
   each labelled with its file and lines;
4. `format_messages` — the chat history as LangChain messages (curated: dismissed
   items become placeholders) and the final user message;
5. `emit_messages` — through `ctxpolicy.plan.plan_layers` and
   `ctxpolicy.compose.compose_messages`, so a manifest obeys the same token budget,
   overflow rules and history validity as every other call.

Paths: the global prompt and the profile live in ``root``; session files (the session
prompt, the history, references) in ``session_dir`` (a folder inside ``root``;
defaults to ``root``), like ``data/`` and ``data/{sessionId}/``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from langchain_core.messages import AIMessage, HumanMessage
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ctxpolicy.blocks.curation import CurationLog, curate_messages, format_placeholder
from ctxpolicy.blocks.markdown import parse_markdown_blocks
from ctxpolicy.blocks.model import block_ids, find_block
from ctxpolicy.blocks.references import (
    BlockReference,
    FileReference,
    LineReference,
    Reference,
    ResolvedReference,
    dedupe_references,
    find_references,
    reference_from_data,
    slice_reference,
)
from ctxpolicy.blocks.sandbox import (
    DEFAULT_MAX_FILE_BYTES,
    check_relative,
    read_text_inside,
    resolve_root,
)
from ctxpolicy.compose import compose_layers
from ctxpolicy.errors import BlockNotFoundError, BlocksError, ManifestError
from ctxpolicy.plan import plan_layers
from ctxpolicy.policy import Policy

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

    from ctxpolicy.compose import Composition
    from ctxpolicy.plan import LayerPlan
    from ctxpolicy.policy import Policy
    from ctxpolicy.report import LayerSource

PROFILE_LAYER = "profile__context"
MANIFEST_PROCESS = "manifest"
PIECE_SEPARATOR = "\n\n"


# --------------------------------------------------------------------------- the manifest


class _Model(BaseModel):
    model_config = ConfigDict(
        frozen=True, extra="forbid", populate_by_name=True, arbitrary_types_allowed=True
    )


class SystemPromptSource(_Model):
    """One system prompt file: ``global`` (in the root) or ``session`` (in the session folder)."""

    type: Literal["global", "session"] = "global"
    file: Annotated[str, Field(min_length=1)]


class ChatHistorySpec(_Model):
    """Where the history is and how much of it to use (``full`` or ``none``)."""

    source: Annotated[str, Field(min_length=1)]
    strategy: Literal["full", "none"] = "full"


class ContextManifest(_Model):
    """A parsed ``context-config.json`` (camelCase keys, or snake_case)."""

    system_prompt: tuple[SystemPromptSource, ...] = Field(default=(), alias="systemPrompt")
    profile_file: Annotated[str, Field(min_length=1)] = Field(
        default="profile.md", alias="profileFile"
    )
    profile_blocks: tuple[Annotated[str, Field(min_length=1)], ...] = Field(
        default=(), alias="profileBlocks"
    )
    chat_history: ChatHistorySpec | None = Field(default=None, alias="chatHistory")
    query: Annotated[str, Field(min_length=1)]
    references: tuple[LineReference | BlockReference | FileReference, ...] = ()

    @field_validator("references", mode="before")
    @classmethod
    def _parse_references(cls, value: Any) -> Any:
        if not isinstance(value, list | tuple):
            return value
        return tuple(
            item
            if isinstance(item, LineReference | BlockReference | FileReference)
            else reference_from_data(item)
            for item in value
        )


def parse_manifest(data: Mapping[str, Any], *, source: str = "manifest") -> ContextManifest:
    """Validate manifest data.

    Raises:
        ManifestError: naming ``source``, the field and the reason.
    """
    try:
        return ContextManifest.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ManifestError(f"{source}: invalid context manifest: {problems}") from None
    except (ValueError, BlocksError) as exc:  # a reference entry of the wrong shape
        raise ManifestError(f"{source}: invalid context manifest: {exc}") from None


def load_manifest(path: str | Path, *, max_bytes: int = DEFAULT_MAX_FILE_BYTES) -> ContextManifest:
    """Read and validate a ``context-config.json`` file.

    Raises:
        ManifestError: not JSON, not an object, or invalid.
        FileAccessError: missing, too large, not UTF-8.
    """
    file = Path(path)
    text = read_text_inside(file.parent, file.name, max_bytes=max_bytes)
    return manifest_from_text(text, source=str(file))


def manifest_from_text(text: str, *, source: str = "manifest") -> ContextManifest:
    """Parse and validate the JSON text of a context manifest (read as `load_manifest`
    reads it).

    Raises:
        ManifestError: not JSON (``source:LINE:COL``), not an object, or invalid.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{source}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise ManifestError(f"{source}: a context manifest is a JSON object")
    return parse_manifest(data, source=source)


# --------------------------------------------------------------------------- reading (I/O)


@dataclass(frozen=True, slots=True)
class ManifestSources:
    """Every file a manifest needs, read once (the only I/O of a compile).

    Attributes:
        system_prompts: Text of each ``systemPrompt`` file, in manifest order.
        profile: Text of the profile file (None when no block is selected).
        history: Text of the chat history file (None without history).
        files: Text of each referenced file, by the path the reference uses.
    """

    system_prompts: tuple[str, ...] = ()
    profile: str | None = None
    history: str | None = None
    files: Mapping[str, str] = field(default_factory=dict)


def manifest_references(manifest: ContextManifest) -> list[Reference]:
    """Inline references of the query, then the listed ones, without repeats."""
    return dedupe_references([*find_references(manifest.query), *manifest.references])


def _session_path(session_dir: str | None, path: str) -> str:
    check_relative(path)  # before joining: "s1" + "/etc/x" must not look relative
    return path if session_dir in (None, "", ".") else f"{session_dir}/{path}"


def read_sources(
    manifest: ContextManifest,
    *,
    root: str | Path,
    session_dir: str | None = None,
    max_bytes: int = DEFAULT_MAX_FILE_BYTES,
) -> ManifestSources:
    """Read what ``manifest`` points at, inside ``root`` only.

    Raises:
        PathEscapeError: a path leaves the root (absolute, ``..``, a symlink) — checked
            before anything is opened, inline references in the query included.
        FileAccessError: a file is missing, too large or not UTF-8.
    """
    base = resolve_root(root)
    if session_dir not in (None, "", "."):
        resolve_root(str(session_dir), base_dir=base)  # the session folder stays inside

    def read(path: str) -> str:
        return read_text_inside(base, path, max_bytes=max_bytes)

    prompts = tuple(
        read(s.file if s.type == "global" else _session_path(session_dir, s.file))
        for s in manifest.system_prompt
    )
    profile = read(manifest.profile_file) if manifest.profile_blocks else None
    history = None
    if manifest.chat_history is not None and manifest.chat_history.strategy != "none":
        history = read(_session_path(session_dir, manifest.chat_history.source))
    files = {
        ref.path: read(_session_path(session_dir, ref.path))
        for ref in manifest_references(manifest)
    }
    return ManifestSources(system_prompts=prompts, profile=profile, history=history, files=files)


# --------------------------------------------------------------------------- the five stages


def resolve_sources(manifest: ContextManifest, sources: ManifestSources) -> str:
    """Stage 1: the system prompt — the prompt files joined in order (global, then session)."""
    del manifest
    return PIECE_SEPARATOR.join(text.strip() for text in sources.system_prompts if text.strip())


def select_blocks(
    manifest: ContextManifest, sources: ManifestSources
) -> tuple[ResolvedReference, ...]:
    """Stage 2: the ``profileBlocks`` of the profile, in manifest order, each once.

    Raises:
        BlockNotFoundError: a listed block is not in the profile.
    """
    if not manifest.profile_blocks or sources.profile is None:
        return ()
    blocks = parse_markdown_blocks(sources.profile, manifest.profile_file)
    picked: list[ResolvedReference] = []
    for block_id in dict.fromkeys(manifest.profile_blocks):
        block = find_block(blocks, block_id)
        if block is None:
            raise BlockNotFoundError(manifest.profile_file, block_id, block_ids(blocks))
        picked.append(
            slice_reference(BlockReference(manifest.profile_file, block.id), sources.profile)
        )
    return tuple(picked)


def merge_references(manifest: ContextManifest, sources: ManifestSources) -> str:
    """Stage 3: the user message — the query, then each referenced piece once, labelled.

    A reference both inline in the query and in ``references`` is included once.

    Raises:
        LineRangeError, BlockNotFoundError: a reference points at nothing.
        ManifestError: a referenced file was not read (call `read_sources` first).
    """
    pieces: list[str] = [manifest.query]
    for ref in manifest_references(manifest):
        text = sources.files.get(ref.path)
        if text is None:
            raise ManifestError(f"reference {ref}: file {ref.path!r} was not read")
        pieces.append(slice_reference(ref, text).format())
    return PIECE_SEPARATOR.join(pieces)


@dataclass(frozen=True, slots=True)
class FormattedContext:
    """Stage 4's result: the history and the current user message."""

    history: tuple[BaseMessage, ...]
    user_message: str


def _content_text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multi-part content: keep the text parts
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    raise ManifestError(f"{where}: 'content' must be a string or a list of parts")


def parse_history(text: str, *, source: str) -> tuple[BaseMessage, ...]:
    """Chat history JSON (a list, or ``{"messages": [...]}``) → LangChain messages.

    Each entry: ``role`` (``user``/``human`` or ``assistant``/``ai``), ``content`` (text
    or a list of parts), optional ``id``, optional ``dismissed`` (a summary: the entry
    is shown as a placeholder).

    Raises:
        ManifestError: not JSON, or an entry of the wrong shape.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{source}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}") from None
    if isinstance(data, dict):
        data = data.get("messages")
    if not isinstance(data, list):
        raise ManifestError(f"{source}: expected a list of messages (or {{'messages': [...]}})")
    out: list[BaseMessage] = []
    for index, entry in enumerate(data):
        out.append(_history_message(entry, f"{source}[{index}]"))
    return tuple(out)


def _history_message(entry: Any, where: str) -> BaseMessage:
    """One chat history entry → a LangChain message (a placeholder if dismissed).

    Raises:
        ManifestError: the entry is not an object, or has a wrong role or content.
    """
    if not isinstance(entry, dict):
        raise ManifestError(f"{where}: a message is an object with 'role' and 'content'")
    role = entry.get("role")
    content = _content_text(entry.get("content", ""), where)
    dismissed = entry.get("dismissed")
    if isinstance(dismissed, str) and dismissed.strip():
        content = format_placeholder(f"{role} message", dismissed.strip())
    message_id = entry.get("id")
    kwargs: dict[str, Any] = {"id": str(message_id)} if message_id is not None else {}
    if role in ("user", "human"):
        return HumanMessage(content=content, **kwargs)
    if role in ("assistant", "ai"):
        return AIMessage(content=content, **kwargs)
    raise ManifestError(f"{where}: role must be 'user' or 'assistant', got {role!r}")


def format_messages(
    manifest: ContextManifest,
    sources: ManifestSources,
    *,
    user_message: str,
    curation_log: CurationLog | None = None,
) -> FormattedContext:
    """Stage 4: the chat history as messages (curated) and the current user message."""
    history: tuple[BaseMessage, ...] = ()
    if manifest.chat_history is not None and sources.history is not None:
        history = parse_history(sources.history, source=manifest.chat_history.source)
        if curation_log is not None:
            history = tuple(curate_messages(history, curation_log))
    return FormattedContext(history=history, user_message=user_message)


def manifest_policy(*, context_window: int = 128_000, tokenizer: str = "cl100k_base") -> Policy:
    """The policy a manifest compiles through when the caller gives none.

    Layers: ``system_prompt``, ``profile__context``, ``checkpoint_messages``, ``query``;
    one process ``manifest`` with the history and the query at runtime.
    """
    return Policy.model_validate(
        {
            "version": 1,
            "name": "context-manifest",
            "description": "a context-config.json manifest compiled through the engine",
            "model": {"context_window": context_window, "tokenizer": tokenizer},
            "order": ["system_prompt", PROFILE_LAYER, "checkpoint_messages", "query"],
            "processes": {
                MANIFEST_PROCESS: {
                    "checkpoint_messages": True,
                    "share_context": True,
                    "query": "runtime",
                }
            },
            "default_process": MANIFEST_PROCESS,
        }
    )


def emit_messages(
    *,
    system_prompt: str,
    profile: Sequence[ResolvedReference],
    formatted: FormattedContext,
    policy: Policy | None = None,
    process: str | None = None,
    profile_layer: str = PROFILE_LAYER,
) -> list[BaseMessage]:
    """Stage 5: compose the messages through the engine's planner and composer.

    Args:
        system_prompt: From stage 1.
        profile: From stage 2; becomes the ``profile_layer`` block.
        formatted: From stage 4.
        policy: The budget/ordering policy (default `manifest_policy`); it must have
            ``profile_layer`` in its order when profile blocks are selected.
        process: The process to plan for (default: the policy's ``default_process``).
        profile_layer: The block layer that carries the profile.

    Raises:
        BudgetExceededError: a layer with overflow ``error`` does not fit.
        QueryPathError, ValueError: the policy cannot carry this manifest.
    """
    _, composition = emit_composition(
        system_prompt=system_prompt,
        profile=profile,
        formatted=formatted,
        policy=policy,
        process=process,
        profile_layer=profile_layer,
    )
    return list(composition.messages)


def emit_composition(
    *,
    system_prompt: str,
    profile: Sequence[ResolvedReference],
    formatted: FormattedContext,
    policy: Policy | None = None,
    process: str | None = None,
    profile_layer: str = PROFILE_LAYER,
) -> tuple[LayerPlan, Composition]:
    """`emit_messages` with its plan and the whole `Composition` (messages and report).

    What ``ctxpolicy compile`` renders; same arguments and errors as `emit_messages`.
    """

    effective = policy if policy is not None else manifest_policy()
    plan = plan_layers(effective, process or effective.default_process)
    profile_text = PIECE_SEPARATOR.join(piece.format() for piece in profile)
    contexts = {profile_layer: profile_text} if profile_text else None
    sources: dict[str, LayerSource] = {profile_layer: "collector"} if profile_text else {}
    if plan.query_path == "checkpoint":
        history = [*formatted.history, HumanMessage(content=formatted.user_message)]
        query: str | None = None
    else:
        history, query = list(formatted.history), formatted.user_message
    composition = compose_layers(
        plan,
        system_prompt=system_prompt,
        checkpoint_messages=history,
        contexts=contexts,
        query=query,
        sources=sources,
        request_summary=False,
    )
    return plan, composition


# --------------------------------------------------------------------------- all together


@dataclass(frozen=True, slots=True)
class CompiledContext:
    """A compiled manifest (``{systemPrompt, messages}``, plus provenance).

    Attributes:
        system_prompt: The joined system prompt.
        messages: The LangChain messages to send (system prompt first).
        profile: The selected profile blocks, with their line spans.
        user_message: The final user message (query + referenced pieces).
    """

    system_prompt: str
    messages: list[BaseMessage]
    profile: tuple[ResolvedReference, ...]
    user_message: str


def compile_manifest(
    manifest: ContextManifest | Mapping[str, Any],
    *,
    root: str | Path,
    session_dir: str | None = None,
    policy: Policy | None = None,
    process: str | None = None,
    curation_log: CurationLog | None = None,
    max_bytes: int = DEFAULT_MAX_FILE_BYTES,
) -> CompiledContext:
    """Compile a context manifest into messages: read, then the five stages.

    Args:
        manifest: A `ContextManifest` or its JSON data.
        root: The data folder; nothing outside it is read.
        session_dir: The session folder inside ``root`` (default ``root``).
        policy: Budget and order (default `manifest_policy`).
        process: The policy process to plan for.
        curation_log: Dismissals to apply to the history.
        max_bytes: Size limit of each file read.

    Raises:
        ManifestError: an invalid manifest or history file.
        PathEscapeError: any path leaves ``root``.
        FileAccessError, LineRangeError, BlockNotFoundError: a handle points at nothing.
        BudgetExceededError: the result cannot fit the policy's budget.
    """
    parsed = manifest if isinstance(manifest, ContextManifest) else parse_manifest(manifest)
    sources = read_sources(parsed, root=root, session_dir=session_dir, max_bytes=max_bytes)
    system_prompt = resolve_sources(parsed, sources)
    profile = select_blocks(parsed, sources)
    user_message = merge_references(parsed, sources)
    formatted = format_messages(
        parsed, sources, user_message=user_message, curation_log=curation_log
    )
    messages = emit_messages(
        system_prompt=system_prompt,
        profile=profile,
        formatted=formatted,
        policy=policy,
        process=process,
    )
    return CompiledContext(
        system_prompt=system_prompt, messages=messages, profile=profile, user_message=user_message
    )


__all__ = [
    "MANIFEST_PROCESS",
    "PROFILE_LAYER",
    "ChatHistorySpec",
    "CompiledContext",
    "ContextManifest",
    "FormattedContext",
    "ManifestSources",
    "SystemPromptSource",
    "compile_manifest",
    "emit_composition",
    "emit_messages",
    "format_messages",
    "load_manifest",
    "manifest_from_text",
    "manifest_policy",
    "manifest_references",
    "merge_references",
    "parse_history",
    "parse_manifest",
    "read_sources",
    "resolve_sources",
    "select_blocks",
]
