"""`make mutation`: mutmut 3 over the core, and the kill rate of each area.

Runs ``mutmut run`` once per area (``--area NAME`` for one), reads the verdicts from
mutmut's meta files in ``mutants/``, takes out the mutants that ``docs/mutation.md``
lists as equivalent, prints the table, writes ``benchmarks/results/mutation.json`` and
rewrites the table in ``docs/mutation.md`` (between ``<!-- mutation:start -->`` and
``<!-- mutation:end -->``). Exits 1 when an area kills less than 90 % of its
non-equivalent mutants (or was not run to the end).

    python tools/mutation.py                      # every area, from a fresh mutants/
    python tools/mutation.py --area budget        # one area (resumes: undecided mutants only)
    python tools/mutation.py --area budget --retry-survivors   # its survivors tried again
    python tools/mutation.py --no-run             # report the verdicts already in mutants/
    python tools/mutation.py --survivors DIR      # also DIR/<area>.txt: each survivor's diff

Counting (docs/mutation.md, "What counts"): killed, timeout and segfault are killed;
survived, no tests, suspicious, skipped and not checked are not.

The pure parts (equivalent keys, the table) import nothing from mutmut, so
``tests/tools/test_mutation_report.py`` runs without the ``mutation`` extra.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MUTANTS = ROOT / "mutants"
DOCS = ROOT / "docs" / "mutation.md"
RESULTS = ROOT / "benchmarks" / "results" / "mutation.json"
THRESHOLD = 0.90

#: Area -> the files mutmut mutates for it (globs, relative to the repository root).
#: ``[tool.mutmut] only_mutate`` in pyproject.toml is the union of these
#: (tests/tools/test_mutation_report.py holds them equal).
AREAS: dict[str, tuple[str, ...]] = {
    "plan": ("ctxpolicy/plan.py",),
    "budget": ("ctxpolicy/budget.py",),
    "history": ("ctxpolicy/history.py",),
    "compose": ("ctxpolicy/compose.py", "ctxpolicy/next_turn.py", "ctxpolicy/summarize.py"),
    "validation": ("ctxpolicy/validation/*.py",),
    "state": ("ctxpolicy/state/blackboard.py", "ctxpolicy/state/buffer.py"),
    "memory": ("ctxpolicy/memory/*.py",),
    "recall": ("ctxpolicy/recall/*.py",),
}
LABELS = {"state": "state reducers"}

#: Area -> the tests its mutants run (node id prefixes): fast in-process unit tests. mutmut
#: would run every test that reaches a mutated function (~1,000 for plan or compose, 14
#: mutants a minute); each area's mutants run only the tests below that reach it.
#: ``[tool.mutmut] pytest_add_cli_args_test_selection`` is their union (one stats run).
AREA_TESTS: dict[str, tuple[str, ...]] = {
    "plan": (
        "tests/engine/test_plan.py",
        "tests/engine/test_plan_rules.py",
        "tests/engine/test_engine.py",
        "tests/engine/test_preview.py",
        "tests/engine/test_report.py",
        "tests/test_layers.py",
        "tests/budget/test_rooms.py",
        "tests/validation/test_cache_order_plans.py",
    ),
    "budget": ("tests/budget", "tests/engine/test_compose.py"),
    "history": ("tests/history", "tests/perf"),
    "compose": (
        "tests/engine/test_compose.py",
        "tests/engine/test_summarize.py",
        "tests/engine/test_retriever_packing.py",
        "tests/engine/test_report.py",
        "tests/engine/test_engine.py",
        "tests/engine/test_properties.py",
        "tests/engine/test_issue14_new_user.py",
        "tests/engine/test_compose_edges_a.py",
        "tests/engine/test_compose_edges_b.py",
        "tests/engine/test_next_turn_frames.py",
        "tests/engine/test_next_turn_path.py",
        "tests/engine/test_next_turn_mutants.py",
        "tests/history/test_walk_reuse.py",
        "tests/perf",
    ),
    "validation": ("tests/validation", "tests/loading"),
    "state": ("tests/state", "tests/integrations/test_langgraph_reducers.py"),
    "memory": ("tests/memory",),
    "recall": ("tests/recall",),
}

#: Test files that run only for the mutants of the modules named: each of their runs starts
#: a PostgreSQL server (seconds per mutant), and only ``postgres.py`` needs one.
ONLY_FOR: dict[str, tuple[str, ...]] = {
    "tests/recall/test_postgres_index.py": ("ctxpolicy.recall.postgres",),
    "tests/recall/test_postgres_mutants.py": ("ctxpolicy.recall.postgres",),
}

#: mutmut status -> the column it is counted in. Killed columns: killed, timeout, segfault.
KILLED = frozenset({"killed", "timeout", "segfault", "caught by type check"})

START, END = "<!-- mutation:start -->", "<!-- mutation:end -->"
EQ_START, EQ_END = "<!-- equivalents:start -->", "<!-- equivalents:end -->"

#: Written into mutants/ before each run. Tests that start ``python -m ctxpolicy`` with
#: ``PYTHONPATH`` set to the repository root (mutants/ during a run) import the mutated
#: package; while mutmut collects its stats (``MUTANT_UNDER_TEST=stats``) the child would
#: ask mutmut for its config from a temporary folder and fail. The child's calls are not
#: recorded by the parent anyway, so there it runs the original functions; a real mutant
#: and the forced failure still reach the child.
SITECUSTOMIZE = '''\
"""Written by tools/mutation.py (make mutation): see SITECUSTOMIZE there."""

import os

if os.environ.get("MUTANT_UNDER_TEST") == "stats":
    os.environ["MUTANT_UNDER_TEST"] = ""
'''


# --- names, keys and equivalents (no mutmut needed) ------------------------------------


def module_of(path: str | Path) -> str:
    """``ctxpolicy/validation/__init__.py`` -> ``ctxpolicy.validation``."""
    parts = list(Path(path).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def area_files(area: str, root: Path = ROOT) -> list[str]:
    """The files of ``area`` that exist now, relative to ``root``, sorted."""
    found = {
        path.relative_to(root).as_posix() for pattern in AREAS[area] for path in root.glob(pattern)
    }
    return sorted(found)


def mutant_globs(area: str, root: Path = ROOT) -> list[str]:
    """``mutmut run`` arguments selecting the mutants of ``area`` (``module.x*``)."""
    return [f"{module_of(path)}.x*" for path in area_files(area, root)]


def function_of(mutant: str) -> str:
    """The function a mutant belongs to, as ``module.Class.method`` or ``module.function``.

    ``ctxpolicy.history.xǁPrefixViewǁ__eq____mutmut_3`` -> ``ctxpolicy.history.PrefixView.__eq__``.
    """
    mangled = mutant.partition("__mutmut_")[0]
    module, _, name = mangled.rpartition(".")
    if name.startswith("xǁ"):
        _, cls, func = name.split("ǁ", 2)
        return f"{module}.{cls}.{func}"
    return f"{module}.{name.removeprefix('x_')}"


def _normalise(line: str) -> str:
    return re.sub(r"\s+", " ", line).strip()


def mutated_line(diff: str) -> str:
    """The changed line(s) as they read after the mutation, whitespace normalised.

    Several changed lines (one statement over several lines) are joined by `` / ``; a
    mutation that only removes text shows the removed line(s) after ``(removed)``.
    """
    lines = diff.splitlines()
    added = [_normalise(x[1:]) for x in lines if x.startswith("+") and not x.startswith("+++")]
    if added:
        return " / ".join(added)
    removed = [_normalise(x[1:]) for x in lines if x.startswith("-") and not x.startswith("---")]
    return "(removed) " + " / ".join(removed)


@dataclass(frozen=True)
class Equivalent:
    """One entry of docs/mutation.md's equivalents list."""

    function: str
    line: str
    reason: str

    def matches(self, function: str, line: str) -> bool:
        return self.function == function and _normalise(self.line) == line


