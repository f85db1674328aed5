"""What the namespace controller empties: every namespaced resource that discovery lists with
the ``delete`` verb (kube's ServerPreferredNamespacedResources, filtered), each behind one small
interface whether the gateway stores it or a remote APIService's backend does.

The controller asks anew on every pass (CRDs and APIServices come and go). The gateway's own
resources are its stores, wrapped here; the resources of remote APIServices, and the group
versions whose discovery failed, come from the aggregator (gateway.aggregator.namespaced),
given to the controller where the gateway is assembled.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Protocol

from gateway.apimachinery import status
from gateway.apimachinery.listoptions import ListOptions
from gateway.apimachinery.user import UserInfo, service_account_user
from gateway.registry.store import DeleteOptions, RESTStore, WriteOptions
from gateway.storage.interface import Object

#: kube-controller-manager's field manager (its user agent's name), as managedFields show it.
MANAGER = "kube-controller-manager"
#: Who the deletions are from (admission webhooks and backends see it): kube's controller
#: credentials (kube-controller-manager runs each controller with its own service account).
USER: UserInfo = service_account_user("kube-system", "namespace-controller")
#: The namespace controller does not want the garbage collector's orphan finalizer on what it
#: deletes: every delete it sends asks for background propagation.
PROPAGATION = "Background"


class NamespacedResource(Protocol):
    """One namespaced resource (a group version's plural) whose objects the controller
    deletes. Each call raises ``status.StatusError`` (a local store may also raise a
    StorageError) with the code, reason and message a client would get."""

    @property
    def group(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def plural(self) -> str: ...

    @property
    def verbs(self) -> Collection[str]: ...

    async def delete_collection(self, namespace: str) -> None:
        """Delete every object in ``namespace`` (those with finalizers start deleting)."""
        ...

    async def list(self, namespace: str) -> list[Object]:
        """The objects in ``namespace`` (their metadata is all that is read)."""
        ...

    async def delete(self, namespace: str, name: str) -> None: ...


@dataclass
class Discovered:
    """The namespaced resources to empty, and the group versions whose discovery failed
    ("<group>/<version>" -> why, in client-go's words), whose resources are not among them."""

    resources: list[NamespacedResource] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


#: Gives what to empty, asked once per pass.
Discover = Callable[[], Discovered]


def is_not_found(err: Exception) -> bool:
    """client-go's IsNotFound: the reason says so, or a reasonless answer has code 404."""
    return _is(err, "NotFound", 404)


def is_method_not_supported(err: Exception) -> bool:
    """client-go's IsMethodNotSupported (405)."""
    return _is(err, "MethodNotAllowed", 405)


def _is(err: Exception, reason: str, code: int) -> bool:
    if not isinstance(err, status.StatusError):
        return False
    return err.reason == reason or (not err.reason and err.code == code)


class LocalResource:
    """A store of the gateway's own (built-in or custom resource) as the controller sees it:
    its writes go through the store with admission, as the controller's user."""

    def __init__(self, store: RESTStore) -> None:
        self.store = store
        resource = store.resource
        self.group = resource.group
        self.version = resource.version
        self.plural = resource.plural
        self.verbs = resource.verbs

    @staticmethod
    def _write() -> WriteOptions:
        return WriteOptions(manager=MANAGER, user=USER)

    async def delete_collection(self, namespace: str) -> None:
        await self.store.delete_collection(namespace, ListOptions(),
                                           DeleteOptions(propagation_policy=PROPAGATION),
                                           self._write())

    async def list(self, namespace: str) -> list[Object]:
        return (await self.store.list(namespace, ListOptions())).items

    async def delete(self, namespace: str, name: str) -> None:
        await self.store.delete(namespace, name, DeleteOptions(propagation_policy=PROPAGATION),
                                self._write())


def local_resources(stores: Collection[RESTStore]) -> Discovered:
    """The gateway's own namespaced stores (always discovered: they never fail)."""
    return Discovered([LocalResource(store) for store in stores
                       if store.resource.namespaced and "delete" in store.resource.verbs])
