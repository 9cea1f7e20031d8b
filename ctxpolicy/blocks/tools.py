"""File tools for agents, confined to one root folder.

See docs/design.md, 'Files as context'.

Shell-like on purpose (models know ``cat``, ``ls``, ``grep``): `read_file` ≈ ``sed -n``,
`list_files` ≈ ``find``, `search` ≈ ``grep -rn``, `read_block` reads one block of a
Markdown/JSON file, `write_file` (off unless ``enable_write=True``) writes atomically.
Every path goes through `ctxpolicy.blocks.sandbox`: nothing outside the root is ever
opened, listed or written, and a refusal comes back to the model as a tool error it
can read (``refused path '../x': ...``), never as a crash.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterator
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from langchain_core.tools import StructuredTool, ToolException

from ctxpolicy.blocks.curation import DISMISS_MEMORY, CurationLog, create_dismiss_memory_tool
from ctxpolicy.blocks.markdown import split_lines
from ctxpolicy.blocks.references import BlockReference, slice_reference
from ctxpolicy.blocks.sandbox import (
    DEFAULT_MAX_FILE_BYTES,
    read_text_inside,
    resolve_inside,
    resolve_root,
)
from ctxpolicy.errors import BlocksError, FileAccessError, PathEscapeError

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

    from ctxpolicy.policy import Policy

DEFAULT_MAX_OUTPUT_CHARS = 20_000
DEFAULT_MAX_RESULTS = 200
MAX_PATTERN_CHARS = 200
MAX_LINE_CHARS = 300
MAX_SEARCHED_LINE_CHARS = 10_000
"""A regex is matched against at most this much of each line (bounds pathological patterns)."""

_R = TypeVar("_R")


class FileTools:
    """The operations behind the tools, on one root (plain methods, easy to test).

    Args:
        root: The folder the tools are confined to (must exist).
        enable_write: Allow `write_file`.
        max_file_bytes: Largest file read or written.
        max_output_chars: Largest tool answer; longer answers are cut at a line with a
            note saying how to get the rest.
        max_results: Most entries `list_files` / matches `search` return.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        enable_write: bool = False,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
        max_results: int = DEFAULT_MAX_RESULTS,
    ) -> None:
        """See the class docstring."""
        self.root = resolve_root(root)
        self.enable_write = enable_write
        self.max_file_bytes = max_file_bytes
        self.max_output_chars = max_output_chars
        self.max_results = max_results

    # ------------------------------------------------------------------ reading

    def read_file(
        self, path: str, start_line: int | None = None, end_line: int | None = None
    ) -> str:
        """Lines ``start_line..end_line`` (1-based, inclusive; default the whole file)."""
        lines = split_lines(read_text_inside(self.root, path, max_bytes=self.max_file_bytes))
        total = len(lines)
        first, last = _line_window(path, start_line, end_line, total)
        if total == 0:
            return f"[{path}: empty file]"
        if first > total:
            raise BlocksError(f"read_file {path!r}: the file has {total} line(s)")
        return self._show_lines(path, lines, first, last)

    def read_block(self, path: str, block_id: str) -> str:
        """One block (with its children) of a Markdown or JSON file."""
        text = read_text_inside(self.root, path, max_bytes=self.max_file_bytes)
        resolved = slice_reference(BlockReference(path, block_id), text)
        return self._limit(resolved.format(), f"read_file {path} lines {resolved.start_line}+")

    def list_files(self, path: str = ".", pattern: str = "*") -> str:
        """Files under ``path`` (recursive, like ``find``), relative to the root."""
        base = self.root if path in {"", "."} else resolve_inside(self.root, path)
        if not base.is_dir():
            raise FileAccessError(path, "is not a folder")
        entries: list[str] = []
        for rel in self._walk(base):
            if Path(rel).match(pattern) or Path(rel).name == pattern:
                entries.append(rel)
                if len(entries) > self.max_results:
                    break
        more = len(entries) > self.max_results
        entries = entries[: self.max_results]
        if not entries:
            return f"[no files matching {pattern!r} under {path}]"
        tail = [f"[more than {self.max_results} entries; narrow path or pattern]"] if more else []
        return "\n".join([*entries, *tail])

    def search(self, pattern: str, path: str = ".", regex: bool = False) -> str:
        """Lines containing ``pattern`` (literal unless ``regex``), like ``grep -rn``."""
        if not pattern or len(pattern) > MAX_PATTERN_CHARS:
            raise BlocksError(f"search: pattern must have 1 to {MAX_PATTERN_CHARS} characters")
        try:
            matcher = re.compile(pattern if regex else re.escape(pattern))
        except re.error as exc:
            raise BlocksError(f"search: invalid regular expression {pattern!r}: {exc}") from None
        hits, skipped = self._grep(matcher, path)
        notes = []
        if len(hits) > self.max_results:
            hits = hits[: self.max_results]
            notes.append(f"[more than {self.max_results} matches; narrow the search]")
        if skipped:
            notes.append(f"[{skipped} file(s) skipped: not UTF-8 text, too large or special]")
        if not hits:
            return "\n".join([f"[no match for {pattern!r} under {path}]", *notes])
        return self._limit("\n".join([*hits, *notes]), "narrow the search")

    # ------------------------------------------------------------------ writing

    def write_file(
        self,
        path: str,
        content: str,
        start_line: int | None = None,
        end_line: int | None = None,
    ) -> str:
        """Write ``content`` to ``path``; with a line range, replace just those lines."""
        if not self.enable_write:
            raise BlocksError("write_file is disabled for this root")
        target = resolve_inside(self.root, path, must_exist=False)
        exists = target.exists()
        if exists and not stat.S_ISREG(target.lstat().st_mode):
            raise PathEscapeError(path, "not a regular file")
        if start_line is not None or end_line is not None:
            if not exists:
                raise FileAccessError(path, "no such file (a line range needs an existing file)")
            new_text = self._replace_lines(path, content, start_line, end_line)
        else:
            new_text = content
        data = new_text.encode("utf-8")
        if len(data) > self.max_file_bytes:
            raise FileAccessError(
                path, f"{len(data)} bytes is over the limit of {self.max_file_bytes}"
            )
        _replace_atomically(target, data)
        return f"wrote {path} ({len(split_lines(new_text))} lines)"

    # ------------------------------------------------------------------ helpers

    def _show_lines(self, path: str, lines: list[str], first: int, last: int) -> str:
        """Lines ``first..last`` under a header, cut at the output limit with a note."""
        total = len(lines)
        shown: list[str] = []
        used = 0
        for number in range(first, last + 1):
            line = lines[number - 1]
            if shown and used + len(line) + 1 > self.max_output_chars:
                header = f"[{path}:{first}-{number - 1} of {total} lines]"
                note = (
                    f"[output limit of {self.max_output_chars} characters reached; "
                    f"continue with start_line={number}]"
                )
                return "\n".join([header, *shown, note])
            shown.append(line)
            used += len(line) + 1
        return "\n".join([f"[{path}:{first}-{last} of {total} lines]", *shown])

    def _replace_lines(
        self, path: str, content: str, start_line: int | None, end_line: int | None
    ) -> str:
        """The text of ``path`` with lines ``start_line..end_line`` replaced by ``content``.

        Raises:
            BlocksError: the range is outside the file.
        """
        lines = split_lines(read_text_inside(self.root, path, max_bytes=self.max_file_bytes))
        first = 1 if start_line is None else start_line
        last = len(lines) if end_line is None else end_line
        if not 1 <= first <= last + 1 or last > len(lines):
            raise BlocksError(
                f"write_file {path!r}: range {first}-{last} is outside the file's "
                f"{len(lines)} line(s)"
            )
        lines[first - 1 : last] = split_lines(content)
        return "\n".join(lines) + "\n"

    def _grep(self, matcher: re.Pattern[str], path: str) -> tuple[list[str], int]:
        """Up to ``max_results + 1`` matching lines, and the count of unreadable files."""
        base = self.root if path in {"", "."} else resolve_inside(self.root, path)
        if base.is_file():
            files = [base.relative_to(self.root).as_posix()]
        else:
            files = list(self._walk(base))
        hits: list[str] = []
        skipped = 0
        for rel in files:
            try:
                text = read_text_inside(self.root, rel, max_bytes=self.max_file_bytes)
            except BlocksError:
                skipped += 1  # binary, too large, or not a regular file: reported
                continue
            for number, line in enumerate(split_lines(text), start=1):
                if matcher.search(line, 0, MAX_SEARCHED_LINE_CHARS):
                    hits.append(f"{rel}:{number}: {line[:MAX_LINE_CHARS]}")
                    if len(hits) > self.max_results:
                        return hits, skipped
        return hits, skipped

    def _walk(self, base: Path) -> Iterator[str]:
        """Regular files under ``base`` (sorted), never following a link out of the root."""
        for folder, dirs, files in os.walk(base, followlinks=False):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                full = Path(folder) / name
                rel = full.relative_to(self.root).as_posix()
                try:
                    resolve_inside(self.root, rel)
                except BlocksError:
                    continue  # a symlink that leaves the root is not shown
                yield rel

    def _limit(self, text: str, hint: str) -> str:
        if len(text) <= self.max_output_chars:
            return text
        cut = text[: self.max_output_chars].rsplit("\n", 1)[0]
        return f"{cut}\n[output limit of {self.max_output_chars} characters reached; {hint}]"