_CODE = r"(`+)\s?(.+?)\s?\{n}"
_ENTRY = re.compile(rf"^[-*] {_CODE.format(n=1)}:\s+{_CODE.format(n=3)}\s+[—-]+\s+(.+)$")


def parse_equivalents(text: str) -> list[Equivalent]:
    """The entries between the equivalents markers of docs/mutation.md.

    Each is one line: ``- `module.function`: `mutated line` — reason`` (a code span
    holding a backtick uses double backticks, as Markdown does). Other lines between the
    markers (headings, prose) are ignored; a bullet that does not parse is an error.
    """
    if EQ_START not in text or EQ_END not in text:
        return []
    block = text.split(EQ_START, 1)[1].split(EQ_END, 1)[0]
    entries = []
    for number, raw in enumerate(block.splitlines(), 1):
        line = raw.strip()
        if not line.startswith(("- ", "* ")):
            continue
        match = _ENTRY.match(line)
        if match is None:
            raise ValueError(f"docs/mutation.md equivalents, line {number}: cannot parse {line!r}")
        entries.append(Equivalent(match[2], _normalise(match[4]), match[5].strip()))
    return entries


def format_equivalent(function: str, line: str, reason: str) -> str:
    """The docs/mutation.md bullet for an equivalent (what `parse_equivalents` reads)."""

    def span(code: str) -> str:
        ticks = "``" if "`" in code else "`"
        pad = " " if code.startswith("`") or code.endswith("`") else ""
        return f"{ticks}{pad}{code}{pad}{ticks}"

    return f"- {span(function)}: {span(line)} — {reason}"


