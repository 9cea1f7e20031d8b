"""The effective policy as a self-contained document (what ``show`` prints, what ``diff``
compares).

A loaded policy still says how it was written: ``extends`` names the parents whose values
are already merged in, and a ``template_file`` is a path relative to the file that
declared the layer. Neither survives a copy of the effective policy to another folder.
`self_contained` drops ``extends`` and puts each template file's text inline as
``template``, so the printed policy loads anywhere to the same effective policy.

A ``files`` collector's ``root`` is a folder and cannot be inlined: it is kept as written
and named in `SelfContained.notes` (it resolves against the folder of a saved copy).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ctxpolicy.collectors.template import read_template_file
from ctxpolicy.policy import FilesCollectorSpec, Policy


@dataclass(frozen=True, slots=True)
class SelfContained:
    """A self-contained policy and what could not be made self-contained.

    Attributes:
        policy: The policy without ``extends``, templates inline.
        notes: One sentence per value that still depends on the original folder.
    """

    policy: Policy
    notes: tuple[str, ...] = ()


def _shown(folder: Path) -> str:
    """``folder`` relative to the working directory when it is below it, else absolute."""
    try:
        relative = Path(os.path.relpath(folder))
    except ValueError:  # another drive (Windows)
        return folder.as_posix()
    return folder.as_posix() if relative.parts[:1] == ("..",) else relative.as_posix()


def self_contained(policy: Policy) -> SelfContained:
    """``policy`` without ``extends`` and with every ``template_file`` inlined.

    A template file that cannot be read (it vanished after loading) is left as a
    ``template_file`` and named in the notes.
    """
    notes: list[str] = []
    layers = dict(policy.layers)
    for name, spec in policy.layers.items():
        collector = spec.collector
        if collector is None:
            continue
        base = policy.layer_base_dir(name)
        relative = getattr(collector, "template_file", None)
        if isinstance(relative, str):
            try:
                text = read_template_file(relative, base, layer=name)
            except (OSError, ValueError) as exc:
                notes.append(f"layers.{name}: template_file {relative!r} kept: {exc}")
            else:
                inline = collector.model_copy(update={"template": text, "template_file": None})
                layers[name] = spec.model_copy(update={"collector": inline})
        if isinstance(collector, FilesCollectorSpec):
            where = _shown(base) if base is not None else "the policy's folder"
            notes.append(
                f"layers.{name}: files root {collector.root!r} is a folder under {where}; "
                "a saved copy reads it relative to its own folder"
            )
    copy = policy.model_copy(update={"extends": None, "layers": layers})
    copy._source = policy._source  # keep where relative paths resolve
    copy._base_dirs = policy._base_dirs
    return SelfContained(copy, tuple(notes))


__all__ = ["SelfContained", "self_contained"]
