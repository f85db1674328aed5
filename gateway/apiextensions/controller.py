"""The apiextensions server's controllers, in one loop over the CRDs (kube runs them as
separate controllers on one informer; their effects and order are the same):

- naming: ``status.acceptedNames`` and the NamesAccepted condition (True/NoConflicts, or False
  with PluralConflict, SingularConflict, ShortNamesConflict, KindConflict, ListKindConflict
  when another CRD of the group, or a built-in resource, holds the name);
- establishing: Established True (InitialNamesAccepted) once the names are accepted;
- serving: each served version of an Established CRD installed in the apiextensions server
  (one store per CRD over one watch cache, one version layer per served version), versions no
  longer served removed, and all of them when the CRD goes;
- finalizing: a CRD being deleted gets Terminating (InstanceDeletionInProgress), every
  instance is deleted, then the cleanup finalizer is removed and the CRD leaves storage.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from gateway.apiextensions.conversion import ConversionError, Converter
from gateway.apiextensions.crds import (
    CLEANUP_FINALIZER,
    condition_true,
    set_condition,
)
from gateway.apiextensions.customresource import (
    CustomResourceVersion,
    ServedVersion,
    resource_of,
    served_versions,
)
from gateway.apiextensions.scale import ScaleEndpoints
from gateway.apimachinery import status
from gateway.apimachinery.gowords import go_quote
from gateway.apimachinery.listoptions import ListOptions
from gateway.endpoints.handlers import ResourceEndpoints, SubresourceFactory
from gateway.registry.follow import follow
from gateway.registry.options import StoreOptions
from gateway.registry.resource import ResourceDef
from gateway.registry.store import Admission, DeleteOptions, RESTStore, WriteOptions
from gateway.storage.errors import KeyNotFoundError
from gateway.storage.interface import EventType, WatchEvent

log = structlog.get_logger(__name__)
MANAGER = "apiextensions-controller"
#: Serving a resource by its endpoints, and no longer serving it.
Install = Callable[[ResourceDef, ResourceEndpoints], None]
Uninstall = Callable[[ResourceDef], None]
#: The endpoints of a store, with subresources served by handlers of their own.
Endpoints = Callable[[RESTStore, Mapping[str, SubresourceFactory]], ResourceEndpoints]


@dataclass
class _Served:
    """What is installed for one CRD."""

    prefix: str
    versions: dict[str, tuple[ServedVersion, ResourceDef, RESTStore]] = field(
        default_factory=dict)


class CRDController:
    def __init__(self, crds: RESTStore, options: StoreOptions, install: Install,
                 uninstall: Uninstall, *, endpoints: Endpoints,
                 converters: Callable[[dict[str, Any]], Converter],
                 builtin_names: Callable[[str], Iterable[ResourceDef]]) -> None:
        self.crds = crds
        #: Every custom resource store is built with these (its cache and its admission).
        self.options = options
        self.install = install
        self.endpoints = endpoints
        self.converters = converters
        self.uninstall = uninstall
        self.builtin_names = builtin_names
        self.served: dict[str, _Served] = {}
        self._finalizing: dict[str, asyncio.Task[None]] = {}
        self._lock = asyncio.Lock()

    async def sync_existing(self) -> None:
        """Serve the CRDs there are now (kube's crd-informer-synced: custom resources are
        served before the server says it is ready)."""
        for crd in list(self.crds.cacher.objects(self.crds.resource.storage_prefix)):
            async with self._lock:
                try:
                    await self._sync(crd)
                except (status.StatusError, KeyError, TypeError, ValueError) as err:
                    log.warning("CRD not synced", crd=crd["metadata"].get("name"),
                                error=str(err))

    async def run(self) -> None:
        await follow(self.crds, self._on_event, initial=True, who="CRD controller")

    def namespaced_stores(self) -> list[RESTStore]:
        """A store per namespaced CRD (any served version: they share the stored objects),
        for the namespace controller."""
        out = []
        for served in self.served.values():
            if served.versions:
                _, resource, store = next(iter(served.versions.values()))
                if resource.namespaced:
                    out.append(store)
        return out

    async def _on_event(self, event: WatchEvent) -> None:
        crd = event.object
        if crd is None:
            return
        name = crd["metadata"]["name"]
        async with self._lock:
            if event.type == EventType.DELETED:
                self._stop_serving(name)
                return
            try:
                await self._sync(crd)
            except (status.StatusError, KeyError, TypeError, ValueError) as err:
                log.warning("CRD not synced", crd=name, error=str(err))

    async def _sync(self, crd: dict[str, Any]) -> None:
        name = crd["metadata"]["name"]
        if crd["metadata"].get("deletionTimestamp"):
            self._serve(crd)  # instances stay readable and deletable while they go
            self._start_finalizing(name)
            return
        names, accepted, established = self._naming(crd)
        current = crd.get("status", {})
        if names != current.get("acceptedNames") or accepted or established:
            await self._write_status(name, names, accepted, established)
            return  # the change comes back as an event
        if condition_true(crd, "Established"):
            self._serve(crd)

    # -- naming and establishing --------------------------------------------------------------

    def _naming(self, crd: dict[str, Any]
                ) -> tuple[dict[str, Any], tuple[str, str, str] | None, bool]:
        """(the accepted names, the NamesAccepted condition to write or None when unchanged,
        whether Established is to be set)."""
        spec = crd["spec"]
        requested = spec.get("names", {})
        accepted = dict(crd.get("status", {}).get("acceptedNames") or {})
        resources, kinds = self._names_in_use(crd)
        new = dict(accepted)
        problem: tuple[str, str] | None = None

        def claim(key: str, pool: set[str], reason: str) -> None:
            nonlocal problem  # as kube's, the last conflict found names the condition
            wanted, held = requested.get(key, ""), accepted.get(key, "")
            if wanted == held or wanted not in pool:
                new[key] = wanted
            else:
                problem = (reason, f'"{wanted}" is already in use')

        claim("plural", resources, "PluralConflict")
        claim("singular", resources, "SingularConflict")
        short = list(requested.get("shortNames") or [])
        held_short = set(accepted.get("shortNames") or [])
        clashes = [f'"{s}" is already in use' for s in short
                   if s not in held_short and s in resources]
        if clashes:
            problem = ("ShortNamesConflict", clashes[0] if len(clashes) == 1
                       else "[" + ", ".join(clashes) + "]")
        else:
            if short:
                new["shortNames"] = short
            else:
                new.pop("shortNames", None)
        claim("kind", kinds, "KindConflict")
        claim("listKind", kinds, "ListKindConflict")
        if requested.get("categories"):
            new["categories"] = list(requested["categories"])
        else:
            new.pop("categories", None)
        condition = ("False", *problem) if problem else ("True", "NoConflicts",
                                                         "no conflicts found")
        wanted = _condition_state(crd, "NamesAccepted") != condition
        establish = condition[0] == "True" and not condition_true(crd, "Established")
        return new, (condition if wanted else None), establish

    def _names_in_use(self, crd: dict[str, Any]) -> tuple[set[str], set[str]]:
        """Resource names and kinds held by other CRDs of the group and built-in resources."""
        group, name = crd["spec"]["group"], crd["metadata"]["name"]
        resources: set[str] = set()
        kinds: set[str] = set()
        for other in self.crds.cacher.objects(self.crds.resource.storage_prefix):
            if other["metadata"]["name"] == name or other.get("spec", {}).get("group") != group:
                continue
            held = other.get("status", {}).get("acceptedNames") or {}
            resources |= {held.get("plural", ""), held.get("singular", ""),
                          *(held.get("shortNames") or [])}
            kinds |= {held.get("kind", ""), held.get("listKind", "")}
        for builtin in self.builtin_names(group):
            resources |= {builtin.plural, builtin.singular, *builtin.short_names}
            kinds |= {builtin.kind, builtin.list_kind}
        resources.discard("")
        kinds.discard("")
        return resources, kinds

    async def _write_status(self, name: str, names: dict[str, Any],
                            accepted: tuple[str, str, str] | None, establish: bool) -> None:
        def update(current: dict[str, Any] | None) -> dict[str, Any]:
            assert current is not None
            current.setdefault("status", {})["acceptedNames"] = names
            if accepted is not None:
                set_condition(current, "NamesAccepted", *accepted)
            if establish:
                set_condition(current, "Established", "True", "InitialNamesAccepted",
                              "the initial names have been accepted")
            elif accepted is not None and accepted[0] != "True" and \
                    not condition_true(current, "Established"):
                set_condition(current, "Established", "False", "NotAccepted",
                              "not all names are accepted")
            return current

        try:
            await self.crds.patch("", name, update,
                                  WriteOptions(manager=MANAGER, subresource="status"))
        except status.StatusError as err:
            if err.code != 404:
                raise

    # -- serving ------------------------------------------------------------------------------

    def _serve(self, crd: dict[str, Any]) -> None:
        """Install every served version as the CRD says now; remove the others."""
        name = crd["metadata"]["name"]
        wanted = {v.version: v for v in served_versions(crd)}
        if not wanted:
            self._stop_serving(name)
            return
        any_version = next(iter(wanted.values()))
        prefix = f"/{any_version.group}/{any_version.plural}/"
        served = self.served.get(name)
        if served is not None and served.prefix != prefix:
            self._stop_serving(name)
            served = None
        if served is None:
            served = self.served[name] = _Served(prefix)
        converter = self._converter(crd)
        for version, (old, resource, _) in list(served.versions.items()):
            if version not in wanted or wanted[version] != old:
                del served.versions[version]
                if version not in wanted:
                    self.uninstall(resource)
        for version, entry in wanted.items():
            if version in served.versions:
                continue
            resource = resource_of(entry)
            layer = CustomResourceVersion(resource, entry, converter,
                                          siblings=served.versions.keys)
            store = self.options.new_store(resource, layer, create_admission=[
                _refuse_while_terminating(self.crds, name, resource)])
            served.versions[version] = (entry, resource, store)
            scale = entry.scale
            subresources: dict[str, SubresourceFactory] = {}
            if scale is not None:
                subresources["scale"] = _scale_endpoints(scale)
            self.install(resource, self.endpoints(store, subresources))

    def _converter(self, crd: dict[str, Any]) -> Converter:
        """The CRD's converter; one that cannot be built fails every conversion with why
        (kube serves the CRD's resources with errors then)."""
        try:
            return self.converters(crd)
        except ConversionError as err:
            return _Unconvertible(err)

    def _stop_serving(self, name: str) -> None:
        served = self.served.pop(name, None)
        if served is None:
            return
        for _, resource, _ in served.versions.values():
            self.uninstall(resource)
        if not any(s.prefix == served.prefix for s in self.served.values()):
            asyncio.get_running_loop().create_task(
                self.options.factory.release(served.prefix))

    # -- finalizing ---------------------------------------------------------------------------

    def _start_finalizing(self, name: str) -> None:
        if name in self._finalizing:
            return
        task = asyncio.get_running_loop().create_task(self._finalize(name))
        self._finalizing[name] = task
        task.add_done_callback(lambda _: self._finalizing.pop(name, None))

    async def _finalize(self, name: str) -> None:
        delay = 0.2
        while True:
            try:
                crd = await self.crds.get("", name)
                if CLEANUP_FINALIZER not in (crd["metadata"].get("finalizers") or []):
                    return
                await self._terminating(name, "True", "InstanceDeletionInProgress",
                                        "CustomResource deletion is in progress")
                if await self._delete_instances(name):
                    await self._terminating(name, "False", "InstanceDeletionCompleted",
                                            "removed all instances")
                    await self._remove_finalizer(name)
                    log.info("CRD instances deleted and finalizer removed", crd=name)
                    return
            except status.StatusError as err:
                if err.code == 404:
                    return
                log.warning("CRD clean-up failed; retrying", crd=name, error=str(err))
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5)

    async def _delete_instances(self, name: str) -> bool:
        """Delete every instance; True once none is left."""
        served = self.served.get(name)
        if served is None or not served.versions:
            return True
        store = next(iter(served.versions.values()))[2]
        listed = await store.list("", ListOptions())
        for obj in listed.items:
            meta = obj["metadata"]
            try:
                await store.delete(meta.get("namespace", ""), meta["name"], DeleteOptions(),
                                   WriteOptions(manager=MANAGER))
            except status.StatusError as err:
                if err.code != 404:
                    raise
        return not (await store.list("", ListOptions())).items

    async def _terminating(self, name: str, value: str, reason: str, message: str) -> None:
        def update(current: dict[str, Any] | None) -> dict[str, Any]:
            assert current is not None
            set_condition(current, "Terminating", value, reason, message)
            return current

        await self.crds.patch("", name, update,
                              WriteOptions(manager=MANAGER, subresource="status"))

    async def _remove_finalizer(self, name: str) -> None:
        def update(current: dict[str, Any] | None) -> dict[str, Any]:
            assert current is not None
            meta = current["metadata"]
            meta["finalizers"] = [f for f in meta.get("finalizers") or []
                                  if f != CLEANUP_FINALIZER]
            return current

        await self.crds.patch("", name, update, WriteOptions(manager=MANAGER))