# --- counting --------------------------------------------------------------------------


@dataclass
class Mutant:
    name: str
    path: str
    status: str
    diff: str = ""
    equivalent: Equivalent | None = None

    @property
    def killed(self) -> bool:
        return self.status in KILLED


@dataclass
class AreaResult:
    area: str
    files: list[str]
    mutants: list[Mutant] = field(default_factory=list)
    wall_s: float | None = None
    date: str | None = None
    #: the commit the area's verdicts were made on (``git rev-parse --short HEAD``)
    commit: str | None = None

    def count(self, column: str) -> int:
        """Mutants in ``column`` that are not listed as equivalent."""
        return sum(1 for m in self.mutants if column_of(m) == column and m.equivalent is None)

    @property
    def total(self) -> int:
        return len(self.mutants)

    @property
    def equivalent(self) -> int:
        return sum(1 for m in self.mutants if m.equivalent is not None)

    @property
    def killed(self) -> int:
        return sum(1 for m in self.mutants if m.killed)

    @property
    def checked(self) -> bool:
        """Whether mutmut has tested any mutant of the area yet."""
        return any(m.status != "not checked" for m in self.mutants)

    @property
    def not_checked(self) -> int:
        return sum(1 for m in self.mutants if m.status == "not checked")

    @property
    def rate(self) -> float | None:
        counted = self.total - self.equivalent
        return None if counted <= 0 else self.killed / counted

    @property
    def ok(self) -> bool:
        rate = self.rate
        return self.total > 0 and not self.not_checked and rate is not None and rate >= THRESHOLD

    def survivors(self) -> list[Mutant]:
        """Mutants not killed and not listed as equivalent."""
        return [m for m in self.mutants if not m.killed and m.equivalent is None]

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": LABELS.get(self.area, self.area),
            "files": self.files,
            "mutants": self.total,
            "equivalent": self.equivalent,
            "killed": self.killed,  # timeouts and segfaults included
            "timeout": self.count("timeout"),
            "survived": self.count("survived"),
            "no_tests": self.count("no tests"),
            "suspicious": self.count("suspicious"),
            "other": self.count("other"),
            "not_checked": self.not_checked,
            "kill_rate": None if self.rate is None else round(self.rate, 4),
            "ok": self.ok,
            "wall_s": None if self.wall_s is None else round(self.wall_s, 1),
            "date": self.date,
            "commit": self.commit,
        }


def column_of(mutant: Mutant) -> str:
    """The table column of a mutant's status."""
    if mutant.status in ("killed", "timeout", "survived", "no tests", "suspicious"):
        return mutant.status
    if mutant.status in KILLED:  # segfault (a crashed test run), caught by type check
        return "killed"
    return "other"  # skipped, not checked, check was interrupted by user


NONE = "-"


def _percent(rate: float | None) -> str:
    return NONE if rate is None else f"{100 * rate:.1f} %"


def _seconds(value: float | None) -> str:
    if value is None:
        return NONE
    minutes, seconds = divmod(round(value), 60)
    return f"{minutes} min {seconds:02d} s" if minutes else f"{seconds} s"


