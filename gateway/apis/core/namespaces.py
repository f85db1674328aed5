"""core/v1 namespaces: DNS-1123 label names, phase Active on create, and the lifecycle check
that every namespaced create goes through (missing namespace 404, terminating 403)."""

from __future__ import annotations

from gateway.endpoints import status
from gateway.registry.resource import ResourceDef
from gateway.registry.store import RESTStore
from gateway.registry.strategy import Object, Strategy

#: Created at start and never deletable, as in kube-apiserver.
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
IMMORTAL_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})


class NamespaceStrategy(Strategy):
    name_is_label = True

    def prepare_for_create(self, obj: Object) -> None:
        obj["status"] = {"phase": "Active"}
        spec = obj.setdefault("spec", {})
        finalizers = spec.get("finalizers") or []
        if "kubernetes" not in finalizers:
            spec["finalizers"] = [*finalizers, "kubernetes"]

    def prepare_for_update(self, new: Object, old: Object) -> None:
        # spec.finalizers changes go through the finalize subresource; status through /status
        new["spec"] = old.get("spec", {})
        new["status"] = old.get("status", {})


NAMESPACES = ResourceDef(
    group="", version="v1", kind="Namespace", plural="namespaces", singular="namespace",
    namespaced=False, strategy=NamespaceStrategy(), short_names=("ns",),
)


def namespace_lifecycle(namespaces: RESTStore, resource: str, group: str = ""):
    """The admission check for creating ``resource`` objects in a namespace."""

    async def check(namespace: str) -> None:
        try:
            ns = await namespaces.get("", namespace)
        except status.StatusError as err:
            if err.code == 404:
                raise status.not_found("namespaces", namespace) from None
            raise
        if ns.get("status", {}).get("phase") == "Terminating":
            raise status.StatusError(
                403, "Forbidden",
                f"{status.qualified(resource, group)} is forbidden: unable to create new "
                f"content in namespace {namespace} because it is being terminated",
                kind=resource, group=group,
                causes=[status.Cause("NamespaceTerminating",
                                     f"namespace {namespace} is being terminated",
                                     "metadata.namespace")],
            )

    return check
