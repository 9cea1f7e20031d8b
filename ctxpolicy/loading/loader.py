"""The loading pipeline: read -> merge ``extends`` -> environment -> validate -> `Policy`."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxpolicy.builtin import missing_message, resolve_ref
from ctxpolicy.diagnostics import (
    POLICY_SUFFIXES,
    JsonPath,
    Location,
    PolicyIssue,
    SourceMap,
    display_name,
    format_path,
    sorted_issues,
)
from ctxpolicy.errors import PolicyNotFoundError, PolicyValidationError
from ctxpolicy.loading.extends import DocumentCache, resolve_extends
from ctxpolicy.settings import apply_overrides, policy_path
from ctxpolicy.validation import validate_data

if TYPE_CHECKING:
    from ctxpolicy.policy import Policy

PathLike = str | os.PathLike[str]


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where one effective value came from.

    Attributes:
        path: JSON path, e.g. ``$.model.tokenizer``.
        value: The effective value.
        source: ``file:line:col``, ``<env NAME>``, ``<argument NAME>`` or ``default``.
    """

    path: str
    value: Any
    source: str


@dataclass(frozen=True, slots=True)
class LoadResult:
    """Everything the loader learned about one policy file.

    Attributes:
        file: The file given.
        policy: The validated policy (None when there are errors).
        issues: Every issue (errors and warnings), sorted by location.
        sourcemap: JSON path -> location of every value set by a file, variable or argument.
        chain: The files merged, parents first.
    """

    file: Path
    policy: Policy | None
    issues: tuple[PolicyIssue, ...] = ()
    sourcemap: SourceMap = field(default_factory=dict)
    chain: tuple[Path, ...] = ()

    @property
    def errors(self) -> tuple[PolicyIssue, ...]:
        """The issues of severity ``error``."""
        return tuple(i for i in self.issues if i.severity == "error")

    def provenance(self) -> list[Provenance]:
        """Every leaf of the effective policy with where it came from."""
        if self.policy is None:
            return []
        return [
            Provenance(format_path(path), value, _source_of(self.sourcemap.get(path)))
            for path, value in _leaves(self.policy.to_data(), ())
        ]


def _source_of(where: Location | None) -> str:
    return "default" if where is None else where.describe()


def _leaves(value: Any, path: JsonPath) -> Iterator[tuple[JsonPath, Any]]:
    if isinstance(value, dict) and value:
        for key, child in value.items():
            yield from _leaves(child, (*path, key))
    elif isinstance(value, list) and value and path[-1:] != ("order",):
        for index, child in enumerate(value):
            yield from _leaves(child, (*path, index))
    else:
        yield path, value


def _declaring_folder(where: Location | None, folders: dict[str, Path]) -> Path | None:
    """The folder of the file that set a value (None for a variable or an argument).

    ``folders`` remembers the folder of each file already seen (a policy's values come
    from one file or a few).
    """
    if where is None or where.file.startswith("<"):
        return None
    folder = folders.get(where.file)
    if folder is None:
        folder = folders[where.file] = resolve_ref(where.file).parent.absolute()
    return folder


def _tool_paths(data: Mapping[str, Any]) -> dict[str, JsonPath]:
    """The ``tools`` entries that may declare file tools, by their `Policy` base-dir key."""
    paths: dict[str, JsonPath] = {"@tools": ("tools",)}
    processes = data.get("processes")
    for process in processes if isinstance(processes, dict) else ():
        paths[f"@processes.{process}.tools"] = ("processes", process, "tools")
    return paths


def _base_dirs(data: Mapping[str, Any], sourcemap: SourceMap) -> dict[str, Path]:
    """The folder each relative path of the policy resolves against: the folder of the
    file that declares it (a parent's, when inherited through ``extends``).

    File tools' roots are keyed ``@tools`` / ``@processes.NAME.tools`` (docs/files.md); a
    layer's collector, or ``layers.query.references``, by the layer's name.
    """
    dirs: dict[str, Path] = {}
    folders: dict[str, Path] = {}
    for key, path in _tool_paths(data).items():
        if (folder := _declaring_folder(sourcemap.get(path), folders)) is not None:
            dirs[key] = folder
    layers = data.get("layers")
    for name in layers if isinstance(layers, dict) else ():
        where = sourcemap.get(("layers", name, "collector")) or sourcemap.get(
            ("layers", name, "references")
        )
        if (folder := _declaring_folder(where, folders)) is not None:
            dirs[name] = folder
    return dirs


def resolve_policy(
    path: PathLike,
    *,
    enable_share_context: bool | None = None,
    environ: Mapping[str, str] | None = None,
    documents: DocumentCache | None = None,
) -> LoadResult:
    """Load, merge, override and validate one policy file; never raises for bad input.

    Args:
        path: The policy file (``.yaml``, ``.yml`` or ``.toml``), or ``builtin:NAME``
            for a policy bundled with the package (`ctxpolicy.builtin`).
        enable_share_context: Explicit value of the central switch (wins over all).
        environ: Environment to read instead of ``os.environ``.
        documents: Documents already parsed in this run (see `validate_paths`).
    """
    return _resolve(
        path, enable_share_context=enable_share_context, environ=environ, documents=documents
    )


