"""A policy resized so that a benchmark's prompts get exactly the tokens it compares at."""

from __future__ import annotations

import math
from typing import Any


def budget_variant(policy: Any, available: int) -> Any:
    """``policy`` with the model window that leaves exactly ``available`` tokens."""
    reserve = policy.budget.output_reserve
    window = math.ceil(available / (1 - reserve))
    while int(window * (1 - reserve)) > available:
        window -= 1
    while int(window * (1 - reserve)) < available:
        window += 1
    model = policy.model.model_copy(update={"context_window": window})
    return policy.model_copy(update={"model": model})
