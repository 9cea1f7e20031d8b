"""tools/mutation.py (`make mutation`): equivalent keys, the equivalents list, the table.

Only the parts that need no mutmut: the ``mutation`` extra is not installed by ``make test``.
"""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location("mutation_tool", ROOT / "tools" / "mutation.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutation_tool"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


mt = _load()

DIFF = """\
--- ctxpolicy/budget.py
+++ ctxpolicy/budget.py
@@ -3,7 +3,7 @@
     used = 0
     for part in parts:
-        if used + part > room:
+        if used + part >= room:
             break
         used += part
     return used"""


def test_areas_are_the_files_pyproject_mutates():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    only = config["tool"]["mutmut"]["only_mutate"]
    assert sorted(only) == sorted(p for patterns in mt.AREAS.values() for p in patterns)
    for area in mt.AREAS:
        assert mt.area_files(area, ROOT), area


def test_every_module_of_an_area_is_selected_by_its_globs():
    globs = mt.mutant_globs("validation", ROOT)
    assert "ctxpolicy.validation.x*" in globs  # the package's __init__.py
    assert "ctxpolicy.validation.semantic.x*" in globs
    assert mt.module_of("ctxpolicy/state/buffer.py") == "ctxpolicy.state.buffer"


@pytest.mark.parametrize(
    ("mutant", "function"),
    [
        ("ctxpolicy.budget.x_fit__mutmut_12", "ctxpolicy.budget.fit"),
        ("ctxpolicy.history.xǁPrefixViewǁ__eq____mutmut_3", "ctxpolicy.history.PrefixView.__eq__"),
        ("ctxpolicy.validation.x__check__mutmut_1", "ctxpolicy.validation._check"),
    ],
)
def test_function_of_a_mutant(mutant, function):
    assert mt.function_of(mutant) == function


def test_mutated_line_is_the_line_after_mutation_whitespace_normalised():
    assert mt.mutated_line(DIFF) == "if used + part >= room:"
    several = "--- a\n+++ a\n@@\n-f(a,\n-  b)\n+f(a,\n+     None)\n"
    assert mt.mutated_line(several) == "f(a, / None)"
    assert mt.mutated_line("--- a\n+++ a\n@@\n-    x = 1\n") == "(removed) x = 1"


DOC = """\
# Mutation testing

<!-- equivalents:start -->
Prose between the markers is ignored.

- `ctxpolicy.budget.fit`: `if used + part >= room:` — part is never 0 here
- ``ctxpolicy.x.f``: `` s = "`a`" `` — a code span holding a backtick
<!-- equivalents:end -->

- `ctxpolicy.not.listed`: `x` — outside the markers
"""


def test_parse_equivalents_reads_only_between_the_markers():
    entries = mt.parse_equivalents(DOC)
    assert [(e.function, e.line) for e in entries] == [
        ("ctxpolicy.budget.fit", "if used + part >= room:"),
        ("ctxpolicy.x.f", 's = "`a`"'),
    ]
    assert entries[0].reason == "part is never 0 here"


def test_a_bullet_that_does_not_parse_is_an_error():
    bad = "<!-- equivalents:start -->\n- ctxpolicy.budget.fit if x — why\n<!-- equivalents:end -->"
    with pytest.raises(ValueError, match="cannot parse"):
        mt.parse_equivalents(bad)


@pytest.mark.parametrize("line", ["if used + part >= room:", 's = "`a`"', "`edge`"])
def test_format_equivalent_round_trips(line):
    bullet = mt.format_equivalent("ctxpolicy.budget.fit", line, "why")
    text = f"{mt.EQ_START}\n{bullet}\n{mt.EQ_END}"
    (entry,) = mt.parse_equivalents(text)
    assert (entry.function, entry.line, entry.reason) == ("ctxpolicy.budget.fit", line, "why")


def _result(statuses, diffs=None):
    result = mt.AreaResult("budget", ["ctxpolicy/budget.py"])
    for i, status in enumerate(statuses):
        name = f"ctxpolicy.budget.x_fit__mutmut_{i + 1}"
        diff = (diffs or {}).get(i, DIFF if status not in mt.KILLED else "")
        result.mutants.append(mt.Mutant(name, "ctxpolicy/budget.py", status, diff))
    return result


def test_equivalents_leave_the_denominator_and_stale_ones_are_reported():
    result = _result(["killed"] * 8 + ["timeout", "survived"])
    entries = mt.parse_equivalents(DOC)
    stale = mt.apply_equivalents([result], entries)
    assert [e.function for e in stale] == ["ctxpolicy.x.f"]
    assert result.equivalent == 1
    assert result.killed == 9  # the timeout counts as killed
    assert result.rate == 1.0
    assert result.ok
    assert result.survivors() == []


def test_rate_counts_no_tests_and_suspicious_as_not_killed_and_segfault_as_killed():
    result = _result(["killed"] * 7 + ["segfault", "no tests", "suspicious"])
    assert mt.apply_equivalents([result], []) == []
    assert result.killed == 8
    assert result.rate == pytest.approx(0.8)
    assert not result.ok
    assert [m.status for m in result.survivors()] == ["no tests", "suspicious"]


def test_an_unfinished_area_is_not_ok_and_one_never_run_is_not_shown():
    result = _result(["killed"] * 19 + ["not checked"])
    assert result.rate == pytest.approx(0.95)
    assert result.checked
    assert not result.ok
    assert not _result(["not checked"] * 3).checked


def test_table_and_the_docs_block():
    result = _result(["killed"] * 9 + ["survived"])
    result.wall_s = 75
    result.date, result.commit = "2026-11-28", "abc1234"
    table = mt.render_table([result.to_dict()])
    header, rule, row = table.splitlines()
    assert header.count("|") == rule.count("|") == row.count("|")
    assert row == (
        "| budget | 10 | 0 | 9 | 0 | 1 | 0 | 0 | 90.0 % | yes | 1 min 15 s | 2026-11-28 `abc1234` |"
    )
    doc = f"intro\n{mt.START}\nold table\n{mt.END}\noutro\n"
    new = mt.rewrite_between(doc, mt.START, mt.END, table)
    assert new == f"intro\n{mt.START}\n{table}\n{mt.END}\noutro\n"
    with pytest.raises(ValueError, match="markers"):
        mt.rewrite_between("no markers", mt.START, mt.END, table)


def test_an_area_not_run_keeps_the_row_of_its_last_run():
    """A run of some areas rewrites the table with every area: the others as the last
    results recorded them (an older row without a commit shows its date only)."""
    budget = _result(["killed"] * 9 + ["survived"])
    budget.date, budget.commit = "2026-11-28", "abc1234"
    older = {**budget.to_dict(), "label": "plan", "date": "2026-11-25", "commit": None}
    older.pop("other")  # rows recorded before the column existed
    previous = {"plan": older, "budget": {**older, "label": "budget"}}
    rows = mt._rows([budget], previous)
    assert list(rows) == ["plan", "budget"]  # AREAS order
    assert rows["budget"] == budget.to_dict()  # this run's, not the recorded one
    plan_row = mt.render_table([rows["plan"]]).splitlines()[-1]
    assert plan_row.startswith("| plan | 10 |")
    assert plan_row.endswith("| 2026-11-25 |")
    assert mt._rows([], {}) == {}


def test_the_docs_list_parses():
    entries = mt.parse_equivalents((ROOT / "docs" / "mutation.md").read_text(encoding="utf-8"))
    assert all(e.function.startswith("ctxpolicy.") and e.reason for e in entries)


def test_the_stats_selection_is_the_union_of_the_area_tests():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    selection = config["tool"]["mutmut"]["pytest_add_cli_args_test_selection"]
    paths = {arg for arg in selection if not arg.startswith("-")}
    wanted = {prefix for prefixes in mt.AREA_TESTS.values() for prefix in prefixes}
    covered = {w for w in wanted if any(w == p or w.startswith(p + "/") for p in paths)}
    assert covered == wanted
    assert set(mt.AREA_TESTS) == set(mt.AREAS)
    for path in paths:
        assert (ROOT / path).exists(), path


def test_narrow_keeps_only_the_area_tests_for_the_area_functions():
    tests = {
        "ctxpolicy.budget.x_base_caps": {"tests/budget/test_budget.py::t", "tests/engine/x.py::t"},
        "ctxpolicy.history.xǁPrefixViewǁ__eq__": {"tests/engine/x.py::t"},
    }
    mt.narrow(tests, "budget")
    assert tests == {
        "ctxpolicy.budget.x_base_caps": {"tests/budget/test_budget.py::t"},
        "ctxpolicy.history.xǁPrefixViewǁ__eq__": {"tests/engine/x.py::t"},
    }


#: mutmut's exit codes of the statuses the retry options clear (a part of its table).
EXIT_STATUSES = {0: "survived", 1: "killed", 5: "no tests", 24: "timeout", 36: "timeout"}


@pytest.mark.parametrize(
    ("statuses", "left"),
    [
        (("timeout",), {"a": None, "b": 0, "c": 1, "d": None, "e": 5}),
        (("survived", "no tests"), {"a": 36, "b": None, "c": 1, "d": 24, "e": None}),
    ],
)
def test_reset_verdicts_clears_only_the_statuses_asked(tmp_path, monkeypatch, statuses, left):
    """``--retry-timeouts`` clears timeouts, ``--retry-survivors`` survivors: nothing else."""
    import json

    meta = tmp_path / "ctxpolicy" / "budget.py.meta"
    meta.parent.mkdir()
    verdicts = {"a": 36, "b": 0, "c": 1, "d": 24, "e": 5}
    meta.write_text(json.dumps({"exit_code_by_key": verdicts}), encoding="utf-8")
    monkeypatch.setattr(mt, "MUTANTS", tmp_path)
    monkeypatch.setattr(mt, "area_files", lambda area: ["ctxpolicy/budget.py"])
    cleared = mt.reset_verdicts("budget", statuses, status_by_exit_code=EXIT_STATUSES)
    assert cleared == sum(value is None for value in left.values())
    assert json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"] == left


def test_the_retry_options_parse():
    args = mt._parser().parse_args(["--area", "recall", "--retry-timeouts"])
    assert (args.area, args.retry_timeouts, args.retry_survivors) == (["recall"], True, False)
