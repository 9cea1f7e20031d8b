"""Rules that look at files: ``template_file`` and ``files`` roots stay inside the policy's
folder, and every template compiles in the same sandbox that renders it.

The sandbox (`ctxpolicy.templates`, and jinja2 with it) is imported the first time a
policy has a template to compile (`_templates`, the one import of this module made at
run time, by name): most policies have none, and jinja2 costs ``ctxpolicy validate``
~20 ms of start-up.
"""

from __future__ import annotations

import os
import re
from collections.abc import Hashable, Iterator, MutableMapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ctxpolicy.diagnostics import MAX_FILE_BYTES, Finding, JsonPath, shown_path
from ctxpolicy.layers import ROOT_PLACEHOLDERS, fill_root, root_placeholders, static_root

if TYPE_CHECKING:  # the rules read a policy, never build one: no pydantic at run time
    from ctxpolicy.policy import CollectorSpec, LayerSpec, Policy

Memo = MutableMapping[Hashable, Any]


def _templates() -> ModuleType:
    """The template sandbox (and jinja2), imported when a policy has a template."""
    from ctxpolicy import templates  # declared lazy import (docs/design.md)

    return templates


def resolve_inside(
    base: Path, relative: str, *, shown: str | None = None
) -> tuple[Path | None, str | None, str]:
    """Resolve ``relative`` under ``base``, refusing anything that leaves ``base``.

    ``shown`` names the path in the reason (default ``relative``): a ``files`` root as
    the policy writes it, checked with its placeholders filled.

    Returns:
        ``(path, None, "")`` when it stays inside, else ``(None, rule, reason)``.
    """
    name = repr(relative if shown is None else shown)
    if (
        Path(relative).is_absolute()
        or relative.startswith(("/", "\\"))
        or (len(relative) > 1 and relative[1] == ":")
    ):
        reason = f"{name} is absolute; give a path relative to {shown_path(base)}"
        return None, "path.absolute", reason
    base = Path(os.path.normpath(base))  # a parent reached through extends: "teams/.."
    lexical = Path(os.path.normpath(base / relative))
    if not lexical.is_relative_to(base):
        return None, "path.outside", f"{name} leaves the policy's folder {shown_path(base)}"
    real_base = base.resolve()
    real = lexical.resolve()
    if not real.is_relative_to(real_base):
        return (
            None,
            "path.symlink-outside",
            f"{name} is a symlink to {real.as_posix()}, outside the policy's folder",
        )
    return lexical, None, ""


def _compile(source: str, path: JsonPath, *, file: str | None) -> Iterator[Finding]:
    templates = _templates()
    try:
        templates.compile_template(source)
    except templates.TemplateSyntaxError as exc:
        line = exc.lineno or 1
        message = f"template syntax error: {exc.message}"
        if file is None:
            yield Finding(path, message, "template.syntax", line_offset=line - 1)
        else:
            yield Finding(path, message, "template.syntax", file=file, line=line, column=1)


def _template_file(base: Path, relative: str, path: JsonPath) -> Iterator[Finding]:
    target, rule, reason = resolve_inside(base, relative)
    if target is None:
        yield Finding(path, reason, rule or "path.outside")
        return
    if not target.is_file():
        yield Finding(
            path, f"template file {shown_path(target)} does not exist", "template.missing"
        )
        return
    try:
        if target.stat().st_size > MAX_FILE_BYTES:
            yield Finding(
                path,
                f"template file {shown_path(target)} is over {MAX_FILE_BYTES} bytes",
                "file.too-large",
            )
            return
        source = target.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        yield Finding(
            path, f"cannot read template file {shown_path(target)}: {exc}", "template.unreadable"
        )
        return
    yield from _compile(source, path, file=shown_path(target))


def _signature(base: Path, relative: str) -> tuple[int, int, int, int] | None:
    """What identifies the file ``relative`` names under ``base`` now (None: no file)."""
    try:
        info = Path(os.path.normpath(base / relative)).stat()
    except (OSError, ValueError):
        return None
    return (info.st_dev, info.st_ino, info.st_mtime_ns, info.st_size)


def _remembered_template_file(
    base: Path, relative: str, path: JsonPath, memo: Memo | None
) -> Iterator[Finding]:
    """`_template_file`, worked out once per run for a file that has not changed since
    (team files that extend one base all check its template files)."""
    if memo is None:
        yield from _template_file(base, relative, path)
        return
    key = ("template_file", base, relative, path)
    signature = _signature(base, relative)
    found = memo.get(key)
    if found is None or signature is None or found[0] != signature:
        found = memo[key] = (signature, tuple(_template_file(base, relative, path)))
    yield from found[1]


def _folder_root(base: Path, relative: str, where: JsonPath, *, what: str) -> Iterator[Finding]:
    """A root folder (``files`` root, references root, tools root) inside ``base``.

    Refused when it leaves ``base``; a warning when it is not a folder.
    """
    target, rule, reason = resolve_inside(base, relative)
    if target is None:
        yield Finding(where, reason, rule or "path.outside")
    elif not target.is_dir():
        yield Finding(
            where,
            f"{what} root {shown_path(target)} is not a folder",
            "files.root-missing",
            severity="warning",
        )