def _line_window(
    path: str, start_line: int | None, end_line: int | None, total: int
) -> tuple[int, int]:
    """The 1-based ``(first, last)`` lines to read of a file with ``total`` lines.

    Raises:
        BlocksError: ``start_line`` is below 1 or ``end_line`` is before it.
    """
    first = 1 if start_line is None else start_line
    last = total if end_line is None else min(end_line, total)
    if first < 1 or (end_line is not None and end_line < first):
        raise BlocksError(f"read_file {path!r}: need 1 <= start_line <= end_line")
    return first, last


def _replace_atomically(target: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``target``, then rename it over ``target``."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=target.suffix)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        Path(tmp).replace(target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _guard(func: Callable[..., _R]) -> Callable[..., _R]:
    """Turn a blocks error into a `ToolException` the model sees as the tool's answer."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> _R:
        try:
            return func(*args, **kwargs)
        except BlocksError as exc:
            raise ToolException(str(exc)) from None

    return wrapper


def create_file_tools(
    root: str | os.PathLike[str],
    *,
    enable_write: bool = False,
    curation_log: CurationLog | None = None,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
    max_results: int = DEFAULT_MAX_RESULTS,
) -> list[BaseTool]:
    """LangChain tools confined to ``root``: read_file, list_files, search, read_block.

    Args:
        root: The folder the tools may see (the session folder).
        enable_write: Also return ``write_file``.
        curation_log: Also return ``dismiss_memory``, recording into this log.
        max_file_bytes: Largest file read or written.
        max_output_chars: Largest tool answer.
        max_results: Most entries / matches returned.

    Returns:
        The tools, ready for ``model.bind_tools(...)`` or a LangGraph ``ToolNode``.

    Raises:
        FileAccessError: ``root`` is not an existing folder.
    """
    ops = FileTools(
        root,
        enable_write=enable_write,
        max_file_bytes=max_file_bytes,
        max_output_chars=max_output_chars,
        max_results=max_results,
    )

    def read_file(path: str, start_line: int | None = None, end_line: int | None = None) -> str:
        """Read a text file under the root, optionally lines start_line..end_line.

        Like `sed -n 'START,ENDp' PATH`. Lines are 1-based and inclusive. The answer
        starts with [PATH:START-END of N lines].
        """
        return ops.read_file(path, start_line, end_line)

    def list_files(path: str = ".", pattern: str = "*") -> str:
        """List files under a folder of the root, recursively (like `find PATH -name PATTERN`)."""
        return ops.list_files(path, pattern)

    def search(pattern: str, path: str = ".", regex: bool = False) -> str:
        """Find lines containing a text (like `grep -rn`); answers FILE:LINE: TEXT.

        The pattern is literal unless regex is true.
        """
        return ops.search(pattern, path, regex)

    def read_block(path: str, block_id: str) -> str:
        """Read one block of a Markdown or JSON file by its heading path, e.g. 'Goals/Q3'.

        Markdown files are split at # headings, JSON files at keys; an unknown id
        answers with the ids the file has.
        """
        return ops.read_block(path, block_id)

    def write_file(
        path: str, content: str, start_line: int | None = None, end_line: int | None = None
    ) -> str:
        """Write a text file under the root; with start_line/end_line, replace only those lines."""
        return ops.write_file(path, content, start_line, end_line)

    funcs: list[Callable[..., str]] = [read_file, list_files, search, read_block]
    if enable_write:
        funcs.append(write_file)
    tools: list[BaseTool] = [
        StructuredTool.from_function(func=_guard(func), handle_tool_error=True) for func in funcs
    ]
    if curation_log is not None:
        tools.append(create_dismiss_memory_tool(curation_log))
    return tools


def policy_file_tools(policy: Policy, process: str | None = None) -> list[BaseTool]:
    """The file tools ``policy`` gives the agents of ``process`` (docs/files.md).

    The process's own ``tools`` wins over the top-level ``tools``; the root is resolved
    against the folder of the policy file that declares it, with the ``files`` collector's
    confinement (relative, inside that folder, symlinks included). Only the tools in
    ``allow`` are returned; ``write_file`` needs ``write_file: true`` as well.
    ``dismiss_memory`` records into a log of its own: its calls and answers stay in the
    history, where ``layers.checkpoint_messages.curate`` reads them.

    Args:
        policy: A loaded policy.
        process: The process (default: the policy's ``default_process``).

    Returns:
        The tools (empty when the policy declares none for ``process``).

    Raises:
        UnknownProcessError: ``process`` is not declared.
        PathEscapeError: the root leaves the policy's folder.
        FileAccessError: the root is missing, or the policy was built in code (no folder).
    """
    spec, base = policy.file_tools(process or policy.default_process)
    if spec is None:
        return []
    if base is None:
        raise FileAccessError(
            spec.root, "a tools root is relative to the policy file; this policy has no file"
        )
    root = resolve_root(spec.root, base_dir=base)
    enable_write = spec.write_file and "write_file" in spec.allow
    tools = create_file_tools(
        root,
        enable_write=enable_write,
        curation_log=CurationLog() if DISMISS_MEMORY in spec.allow else None,
        max_output_chars=spec.max_output_chars or DEFAULT_MAX_OUTPUT_CHARS,
        max_results=spec.max_results or DEFAULT_MAX_RESULTS,
    )
    return [tool for tool in tools if tool.name in spec.allow]