def render_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The Markdown table printed and written into docs/mutation.md, from the areas' rows
    as `AreaResult.to_dict` makes them (and ``benchmarks/results/mutation.json`` keeps)."""
    head = (
        "| area | mutants | equivalent | killed | of which timeouts | survived | no tests "
        "| other | kill rate | ≥ 90 % | wall time | run on |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        other = r.get("suspicious", 0) + r.get("other", 0)
        run_on = " ".join(
            part for part in (r.get("date"), r.get("commit") and f"`{r['commit']}`") if part
        )
        lines.append(
            f"| {r['label']} | {r['mutants']} | {r['equivalent']} | {r['killed']} "
            f"| {r['timeout']} | {r['survived']} | {r['no_tests']} "
            f"| {other} | {_percent(r['kill_rate'])} | {'yes' if r['ok'] else 'NO'} "
            f"| {_seconds(r['wall_s'])} | {run_on or '-'} |"
        )
    return "\n".join(lines)


def apply_equivalents(
    results: Iterable[AreaResult], equivalents: Sequence[Equivalent]
) -> list[Equivalent]:
    """Mark the mutants that an entry matches; return the entries that match none."""
    used: set[Equivalent] = set()
    for result in results:
        for mutant in result.mutants:
            if mutant.killed or not mutant.diff:
                continue
            function, line = function_of(mutant.name), mutated_line(mutant.diff)
            for entry in equivalents:
                if entry.matches(function, line):
                    mutant.equivalent = entry
                    used.add(entry)
                    break
    return [e for e in equivalents if e not in used]


def rewrite_between(text: str, start: str, end: str, body: str) -> str:
    """``text`` with what lies between the ``start`` and ``end`` markers replaced."""
    if start not in text or end not in text:
        raise ValueError(f"markers {start} / {end} not found")
    before, rest = text.split(start, 1)
    _, after = rest.split(end, 1)
    return f"{before}{start}\n{body}\n{end}{after}"


# --- mutmut ----------------------------------------------------------------------------


def read_area(area: str) -> AreaResult:
    """The verdicts of ``area`` from mutmut's meta files, with each non-killed diff."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant
    from mutmut.stats import status_by_exit_code

    result = AreaResult(area, area_files(area))
    for path in result.files:
        meta = MUTANTS / f"{path}.meta"
        if not meta.exists():
            continue
        codes = json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]
        for name, code in sorted(codes.items()):
            mutant = Mutant(name, path, status_by_exit_code[code])
            if not mutant.killed and mutant.status != "not checked":
                mutant.diff = get_diff_for_mutant(name, path=path)
            result.mutants.append(mutant)
    return result


def _rows(shown: Sequence[AreaResult], previous: Mapping[str, Any]) -> dict[str, Any]:
    """The table's rows, in `AREAS` order: each area with verdicts in ``mutants/`` as
    they are now, each other one as ``previous`` (the last results) recorded it."""
    now = {r.area: r.to_dict() for r in shown}
    return {a: now.get(a, previous.get(a)) for a in AREAS if a in now or a in previous}


def _head_commit() -> str | None:
    """The checkout's commit (short), else None (not a git checkout)."""
    argv = ["git", "rev-parse", "--short", "HEAD"]
    try:
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return done.stdout.strip() or None