class _Unconvertible(Converter):
    def __init__(self, err: ConversionError) -> None:
        self.err = err

    async def convert(self, objects: list[dict[str, Any]],
                      to_api_version: str) -> list[dict[str, Any]]:
        if all(o.get("apiVersion") == to_api_version for o in objects):
            return objects
        raise self.err


def _scale_endpoints(paths: dict[str, Any]) -> SubresourceFactory:
    def make(endpoints: ResourceEndpoints) -> ScaleEndpoints:
        return ScaleEndpoints(endpoints, paths)

    return make


def _condition_state(crd: dict[str, Any], type_: str) -> tuple[str, str, str] | None:
    for condition in crd.get("status", {}).get("conditions") or []:
        if condition.get("type") == type_:
            return (condition.get("status", ""), condition.get("reason", ""),
                    condition.get("message", ""))
    return None


def _refuse_while_terminating(crds: RESTStore, name: str, resource: ResourceDef) -> Admission:
    """No new instances of a CRD that is being deleted: 403 naming the object, as
    kube-apiserver answers."""
    key = crds.resource.key("", name)

    async def check(new: dict, old: dict | None, options: WriteOptions) -> None:
        try:
            crd = await crds.cacher.get_cached(key)
        except KeyNotFoundError:
            return
        if not condition_true(crd, "Terminating"):
            return
        meta = new.get("metadata", {})
        who = meta.get("name") or meta.get("generateName") or ""
        raise status.StatusError(
            403, "Forbidden",
            f"{status.qualified(resource.plural, resource.group)} {go_quote(who)} is "
            "forbidden: create not allowed while custom resource definition is terminating",
            name=who, kind=resource.plural, group=resource.group)

    return check
