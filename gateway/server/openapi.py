"""/openapi/v2 and /openapi/v3: the API described from the served resources and their schemas.

Definitions keep kube's names (io.k8s.api.core.v1.ConfigMap) and x-kubernetes-group-version-kind,
so ``kubectl explain``, ``kubectl apply`` and ``--validate=strict`` find what they look for.
/openapi/v2 is served as kube-openapi serves it: JSON, or gnostic's protobuf
(``application/com.github.proto-openapi.spec.v2@v1.0+protobuf``, what kubectl asks for), gzip
when accepted, ETag and 304 (``V2Spec``). /openapi/v3 is an index of one document per group
version, each at a URL with ``?hash=``; requested with its current hash a document is
cacheable for good, with an old hash it redirects.

Built-in kinds take their definitions from the process-wide table (gateway.schema.dsl); a
custom resource's come from its CRD version's schema (gateway.server.openapi_custom), and the
paths of both from gateway.server.openapi_paths. The documents are rebuilt after every change
of what is served (``OpenAPI.invalidate``): a CRD installed, re-installed with a new schema or
taken away changes the v2 ETag and the v3 hash of its group version.

The aggregator (gateway.aggregator.openapi) serves these paths with the backends' documents
merged in; this module describes and serves what the gateway itself serves.
"""

from __future__ import annotations

import copy
import functools
import gzip
import hashlib
import json
import time
from collections.abc import Callable
from email.utils import formatdate, parsedate_to_datetime
from typing import Any

from aiohttp import web
from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

from gateway.apimachinery import status
from gateway.registry.resource import ResourceDef
from gateway.schema.dsl import DEFINITIONS, META
from gateway.server.openapi_custom import definitions as custom_definitions
from gateway.server.openapi_custom import is_custom, list_definition_name, referenced
from gateway.server.openapi_paths import resource_paths
from gateway.storage.codec import dumps
from gateway.version import git_version

JSON = "application/json"
SHARED = (f"{META}.Status", f"{META}.DeleteOptions", f"{META}.WatchEvent", f"{META}.Patch")
DEFINITIONS.setdefault(f"{META}.Patch", {
    "type": "object", "description": "A patch body; its media type says how it applies."})


# -- schemas -----------------------------------------------------------------------------------


def _is_ref(node: dict) -> bool:
    """A reference, not a properties map that has a property named "$ref" (JSONSchemaProps
    has one)."""
    return isinstance(node.get("$ref"), str)


def _refs(node: Any, out: set[str]) -> None:
    if isinstance(node, dict):
        if _is_ref(node) and node["$ref"] not in out:
            out.add(node["$ref"])
            _refs(DEFINITIONS.get(node["$ref"]), out)
        for value in node.values():
            _refs(value, out)
    elif isinstance(node, list):
        for value in node:
            _refs(value, out)


def reachable(roots: list[str]) -> list[str]:
    names: set[str] = set()
    for root in roots:
        _refs({"$ref": root}, names)
    return sorted(n for n in names if n in DEFINITIONS)


def _render(node: Any, prefix: str, v3: bool) -> Any:
    """A schema with bare $refs turned into document refs (v3: allOf when described)."""
    if isinstance(node, list):
        return [_render(v, prefix, v3) for v in node]
    if not isinstance(node, dict):
        return node
    if _is_ref(node):
        ref = {"$ref": prefix + node["$ref"]}
        rest = {k: _render(v, prefix, v3) for k, v in node.items() if k != "$ref"}
        if not rest:
            return ref
        return {"allOf": [ref], **rest} if v3 else {**ref, **rest}
    return {k: _render(v, prefix, v3) for k, v in node.items()}


# -- documents --------------------------------------------------------------------------------


def _info() -> dict[str, str]:
    return {"title": "Kubernetes", "version": git_version()}


def _served(resources: list[ResourceDef]) -> tuple[list[ResourceDef], list[str]]:
    """The resources described (those with a definition name) and the roots of the table's
    definitions they reach."""
    served = [r for r in resources if r.schema]
    roots = list(SHARED)
    for resource in served:
        if is_custom(resource):
            roots.extend(referenced(resource))
        else:
            roots += [resource.schema, list_definition_name(resource)]
    return served, roots


