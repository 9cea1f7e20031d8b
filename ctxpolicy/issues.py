"""`PolicyIssue`: one problem found in a policy file, with its exact location.

Kept free of heavy imports: `ctxpolicy validate` must start fast.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True)
class PolicyIssue:
    """A problem in a policy file.

    Attributes:
        file: Path of the file the offending value comes from (a parent file when
            the value was inherited through ``extends``).
        line: 1-based line of the offending node (0 when unknown).
        column: 1-based column of the offending node (0 when unknown).
        path: JSON path of the offending value, e.g. ``$.budget.ratios.query``.
        message: What is wrong, in words a policy author understands.
        rule: Stable rule id, e.g. ``schema.type`` or ``order.starts-with-system-prompt``.
        severity: ``error`` (fails validation) or ``warning``.
    """

    file: str
    line: int
    column: int
    path: str
    message: str
    rule: str
    severity: Severity = "error"

    def format_text(self) -> str:
        """Render as ``FILE:LINE:COL: PATH: MESSAGE [RULE]``."""
        sev = "" if self.severity == "error" else "warning: "
        return (
            f"{self.file}:{self.line}:{self.column}: {self.path}: {sev}{self.message} [{self.rule}]"
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain data with the stable keys of the JSON reporter."""
        return asdict(self)

    @property
    def sort_key(self) -> tuple[str, int, int, str]:
        """Order issues by file, then position, then path."""
        return (self.file, self.line, self.column, self.path)