def prepare_mutants(fresh: bool) -> None:
    """A fresh (or refreshed) mutants/ that mutmut fills: see SITECUSTOMIZE."""
    if fresh and MUTANTS.exists():
        shutil.rmtree(MUTANTS)
    MUTANTS.mkdir(exist_ok=True)
    (MUTANTS / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    # mutmut copies the package's data files only once; refresh those that changed.
    for source in (ROOT / "ctxpolicy").rglob("*"):
        if not source.is_file() or source.suffix in (".py", ".pyc"):
            continue
        if "__pycache__" in source.parts:
            continue
        target = MUTANTS / source.relative_to(ROOT)
        if not target.exists() or target.read_bytes() != source.read_bytes():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def run_area(area: str, max_children: int) -> float:
    """``mutmut run`` over the mutants of ``area``; returns the wall time in seconds."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--mutmut-area", area]
    cmd += ["--max-children", str(max_children)]
    print(f"\n=== {area}: mutmut run {' '.join(mutant_globs(area))}", flush=True)
    start = time.perf_counter()
    # Child processes of the tests import the mutated package too (see SITECUSTOMIZE).
    env = {**os.environ, "PYTHONPATH": str(MUTANTS)}
    done = subprocess.run(cmd, cwd=ROOT, env=env, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"mutation: mutmut run failed for {area} (exit {done.returncode})")
    print(f"=== {area}: {_seconds(wall)}", flush=True)
    return wall


def narrow(tests_by_function: dict[str, set[str]], area: str) -> None:
    """Keep, for the functions of ``area``, only the tests under ``AREA_TESTS[area]``
    (and the tests of `ONLY_FOR` only for the modules named there)."""
    modules = {module_of(path) for path in area_files(area)}
    prefixes = AREA_TESTS[area]
    for key, tests in tests_by_function.items():
        module = key.rpartition(".x")[0]
        if module in modules:
            tests_by_function[key] = {
                t
                for t in tests
                if t.startswith(prefixes)
                and module in ONLY_FOR.get(t.partition("::")[0], (module,))
            }


def mutmut_area(area: str, max_children: int) -> None:
    """``mutmut run`` for ``area``, its mutants running only the area's tests.

    mutmut 3.8.1 records, in one run of the whole selection, which tests reach each
    function (``mutants/mutmut-stats.json``, kept whole); here that map is narrowed in
    memory, after it is loaded and before any mutant runs.

    Only the mutants without a verdict run: mutmut re-runs every mutant a name filter
    selects, verdict or not, so the area's list is cut to the undecided ones (a run that
    was stopped resumes; mutmut itself clears the verdicts of a function whose code
    changed; `reset_verdicts` clears the survivors to try them against new tests).
    """
    import mutmut.__main__ as mm
    from mutmut.state import state

    load = mm.collect_or_load_stats
    collect = mm.collect_source_file_mutation_data

    def collect_or_load_stats(*args: Any, **kwargs: Any) -> None:
        load(*args, **kwargs)
        narrow(state().tests_by_mangled_function_name, area)

    def undecided(*args: Any, **kwargs: Any) -> Any:
        mutants, by_path = collect(*args, **kwargs)
        return [m for m in mutants if m[2] is None], by_path

    mm.collect_or_load_stats = collect_or_load_stats
    mm.collect_source_file_mutation_data = undecided
    mm._run(mutant_globs(area), max_children)


def reset_verdicts(
    area: str,
    statuses: Iterable[str] = ("survived", "no tests"),
    *,
    status_by_exit_code: Mapping[int | None, str] | None = None,
) -> int:
    """Clear the verdicts of ``area``'s mutants with one of ``statuses`` (the next run
    tries them again, e.g. against new tests); returns how many were cleared.

    ``status_by_exit_code`` defaults to mutmut's own table."""
    if status_by_exit_code is None:
        from mutmut.stats import status_by_exit_code

    wanted = {code for code, status in status_by_exit_code.items() if status in statuses}
    cleared = 0
    for source in area_files(area):
        meta = MUTANTS / f"{source}.meta"
        if not meta.exists():
            continue
        data = json.loads(meta.read_text(encoding="utf-8"))
        verdicts = data.get("exit_code_by_key", {})
        for key, code in verdicts.items():
            if code in wanted:
                verdicts[key] = None
                cleared += 1
        meta.write_text(json.dumps(data, indent=4), encoding="utf-8")
    return cleared