def v2_document(resources: list[ResourceDef]) -> dict[str, Any]:
    served, roots = _served(resources)
    paths: dict[str, Any] = {}
    definitions = {n: _render(DEFINITIONS[n], "#/definitions/", False)
                   for n in reachable(roots)}
    for resource in served:
        paths.update(resource_paths(resource, v3=False))
        if is_custom(resource):
            definitions.update(custom_definitions(resource, v2=True))
    return {"swagger": "2.0", "info": _info(), "paths": paths,
            "definitions": dict(sorted(definitions.items()))}


def v3_document(resources: list[ResourceDef]) -> dict[str, Any]:
    served, roots = _served(resources)
    paths: dict[str, Any] = {}
    schemas = {n: _render(copy.deepcopy(DEFINITIONS[n]), "#/components/schemas/", True)
               for n in reachable(roots)}
    for resource in served:
        paths.update(resource_paths(resource, v3=True))
        if is_custom(resource):
            schemas.update(custom_definitions(resource, v2=False))
    return {"openapi": "3.0.0", "info": _info(), "paths": paths,
            "components": {"schemas": dict(sorted(schemas.items()))}}


def gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


class OpenAPI:
    """Serves the gateway's own OpenAPI documents; rebuilt when the served resources change
    (``invalidate``), which is told to whoever listens (``on_change``)."""

    def __init__(self, resources: Callable[[], list[ResourceDef]]) -> None:
        self._resources = resources
        self._cache: dict[str, tuple[bytes, str]] = {}
        self._v2: V2Spec | None = None
        self._listeners: list[Callable[[], None]] = []

    def on_change(self, callback: Callable[[], None]) -> None:
        self._listeners.append(callback)

    def invalidate(self) -> None:
        self._cache.clear()
        self._v2 = None
        for callback in self._listeners:
            callback()

    def _by_group_version(self) -> dict[str, list[ResourceDef]]:
        out: dict[str, list[ResourceDef]] = {}
        for resource in self._resources():
            out.setdefault(gv_path(resource.group, resource.version), []).append(resource)
        return out

    def _document(self, key: str, build: Callable[[], Any]) -> tuple[bytes, str]:
        cached = self._cache.get(key)
        if cached is None:
            body = dumps(build())
            cached = self._cache[key] = (body, hashlib.sha512(body).hexdigest()[:64].upper())
        return cached

    def v2_spec(self) -> V2Spec:
        """The v2 document of everything served here."""
        if self._v2 is None:
            self._v2 = V2Spec(v2_document(self._resources()))
        return self._v2

    async def v2(self, request: web.BaseRequest) -> web.StreamResponse:
        return self.v2_spec().serve(request)

    def v3_paths(self) -> dict[str, dict[str, str]]:
        """The /openapi/v3 index entries: group version path → its serverRelativeURL."""
        paths = {}
        for gv, resources in self._by_group_version().items():
            _, digest = self._document(f"v3/{gv}", functools.partial(v3_document, resources))
            paths[gv] = {"serverRelativeURL": f"/openapi/v3/{gv}?hash={digest}"}
        return paths

    def serves_v3(self, gv: str) -> bool:
        return gv in self._by_group_version()

    async def v3_index(self, request: web.BaseRequest) -> web.StreamResponse:
        return web.Response(body=dumps({"paths": self.v3_paths()}), content_type=JSON)

    async def v3_group_version(self, request: web.BaseRequest) -> web.StreamResponse:
        gv = request.path[len("/openapi/v3/"):].strip("/")
        resources = self._by_group_version().get(gv)
        if resources is None:
            raise status.not_found()
        body, digest = self._document(f"v3/{gv}", lambda: v3_document(resources))
        wanted = request.query.get("hash")
        if wanted is not None and wanted != digest:
            return web.Response(status=301, headers={
                "Location": f"/openapi/v3/{gv}?hash={digest}"})
        return _cacheable(request, body, digest, immutable=wanted is not None)


