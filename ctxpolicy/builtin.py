"""The policies and samples shipped inside the package, named ``builtin:NAME``.

``ctxpolicy/policies/`` is the bundle: the policies (``base.yaml``, ``long-session.yaml``,
the templates they name) and samples (a LangGraph state, a context manifest). Every
place that takes a policy file takes a bundled one by name: ``builtin:base`` is
``ctxpolicy/policies/base.yaml`` (a name without a suffix means ``.yaml``),
``builtin:samples/state.json`` any other file of the bundle by its path in it. A file of
the bundle is named that way in messages too, so nothing points into a virtualenv.

Only the standard library: ``ctxpolicy validate`` resolves these names (docs/design.md,
'Bundled policies').
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

#: The prefix of a bundled file's name.
PREFIX = "builtin:"
#: The folder of the bundled policies and samples.
BUNDLE_DIR = Path(__file__).resolve().parent / "policies"
#: Where the bundled samples live inside the bundle.
SAMPLES = "samples"
#: The file name of a context manifest (``ctxpolicy compile``).
MANIFEST = "context-config.json"


def is_builtin(ref: str | os.PathLike[str]) -> bool:
    """Whether ``ref`` names a bundled file (``builtin:NAME``)."""
    return os.fspath(ref).startswith(PREFIX)


def _inside(name: str) -> Path | None:
    """The bundled file of ``name`` (a relative path inside the bundle), None when the
    name could leave it (absolute, ``..``, a backslash) or is empty."""
    parts = PurePosixPath(name).parts
    if not name or "\\" in name or name.startswith("/") or ".." in parts:
        return None
    path = BUNDLE_DIR.joinpath(*parts)
    return path if path.suffix else path.with_suffix(".yaml")


def resolve_ref(ref: str | os.PathLike[str]) -> Path:
    """The file ``ref`` names: a bundled file for ``builtin:NAME``, else ``ref`` as a path.

    The file may not exist (the reader reports it as not found); a name that could leave
    the bundle resolves to ``ref`` itself, which is no file either.
    """
    if not is_builtin(ref):
        return Path(ref)
    found = _inside(os.fspath(ref)[len(PREFIX) :])
    return Path(os.fspath(ref)) if found is None else found


def builtin_name(path: Path) -> str | None:
    """``builtin:NAME`` of a file inside the bundle (``.yaml`` left out), else None."""
    if not path.is_absolute():
        return None
    try:
        relative = path.relative_to(BUNDLE_DIR)
    except ValueError:
        return None
    name = relative.as_posix()
    return PREFIX + (name.removesuffix(".yaml") if relative.suffix == ".yaml" else name)


def builtin_policies() -> tuple[str, ...]:
    """The names of the bundled policies (``base``, ``long-session``, ...), sorted."""
    return tuple(sorted(p.stem for p in BUNDLE_DIR.glob("*.yaml") if p.is_file()))


def builtin_samples() -> tuple[str, ...]:
    """The bundled samples as ``builtin:`` names, sorted: the files of ``samples/`` and
    each context manifest in a folder of it (its other files are what it names)."""
    root = BUNDLE_DIR / SAMPLES
    found = [*root.glob("*.json"), *root.glob(f"*/{MANIFEST}")]
    return tuple(sorted(f"{PREFIX}{p.relative_to(BUNDLE_DIR).as_posix()}" for p in found))


def missing_message(name: str) -> str:
    """Why the file shown as ``name`` is not found: for ``builtin:NAME``, with the
    bundled names that exist; else the plain reason."""
    if not is_builtin(name):
        return "no such file or folder"
    names = ", ".join(f"{PREFIX}{policy}" for policy in builtin_policies())
    return f"no bundled file {name!r}; bundled policies: {names} (ctxpolicy list)"


__all__ = [
    "BUNDLE_DIR",
    "PREFIX",
    "builtin_name",
    "builtin_policies",
    "builtin_samples",
    "is_builtin",
    "missing_message",
    "resolve_ref",
]
