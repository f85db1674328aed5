"""Per-resource behaviour plugged into the generic REST store (kube's RESTCreateStrategy,
RESTUpdateStrategy, RESTDeleteStrategy...).

The base class is what most resources need: names are DNS-1123 subdomains, nothing is
defaulted, anything but metadata may change on update, no generation, no status subresource.
A resource overrides only what differs.
"""

from __future__ import annotations

from typing import Any

from gateway.apimachinery.objects import copy_object
from gateway.apimachinery.status import Cause
from gateway.registry.validation import name_causes

Object = dict[str, Any]


class Strategy:
    #: Namespaces (and a few others) need DNS-1123 labels; most names are subdomains.
    name_is_label: bool = False
    #: PUT of a missing object creates it (leases, endpoints, services do this in kube).
    allow_create_on_update: bool = False
    #: PUT without metadata.resourceVersion overwrites whatever is stored.
    allow_unconditional_update: bool = True
    #: The object has a status that only the status subresource changes.
    has_status: bool = False
    #: metadata.generation is kept and bumped when anything but metadata and status changes.
    has_generation: bool = False
    #: Field selector labels beyond metadata.name / metadata.namespace.
    selectable_fields: tuple[str, ...] = ()
    #: A body of another kind is refused while decoding (400); False leaves it to
    #: ``validate`` (custom resources: 422 "kind: must be <Kind>").
    decoding_checks_kind: bool = True

    def prepare_for_create(self, obj: Object) -> None:
        """Reset what a client may not set on create (e.g. status); default anything missing."""

    def prepare_for_update(self, new: Object, old: Object) -> None:
        """Carry over what an update may not change."""

    def validate(self, obj: Object) -> list[Cause]:
        """Causes that make ``obj`` invalid on create (422)."""
        return []

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        """Causes that make an update invalid (422); by default the create rules."""
        return self.validate(new)

    def validate_name(self, name: str) -> list[Cause]:
        return name_causes(name, label=self.name_is_label)

    def field_set(self, obj: Object) -> dict[str, str]:
        """Values of ``selectable_fields`` for ``obj``."""
        return {}

    def validate_delete(self, obj: Object) -> None:
        """Raise a StatusError when ``obj`` may not be deleted at all."""

    def pending_finalizers(self, obj: Object) -> list[str]:
        """What must be cleared before the object may leave storage."""
        return list(obj.get("metadata", {}).get("finalizers") or [])

    def begin_deletion(self, obj: Object) -> None:
        """The object was asked to go but must wait for its finalizers (namespaces:
        Terminating)."""

    def subresource_update(self, subresource: str, new: Object, old: Object) -> Object:
        """What a write to a subresource makes of the object: by default (status) the old
        object with the new status, and nothing else changed."""
        result = copy_object(old)
        if "status" in new:
            result["status"] = new["status"]
        else:
            result.pop("status", None)
        if "managedFields" in new.get("metadata", {}):
            result["metadata"]["managedFields"] = new["metadata"]["managedFields"]
        return result
