"""The core server's objects an extension apiserver reads, kept in watch caches (kube's shared
informers over the ``--kubeconfig`` client): namespaces for NamespaceLifecycle, webhook
configurations, ValidatingAdmissionPolicies and their bindings for admission.

``RemoteStorage`` is a read-only storage whose keys are the core server's objects: a list is
a GET of the collection, a watch a ``?watch=1`` stream from a resourceVersion (a 410 is the
storage's "too old", after which the cache lists again), a get a GET of the object. The
gateway's watch cache sits on it as on SQLite or etcd, so the listers, and the admission
plugins reading them, are the gateway's own.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import aiohttp

from gateway.extension.kubeclient import APIError, KubeClient
from gateway.registry.resource import ResourceDef
from gateway.storage.errors import KeyNotFoundError, StorageError, TooOldResourceVersionError
from gateway.storage.interface import (
    EventType,
    ListResult,
    Preconditions,
    Predicate,
    UpdateFunc,
    WatchEvent,
)
from gateway.transport.resolver import ServiceAddress

Object = dict[str, Any]
_EVENTS = {"ADDED": EventType.ADDED, "MODIFIED": EventType.MODIFIED,
           "DELETED": EventType.DELETED}


def collection_path(resource: ResourceDef) -> str:
    """Every object of ``resource``, in all namespaces."""
    root = f"/apis/{resource.group}/{resource.version}" if resource.group else "/api/v1"
    return f"{root}/{resource.plural}"


def _revision(obj: Object) -> int:
    return int((obj.get("metadata") or {}).get("resourceVersion") or 0)


class RemoteWatch:
    """Events of one watch stream, read by a task into a queue."""

    def __init__(self, client: KubeClient, resource: ResourceDef, revision: int) -> None:
        self._queue: asyncio.Queue[WatchEvent | None] = asyncio.Queue()
        self._task = asyncio.get_running_loop().create_task(
            self._read(client, resource, revision))

    async def _read(self, client: KubeClient, resource: ResourceDef, revision: int) -> None:
        try:
            async for event in client.watch(collection_path(resource), str(revision)):
                self._queue.put_nowait(_event(resource, event))
        except APIError as err:
            error = TooOldResourceVersionError(revision, 0) if err.code == 410 else \
                StorageError(f"watching {resource.plural}: {err}")
            self._queue.put_nowait(WatchEvent(EventType.ERROR, "", None, 0, error=error))
        except (aiohttp.ClientError, TimeoutError, ValueError) as err:
            self._queue.put_nowait(WatchEvent(EventType.ERROR, "", None, 0, error=StorageError(
                f"watching {resource.plural}: {err!r}")))
        self._queue.put_nowait(None)

    def __aiter__(self) -> RemoteWatch:
        return self

    async def __anext__(self) -> WatchEvent:
        event = await self._queue.get()
        if event is None:
            raise StopAsyncIteration
        return event

    def stop(self) -> None:
        self._task.cancel()

    async def request_progress(self) -> None:
        """Bookmarks come as the server sends them (allowWatchBookmarks)."""


def _event(resource: ResourceDef, event: dict[str, Any]) -> WatchEvent:
    kind, obj = event.get("type", ""), event.get("object") or {}
    if kind == "BOOKMARK":
        return WatchEvent(EventType.BOOKMARK, "", None, _revision(obj))
    if kind == "ERROR":
        error = TooOldResourceVersionError(0, 0) if obj.get("code") == 410 else \
            StorageError(obj.get("message", "watch error"))
        return WatchEvent(EventType.ERROR, "", None, 0, error=error)
    meta = obj.get("metadata") or {}
    key = resource.key(meta.get("namespace", ""), meta.get("name", ""))
    return WatchEvent(_EVENTS[kind], key, obj, _revision(obj))


class RemoteStorage:
    """The core server's ``resources``, read only, as a storage keyed as the gateway keys
    them (``ResourceDef.storage_prefix``)."""

    def __init__(self, client: KubeClient, resources: Sequence[ResourceDef]) -> None:
        self.client = client
        self.resources = {r.storage_prefix: r for r in resources}

    def _resource(self, key: str) -> ResourceDef:
        for prefix, resource in self.resources.items():
            if key.startswith(prefix):
                return resource
        raise StorageError(f"{key}: not a resource read from the core server")

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def list(self, prefix: str, *, limit: int = 0, continue_token: str = "",
                   revision: int = 0, predicate: Predicate | None = None) -> ListResult:
        """The whole collection, now (the cache lists once, then watches)."""
        resource = self._resource(prefix)
        try:
            listed = await self.client.request("GET", collection_path(resource))
        except (APIError, aiohttp.ClientError, TimeoutError, json.JSONDecodeError) as err:
            raise StorageError(f"listing {resource.plural} of the core server: {err}") from None
        items = []
        for item in listed.get("items") or []:  # the list's items carry no type of their own
            item.setdefault("apiVersion", resource.api_version)
            item.setdefault("kind", resource.kind)
            items.append(item)
        return ListResult(items, int(listed.get("metadata", {}).get("resourceVersion") or 0))

    async def watch(self, prefix: str, *, revision: int | None = None) -> RemoteWatch:
        return RemoteWatch(self.client, self._resource(prefix), revision or 0)

    async def get(self, key: str) -> Object:
        resource = self._resource(key)
        rest = key[len(resource.storage_prefix):]
        namespace, _, name = rest.rpartition("/")
        root = collection_path(resource).rsplit("/", 1)[0]
        path = f"{root}/namespaces/{namespace}/{resource.plural}/{name}" if namespace \
            else f"{root}/{resource.plural}/{name}"
        try:
            obj: Object = await self.client.request("GET", path)
            return obj
        except APIError as err:
            if err.code == 404:
                raise KeyNotFoundError(key) from None
            raise StorageError(f"reading {key} from the core server: {err}") from None
        except (aiohttp.ClientError, TimeoutError) as err:
            raise StorageError(f"reading {key} from the core server: {err!r}") from None

    async def current_revision(self) -> int:
        raise StorageError("the core server's revision is not read by an extension apiserver")

    async def count(self, prefix: str) -> int:
        return len((await self.list(prefix)).items)

    async def check_health(self) -> None:
        pass

    async def create(self, key: str, obj: Object) -> Object:
        raise StorageError("the core server's objects are read only here")

    async def guaranteed_update(self, key: str, update: UpdateFunc, *,
                                preconditions: Preconditions | None = None,
                                ignore_not_found: bool = False,
                                cached: tuple[int, bytes] | None = None) -> Object:
        raise StorageError("the core server's objects are read only here")

    async def delete(self, key: str, *, preconditions: Preconditions | None = None,
                     validate: Callable[[Object], Awaitable[None]] | None = None,
                     cached: tuple[int, bytes] | None = None) -> Object:
        raise StorageError("the core server's objects are read only here")

    async def compact(self, revision: int) -> None:
        pass


class DNSServiceResolver:
    """kube's default service resolver for an extension apiserver's webhooks: a Service is
    reached by its cluster DNS name, which its certificate must carry."""

    async def resolve(self, namespace: str, name: str, port: int) -> ServiceAddress:
        host = f"{name}.{namespace}.svc"
        return ServiceAddress(host, port, host)
