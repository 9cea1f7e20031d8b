"""Which parts of a policy document passed the schema, so rules can still run on them.

A document with schema errors cannot become a `Policy` as it is, yet most of it is
usually fine: a typo in ``model`` says nothing about ``order``. `BrokenSections` records
where the schema errors are, at the granularity the rules read: a top-level section
(``order``, ``budget``, ...), or one entry of a section of named entries (a layer of
``layers``, a process of ``processes``). `prune` removes the broken parts (the models'
defaults take their place), and `allows` says whether a rule that reads given sections
can trust the pruned policy (see `ctxpolicy.validation.semantic.RULE_SECTIONS`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ctxpolicy.diagnostics import Finding

#: Sections whose entries are judged one by one (a broken layer spoils only itself).
ENTRY_SECTIONS = frozenset({"layers", "processes"})
#: A rule that reads the whole policy.
WHOLE_POLICY = "*"


@dataclass(frozen=True, slots=True)
class BrokenSections:
    """Where the schema errors of a document are.

    Attributes:
        everything: An error at the top level itself (not a mapping, a required key
            missing): no part can be trusted.
        sections: Top-level keys with an error in them (or unknown keys).
        entries: ``(section, entry)`` of broken entries of `ENTRY_SECTIONS`.
    """

    everything: bool
    sections: frozenset[str]
    entries: frozenset[tuple[str, str]]

    @classmethod
    def of(cls, errors: Iterable[Finding]) -> BrokenSections:
        """The broken parts named by the paths of schema ``errors``."""
        everything = False
        sections: set[str] = set()
        entries: set[tuple[str, str]] = set()
        for finding in errors:
            path = finding.path
            if not path:
                everything = True
            elif str(path[0]) in ENTRY_SECTIONS and len(path) >= 2:
                entries.add((str(path[0]), str(path[1])))
            else:
                sections.add(str(path[0]))
        return cls(everything, frozenset(sections), frozenset(entries))

    def prune(self, data: dict[str, Any]) -> dict[str, Any]:
        """``data`` without its broken sections and entries (``data`` is not changed)."""
        out = {key: value for key, value in data.items() if key not in self.sections}
        for section, entry in self.entries:
            value = out.get(section)
            if isinstance(value, dict):
                out[section] = {k: v for k, v in value.items() if k != entry}
        return out

    def allows(self, needs: frozenset[str], *, known: frozenset[str]) -> bool:
        """Whether a rule reading the sections ``needs`` can run on the pruned policy.

        Args:
            needs: Section names (``"layers"``: the whole section; ``"layers.*"``: its
                valid entries suffice; `WHOLE_POLICY`: every section in ``known``).
            known: The top-level keys of the format (unknown keys never matter).
        """
        if self.everything:
            return False
        partly = {section for section, _ in self.entries}
        if WHOLE_POLICY in needs:
            return not (self.sections & known) and not partly
        for need in needs:
            section, _, scope = need.partition(".")
            if section in self.sections or (scope != "*" and section in partly):
                return False
        return True


__all__ = ["ENTRY_SECTIONS", "WHOLE_POLICY", "BrokenSections"]
