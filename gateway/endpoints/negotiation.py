"""Content negotiation: which representation a client asked for, and writing it.

As kube-apiserver's negotiation does: the Accept clauses, best first (by q, then a concrete
type before a wildcard), each tried against the serializers in kube's order (JSON, YAML,
protobuf); the first the endpoint allows wins. An endpoint allows:

- the object itself in JSON and YAML, and in protobuf when the kind has a protobuf form
  (built-in kinds whose messages are in protobuf_types; custom resources have none);
- a meta.k8s.io/v1 (or v1beta1) Table in JSON or YAML, PartialObjectMetadata(List) in every
  format, custom resources included (``application/vnd.kubernetes.protobuf;as=
  PartialObjectMetadataList;g=meta.k8s.io;v=v1`` is how client-go's metadata client asks).

Nothing allowed is 406 with kube's list of its serializers. The Content-Type written is the
serializer's own (``application/json`` for a Table too, as kube writes it). A Status error is
negotiated the same way without transforms (kube's ErrorNegotiated), so a client that asked for
protobuf first gets its errors in protobuf.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from aiohttp import web

from gateway.apimachinery import status
from gateway.endpoints.protobuf import PROTOBUF
from gateway.endpoints.protobuf_encode import encode_object
from gateway.storage.codec import dumps

JSON = "application/json"
YAML = "application/yaml"
PROTOBUF_STREAM = PROTOBUF + ";stream=watch"
META_GROUP = "meta.k8s.io"
TRANSFORMS = frozenset({"Table", "PartialObjectMetadata", "PartialObjectMetadataList"})
#: kube's serializers in its order, as (format, type, subtype); YAML's other spellings are
#: read as YAML too, as the gateway always has.
_SERIALIZERS = (("json", "application", "json"), ("yaml", "application", "yaml"),
                ("protobuf", "application", "vnd.kubernetes.protobuf"))
_YAML_ALIASES = frozenset({("application", "x-yaml"), ("text", "yaml")})
_CONTENT_TYPES = {"json": JSON, "yaml": YAML, "protobuf": PROTOBUF}


@dataclass(frozen=True)
class MediaType:
    """The representation to answer with."""

    format: str = "json"  # json, yaml or protobuf
    transform: str = ""  # "", Table, PartialObjectMetadata, PartialObjectMetadataList
    transform_version: str = "v1"

    @property
    def content_type(self) -> str:
        return _CONTENT_TYPES[self.format]

    @property
    def stream_content_type(self) -> str:
        """A watch's: JSON as it is, protobuf with ``;stream=watch`` (kube's framing)."""
        return PROTOBUF_STREAM if self.format == "protobuf" else self.content_type


@dataclass(frozen=True)
class _Clause:
    type: str
    subtype: str
    params: dict[str, str]
    q: float


def _goautoneg_less(a: _Clause, b: _Clause) -> bool:
    """goautoneg's order of clauses: higher q first, then a concrete type or subtype."""
    if a.q > b.q:
        return True
    if a.type != "*" and b.type == "*":
        return True
    return a.subtype != "*" and b.subtype == "*"


def _parse_accept(header: str) -> list[_Clause]:
    """The Accept clauses in the order kube tries them (goautoneg's sort, which Go runs as an
    insertion sort for the short lists Accept headers are); q=0 clauses are refused."""
    clauses: list[_Clause] = []
    for part in header.split(","):
        pieces = [p.strip() for p in part.split(";")]
        mime = pieces[0].lower()
        if not mime:
            continue
        kind, _, subtype = mime.partition("/")
        params: dict[str, str] = {}
        q = 1.0
        for piece in pieces[1:]:
            key, _, value = piece.partition("=")
            key, value = key.strip().lower(), value.strip().strip('"')
            if key == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 1.0
            else:
                params[key] = value
        if q > 0:
            clauses.append(_Clause(kind, subtype or "*", params, q))
    for i in range(1, len(clauses)):
        j = i
        while j > 0 and _goautoneg_less(clauses[j], clauses[j - 1]):
            clauses[j - 1], clauses[j] = clauses[j], clauses[j - 1]
            j -= 1
    return clauses


def _matches(clause: _Clause, kind: str, subtype: str) -> bool:
    return (clause.type == kind and clause.subtype in (subtype, "*")) or \
        (clause.type == "*" and clause.subtype == "*")