def _cacheable(request: web.BaseRequest, body: bytes, digest: str, *,
               immutable: bool) -> web.Response:
    etag = f'"{digest}"'
    headers = {"ETag": etag, "Vary": "Accept",
               "Cache-Control": "public, immutable" if immutable else "no-cache, private"}
    if immutable:
        headers["Expires"] = "Thu, 31 Dec 2099 23:59:59 GMT"
    if etag in request.headers.get("If-None-Match", ""):
        return web.Response(status=304, headers=headers)
    return web.Response(body=body, content_type=JSON, headers=headers)


# -- serving /openapi/v2 -----------------------------------------------------------------------

PROTOBUF_V2 = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
#: The older name kubectl asks for; answered with PROTOBUF_V2 as its Content-Type.
PROTOBUF_V2_DEPRECATED = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
#: What /openapi/v2 offers, in kube-openapi's order: (media type, protobuf?).
_V2_OFFERS = ((JSON, False), (PROTOBUF_V2_DEPRECATED, True), (PROTOBUF_V2, True))
#: Bodies shorter than this are not compressed (gziphandler's DefaultMinSize).
GZIP_MIN_SIZE = 1400


def _accept_clauses(header: str) -> list[tuple[str, str]]:
    """(type, subtype) of each Accept entry, best first: higher q, then the more specific
    (goautoneg's order). Entries with q=0 are refused ones and left out."""
    clauses = []
    for index, part in enumerate(header.split(",")):
        mime, *params = [p.strip() for p in part.split(";")]
        kind, _, subtype = mime.lower().partition("/")
        if not kind:
            continue
        q = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if q > 0:
            clauses.append((-q, kind == "*", subtype == "*", index, kind, subtype or "*"))
    clauses.sort()
    return [(kind, subtype) for *_, kind, subtype in clauses]


def v2_media(accept: str) -> tuple[str, bool] | None:
    """The (Content-Type, protobuf?) to answer an Accept header with, None when nothing
    offered is acceptable (406)."""
    for kind, subtype in _accept_clauses(accept or "*/*"):
        for offer, proto in _V2_OFFERS:
            offer_type, _, offer_subtype = offer.partition("/")
            if kind in ("*", offer_type) and subtype in ("*", offer_subtype):
                return (PROTOBUF_V2 if proto else JSON), proto
    return None


def _accepts_gzip(header: str) -> bool:
    for part in header.split(","):
        coding, *params = [p.strip() for p in part.split(";")]
        if coding.lower() != "gzip":
            continue
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    return float(value) > 0
                except ValueError:
                    return False
        return True
    return False


def _etag_matches(header: str, etag: str) -> bool:
    """Go's If-None-Match test (weak comparison): "*" or any listed tag."""
    for candidate in header.split(","):
        candidate = candidate.strip()
        if candidate == "*" or candidate.removeprefix("W/") == etag:
            return True
    return False


