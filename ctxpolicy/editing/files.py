"""The I/O edge of `ctxpolicy set`.

Lock the file, edit the text, validate the candidate beside the file, write atomically.
"""

from __future__ import annotations

import errno
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ctxpolicy.atomic import locked_for_update, sibling_temp_file, write_text_atomic
from ctxpolicy.diagnostics import MAX_FILE_BYTES, PolicyIssue
from ctxpolicy.editing.toml_edit import set_toml_value
from ctxpolicy.editing.values import EditError, EditResult, FileFormat, parse_key, parse_value
from ctxpolicy.editing.yaml_edit import set_yaml_value
from ctxpolicy.errors import PolicyValidationError
from ctxpolicy.loading import validate_paths
from ctxpolicy.loading.read import FileTooLargeError, read_regular_file


def set_text_value(text: str, key: Sequence[str], value: Any, *, fmt: FileFormat) -> str:
    """Set ``key`` to ``value`` in a policy document, changing only that value's text.

    Args:
        text: The document.
        key: Key segments (see `parse_key`).
        value: Plain data (see `parse_value`).
        fmt: ``yaml`` or ``toml``.

    Raises:
        EditError: the edit cannot be applied safely (the message says why).
    """
    if fmt == "toml":
        return set_toml_value(text, key, value)
    return set_yaml_value(text, key, value)


# --------------------------------------------------------------------------- files


def file_format(path: Path) -> FileFormat:
    """``yaml`` or ``toml`` from the file name.

    Raises:
        EditError: the suffix is not ``.yaml``, ``.yml`` or ``.toml``.
    """
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml"):
        return "yaml"
    if suffix == ".toml":
        return "toml"
    raise EditError(f"{path}: not a policy file (expected .yaml, .yml or .toml)")


def _relabel(issue: PolicyIssue, temp: Path, path: Path) -> PolicyIssue:
    if Path(issue.file).name != temp.name:
        return issue
    return replace(issue, file=str(path), message=issue.message.replace(temp.name, path.name))


def check_candidate(path: Path, text: str) -> list[PolicyIssue]:
    """Validate ``text`` as if it were the content of ``path``.

    The text is written to a hidden temporary file in ``path``'s folder (so ``extends``
    and template files resolve exactly as they will) and always removed afterwards.
    Issues name ``path``, not the temporary file.

    Raises:
        OSError: the candidate itself could not be read back (an I/O failure, not an
            invalid policy).
    """
    with sibling_temp_file(path, text) as temp:
        issues = validate_paths([temp])
    for issue in issues:
        if issue.rule == "file.unreadable" and Path(issue.file).name == temp.name:
            raise OSError(errno.EIO, f"could not read the edited text back: {issue.message}")
    return sorted((_relabel(i, temp, path) for i in issues), key=lambda i: i.sort_key)


def _read_policy_text(path: Path, *, shown: Path) -> str:
    """The text of a policy file (a regular file, within the size limit, UTF-8).

    Raises:
        EditError: too large, or not UTF-8 (named as ``shown``).
        OSError: it cannot be read.
    """
    try:
        raw = read_regular_file(path, max_bytes=MAX_FILE_BYTES)
    except FileTooLargeError:
        limit = f"the policy file limit of {MAX_FILE_BYTES} bytes"
        raise EditError(f"{shown}: larger than {limit}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EditError(f"{shown}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def set_policy_value(path: str | Path, key: str, value: str) -> EditResult:
    """Set one value of a policy file in place (the engine of ``ctxpolicy set``).

    Under an exclusive update lock: read the file, patch the one node, validate the
    candidate text next to the file, then replace the file atomically (its permission
    bits kept). An invalid edit writes nothing.

    Args:
        path: A ``.yaml``/``.yml``/``.toml`` policy file.
        key: Dotted key, e.g. ``budget.ratios.query``.
        value: The new value as YAML text, e.g. ``0.1``, ``false``, ``"[a, b]"``.

    Returns:
        What was done (``changed`` is False when the value was already set).

    Raises:
        EditError: bad key or value syntax, or an edit that cannot be applied safely.
        PolicyValidationError: the edited policy would be invalid (the file is untouched).
        OSError: the file cannot be read or written.
    """
    target = Path(path)
    fmt = file_format(target)
    segments = parse_key(key)
    new_value = parse_value(value)
    # A symlinked policy is edited where it really lives, so the link survives; it is
    # validated where it is seen (relative paths such as extends resolve from there).
    real = target.resolve() if target.is_symlink() else target
    with locked_for_update(real):
        text = _read_policy_text(real, shown=target)
        bom = "\ufeff" if text.startswith("\ufeff") else ""
        new_text = bom + set_text_value(text.removeprefix(bom), segments, new_value, fmt=fmt)
        if new_text == text:
            return EditResult(path=target, key=segments, changed=False)
        issues = check_candidate(target, new_text)
        errors = [i for i in issues if i.severity == "error"]
        if errors:
            raise PolicyValidationError(issues)
        write_text_atomic(real, new_text)
    warnings = tuple(i for i in issues if i.severity == "warning")
    return EditResult(path=target, key=segments, changed=True, warnings=warnings)
