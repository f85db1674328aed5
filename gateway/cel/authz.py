"""kube's authorizer library (apiserver pkg/cel/library/authz.go, with the selectors of
AuthorizeWithSelectors, on in 1.32): ``authorizer.group(g).resource(r).namespace(n).name(x)
.check(verb)``, ``authorizer.path(p).check(verb)``, ``authorizer.serviceAccount(ns, name)``,
``authorizer.requestResource``, and a Decision's ``allowed()``, ``reason()``, ``errored()``,
``error()``.

The gateway's authorizer is a coroutine and CEL calls Python synchronously, so a check is
answered in rounds: the first evaluation records every check it meets that has no answer yet
(and fails it), the answers are then awaited, and the expression is evaluated again with them,
until one evaluation meets no unanswered check (``evaluate``). CEL has no side effects, so
the final evaluation is the one kube's would have been; a check asked twice is asked once
(kube's caching authorizer does the same for a request). Values carry their attributes as JSON;
the answers live in the ``Checks`` of the evaluation, found through a context variable.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from cel_expr_python import cel

from gateway.cel import opaque
from gateway.registry.validation import dns1123_label_errors, dns1123_subdomain_errors

T = cel.Type
AUTHORIZER = opaque.cel_type(opaque.AUTHORIZER)
PATH_CHECK = opaque.cel_type(opaque.PATH_CHECK)
GROUP_CHECK = opaque.cel_type(opaque.GROUP_CHECK)
RESOURCE_CHECK = opaque.cel_type(opaque.RESOURCE_CHECK)
DECISION = opaque.cel_type(opaque.DECISION)
#: Rounds of evaluation at most (each answers at least one more check).
MAX_ROUNDS = 64
PENDING = "authorization check pending"


@dataclass(frozen=True)
class CheckRequest:
    """What one check asks the authorizer (kube's AttributesRecord)."""

    user: dict[str, Any]  # authentication.k8s.io/v1 UserInfo
    verb: str
    resource_request: bool
    group: str = ""
    version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""
    field_selector: str = ""
    label_selector: str = ""

    @property
    def key(self) -> str:
        return json.dumps([self.user, self.verb, self.resource_request, self.group,
                           self.version, self.resource, self.subresource, self.namespace,
                           self.name, self.path, self.field_selector, self.label_selector],
                          sort_keys=True)


@dataclass(frozen=True)
class Answer:
    allowed: bool
    reason: str = ""
    error: str = ""


Authorize = Callable[[CheckRequest], Awaitable[Answer]]


class Checks:
    """The checks of one admission request: answers kept, the unanswered ones collected."""

    def __init__(self, authorize: Authorize) -> None:
        self._authorize = authorize
        self.answers: dict[str, Answer] = {}
        self.pending: dict[str, CheckRequest] = {}

    async def answer_pending(self) -> None:
        pending, self.pending = self.pending, {}
        for key, request in pending.items():
            self.answers[key] = await self._authorize(request)


_CHECKS: contextvars.ContextVar[Checks | None] = contextvars.ContextVar("cel_checks",
                                                                          default=None)


async def evaluate(run: Callable[[], Any], checks: Checks | None) -> Any:
    """``run()`` (one evaluation) until it meets no unanswered check; its last value."""
    for _ in range(MAX_ROUNDS):
        token = _CHECKS.set(checks)
        try:
            value = run()
        finally:
            _CHECKS.reset(token)
        if checks is None or not checks.pending:
            return value
        await checks.answer_pending()
    return value


# -- values --------------------------------------------------------------------------------


def _make(full: str, **fields: Any) -> Any:
    return opaque.make(full, json.dumps(fields, sort_keys=True))


def _fields(value: Any, full: str) -> dict[str, Any]:
    return json.loads(opaque.value_of(value, full))


def authorizer_value(user: dict[str, Any]) -> Any:
    """The ``authorizer`` variable for a request's user."""
    return _make(opaque.AUTHORIZER, user=user)


def request_resource_value(user: dict[str, Any], group: str, resource: str, subresource: str,
                           namespace: str, name: str) -> Any:
    """``authorizer.requestResource``: a check of the request's own resource."""
    return _make(opaque.RESOURCE_CHECK, user=user, group=group, resource=resource,
                 subresource=subresource, namespace=namespace, name=name, fieldSelector="",
                 labelSelector="")


def _path(authorizer: Any, path: str) -> Any:
    if not path.strip():
        raise ValueError("path must not be empty")
    return _make(opaque.PATH_CHECK, user=_fields(authorizer, opaque.AUTHORIZER)["user"],
                 path=path)


def _group(authorizer: Any, group: str) -> Any:
    return _make(opaque.GROUP_CHECK, user=_fields(authorizer, opaque.AUTHORIZER)["user"],
                 group=group)


def _service_account(authorizer: Any, namespace: str, name: str) -> Any:
    _fields(authorizer, opaque.AUTHORIZER)
    if dns1123_subdomain_errors(name):
        raise ValueError("Invalid service account name")
    if dns1123_label_errors(namespace):
        raise ValueError("Invalid service account namespace")
    user = {"username": f"system:serviceaccount:{namespace}:{name}",
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]}
    return _make(opaque.AUTHORIZER, user=user)