class V2Spec:
    """One OpenAPI v2 document as kube-openapi serves it: JSON, or gnostic protobuf when asked;
    gzip when the client accepts it; ETag (the quoted SHA-512 of the JSON, the same for both
    forms), Last-Modified, 304 on a matching If-None-Match (or a not-newer If-Modified-Since
    without one). The protobuf and gzip forms are made on first use and kept."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.json = dumps(document)
        self.etag = '"' + hashlib.sha512(self.json).hexdigest().upper() + '"'
        self.modified = int(time.time())
        self._proto: bytes | None = None
        self._gzipped: dict[bool, bytes] = {}

    @property
    def proto(self) -> bytes:
        if self._proto is None:
            self._proto = v2_protobuf(self.document)
        return self._proto

    def body(self, proto: bool, *, gzipped: bool = False) -> bytes:
        plain = self.proto if proto else self.json
        if not gzipped:
            return plain
        packed = self._gzipped.get(proto)
        if packed is None:
            packed = self._gzipped[proto] = gzip.compress(plain, compresslevel=6, mtime=0)
        return packed

    def serve(self, request: web.BaseRequest) -> web.Response:
        headers = {"Vary": "Accept-Encoding, Accept"}
        media = v2_media(request.headers.get("Accept", ""))
        if media is None:
            return web.Response(status=406, headers=headers)
        content_type, proto = media
        headers["ETag"] = self.etag
        none_match = request.headers.get("If-None-Match")
        if none_match is not None:
            if _etag_matches(none_match, self.etag):
                return web.Response(status=304, headers=headers)
        elif self._not_modified_since(request.headers.get("If-Modified-Since")):
            return web.Response(status=304, headers=headers)
        headers["Last-Modified"] = formatdate(self.modified, usegmt=True)
        headers["Content-Type"] = content_type
        plain = self.body(proto)
        if len(plain) >= GZIP_MIN_SIZE and _accepts_gzip(request.headers.get(
                "Accept-Encoding", "")):
            headers["Content-Encoding"] = "gzip"
            return web.Response(body=self.body(proto, gzipped=True), headers=headers)
        return web.Response(body=plain, headers=headers)

    def _not_modified_since(self, header: str | None) -> bool:
        if not header:
            return False
        try:
            since = parsedate_to_datetime(header)
        except (TypeError, ValueError):
            return False
        return since.tzinfo is not None and self.modified <= since.timestamp()


# -- /openapi/v2 as protobuf -------------------------------------------------------------------
#
# kube-openapi answers /openapi/v2 in gnostic's protobuf form (package openapi.v2) when asked;
# kubectl reads nothing else there. The messages are described below in a compact table (field
# name, number, type; "*" repeated, "?" a member of the message's one oneof, named "oneof") and
# turned into descriptors at import, so encoding uses the protobuf runtime itself. The JSON
# document is converted as gnostic's compiler converts it: camelCase keys to the fields of the
# same name, "$ref" to ``_ref``, every ``x-`` key to a vendor extension whose value is its YAML
# text (JSON is YAML), maps to lists of named entries in document order.

_STRING, _BOOL, _DOUBLE, _INT64 = "string", "bool", "double", "int64"
_SCALARS = {_STRING: 9, _BOOL: 8, _DOUBLE: 1, _INT64: 3}  # FieldDescriptorProto types
_EXT = ("vendor_extension", "*NamedAny")
_PRIMITIVE = [("type", _STRING), ("format", _STRING), ("items", "PrimitivesItems"),
              ("collection_format", _STRING), ("default", "Any"), ("maximum", _DOUBLE),
              ("exclusive_maximum", _BOOL), ("minimum", _DOUBLE), ("exclusive_minimum", _BOOL),
              ("max_length", _INT64), ("min_length", _INT64), ("pattern", _STRING),
              ("max_items", _INT64), ("min_items", _INT64), ("unique_items", _BOOL),
              ("enum", "*Any"), ("multiple_of", _DOUBLE)]
_PARAM_HEAD = [("required", _BOOL), ("in", _STRING), ("description", _STRING),
               ("name", _STRING)]
_WITH_EMPTY = [*_PARAM_HEAD, ("allow_empty_value", _BOOL), *_PRIMITIVE, _EXT]
_WITHOUT_EMPTY = [*_PARAM_HEAD, *_PRIMITIVE, _EXT]
_OAUTH = {"AccessCode": ["authorization_url", "token_url"], "Application": ["token_url"],
          "Implicit": ["authorization_url"], "Password": ["token_url"]}


def _named(value: str) -> list[tuple[str, str]]:
    return [("name", _STRING), ("value", value)]


def _fields(spec: str) -> list[tuple[str, str]]:
    """ "a:string b:*Schema" as [(a, string), (b, *Schema)]."""
    return [tuple(item.split(":")) for item in spec.split()]  # type: ignore[misc]


#: Message name → fields in field-number order (numbers are 1, 2, 3... in every message).
_V2_MESSAGES: dict[str, list[tuple[str, str]]] = {
    "AdditionalPropertiesItem": _fields("schema:?Schema boolean:?bool"),
    "Any": _fields("value:.google.protobuf.Any yaml:string"),
    "ApiKeySecurity": [*_fields("type:string name:string in:string description:string"),
                       _EXT],
    "BasicAuthenticationSecurity": [*_fields("type:string description:string"), _EXT],
    "BodyParameter": [*_fields("description:string name:string in:string required:bool "
                               "schema:Schema"), _EXT],
    "Contact": [*_fields("name:string url:string email:string"), _EXT],
    "Default": _fields("additional_properties:*NamedAny"),
    "Definitions": _fields("additional_properties:*NamedSchema"),
    "Document": [*_fields(
        "swagger:string info:Info host:string base_path:string schemes:*string "
        "consumes:*string produces:*string paths:Paths definitions:Definitions "
        "parameters:ParameterDefinitions responses:ResponseDefinitions "
        "security:*SecurityRequirement security_definitions:SecurityDefinitions tags:*Tag "
        "external_docs:ExternalDocs"), _EXT],
    "Examples": _fields("additional_properties:*NamedAny"),
    "ExternalDocs": [*_fields("description:string url:string"), _EXT],
    "FileSchema": [*_fields(
        "format:string title:string description:string default:Any required:*string "
        "type:string read_only:bool external_docs:ExternalDocs example:Any"), _EXT],
    "FormDataParameterSubSchema": _WITH_EMPTY,
    "Header": [*_PRIMITIVE, ("description", _STRING), _EXT],
    "HeaderParameterSubSchema": _WITHOUT_EMPTY,
    "Headers": _fields("additional_properties:*NamedHeader"),
    "Info": [*_fields("title:string version:string description:string "
                      "terms_of_service:string contact:Contact license:License"), _EXT],
    "ItemsItem": _fields("schema:*Schema"),
    "JsonReference": _fields("_ref:string description:string"),
    "License": [*_fields("name:string url:string"), _EXT],
    "NamedAny": _named("Any"),
    "NamedHeader": _named("Header"),
    "NamedParameter": _named("Parameter"),
    "NamedPathItem": _named("PathItem"),
    "NamedResponse": _named("Response"),
    "NamedResponseValue": _named("ResponseValue"),
    "NamedSchema": _named("Schema"),
    "NamedSecurityDefinitionsItem": _named("SecurityDefinitionsItem"),
    "NamedString": _named(_STRING),
    "NamedStringArray": _named("StringArray"),
    "NonBodyParameter": _fields(
        "header_parameter_sub_schema:?HeaderParameterSubSchema "
        "form_data_parameter_sub_schema:?FormDataParameterSubSchema "
        "query_parameter_sub_schema:?QueryParameterSubSchema "
        "path_parameter_sub_schema:?PathParameterSubSchema"),
    **{f"Oauth2{flow}Security": [
        *_fields("type:string flow:string scopes:Oauth2Scopes"),
        *[(url, _STRING) for url in urls], ("description", _STRING), _EXT]
       for flow, urls in _OAUTH.items()},
    "Oauth2Scopes": _fields("additional_properties:*NamedString"),
    "Operation": [*_fields(
        "tags:*string summary:string description:string external_docs:ExternalDocs "
        "operation_id:string produces:*string consumes:*string parameters:*ParametersItem "
        "responses:Responses schemes:*string deprecated:bool "
        "security:*SecurityRequirement"), _EXT],
    "Parameter": _fields("body_parameter:?BodyParameter non_body_parameter:?NonBodyParameter"),
    "ParameterDefinitions": _fields("additional_properties:*NamedParameter"),
    "ParametersItem": _fields("parameter:?Parameter json_reference:?JsonReference"),
    "PathItem": [("_ref", _STRING), *[(verb, "Operation") for verb in (
        "get", "put", "post", "delete", "options", "head", "patch")],
                 ("parameters", "*ParametersItem"), _EXT],
    "PathParameterSubSchema": _WITHOUT_EMPTY,
    "Paths": [_EXT, ("path", "*NamedPathItem")],
    "PrimitivesItems": [*_PRIMITIVE, _EXT],
    "Properties": _fields("additional_properties:*NamedSchema"),
    "QueryParameterSubSchema": _WITH_EMPTY,
    "Response": [*_fields("description:string schema:SchemaItem headers:Headers "
                          "examples:Examples"), _EXT],
    "ResponseDefinitions": _fields("additional_properties:*NamedResponse"),
    "ResponseValue": _fields("response:?Response json_reference:?JsonReference"),
    "Responses": [("response_code", "*NamedResponseValue"), _EXT],
    "Schema": [*_fields(
        "_ref:string format:string title:string description:string default:Any "
        "multiple_of:double maximum:double exclusive_maximum:bool minimum:double "
        "exclusive_minimum:bool max_length:int64 min_length:int64 pattern:string "
        "max_items:int64 min_items:int64 unique_items:bool max_properties:int64 "
        "min_properties:int64 required:*string enum:*Any "
        "additional_properties:AdditionalPropertiesItem type:TypeItem items:ItemsItem "
        "all_of:*Schema properties:Properties discriminator:string read_only:bool xml:Xml "
        "external_docs:ExternalDocs example:Any"), _EXT],
    "SchemaItem": _fields("schema:?Schema file_schema:?FileSchema"),
    "SecurityDefinitions": _fields("additional_properties:*NamedSecurityDefinitionsItem"),
    "SecurityDefinitionsItem": _fields(
        "basic_authentication_security:?BasicAuthenticationSecurity "
        "api_key_security:?ApiKeySecurity oauth2_implicit_security:?Oauth2ImplicitSecurity "
        "oauth2_password_security:?Oauth2PasswordSecurity "
        "oauth2_application_security:?Oauth2ApplicationSecurity "
        "oauth2_access_code_security:?Oauth2AccessCodeSecurity"),
    "SecurityRequirement": _fields("additional_properties:*NamedStringArray"),
    "StringArray": _fields("value:*string"),
    "Tag": [*_fields("name:string description:string external_docs:ExternalDocs"), _EXT],
    "TypeItem": _fields("value:*string"),
    "VendorExtension": _fields("additional_properties:*NamedAny"),
    "Xml": [*_fields("name:string namespace:string prefix:string attribute:bool "
                     "wrapped:bool"), _EXT],
}
V2_PACKAGE = "openapi.v2"


def _v2_file() -> descriptor_pb2.FileDescriptorProto:
    """The descriptor of gnostic's openapiv2/OpenAPIv2.proto, from the table above."""
    file = descriptor_pb2.FileDescriptorProto(
        name="openapiv2/OpenAPIv2.proto", package=V2_PACKAGE, syntax="proto3",
        dependency=["google/protobuf/any.proto"])
    for name, fields in _V2_MESSAGES.items():
        message = file.message_type.add(name=name)
        if any(kind.startswith("?") for _, kind in fields):
            message.oneof_decl.add(name="oneof")
        for number, (field_name, kind) in enumerate(fields, start=1):
            field = message.field.add(name=field_name, number=number, json_name=field_name)
            field.label = field.LABEL_OPTIONAL
            if kind.startswith("*"):
                field.label, kind = field.LABEL_REPEATED, kind[1:]
            elif kind.startswith("?"):
                field.oneof_index, kind = 0, kind[1:]
            if kind in _SCALARS:
                field.type = _SCALARS[kind]  # type: ignore[assignment]
            else:
                field.type = field.TYPE_MESSAGE
                field.type_name = kind if kind.startswith(".") else f".{V2_PACKAGE}.{kind}"
    return file