def machine() -> dict[str, Any]:
    """The machine (as benchmarks/run.py describes it) and the tool versions."""
    model = None
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    versions = {}
    for package in ("ctxpolicy", "mutmut", "pytest"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return {
        "platform": platform.platform(),
        "processor": model or platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "versions": versions,
    }


def write_survivors(results: Iterable[AreaResult], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for r in results:
        survivors = [m for m in r.survivors() if m.status != "not checked"]
        title = (
            f"# {LABELS.get(r.area, r.area)}: {len(survivors)} surviving mutants "
            f"(not killed, not listed as equivalent) of {r.total}"
        )
        if r.not_checked:
            title += f"; {r.not_checked} not checked yet (run interrupted)"
        chunks = [title + "\n"]
        for m in survivors:
            key = format_equivalent(function_of(m.name), mutated_line(m.diff), "REASON")
            chunks.append(f"## {m.name} ({m.status})\nequivalent entry: {key}\n{m.diff}\n")
        (folder / f"{r.area}.txt").write_text("\n".join(chunks), encoding="utf-8")
    print(f"survivors written to {folder}/<area>.txt")


def _clear_for_retry(area: str, *, survivors: bool, timeouts: bool) -> None:
    """Clear the verdicts ``--retry-survivors`` / ``--retry-timeouts`` ask to try again."""
    if survivors:
        print(f"{area}: {reset_verdicts(area)} verdicts cleared to try again")
    if timeouts:
        print(f"{area}: {reset_verdicts(area, ('timeout',))} timeouts cleared to try again")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--area", action="append", choices=sorted(AREAS), help="only this area")
    parser.add_argument("--no-run", action="store_true", help="report mutants/ as it is")
    parser.add_argument(
        "--keep", action="store_true", help="a full run reuses mutants/ (default: fresh)"
    )
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--survivors", type=Path, metavar="DIR", help="write DIR/<area>.txt")
    parser.add_argument(
        "--retry-survivors",
        action="store_true",
        help="with --area: clear the survived / no-tests verdicts first (try them on new tests)",
    )
    parser.add_argument(
        "--retry-timeouts",
        action="store_true",
        help="with --area: clear the timeout verdicts first (try them again on a quiet machine)",
    )
    parser.add_argument("--mutmut-area", choices=sorted(AREAS), help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    os.chdir(ROOT)  # mutmut reads pyproject.toml and mutants/ from the working directory
    if args.mutmut_area:  # the child process of run_area
        mutmut_area(args.mutmut_area, args.max_children)
        return 0

    chosen = args.area or list(AREAS)
    previous: dict[str, Any] = {}
    if RESULTS.exists():
        previous = json.loads(RESULTS.read_text(encoding="utf-8")).get("areas", {})
    walls: dict[str, tuple[float, str]] = {}
    started = time.perf_counter()
    if not args.no_run:
        prepare_mutants(fresh=not args.area and not args.keep)
        for area in chosen:
            _clear_for_retry(area, survivors=args.retry_survivors, timeouts=args.retry_timeouts)
            walls[area] = (run_area(area, args.max_children), dt.date.today().isoformat())
    duration = time.perf_counter() - started

    results = [read_area(area) for area in AREAS]
    commit = _head_commit()
    for r in results:
        if r.area in walls:
            r.wall_s, r.date = walls[r.area]
            r.commit = commit
        elif r.area in previous and r.checked:
            r.wall_s, r.date = previous[r.area].get("wall_s"), previous[r.area].get("date")
            r.commit = previous[r.area].get("commit")

    docs = DOCS.read_text(encoding="utf-8")
    equivalents = parse_equivalents(docs)
    for stale in apply_equivalents(results, equivalents):
        print(
            f"warning: equivalent no longer matches a surviving mutant: {stale.function}: "
            f"{stale.line}",
            file=sys.stderr,
        )

    shown = [r for r in results if r.checked]
    rows = _rows(shown, previous)
    table = render_table(list(rows.values()))
    print()
    print(table)
    kept = [a for a in rows if a not in {r.area for r in shown}]
    if kept:
        print(f"as last recorded (no verdicts in mutants/): {', '.join(kept)}")
    missing = [a for a in AREAS if a not in rows]
    if missing:
        print(f"not run yet: {', '.join(missing)}")

    report = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "threshold": THRESHOLD,
        "counting": "killed = killed + timeout + segfault; rate = killed / (mutants - equivalent)",
        "duration_s": None if args.no_run else round(duration, 1),  # this invocation
        "wall_s_total": round(sum(r.wall_s or 0 for r in shown), 1),  # the areas' own runs
        "areas_run": [] if args.no_run else chosen,
        "areas": rows,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    m = report["machine"]
    note = (
        f"Generated by `make mutation` (tools/mutation.py) on {report['date'][:10]}: "
        f"{m['processor']}, {m['cpus']} CPUs, Python {m['python']}, mutmut "
        f"{m['versions']['mutmut']}. Wall time per area includes mutmut's clean run of the "
        "area's tests. An area without verdicts in `mutants/` (not run since it was made "
        "afresh) keeps the row of its last run: the date and commit of that run."
    )
    DOCS.write_text(rewrite_between(docs, START, END, f"{table}\n\n{note}"), encoding="utf-8")
    if args.survivors:
        write_survivors(shown, args.survivors)

    failing = [LABELS.get(r.area, r.area) for r in shown if r.area in chosen and not r.ok]
    failing += [a for a in missing if a in chosen]
    if failing:
        print(f"mutation: below {THRESHOLD:.0%} killed (or incomplete): {', '.join(failing)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
