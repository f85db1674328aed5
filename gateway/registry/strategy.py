"""Per-resource behaviour plugged into the generic REST store (kube's RESTCreateStrategy...).

The base class is what most resources need: names are DNS-1123 subdomains, nothing is
defaulted, anything may change on update. A resource overrides only what differs.
"""

from __future__ import annotations

from typing import Any

from gateway.endpoints.status import Cause
from gateway.registry.validation import name_causes

Object = dict[str, Any]


class Strategy:
    #: Namespaces (and a few others) need DNS-1123 labels; most names are subdomains.
    name_is_label: bool = False
    #: PUT of a missing object creates it (leases, endpoints, services do this in kube).
    allow_create_on_update: bool = False
    #: PUT without metadata.resourceVersion overwrites whatever is stored.
    allow_unconditional_update: bool = True

    def prepare_for_create(self, obj: Object) -> None:
        """Reset what a client may not set on create (e.g. status); default anything missing."""

    def prepare_for_update(self, new: Object, old: Object) -> None:
        """Carry over what an update may not change (e.g. status on the main resource)."""

    def validate(self, obj: Object) -> list[Cause]:
        """Causes that make ``obj`` invalid on create (422)."""
        return []

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        """Causes that make an update invalid (422); by default the create rules."""
        return self.validate(new)

    def validate_name(self, name: str) -> list[Cause]:
        return name_causes(name, label=self.name_is_label)
