"""Impersonation: act as another user when allowed to (kube's Impersonate-* headers).

Each requested attribute needs the ``impersonate`` verb: on users (or the service account),
groups, uids and userextras/<key>. Groups, a uid or extras without a user are answered as
kube-apiserver answers them, with its plain-text internal error. The
headers are removed afterwards; the impersonated user replaces the requester, who is kept for
the audit log.
"""

from __future__ import annotations

from urllib.parse import unquote

from aiohttp import web
from multidict import CIMultiDict

from gateway.apimachinery.context import REQUESTER, USER, request_user
from gateway.apimachinery.gowords import go_quote
from gateway.apimachinery.user import (
    ANONYMOUS,
    AUTHENTICATED,
    UNAUTHENTICATED,
    UserInfo,
    parse_service_account,
    service_account_user,
)
from gateway.auth.audit.events import record
from gateway.auth.authorizer import Attributes, Authorizer, Decision, forbidden
from gateway.server.request import ChainHandler, Request, Response

USER_HEADER, GROUP_HEADER, UID_HEADER = "Impersonate-User", "Impersonate-Group", "Impersonate-Uid"
EXTRA_PREFIX = "Impersonate-Extra-"
AUTH_GROUP = "authentication.k8s.io"


_NOTHING: tuple[str, list[str], str, dict[str, list[str]]] = ("", [], "", {})
_PREFIX = "impersonate-"
_EXTRA = EXTRA_PREFIX.lower()


def _requested(request: Request) -> tuple[str, list[str], str, dict[str, list[str]]]:
    """(user, groups, uid, extra) asked for; nothing, found in one pass over the header
    names, for the requests that ask for none."""
    headers = request.headers
    for name in headers:  # most requests: a glance at each name's first letter
        if name[:1] in "Ii" and name[:12].lower() == _PREFIX:
            break
    else:
        return _NOTHING
    extra: dict[str, list[str]] = {}
    for header, value in headers.items():
        if header.lower().startswith(_EXTRA):
            key = unquote(header[len(EXTRA_PREFIX):]).lower()
            extra.setdefault(key, []).append(value)
    return (headers.get(USER_HEADER, ""), headers.getall(GROUP_HEADER, []),
            headers.get(UID_HEADER, ""), extra)


def _checks(requester: UserInfo, name: str, groups: list[str], uid: str,
            extra: dict[str, list[str]]) -> list[Attributes]:
    """One authorization check per impersonated attribute."""
    account = parse_service_account(name)
    checks = [Attributes(requester, "impersonate", True, account[0], "", "",
                         "serviceaccounts", "", account[1]) if account else
              Attributes(requester, "impersonate", True, "", "", "", "users", "", name)]
    checks += [Attributes(requester, "impersonate", True, "", "", "", "groups", "", g)
               for g in groups]
    if uid:
        checks.append(Attributes(requester, "impersonate", True, "", AUTH_GROUP, "", "uids",
                                 "", uid))
    for key, values in extra.items():
        checks += [Attributes(requester, "impersonate", True, "", AUTH_GROUP, "",
                              "userextras", key, value) for value in values]
    return checks


def _impersonated(name: str, groups: list[str], uid: str,
                  extra: dict[str, list[str]]) -> UserInfo:
    account = parse_service_account(name)
    if account and not groups:
        base = service_account_user(*account)
        return UserInfo(base.name, uid, base.groups, {k: tuple(v) for k, v in extra.items()})
    all_groups = list(groups)
    if name == ANONYMOUS:
        if UNAUTHENTICATED not in all_groups:
            all_groups.append(UNAUTHENTICATED)
    elif AUTHENTICATED not in all_groups:
        all_groups.append(AUTHENTICATED)
    return UserInfo(name, uid, tuple(all_groups), {k: tuple(v) for k, v in extra.items()})


def _go_references(groups: list[str], uid: str, extra: dict[str, list[str]]) -> str:
    """What was asked for, printed as kube prints its list of ObjectReferences (Go's %v)."""

    def ref(kind: str, name: str, field_path: str = "") -> str:
        return "{" + " ".join((kind, "", name, "", "", "", field_path)) + "}"

    refs = [ref("Group", g) for g in groups]
    refs += [ref("UserExtra", v, k) for k, values in extra.items() for v in values]
    if uid:
        refs.append(ref("UID", uid))
    return "[" + " ".join(refs) + "]"


#: What kube's plain-text error writer escapes, as HTML would.
_SANITIZE = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def _internal_error(request: Request, message: str) -> web.Response:
    """kube's responsewriters.InternalError: a text/plain 500 naming the request URI, not a
    Status (kube answers impersonation without a user this way)."""
    text = f"Internal Server Error: {go_quote(request.raw_path)}: {message}"
    return web.Response(status=500, text=text.translate(_SANITIZE) + "\n",
                        content_type="text/plain", charset="utf-8",
                        headers={"X-Content-Type-Options": "nosniff"})


def _strip(request: Request) -> Request:
    headers = CIMultiDict((k, v) for k, v in request.headers.items()
                          if not k.lower().startswith("impersonate-"))
    return request.clone(headers=headers)


def with_impersonation(handler: ChainHandler, authorize: Authorizer) -> ChainHandler:
    async def impersonation_filter(request: Request) -> Response:
        name, groups, uid, extra = _requested(request)
        if not (name or groups or uid or extra):
            return await handler(request)
        if not name:
            return _internal_error(request, f"requested {_go_references(groups, uid, extra)} "
                                            "without impersonating a user")
        requester = request_user(request)
        for check in _checks(requester, name, groups, uid, extra):
            decision, reason = await authorize(check)
            if decision is not Decision.ALLOW:
                raise forbidden(check, reason)
        clean = _strip(request)
        clean[REQUESTER] = requester
        clean[USER] = _impersonated(name, groups, uid, extra)
        audit = record(request)
        if audit is not None:
            audit.impersonated(clean[USER])
        return await handler(clean)

    return impersonation_filter
