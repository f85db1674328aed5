"""A custom resource seen as an autoscaling/v1 Scale, through its CRD version's
``specReplicasPath``, ``statusReplicasPath`` and ``labelSelectorPath``: what the scale
subresource answers, and what admission webhooks of ``<plural>/scale`` are sent."""

from __future__ import annotations

from typing import Any

from gateway.apiextensions.paths import read_path, write_path
from gateway.apimachinery import status
from gateway.apimachinery.objects import copy_object

Object = dict[str, Any]
SCALE_API_VERSION = "autoscaling/v1"
SCALE_KIND = {"group": "autoscaling", "version": "v1", "kind": "Scale"}
_SCALE_METADATA = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")


class ScaleView:
    """The Scale of an object, and the object with a Scale's replicas written into it."""

    kind = SCALE_KIND

    def __init__(self, paths: Object) -> None:
        self.spec_path = paths.get("specReplicasPath", "")
        self.status_path = paths.get("statusReplicasPath", "")
        self.selector_path = paths.get("labelSelectorPath") or ""

    def view(self, obj: Object) -> Object:
        meta = obj.get("metadata", {})
        replicas = read_path(obj, self.spec_path)
        current = read_path(obj, self.status_path)
        scale_status: Object = {"replicas": current if isinstance(current, int) else 0}
        selector = read_path(obj, self.selector_path) if self.selector_path else None
        if isinstance(selector, str) and selector:
            scale_status["selector"] = selector
        return {
            "kind": "Scale", "apiVersion": SCALE_API_VERSION,
            "metadata": {k: meta[k] for k in _SCALE_METADATA if k in meta},
            "spec": {"replicas": replicas if isinstance(replicas, int) else 0},
            "status": scale_status,
        }

    def apply(self, view: Object, obj: Object) -> Object:
        """``obj`` with the spec replicas of the Scale ``view`` (only they may change)."""
        new = copy_object(obj)
        write_path(new, self.spec_path, replicas_of(view))
        return new


def replicas_of(scale: Any) -> int:
    """The Scale's spec.replicas: an integer of at least 0 (kube's ValidateScale)."""
    replicas = (scale.get("spec") or {}).get("replicas", 0) if isinstance(scale, dict) else 0
    if isinstance(replicas, bool) or not isinstance(replicas, int):
        raise status.bad_request(f"Scale.autoscaling/v1 spec.replicas must be an integer: "
                                 f"{replicas!r}")
    if replicas < 0:
        name = (scale.get("metadata") or {}).get("name", "")
        raise status.invalid("Scale", name, [status.Cause(
            "FieldValueInvalid", f"Invalid value: {replicas}: must be greater than or equal to "
            "0", "spec.replicas")], "autoscaling")
    return replicas
