"""Custom resources between versions: kube's ``None`` converter (only apiVersion changes) and
its webhook converter (apiextensions-apiserver v1.32 pkg/apiserver/conversion), with the
client kube's k8s.io/apiserver pkg/util/webhook builds for it.

A webhook is sent every object not already at the desired version in one ConversionReview
(the first of v1 and v1beta1 in ``conversionReviewVersions``), POSTed as kube's rest client
does (``?timeout=30s``, anonymous, no client certificate), and its answer is checked as kube
checks it; only labels and annotations of the converted objects may differ from the
originals, whose metadata is put back. Failures are ConversionErrors worded as kube words
them; ``as_status`` says what the client then gets.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import re
import ssl
from typing import Any

import orjson

from gateway.apiextensions.webhookconfig import REVIEW_VERSIONS, ca_bundle_error
from gateway.apimachinery import status
from gateway.apimachinery.gowords import TYPE_META_STRUCT, go_quote, json_kind, json_syntax_error
from gateway.apimachinery.labels import label_value_errors, qualified_name_errors
from gateway.apimachinery.uuids import new_uuid
from gateway.transport.clients import ClientManager
from gateway.transport.resolver import ServiceResolver
from gateway.transport.webhook import CallFailed, http_error, post, target
from gateway.transport.webhook import go_duration as go_duration  # the tests read it here

Object = dict[str, Any]

GROUP = "apiextensions.k8s.io"
#: kube's webhook rest.Config timeout (util/webhook authentication.go setGlobalDefaults).
TIMEOUT = 30.0
USER_AGENT = "kube-apiserver-admission"
_ANNOTATIONS_MAX_BYTES = 256 * 1024
_SCHEME = "k8s.io/apiserver/pkg/util/webhook/client.go:71"
_PKG = {"v1": "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1",
        "v1beta1": "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"}


class ConversionError(Exception):
    """A conversion that failed, in kube's words. ``internal`` marks the errors kube raises
    before any conversion (a converter it cannot build), which it serves as InternalError."""

    def __init__(self, message: str, *, internal: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.internal = internal


class _Failed(Exception):
    """A call or answer that failed: becomes ``conversion webhook for <gvk> failed: <why>``."""


_NOT_JSON = object()


def as_status(err: ConversionError, *, admission: bool = False) -> status.StatusError:
    """What the client gets. A conversion on the way to or from storage (get, list, watch,
    create, update) fails with the plain error: kube's codec and etcd3 store pass it on
    unwrapped, so ErrorToAPIStatus makes it a 500 with no reason and the bare message.
    Converting for an admission webhook of another version (the dispatchers'
    NewInternalError), or a converter kube cannot build, is a 500 InternalError:
    ``Internal error occurred: <message>``."""
    if admission or err.internal:
        return status.internal_error(err.message)
    return status.unknown_error(err.message)


# -- the converters -----------------------------------------------------------------------------


class Converter:
    """Objects of one CRD to another of its versions. Inputs are never changed (they may be
    shared cache objects); objects already at the version come back as they are."""

    async def convert(self, objects: list[Object], to_api_version: str) -> list[Object]:
        raise NotImplementedError


class NoneConverter(Converter):
    """``strategy: None``: only apiVersion changes."""

    async def convert(self, objects: list[Object], to_api_version: str) -> list[Object]:
        return [_nop(o, to_api_version) for o in objects]


def converter_for(crd: Object, clients: ClientManager, resolver: ServiceResolver) -> Converter:
    """The CRD's converter; ConversionError (internal) when kube could not build it, which
    then fails every request for the CRD."""
    conversion = (crd.get("spec") or {}).get("conversion") or {}
    strategy = conversion.get("strategy") or "None"
    if strategy == "None":
        return NoneConverter()
    if strategy == "Webhook":
        return WebhookConverter(crd, clients, resolver)
    name = (crd.get("metadata") or {}).get("name", "")
    raise ConversionError(f"unknown conversion strategy {go_quote(strategy)} for CRD {name}",
                          internal=True)


class WebhookConverter(Converter):
    """``strategy: Webhook``: a ConversionReview to ``spec.conversion.webhook``."""

    def __init__(self, crd: Object, clients: ClientManager, resolver: ServiceResolver, *,
                 timeout: float = TIMEOUT) -> None:
        webhook = ((crd.get("spec") or {}).get("conversion") or {}).get("webhook") or {}
        self.config: Object = webhook.get("clientConfig") or {}
        versions = webhook.get("conversionReviewVersions") or []
        self.review_version = next((v for v in versions if v in REVIEW_VERSIONS), None)
        self.clients, self.resolver, self.timeout = clients, resolver, timeout
        self.ca_bundle = _trusted(self.config.get("caBundle"))  # built now, as kube does

    async def convert(self, objects: list[Object], to_api_version: str) -> list[Object]:
        out = [_nop(o, to_api_version) if _is_empty(o) else o for o in objects]
        todo = [i for i, o in enumerate(objects) if not _is_empty(o)]
        if todo and self.review_version is None:
            raise ConversionError("no supported conversion review versions")
        todo = [i for i in todo if objects[i].get("apiVersion") != to_api_version]
        if not todo:
            return out
        sent = [objects[i] for i in todo]
        gvk = _gvk_string(sent[0])
        uid = new_uuid()
        try:
            converted = await self._call(uid, sent, to_api_version)
        except _Failed as err:
            raise ConversionError(f"conversion webhook for {gvk} failed: {err}") from None
        if len(converted) != len(sent):
            raise ConversionError(f"conversion webhook for {gvk} returned {len(converted)} "
                                  f"objects, expected {len(sent)}")
        for n, (i, item) in enumerate(zip(todo, converted, strict=True)):
            out[i] = _checked(objects[i], item, to_api_version, gvk, n, len(sent) == 1)
        return out

    async def _call(self, uid: str, objects: list[Object], to_api_version: str) -> list[Any]:
        version = self.review_version
        review = {"kind": "ConversionReview", "apiVersion": f"{GROUP}/{version}",
                  "request": {"uid": uid, "desiredAPIVersion": to_api_version,
                              "objects": objects},
                  "response": {"uid": "", "convertedObjects": None, "result": {"metadata": {}}}}
        code, content_type, data = await self._post(orjson.dumps(review))
        return _converted_objects(code, content_type, data, version or "v1", uid)

    async def _post(self, body: bytes) -> tuple[int, str, bytes]:
        headers = {"Content-Type": "application/json", "Accept": "application/json, */*",
                   "User-Agent": USER_AGENT}
        try:
            where = await target(self.config, self.resolver, self.timeout)
            return await post(self.clients, where, body, self.clients.context(self.ca_bundle),
                              self.timeout, headers)
        except CallFailed as err:
            raise _Failed(str(err)) from None


# -- the answer ---------------------------------------------------------------------------------


def _converted_objects(code: int, content_type: str, data: bytes, version: str,
                       uid: str) -> list[Any]:
    """The response's convertedObjects, after client-go's and the converter's checks."""
    if not 200 <= code <= 206:
        raise _Failed(http_error(code, content_type, data))
    if not data:
        raise _Failed(f"0-length response with status code: {code} and content type: "
                      f"{content_type or 'application/json'}")
    review = _decoded_review(data, version)
    if version == "v1":
        got = (_gv(review.get("apiVersion")), review.get("kind") or "")
        if got != ((GROUP, "v1"), "ConversionReview"):
            raise _Failed(f"expected webhook response of {GROUP}/v1, Kind=ConversionReview, "
                          f"got {got[0][0]}/{got[0][1]}, Kind={got[1]}")
    response = review.get("response")
    if response is None:
        raise _Failed("no response provided")
    if version == "v1" and (response.get("uid") or "") != uid:
        raise _Failed(f"expected response.uid={go_quote(uid)}, "
                      f"got {go_quote(response.get('uid') or '')}")
    result = response.get("result") or {}
    if result.get("status") != "Success":
        raise _Failed(result.get("message") or
                      f"response.result.status was '{result.get('status') or ''}', not 'Success'")
    return response.get("convertedObjects") or []


