"""Shared helpers of the reliability tests: policies built for hostile input and load.

- `policy_data`: a small, complete policy (runtime and checkpoint processes).
- `write_policy`: the same, written to a folder as a policy file (so ``template_file``
  and ``files`` roots resolve against it).
- `collector_module`: a throwaway importable module for ``type: callable`` targets.
- `opened_paths`: every path this process opens (an audit hook), to prove that a
  refused path was never opened.
- `watchdog`: runs a function in a daemon thread and fails the test if it has not
  returned after a generous bound — a hang detector, not a speed assertion.
"""

from __future__ import annotations

import copy
import json
import os
import sys
import threading
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from ctxpolicy.layers import DEFAULT_ORDER

_T = TypeVar("_T")

#: Bound of the hang detector. A correct run takes a fraction of it.
WATCHDOG_SECONDS = 30.0

BASE_POLICY: dict[str, Any] = {
    "version": 1,
    "name": "reliability",
    "model": {"context_window": 32000, "tokenizer": "cl100k_base"},
    "budget": {"output_reserve": 0.1, "redistribute": True},
    "order": list(DEFAULT_ORDER),
    "layers": {
        "framework__context": {
            "collector": {"type": "template", "template": "framework for {{ query }}"}
        },
        "compression__context": {
            "persist": True,
            "collector": {"type": "state", "field": "compression__context"},
        },
    },
    "processes": {
        "react": {"checkpoint_messages": True, "share_context": True, "query": "checkpoint"},
        "worker": {"checkpoint_messages": True, "share_context": True, "query": "runtime"},
    },
    "default_process": "react",
}


def policy_data(layers: dict[str, Any] | None = None, **changes: Any) -> dict[str, Any]:
    """`BASE_POLICY` with ``layers`` merged into its layers and top-level ``changes``."""
    data = copy.deepcopy(BASE_POLICY)
    data["layers"].update(copy.deepcopy(layers or {}))
    data.update(changes)
    return data


def write_policy(folder: Path, layers: dict[str, Any] | None = None, **changes: Any) -> Path:
    """Write `policy_data` as ``folder/policy.yaml`` (JSON is YAML) and return its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "policy.yaml"
    path.write_text(json.dumps(policy_data(layers, **changes), indent=2), encoding="utf-8")
    return path


@pytest.fixture
def collector_module() -> Iterator[types.ModuleType]:
    """A fresh module registered in ``sys.modules``; set attributes, target them."""
    name = f"ctxpolicy_reliability_{os.getpid()}_{id(object())}"
    module = types.ModuleType(name)
    sys.modules[name] = module
    yield module
    del sys.modules[name]


# ----------------------------------------------------------------------- audit of opens

_OPENED: list[str] | None = None
_LOCK = threading.Lock()


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _OPENED is None or event != "open" or not args:
        return
    path = args[0]
    if isinstance(path, int):  # os.fdopen of a descriptor already accounted for
        return
    with _LOCK:
        if _OPENED is not None:
            _OPENED.append(os.fsdecode(path) if isinstance(path, str | bytes) else str(path))


_HOOKED = False


@pytest.fixture
def opened_paths() -> Iterator[list[str]]:
    """Paths opened (``open``/``os.open`` audit events) while the test runs."""
    global _OPENED, _HOOKED  # noqa: PLW0603 - audit hooks cannot be removed: one, toggled
    if not _HOOKED:
        sys.addaudithook(_audit)
        _HOOKED = True
    seen: list[str] = []
    _OPENED = seen
    try:
        yield seen
    finally:
        _OPENED = None


def assert_never_opened(opened: list[str], *forbidden: Path | str) -> None:
    """Fail if any path in ``forbidden`` (as given or resolved) was opened."""
    names = set()
    for item in forbidden:
        names.add(os.fspath(item))
        names.add(os.path.realpath(item))
    hits = [path for path in opened if path in names or os.path.realpath(path) in names]
    assert not hits, f"opened a path outside the root: {hits}"


# ------------------------------------------------------------------------ hang detector


def watchdog(function: Callable[[], _T], *, seconds: float = WATCHDOG_SECONDS) -> _T:
    """``function()``, failing the test if it has not returned after ``seconds``."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = function()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True, name="reliability-watchdog")
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"did not return within {seconds:g}s: a hang")
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]
