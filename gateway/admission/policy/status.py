"""The ValidatingAdmissionPolicy status controller (kube-controller-manager's
validatingadmissionpolicy-status-controller): for every policy whose generation is newer than
its ``status.observedGeneration``, type-check it and write ``status.observedGeneration`` and
``status.typeChecking`` (``expressionWarnings`` when there are any) through the status
subresource, with kube's field manager. Other status fields (conditions) are left alone.
"""

from __future__ import annotations

import asyncio

import structlog

from gateway.admission.policy.typechecking import TypeChecker
from gateway.apimachinery import status
from gateway.apimachinery.objects import copy_object
from gateway.registry.admission import Object
from gateway.registry.follow import follow
from gateway.registry.store import RESTStore, WriteOptions
from gateway.storage.errors import StorageError

log = structlog.get_logger(__name__)

MANAGER = "validatingadmissionpolicy-status-controller"


class PolicyStatusController:
    def __init__(self, policies: RESTStore, checker: TypeChecker) -> None:
        self.policies = policies
        self.checker = checker
        self._dirty = asyncio.Event()

    async def run(self) -> None:
        worker = asyncio.ensure_future(self._work())
        try:
            await follow(self.policies, self._changed, initial=True,
                         who="ValidatingAdmissionPolicy status controller")
        finally:
            worker.cancel()

    async def _changed(self, event: object) -> None:
        self._dirty.set()

    async def _work(self) -> None:
        while True:
            await self._dirty.wait()
            await asyncio.sleep(0.05)  # one pass for a burst of changes
            self._dirty.clear()
            try:
                await self.sync()
            except (StorageError, status.StatusError) as err:
                log.warning("writing ValidatingAdmissionPolicy status failed; retrying",
                            error=str(err))
                self._dirty.set()
                await asyncio.sleep(1)

    async def sync(self) -> None:
        """Reconcile every policy whose spec changed since its status was written."""
        for policy in list(self.policies.cacher.objects(self.policies.resource.storage_prefix)):
            meta = policy.get("metadata") or {}
            observed = (policy.get("status") or {}).get("observedGeneration") or 0
            if int(meta.get("generation") or 0) > int(observed):
                await self._reconcile(meta["name"])

    async def _reconcile(self, name: str) -> None:
        def update(current: Object | None) -> Object:
            assert current is not None
            new = copy_object(current)
            checking: Object = {}
            warnings = self.checker.check(current)
            if warnings:
                checking["expressionWarnings"] = warnings
            new["status"] = {**(new.get("status") or {}),
                             "observedGeneration": current["metadata"].get("generation", 1),
                             "typeChecking": checking}
            return new

        try:
            await self.policies.patch("", name, update, WriteOptions(manager=MANAGER,
                                                                     subresource="status"))
        except status.StatusError as err:
            if err.code != 404:  # deleted meanwhile
                raise
