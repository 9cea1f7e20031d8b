"""The ``files`` collector: selected file pieces, each labelled with where it came from.

Policy::

    knowledge__context:
      collector: {type: files, root: docs, select: ["profile.md#Goals", "guide.md:12:30"]}

``root`` is relative to the folder of the policy file that declares the layer
(``request.base_dir``) and must stay inside it. It may name the session
(``data/{thread_id}``, ``data/{session_id}``): each placeholder is filled per call with
one plain folder name; a session without its folder yet gets an empty layer and a
report warning (docs/files.md, 'A folder per session'). Each ``select`` entry is a reference
(``file:START:END``, ``file#block/path``, ``file``) or a glob of whole files
(``*.md``, ``notes/**/*.md``). Whole pieces are packed into ``request.cap_tokens`` in
``select`` order; the pieces left out are named in a last line when that line still
fits. The engine applies the layer's overflow rule to what remains.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

from ctxpolicy.blocks.model import renamed_from
from ctxpolicy.blocks.references import (
    BlockReference,
    FileReference,
    Reference,
    ResolvedReference,
    dedupe_references,
    parse_reference,
    resolve_reference,
)
from ctxpolicy.blocks.sandbox import check_relative, resolve_inside, resolve_root
from ctxpolicy.collectors.base import Collected, CollectRequest
from ctxpolicy.errors import BlocksError, FileAccessError, PathEscapeError
from ctxpolicy.layers import fill_root, root_placeholders
from ctxpolicy.policy import FilesCollectorSpec

PIECE_SEPARATOR = "\n\n"
_GLOB_CHARS = frozenset("*?[")
MAX_GLOB_MATCHES = 1000


def expand_select(root: Path, select: Sequence[str]) -> list[Reference]:
    """The references of a ``select`` list, globs expanded to the files they match.

    Glob matches are sorted by path; files reached through a symlink that leaves the
    root are refused like any other escape.

    Raises:
        PathEscapeError: an entry (or a glob match) leaves the root.
        ReferenceSyntaxError: an entry is not a reference.
    """
    refs: list[Reference] = []
    real_root = root.resolve()
    for entry in select:
        if _GLOB_CHARS.intersection(entry) and "#" not in entry and ":" not in entry:
            check_relative(entry)
            if ".." in Path(entry).parts:
                raise PathEscapeError(entry, "'..' is not allowed in a glob")
            matches = sorted(p for p in real_root.glob(entry) if p.is_file())
            if len(matches) > MAX_GLOB_MATCHES:
                raise BlocksError(
                    f"select entry {entry!r} matches {len(matches)} files "
                    f"(limit {MAX_GLOB_MATCHES})"
                )
            for match in matches:
                name = match.relative_to(real_root).as_posix()
                resolve_inside(real_root, name)  # refuses a symlink that leaves the root
                refs.append(FileReference(name))
        else:
            refs.append(parse_reference(entry))
    return dedupe_references(refs)


def pack_pieces(
    pieces: Sequence[ResolvedReference],
    *,
    cap_tokens: int,
    count_tokens: Callable[[str], int],
    separator: str = PIECE_SEPARATOR,
) -> list[ResolvedReference]:
    """The pieces that fit ``cap_tokens`` whole, in order (a piece too big is skipped).

    When not even the first piece fits, it is kept alone: the engine's overflow rule
    (truncate, drop, error) then decides, instead of the layer silently going empty.
    """
    kept: list[ResolvedReference] = []
    parts: list[str] = []
    for piece in pieces:
        candidate = separator.join([*parts, piece.format()])
        if count_tokens(candidate) <= cap_tokens:
            kept.append(piece)
            parts.append(piece.format())
    if not kept and pieces:
        return [pieces[0]]
    return kept


def render_pieces(pieces: Sequence[ResolvedReference], *, separator: str = PIECE_SEPARATOR) -> str:
    """Pieces as layer text, each prefixed with ``[file:start-end]``."""
    return separator.join(piece.format() for piece in pieces)


def omitted_note(omitted: Sequence[ResolvedReference], *, cap_tokens: int) -> str:
    """The line that names the pieces left out, so a model (or a reader) can fetch them."""
    names = ", ".join(piece.label for piece in omitted)
    return f"[not included, over this layer's {cap_tokens}-token cap: {names}]"


def render_layer(
    pieces: Sequence[ResolvedReference],
    kept: Sequence[ResolvedReference],
    *,
    cap_tokens: int,
    count_tokens: Callable[[str], int],
    separator: str = PIECE_SEPARATOR,
) -> str:
    """The kept pieces, plus a note naming the omitted ones when the note still fits."""
    text = render_pieces(kept, separator=separator)
    omitted = [piece for piece in pieces if piece not in kept]
    if not omitted or not kept:
        return text
    with_note = separator.join([text, omitted_note(omitted, cap_tokens=cap_tokens)])
    return with_note if count_tokens(with_note) <= cap_tokens else text


def _resolve_pieces(
    request: CollectRequest, root: Path, refs: Sequence[Reference], *, skip: bool
) -> tuple[list[ResolvedReference], list[str]]:
    """The pieces ``refs`` point at, and the report's warnings about them.

    A block found only by its remaining path (a parent heading was renamed,
    `ctxpolicy.blocks.model.find_block`) is used and warned about. With ``skip``
    (``on_error: skip``) a reference that points at nothing is left out and warned about
    while the others are kept; an escape from the root is never skipped.

    Raises:
        BlocksError: a reference failed and ``skip`` is false, or it leaves the root.
    """
    pieces: list[ResolvedReference] = []
    warnings: list[str] = []
    for ref in refs:
        try:
            piece = resolve_reference(root, ref)
        except PathEscapeError:
            raise
        except BlocksError as exc:
            if not skip:
                raise
            warnings.append(f"{request.layer}: select entry {str(ref)!r} skipped: {exc}")
            continue
        found = piece.reference
        if (
            isinstance(ref, BlockReference)
            and isinstance(found, BlockReference)
            and renamed_from(ref.block, found.block)
        ):
            warnings.append(
                f"{request.layer}: block {ref.block!r} of {ref.path!r} no longer exists; "
                f"resolved by its remaining path to {found.block!r} (update the policy's "
                "select entry)"
            )
        pieces.append(piece)
    return pieces, warnings


#: What a placeholder may never be filled with (it must stay one plain folder name).
_UNSAFE_NAME = re.compile(r"[/\\\x00]|^\.\.?$")
MAX_NAME_CHARS = 255


def _placeholder_value(request: CollectRequest, name: str) -> str:
    """The value of root placeholder ``name`` for this call (one plain folder name).

    Raises:
        BlocksError: the call has no such value.
        PathEscapeError: the value is not a plain folder name (``..``, a ``/``, ...).
    """
    value = request.thread_id if name == "thread_id" else request.state.get(name)
    if not isinstance(value, str) or not value:
        where = "the call's thread id" if name == "thread_id" else f"state[{name!r}]"
        raise BlocksError(
            f"layer {request.layer!r}: the files root names {{{name}}}, but {where} is "
            f"not set (got {value!r})"
        )
    if _UNSAFE_NAME.search(value) or len(value) > MAX_NAME_CHARS:
        raise PathEscapeError(value, f"{{{name}}} must be one plain folder name")
    return value


def _filled(request: CollectRequest, root: str) -> str:
    """``root`` with its placeholders filled for this call (see `_placeholder_value`)."""
    names = root_placeholders(root)
    if not names:
        return root
    return fill_root(root, {name: _placeholder_value(request, name) for name in names})


def _session_root(request: CollectRequest, root: str, base_dir: Path) -> tuple[str, Path | None]:
    """The call's root (as filled) and its folder; None when a root that names the
    session has no folder yet (nothing is read, so nothing can escape).

    Raises:
        PathEscapeError: the root leaves the policy's folder.
        FileAccessError: a root without placeholders is missing; a root is not a folder
            or cannot be read.
        BlocksError: a placeholder has no value for this call.
    """
    filled = _filled(request, root)
    try:
        return filled, resolve_root(filled, base_dir=base_dir)
    except FileAccessError as exc:
        if filled == root or not exc.missing:
            raise
        return filled, None


def collect_files(request: CollectRequest) -> str | Collected | None:
    """Collect the ``select``-ed pieces of a ``files`` layer.

    Returns:
        The labelled pieces packed into the cap; a `Collected` when the report should
        warn about them (a block resolved by its remaining path, a piece skipped under
        ``on_error: skip``).

    Raises:
        BlocksError: the root or a reference leaves its folder, a file is missing or too
            large, a reference is malformed. (The engine applies ``on_error``.)
        TypeError: the request's spec is not a ``files`` spec.
    """
    spec = request.spec
    if not isinstance(spec, FilesCollectorSpec):
        raise TypeError(f"collect_files needs a files collector spec, got {type(spec).__name__}")
    if request.base_dir is None:
        raise BlocksError(
            f"layer {request.layer!r}: a files collector's root {spec.root!r} is relative to "
            "the policy file, but this policy was not loaded from a file (no base_dir)"
        )
    filled, root = _session_root(request, spec.root, request.base_dir)
    if root is None:
        note = f"{request.layer}: no folder {filled!r} for this session yet; the layer is empty"
        return Collected(None, (note,))
    pieces, warnings = _resolve_pieces(
        request, root, expand_select(root, spec.select), skip=spec.on_error == "skip"
    )
    kept = pack_pieces(pieces, cap_tokens=request.cap_tokens, count_tokens=request.count_tokens)
    text = render_layer(
        pieces, kept, cap_tokens=request.cap_tokens, count_tokens=request.count_tokens
    )
    if warnings:
        return Collected(text or None, tuple(warnings))
    return text or None
