"""``ctxpolicy validate [PATH ...]``: check policy files (exit 0 valid, 1 invalid, 2 unreadable).

Starts fast: loads neither langchain-core nor tiktoken (CI and pre-commit run it on
every commit), nor jsonschema, jinja2 or ruamel.yaml until a file needs them. A path
that does not exist is reported like any other problem, in the chosen format (rule
``file.missing``, exit 2), so ``--format github`` turns it into an annotation too. With
more than 20 files and stderr on a terminal, a one-line counter shows progress on stderr.

Many files (`PARALLEL_MIN_FILES`) are shared between two processes when the machine has
an idle CPU for a second one (`JOBS_VARIABLE`): the second is forked after the imports
and after the first file, so it starts warm and a base that every team file extends is
parsed once. ``CTXPOLICY_VALIDATE_JOBS=1`` keeps everything in one process, ``2`` forks
whatever the load.
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxpolicy.cli import EXIT_USAGE
from ctxpolicy.cli.progress import Progress
from ctxpolicy.cli.reporters import escape_data, get_reporter
from ctxpolicy.diagnostics import PolicyIssue, display_name
from ctxpolicy.loading import iter_policy_files, validate_paths
from ctxpolicy.loading.extends import DocumentCache

HELP = "check policy files against the schema and the semantic rules"
#: Exit codes, as ``--help``, the README and docs/cli.md give them.
EXIT_CODES = "0 valid, 1 invalid, 2 usage/unreadable"
EXAMPLES = """examples:
  # a team policy on the bundled defaults, in policies/ (the folder validated by default)
  ctxpolicy init my-team --extends builtin:base -o policies/my-team.yaml
  # every policy under policies/, as FILE:LINE:COL: PATH: MESSAGE [RULE]
  ctxpolicy validate
  # GitHub Actions annotations on the lines of a pull request
  ctxpolicy validate policies/ --format github
  ctxpolicy validate policies/my-team.yaml builtin:long-session --format json
"""
DEFAULT_PATHS = ("policies",)
#: Rules that mean "could not read", not "invalid": exit code 2.
UNREADABLE_RULES = frozenset({"file.unreadable", "file.missing"})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of ``validate``."""
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="policy files or folders, searched recursively for .yaml/.yml/.toml "
        "(default: policies/)",
    )
    parser.add_argument(
        "--format",
        choices=("text", "json", "github"),
        default="text",
        help="output format (default: text)",
    )


#: Below this many files a second process does not pay for itself (forking and
#: collecting its findings cost a few milliseconds; a file takes about half of one).
PARALLEL_MIN_FILES = 64
#: How many processes share the files (``1``: no second process); default: 2 when this
#: process may run on at least 2 CPUs and the load average of the last minute leaves
#: half of one free (on a busy machine a second process only waits for a CPU: the
#: forking and the collecting are lost).
JOBS_VARIABLE = "CTXPOLICY_VALIDATE_JOBS"
#: What the second process writes before its findings: one byte per file done.
_TICK = b"."
_END = b"\0"


