"""The JSON Schema of the policy format, shipped inside the package.

``ctxpolicy/schemas/ctxpolicy.schema.json`` is the canonical file (``schemas/`` at the
repository root links to it, for editors). It is generated from the models of
`ctxpolicy.policy`, the format's single source, by `ctxpolicy.schemas.generate`; after
changing a model, rewrite it with ``python -m ctxpolicy.schemas.generate --write``.
Reading it (this module) needs only the standard library, so ``ctxpolicy schema`` and the
validator never pay for generating it.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

SCHEMA_PACKAGE = "ctxpolicy.schemas"
SCHEMA_FILE = "ctxpolicy.schema.json"


def read_schema_text() -> str:
    """The schema exactly as shipped (what ``ctxpolicy schema`` prints)."""
    return resources.files(SCHEMA_PACKAGE).joinpath(SCHEMA_FILE).read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def _cached_schema() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(read_schema_text())
    return data


def load_schema() -> dict[str, Any]:
    """The policy JSON Schema (draft 2020-12) as a fresh dict."""
    loaded: dict[str, Any] = json.loads(json.dumps(_cached_schema()))
    return loaded


__all__ = ["SCHEMA_FILE", "SCHEMA_PACKAGE", "load_schema", "read_schema_text"]