def _resolve(
    path: PathLike,
    *,
    enable_share_context: bool | None = None,
    environ: Mapping[str, str] | None = None,
    documents: DocumentCache | None = None,
    typed: bool = True,
) -> LoadResult:
    """`resolve_policy`; ``typed=False`` finds the issues only (the result's policy is
    None: see `ctxpolicy.validation.build_policy`)."""
    file = resolve_ref(path)
    name = display_name(file)
    # the merged data is only read (validated), never handed out: no copy of shared files
    merged = resolve_extends(file, documents=None if documents is None else documents.sharing())
    issues = list(merged.issues)
    if merged.data is None:
        return LoadResult(file, None, sorted_issues(issues), {}, merged.chain)
    data, smap, env_issues = apply_overrides(
        merged.data,
        merged.sourcemap,
        arguments={"enable_share_context": enable_share_context},
        environ=environ,
    )
    issues.extend(env_issues)
    policy, found = validate_data(
        data,
        smap,
        file=name,
        source=file.absolute(),
        base_dirs=_base_dirs(data, smap),
        memo=None if documents is None else documents.checks,
        typed=typed,
    )
    issues.extend(found)
    if any(i.severity == "error" for i in issues):
        policy = None
    return LoadResult(file, policy, sorted_issues(issues), smap, merged.chain)


def load_policy(
    path: PathLike | None = None, *, enable_share_context: bool | None = None
) -> Policy:
    """Load a policy file: validated, ``extends`` and the environment resolved, frozen.

    Args:
        path: The policy file; ``None`` uses ``CTXPOLICY_POLICY``.
        enable_share_context: Explicit value of the central switch; wins over
            ``CTXPOLICY_ENABLE_SHARE_CONTEXT`` and the file.

    Raises:
        PolicyValidationError: the file is invalid; ``issues`` holds every problem
            (`PolicyNotFoundError` when the file does not exist, `PolicyNotGivenError`
            when ``path`` is None and ``CTXPOLICY_POLICY`` is not set).
    """
    if enable_share_context is not None and not isinstance(enable_share_context, bool):
        raise TypeError(
            f"enable_share_context must be a bool or None, got {enable_share_context!r}"
        )
    result = resolve_policy(policy_path(path), enable_share_context=enable_share_context)
    if result.policy is None:
        raise _load_error(result)
    return result.policy


def _load_error(result: LoadResult) -> PolicyValidationError:
    """The error of a policy that did not load: not found (the file itself is missing),
    else invalid."""
    errors = result.errors or result.issues
    own = display_name(result.file)
    if len(errors) == 1 and errors[0].rule == "file.missing" and errors[0].file == own:
        return PolicyNotFoundError(errors)
    return PolicyValidationError(errors)


def explain_policy(path: PathLike, *, enable_share_context: bool | None = None) -> list[Provenance]:
    """Every effective value of a policy with the file line, variable or argument that set it.

    Raises:
        PolicyValidationError: the file is invalid.
    """
    result = resolve_policy(path, enable_share_context=enable_share_context)
    if result.policy is None:
        raise _load_error(result)
    return result.provenance()


def _hidden(path: Path, root: Path) -> bool:
    """A dot-file or a file under a dot-folder below ``root`` (``.git``, ``.venv``, ...).

    Also covers the temporary ``.ctxpolicy-*`` files a killed ``ctxpolicy set`` may leave.
    """
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def iter_policy_files(paths: PathLike | Iterable[PathLike]) -> Iterator[Path]:
    """The policy files under ``paths``: files as given; folders searched recursively,
    skipping hidden files and folders. A single path may be given instead of a list."""
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    for raw in paths:
        path = resolve_ref(raw)
        if path.is_dir():
            found = (
                p
                for p in path.rglob("*")
                if p.suffix.lower() in POLICY_SUFFIXES and not _hidden(p, path)
            )
            yield from sorted(p for p in found if p.is_file())
        else:
            yield path


def validate_paths(
    paths: PathLike | Iterable[PathLike], *, documents: DocumentCache | None = None
) -> list[PolicyIssue]:
    """Every issue of every policy file under ``paths`` (files or folders, recursive;
    hidden files and folders are skipped; one path may be given instead of a list).

    A path that does not exist is itself an issue (rule ``file.missing``). Each file is
    parsed once per call: team files that extend one base share its parse. Pass the same
    ``documents`` to several calls to share it across them too.
    """
    documents = DocumentCache() if documents is None else documents
    issues: list[PolicyIssue] = []
    for file in iter_policy_files(paths):
        if not file.exists():
            name = display_name(file)
            issues.append(PolicyIssue(name, 0, 0, "$", missing_message(name), "file.missing"))
            continue
        issues.extend(_resolve(file, documents=documents, typed=False).issues)
    return list(sorted_issues(issues))


__all__ = [
    "LoadResult",
    "Provenance",
    "explain_policy",
    "iter_policy_files",
    "load_policy",
    "resolve_policy",
    "validate_paths",
]