def _loads(data: bytes) -> Any:
    """The JSON value of ``data``; _NOT_JSON when it is not JSON."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        try:  # what orjson refuses and Go takes (invalid UTF-8, big integers)
            return json.loads(data.decode("utf-8", "replace"))
        except ValueError:
            return _NOT_JSON


def _decoded_review(data: bytes, version: str) -> Object:
    """The body as the JSON serializer decodes it into a ConversionReview of ``version``."""
    review = _loads(data)
    if review is _NOT_JSON:
        raise _Failed("couldn't get version/kind; json parse error: "
                      + (json_syntax_error(data) or "invalid JSON"))
    if review is not None and not isinstance(review, dict):
        raise _Failed(f"couldn't get version/kind; json parse error: json: cannot unmarshal "
                      f"{json_kind(review)} into Go value of type {TYPE_META_STRUCT}")
    review = review or {}
    for key in ("apiVersion", "kind"):
        if review.get(key) is not None and not isinstance(review[key], str):
            raise _Failed("couldn't get version/kind; json parse error: "
                          + _type_error(review[key], f".{key}", "string"))
    parsed = _parse_gv(review.get("apiVersion"))
    if parsed is None:
        raise _Failed(f"unexpected GroupVersion string: {review['apiVersion']}")
    group, gv_version = parsed
    kind = review.get("kind") or "ConversionReview"
    if not gv_version and group in ("", GROUP):
        group, gv_version = GROUP, version
    if (group, gv_version, kind) != (GROUP, version, "ConversionReview"):
        raise _Failed(_not_decodable(group, gv_version, kind, version))
    _check_types(review, version)
    return review


def _not_decodable(group: str, gv_version: str, kind: str, version: str) -> str:
    """A body of another kind: the scheme cannot convert it into the ConversionReview."""
    into = f"({_PKG[version]}) ConversionReview"
    if kind == "Status":
        return f"converting (k8s.io/apimachinery/pkg/apis/meta/v1) Status to {into}: " \
               "unknown conversion"
    if group == GROUP and kind == "ConversionReview" and gv_version in _PKG:
        return f"converting ({_PKG[gv_version]}) ConversionReview to {into}: unknown conversion"
    gv = f"{group}/{gv_version}" if group else gv_version
    return f"no kind {go_quote(kind)} is registered for version {go_quote(gv)} in scheme " \
           f"{go_quote(_SCHEME)}"


def _check_types(review: Object, version: str) -> None:
    """encoding/json's errors for the fields the converter reads, when of the wrong type."""
    response = review.get("response")
    if response is None:
        return
    if not isinstance(response, dict):
        raise _Failed(_type_error(response, "ConversionReview.response",
                                  f"{version}.ConversionResponse"))
    fields = {"uid": (str, "types.UID"), "convertedObjects": (list, "[]runtime.RawExtension"),
              "result": (dict, "v1.Status")}
    for key, (kind, go_type) in fields.items():
        value = response.get(key)
        if value is not None and not isinstance(value, kind):
            raise _Failed(_type_error(value, f"ConversionResponse.response.{key}", go_type))
    for key in ("status", "message"):
        value = (response.get("result") or {}).get(key)
        if value is not None and not isinstance(value, str):
            raise _Failed(_type_error(value, f"Status.response.result.{key}", "string"))


