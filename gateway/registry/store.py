"""The generic REST store: object semantics over the storage layer (kube's registry.Store).

What every resource shares lives here: URL/body consistency, unknown fields and type errors
against the schema, system metadata on create (uid, creationTimestamp, generation,
generateName), resourceVersion preconditions on update, the status subresource split, field
ownership (managedFields), deletion with finalizers, and the resourceVersion rules of list and
watch. Strategies add what is particular to one resource. Storage failures become Status errors
that name the resource.
"""

from __future__ import annotations

import builtins
import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from gateway.apimachinery import status
from gateway.apimachinery.clock import now_rfc3339
from gateway.apimachinery.listoptions import EXACT, ListOptions, resource_version_error
from gateway.apimachinery.objects import copy_object, drop_nulls
from gateway.apimachinery.user import UserInfo
from gateway.apimachinery.uuids import new_uuid
from gateway.registry.admission import Admitter, Attributes
from gateway.registry.resource import ResourceDef
from gateway.registry.validation import (
    object_meta_causes,
    object_meta_update_causes,
    required,
)
from gateway.registry.versions import BuiltinVersion, VersionLayer
from gateway.storage.apierrors import from_storage_error
from gateway.storage.errors import (
    FutureRevisionError,
    KeyExistsError,
    KeyNotFoundError,
    StorageError,
    TooOldResourceVersionError,
)
from gateway.storage.interface import ListResult, Object, Preconditions
from gateway.storage.watchcache import Cacher, CacheWatcher

#: Checks a write: (new object, current object or None, options).
Admission = Callable[["Object", "Object | None", "WriteOptions"], Awaitable[None]]

CONFLICT_MESSAGE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)
CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted between "
    "the time the first chunk was returned and now may show up in the list."
)
#: ObjectMeta's collections that kube leaves out when empty (omitempty).
_OMITTED_WHEN_EMPTY = ("labels", "annotations", "finalizers", "ownerReferences")
LIST_RV_EXPIRED = "The resourceVersion for the provided list is too old."
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_GENERATED_SUFFIX = 5
_GENERATE_ATTEMPTS = 8
_MAX_GENERATED_BASE = 63 - _GENERATED_SUFFIX


@dataclass
class WriteOptions:
    """What a write request asked for beyond its body, and who asked."""

    dry_run: bool = False
    manager: str = ""
    field_validation: str = "Warn"  # Strict, Warn or Ignore
    subresource: str = ""
    apply: bool = False  # server-side apply: the field manager already did its work
    force: bool = False
    warnings: list[str] = field(default_factory=list)
    user: UserInfo | None = None


@dataclass
class DeleteOptions:
    preconditions: Preconditions | None = None
    propagation_policy: str = ""
    grace_period_seconds: int | None = None


