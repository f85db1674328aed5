"""The CustomResourceDefinition resource (apiextensions.k8s.io/v1), as apiextensions-apiserver
serves it: kube's strategy (status reset on create, status kept on update, generation bumped on
spec changes, ``status.storedVersions`` seeded and only grown) and deletion in two steps: the
first DELETE marks the CRD Terminating and adds the cleanup finalizer, the finalizing
controller deletes every instance and then removes it.
"""

from __future__ import annotations

from typing import Any

from gateway.apiextensions.defaults import default_crd
from gateway.apiextensions.schema import cel
from gateway.apiextensions.schema.validation import schema_causes
from gateway.apiextensions.validation import (
    validate_crd,
    validate_crd_status,
    validate_crd_update,
)
from gateway.apimachinery import status
from gateway.apimachinery.clock import now_rfc3339
from gateway.apimachinery.status import Cause
from gateway.registry.resource import ResourceDef
from gateway.registry.strategy import Strategy
from gateway.registry.tables import DEFAULT_TABLE_COLUMNS
from gateway.schema import apiextensions as _definitions  # noqa: F401 - the CRD kinds

Object = dict[str, Any]
GROUP = "apiextensions.k8s.io"
CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"


def set_condition(crd: Object, type_: str, status: str, reason: str, message: str) -> bool:
    """Set one status condition (lastTransitionTime only when the status flips); whether
    anything changed."""
    conditions = crd.setdefault("status", {}).setdefault("conditions", [])
    for condition in conditions:
        if condition.get("type") == type_:
            if (condition.get("status"), condition.get("reason"),
                    condition.get("message")) == (status, reason, message):
                return False
            if condition.get("status") != status:
                condition["lastTransitionTime"] = now_rfc3339()
            condition.update(status=status, reason=reason, message=message)
            return True
    conditions.append({"type": type_, "status": status, "lastTransitionTime": now_rfc3339(),
                       "reason": reason, "message": message})
    return True


def condition_true(crd: Object, type_: str) -> bool:
    return any(c.get("type") == type_ and c.get("status") == "True"
               for c in crd.get("status", {}).get("conditions") or [])


def _cel_causes(schema: Object, path: str) -> list[Cause]:
    """CEL rules of a version's schema that do not compile."""
    return cel.compile_schema(schema, path)[1]


def _default_causes(value: Any, schema: Object, path: str) -> list[Cause]:
    """A schema's default that its own schema refuses."""
    return schema_causes(schema, value, path)


def storage_version(crd: Object) -> str:
    return next((v.get("name", "") for v in crd.get("spec", {}).get("versions") or []
                 if v.get("storage")), "")


class CRDStrategy(Strategy):
    has_status = True
    has_generation = True

    def prepare_for_create(self, obj: Object) -> None:
        default_crd(obj)
        obj["status"] = {"acceptedNames": {"kind": "", "plural": ""},
                         "storedVersions": [storage_version(obj)] if storage_version(obj)
                         else []}

    def prepare_for_update(self, new: Object, old: Object) -> None:
        default_crd(new)
        stored = list(old.get("status", {}).get("storedVersions") or [])
        version = storage_version(new)
        if version and version not in stored:
            stored.append(version)
            new.setdefault("status", {})["storedVersions"] = stored

    def validate(self, obj: Object) -> list[Cause]:
        return validate_crd(obj, cel_compile=_cel_causes, default_check=_default_causes)

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        return validate_crd_update(new, old, cel_compile=_cel_causes,
                                   default_check=_default_causes)

    def subresource_update(self, subresource: str, new: Object, old: Object) -> Object:
        result = super().subresource_update(subresource, new, old)
        causes = validate_crd_status(result, old)
        if causes:
            raise status.invalid("CustomResourceDefinition", old["metadata"]["name"], causes,
                                 GROUP)
        return result

    def pending_finalizers(self, obj: Object) -> list[str]:
        """The cleanup finalizer is pending until the finalizing controller removed it; it
        is there from the first DELETE on (added by ``begin_deletion``)."""
        finalizers = list(obj.get("metadata", {}).get("finalizers") or [])
        if not obj.get("metadata", {}).get("deletionTimestamp") and \
                CLEANUP_FINALIZER not in finalizers:
            finalizers.append(CLEANUP_FINALIZER)
        return finalizers

    def begin_deletion(self, obj: Object) -> None:
        meta = obj["metadata"]
        finalizers = meta.setdefault("finalizers", [])
        if CLEANUP_FINALIZER not in finalizers:
            finalizers.append(CLEANUP_FINALIZER)
        set_condition(obj, "Terminating", "True", "InstanceDeletionPending",
                      "CustomResourceDefinition marked for deletion; CustomResource deletion "
                      "will begin soon")


CUSTOM_RESOURCE_DEFINITIONS = ResourceDef(
    group=GROUP, version="v1", kind="CustomResourceDefinition",
    plural="customresourcedefinitions", singular="customresourcedefinition", namespaced=False,
    strategy=CRDStrategy(), short_names=("crd", "crds"), categories=("api-extensions",),
    columns=DEFAULT_TABLE_COLUMNS,
    schema="io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
    subresources=("status",))