_V2_POOL = descriptor_pool.DescriptorPool()
_V2_POOL.AddSerializedFile(any_pb2.DESCRIPTOR.serialized_pb)
_V2_POOL.Add(_v2_file())


#: A message of gnostic's OpenAPI v2 types: its class is made at run time from the descriptor
#: above (v2_message), so its fields are not known to the type checker.
V2Message = Any


def v2_message(name: str) -> type[Message]:
    """The message class of ``openapi.v2.<name>`` (gnostic's type of that name)."""
    return message_factory.GetMessageClass(
        _V2_POOL.FindMessageTypeByName(f"{V2_PACKAGE}.{name}"))


def _json_name(field: str) -> str:
    if field == "_ref":
        return "$ref"
    head, *rest = field.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


#: Per message: JSON key → (field name, element type, repeated).
_V2_KEYS: dict[str, dict[str, tuple[str, str, bool]]] = {
    name: {_json_name(field): (field, kind.lstrip("*?"), kind.startswith("*"))
           for field, kind in fields if field != "vendor_extension"}
    for name, fields in _V2_MESSAGES.items()}
_V2_HAS_EXT = frozenset(name for name, fields in _V2_MESSAGES.items() if _EXT in fields)
#: Messages that hold a JSON object as a list of named entries, and their values' type.
_V2_MAPS = {name: dict(_V2_MESSAGES[fields[0][1][1:]])["value"]
            for name, fields in _V2_MESSAGES.items()
            if [f for f, _ in fields] == ["additional_properties"]}
