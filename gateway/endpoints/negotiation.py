"""Content negotiation: which representation a client asked for, and writing it.

Responses are JSON or YAML; JSON may be transformed into a meta.k8s.io/v1 Table or into
PartialObjectMetadata(List) when the Accept header asks (``application/json;as=Table;v=v1;
g=meta.k8s.io``). Protobuf is not written: an Accept list that also offers JSON gets JSON; one
that offers nothing we write is 406, with kube's list of what it serves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml
from aiohttp import web

from gateway.apimachinery import status
from gateway.storage.codec import dumps

JSON = "application/json"
YAML = "application/yaml"
META_GROUP = "meta.k8s.io"
TRANSFORMS = frozenset({"Table", "PartialObjectMetadata", "PartialObjectMetadataList"})


@dataclass(frozen=True)
class MediaType:
    """The representation to answer with."""

    format: str = "json"  # json or yaml
    transform: str = ""  # "", Table, PartialObjectMetadata, PartialObjectMetadataList
    transform_version: str = "v1"

    @property
    def content_type(self) -> str:
        if self.transform:
            return f"{JSON};as={self.transform};v={self.transform_version};g={META_GROUP}"
        return YAML if self.format == "yaml" else JSON


def _parse_accept(header: str) -> list[tuple[str, dict[str, str], float]]:
    """Accept entries as (type/subtype, params, q), best first (stable for equal q)."""
    entries = []
    for index, part in enumerate(header.split(",")):
        pieces = [p.strip() for p in part.split(";")]
        mime = pieces[0].lower()
        if not mime:
            continue
        params: dict[str, str] = {}
        for piece in pieces[1:]:
            key, _, value = piece.partition("=")
            params[key.strip().lower()] = value.strip().strip('"')
        try:
            q = float(params.pop("q", "1"))
        except ValueError:
            q = 1.0
        entries.append((mime, params, q, index))
    entries.sort(key=lambda e: (-e[2], e[3]))
    return [(mime, params, q) for mime, params, q, _ in entries if q > 0]


def _candidate(mime: str, params: dict[str, str], allowed: frozenset[str]) -> MediaType | None:
    transform = params.get("as", "")
    if transform:
        if mime != JSON or transform not in allowed:
            return None
        if params.get("g") != META_GROUP or params.get("v") not in ("v1", "v1beta1"):
            return None
        return MediaType("json", transform, params["v"])
    if mime in (JSON, "application/*", "*/*"):
        return MediaType("json")
    if mime in (YAML, "application/x-yaml", "text/yaml"):
        return MediaType("yaml")
    return None


def negotiate(request: web.BaseRequest, transforms: frozenset[str] = frozenset(),
              *, yaml_ok: bool = True) -> MediaType:
    """The best representation the Accept header allows (JSON when there is none). Without
    ``yaml_ok`` (a watch) YAML, which cannot stream, is refused when it is the best choice, as
    kube's stream negotiation does, naming the types that can stream."""
    header = request.headers.get("Accept", "")
    if not header.strip():
        return MediaType()
    for mime, params, _ in _parse_accept(header):
        choice = _candidate(mime, params, transforms)
        if choice is not None:
            if choice.format == "yaml" and not yaml_ok:
                raise status.not_acceptable(status.STREAM_MEDIA_TYPES)
            return choice
    raise status.not_acceptable()


def encode(obj: Any, media: MediaType) -> bytes:
    if media.format == "yaml":
        return yaml.safe_dump(obj, sort_keys=False, allow_unicode=True).encode()
    return dumps(obj)


def respond(obj: Any, media: MediaType, code: int = 200,
            headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=code, body=encode(obj, media), headers={
        "Content-Type": media.content_type, **(headers or {}),
    })
