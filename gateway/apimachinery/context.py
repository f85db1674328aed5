"""What the handler chain leaves on a request for the layers below: who it is from, and
what it asks for (kube keeps these in the request context, k8s.io/apiserver endpoints/request).
"""

from __future__ import annotations

from aiohttp import web

from gateway.apimachinery.requestinfo import RequestInfo
from gateway.apimachinery.user import ANONYMOUS_USER, UserInfo

#: The request info filter's classification of the request (RequestInfo).
REQUEST_INFO = "gateway.request_info"
#: The user the request acts as (UserInfo).
USER = "gateway.user"
#: The authenticated user when an impersonated one replaced it.
REQUESTER = "gateway.requester"


def request_info(request: web.BaseRequest) -> RequestInfo:
    return request[REQUEST_INFO]


def request_user(request: web.BaseRequest) -> UserInfo:
    """The user the request acts as (anonymous when authentication was not run)."""
    return request.get(USER) or ANONYMOUS_USER