def _type_error(value: Any, where: str, go_type: str) -> str:
    return f"json: cannot unmarshal {json_kind(value)} into Go struct field {where} of type " \
           f"{go_type}"


# -- each converted object ----------------------------------------------------------------------


def _checked(original: Object, item: Any, to_api_version: str, gvk: str, index: int,
             single: bool) -> Object:
    """The converted object with the original's metadata, as kube's converter checks it."""
    invalid = (f"conversion webhook for {gvk} returned invalid object at index 0" if single
               else f"conversion webhook for {gvk} returned invalid converted object at index "
                    f"{index}")
    if (why := _undecodable(item)) is not None:
        raise ConversionError(why if single else f"{invalid}: {why}")
    expected, got = _gv_text(_gv(to_api_version)), _gv_text(_gv(item.get("apiVersion")))
    if expected != got:
        raise ConversionError(f"{invalid}: invalid groupVersion (expected {expected}, "
                              f"received {got})")
    if _kind(original) != _kind(item):
        raise ConversionError(f"{invalid}: invalid kind (expected {_kind(original)}, "
                              f"received {_kind(item)})")
    if (why := _changed_identity(original, item)) is not None:
        raise ConversionError(f"conversion webhook for {gvk} returned invalid object: {why}"
                              if single else f"{invalid}: {why}")
    try:
        _restore_meta(original, item)
    except ValueError as err:
        where = "" if single else f" in object at index {index}"
        raise ConversionError(f"conversion webhook for {gvk} returned invalid metadata{where}: "
                              f"{err}") from None
    return item


def _undecodable(item: Any) -> str | None:
    """Unstructured.UnmarshalJSON's complaint about an item, if any."""
    if item is None:  # a null RawExtension stays empty, and empty is not JSON
        return "unexpected end of JSON input"
    if not isinstance(item, dict):
        return f"json: cannot unmarshal {json_kind(item)} into Go value of type " \
               "map[string]interface {}"
    if not _kind(item):
        raw = orjson.dumps(item).decode()
        return f"Object 'Kind' is missing in '{raw}'"
    return None


def _changed_identity(original: Object, item: Object) -> str | None:
    """validateConvertedObject: kind, name, namespace and uid stay."""
    for what, key in (("name", "name"), ("namespace", "namespace"), ("UID", "uid")):
        before, after = _meta_string(original, key), _meta_string(item, key)
        if before != after:
            return f"must have the same {what}: {before} != {after}"
    return None


