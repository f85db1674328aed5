"""core/v1 namespaces: DNS-1123 label names, phase Active on create, Terminating on delete, the
``kubernetes.io/metadata.name`` label (always the name: set on every write and on every read of
an object stored without it, so a namespaceSelector on it always matches), and the lifecycle
check every namespaced create goes through (missing namespace 404, terminating namespace
403)."""

from __future__ import annotations

from collections.abc import Callable

from gateway.apimachinery import status
from gateway.apimachinery.gowords import go_quote
from gateway.apimachinery.objects import copy_object
from gateway.registry.lister import Lister
from gateway.registry.resource import ResourceDef
from gateway.registry.store import Admission, WriteOptions
from gateway.registry.strategy import Object, Strategy
from gateway.registry.tables import AGE, NAME, Column
from gateway.registry.versions import BuiltinVersion
from gateway.storage.apierrors import from_storage_error
from gateway.storage.errors import KeyNotFoundError, StorageError

#: Created at start, as kube-apiserver does.
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
#: Never deletable.
IMMORTAL_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})
FINALIZER = "kubernetes"
#: kube's LabelMetadataName: every namespace carries its own name under it.
NAME_LABEL = "kubernetes.io/metadata.name"


def _with_name_label(obj: Object) -> None:
    meta = obj.setdefault("metadata", {})
    labels = meta.get("labels")
    if not isinstance(labels, dict):
        labels = meta["labels"] = {}
    labels[NAME_LABEL] = meta.get("name", "")


class NamespaceVersion(BuiltinVersion):
    """Namespaces read from storage without the name label (written before it existed) get it,
    on a copy, as kube's defaulting gives it on every decode."""

    identity = False
    labels_on_read = True  # a label selector on the name label matches such a namespace too

    def from_storage(self, obj: Object) -> Object:
        meta = obj.get("metadata") or {}
        if (meta.get("labels") or {}).get(NAME_LABEL) == meta.get("name"):
            return obj
        out = {**obj, "metadata": {**meta, "labels": dict(meta.get("labels") or {})}}
        _with_name_label(out)
        return out


class NamespaceStrategy(Strategy):
    name_is_label = True
    has_status = True
    selectable_fields = ("status.phase",)

    def prepare_for_create(self, obj: Object) -> None:
        _with_name_label(obj)  # the name is known: a generated one was chosen already
        obj["status"] = {"phase": "Active"}
        spec = obj.setdefault("spec", {})
        finalizers = spec.get("finalizers") or []
        if FINALIZER not in finalizers:
            spec["finalizers"] = [*finalizers, FINALIZER]

    def prepare_for_update(self, new: Object, old: Object) -> None:
        _with_name_label(new)  # neither removed nor changed by an update
        # spec.finalizers change only through the finalize subresource
        new["spec"] = copy_object(old.get("spec", {}))

    def field_set(self, obj: Object) -> dict[str, str]:
        return {"status.phase": (obj.get("status") or {}).get("phase", "")}

    def pending_finalizers(self, obj: Object) -> list[str]:
        return super().pending_finalizers(obj) + list(
            (obj.get("spec") or {}).get("finalizers") or [])

    def begin_deletion(self, obj: Object) -> None:
        obj.setdefault("status", {})["phase"] = "Terminating"

    def validate_delete(self, obj: Object) -> None:
        forbid_immortal(obj.get("metadata", {}).get("name", ""))

    def subresource_update(self, subresource: str, new: Object, old: Object) -> Object:
        if subresource != "finalize":
            return super().subresource_update(subresource, new, old)
        result = copy_object(old)
        result.setdefault("spec", {})["finalizers"] = (new.get("spec") or {}).get(
            "finalizers") or []
        return result


NAMESPACES = ResourceDef(
    group="", version="v1", kind="Namespace", plural="namespaces", singular="namespace",
    namespaced=False, strategy=NamespaceStrategy(), short_names=("ns",),
    columns=(NAME, Column("Status", "string", "The phase of the namespace.",
                          lambda o: (o.get("status") or {}).get("phase", "")), AGE),
    schema="io.k8s.api.core.v1.Namespace", subresources=("status", "finalize"),
)


def namespace_lifecycle(namespaces: Lister, resource: str, group: str = "") -> Admission:
    """The admission check (a store admission hook) for creating ``resource`` objects in a
    namespace: the namespace must exist (404) and not be terminating (403 naming the object,
    as kube's NamespaceLifecycle plugin does). Updates pass: the object is already there.
    Namespaces are read as kube's plugin reads its informer (a miss is read from the store,
    since the namespace may have been created a moment ago), so the check is made before
    any store."""

    async def check(new: Object, old: Object | None, options: WriteOptions) -> None:
        if old is not None:
            return
        meta = new.get("metadata", {})
        namespace = meta.get("namespace", "")
        try:
            ns = await namespaces.read("", namespace)
        except KeyNotFoundError:
            raise status.not_found("namespaces", namespace) from None
        except StorageError as err:
            raise from_storage_error(err, "namespaces", namespace) from None
        if ns.get("status", {}).get("phase") == "Terminating":
            name = meta.get("name") or meta.get("generateName") or "Unknown"
            raise status.StatusError(
                403, "Forbidden",
                f"{status.qualified(resource, group)} {go_quote(name)} is forbidden: unable "
                f"to create new content in namespace {namespace} because it is being "
                "terminated",
                name=name, kind=resource, group=group,
                causes=[status.Cause("NamespaceTerminating",
                                     f"namespace {namespace} is being terminated",
                                     "metadata.namespace")],
            )

    return check


def lifecycle_admission(namespaces: Lister) -> Callable[[ResourceDef], list[Admission]]:
    """NamespaceLifecycle for every store of a namespaced resource (StoreOptions'
    ``create_admission``): built-in, custom resources, whenever they are built."""

    def admission(resource: ResourceDef) -> list[Admission]:
        if not resource.namespaced:
            return []
        return [namespace_lifecycle(namespaces, resource.plural, resource.group)]

    return admission


def forbid_immortal(name: str) -> None:
    if name in IMMORTAL_NAMESPACES:
        raise status.StatusError(
            403, "Forbidden",
            f'namespaces "{name}" is forbidden: this namespace may not be deleted',
            name=name, kind="namespaces")
