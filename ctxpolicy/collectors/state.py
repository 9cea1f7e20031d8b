"""The ``state`` collector: one field of the Blackboard, optionally through a template."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ctxpolicy.collectors.template import template_source, template_variables
from ctxpolicy.templates import render_template

if TYPE_CHECKING:
    from ctxpolicy.collectors.base import CollectRequest


def render_value(value: Any) -> str | None:
    """Plain text of a state value: strings as they are, structures as indented JSON."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        value = dump(mode="json")
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=False, default=str)


def collect_state(request: CollectRequest) -> str | None:
    """The Blackboard field ``spec.field`` (a missing or empty field gives no text).

    With ``template``/``template_file`` the template renders with ``value`` (the
    field) in addition to ``state``, ``query`` and ``vars``; it is not rendered when
    the field is missing or empty.
    """
    field: str = getattr(request.spec, "field", "")
    value = request.state.get(field)
    if value is None or (isinstance(value, str | list | tuple | dict) and not value):
        return None
    source = template_source(request)
    if source is None:
        return render_value(value)
    return render_template(source, template_variables(request, value=value))


__all__ = ["collect_state", "render_value"]
