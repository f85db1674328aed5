"""The generic REST store: object semantics over the storage layer (kube's registry.Store).

It owns what every resource shares: system metadata on create (uid, creationTimestamp,
generation), resourceVersion preconditions on update, namespace/name consistency, validation
through the resource's strategy, and turning storage failures into Status errors that name the
resource. Reads that may be served from memory go to the watch cache; everything else goes to
the storage.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from gateway.endpoints import status
from gateway.registry.resource import ResourceDef
from gateway.registry.validation import required
from gateway.storage.errors import StorageError
from gateway.storage.interface import ListResult, Object, Preconditions
from gateway.storage.watchcache import Cacher

#: Checks, before a create, that the object's namespace can take it (namespace lifecycle).
NamespaceCheck = Callable[[str], Awaitable[None]]

CONFLICT_MESSAGE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class RESTStore:
    """Create, read, update and delete one resource's objects."""

    def __init__(
        self,
        resource: ResourceDef,
        cacher: Cacher,
        namespace_check: NamespaceCheck | None = None,
    ) -> None:
        self.resource = resource
        self.cacher = cacher
        self.strategy = resource.strategy
        self.namespace_check = namespace_check

    # -- errors ---------------------------------------------------------------------------

    def _status(self, err: StorageError, name: str = "") -> status.StatusError:
        return status.from_storage_error(err, self.resource.plural, name, self.resource.group)

    def _invalid(self, name: str, causes: list[status.Cause]) -> status.StatusError:
        return status.invalid(self.resource.kind, name, causes, self.resource.group)

    # -- reads ----------------------------------------------------------------------------

    async def get(self, namespace: str, name: str) -> Object:
        try:
            return await self.cacher.get(self.resource.key(namespace, name))
        except StorageError as err:
            raise self._status(err, name) from None

    async def list(
        self,
        namespace: str,
        *,
        limit: int = 0,
        continue_token: str = "",
        revision: int = 0,
        from_cache: bool = False,
    ) -> ListResult:
        prefix = self.resource.list_prefix(namespace)
        try:
            if from_cache:
                return await self.cacher.list_cached(prefix, min_revision=revision)
            return await self.cacher.list(
                prefix, limit=limit, continue_token=continue_token, revision=revision
            )
        except StorageError as err:
            raise self._status(err) from None

    # -- writes ---------------------------------------------------------------------------

    def _check_identity(self, obj: Object, namespace: str, name: str | None) -> dict[str, Any]:
        """Body and URL must agree on kind, namespace and name (400 otherwise)."""
        if not isinstance(obj, dict):
            raise status.bad_request("the request body must be a JSON or YAML object")
        kind, api_version = obj.get("kind"), obj.get("apiVersion")
        if kind and kind != self.resource.kind:
            raise status.bad_request(
                f"the kind of the object ({kind}) does not match the kind of the request "
                f"({self.resource.kind})"
            )
        if api_version and api_version != self.resource.api_version:
            raise status.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API "
                f"version ({self.resource.api_version})"
            )
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        if not isinstance(meta, dict):
            raise status.bad_request("metadata must be an object")
        if self.resource.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and body_ns != namespace:
                raise status.bad_request(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if name is not None and meta.get("name") and meta["name"] != name:
            raise status.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL "
                f"({name})"
            )
        obj["kind"], obj["apiVersion"] = self.resource.kind, self.resource.api_version
        return meta

    async def create(self, namespace: str, obj: Object, *, dry_run: bool = False) -> Object:
        meta = self._check_identity(obj, namespace, None)
        name = meta.get("name") or ""
        if not name:
            raise self._invalid("", [required("metadata.name", "name or generateName is required")])
        causes = self.strategy.validate_name(name)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        meta["generation"] = 1
        for field in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(field, None)
        self.strategy.prepare_for_create(obj)
        causes += self.strategy.validate(obj)
        if causes:
            raise self._invalid(name, causes)
        if self.resource.namespaced and self.namespace_check is not None:
            await self.namespace_check(namespace)
        if dry_run:
            return obj
        try:
            return await self.cacher.create(self.resource.key(namespace, name), obj)
        except StorageError as err:
            raise self._status(err, name) from None

    async def update(
        self, namespace: str, name: str, obj: Object, *, dry_run: bool = False
    ) -> tuple[Object, bool]:
        """Replace the object; returns it and whether it was created (PUT may create)."""
        meta = self._check_identity(obj, namespace, name)
        meta["name"] = name
        wanted_rv = meta.get("resourceVersion") or ""
        created = False

        async def apply(current: Object | None) -> Object:
            nonlocal created
            new = copy.deepcopy(obj)
            if current is None:
                if not self.strategy.allow_create_on_update:
                    raise status.not_found(self.resource.plural, name, self.resource.group)
                created = True
                return await self._prepare_create_via_update(namespace, new)
            return self._prepare_update(new, current, wanted_rv)

        key = self.resource.key(namespace, name)
        if dry_run:
            try:
                current = await self.cacher.get(key)
            except StorageError:
                current = None
            return await apply(current), created
        try:
            result = await self.cacher.guaranteed_update(
                key, apply, ignore_not_found=self.strategy.allow_create_on_update
            )
        except StorageError as err:
            raise self._status(err, name) from None
        return result, created

    async def _prepare_create_via_update(self, namespace: str, new: Object) -> Object:
        meta = new["metadata"]
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=now_rfc3339(), generation=1)
        meta.pop("resourceVersion", None)
        self.strategy.prepare_for_create(new)
        causes = self.strategy.validate_name(meta["name"]) + self.strategy.validate(new)
        if causes:
            raise self._invalid(meta["name"], causes)
        if self.resource.namespaced and self.namespace_check is not None:
            await self.namespace_check(namespace)
        return new

    def _prepare_update(self, new: Object, current: Object, wanted_rv: str) -> Object:
        cur_meta, meta = current["metadata"], new["metadata"]
        name = cur_meta["name"]
        if wanted_rv and wanted_rv != cur_meta.get("resourceVersion"):
            raise status.conflict(self.resource.plural, name, CONFLICT_MESSAGE,
                                  self.resource.group)
        if not wanted_rv and not self.strategy.allow_unconditional_update:
            raise self._invalid(name, [required("metadata.resourceVersion",
                                                "must be specified for an update")])
        for field in ("uid", "creationTimestamp", "deletionTimestamp",
                      "deletionGracePeriodSeconds", "generation"):
            if field in cur_meta:
                meta[field] = cur_meta[field]
            else:
                meta.pop(field, None)
        meta["resourceVersion"] = cur_meta.get("resourceVersion")
        self.strategy.prepare_for_update(new, current)
        if _spec_changed(new, current):
            meta["generation"] = int(cur_meta.get("generation", 1)) + 1
        causes = self.strategy.validate_update(new, current)
        if causes:
            raise self._invalid(name, causes)
        return new

    async def delete(
        self, namespace: str, name: str, *, preconditions: Preconditions | None = None,
        dry_run: bool = False,
    ) -> Object:
        key = self.resource.key(namespace, name)
        try:
            if dry_run:
                current = await self.cacher.get(key)
                if preconditions is not None:
                    preconditions.check(key, current)
                return current
            return await self.cacher.delete(key, preconditions=preconditions)
        except StorageError as err:
            raise self._status(err, name) from None


def _spec_changed(new: Object, old: Object) -> bool:
    """Generation counts changes of everything but metadata and status."""
    ignored = {"metadata", "status", "apiVersion", "kind"}
    keys = (set(new) | set(old)) - ignored
    return any(new.get(k) != old.get(k) for k in keys)
