"""Errors of the blocks package. Every one is a `ctxpolicy.CtxPolicyError`."""

from __future__ import annotations

from ctxpolicy.errors import CtxPolicyError


class BlocksError(CtxPolicyError):
    """Base class of the errors raised by `ctxpolicy.blocks`."""


class PathEscapeError(BlocksError):
    """A path leaves its root folder (absolute, ``..``, a symlink) or is not a plain file.

    Raised *before* anything outside the root is opened.
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"refused path {path!r}: {reason}")


class FileAccessError(BlocksError):
    """A file inside the root cannot be used: missing, too large, not UTF-8, a folder."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"cannot read {path!r}: {reason}")


class ReferenceSyntaxError(BlocksError):
    """A reference such as ``[file.md:12:30]`` or ``[file.md#a/b]`` is malformed."""


class BlockNotFoundError(BlocksError):
    """A block reference names no block of the file."""

    def __init__(self, file: str, block_id: str, known: tuple[str, ...]) -> None:
        self.file = file
        self.block_id = block_id
        self.known = known
        shown = ", ".join(repr(k) for k in known[:12])
        more = f", ... ({len(known) - 12} more)" if len(known) > 12 else ""
        hint = f"; blocks of the file: {shown}{more}" if known else "; the file has no blocks"
        super().__init__(f"no block {block_id!r} in {file!r}{hint}")


class LineRangeError(BlocksError):
    """A line reference asks for lines the file does not have."""


class ManifestError(BlocksError):
    """A context manifest (``context-config.json``) is invalid."""
