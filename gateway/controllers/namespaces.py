"""Empties a terminating namespace, then lets it go (kube's namespace controller and its
namespaced-resources deleter).

Deleting a namespace sets its deletionTimestamp and phase Terminating (its spec.finalizers
hold "kubernetes"). Each pass of this loop does what kube's deleteAllContent does:

1. discovery: every namespaced resource with the ``delete`` verb, the gateway's own stores and
   the resources of remote APIServices (``gateway.controllers.namespacecontent``); a remote
   group version whose discovery is stale is a discovery failure, and its resources are left
   for a later pass;
2. for each resource: ``deletecollection`` when discovery lists it (a 404 or 405 answer
   falls back), else a list and a delete of each object; deletes ask for background
   propagation; then a list of what is left. Objects left with finalizers count, by
   resource and by finalizer, and make an estimate (15 s, kube's guess for finalizers);
   objects left without any are an error; a failed call is an error of that resource;
3. the namespace's ``status.conditions`` get what the pass found, in kube's words, so
   ``kubectl get ns -o yaml`` tells why a namespace is stuck;
4. once nothing is left and nothing failed, the "kubernetes" finalizer is removed through
   the finalize subresource, after which the store removes the namespace.

A namespace with content left is tried again, sooner than kube does it (0.2 s doubling to
5 s, where kube waits half the estimate plus a second, or backs off up to 1000 s after
errors), so it goes within seconds of its last finalizer or of its backend's return.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import structlog

from gateway.apimachinery import status
from gateway.apimachinery.clock import now_rfc3339
from gateway.apis.core.namespaces import FINALIZER
from gateway.controllers.namespacecontent import (
    MANAGER,
    USER,
    Discover,
    Discovered,
    NamespacedResource,
    is_method_not_supported,
    is_not_found,
    local_resources,
)
from gateway.registry.store import RESTStore, WriteOptions
from gateway.storage.errors import StorageError
from gateway.storage.interface import EventType, Object

log = structlog.get_logger(__name__)
#: kube's guess, in seconds, of how long finalizers of objects left in a namespace take.
FINALIZER_ESTIMATE_SECONDS = 15

DISCOVERY_FAILURE = "NamespaceDeletionDiscoveryFailure"
GROUP_VERSION_PARSING_FAILURE = "NamespaceDeletionGroupVersionParsingFailure"
CONTENT_FAILURE = "NamespaceDeletionContentFailure"
CONTENT_REMAINING = "NamespaceContentRemaining"
FINALIZERS_REMAINING = "NamespaceFinalizersRemaining"
#: The condition types the deleter keeps, in the order kube adds them; with the reason and
#: message each has while nothing is wrong (status False).
CONDITION_TYPES: dict[str, tuple[str, str]] = {
    DISCOVERY_FAILURE: ("ResourcesDiscovered", "All resources successfully discovered"),
    GROUP_VERSION_PARSING_FAILURE: ("ParsedGroupVersions",
                                    "All legacy kube types successfully parsed"),
    CONTENT_FAILURE: ("ContentDeleted",
                      "All content successfully deleted, may be waiting on finalization"),
    CONTENT_REMAINING: ("ContentRemoved", "All content successfully removed"),
    FINALIZERS_REMAINING: ("ContentHasNoFinalizers",
                           "All content-preserving finalizers finished"),
}


@dataclass
class ContentTotals:
    """What one pass over a namespace's content left behind."""

    #: "<resource>.<group>" (the core group's resources end in ".") -> objects left
    remaining: dict[str, int] = field(default_factory=dict)
    #: finalizer -> objects it holds, over every resource
    finalizers: dict[str, int] = field(default_factory=dict)
    #: why deleting some resource's objects failed
    errors: list[str] = field(default_factory=list)
    #: "<group>/<version>" -> why its discovery failed (its resources were not tried)
    discovery_failures: dict[str, str] = field(default_factory=dict)
    #: seconds the content left may take to go (kube's estimate: finalizers' guess)
    estimate: int = 0

    @property
    def done(self) -> bool:
        return not self.remaining and not self.errors and not self.discovery_failures


def wanted_conditions(totals: ContentTotals) -> dict[str, tuple[str, str, str]]:
    """(status, reason, message) of each condition type after a pass, as kube words them:
    lists sorted, for stable updates."""
    wanted = {kind: ("False", reason, message)
              for kind, (reason, message) in CONDITION_TYPES.items()}
    if totals.discovery_failures:
        wanted[DISCOVERY_FAILURE] = (
            "True", "DiscoveryFailed",
            f"Discovery failed for some groups, {len(totals.discovery_failures)} failing: "
            + discovery_error(totals.discovery_failures))
    if totals.errors:
        wanted[CONTENT_FAILURE] = (
            "True", "ContentDeletionFailed",
            f"Failed to delete all resource types, {len(totals.errors)} remaining: "
            + ", ".join(sorted(totals.errors)))
    resources = sorted(f"{name} has {count} resource instances"
                       for name, count in totals.remaining.items() if count)
    if resources:
        wanted[CONTENT_REMAINING] = ("True", "SomeResourcesRemain",
                                     "Some resources are remaining: " + ", ".join(resources))
    finalizers = sorted(f"{name} in {count} resource instances"
                        for name, count in totals.finalizers.items() if count)
    if finalizers:
        wanted[FINALIZERS_REMAINING] = (
            "True", "SomeFinalizersRemain",
            "Some content in the namespace has finalizers remaining: " + ", ".join(finalizers))
    return wanted


