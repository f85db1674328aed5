"""Reading a request: the body (bounded, JSON or YAML) and the common query parameters."""

from __future__ import annotations

from typing import Any

import yaml
from aiohttp import web

from gateway.endpoints import status
from gateway.endpoints.protobuf import PROTOBUF, decode_body
from gateway.registry.labels import go_int64
from gateway.storage.codec import loads

#: kube-apiserver refuses request bodies over 3 MiB.
MAX_BODY_BYTES = 3 * 1024 * 1024

JSON_TYPES = frozenset({"application/json", ""})
YAML_TYPES = frozenset({"application/yaml", "application/x-yaml", "text/yaml"})


def too_large() -> status.StatusError:
    return status.StatusError(413, "RequestEntityTooLarge",
                              "Request entity too large: limit is 3145728")


async def read_body(request: web.BaseRequest, limit: int = MAX_BODY_BYTES) -> bytes:
    """The whole body, refusing (413) anything over ``limit`` without reading it all."""
    if request.content_length is not None and request.content_length > limit:
        raise too_large()
    chunks, size = [], 0
    async for chunk in request.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > limit:
            raise too_large()
        chunks.append(chunk)
    return b"".join(chunks)


def body_media_type(request: web.BaseRequest) -> str:
    """The request's media type; a missing Content-Type means JSON, as in kube-apiserver."""
    raw = request.headers.get("Content-Type", "")
    return raw.split(";", 1)[0].strip().lower()


def decode_object(body: bytes, content_type: str) -> dict[str, Any]:
    """A JSON or YAML object from a request body (400 when it is not one; 415 other types)."""
    if content_type == PROTOBUF:
        return decode_body(body)
    if content_type in YAML_TYPES:
        try:
            obj = yaml.safe_load(body)
        except yaml.YAMLError as err:
            raise status.bad_request(f"error converting YAML to JSON: {err}") from None
    elif content_type in JSON_TYPES:
        try:
            obj = loads(body)
        except ValueError as err:
            raise status.bad_request(
                f"couldn't decode the request body as JSON: {err}"
            ) from None
    else:
        raise status.StatusError(
            415, "UnsupportedMediaType",
            f"the body of the request was in an unknown format - accepted media types "
            f"include: application/json, application/yaml (got {content_type!r})",
        )
    if not isinstance(obj, dict):
        raise status.bad_request("the request body must be a JSON or YAML object")
    return obj


def drop_nulls(fields: dict[str, Any]) -> None:
    """A field sent as null is a field not sent, as when kube decodes it into its Go type."""
    for key in [k for k, v in fields.items() if v is None]:
        del fields[key]


def dry_run(request: web.BaseRequest) -> bool:
    """``dryRun=All`` means do everything but store; any other value is 400."""
    values = request.query.getall("dryRun", [])
    for value in values:
        if value != "All":
            raise status.bad_request(
                f'dryRun: Unsupported value: "{value}": supported values: "All"'
            )
    return bool(values)


def int64_param(request: web.BaseRequest, name: str) -> int | None:
    """A query parameter read as Go's strconv.ParseInt does (None when absent or empty)."""
    raw = request.query.get(name)
    if raw is None or raw == "":
        return None
    value = go_int64(raw)
    if value is None:
        raise status.bad_request(f"{name}: invalid value {raw!r}: not a 64-bit integer")
    return value


def int_param(request: web.BaseRequest, name: str, default: int = 0) -> int:
    value = int64_param(request, name)
    return default if value is None else value
