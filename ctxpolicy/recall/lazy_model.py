"""`LazyModel`: what both builtin embedding models share about their weights.

The weights load on first use, once even when threads race; an instance pickles its
options only, and the copy loads its own weights when first used.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, ClassVar


class LazyModel:
    """A base for a model object whose weights load on first use (see the module).

    Subclasses name their constructor options in ``OPTIONS`` and call `_start` from
    ``__init__`` once those are set.
    """

    OPTIONS: ClassVar[tuple[str, ...]] = ()

    def _start(self) -> None:
        self._model: Any = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.OPTIONS}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name in self.OPTIONS:
            setattr(self, name, state[name])
        self._start()

    def _loaded(self, load: Callable[[], Any]) -> Any:
        """The weights, made by ``load()`` the first time (once across threads)."""
        model = self._model
        if model is not None:
            return model
        with self._lock:
            if self._model is None:
                self._model = load()
            return self._model


__all__ = ["LazyModel"]
