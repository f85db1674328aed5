"""Calling a webhook as kube's k8s.io/apiserver util/webhook client does, for admission and CRD
conversion webhooks alike: the URL it builds from a ``clientConfig`` (and shows in its
errors), the POST itself, and client-go's and Go's words when the call fails.

A failed call reads ``Post "<url>": <Go's error>``: the URL is the one kube builds
(``https://<service>.<namespace>.svc:<port><path>?timeout=<duration>`` for a Service, whose
address is dialled behind it), never the address dialled; the error is Go's net/http and
crypto/tls wording (``dial tcp 127.0.0.1:1: connect: connection refused``, ``tls: failed to
verify certificate: x509: certificate signed by unknown authority``, ``context deadline
exceeded``). An answer outside 200-206 is client-go's error for it (a Failure Status's message,
else NewGenericServerResponse's words).
"""

from __future__ import annotations

import asyncio
import json
import posixpath
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson
from yarl import URL

from gateway.apimachinery.gowords import go_quote
from gateway.transport.clients import ClientManager
from gateway.transport.goerrors import describe_error
from gateway.transport.resolver import ResolveError, ServiceResolver

#: client-go keeps this much of an unexpected response's body for its error.
_MAX_ERROR_BODY = 2048
#: errors.NewGenericServerResponse's words for the codes it knows.
_GENERIC = {
    400: "the server rejected our request for an unknown reason",
    401: "the server has asked for the client to provide credentials",
    404: "the server could not find the requested resource",
    405: "the server does not allow this method on the requested resource",
    406: "the server was unable to respond with a content type that the client supports",
    409: "the server reported a conflict",
    422: "the server rejected our request due to an error in our request",
    429: "the server has received too many requests and has asked us to try again later",
    503: "the server is currently unable to handle the request",
    504: "the server was unable to return a response in the time allotted, but may still be "
         "processing the request"}


class CallFailed(Exception):
    """The POST did not get an answer: ``Post "<url>": <why>`` in Go's words."""


@dataclass(frozen=True)
class Target:
    """Where a webhook is: the URL kube shows, the one dialled, and for a Service the TLS
    server name and the Host header (its DNS name, as kube's request carries it)."""

    shown: str
    dial: str
    server_name: str | None = None
    host: str | None = None


async def target(config: dict[str, Any], resolver: ServiceResolver,
                 timeout: float) -> Target:
    """The target of ``clientConfig`` (``url`` or ``service``), with the ``?timeout=``
    kube's rest client adds; CallFailed when the Service resolves to no address."""
    query = f"?timeout={go_duration(timeout)}"
    if config.get("url"):
        parts = urlsplit(config["url"])
        base = f"{parts.scheme}://{parts.netloc}{clean_path(parts.path)}{query}"
        return Target(base, base)
    service = config.get("service") or {}
    name, namespace = service.get("name", ""), service.get("namespace", "")
    port = int(service.get("port") or 443)
    server_name = f"{name}.{namespace}.svc"
    path = clean_path(service.get("path") or "")
    shown = f"https://{server_name}:{port}{path}{query}"
    try:
        address = await resolver.resolve(namespace, name, port)
    except ResolveError as err:  # kube resolves when it dials: a dial error
        raise CallFailed(f"Post {go_quote(shown)}: {err}") from None
    host = f"[{address.host}]" if ":" in address.host else address.host
    return Target(shown, f"https://{host}:{address.port}{path}{query}", address.server_name,
                  f"{server_name}:{port}")


async def post(clients: ClientManager, where: Target, body: bytes, context: ssl.SSLContext,
               timeout: float, headers: dict[str, str]) -> tuple[int, str, bytes]:
    """POST ``body``: (status, Content-Type, body), or CallFailed within ``timeout``."""
    if where.host:
        headers = {**headers, "Host": where.host}
    url = URL(where.dial)
    try:
        async with asyncio.timeout(timeout):
            async with clients.session().post(url, data=body, headers=headers, ssl=context,
                                              server_hostname=where.server_name) as response:
                return (response.status, response.headers.get("Content-Type", ""),
                        await response.read())
    except TimeoutError:
        raise CallFailed(f"Post {go_quote(where.shown)}: context deadline exceeded") from None
    except (aiohttp.ClientError, OSError, ValueError) as err:
        why = describe_error(err, url.host or "", url.port or 443,
                             where.server_name or url.host or "")
        raise CallFailed(f"Post {go_quote(where.shown)}: {why}") from None


def clean_path(path: str) -> str:
    """path.Join("/", path), as the rest client builds the request path."""
    cleaned = posixpath.normpath("/" + path)
    return "/" + cleaned.lstrip("/")


def go_duration(seconds: float) -> str:
    """time.Duration's String(): 30s, 1m30s, 200ms."""
    ns = round(seconds * 1e9)
    if ns <= 0:
        return "0s"
    if ns < 1_000_000_000:
        for unit, size in (("ms", 10**6), ("µs", 10**3), ("ns", 1)):
            if ns >= size:
                return _trim(ns / size) + unit
    hours, rest = divmod(ns, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    return (f"{hours}h" if hours else "") + (f"{minutes}m" if hours or minutes else "") + \
        _trim(rest / 1e9) + "s"


def _trim(value: float) -> str:
    return f"{value:.9f}".rstrip("0").rstrip(".")


def http_error(code: int, content_type: str, data: bytes) -> str:
    """client-go's error for a status outside 200-206: a Failure Status in the body, else
    NewGenericServerResponse's words (the body only when it is text)."""
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError:
        try:  # what orjson refuses and Go takes (invalid UTF-8, big integers)
            body = json.loads(data.decode("utf-8", "replace"))
        except ValueError:
            body = None
    if isinstance(body, dict) and body.get("kind") == "Status" and \
            body.get("status") == "Failure" and isinstance(body.get("message") or "", str):
        return body.get("message") or ""
    media = content_type.split(";")[0].strip().lower()
    text = data[:_MAX_ERROR_BODY].decode("utf-8", "replace").strip() \
        if not media or media.startswith("text/") else "unknown"
    if code in (403, 415) or (code == 406 and text not in ("", "unknown")):
        return text
    if code in _GENERIC:
        return _GENERIC[code]
    if code >= 500:
        return (f"an error on the server ({go_quote(text)}) has prevented the request from "
                "succeeding")
    return f"the server responded with the status code {code} but did not return more information"


