"""Keeps a ``default`` ServiceAccount in every active namespace (kube-controller-manager's
serviceaccount controller), so pods and ``kubectl create token default`` find one.

A namespace is synced when it is added or updated, and when a ServiceAccount it should hold is
deleted. A namespace that is not Active (Terminating) gets nothing; a create refused because
the namespace began terminating meanwhile, or because the account exists already, is fine.
"""

from __future__ import annotations

import asyncio

import structlog

from gateway.apimachinery import status
from gateway.apimachinery.user import service_account_user
from gateway.controllers.workqueue import WorkQueue, run_workers
from gateway.registry.follow import follow
from gateway.registry.store import RESTStore, WriteOptions
from gateway.storage.errors import KeyNotFoundError
from gateway.storage.interface import EventType, WatchEvent

log = structlog.get_logger(__name__)
MANAGER = "kube-controller-manager"
USER = service_account_user("kube-system", "service-account-controller")
#: The accounts every namespace holds (kube ensures just "default").
ACCOUNTS = ("default",)
#: The StatusCause type of a create refused in a terminating namespace.
NAMESPACE_TERMINATING = "NamespaceTerminating"
WORKERS = 1


def namespace_terminating(err: status.StatusError) -> bool:
    """The refusal of NamespaceLifecycle admission for a terminating namespace."""
    return any(cause.reason == NAMESPACE_TERMINATING for cause in err.causes)


class ServiceAccountsController:
    def __init__(self, namespaces: RESTStore, serviceaccounts: RESTStore,
                 accounts: tuple[str, ...] = ACCOUNTS) -> None:
        self.namespaces = namespaces
        self.serviceaccounts = serviceaccounts
        self.accounts = accounts
        self.queue = WorkQueue()

    async def run(self) -> None:
        """Follow namespaces and service accounts; sync the namespaces they name, forever."""
        await asyncio.gather(
            follow(self.namespaces, self._namespace_event, initial=True,
                   who="serviceaccount controller"),
            follow(self.serviceaccounts, self._account_event, who="serviceaccount controller"),
            run_workers(self.queue, self.sync, workers=WORKERS,
                        who="serviceaccount controller"))

    async def _namespace_event(self, event: WatchEvent) -> None:
        if event.type in (EventType.ADDED, EventType.MODIFIED) and event.object:
            self.queue.add(event.object["metadata"]["name"])

    async def _account_event(self, event: WatchEvent) -> None:
        meta = (event.object or {}).get("metadata") or {}
        if event.type == EventType.DELETED and meta.get("name") in self.accounts:
            self.queue.add(meta.get("namespace", ""))

    async def sync(self, name: str) -> None:
        """Create whichever wanted account the namespace lacks, if it is active."""
        try:
            namespace = await self.namespaces.cacher.get_cached(
                self.namespaces.resource.key("", name))
        except KeyNotFoundError:
            return
        if (namespace.get("status") or {}).get("phase") != "Active":
            return
        for account in self.accounts:
            try:
                await self.serviceaccounts.cacher.get_cached(
                    self.serviceaccounts.resource.key(name, account))
                continue
            except KeyNotFoundError:
                pass
            obj = {"apiVersion": "v1", "kind": "ServiceAccount",
                   "metadata": {"name": account, "namespace": name}}
            try:
                await self.serviceaccounts.create(name, obj, WriteOptions(manager=MANAGER,
                                                                          user=USER))
                log.debug("created service account", namespace=name, name=account)
            except status.StatusError as err:
                if err.code != 409 and not namespace_terminating(err):
                    raise