def discovery_error(failed: dict[str, str]) -> str:
    """client-go's ErrGroupDiscoveryFailed: each failing group version and its error, sorted."""
    return "unable to retrieve the complete list of server APIs: " + ", ".join(
        sorted(f"{gv}: {why}" for gv, why in failed.items()))


def updated_conditions(current: list[dict], wanted: dict[str, tuple[str, str, str]],
                       now: str) -> list[dict] | None:
    """``current`` with every wanted condition in it, or None when nothing changes. A new type
    is appended; a changed one is updated in place, its lastTransitionTime moved only when its
    status changed; other types are kept as they are."""
    conditions = [dict(c) for c in current]
    changed = False
    for kind, (state, reason, message) in wanted.items():
        old = next((c for c in conditions if c.get("type") == kind), None)
        if old is None:
            conditions.append({"type": kind, "status": state, "lastTransitionTime": now,
                               "reason": reason, "message": message})
            changed = True
        elif (old.get("status"), old.get("reason"), old.get("message")) != (state, reason,
                                                                           message):
            if old.get("status") != state:
                old["lastTransitionTime"] = now
            old.update(status=state, reason=reason, message=message)
            changed = True
    return conditions if changed else None


def _error_text(err: Exception) -> str:
    return err.message if isinstance(err, status.StatusError) else str(err)


