"""The ``template`` collector, and the template helpers the other collectors share.

Templates render in the sandbox of `ctxpolicy.templates` and see ``state`` (a
read-only view of the Blackboard), ``query`` and ``vars``. A ``template_file`` is
resolved against the folder of the policy file that declared the layer and refused if
it leaves that folder (absolute path, ``..``, or a symlink pointing outside).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxpolicy.loading.read import FileTooLargeError, NotRegularFileError, read_regular_file
from ctxpolicy.templates import plain_data, render_template

if TYPE_CHECKING:
    from ctxpolicy.collectors.base import CollectRequest

#: Largest template file read, in bytes.
MAX_TEMPLATE_BYTES = 1_000_000


class ReadOnlyMapping(Mapping[str, Any]):
    """A read-only, recursively read-only view of a mapping (templates see state so)."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return readonly_view(self._data[key])

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"ReadOnlyMapping({self._data!r})"

    def __str__(self) -> str:
        """The mapping as compact JSON: ``{{ item }}`` in a template prints its data."""
        return json.dumps(self._data, ensure_ascii=False, default=plain_data)


def readonly_view(value: Any) -> Any:
    """``value`` with mappings wrapped read-only and lists/sets turned into tuples."""
    if isinstance(value, ReadOnlyMapping):
        return value
    if isinstance(value, Mapping):
        return ReadOnlyMapping(value)
    if isinstance(value, list | tuple):
        return tuple(readonly_view(item) for item in value)
    if isinstance(value, set | frozenset):
        return frozenset(value)
    return value


def resolve_template_file(relative: str, base_dir: Path | None, *, layer: str) -> Path:
    """Resolve ``relative`` inside ``base_dir``, refusing anything that escapes it.

    Raises:
        ValueError: no base folder, an absolute path, or a path (after ``..`` and
            symlinks) outside ``base_dir``.
    """
    if base_dir is None:
        raise ValueError(
            f"{layer}: template_file {relative!r} needs a policy loaded from a file "
            "(relative paths resolve against its folder)"
        )
    candidate = Path(relative)
    if candidate.is_absolute() or relative.startswith(("/", "\\")):
        raise ValueError(f"{layer}: template_file {relative!r} must be a relative path")
    root = base_dir.resolve()
    resolved = (root / candidate).resolve()
    if not resolved.is_relative_to(root):
        raise ValueError(
            f"{layer}: template_file {relative!r} resolves to {resolved}, outside the "
            f"policy folder {root}"
        )
    return resolved


def read_template_file(relative: str, base_dir: Path | None, *, layer: str) -> str:
    """The text of a template file inside ``base_dir`` (UTF-8, size-limited).

    Raises:
        ValueError: the path escapes, is not a regular file (device, FIFO), the file is
            too large or not UTF-8.
        OSError: the file cannot be read.
    """
    path = resolve_template_file(relative, base_dir, layer=layer)
    try:
        data = read_regular_file(path, max_bytes=MAX_TEMPLATE_BYTES, follow_symlinks=False)
    except NotRegularFileError:  # a FIFO would block, /dev/zero never ends
        raise ValueError(
            f"{layer}: template_file {relative!r} is not a regular file (folder, device, "
            "FIFO or socket)"
        ) from None
    except FileTooLargeError:
        raise ValueError(
            f"{layer}: template_file {relative!r} exceeds {MAX_TEMPLATE_BYTES} bytes"
        ) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{layer}: template_file {relative!r} is not UTF-8: {exc}") from None


def template_source(request: CollectRequest) -> str | None:
    """The template text of ``request.spec`` (inline or from its file), or None."""
    spec = request.spec
    inline: str | None = getattr(spec, "template", None)
    if inline is not None:
        return inline
    relative: str | None = getattr(spec, "template_file", None)
    if relative is None:
        return None
    return read_template_file(relative, request.base_dir, layer=request.layer)


def template_variables(request: CollectRequest, **extra: Any) -> dict[str, Any]:
    """The variables every policy template sees: ``state``, ``query``, ``vars`` (+ extra)."""
    variables: dict[str, Any] = {
        "state": readonly_view(request.state),
        "query": request.query,
        "vars": readonly_view(request.vars or request.policy.vars),
    }
    variables.update({key: readonly_view(value) for key, value in extra.items()})
    return variables


def collect_template(request: CollectRequest) -> str | None:
    """Render the layer's template (inline ``template`` or ``template_file``).

    Raises:
        ValueError: the spec has no template or its file escapes the policy folder.
        jinja2.TemplateError: a syntax error, undefined variable or sandbox violation.
    """
    source = template_source(request)
    if source is None:
        raise ValueError(f"{request.layer}: the template collector needs a template")
    return render_template(source, template_variables(request))


__all__ = [
    "ReadOnlyMapping",
    "collect_template",
    "read_template_file",
    "readonly_view",
    "resolve_template_file",
    "template_source",
    "template_variables",
]