def _idle_cpus() -> float:
    """CPUs this process may run on, less the load average of the last minute."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # not on this platform: assume busy
        return 0.0
    return cpus - load


def jobs_setting() -> int | None:
    """`JOBS_VARIABLE` as set: 1 or 2, None when unset or empty (chosen by the load).

    Raises:
        ValueError: it is set to anything else (naming the variable and the value).
    """
    wanted = os.environ.get(JOBS_VARIABLE, "").strip()
    if not wanted:
        return None
    if wanted not in ("1", "2"):
        raise ValueError(
            f"{JOBS_VARIABLE} must be 1 (one process) or 2 (a second one for many files), "
            f"or unset (chosen by the load); got {wanted!r}"
        )
    return int(wanted)


def _jobs(count: int) -> int:
    """How many processes validate ``count`` files (1 or 2)."""
    if not hasattr(os, "fork") or count < PARALLEL_MIN_FILES:
        return 1
    wanted = jobs_setting()
    if wanted is not None:
        return wanted
    return 2 if _idle_cpus() >= 0.5 else 1


_PerFile = list[list[PolicyIssue]]


def _validate(files: list[Path], documents: DocumentCache, done: Callable[[], None]) -> _PerFile:
    """The issues of each of ``files``, in their order (``done`` after each file)."""
    found: _PerFile = []
    for file in files:
        found.append(validate_paths(file, documents=documents))
        done()
    return found


def _fields(issue: PolicyIssue) -> tuple[Any, ...]:
    return (
        issue.file,
        issue.line,
        issue.column,
        issue.path,
        issue.message,
        issue.rule,
        issue.severity,
    )


def _run_child(files: list[Path], documents: DocumentCache, write: int) -> None:
    """The second process: validate ``files``, a tick per file, then the findings; exit."""

    def tick() -> None:
        os.write(write, _TICK)

    code = 0
    try:
        found = _validate(files, documents, tick)
        fields = [[_fields(issue) for issue in issues] for issues in found]
        payload = pickle.dumps(fields, pickle.HIGHEST_PROTOCOL)
        view = memoryview(_END + payload)
        while view:
            view = view[os.write(write, view) :]
    except BaseException:  # noqa: BLE001 - the parent then validates these files itself
        code = 1
    finally:
        os._exit(code)


class _SecondProcess:
    """A forked process validating some of the files; its findings come back through a pipe.

    It inherits everything already imported and parsed (the document cache included), so
    it starts warm. It writes one tick byte per file done, then `_END` and the pickled
    fields of its findings.
    """

    def __init__(self, files: list[Path], documents: DocumentCache) -> None:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child never returns from here
            os.close(read)
            _run_child(files, documents, write)
        os.close(write)
        os.set_blocking(read, False)
        self.read, self.pid = read, pid
        self.buffer = bytearray()
        self.counted = 0

    def _ticks_so_far(self) -> int:
        end = self.buffer.find(_END)
        return len(self.buffer) if end < 0 else end

    def ticks(self) -> int:
        """Files the second process finished since the last call (never blocks)."""
        if self.read >= 0:
            try:
                while chunk := os.read(self.read, 1 << 16):
                    self.buffer += chunk
            except BlockingIOError:
                pass
        total = self._ticks_so_far()
        new, self.counted = total - self.counted, total
        return new

    def findings(self) -> _PerFile | None:
        """Wait for the second process; its findings (None when it failed)."""
        os.set_blocking(self.read, True)
        while chunk := os.read(self.read, 1 << 16):
            self.buffer += chunk
        os.close(self.read)
        self.read = -1
        _, status = os.waitpid(self.pid, 0)
        end = self.buffer.find(_END)
        if status != 0 or end < 0:
            return None
        fields = pickle.loads(bytes(self.buffer[end + 1 :]))  # noqa: S301 - our own child
        return [[PolicyIssue(*each) for each in issues] for issues in fields]


def _shared(files: list[Path], documents: DocumentCache, progress: Progress) -> _PerFile:
    """The issues of each of ``files``, every second file validated by a forked process."""
    mine, theirs = files[0::2], files[1::2]
    try:
        second = _SecondProcess(theirs, documents)
    except OSError:  # no fork here (resources): one process does it all
        return _validate(files, documents, progress.advance)

    def done() -> None:
        progress.advance()
        for _ in range(second.ticks()):
            progress.advance()

    found = _validate(mine, documents, done)
    from_second = second.findings()
    if from_second is None:  # it failed: do its part here (its ticks may be lost)
        from_second = _validate(theirs, documents, lambda: None)
    for _ in range(second.ticks()):
        progress.advance()
    merged: _PerFile = [[] for _ in files]
    merged[0::2], merged[1::2] = found, from_second
    return merged


def validate_files(files: list[Path]) -> list[PolicyIssue]:
    """Every issue of ``files`` (with a progress counter on a terminal).

    The same issues, in the same order, as `ctxpolicy.loading.validate_paths` on them:
    an issue found through two files (a shared parent) is reported once.
    """
    documents = DocumentCache()  # a base extended by many team files is parsed once
    with Progress(len(files), label="validating") as progress:
        found = _validate(files[:1], documents, progress.advance)
        rest = files[1:]
        if _jobs(len(files)) > 1:
            found += _shared(rest, documents, progress)
        else:
            found += _validate(rest, documents, progress.advance)
    issues = [issue for per_file in found for issue in per_file]  # in the order of ``files``
    return sorted(dict.fromkeys(issues), key=lambda i: (*i.sort_key, i.rule))


def _no_files(paths: list[Path], *, fmt: str) -> int:
    """Say that ``paths`` hold no policy file (an annotation with ``github``); exit 2."""
    shown = ", ".join(p.as_posix() for p in paths)
    message = f"no policy files (.yaml, .yml, .toml) in {shown}"
    if fmt == "github":
        sys.stdout.write(f"::error::{escape_data(message)}\n")
    else:
        sys.stderr.write(f"ctxpolicy validate: {message}\n")
    return 2


def exit_code(issues: list[PolicyIssue]) -> int:
    """2 when a file could not be read, 1 when a policy is invalid, else 0."""
    if any(i.rule in UNREADABLE_RULES for i in issues):
        return 2
    return 1 if any(i.severity == "error" for i in issues) else 0


def run(args: argparse.Namespace) -> int:
    """Validate, print the report, return the exit code."""
    try:
        jobs_setting()  # a bad value is refused before any work, whatever the file count
    except ValueError as exc:
        sys.stderr.write(f"ctxpolicy validate: {exc}\n")
        return EXIT_USAGE
    paths = [Path(p) for p in (args.paths or DEFAULT_PATHS)]
    files = list(iter_policy_files(paths))  # a missing path comes back as itself
    if not files:
        return _no_files(paths, fmt=args.format)
    issues = validate_files(files)
    checked = [display_name(f) for f in files if f.exists()]
    sys.stdout.write(get_reporter(args.format)(checked, issues))
    return exit_code(issues)
