"""What the handler chain leaves on a request for the layers below: who it is from, and
what it asks for (kube keeps these in the request context, k8s.io/apiserver endpoints/request).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Protocol, overload

from aiohttp import web
from multidict import CIMultiDict

from gateway.apimachinery.requestinfo import RequestInfo
from gateway.apimachinery.user import ANONYMOUS_USER, UserInfo

#: The request info filter's classification of the request (RequestInfo).
REQUEST_INFO = "gateway.request_info"
#: The user the request acts as (UserInfo).
USER = "gateway.user"
#: The authenticated user when an impersonated one replaced it.
REQUESTER = "gateway.requester"
#: Response headers the filters set before the handler runs (CIMultiDict): what kube's filters
#: set on the ResponseWriter before calling the next handler (Audit-ID, Cache-Control, CORS),
#: so that every response carries them, a streamed one included. Filters add to it with
#: ``response_headers(request)``; they reach the response in one of two places:
#:
#: - a handler that streams (a watch, a proxied response) calls ``prepare_response`` instead
#:   of ``response.prepare``: the head goes out with these headers first, then the response's
#:   own values, as kube's ReverseProxy adds the backend's headers to the writer's (a value
#:   equal to one of these is not repeated);
#: - a response returned unprepared gets them from ``apply_response_headers`` (the outermost
#:   filter calls it, so a Status made from an error gets them too), except the names the
#:   handler set itself: a handler that builds its own response Sets them, as kube's do.
RESPONSE_HEADERS = "gateway.response_headers"


class Notes(Protocol):
    """Where these notes are kept: aiohttp's request (a mutable mapping), or the proxy's fast
    lane's own request (a dict); ``Request`` below adds what the filters read of a request."""

    @overload
    def get(self, key: str, /) -> Any: ...
    @overload
    def get(self, key: str, default: Any, /) -> Any: ...
    def __getitem__(self, key: str, /) -> Any: ...
    def __setitem__(self, key: str, value: Any, /) -> None: ...
    def __contains__(self, key: object, /) -> bool: ...


class Request(Notes, Protocol):
    """A request as the handler chain and the layers below it read it, on either transport
    (gateway/server/request.py): the members of aiohttp's request they use; notes (the request
    context: user, request info, request id...) are kept on it as on a mutable mapping."""

    @property
    def method(self) -> str: ...
    @property
    def path(self) -> str:
        """The path, percent-decoded."""
        ...
    @property
    def raw_path(self) -> str:
        """The request target as sent: path and query, not decoded."""
        ...
    @property
    def query(self) -> Any:
        """The query, decoded (a MultiDict)."""
        ...
    @property
    def query_string(self) -> str:
        """The query, decoded, as one string."""
        ...
    @property
    def headers(self) -> Any:  # a CIMultiDict or its proxy
        ...
    @property
    def remote(self) -> str | None: ...
    @property
    def transport(self) -> asyncio.Transport | None: ...
    @property
    def body_exists(self) -> bool: ...

    def clone(self, *, headers: Mapping[str, str]) -> Request:
        """The request with other headers (aiohttp: a copy with the notes copied; the lane:
        the same request, changed)."""
        ...


def request_info(request: Notes) -> RequestInfo:
    return request[REQUEST_INFO]


def request_user(request: Notes) -> UserInfo:
    """The user the request acts as (anonymous when authentication was not run)."""
    return request.get(USER) or ANONYMOUS_USER


def response_headers(request: Notes) -> CIMultiDict[str]:
    """The headers every response to ``request`` is to carry (see RESPONSE_HEADERS)."""
    headers = request.get(RESPONSE_HEADERS)
    if headers is None:
        headers = request[RESPONSE_HEADERS] = CIMultiDict()
    return headers


def apply_response_headers(request: Notes, response: web.StreamResponse) -> None:
    """Give an unprepared response the filters' headers it does not set itself (a prepared
    one has them from ``prepare_response``, or it is too late)."""
    wanted = request.get(RESPONSE_HEADERS)
    if wanted and not response.prepared:
        fill_missing_headers(response.headers, wanted)


def fill_missing_headers(own: CIMultiDict[str], wanted: CIMultiDict[str]) -> None:
    """The rule for a returned response: the filters' headers whose names it does not set."""
    for name in wanted.keys() - own.keys():  # CIMultiDict keys compare case-insensitively
        for value in wanted.getall(name):
            own.add(name, value)


def merge_streamed_headers(own: CIMultiDict[str], wanted: CIMultiDict[str]) -> None:
    """The rule for a streamed response: the filters' values first, then its own values for
    those names that differ from them."""
    for name in set(wanted.keys()):
        mine = own.getall(name, [])
        ours = wanted.getall(name)
        if mine:
            del own[name]
        for value in ours + [v for v in mine if v not in ours]:
            own.add(name, value)


async def prepare_response(request: web.BaseRequest, response: web.StreamResponse) -> Any:
    """``response.prepare(request)`` for a handler that streams: the head goes out with the
    filters' headers first and the response's own values for those names after them."""
    wanted = request.get(RESPONSE_HEADERS)
    if wanted and not response.prepared:
        merge_streamed_headers(response.headers, wanted)
    return await response.prepare(request)