def _resource(group_check: Any, resource: str) -> Any:
    if not resource.strip():
        raise ValueError("resource must not be empty")
    fields = _fields(group_check, opaque.GROUP_CHECK)
    return _make(opaque.RESOURCE_CHECK, user=fields["user"], group=fields["group"],
                 resource=resource, subresource="", namespace="", name="", fieldSelector="",
                 labelSelector="")


def _with(field: str) -> Callable[[Any, str], Any]:
    def set_field(check: Any, value: str) -> Any:
        fields = _fields(check, opaque.RESOURCE_CHECK)
        fields[field] = value
        return _make(opaque.RESOURCE_CHECK, **fields)
    return set_field


def _check(check: Any, verb: str) -> Any:
    """PathCheck or ResourceCheck .check(verb): the answer, or a pending check."""
    if opaque.type_name(check) == opaque.PATH_CHECK:
        fields = _fields(check, opaque.PATH_CHECK)
        request = CheckRequest(fields["user"], verb, False, path=fields["path"])
    else:
        fields = _fields(check, opaque.RESOURCE_CHECK)
        request = CheckRequest(
            fields["user"], verb, True, fields["group"], "*", fields["resource"],
            fields["subresource"], fields["namespace"], fields["name"],
            field_selector=fields["fieldSelector"], label_selector=fields["labelSelector"])
    checks = _CHECKS.get()
    if checks is None:
        raise ValueError("no authorizer")
    answer = checks.answers.get(request.key)
    if answer is None:
        checks.pending[request.key] = request
        raise ValueError(PENDING)
    return _make(opaque.DECISION, allowed=answer.allowed, reason=answer.reason,
                 error=answer.error)


def _decision(field: str) -> Callable[[Any], Any]:
    return lambda decision: _fields(decision, opaque.DECISION)[field]


def declarations(runtime: bool) -> list[cel.FunctionDecl]:
    impl = (lambda f: f) if runtime else (lambda f: None)

    def member(name: str, oid: str, result: cel.Type, params: list[cel.Type],
               f: Any) -> cel.FunctionDecl:
        return cel.FunctionDecl(name, [cel.Overload(oid, result, params, is_member=True,
                                                    impl=impl(f))])

    decls = [
        member("path", "authorizer_path", PATH_CHECK, [AUTHORIZER, T.STRING], _path),
        member("group", "authorizer_group", GROUP_CHECK, [AUTHORIZER, T.STRING], _group),
        member("serviceAccount", "authorizer_serviceaccount", AUTHORIZER,
               [AUTHORIZER, T.STRING, T.STRING], _service_account),
        member("resource", "groupcheck_resource", RESOURCE_CHECK, [GROUP_CHECK, T.STRING],
               _resource),
        member("subresource", "resourcecheck_subresource", RESOURCE_CHECK,
               [RESOURCE_CHECK, T.STRING], _with("subresource")),
        member("namespace", "resourcecheck_namespace", RESOURCE_CHECK,
               [RESOURCE_CHECK, T.STRING], _with("namespace")),
        member("name", "resourcecheck_name", RESOURCE_CHECK, [RESOURCE_CHECK, T.STRING],
               _with("name")),
        member("fieldSelector", "authorizer_fieldselector", RESOURCE_CHECK,
               [RESOURCE_CHECK, T.STRING], _with("fieldSelector")),
        member("labelSelector", "authorizer_labelselector", RESOURCE_CHECK,
               [RESOURCE_CHECK, T.STRING], _with("labelSelector")),
        member("errored", "decision_errored", T.BOOL, [DECISION],
               lambda d: bool(_fields(d, opaque.DECISION)["error"])),
        member("error", "decision_error", T.STRING, [DECISION], _decision("error")),
        member("allowed", "decision_allowed", T.BOOL, [DECISION], _decision("allowed")),
        member("reason", "decision_reason", T.STRING, [DECISION], _decision("reason")),
    ]
    # check: one function for both kinds of check (the runtime dispatches on the kind)
    check = [cel.Overload("pathcheck_check", DECISION, [PATH_CHECK, T.STRING], is_member=True,
                          impl=impl(_check))]
    if not runtime:
        check.append(cel.Overload("resourcecheck_check", DECISION, [RESOURCE_CHECK, T.STRING],
                                  is_member=True))
    decls.append(cel.FunctionDecl("check", check))
    return decls
