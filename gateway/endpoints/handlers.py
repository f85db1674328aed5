"""The REST verbs of one resource over its generic store (kube's endpoints/handlers).

``ResourceEndpoints`` is installed in a GenericAPIServer for (group, version, resource) and
dispatches on the verb and subresource the request-info filter found: get, list, watch, create,
update, patch (JSON, merge, strategic, apply), delete and deletecollection, on the object and on
its status subresource.
"""

from __future__ import annotations

import asyncio
import builtins
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web

from gateway.apimachinery import status
from gateway.apimachinery.context import request_user
from gateway.apimachinery.fields import has_own_field_label_conversion
from gateway.apimachinery.gowords import go_quote, parse_int
from gateway.apimachinery.listoptions import ListOptions
from gateway.apimachinery.requestinfo import RequestInfo
from gateway.apimachinery.strictjson import Findings
from gateway.auth.audit.events import note_request_object, note_response_object, record
from gateway.auth.audit.policy import Level
from gateway.endpoints import patch as patches
from gateway.endpoints.listoptions import parse_list_options
from gateway.endpoints.negotiation import TRANSFORMS, MediaType, negotiate, respond
from gateway.endpoints.protobuf_encode import has_message
from gateway.endpoints.request import (
    body_media_type,
    decode_object,
    decode_strict,
    delete_options_error,
    dry_run_cause,
    read_body,
)
from gateway.endpoints.tableconvert import (
    include_object_option,
    partial_metadata,
    partial_metadata_list,
    table,
)
from gateway.endpoints.watch import (
    ConvertedEvents,
    WatchEncoder,
    error_event,
    stream,
    watch_timeout,
)
from gateway.registry import fieldmanager
from gateway.registry.store import DeleteOptions, RESTStore, WriteOptions
from gateway.registry.versions import StrictDecodingError, reporting
from gateway.storage.codec import embedded
from gateway.storage.errors import TooOldResourceVersionError
from gateway.storage.interface import ListResult, Preconditions

JSON = "application/json"
#: metav1's allowed fieldValidation values, sorted as kube lists them.
FIELD_VALIDATION = ("", "Ignore", "Strict", "Warn")
#: metav1's propagation policies, in ValidateDeleteOptions' order ("nil" is how it names unset).
PROPAGATION = ("Foreground", "Background", "Orphan")


#: A subresource's own handler, and what makes it from the resource's endpoints.
SubresourceHandler = Callable[[web.BaseRequest, RequestInfo], Awaitable[web.StreamResponse]]
SubresourceFactory = Callable[["ResourceEndpoints"], SubresourceHandler]


def no_route_for_method() -> status.StatusError:
    """kube's router (go-restful) for a method none of the path's routes takes: 405, its
    generic words (NewGenericServerResponse) and an empty details object, no Allow header."""
    return status.StatusError(405, "MethodNotAllowed", "the server does not allow this method "
                              "on the requested resource", always_details=True)


def json_response(obj: Any, code: int = 200) -> web.Response:
    return respond(obj, MediaType(), code)


