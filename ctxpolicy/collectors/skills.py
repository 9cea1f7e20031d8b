"""The ``skills`` collector: skill definitions, activated on demand.

The skill source of Loom's context sources (docs/memory.md, 'Agent outputs and
skills'): a skill costs tokens only in the calls that activated it.

Policy::

    skills__context:
      collector: {type: skills, service: skills, field: active_skills, match_query: true}

The service (looked up in the call's services, then in state under the same name) is a
mapping ``name -> definition`` or a zero-argument callable returning one. A definition
is a string (the instructions) or a mapping with ``instructions`` (or ``content``), an
optional ``description`` and optional ``triggers`` (words or phrases). A skill is
active when its name is listed in the state key ``field`` (a list of names, or one
name), or, with ``match_query``, when its name or one of its triggers occurs in the
call's query (case-insensitive, on word boundaries). Explicitly listed skills come
first, in the listed order, then query matches in the service's order. Whole
definitions are packed into the layer's cap (one that does not fit is left out)::

    ## sql-review
    Check joins and filters before running a query.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ctxpolicy.collectors.base import lookup_service
from ctxpolicy.memory.packing import pack_pieces

if TYPE_CHECKING:
    from ctxpolicy.collectors.base import CollectRequest


def resolve_skills(request: CollectRequest, name: str) -> Mapping[str, Any]:
    """The skills of service ``name`` (services first, then state).

    Raises:
        LookupError: no such service.
        TypeError: the service is not a mapping of skills or a callable returning one.
    """
    service = lookup_service(request.services, request.state, name)
    if service is None:
        raise LookupError(
            f"skills collector of layer {request.layer!r}: no service {name!r} "
            "(pass services={'" + name + "': {skill_name: definition, ...}})"
        )
    skills = service() if callable(service) and not isinstance(service, Mapping) else service
    if not isinstance(skills, Mapping):
        raise TypeError(
            f"skills collector of layer {request.layer!r}: service {name!r} must be a mapping "
            f"name -> definition or a callable returning one, got {type(skills).__name__}"
        )
    return skills


def _requested(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, Sequence):
        return [str(v) for v in value if v]
    raise TypeError(f"active skills must be a name or a list of names, got {type(value).__name__}")


def _triggers(name: str, definition: Any) -> list[str]:
    words = [name]
    if isinstance(definition, Mapping):
        words.extend(str(t) for t in definition.get("triggers") or () if t)
    return words


def _mentions(query: str, phrase: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", query, re.IGNORECASE) is not None


def render_skill(name: str, definition: Any) -> str:
    """One skill as ``## name`` + description + instructions."""
    if isinstance(definition, Mapping):
        parts = [
            str(definition.get(key) or "").strip()
            for key in ("description", "instructions", "content")
        ]
        body = "\n".join(part for part in parts if part)
    else:
        body = str(definition or "").strip()
    return f"## {name}\n{body}" if body else f"## {name}"


def active_skills(request: CollectRequest, skills: Mapping[str, Any]) -> list[str]:
    """Names of the skills this call activated, in order (listed first, then query matches)."""
    spec: Any = request.spec
    names = [n for n in dict.fromkeys(_requested(request.state.get(spec.field))) if n in skills]
    if spec.match_query and request.query:
        query = request.query
        names.extend(
            name
            for name, definition in skills.items()
            if name not in names and any(_mentions(query, w) for w in _triggers(name, definition))
        )
    return names


def collect_skills(request: CollectRequest) -> str | None:
    """The activated skills' definitions, whole, packed into the cap."""
    spec: Any = request.spec
    skills = resolve_skills(request, spec.service)
    names = active_skills(request, skills)
    if not names or request.cap_tokens <= 0:
        return None
    pieces = [render_skill(name, skills[name]) for name in names]
    kept = pack_pieces(
        pieces, cap_tokens=request.cap_tokens, count_tokens=request.count_tokens, separator="\n\n"
    )
    return "\n\n".join(pieces[i] for i in kept) or None


__all__ = ["active_skills", "collect_skills", "render_skill", "resolve_skills"]