def _formats(clause: _Clause) -> list[str]:
    found = [fmt for fmt, kind, subtype in _SERIALIZERS if _matches(clause, kind, subtype)]
    if not found and (clause.type, clause.subtype) in _YAML_ALIASES:
        found = ["yaml"]
    return found


def _choose(header: str, allows: Callable[[str, str, str], bool]) -> MediaType | None:
    """The first (clause, serializer) pair ``allows(format, transform, version)`` accepts."""
    for clause in _parse_accept(header):
        params = clause.params
        stream = params.get("stream", "")
        transform, group, version = params.get("as"), params.get("g"), params.get("v")
        converting = transform is not None or group is not None or version is not None
        for fmt in _formats(clause):
            if stream and (stream != "watch" or fmt == "yaml"):
                continue  # YAML cannot stream; watch is the only stream kube knows
            if converting:
                if group != META_GROUP or version not in ("v1", "v1beta1"):
                    continue
                if not allows(fmt, transform or "", version):
                    continue
                return MediaType(fmt, transform or "", version or "v1")
            if allows(fmt, "", ""):
                return MediaType(fmt)
    return None


def negotiate(request: web.BaseRequest, transforms: frozenset[str] = frozenset(),
              *, yaml_ok: bool = True, protobuf: bool = False) -> MediaType:
    """The best representation the Accept header allows (JSON when there is none).
    ``transforms`` are the meta.k8s.io conversions the endpoint serves; ``protobuf`` whether
    its kind has a protobuf form. Without ``yaml_ok`` (a watch) YAML, which cannot stream, is
    refused when it is the best choice, as kube's stream negotiation does, naming the types
    that can stream."""
    header = request.headers.get("Accept", "")
    if not header.strip():
        return _JSON
    key = (header, transforms, yaml_ok, protobuf)
    choice = _negotiated.get(key)
    if choice is None:
        if len(_negotiated) >= _MAX_NEGOTIATED:
            _negotiated.clear()
        choice = _negotiated[key] = _negotiate(header, transforms, yaml_ok, protobuf)
    if isinstance(choice, _Refusal):
        raise status.not_acceptable(choice.types) if choice.types else status.not_acceptable()
    return choice


@dataclass(frozen=True)
class _Refusal:
    """An Accept header nothing answers (406), with the types named when not the default."""

    types: tuple[str, ...] = ()


#: Clients send a handful of Accept headers: each is parsed once per endpoint kind.
_negotiated: dict[tuple[str, frozenset[str], bool, bool], MediaType | _Refusal] = {}
_MAX_NEGOTIATED = 512
_JSON = MediaType()


def _negotiate(header: str, transforms: frozenset[str], yaml_ok: bool,
               protobuf: bool) -> MediaType | _Refusal:
    def allows(fmt: str, transform: str, version: str) -> bool:
        if not transform:
            return fmt != "protobuf" or protobuf
        if transform not in transforms:
            return False
        return fmt != "protobuf" if transform == "Table" else True

    choice = _choose(header, allows)
    if choice is None:
        return _Refusal()
    if choice.format == "yaml" and not yaml_ok:
        return _Refusal(status.STREAM_MEDIA_TYPES)
    return choice


def encode(obj: Any, media: MediaType) -> bytes:
    if media.format == "protobuf":
        return encode_object(obj)
    if media.format == "yaml":
        return yaml.safe_dump(obj, sort_keys=False, allow_unicode=True).encode()
    return dumps(obj)


def respond(obj: Any, media: MediaType, code: int = 200,
            headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=code, body=encode(obj, media), headers={
        "Content-Type": media.content_type, **(headers or {}),
    })


# -- errors ---------------------------------------------------------------------------------------


def _error_allows(fmt: str, transform: str, version: str) -> bool:
    return not transform  # kube's errors are never transformed (DefaultEndpointRestrictions)


def status_response(headers: Mapping[str, str], err: status.StatusError) -> web.Response:
    """``err`` as the Status response its request negotiates: protobuf when that is the
    client's best acceptable type, JSON otherwise (and when nothing is acceptable, with the
    error's own code, as kube writes it raw). The headers are the request's."""
    accept = headers.get("Accept", "")
    if "protobuf" not in accept:  # the common case, decided without parsing
        return err.response()
    choice = _choose(accept, _error_allows)
    if choice is None or choice.format != "protobuf":
        return err.response()
    response = web.Response(status=err.code, body=encode_object(err.to_status()),
                            headers={"Content-Type": PROTOBUF})
    if err.retry_after:
        response.headers["Retry-After"] = str(err.retry_after)
    return response
