"""The package cites docs/design.md by section, never documents outside the repository.

Comments and docstrings once pointed at "DESIGN §3.1" and "seed 003", documents that
do not ship with ctxpolicy. They now cite ``docs/design.md, 'Section name'``; this test
keeps it so: no such reference comes back, and every cited section exists.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "ctxpolicy"
DESIGN = REPO / "docs" / "design.md"

#: References to documents that are not in the repository.
DANGLING = (
    re.compile(r"DESIGN\s*§"),
    re.compile(r"\bDESIGN\s+\d+(\.\d+)*\b"),
    re.compile(r"\bseeds?[\s-]*0\d\d\b", re.IGNORECASE),
)
#: ``docs/design.md, 'Section name'`` (the name may wrap onto the next comment line).
CITATION = re.compile(r"docs/design\.md,\s*'([^']+)'")
TEXT_SUFFIXES = (".py", ".json", ".j2", ".md", ".toml", ".yaml", ".yml", ".txt")


def package_texts() -> list[tuple[Path, str]]:
    return [
        (path, path.read_text(encoding="utf-8"))
        for path in sorted(PACKAGE.rglob("*"))
        if path.is_file() and path.suffix in TEXT_SUFFIXES
    ]


def design_sections() -> set[str]:
    text = DESIGN.read_text(encoding="utf-8")
    return {m.group(1).strip() for m in re.finditer(r"^##+ (.+)$", text, flags=re.M)}


def test_no_module_cites_documents_outside_the_repository() -> None:
    found = [
        f"{path.relative_to(REPO)}:{text.count(chr(10), 0, match.start()) + 1}: {match.group(0)}"
        for path, text in package_texts()
        for pattern in DANGLING
        for match in pattern.finditer(text)
    ]
    assert found == [], "cite docs/design.md by section instead:\n" + "\n".join(found)


def test_every_cited_design_section_exists() -> None:
    sections = design_sections()
    cited = {
        " ".join(match.group(1).replace("#:", " ").split()): path.relative_to(REPO)
        for path, text in package_texts()
        for match in CITATION.finditer(text)
    }
    assert cited, "the package cites no section of docs/design.md"
    missing = {name: str(where) for name, where in cited.items() if name not in sections}
    assert missing == {}, f"sections cited but not in docs/design.md: {missing}"


def test_design_covers_the_rules_it_is_cited_for() -> None:
    assert {
        "Layers and their kinds",
        "Lifecycle and persistence",
        "Which layers a call gets",
        "The query path",
        "Budget and overflow",
        "Invariants of a composition",
        "State rules",
        "Memory tiers and scopes",
    } <= design_sections()
    text = DESIGN.read_text(encoding="utf-8")
    for phrase in ("enable_share_context", "StateBuilder", "memory.replace", "L1 is private"):
        assert phrase in text


def test_the_checks_catch_what_they_are_for() -> None:
    samples = ['"""Plan (DESIGN §3.1)."""', "# seed 003's manifest", "Seed 004 tiers", "DESIGN 3.3"]
    assert all(any(p.search(s) for p in DANGLING) for s in samples)
    assert not any(p.search("see docs/design.md, 'The query path'") for p in DANGLING)
    assert CITATION.findall("(docs/design.md, 'Memory tiers and\n  scopes')") == [
        "Memory tiers and\n  scopes"
    ]
