"""Collectors gather the text of ``__context`` layers (the only I/O of the engine)."""

from ctxpolicy.collectors.base import (
    Collector,
    CollectRequest,
    get_collector,
    register_collector,
)

__all__ = ["CollectRequest", "Collector", "get_collector", "register_collector"]