def _collector_files(
    collector: CollectorSpec, base: Path | None, where: JsonPath, memo: Memo | None = None
) -> Iterator[Finding]:
    """A collector's inline template, ``template_file`` and ``files`` root and selection."""
    template = getattr(collector, "template", None)
    if isinstance(template, str):
        yield from _compile(template, (*where, "template"), file=None)
    if base is None:
        return  # built in code: no folder to resolve against
    template_file = getattr(collector, "template_file", None)
    if isinstance(template_file, str):
        yield from _remembered_template_file(base, template_file, (*where, "template_file"), memo)
    if collector.type == "files":
        yield from _files_root(base, collector.root, (*where, "root"))
        yield from _select_escapes(collector.select, (*where, "select"))


def _files_root(base: Path, root: str, where: JsonPath) -> Iterator[Finding]:
    """A ``files`` root, which may name the session (``data/{thread_id}``).

    Each placeholder must be one of `ROOT_PLACEHOLDERS`; the root, whatever a
    placeholder is filled with, must stay inside ``base``; the folders before the first
    placeholder should exist (the session's own folder may appear later).
    """
    try:
        names = root_placeholders(root)
    except ValueError as exc:
        yield Finding(where, str(exc), "files.root-placeholder")
        return
    if not names:
        yield from _folder_root(base, root, where, what="files")
        return
    known = ", ".join(f"{{{name}}}" for name in ROOT_PLACEHOLDERS)
    unknown = [name for name in dict.fromkeys(names) if name not in ROOT_PLACEHOLDERS]
    for name in unknown:
        yield Finding(
            where,
            f"unknown placeholder {{{name}}} in root {root!r}; a files root may name {known}",
            "files.root-placeholder",
        )
    if unknown:
        return
    # a placeholder is filled with one plain folder name: stand one in to check the rest
    filled = fill_root(root, dict.fromkeys(names, "x"))
    target, rule, reason = resolve_inside(base, filled, shown=root)
    if target is None:
        yield Finding(where, reason, rule or "path.outside")
        return
    yield from _folder_root(base, static_root(root), where, what="files")


def _layer_files(
    policy: Policy, name: str, spec: LayerSpec, memo: Memo | None = None
) -> Iterator[Finding]:
    """The file rules of one layer: its references root and its collector's files."""
    base = policy.layer_base_dir(name)
    base = base.absolute() if base is not None else None
    if spec.references is not None and base is not None:
        where: JsonPath = ("layers", name, "references", "root")
        yield from _folder_root(base, spec.references.root, where, what="references")
    if spec.collector is not None:
        yield from _collector_files(spec.collector, base, ("layers", name, "collector"), memo)


def check_files(policy: Policy, *, memo: Memo | None = None) -> list[Finding]:
    """Template and ``files`` root rules for every layer with a collector.

    Layers of a policy built in code (no source file) have no folder to resolve
    against: only their inline templates are checked.

    Args:
        policy: The policy.
        memo: Where a run remembers the findings of each template file (worked out again
            when the file changes); None checks every file again.
    """
    findings: list[Finding] = list(_check_tool_roots(policy))
    for name, spec in policy.layers.items():
        findings.extend(_layer_files(policy, name, spec, memo))
    return findings


def _declared_tool_roots(policy: Policy) -> Iterator[tuple[JsonPath, str, str]]:
    """``(where, root, base-dir key)`` of the top-level and per-process file ``tools``."""
    if policy.tools is not None:
        yield ("tools", "root"), policy.tools.root, "@tools"
    for process, rule in policy.processes.items():
        if rule.tools is not None:
            where = ("processes", process, "tools", "root")
            yield where, rule.tools.root, f"@processes.{process}.tools"


def _check_tool_roots(policy: Policy) -> Iterator[Finding]:
    """The ``root`` of the top-level and per-process file ``tools`` (the files rule)."""
    for where, root, key in _declared_tool_roots(policy):
        base = policy._private["_base_dirs"].get(key)
        if base is None and policy.source is not None:
            base = policy.source.parent
        if base is not None:  # else built in code: no folder to resolve against
            yield from _folder_root(base.absolute(), root, where, what="tools")


_LINE_SUFFIX_RE = re.compile(r"(?::\d+){1,2}$")


def _select_escapes(select: tuple[str, ...], path: JsonPath) -> Iterator[Finding]:
    """``select`` entries that name a file outside the root, caught without reading it.

    Lexical only (absolute paths, ``..`` that climbs out); a symlink that leaves the
    root is refused when the collector resolves the entry.
    """
    for index, entry in enumerate(select):
        body = entry.strip().removeprefix("[").removesuffix("]").strip()
        target = _LINE_SUFFIX_RE.sub("", body.split("#", 1)[0])
        where = (*path, index)
        if target.startswith(("/", "\\")) or (len(target) > 1 and target[1] == ":"):
            yield Finding(
                where, f"{entry!r} is absolute; select files relative to the root", "path.absolute"
            )
        elif os.path.normpath(target).replace("\\", "/").split("/")[0] == "..":
            yield Finding(where, f"{entry!r} leaves the files root", "path.outside")


__all__ = ["check_files", "resolve_inside"]