class ResourceEndpoints:
    """Serves every verb on one resource."""

    def __init__(self, store: RESTStore, *, min_request_timeout: int = 1800,
                 stopping: asyncio.Event | None = None,
                 subresources: Mapping[str, SubresourceFactory] | None = None) -> None:
        self.store = store
        #: Subresources served by their own handler (serviceaccounts/token, a custom
        #: resource's scale), each made from these endpoints when they are built.
        self.subresource_handlers: Mapping[str, SubresourceHandler] = {
            name: make(self) for name, make in (subresources or {}).items()}
        self.resource = store.resource
        self.min_request_timeout = min_request_timeout
        self.stopping = stopping
        self._verbs = {
            "get": self.get, "list": self.list, "watch": self.watch, "create": self.create,
            "update": self.update, "patch": self.patch, "delete": self.delete,
            "deletecollection": self.delete_collection,
        }

    async def __call__(self, request: web.BaseRequest, info: RequestInfo) -> web.StreamResponse:
        # /api/v1/namespaces/<name> names the namespace; other cluster-scoped resources have
        # no namespace in their path
        if info.namespace and not self.resource.namespaced and info.namespace != info.name:
            raise status.not_found()
        if not info.verb:  # OPTIONS, or another method no route of kube's takes
            known = not info.subresource or info.subresource in self.subresource_handlers \
                or info.subresource in self.resource.subresources
            raise no_route_for_method() if known else status.not_found()
        if info.subresource in self.subresource_handlers:
            return await self.subresource_handlers[info.subresource](request, info)
        if info.subresource and info.subresource not in self.resource.subresources:
            raise status.not_found()
        if info.subresource and info.verb not in ("get", "update", "patch"):
            raise status.method_not_allowed(info.verb, self.resource.plural, self.resource.group)
        handler = self._verbs.get(info.verb)
        if handler is None or info.verb not in self.resource.verbs:
            raise status.method_not_allowed(info.verb, self.resource.plural, self.resource.group)
        if not self.resource.namespaced:
            info.namespace = ""
        return await handler(request, info)

    # -- output -----------------------------------------------------------------------------

    def _media(self, request: web.BaseRequest, *, watch: bool = False) -> MediaType:
        resource = self.resource
        protobuf = resource.protobuf and has_message(resource.api_version, resource.kind)
        return negotiate(request, TRANSFORMS, yaml_ok=not watch, protobuf=protobuf)

    def _go_type(self, kind: str) -> str:
        """How Go's %T prints kube's internal type of ``kind``: *core.ConfigMap,
        *coordination.LeaseList (the package is the group's first label, core for "")."""
        package = self.resource.group.split(".", 1)[0] if self.resource.group else "core"
        return f"*{package}.{kind}"

    def _render_one(self, request: web.BaseRequest, obj: dict, media: MediaType) -> Any:
        if obj.get("kind") == "Status":  # a delete's answer: never transformed, as kube's
            return obj
        if media.transform == "Table":
            include = include_object_option(request.query.get("includeObject"))
            list_meta = {"resourceVersion": obj.get("metadata", {}).get("resourceVersion", "")}
            return table(self.resource.columns, [obj], list_meta, include,
                         version=media.transform_version)
        if media.transform == "PartialObjectMetadata":
            return partial_metadata(obj, media.transform_version)
        if media.transform:
            raise status.not_acceptable_transform(
                f"you requested {media.transform}, but the requested object is not a list "
                f"({self._go_type(self.resource.kind)})")
        return obj

    def _render_list(self, request: web.BaseRequest, result: ListResult,
                     media: MediaType) -> Any:
        meta: dict[str, Any] = {"resourceVersion": str(result.revision)}
        if result.continue_token:
            meta["continue"] = result.continue_token
        if result.remaining is not None and result.continue_token:
            meta["remainingItemCount"] = result.remaining
        if media.transform == "Table":
            include = include_object_option(request.query.get("includeObject"))
            return table(self.resource.columns, result.items, meta, include,
                         version=media.transform_version)
        if media.transform == "PartialObjectMetadataList":
            return partial_metadata_list(result.items, meta, media.transform_version)
        if media.transform:
            raise status.not_acceptable_transform(
                f"you requested {media.transform}, but the requested object is a list "
                f"({self._go_type(self.resource.list_kind)})")
        encoded = result.encoded
        if media.format == "json" and encoded is not None:  # spliced as the cache encoded them
            items: Any = embedded([cached.data for cached in encoded])
        elif media.format == "protobuf" and encoded is not None and \
                not _response_object_recorded(request):
            # each decoded as the protobuf writer comes to it, and let go: 10,000 dicts alive
            # at once cost a third more than the encoding itself (collections, cold memory)
            items = (cached.decode() for cached in encoded)
        else:
            items = result.items
        return {"kind": self.resource.list_kind, "apiVersion": self.resource.api_version,
                "metadata": meta, "items": items}

    def _answer(self, request: web.BaseRequest, obj: Any, code: int,
                options: WriteOptions | None = None) -> web.Response:
        media = self._media(request)
        note_response_object(request, obj)
        headers = {}
        if options is not None and options.warnings:
            headers["Warning"] = ", ".join(
                f'299 - "{_header_quoted(w)}"' for w in options.warnings)
        return respond(self._render_one(request, obj, media), media, code, headers)

    # -- reads ------------------------------------------------------------------------------

    async def get(self, request: web.BaseRequest, info: RequestInfo) -> web.StreamResponse:
        media = self._media(request)
        obj = await self.store.get(info.namespace, info.name,
                                   request.query.get("resourceVersion", ""))
        note_response_object(request, obj)
        return respond(self._render_one(request, obj, media), media)

    def _list_options(self, request: web.BaseRequest, *, watch: bool) -> ListOptions:
        own = self.resource.own_field_labels or \
            has_own_field_label_conversion(self.resource.group, self.resource.kind)
        return parse_list_options(request, self.resource.selectable_fields, watch=watch,
                                  own_field_labels=own)

    async def list(self, request: web.BaseRequest, info: RequestInfo) -> web.StreamResponse:
        media = self._media(request)
        options = self._list_options(request, watch=False)
        result = await self.store.list(info.namespace, options)
        rendered = self._render_list(request, result, media)
        note_response_object(request, rendered)
        return respond(rendered, media)

    async def watch(self, request: web.BaseRequest, info: RequestInfo) -> web.StreamResponse:
        media = self._media(request, watch=True)
        options = self._list_options(request, watch=True)
        include = include_object_option(request.query.get("includeObject"))
        version = self.store.version
        local = not version.identity and not version.remote
        encoder = WatchEncoder(self.resource.kind, self.resource.api_version, media,
                               self._watch_transform(media, include),
                               convert=version.from_storage if local else None)
        timeout = watch_timeout(options.timeout_seconds, self.min_request_timeout)
        try:
            events: Any = await self.store.watch(info.namespace, options,
                                                 deadline=time.monotonic() + timeout)
        except TooOldResourceVersionError as err:
            events = _one_event(error_event(err))
        if version.remote:
            events = ConvertedEvents(events, version.from_storage_many)
        return await stream(request, events, encoder, timeout, self.stopping)

    def _watch_transform(self, media: MediaType,
                         include: str) -> Callable[[dict, bool], dict] | None:
        if media.transform == "Table":
            columns = self.resource.columns

            def as_table(obj: dict, first: bool) -> dict:
                meta = {"resourceVersion": obj.get("metadata", {}).get("resourceVersion", "")}
                return table(columns, [obj], meta, include, headers=first,
                             version=media.transform_version)

            return as_table
        if media.transform in ("PartialObjectMetadata", "PartialObjectMetadataList"):
            return lambda obj, first: partial_metadata(obj, media.transform_version)
        return None

    # -- writes -----------------------------------------------------------------------------

    def write_options(self, request: web.BaseRequest, info: RequestInfo, kind: str,
                       first: builtins.list[status.Cause] | None = None) -> WriteOptions:
        """The options of a create, update or patch, validated as metav1's ValidateXOptions
        does: ``first`` (the patch type's own checks), then fieldManager, dryRun and
        fieldValidation, all reported together."""
        query = request.query
        dry_run = query.getall("dryRun", [])
        causes = list(first or [])
        manager = query.get("fieldManager", "")
        if len(manager) > 128:
            causes.append(status.Cause("FieldValueTooLong", "Too long: may not be more than 128 "
                                       "bytes", "fieldManager"))
        dry_run_problem = dry_run_cause(dry_run)
        if dry_run_problem is not None:
            causes.append(dry_run_problem)
        validation = query.get("fieldValidation", "")
        if validation not in FIELD_VALIDATION:
            causes.append(status.Cause(
                "FieldValueNotSupported", f"Unsupported value: {go_quote(validation)}: supported "
                "values: " + ", ".join(go_quote(v) for v in FIELD_VALIDATION), "fieldValidation"))
        if causes:
            raise status.invalid_options(kind, causes)
        return WriteOptions(dry_run=bool(dry_run), field_validation=validation or "Warn",
                            manager=manager or _manager_from_user_agent(request),
                            subresource=info.subresource, user=request_user(request))

    async def _body(self, request: web.BaseRequest,
                    options: WriteOptions) -> tuple[dict[str, Any], Findings]:
        """The request's object, and what strict decoding found in it (not looked for under
        fieldValidation=Ignore, as kube decodes without strictness then)."""
        obj, findings = decode_strict(
            await read_body(request), body_media_type(request), self.resource.kind,
            protobuf=self.resource.protobuf, typed=self.store.version.typed,
            strict=options.field_validation != "Ignore")
        note_request_object(request, obj)
        return obj, findings

    async def create(self, request: web.BaseRequest, info: RequestInfo) -> web.StreamResponse:
        if info.name:
            raise status.method_not_allowed("create", self.resource.plural, self.resource.group)
        options = self.write_options(request, info, "CreateOptions")
        obj, findings = await self._body(request, options)
        try:
            with reporting(findings):
                created = await self.store.create(info.namespace, obj, options)
        except StrictDecodingError as err:
            raise err.for_kind(self.resource.kind, self.resource.version) from None
        return self._answer(request, created, 201, options)

    async def update(self, request: web.BaseRequest, info: RequestInfo) -> web.StreamResponse:
        options = self.write_options(request, info, "UpdateOptions")
        obj, findings = await self._body(request, options)
        try:
            with reporting(findings):
                updated, created = await self.store.update(info.namespace, info.name, obj,
                                                           options)
        except StrictDecodingError as err:
            raise err.for_kind(self.resource.kind, self.resource.version) from None
        return self._answer(request, updated, 201 if created else 200, options)

    async def patch(self, request: web.BaseRequest, info: RequestInfo) -> web.StreamResponse:
        patch_type = body_media_type(request)
        allowed = self.resource.patch_types
        if allowed and patch_type not in allowed:  # served by its handler, not a route
            raise status.unsupported_media_type(allowed)
        if patch_type not in patches.PATCH_TYPES:
            raise patches.unsupported(request)
        force = request.query.get("force", "").lower() in ("true", "1")
        first = []
        if patch_type == patches.APPLY_PATCH:
            if not request.query.get("fieldManager"):
                first.append(status.Cause("FieldValueRequired", "Required value: is required "
                                          "for apply patch", "fieldManager"))
        elif "force" in request.query:
            first.append(status.Cause("FieldValueForbidden", "Forbidden: may not be specified "
                                      "for non-apply patch", "force"))
        options = self.write_options(request, info, "PatchOptions", first)
        options.force = force
        options.apply = patch_type == patches.APPLY_PATCH
        body = await read_body(request)
        parsed = patches.parse(body, patch_type, options.field_validation)
        mutate, patched = self._mutation(parsed, options, info)
        try:
            with reporting(parsed.findings):
                obj, created = await self.store.patch(
                    info.namespace, info.name, mutate, options,
                    may_create=patch_type == patches.APPLY_PATCH)
        except StrictDecodingError as err:  # kube's NewInvalid about the patch
            raise err.for_patch(parsed.shown(patched)) from None
        return self._answer(request, obj, 201 if created else 200, options)

    def _mutation(self, parsed: patches.Parsed, options: WriteOptions,
                  info: RequestInfo) -> tuple[Any, builtins.list[str]]:
        """The function that turns the current object into the patched one, and the list it
        leaves each result in, as it was before any check (for a strict decoding error)."""
        document = parsed.document
        schema = self.resource.schema_ref
        results: list[str] = []
        if parsed.patch_type == patches.APPLY_PATCH:
            applied = dict(document)
            _check_applied_identity(applied, self.resource, info)
            self.store.check_fields(applied, options, defaults=False)

            def apply(current: dict | None) -> dict:
                result = fieldmanager.apply(current, applied, schema, manager=options.manager,
                                            api_version=self.resource.api_version,
                                            force=options.force, subresource=info.subresource)
                parsed.report_apply_duplicates(options.field_validation, options.warnings)
                return result

            return apply, results

        keep = options.field_validation == "Strict"

        def mutate(current: dict | None) -> dict:
            if current is None:
                raise status.not_found(self.resource.plural, info.name, self.resource.group)
            if parsed.error is not None:
                raise parsed.error
            if parsed.patch_type == patches.JSON_PATCH:
                result = patches.apply_json_patch(current, document)
            elif parsed.patch_type == patches.MERGE_PATCH:
                result = patches.merge_patch(current, document)
            else:
                return patches.strategic_merge(current, document, schema)
            if keep:  # the patched JSON kube shows in a strict decoding error
                results[:] = [patches.patched_json(result)]
            return result

        return mutate, results

    # -- delete -----------------------------------------------------------------------------

    async def _delete_options(self, request: web.BaseRequest,
                              info: RequestInfo) -> tuple[DeleteOptions, WriteOptions]:
        body = await read_body(request)
        given: dict[str, Any] = decode_object(body, body_media_type(request)) if body.strip() \
            else {}
        problem = delete_options_error(given)
        if problem:
            raise status.bad_request(problem)
        query = request.query
        policy = given.get("propagationPolicy", query.get("propagationPolicy", ""))
        grace = given.get("gracePeriodSeconds", query.get("gracePeriodSeconds"))
        orphan = given.get("orphanDependents", query.get("orphanDependents"))
        dry_run = [v or "" for v in given.get("dryRun", ()) or query.getall("dryRun", ())]
        causes = []
        if policy and orphan is not None:
            causes.append(status.Cause("FieldValueInvalid", f"Invalid value: {go_quote(policy)}: "
                                       "orphanDependents and deletionPropagation cannot be "
                                       "both set", "propagationPolicy"))
        if policy and policy not in PROPAGATION:
            causes.append(status.Cause(
                "FieldValueNotSupported", f"Unsupported value: {go_quote(policy)}: supported "
                "values: " + ", ".join(go_quote(v) for v in (*PROPAGATION, "nil")),
                "propagationPolicy"))
        dry_run_problem = dry_run_cause(list(dry_run))
        if dry_run_problem is not None:
            causes.append(dry_run_problem)
        grace_seconds = _grace_period(grace)
        if causes:
            raise status.invalid_options("DeleteOptions", causes)
        given_pre = given.get("preconditions") or {}
        preconditions = Preconditions(uid=given_pre.get("uid"),
                                      resource_version=given_pre.get("resourceVersion")) \
            if given_pre else None
        write = WriteOptions(dry_run=bool(dry_run), subresource=info.subresource,
                             manager=_manager_from_user_agent(request),
                             user=request_user(request))
        return DeleteOptions(preconditions, policy, grace_seconds), write

    async def delete(self, request: web.BaseRequest, info: RequestInfo) -> web.StreamResponse:
        options, write = await self._delete_options(request, info)
        obj, gone = await self.store.delete(info.namespace, info.name, options, write)
        if not gone:
            return self._answer(request, obj, 200)
        details = {"name": info.name, "kind": self.resource.plural,
                   "uid": obj.get("metadata", {}).get("uid", "")}
        if self.resource.group:
            details["group"] = self.resource.group
        return self._answer(request, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                      "status": "Success", "details": details}, 200)

    async def delete_collection(self, request: web.BaseRequest,
                                info: RequestInfo) -> web.StreamResponse:
        list_options = self._list_options(request, watch=False)
        options, write = await self._delete_options(request, info)
        deleted = await self.store.delete_collection(info.namespace, list_options, options,
                                                     write)
        media = self._media(request)
        result = ListResult(items=deleted, revision=0)
        rendered = self._render_list(request, result, media)
        rendered["metadata"] = {}
        note_response_object(request, rendered)
        return respond(rendered, media)