_SECURITY = {"basic": "basic_authentication_security", "apiKey": "api_key_security"}
_OAUTH_FLOWS = {"implicit": "oauth2_implicit_security", "password": "oauth2_password_security",
                "application": "oauth2_application_security",
                "accessCode": "oauth2_access_code_security"}
_NON_BODY = {"header": "header_parameter_sub_schema", "formData":
             "form_data_parameter_sub_schema", "query": "query_parameter_sub_schema",
             "path": "path_parameter_sub_schema"}


def _yaml_text(value: Any) -> str:
    """An extension's or example's value as gnostic keeps it: YAML text (here JSON's flow
    form, which every YAML parser reads the same)."""
    try:
        return dumps(value).decode() + "\n"
    except TypeError:  # an integer beyond 64 bits: the standard library writes those
        return json.dumps(value, ensure_ascii=False) + "\n"


def _fill(message: V2Message, name: str, value: Any) -> None:
    """Set ``message`` (of type ``openapi.v2.<name>``) from the JSON ``value``."""
    special = _V2_SPECIAL.get(name)
    if special is not None:
        special(message, value)
        return
    if name in _V2_MAPS:
        if isinstance(value, dict):
            _fill_entries(message.additional_properties, _V2_MAPS[name], value)
        return
    if not isinstance(value, dict):
        return
    keys = _V2_KEYS[name]
    for key, item in value.items():
        if key.startswith("x-") and name in _V2_HAS_EXT:
            _extension(message, key, item)
            continue
        spec = keys.get(key)
        if spec is not None:
            _set(message, spec, item)


