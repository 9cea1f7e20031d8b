"""Rules that look at files: ``template_file`` and ``files`` roots stay inside the policy's
folder, and every template compiles in the same sandbox that renders it."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from ctxpolicy.loading.limits import MAX_FILE_BYTES
from ctxpolicy.loading.sourcemap import JsonPath
from ctxpolicy.policy import FilesCollectorSpec, Policy
from ctxpolicy.validation.findings import Finding


def _shown(path: Path) -> str:
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path.as_posix()
    return path.as_posix() if relative.startswith("..") else Path(relative).as_posix()


def resolve_inside(base: Path, relative: str) -> tuple[Path | None, str | None, str]:
    """Resolve ``relative`` under ``base``, refusing anything that leaves ``base``.

    Returns:
        ``(path, None, "")`` when it stays inside, else ``(None, rule, reason)``.
    """
    if (
        Path(relative).is_absolute()
        or relative.startswith(("/", "\\"))
        or (len(relative) > 1 and relative[1] == ":")
    ):
        reason = f"{relative!r} is absolute; give a path relative to {_shown(base)}"
        return None, "path.absolute", reason
    base = Path(os.path.normpath(base))  # a parent reached through extends: "teams/.."
    lexical = Path(os.path.normpath(base / relative))
    if not lexical.is_relative_to(base):
        return None, "path.outside", f"{relative!r} leaves the policy's folder {_shown(base)}"
    real_base = base.resolve()
    real = lexical.resolve()
    if not real.is_relative_to(real_base):
        return (
            None,
            "path.symlink-outside",
            (f"{relative!r} is a symlink to {real.as_posix()}, outside the policy's folder"),
        )
    return lexical, None, ""


def _compile(source: str, path: JsonPath, *, file: str | None) -> Iterator[Finding]:
    from jinja2 import TemplateSyntaxError

    from ctxpolicy.templates import compile_template

    try:
        compile_template(source)
    except TemplateSyntaxError as exc:
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
        yield Finding(path, f"template file {_shown(target)} does not exist", "template.missing")
        return
    try:
        if target.stat().st_size > MAX_FILE_BYTES:
            yield Finding(
                path,
                f"template file {_shown(target)} is over {MAX_FILE_BYTES} bytes",
                "file.too-large",
            )
            return
        source = target.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        yield Finding(
            path, f"cannot read template file {_shown(target)}: {exc}", "template.unreadable"
        )
        return
    yield from _compile(source, path, file=_shown(target))


def check_files(policy: Policy) -> list[Finding]:
    """Template and ``files`` root rules for every layer with a collector.

    Layers of a policy built in code (no source file) have no folder to resolve
    against: only their inline templates are checked.
    """
    findings: list[Finding] = []
    findings.extend(_check_tool_roots(policy))
    for name, spec in policy.layers.items():
        references = spec.references
        query_base = policy.layer_base_dir(name)
        if references is not None and query_base is not None:
            where: JsonPath = ("layers", name, "references", "root")
            target, rule, reason = resolve_inside(query_base.absolute(), references.root)
            if target is None:
                findings.append(Finding(where, reason, rule or "path.outside"))
            elif not target.is_dir():
                findings.append(
                    Finding(
                        where,
                        f"references root {_shown(target)} is not a folder",
                        "files.root-missing",
                        severity="warning",
                    )
                )
        collector = spec.collector
        if collector is None:
            continue
        base_path: JsonPath = ("layers", name, "collector")
        base = policy.layer_base_dir(name)
        base = base.absolute() if base is not None else None
        template = getattr(collector, "template", None)
        if isinstance(template, str):
            findings.extend(_compile(template, (*base_path, "template"), file=None))
        template_file = getattr(collector, "template_file", None)
        if isinstance(template_file, str) and base is not None:
            findings.extend(_template_file(base, template_file, (*base_path, "template_file")))
        if isinstance(collector, FilesCollectorSpec) and base is not None:
            target, rule, reason = resolve_inside(base, collector.root)
            if target is None:
                findings.append(Finding((*base_path, "root"), reason, rule or "path.outside"))
            elif not target.is_dir():
                findings.append(
                    Finding(
                        (*base_path, "root"),
                        f"files root {_shown(target)} is not a folder",
                        "files.root-missing",
                        severity="warning",
                    )
                )
            findings.extend(_select_escapes(collector.select, (*base_path, "select")))
    return findings


def _check_tool_roots(policy: Policy) -> Iterator[Finding]:
    """The ``root`` of the top-level and per-process file ``tools`` (the files rule)."""
    declared: list[tuple[JsonPath, str]] = []
    if policy.tools is not None:
        declared.append((("tools", "root"), policy.tools.root))
    for process, process_rule in policy.processes.items():
        if process_rule.tools is not None:
            declared.append((("processes", process, "tools", "root"), process_rule.tools.root))
    for where, root in declared:
        key = "@tools" if where[0] == "tools" else f"@processes.{where[1]}.tools"
        base = policy._base_dirs.get(key)
        if base is None and policy.source is not None:
            base = policy.source.parent
        if base is None:
            continue  # built in code: no folder to resolve against
        target, rule, reason = resolve_inside(base.absolute(), root)
        if target is None:
            yield Finding(where, reason, rule or "path.outside")
        elif not target.is_dir():
            yield Finding(
                where,
                f"tools root {_shown(target)} is not a folder",
                "files.root-missing",
                severity="warning",
            )


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
