"""What a policy says beyond its fields, written once for every way a policy is held.

`PolicyViews` derives a policy's views from its fields: a layer with its kind's
defaults, a process's rule, the tokens a call may fill, the folder a relative path
resolves against. `ctxpolicy.policy.Policy` (the pydantic model) inherits them, and so
does the plain policy ``ctxpolicy validate`` reads without pydantic
(`ctxpolicy.validation.plain`, docs/design.md 'Validation without the models'), so
the semantic rules see the same views in both.

This module imports no pydantic.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxpolicy.errors import UnknownProcessError
from ctxpolicy.layers import is_block_layer, resolve_layer_settings

if TYPE_CHECKING:
    from ctxpolicy.policy import (
        BudgetSpec,
        FileToolsSpec,
        LayerSpec,
        ModelSpec,
        ProcessRule,
        ResolvedLayer,
    )


class PolicyViews:
    """The derived views of a policy, over the fields a policy class declares."""

    __slots__ = ()

    if TYPE_CHECKING:  # the fields, as `ctxpolicy.policy.Policy` declares them
        order: tuple[str, ...]
        model: ModelSpec
        budget: BudgetSpec
        layers: Mapping[str, LayerSpec]
        processes: Mapping[str, ProcessRule]
        tools: FileToolsSpec | None

        @property
        def _private(self) -> dict[str, Any]:
            """``_source``, ``_base_dirs`` and ``_order_locations``."""

        def _resolved_layer(self, fields: dict[str, Any]) -> ResolvedLayer:
            """The resolved layer with ``fields``, as this kind of policy holds one."""

    @property
    def source(self) -> Path | None:
        """The file this policy was loaded from (None when built in code)."""
        source: Path | None = self._private["_source"]
        return source

    @property
    def block_layers(self) -> tuple[str, ...]:
        """The ``__context`` layers in policy order."""
        return tuple(name for name in self.order if is_block_layer(name))

    @property
    def available_tokens(self) -> int:
        """``context_window * (1 - output_reserve)``, rounded down."""
        return int(self.model.context_window * (1 - self.budget.output_reserve))

    def layer(self, name: str) -> ResolvedLayer:
        """The layer ``name`` with the defaults of its kind filled in.

        Raises:
            ValueError: ``name`` is not a layer name.
        """
        spec = self.layers.get(name)
        fields: dict[str, Any] = {"name": name, **resolve_layer_settings(name, spec)._asdict()}
        fields["collector"] = None if spec is None else spec.collector
        return self._resolved_layer(fields)

    def layer_base_dir(self, name: str) -> Path | None:
        """Folder of the policy file that declared layer ``name``'s collector.

        Relative ``template_file`` and ``files`` roots resolve against it (a layer
        inherited through ``extends`` resolves against the parent's folder).
        """
        private = self._private
        found: Path | None = private["_base_dirs"].get(name)
        if found is not None:
            return found
        source: Path | None = private["_source"]
        return source.parent if source is not None else None

    def file_tools(self, process: str) -> tuple[FileToolsSpec | None, Path | None]:
        """The file tools of ``process`` (its own ``tools``, else the top-level ``tools``)
        and the folder their ``root`` is relative to (None for a policy built in code).

        Raises:
            UnknownProcessError: the policy does not declare ``process``.
        """
        own = self.process(process).tools
        key = f"@processes.{process}.tools" if own is not None else "@tools"
        spec = own if own is not None else self.tools
        if spec is None:
            return None, None
        found = self._private["_base_dirs"].get(key)
        if found is None and self.source is not None:
            found = self.source.parent
        return spec, found

    def process(self, name: str) -> ProcessRule:
        """The rule of process ``name``.

        Raises:
            UnknownProcessError: the policy does not declare ``name``.
        """
        try:
            return self.processes[name]
        except KeyError:
            raise UnknownProcessError(name, tuple(self.processes)) from None

    def ratio(self, layer: str) -> float:
        """The budget ratio of ``layer`` (0 when the policy gives none)."""
        return self.budget.ratios.get(layer, 0.0)


__all__ = ["PolicyViews"]