def _set(message: V2Message, spec: tuple[str, str, bool], value: Any) -> None:
    field, kind, repeated = spec
    if repeated:
        if not isinstance(value, list):
            return
        target = getattr(message, field)
        for item in value:
            if kind in _SCALARS:
                if _scalar_ok(kind, item):
                    target.append(item)
            else:
                _fill(target.add(), kind, item)
    elif kind in _SCALARS:
        if _scalar_ok(kind, value):
            setattr(message, field, value)
    elif value is not None:
        sub = getattr(message, field)
        sub.SetInParent()  # present even when empty: "properties": {} is not "no properties"
        _fill(sub, kind, value)


def _scalar_ok(kind: str, value: Any) -> bool:
    if kind == _STRING:
        return isinstance(value, str)
    if kind == _BOOL:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == _INT64:
        return isinstance(value, int) and -(2**63) <= value < 2**63
    return isinstance(value, float) or (isinstance(value, int) and abs(value) < 2**1000)


def _extension(message: V2Message, key: str, value: Any) -> None:
    entry = message.vendor_extension.add(name=key)
    entry.value.yaml = _yaml_text(value)


def _fill_entries(entries: Any, kind: str, value: dict[str, Any]) -> None:
    for key, item in value.items():
        entry = entries.add(name=key)
        if kind == _STRING:
            if isinstance(item, str):
                entry.value = item
        else:
            _fill(entry.value, kind, item)