class RESTStore:
    """Create, read, update, patch, delete and watch one resource's objects."""

    def __init__(self, resource: ResourceDef, cacher: Cacher,
                 version: VersionLayer | None = None, *,
                 admitter: Admitter | None = None,
                 create_admission: Sequence[Admission] = (),
                 admission: Sequence[Admission] = ()) -> None:
        self.resource = resource
        self.cacher = cacher
        self.strategy = resource.strategy
        #: What the served version does on the way in and out (decoding, conversion).
        self.version = version if version is not None else BuiltinVersion(resource)
        #: Checks of a create on the object as the client sent it, before a generated name,
        #: system metadata and validation (kube's mutating admission: namespace lifecycle).
        self.create_admission: tuple[Admission, ...] = tuple(create_admission)
        #: Checks of every write on the object as it is to be stored (RBAC's escalation).
        self.admission: tuple[Admission, ...] = tuple(admission)
        #: The admission chain (webhooks, ValidatingAdmissionPolicies), called after the
        #: checks in ``admission``.
        self.admitter = admitter

    async def _admit(self, new: Object, old: Object | None, options: WriteOptions) -> None:
        for admit in self.admission:
            await admit(new, old, options)

    @overload
    async def _admit_chain(self, operation: str, namespace: str, obj: Object,
                           old: Object | None, options: WriteOptions,
                           delete: DeleteOptions | None = None) -> Object: ...
    @overload
    async def _admit_chain(self, operation: str, namespace: str, obj: None,
                           old: Object | None, options: WriteOptions,
                           delete: DeleteOptions | None = None) -> None: ...

    async def _admit_chain(self, operation: str, namespace: str, obj: Object | None,
                           old: Object | None, options: WriteOptions,
                           delete: DeleteOptions | None = None) -> Object | None:
        """The admission chain: mutating, then validating admission; an object a webhook
        changed is checked again. A subresource with a view of its own (a custom resource's
        scale) is admitted as that view, and what a webhook changed in it is written back
        into the object."""
        if self.admitter is None or not self.admitter.configured:
            return obj
        attrs = self._attributes(operation, namespace,
                                 (obj or old or {}).get("metadata", {}).get("name", ""),
                                 obj, old, options, delete)
        before = obj
        view = self.version.subresource_view(options.subresource) if obj is not None else None
        if view is None:
            def checked_again(mutated: Object) -> Object:
                # a plugin changes only an object there is (a DELETE's patches are ignored)
                assert before is not None
                return self._after_mutation(mutated, before, old, options)

            return await self.admitter.admit(attrs, checked_again)
        assert obj is not None
        attrs.obj, attrs.kind = view.view(obj), view.kind
        attrs.old = view.view(old) if old is not None else None
        admitted = obj

        def recheck(mutated: Object) -> Object:
            nonlocal admitted
            admitted = self._after_mutation(view.apply(mutated, obj), obj, old, options)
            return view.view(admitted)

        await self.admitter.admit(attrs, recheck)
        return admitted

    async def admit_subresource_create(self, subresource: str, namespace: str, name: str,
                                       obj: Object, kind: dict[str, str],
                                       options: WriteOptions) -> Object:
        """Admission of a create on a subresource that stores nothing of its own
        (serviceaccounts/token): the request object, perhaps mutated."""
        if self.admitter is None or not self.admitter.configured:
            return obj
        attrs = self._attributes("CREATE", namespace, name, obj, None, options)
        attrs.subresource, attrs.kind = subresource, kind
        return await self.admitter.admit(attrs) or obj

    def _attributes(self, operation: str, namespace: str, name: str, obj: Object | None,
                    old: Object | None, options: WriteOptions,
                    delete: DeleteOptions | None = None) -> Attributes:
        return Attributes(operation, self.resource, options.subresource, namespace, name, obj,
                          old, options.user, options.dry_run,
                          _options_document(operation, options, delete), options.warnings,
                          equivalent_versions=self.version.equivalent_versions(),
                          convert=self.version.convert)

    def _after_mutation(self, mutated: Object, before: Object, old: Object | None,
                        options: WriteOptions) -> Object:
        """What a mutating webhook may not change is put back; the rest is validated again
        and its fields recorded for the request's manager."""
        mutated["kind"], mutated["apiVersion"] = before["kind"], before["apiVersion"]
        if not isinstance(mutated.get("metadata"), dict):
            mutated["metadata"] = {}
        meta, kept = mutated["metadata"], before["metadata"]
        for key in ("name", "namespace", "uid", "creationTimestamp", "resourceVersion",
                    "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"):
            if key in kept:
                meta[key] = kept[key]
            else:
                meta.pop(key, None)
        if old is not None and self.strategy.has_generation:
            changed = _spec_changed(mutated, old)
            meta["generation"] = int(old["metadata"].get("generation", 1)) + int(changed)
        return self._validated(mutated, old, options)

    def _validated(self, new: Object, old: Object | None, options: WriteOptions) -> Object:
        """Metadata and the strategy's checks (422), then the fields the write's manager set."""
        meta = new["metadata"]
        name = meta.get("name", "")
        if old is None:
            causes = (self.strategy.validate_name(name) + object_meta_causes(meta)
                      + self.strategy.validate(new))
        else:
            causes = (object_meta_causes(meta)
                      + object_meta_update_causes(meta, old["metadata"])
                      + self.strategy.validate_update(new, old))
        if causes:
            raise self._invalid(name, causes)
        if not options.apply:  # an apply's fields were owned by the apply itself
            self.version.own_fields(old, new, options.manager, options.subresource)
        return new

    # -- errors and checks ----------------------------------------------------------------

    def _status(self, err: StorageError, name: str = "") -> status.StatusError:
        return from_storage_error(err, self.resource.plural, name, self.resource.group)

    def _invalid(self, name: str, causes: list[status.Cause]) -> status.StatusError:
        return status.invalid(self.resource.kind, name, causes, self.resource.group)

    def check_body(self, obj: Any, namespace: str, name: str | None,
                   options: WriteOptions) -> dict[str, Any]:
        """Kind, apiVersion, namespace and name must agree with the URL; fields with the
        schema. Returns the object's metadata."""
        if not isinstance(obj, dict):
            raise status.bad_request("the request body must be a JSON or YAML object")
        self._check_type_meta(obj)
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        if not isinstance(meta, dict):
            raise status.bad_request("metadata must be an object")
        drop_nulls(meta)
        for key in _OMITTED_WHEN_EMPTY:
            if meta.get(key) in ([], {}):
                del meta[key]  # Go's omitempty: an emptied list or map is no field at all
        self._check_namespace(meta, namespace)
        if name is not None and meta.get("name") and meta["name"] != name:
            raise status.bad_request(f"the name of the object ({meta['name']}) does not match "
                                     f"the name on the URL ({name})")
        if self.strategy.decoding_checks_kind or not obj.get("kind"):
            obj["kind"] = self.resource.kind
        obj["apiVersion"] = self.resource.api_version
        self.check_fields(obj, options)
        return meta

    def _check_type_meta(self, obj: dict[str, Any]) -> None:
        kind, api_version = obj.get("kind"), obj.get("apiVersion")
        if kind and kind != self.resource.kind and self.strategy.decoding_checks_kind:
            raise status.bad_request(f"the kind of the object ({kind}) does not match the kind "
                                     f"of the request ({self.resource.kind})")
        if api_version and api_version != self.resource.api_version:
            raise status.bad_request(f"the API version in the data ({api_version}) does not "
                                     f"match the expected API version "
                                     f"({self.resource.api_version})")

    def _check_namespace(self, meta: dict[str, Any], namespace: str) -> None:
        if self.resource.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise status.bad_request("the namespace of the provided object does not match "
                                         "the namespace sent on the request")
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)

    def _check_patched_namespace(self, obj: Any, namespace: str) -> None:
        """A patch that moves the object to another namespace: the patch handler's checkName
        refuses it, in its own words."""
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        given = meta.get("namespace") if isinstance(meta, dict) else None
        if self.resource.namespaced and isinstance(given, str) and given and given != namespace:
            raise status.bad_request(f"the namespace of the object ({given}) does not match "
                                     f"the namespace on the request ({namespace})")

    def check_fields(self, obj: dict[str, Any], options: WriteOptions, *,
                     defaults: bool = True) -> None:
        """The served version's decoding checks (unknown fields, types, nulls)."""
        self.version.decode(obj, options.field_validation, options.warnings, defaults=defaults)

    # -- versions -------------------------------------------------------------------------

    async def _out(self, obj: Object) -> Object:
        """A stored object as this version serves it (shared objects are not changed)."""
        if self.version.identity:
            return obj
        return (await self.version.from_storage_many([obj]))[0]

    async def _in(self, obj: Object) -> Object:
        """An object of this version as it is stored."""
        return obj if self.version.identity else await self.version.to_storage_async(obj)

    # -- predicates -----------------------------------------------------------------------

    def predicate(self, options: ListOptions) -> Callable[[Object], bool] | None:
        labels, fields = options.label_selector, options.field_selector
        if labels.empty and fields.empty:
            return None
        namespaced = self.resource.namespaced
        # the object as a reader gets it, when reading may change its labels
        read = self.version.from_storage if self.version.labels_on_read else None

        def matches(obj: Object) -> bool:
            if read is not None:
                obj = read(obj)
            meta = obj.get("metadata") or {}
            if not labels.matches(meta.get("labels")):
                return False
            if fields.empty:
                return True
            values = {"metadata.name": meta.get("name", "")}
            if namespaced:
                values["metadata.namespace"] = meta.get("namespace", "")
            values.update(self.strategy.field_set(obj))
            return fields.matches(values)

        if fields.empty and read is None:  # labels alone decide: the cache answers from them
            matches.on_labels = labels.matches  # type: ignore[attr-defined]
        return matches

    # -- reads ----------------------------------------------------------------------------

    async def get(self, namespace: str, name: str, resource_version: str = "") -> Object:
        rv_error = resource_version_error(resource_version)
        if rv_error:  # the watch cache's versioner refuses it; kube passes that on as it is
            raise status.unknown_error(rv_error)
        try:
            return await self._out(await self.cacher.get(self.resource.key(namespace, name)))
        except StorageError as err:
            raise self._status(err, name) from None

    async def list(self, namespace: str, options: ListOptions) -> ListResult:
        """A list with kube's resourceVersion rules: unset is consistent (without a limit, the
        watch cache once it has caught up with the store's current revision, as kube 1.32's
        ConsistentListFromCache; with one, the store), "0" or NotOlderThan reads the watch
        cache, Exact (or N with a limit) reads the store at N."""
        if options.resource_version == "" and not options.continue_token and \
                options.limit == 0 and self.cacher.ready:
            consistent = await self._consistent_list_from_cache(namespace, options)
            if consistent is not None:
                return consistent
        prefix = self.resource.list_prefix(namespace)
        predicate = self.predicate(options)
        rv, match = options.resource_version, options.resource_version_match
        from_store = bool(options.continue_token or rv == "" or match == EXACT or (
            match == "" and rv != "0" and options.limit > 0))
        rv_error = resource_version_error(rv)
        if rv_error:  # kube's etcd3 store answers 400; its watch cache passes the error on
            raise (status.bad_request(f"invalid resource version: {rv_error}") if from_store
                   else status.unknown_error(rv_error))
        try:
            if from_store:
                result = await self.cacher.list(
                    prefix, limit=options.limit, continue_token=options.continue_token,
                    revision=options.revision, predicate=predicate,
                )
            else:
                result = await self.cacher.list_cached(prefix, predicate=predicate,
                                                       min_revision=options.revision)
            if not self.version.identity:
                result.items = await self.version.from_storage_many(result.items)
            return result
        except TooOldResourceVersionError:
            message = CONTINUE_EXPIRED if options.continue_token else LIST_RV_EXPIRED
            raise status.gone(message) from None
        except StorageError as err:
            raise self._status(err) from None

    async def _consistent_list_from_cache(self, namespace: str,
                                          options: ListOptions) -> ListResult | None:
        """The cache's list once it holds the store's current revision; None when it cannot
        catch up in time (the store answers then, as kube falls back)."""
        try:
            revision = await self.cacher.current_revision()
            result = await self.cacher.list_cached(self.resource.list_prefix(namespace),
                                                   predicate=self.predicate(options),
                                                   min_revision=revision)
        except FutureRevisionError:
            return None
        except StorageError as err:
            raise self._status(err) from None
        if not self.version.identity:
            result.items = await self.version.from_storage_many(result.items)
        return result

    async def watch(self, namespace: str, options: ListOptions,
                    deadline: float | None = None) -> CacheWatcher:
        """A watch with kube's rules: unset starts with the current state (consistent), "0"
        with whatever state the cache has, N after revision N; sendInitialEvents=true is the
        watch-list stream, closed by a bookmark marked k8s.io/initial-events-end."""
        prefix = self.resource.list_prefix(namespace)
        predicate = self.predicate(options)
        rv, initial = options.resource_version, options.send_initial_events
        bookmarks = options.allow_watch_bookmarks
        rv_error = resource_version_error(rv)
        if rv_error:  # the watch cache's versioner refuses it; kube passes that on as it is
            raise status.unknown_error(rv_error)
        try:
            if initial is None and rv not in ("", "0"):
                return await self.cacher.watch_cached(
                    prefix, revision=options.revision, predicate=predicate, bookmarks=bookmarks,
                    deadline=deadline)
            if initial is False:
                revision = options.revision or await self.cacher.current_revision()
                await self.cacher.wait_fresh(revision)
                return await self.cacher.watch_cached(
                    prefix, revision=revision, predicate=predicate, bookmarks=bookmarks,
                    deadline=deadline)
            revision = options.revision if rv != "" else await self.cacher.current_revision()
            return await self.cacher.watch_cached(
                prefix, revision=revision, predicate=predicate, send_initial=True,
                bookmarks=bookmarks, mark_initial_end=bool(initial), deadline=deadline,
            )
        except TooOldResourceVersionError:
            raise
        except StorageError as err:
            raise self._status(err) from None

    # -- create ---------------------------------------------------------------------------

    async def create(self, namespace: str, obj: Object, options: WriteOptions) -> Object:
        meta = self.check_body(obj, namespace, None, options)
        meta.pop("managedFields", None)  # ownership starts with this write
        for admit in self.create_admission:
            await admit(obj, None, options)
        generated = bool(meta.get("generateName")) and not meta.get("name")
        if generated:
            meta["name"] = _generated_name(meta["generateName"])
        self._prepare_create(obj, options)
        await self._admit(obj, None, options)
        obj = await self._admit_chain("CREATE", namespace, obj, None, options)
        meta = obj["metadata"]
        if options.dry_run:
            return obj
        for attempt in range(_GENERATE_ATTEMPTS):
            try:
                return await self._out(await self.cacher.create(
                    self.resource.key(namespace, meta["name"]), await self._in(obj)))
            except KeyExistsError as err:
                if not generated or attempt == _GENERATE_ATTEMPTS - 1:
                    raise self._status(err, meta["name"]) from None
                meta["name"] = _generated_name(meta["generateName"])
            except StorageError as err:
                raise self._status(err, meta["name"]) from None
        raise AssertionError("unreachable")

    def _prepare_create(self, obj: Object, options: WriteOptions) -> None:
        """System metadata, the strategy's defaults, validation (422), the manager's fields."""
        meta = obj["metadata"]
        name = meta.get("name") or ""
        if not name:
            raise self._invalid("", [required("metadata.name",
                                              "name or generateName is required")])
        meta["uid"] = new_uuid()
        meta["creationTimestamp"] = now_rfc3339()
        for key in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds",
                    "selfLink", "generation"):
            meta.pop(key, None)
        if self.strategy.has_generation:
            meta["generation"] = 1
        if self.strategy.has_status:
            obj.pop("status", None)
        self.strategy.prepare_for_create(obj)
        self._validated(obj, None, options)

    # -- update and patch -------------------------------------------------------------------

    async def update(self, namespace: str, name: str, obj: Object,
                     options: WriteOptions) -> tuple[Object, bool]:
        """Replace the object (PUT); returns it and whether it was created."""
        meta = self.check_body(obj, namespace, name, options)
        meta["name"] = name
        precondition = meta.get("uid") or ""

        async def replace(current: Object | None) -> Object:
            # a uid in the body is a precondition (rest.DefaultUpdatedObjectInfo), checked
            # before anything else, a missing object having none
            actual = (current or {}).get("metadata", {}).get("uid", "")
            if precondition and precondition != actual:
                raise status.conflict(self.resource.plural, name,
                                      f"Precondition failed: UID in precondition: "
                                      f"{precondition}, UID in object meta: {actual}",
                                      self.resource.group)
            return copy_object(obj)

        return await self._write(namespace, name, replace, options,
                                 may_create=self.strategy.allow_create_on_update,
                                 known=_revision_or_zero(meta.get("resourceVersion")))

    async def patch(self, namespace: str, name: str,
                    mutate: Callable[[Object | None], Object], options: WriteOptions, *,
                    may_create: bool = False) -> tuple[Object, bool]:
        """Apply ``mutate`` to the current object (None when missing and ``may_create``)."""

        async def patched(current: Object | None) -> Object:
            new = mutate(copy_object(current) if current is not None else None)
            self._check_patched_namespace(new, namespace)
            meta = self.check_body(new, namespace, name, options)
            meta["name"] = name
            return new

        return await self._write(namespace, name, patched, options, may_create=may_create)

    async def _write(self, namespace: str, name: str,
                     make: Callable[[Object | None], Awaitable[Object]],
                     options: WriteOptions, *, may_create: bool,
                     known: int = 0) -> tuple[Object, bool]:
        """``known``: a revision the client has seen of the object (the cache's copy is no
        starting point for the write if older)."""
        key = self.resource.key(namespace, name)
        created = False

        async def update(stored: Object | None) -> Object:
            nonlocal created
            current = await self._out(stored) if stored is not None else None
            new = await make(current)
            if current is None:
                if not may_create:
                    raise status.not_found(self.resource.plural, name, self.resource.group)
                created = True
                return await self._in(await self._create_on_write(namespace, new, options))
            prepared = self._prepare_update(new, current, options)
            await self._admit(prepared, current, options)
            return await self._in(await self._admit_chain("UPDATE", namespace, prepared,
                                                          current, options))

        if options.dry_run:
            return await self._out(await self._dry_run_write(key, update)), created
        try:
            result = await self.cacher.guaranteed_update(key, update, ignore_not_found=may_create,
                                                         min_revision=known)
        except StorageError as err:
            raise self._status(err, name) from None
        if _finished_deleting(self.strategy, result):
            result = await self._remove_after_finalizers(key, result)
        return await self._out(result), created

    async def _dry_run_write(self, key: str,
                             update: Callable[[Object | None], Awaitable[Object]]) -> Object:
        try:
            current = await self.cacher.get(key)
        except KeyNotFoundError:
            current = None
        except StorageError as err:
            raise self._status(err) from None
        return await update(current)

    async def _create_on_write(self, namespace: str, new: Object,
                               options: WriteOptions) -> Object:
        for admit in self.create_admission:
            await admit(new, None, options)
        self._prepare_create(new, options)
        await self._admit(new, None, options)
        return await self._admit_chain("CREATE", namespace, new, None, options)

    def _prepare_update(self, new: Object, current: Object, options: WriteOptions) -> Object:
        cur_meta, meta = current["metadata"], new["metadata"]
        name = cur_meta["name"]
        wanted = meta.get("resourceVersion") or ""
        if wanted and wanted != cur_meta.get("resourceVersion"):
            raise status.conflict(self.resource.plural, name, CONFLICT_MESSAGE,
                                  self.resource.group)
        if not wanted and not self.strategy.allow_unconditional_update:
            # kube names the resource where the kind goes, and shows the version as the
            # uint64 zero it parsed (%#v)
            raise status.invalid(self.resource.plural, name, [status.Cause(
                "FieldValueInvalid", "Invalid value: 0x0: must be specified for an update",
                "metadata.resourceVersion")], self.resource.group)
        if options.subresource:
            new = self.strategy.subresource_update(options.subresource, new, current)
            meta = new["metadata"]
        elif self.strategy.has_status:
            new["status"] = copy_object(current.get("status"))
            if new["status"] is None:
                del new["status"]
        _keep_system_metadata(meta, cur_meta)
        if not options.subresource:
            self.strategy.prepare_for_update(new, current)
        if self.strategy.has_generation and _spec_changed(new, current):
            meta["generation"] = int(cur_meta.get("generation", 1)) + 1
        return self._validated(new, current, options)

    # -- delete ---------------------------------------------------------------------------

    async def delete(self, namespace: str, name: str, options: DeleteOptions,
                     write: WriteOptions) -> tuple[Object, bool]:
        """Delete, or start deleting (finalizers pending); returns the object and whether it
        left storage."""
        key = self.resource.key(namespace, name)
        try:
            current = await self._out(await self.cacher.get(key))
        except StorageError as err:
            raise self._status(err, name) from None
        self._check_delete_preconditions(current, options.preconditions)
        self.strategy.validate_delete(current)
        await self._admit_chain("DELETE", namespace, None, current, write, options)
        pending = self.strategy.pending_finalizers(current)
        if write.dry_run:
            return current, not pending
        if pending:
            return await self._out(await self._mark_deleting(key, name, options)), False
        try:
            deleted = await self.cacher.delete(key, preconditions=options.preconditions)
        except StorageError as err:
            raise self._status(err, name) from None
        return await self._out(deleted), True

    def _check_delete_preconditions(self, current: Object,
                                    preconditions: Preconditions | None) -> None:
        """rest.BeforeDelete's early check of the preconditions: uid, then resourceVersion.
        (The delete itself checks them again against what it removes.)"""
        if preconditions is None:
            return
        meta = current.get("metadata", {})
        kind, group, name = self.resource.kind, self.resource.group, meta.get("name", "")
        if preconditions.uid is not None and preconditions.uid != meta.get("uid", ""):
            raise status.delete_uid_precondition_failed(kind, name, preconditions.uid,
                                                        meta.get("uid", ""), group)
        wanted = preconditions.resource_version
        if wanted is not None and wanted != meta.get("resourceVersion", ""):
            raise status.delete_rv_precondition_failed(kind, name, wanted,
                                                       meta.get("resourceVersion", ""), group)

    async def _mark_deleting(self, key: str, name: str, options: DeleteOptions) -> Object:
        """Set deletionTimestamp; the object stays until its finalizers are gone."""

        async def mark(current: Object | None) -> Object:
            assert current is not None
            new = copy_object(current)
            meta = new["metadata"]
            if not meta.get("deletionTimestamp"):
                meta["deletionTimestamp"] = now_rfc3339()
                meta["deletionGracePeriodSeconds"] = options.grace_period_seconds or 0
                self.strategy.begin_deletion(new)
            return new

        try:
            result = await self.cacher.guaranteed_update(key, mark,
                                                         preconditions=options.preconditions)
        except StorageError as err:
            raise self._status(err, name) from None
        if _finished_deleting(self.strategy, result):
            result = await self._remove_after_finalizers(key, result)
        return result

    async def _remove_after_finalizers(self, key: str, obj: Object) -> Object:
        """The last finalizer went while deletion was pending: now it goes."""
        meta = obj["metadata"]
        precondition = Preconditions(uid=meta.get("uid"),
                                     resource_version=meta.get("resourceVersion"))
        try:
            return await self.cacher.delete(key, preconditions=precondition)
        except StorageError:
            return obj  # someone changed it in between; their write decides

    async def delete_collection(self, namespace: str, list_options: ListOptions,
                                options: DeleteOptions,
                                write: WriteOptions) -> builtins.list[Object]:
        listed = await self.list(namespace, ListOptions(
            label_selector=list_options.label_selector,
            field_selector=list_options.field_selector, resource_version="0"))
        deleted = []
        for obj in listed.items:
            meta = obj["metadata"]
            try:
                result, _ = await self.delete(meta.get("namespace", ""), meta["name"], options,
                                              write)
            except status.StatusError as err:
                if err.code == 404:
                    continue
                raise
            deleted.append(result)
        return deleted