def _restore_meta(original: Object, item: Object) -> None:
    """restoreObjectMeta: the original metadata, with the converted labels and annotations
    (checked when they changed); ValueError says what is wrong."""
    if "metadata" not in item:
        raise ValueError("missing metadata in converted object")
    response = item["metadata"]
    if not isinstance(response, dict):
        raise ValueError(f"invalid metadata of type {_go_type(response)} in converted object")
    meta = copy.deepcopy(original.get("metadata") or {})
    for key in ("labels", "annotations"):
        value = response.get(key)
        if value is None:
            meta.pop(key, None)
            continue
        if not isinstance(value, dict):
            raise ValueError(f"invalid metadata.{key} of type {_go_type(value)} in converted "
                             "object")
        for k, v in value.items():
            if not isinstance(v, str):
                raise ValueError(f"metadata.{key}[{k}] must be a string, but is "
                                 f"{_go_type(v)} in converted object")
        if value != (meta.get(key) or {}) and (errors := _meta_map_errors(key, value)):
            unique = list(dict.fromkeys(errors))
            raise ValueError(unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]")
        meta[key] = value
    item["metadata"] = meta


def _meta_map_errors(key: str, values: dict[str, str]) -> list[str]:
    """ValidateLabels at metadata.labels, ValidateAnnotations at kube's metadata.annotation."""
    if key == "labels":
        path = "metadata.labels"
        return [f"{path}: Invalid value: {go_quote(x)}: {e}" for k, v in values.items()
                for x, errors in ((k, qualified_name_errors(k)), (v, label_value_errors(v)))
                for e in errors]
    path = "metadata.annotation"
    errors = [f"{path}: Invalid value: {go_quote(k)}: {e}" for k in values
              for e in qualified_name_errors(k.lower())]
    size = sum(len(k.encode()) + len(v.encode()) for k, v in values.items())
    if size > _ANNOTATIONS_MAX_BYTES:
        errors.append(f"{path}: Too long: may not be more than {_ANNOTATIONS_MAX_BYTES} bytes")
    return errors


# -- small pieces -------------------------------------------------------------------------------


def _is_empty(obj: Object) -> bool:
    """Only apiVersion and kind: kube converts these without the webhook."""
    return len(obj) == 2 and "apiVersion" in obj and "kind" in obj


def _nop(obj: Object, to_api_version: str) -> Object:
    return obj if obj.get("apiVersion") == to_api_version else {**obj, "apiVersion": to_api_version}


def _parse_gv(api_version: Any) -> tuple[str, str] | None:
    """schema.ParseGroupVersion; None where it fails."""
    text = api_version if isinstance(api_version, str) else ""
    if text in ("", "/"):
        return "", ""
    if text.count("/") > 1:
        return None
    group, _, version = text.rpartition("/")
    return group, version


def _gv(api_version: Any) -> tuple[str, str]:
    """An Unstructured's group and version: empty where apiVersion does not parse."""
    return _parse_gv(api_version) or ("", "")


def _gv_text(gv: tuple[str, str]) -> str:
    return f"{gv[0]}/{gv[1]}" if gv[0] else gv[1]


def _kind(obj: Object) -> str:
    """An Unstructured's GroupVersionKind().Kind: none when apiVersion does not parse."""
    kind = obj.get("kind")
    if not isinstance(kind, str) or _parse_gv(obj.get("apiVersion")) is None:
        return ""
    return kind


def _gvk_string(obj: Object) -> str:
    """schema.GroupVersionKind's String(): ``group/version, Kind=kind``."""
    group, version = _gv(obj.get("apiVersion"))
    return f"{group}/{version}, Kind={_kind(obj)}"


def _meta_string(obj: Object, key: str) -> str:
    meta = obj.get("metadata")
    value = meta.get(key) if isinstance(meta, dict) else None
    return value if isinstance(value, str) else ""


def _go_type(value: Any) -> str:
    """%T of a value Unstructured decoded from JSON."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    names = {float: "float64", str: "string", list: "[]interface {}",
             dict: "map[string]interface {}"}
    return names.get(type(value), type(value).__name__)


_PEM_CERT = re.compile(rb"-----BEGIN CERTIFICATE-----\r?\n.*?-----END CERTIFICATE-----", re.S)


def _trusted(ca_bundle: Any) -> bytes:
    """The certificates of ``caBundle`` (base64 PEM) that load, as Go's AppendCertsFromPEM
    keeps them; ConversionError (internal) when none does, as client-go refuses the bundle."""
    if not ca_bundle:
        return b""
    try:
        data = base64.b64decode(ca_bundle)
    except (binascii.Error, ValueError, TypeError):
        data = b""
    error = ca_bundle_error(data) if data else None
    if not data or error is not None:
        raise ConversionError(error or "unable to load root certificates: unable to parse "
                              "bytes as PEM block", internal=True)
    good = []
    for block in _PEM_CERT.findall(data):
        try:
            ssl.create_default_context(cadata=block.decode("ascii"))
        except (ssl.SSLError, ValueError, UnicodeDecodeError):
            continue
        good.append(block)
    return b"\n".join(good) + b"\n"


# -- connection errors in Go's words ------------------------------------------------------------