def _type_item(message: V2Message, value: Any) -> None:
    _set(message, ("value", _STRING, True), [value] if isinstance(value, str) else value)


def _items_item(message: V2Message, value: Any) -> None:
    _set(message, ("schema", "Schema", True), [value] if isinstance(value, dict) else value)


def _additional_properties(message: V2Message, value: Any) -> None:
    if isinstance(value, bool):
        message.boolean = value
    elif isinstance(value, dict):
        _set(message, ("schema", "Schema", False), value)


def _schema_item(message: V2Message, value: Any) -> None:
    if isinstance(value, dict):
        field = "file_schema" if value.get("type") == "file" else "schema"
        _set(message, (field, "FileSchema" if field == "file_schema" else "Schema", False),
             value)


def _reference_or(field: str, kind: str) -> Callable[[V2Message, Any], None]:
    def fill(message: V2Message, value: Any) -> None:
        if not isinstance(value, dict):
            return
        if _is_ref(value):
            _set(message, ("json_reference", "JsonReference", False), value)
        else:
            _set(message, (field, kind, False), value)
    return fill


def _parameter(message: V2Message, value: Any) -> None:
    if not isinstance(value, dict):
        return
    if value.get("in") == "body":
        _set(message, ("body_parameter", "BodyParameter", False), value)
    elif value.get("in") in _NON_BODY:
        _set(message, ("non_body_parameter", "NonBodyParameter", False), value)


def _non_body_parameter(message: V2Message, value: Any) -> None:
    field = _NON_BODY[value["in"]]
    _set(message, (field, _V2_TYPE_OF[("NonBodyParameter", field)], False), value)


def _security_definition(message: V2Message, value: Any) -> None:
    if not isinstance(value, dict):
        return
    kind = value.get("type")
    field = _OAUTH_FLOWS.get(value.get("flow", "")) if kind == "oauth2" else \
        _SECURITY.get(kind or "")
    if field is not None:
        _set(message, (field, _V2_TYPE_OF[("SecurityDefinitionsItem", field)], False), value)


def _string_array(message: V2Message, value: Any) -> None:
    _set(message, ("value", _STRING, True), value)


def _any(message: V2Message, value: Any) -> None:
    message.yaml = _yaml_text(value)


def _keyed(field: str, kind: str, prefix: str | None) -> Callable[[V2Message, Any], None]:
    """Paths and Responses: ``x-`` keys are extensions, the others (those starting with
    ``prefix``, when given) named entries."""
    def fill(message: V2Message, value: Any) -> None:
        if not isinstance(value, dict):
            return
        for key, item in value.items():
            if key.startswith("x-"):
                _extension(message, key, item)
            elif prefix is None or key.startswith(prefix):
                _fill_entries(getattr(message, field), kind, {key: item})
    return fill


_V2_TYPE_OF = {(name, field): kind.lstrip("*?") for name, fields in _V2_MESSAGES.items()
               for field, kind in fields}
_V2_SPECIAL: dict[str, Callable[[V2Message, Any], None]] = {
    "TypeItem": _type_item,
    "ItemsItem": _items_item,
    "AdditionalPropertiesItem": _additional_properties,
    "SchemaItem": _schema_item,
    "ParametersItem": _reference_or("parameter", "Parameter"),
    "ResponseValue": _reference_or("response", "Response"),
    "Parameter": _parameter,
    "NonBodyParameter": _non_body_parameter,
    "SecurityDefinitionsItem": _security_definition,
    "StringArray": _string_array,
    "Any": _any,
    "Paths": _keyed("path", "PathItem", "/"),
    "Responses": _keyed("response_code", "ResponseValue", None),
}


def v2_protobuf(document: dict[str, Any]) -> bytes:
    """The OpenAPI v2 ``document`` as gnostic's openapi.v2.Document, serialized."""
    message = v2_message("Document")()
    _fill(message, "Document", document)
    return message.SerializeToString(deterministic=True)
