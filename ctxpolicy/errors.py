"""The error classes of ctxpolicy. Every one is a `CtxPolicyError`.

A class may also derive from a built-in exception (``ValueError``, ``OSError``) so that
existing ``except`` clauses keep working. The errors of `ctxpolicy.blocks` are here too
(``ctxpolicy.blocks`` re-exports them).
"""

from __future__ import annotations

import errno
from collections.abc import Sequence
from pathlib import Path

from ctxpolicy.diagnostics import PolicyIssue


class CtxPolicyError(Exception):
    """Base class of every error ctxpolicy raises on purpose."""


class PolicyValidationError(CtxPolicyError):
    """A policy file is invalid. ``issues`` holds every problem found, not just the first.

    The message is ``title`` (default ``invalid policy (N error(s))``) and the first 20
    errors, one a line.
    """

    def __init__(self, issues: Sequence[PolicyIssue], *, title: str | None = None) -> None:
        self.issues: tuple[PolicyIssue, ...] = tuple(issues)
        errors = [i for i in self.issues if i.severity == "error"]
        head = "\n".join(i.format_text() for i in errors[:20])
        more = f"\n... and {len(errors) - 20} more" if len(errors) > 20 else ""
        if title is None:
            title = f"invalid policy ({len(errors)} error(s))"
        super().__init__(f"{title}:\n{head}{more}")

    def __str__(self) -> str:
        # the message, also for a subclass that is an OSError with a ``filename`` (whose
        # own ``__str__`` would print ``[Errno None] None: 'file'``)
        return str(self.args[0])


class MissingServiceError(PolicyValidationError, LookupError):
    """The policy needs runtime services the application did not give the engine.

    Raised when the engine is built (`PolicyEngine.from_file`, ``init_context_engine``),
    not on the first call that needs one: ``issues`` names each layer, the policy key and
    its ``file:line:col``. A `PolicyValidationError` and a ``LookupError``.
    """

    def __init__(self, issues: Sequence[PolicyIssue]) -> None:
        super().__init__(issues, title=f"the policy needs {len(issues)} service(s) not given")


class PolicyNotFoundError(PolicyValidationError, FileNotFoundError):
    """The policy file (or the bundled ``builtin:NAME``) does not exist.

    A `PolicyValidationError` (one ``file.missing`` issue) and a ``FileNotFoundError``
    whose ``filename`` is the file as the issue names it.
    """

    def __init__(self, issues: Sequence[PolicyIssue]) -> None:
        super().__init__(issues, title="policy file not found")
        self.filename = self.issues[0].file if self.issues else None


class PolicyNotGivenError(PolicyValidationError, ValueError):
    """No policy file was given and ``CTXPOLICY_POLICY`` is not set.

    A `PolicyValidationError` (one issue, rule ``env.missing``) and a ``ValueError``.
    """

    def __init__(self) -> None:
        message = "no policy path given and CTXPOLICY_POLICY is not set"
        super().__init__([PolicyIssue("<env CTXPOLICY_POLICY>", 0, 0, "$", message, "env.missing")])


class PolicyFileRefusedError(CtxPolicyError):
    """A reader refused a policy document (too deep, too large, a YAML tag, ...).

    Raised inside the YAML and TOML readers and turned back into the one ``issue`` it
    carries before the reader returns: it never reaches a caller.
    """

    def __init__(self, issue: PolicyIssue) -> None:
        super().__init__(issue.message)
        self.issue = issue


class NotRegularFileError(CtxPolicyError, OSError):
    """The path is a folder, FIFO, socket or device."""


class FileTooLargeError(CtxPolicyError, OSError):
    """The file is larger than the allowed size (``size`` is what was seen)."""

    def __init__(self, path: Path, size: int, limit: int, *, grew: bool = False) -> None:
        self.size = size
        self.limit = limit
        self.grew = grew
        super().__init__(errno.EFBIG, f"larger than {limit} bytes", str(path))


class BudgetExceededError(CtxPolicyError):
    """A layer does not fit its token cap and its overflow rule is ``error``."""

    def __init__(self, layer: str, tokens: int, cap: int, *, detail: str = "") -> None:
        self.layer = layer
        self.tokens = tokens
        self.cap = cap
        extra = f": {detail}" if detail else ""
        super().__init__(f"layer {layer!r} needs {tokens} tokens but its cap is {cap}{extra}")


class QueryPathError(CtxPolicyError):
    """The query was given twice (runtime and checkpoint) or is missing."""


class UnknownProcessError(CtxPolicyError):
    """A process name that the policy does not declare."""

    def __init__(self, process: str, known: Sequence[str]) -> None:
        self.process = process
        self.known = tuple(known)
        super().__init__(
            f"unknown process {process!r}; the policy declares: {', '.join(sorted(known))}"
        )


class PersistenceError(CtxPolicyError):
    """An attempt to persist a layer the policy marks runtime-only (or a misuse of state)."""


class CollectorError(CtxPolicyError):
    """A collector failed (raised, timed out or returned a wrong type) with ``on_error: fail``."""

    def __init__(self, layer: str, message: str) -> None:
        self.layer = layer
        super().__init__(f"collector of layer {layer!r} failed: {message}")


class EmbeddingsUnavailableError(CtxPolicyError, ImportError):
    """A builtin embedding model's packages are not installed (the message names the extra).

    An ``ImportError`` too, so ``except ImportError`` around an optional model keeps working.
    """


# ------------------------------------------------------------------ ctxpolicy.blocks
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
    """A file inside the root cannot be used: missing, too large, not UTF-8, a folder.

    ``missing`` is True when nothing is at the path (not when it is of the wrong kind or
    cannot be read).
    """

    def __init__(self, path: str, reason: str, *, missing: bool = False) -> None:
        self.path = path
        self.reason = reason
        self.missing = missing
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