def _response_object_recorded(request: web.BaseRequest) -> bool:
    """Whether the audit event of ``request`` keeps the response object (it must be whole)."""
    audit = record(request)
    return audit is not None and audit.level >= Level.REQUEST_RESPONSE


def _grace_period(grace: Any) -> int | None:
    """gracePeriodSeconds from the body (a number) or the query (read with strconv.ParseInt,
    whose error kube answers with 400)."""
    if grace is None:
        return None
    if isinstance(grace, str):
        value, error = parse_int(grace)
        if value is None:
            raise status.bad_request(error)
        return value
    if isinstance(grace, bool) or not isinstance(grace, int):
        raise status.bad_request(f"gracePeriodSeconds: invalid value {grace!r}")
    return grace


def _one_event(event: Any) -> Any:
    """An async iterator over one event (a watch that fails at once)."""

    class _One:
        def __init__(self) -> None:
            self.sent = False

        def __aiter__(self) -> _One:
            return self

        async def __anext__(self) -> Any:
            if self.sent:
                raise StopAsyncIteration
            self.sent = True
            return event

    return _One()


def _header_quoted(text: str) -> str:
    """A warning's text as kube's NewWarningHeader quotes it (backslashes and quotes escaped),
    line breaks as Go's header writer sends them (spaces)."""
    text = text.replace("\\", "\\\\").replace('"', '\\"')
    return text.replace("\r", " ").replace("\n", " ")


def _manager_from_user_agent(request: web.BaseRequest) -> str:
    """kube's default field manager: the User-Agent up to the first '/'."""
    agent = request.headers.get("User-Agent", "")
    return agent.split("/", 1)[0][:128] or "unknown"


def _check_applied_identity(applied: dict, resource: Any, info: RequestInfo) -> None:
    if applied.get("apiVersion") != resource.api_version or applied.get("kind") != resource.kind:
        raise status.bad_request(
            f"the apply configuration must set apiVersion {resource.api_version!r} and kind "
            f"{resource.kind!r}")
    meta = applied.get("metadata") or {}
    if meta.get("name") and meta["name"] != info.name:
        raise status.bad_request(f"the name of the object ({meta['name']}) does not match the "
                                 f"name on the URL ({info.name})")
    if resource.namespaced and meta.get("namespace") and meta["namespace"] != info.namespace:
        raise status.bad_request("the namespace of the provided object does not match the "
                                 "namespace sent on the request")