class NamespaceController:
    def __init__(self, namespaces: RESTStore,
                 contents: Callable[[], Iterable[RESTStore]],
                 remote: Discover | None = None) -> None:
        self.namespaces = namespaces
        #: The gateway's own namespaced stores, asked anew each pass (CRDs come and go).
        self.contents = contents
        #: The resources of remote APIServices and the failures of their discovery.
        self.remote = remote
        self._working: dict[str, asyncio.Task[None]] = {}
        #: namespace -> the failure its last pass logged (a stuck namespace logs once)
        self._failing: dict[str, str] = {}

    async def run(self) -> None:
        """Follow namespaces forever; start a clean-up for each one being deleted."""
        delay = 0.5
        while True:
            try:
                watch = await self.namespaces.cacher.watch_cached(
                    self.namespaces.resource.storage_prefix, revision=0, send_initial=True)
                async for event in watch:
                    if event.type in (EventType.ADDED, EventType.MODIFIED) and event.object:
                        self._maybe_clean(event.object)
                delay = 0.5
            except (StorageError, status.StatusError) as err:
                log.warning("namespace controller lost its watch", error=str(err))
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10)

    def _maybe_clean(self, namespace: Object) -> None:
        """A pass for a namespace being deleted that still has spec finalizers (kube's
        deleter works on any; it removes only its own)."""
        meta = namespace.get("metadata", {})
        name = meta.get("name", "")
        if not meta.get("deletionTimestamp") or name in self._working:
            return
        if not (namespace.get("spec") or {}).get("finalizers"):
            return
        task = asyncio.get_running_loop().create_task(self._clean(name))
        self._working[name] = task
        task.add_done_callback(lambda _: self._forget(name))

    def _forget(self, name: str) -> None:
        self._working.pop(name, None)
        self._failing.pop(name, None)

    async def _clean(self, name: str) -> None:
        """Passes until the namespace is empty and finalized (or gone)."""
        delay = 0.2
        while True:
            try:
                if await self.sync(name):
                    return
            except (StorageError, status.StatusError) as err:
                if getattr(err, "code", 0) == 404:
                    return
                log.warning("namespace clean-up failed; retrying", namespace=name,
                            error=str(err))
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5)

    async def sync(self, name: str) -> bool:
        """One pass: delete the content, record what is left in the conditions, finalize
        once nothing is. True when there is nothing more to do."""
        namespace = await self.namespaces.get("", name)
        spec_finalizers = (namespace.get("spec") or {}).get("finalizers") or []
        if not namespace["metadata"].get("deletionTimestamp") or not spec_finalizers:
            return True
        totals = await self.delete_content(name)
        await self._write_conditions(namespace, wanted_conditions(totals))
        if not totals.done:
            self._log_pass(name, totals)
            return False
        if FINALIZER in spec_finalizers:
            await self._finalize(name)
            log.info("namespace emptied and finalized", namespace=name)
        return True

    def _log_pass(self, name: str, totals: ContentTotals) -> None:
        """Why a pass did not finish: a failure at info level when it is new, else debug."""
        failure = "; ".join(filter(None, (
            discovery_error(totals.discovery_failures) if totals.discovery_failures else "",
            ", ".join(sorted(totals.errors)))))
        if failure and self._failing.get(name) != failure:
            self._failing[name] = failure
            log.info("deletion of a namespace failed; retrying", namespace=name, error=failure)
        elif not failure:
            self._failing.pop(name, None)
        log.debug(f"some content remains in the namespace, estimate {totals.estimate} seconds "
                  "before it is removed", namespace=name, failure=failure or None)

    def discover(self) -> Discovered:
        """What to empty this pass: the gateway's own stores, then remote APIServices'."""
        found = local_resources(list(self.contents()))
        if self.remote is not None:
            remote = self.remote()
            found.resources += remote.resources
            found.failed.update(remote.failed)
        return found

    async def delete_content(self, name: str) -> ContentTotals:
        """Delete every object in the namespace; count what stays, by resource and by
        finalizer (kube's deleteAllContent). Discovery failures are not fatal: the resources
        that were discovered are emptied all the same."""
        discovered = self.discover()
        totals = ContentTotals(discovery_failures=dict(discovered.failed))
        for resource in discovered.resources:
            await self._empty(resource, name, totals)
        return totals

    async def _empty(self, resource: NamespacedResource, namespace: str,
                     totals: ContentTotals) -> None:
        """One resource's objects (kube's deleteAllContentForGroupVersionResource): the
        collection deleted (or each object), then what is left counted."""
        try:
            if not await self._delete_collection(resource, namespace):
                await self._delete_each(resource, namespace)
            left = await self._list(resource, namespace)
        except (StorageError, status.StatusError) as err:
            totals.errors.append(_error_text(err))
            return
        if not left:
            return
        totals.remaining[f"{resource.plural}.{resource.group}"] = len(left)
        held = 0
        for obj in left:
            finalizers = (obj.get("metadata") or {}).get("finalizers") or []
            held += bool(finalizers)
            for finalizer in finalizers:
                totals.finalizers[finalizer] = totals.finalizers.get(finalizer, 0) + 1
        if held:
            totals.estimate = max(totals.estimate, FINALIZER_ESTIMATE_SECONDS)
        else:
            totals.errors.append(
                f"unexpected items still remain in namespace: {namespace} for gvr: "
                f"{resource.group}/{resource.version}, Resource={resource.plural}")

    @staticmethod
    async def _delete_collection(resource: NamespacedResource, namespace: str) -> bool:
        """Delete the collection; False when the resource does not support it (discovery
        does not list the verb, or the server answers 404 or 405)."""
        if "deletecollection" not in resource.verbs:
            return False
        try:
            await resource.delete_collection(namespace)
        except status.StatusError as err:
            if is_not_found(err) or is_method_not_supported(err):
                return False
            raise
        return True

    @staticmethod
    async def _list(resource: NamespacedResource, namespace: str) -> list[Object] | None:
        """The objects left, or None when the resource cannot be listed (as above)."""
        if "list" not in resource.verbs:
            return None
        try:
            return await resource.list(namespace)
        except status.StatusError as err:
            if is_not_found(err) or is_method_not_supported(err):
                return None
            raise

    async def _delete_each(self, resource: NamespacedResource, namespace: str) -> None:
        """List and delete one object at a time (objects already gone, or a resource that
        does not take deletes, are passed over)."""
        for obj in await self._list(resource, namespace) or []:
            try:
                await resource.delete(namespace, (obj.get("metadata") or {}).get("name", ""))
            except status.StatusError as err:
                if not (is_not_found(err) or is_method_not_supported(err)):
                    raise

    async def _write_conditions(self, namespace: Object,
                                wanted: dict[str, tuple[str, str, str]]) -> None:
        """Write the conditions through the status subresource, only when they change."""
        current = (namespace.get("status") or {}).get("conditions") or []
        if updated_conditions(current, wanted, now_rfc3339()) is None:
            return

        def update(obj: Object | None) -> Object:
            if obj is None:
                raise status.not_found("namespaces", namespace["metadata"]["name"])
            new = copy.deepcopy(obj)
            new_status = new.setdefault("status", {})
            conditions = updated_conditions(new_status.get("conditions") or [], wanted,
                                            now_rfc3339())
            if conditions is not None:
                new_status["conditions"] = conditions
            return new

        await self.namespaces.patch("", namespace["metadata"]["name"], update,
                                    WriteOptions(manager=MANAGER, subresource="status",
                                                 user=USER))

    async def _finalize(self, name: str) -> None:
        def drop_finalizer(current: Object | None) -> Object:
            if current is None:
                raise status.not_found("namespaces", name)
            spec = current.setdefault("spec", {})
            # the others stay, sorted and without duplicates, as kube's finalize sends them
            spec["finalizers"] = sorted({f for f in spec.get("finalizers") or []
                                         if f != FINALIZER})
            return current

        await self.namespaces.patch("", name, drop_finalizer, WriteOptions(
            manager=MANAGER, subresource="finalize", user=USER))

    async def close(self) -> None:
        for task in list(self._working.values()):
            task.cancel()
