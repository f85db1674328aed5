"""Empties a terminating namespace, then lets it go (kube's namespace controller and its
namespaced-resources deleter).

Deleting a namespace sets its deletionTimestamp and phase Terminating (its spec.finalizers
hold "kubernetes"). Each pass of this loop deletes every object in it, counts what is left
(objects held by finalizers of their own), and writes what it found as the namespace's
``status.conditions`` in kube's words, so ``kubectl get ns -o yaml`` tells why a namespace is
stuck. Once nothing is left it removes the "kubernetes" finalizer through the finalize
subresource, after which the store removes the namespace.

Only the gateway's own resources (built-in and custom) are emptied: objects of remote
APIServices are not, so discovery never fails and the discovery and group-version conditions
always read False.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import structlog

from gateway.apimachinery import status
from gateway.apimachinery.clock import now_rfc3339
from gateway.apimachinery.listoptions import ListOptions
from gateway.apimachinery.user import service_account_user
from gateway.apis.core.namespaces import FINALIZER
from gateway.registry.store import DeleteOptions, RESTStore, WriteOptions
from gateway.storage.errors import StorageError
from gateway.storage.interface import EventType, Object

log = structlog.get_logger(__name__)
#: kube-controller-manager's field manager (its user agent's name), as managedFields show it.
MANAGER = "kube-controller-manager"
#: Who the deletions are from (admission webhooks see it): kube's controller credentials.
USER = service_account_user("kube-system", "namespace-controller")

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

    @property
    def done(self) -> bool:
        return not self.remaining and not self.errors


def wanted_conditions(totals: ContentTotals) -> dict[str, tuple[str, str, str]]:
    """(status, reason, message) of each condition type after a pass, as kube words them:
    lists sorted, for stable updates."""
    wanted = {kind: ("False", reason, message)
              for kind, (reason, message) in CONDITION_TYPES.items()}
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
                 contents: Callable[[], Iterable[RESTStore]]) -> None:
        self.namespaces = namespaces
        #: The stores of namespaced resources, asked anew each time (CRDs come and go).
        self.contents = contents
        self._working: dict[str, asyncio.Task[None]] = {}

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
        task.add_done_callback(lambda _: self._working.pop(name, None))

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
            return False
        if FINALIZER in spec_finalizers:
            await self._finalize(name)
            log.info("namespace emptied and finalized", namespace=name)
        return True

    async def delete_content(self, name: str) -> ContentTotals:
        """Delete every object in the namespace; count what stays, by resource and by
        finalizer. An object that stays with no finalizer is an error, as in kube."""
        totals = ContentTotals()
        write = WriteOptions(manager=MANAGER, user=USER)
        for store in self.contents():
            resource = store.resource
            try:
                await store.delete_collection(name, ListOptions(),
                                              DeleteOptions(propagation_policy="Background"),
                                              write)
                left = (await store.list(name, ListOptions())).items
            except (StorageError, status.StatusError) as err:
                if isinstance(err, status.StatusError) and err.code in (404, 405):
                    continue  # the resource went meanwhile (a CRD being removed)
                totals.errors.append(_error_text(err))
                continue
            if not left:
                continue
            totals.remaining[f"{resource.plural}.{resource.group}"] = len(left)
            held = 0
            for obj in left:
                finalizers = (obj.get("metadata") or {}).get("finalizers") or []
                held += bool(finalizers)
                for finalizer in finalizers:
                    totals.finalizers[finalizer] = totals.finalizers.get(finalizer, 0) + 1
            if not held:
                totals.errors.append(
                    f"unexpected items still remain in namespace: {name} for gvr: "
                    f"{resource.group}/{resource.version}, Resource={resource.plural}")
        return totals

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