def _options_document(operation: str, options: WriteOptions,
                      delete: DeleteOptions | None) -> Object:
    """The request's options as admission reviews carry them (Create/Update/Patch/Delete)."""
    kind = {"CREATE": "CreateOptions", "DELETE": "DeleteOptions"}.get(
        operation, "PatchOptions" if options.apply else "UpdateOptions")
    doc: Object = {"kind": kind, "apiVersion": "meta.k8s.io/v1"}
    if options.dry_run:
        doc["dryRun"] = ["All"]
    if delete is not None:
        if delete.propagation_policy:
            doc["propagationPolicy"] = delete.propagation_policy
        if delete.grace_period_seconds is not None:
            doc["gracePeriodSeconds"] = delete.grace_period_seconds
    elif options.manager:
        doc["fieldManager"] = options.manager
    if options.apply and options.force:
        doc["force"] = True
    return doc


def _keep_system_metadata(meta: dict[str, Any], current: dict[str, Any]) -> None:
    """rest.BeforeUpdate: generation and resourceVersion are the server's; a missing uid, the
    creation time, a deletion time and a grace period once set are kept. What else differs
    (a uid, a new deletion time) is left for validation to refuse as immutable."""
    for key in ("generation", "resourceVersion", "creationTimestamp"):
        if key in current:
            meta[key] = current[key]
        else:
            meta.pop(key, None)
    if not meta.get("uid") and "uid" in current:
        meta["uid"] = current["uid"]
    if current.get("deletionTimestamp"):
        meta["deletionTimestamp"] = current["deletionTimestamp"]
    if meta.get("deletionGracePeriodSeconds") is None and \
            current.get("deletionGracePeriodSeconds") is not None:
        meta["deletionGracePeriodSeconds"] = current["deletionGracePeriodSeconds"]


def _revision_or_zero(resource_version: Any) -> int:
    """A resourceVersion as the revision it names; 0 when it names none."""
    try:
        return int(resource_version)
    except (TypeError, ValueError):
        return 0


def _generated_name(base: str) -> str:
    suffix = "".join(secrets.choice(_NAME_ALPHABET) for _ in range(_GENERATED_SUFFIX))
    return base[:_MAX_GENERATED_BASE] + suffix


def _finished_deleting(strategy: Any, obj: Object) -> bool:
    return bool(obj.get("metadata", {}).get("deletionTimestamp")) and not \
        strategy.pending_finalizers(obj)


def _spec_changed(new: Object, old: Object) -> bool:
    """Generation counts changes of everything but metadata and status."""
    ignored = {"metadata", "status", "apiVersion", "kind"}
    keys = (set(new) | set(old)) - ignored
    return any(new.get(k) != old.get(k) for k in keys)
