"""The ValidatingAdmissionPolicy admission plugin (kube's validating/dispatcher.go over
generic's policy source and matcher), a validating plugin of every store's admission chain.

For each policy with bindings (in name order; kube's order is a map's): its matchConstraints
must select the write (at the request's version, or an equivalent one the policy names, where
the objects are converted); a policy whose paramKind is not served is misconfigured. Then for
each of its bindings (in name order) whose matchResources select the write, its params are
found (params.py) and the policy is evaluated once per param (validator.py). A false
validation is acted on by the binding's validationActions: ``Deny`` refuses the write,
``Warn`` adds a warning (``Validation failed for ValidatingAdmissionPolicy '<p>' with
binding '<b>': <message>``), ``Audit`` an audit annotation
(``validation.policy.admission.k8s.io/validation_failure``). Published audit annotations are
``<policy>/<key>``. Misconfiguration (``failed to configure policy|binding: ...``) and
evaluation errors are denials under ``failurePolicy: Fail`` and are ignored under ``Ignore``.

The first denial refuses the write as kube words it: ``<resource> "<name>" is forbidden:
ValidatingAdmissionPolicy '<p>' with binding '<b>' denied request: <message>``, with the
validation's reason (Invalid 422 by default; Forbidden 403, RequestEntityTooLarge 413) and
the message as the one cause. Policies and bindings themselves are never validated by
policies.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import structlog

from gateway.admission.attributes import at_version, cel_data
from gateway.admission.expressions import Activation
from gateway.admission.matching import labels_of, request_namespace
from gateway.admission.policy.compiled import CompiledPolicy, compile_policy
from gateway.admission.policy.matching import matched_version
from gateway.admission.policy.params import ParamError, collect, gvk_string, param_gvk
from gateway.admission.policy.served import ServedResources
from gateway.admission.policy.validator import DENY, ERROR, PUBLISH, validate
from gateway.apimachinery import status
from gateway.cel import authz
from gateway.registry.admission import Attributes, Object
from gateway.registry.lister import Lister

log = structlog.get_logger(__name__)

GROUP = "admissionregistration.k8s.io"
#: What expression-based admission never sees (generic.admissionResources, and kube-apiserver's
#: excluded review resources).
EXCLUDED = frozenset({
    (GROUP, "validatingadmissionpolicies"), (GROUP, "validatingadmissionpolicybindings"),
    (GROUP, "mutatingadmissionpolicies"), (GROUP, "mutatingadmissionpolicybindings"),
    ("authentication.k8s.io", "selfsubjectreviews"), ("authentication.k8s.io", "tokenreviews"),
    ("authorization.k8s.io", "localsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectrulesreviews"),
    ("authorization.k8s.io", "subjectaccessreviews"),
})
FAILURE_KEY = "validation.policy.admission.k8s.io/validation_failure"
MAX_ANNOTATION_VALUE = 10 * 1024
_CODES = {"Forbidden": 403, "Unauthorized": 401, "RequestEntityTooLarge": 413, "Invalid": 422}


@dataclass
class _Denial:
    policy: str
    binding: str  # "" for the policy's own misconfiguration
    message: str
    reason: str = ""


@dataclass
class _Hook:
    """A policy with its bindings (kube's PolicyHook)."""

    policy: Object
    compiled: CompiledPolicy
    bindings: list[Object]
    param_kind: Object | None
    error: str = ""
    params_store: Any = None


@dataclass
class _Dispatch:
    """One write's evaluation: what it decided so far."""

    attrs: Attributes
    checks: authz.Checks | None
    denials: list[_Denial] = field(default_factory=list)

    def misconfigured(self, hook: _Hook, binding: Object | None, error: str) -> None:
        """addConfigError: a denial under failurePolicy Fail, nothing under Ignore."""
        if hook.compiled.failure_policy == "Ignore":
            return
        if binding is None:
            self.denials.append(_Denial(hook.compiled.name, "",
                                        f"failed to configure policy: {error}"))
        else:
            self.denials.append(_Denial(hook.compiled.name, binding["metadata"]["name"],
                                        f"failed to configure binding: {error}"))


class ValidatingAdmissionPolicy:
    """ValidatingAdmissionPolicies and their bindings, read from their watch caches."""

    def __init__(self, policies: Lister, bindings: Lister, namespaces: Lister,
                 resources: ServedResources, authorize: authz.Authorize | None = None) -> None:
        self.policies = policies
        self.bindings = bindings
        self.namespaces = namespaces
        self.resources = resources
        #: Answers the ``authorizer`` of expressions (none given: every check fails).
        self.authorize = authorize
        self._compiled: dict[tuple[str, str], CompiledPolicy] = {}
        self._has_synced = False

    @property
    def configured(self) -> bool:
        """Whether any binding exists (a policy without one applies to nothing), or whether
        that is not known yet (every write is then refused, as kube's plugin does)."""
        return not self._synced or bool(self.bindings.objects())

    @property
    def _synced(self) -> bool:
        """Both caches have listed once (an informer's HasSynced: a cache re-listing after a
        lost watch keeps serving what it had)."""
        if not self._has_synced:
            self._has_synced = self.policies.cacher.ready and self.bindings.cacher.ready
        return self._has_synced

    async def validate(self, attrs: Attributes) -> None:
        resource = attrs.resource
        if (resource.group, resource.plural) in EXCLUDED:
            return
        if not self._synced:
            raise _forbidden(attrs, "not yet ready to handle request")
        dispatch = _Dispatch(attrs, authz.Checks(self.authorize)
                             if self.authorize is not None else None)
        namespace = await request_namespace(self.namespaces, attrs)
        for hook in self._hooks():
            await self._policy(hook, dispatch, namespace)
        if dispatch.denials:
            raise _denied(attrs, dispatch.denials[0])

    # -- policies and their bindings -------------------------------------------------------

    def _hooks(self) -> list[_Hook]:
        """Every policy that has a binding, with its bindings, compiled (once per version)."""
        by_policy: dict[str, list[Object]] = {}
        for binding in self.bindings.objects():
            name = (binding.get("spec") or {}).get("policyName") or ""
            by_policy.setdefault(name, []).append(binding)
        policies = {p["metadata"]["name"]: p for p in self.policies.objects()}
        hooks, used = [], set()
        for name in sorted(by_policy):
            policy = policies.get(name)
            if policy is None:
                continue  # a binding of a policy that does not exist (yet) binds nothing
            key = (policy["metadata"].get("uid", ""), policy["metadata"].get("resourceVersion", ""))
            used.add(key)
            compiled = self._compiled.get(key)
            if compiled is None:
                compiled = self._compiled[key] = compile_policy(policy)
            bindings = sorted(by_policy[name], key=lambda b: b["metadata"]["name"])
            hooks.append(self._hook(policy, compiled, bindings))
        if len(self._compiled) > 2 * len(used) + 16:
            self._compiled = {k: v for k, v in self._compiled.items() if k in used}
        return hooks

    def _hook(self, policy: Object, compiled: CompiledPolicy, bindings: list[Object]) -> _Hook:
        param_kind = (policy.get("spec") or {}).get("paramKind")
        if not isinstance(param_kind, dict):
            return _Hook(policy, compiled, bindings, None)
        group, version, kind = param_gvk(param_kind)
        store = self.resources.by_kind(group, version, kind)
        if store is None:
            return _Hook(policy, compiled, bindings, param_kind,
                         "failed to find resource referenced by paramKind: "
                         f"'{gvk_string(group, version, kind)}'")
        return _Hook(policy, compiled, bindings, param_kind, params_store=store)

    async def _policy(self, hook: _Hook, dispatch: _Dispatch, namespace: Object | None) -> None:
        attrs = dispatch.attrs
        constraints = (hook.policy.get("spec") or {}).get("matchConstraints")
        labels = labels_of(namespace)
        if not isinstance(constraints, dict):
            dispatch.misconfigured(hook, None, "policy contained no match constraints, a "
                                               "required field")
            return
        version = matched_version(constraints, attrs, labels)
        if version is None:
            return
        if hook.error:
            dispatch.misconfigured(hook, None, hook.error)
            return
        annotations: dict[str, list[str]] = {}
        seen = None
        for binding in hook.bindings:
            spec = binding.get("spec") or {}
            match = spec.get("matchResources")
            if isinstance(match, dict) and matched_version(match, attrs, labels) is None:
                continue
            try:
                params = await collect(hook.param_kind, hook.params_store, spec.get("paramRef"),
                                       attrs.namespace)
            except ParamError as err:
                dispatch.misconfigured(hook, binding, str(err))
                continue
            if not params:
                continue
            if seen is None:
                seen = await at_version(attrs, version)
            for param in params:
                activation = Activation(cel_data(seen, namespace=_namespace_object(
                    namespace, attrs), params=param), dispatch.checks,
                    hook.compiled.variables)
                result = await validate(hook.compiled, activation)
                _act(hook, binding, result, dispatch, annotations)
        for key, values in annotations.items():
            attrs.add_annotation(f"{hook.compiled.name}/{key}", ", ".join(values))


def _act(hook: _Hook, binding: Object, result: Any, dispatch: _Dispatch,
         annotations: dict[str, list[str]]) -> None:
    """The binding's validationActions on the decisions; the audit annotations collected."""
    attrs, name = dispatch.attrs, binding["metadata"]["name"]
    actions = (binding.get("spec") or {}).get("validationActions") or []
    for index, decision in enumerate(result.decisions):
        if decision.action != DENY:
            continue
        for action in actions:
            if action == "Deny":
                dispatch.denials.append(_Denial(hook.compiled.name, name, decision.message,
                                                decision.reason))
            elif action == "Warn":
                attrs.warnings.append(f"Validation failed for ValidatingAdmissionPolicy "
                                      f"'{hook.compiled.name}' with binding '{name}': "
                                      f"{decision.message}")
            elif action == "Audit":
                attrs.add_annotation(FAILURE_KEY, _go_json([{
                    "message": decision.message,
                    "policy": (binding.get("spec") or {}).get("policyName", ""),
                    "binding": name, "expressionIndex": index,
                    "validationActions": actions}]))
    for annotation in result.annotations:
        if annotation.action == PUBLISH:
            value = annotation.value[:MAX_ANNOTATION_VALUE]
            values = annotations.setdefault(annotation.key, [])
            if value not in values:
                values.append(value)
        elif annotation.action == ERROR:
            dispatch.denials.append(_Denial(hook.compiled.name, name, annotation.error))


def _namespace_object(namespace: Object | None, attrs: Attributes) -> Object | None:
    """CreateNamespaceObject: the fields of the request's namespace expressions see (none for
    a Namespace itself, whose namespace is its own)."""
    if namespace is None or (attrs.resource.group == "" and attrs.resource.plural ==
                             "namespaces"):
        return None
    meta = namespace.get("metadata") or {}
    kept = ("name", "generateName", "namespace", "uid", "resourceVersion", "generation",
            "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
            "annotations", "finalizers")
    shown: Object = {"metadata": {k: meta[k] for k in kept if k in meta},
                     "spec": namespace.get("spec") or {},
                     "status": namespace.get("status") or {}}
    shown["metadata"].setdefault("creationTimestamp", None)
    return shown


def _go_json(value: Any) -> str:
    """encoding/json's output: compact, with <, > and & escaped."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _object_name(attrs: Attributes) -> str:
    """admission.NewForbidden's name: the request's, else the object's, else its
    generateName, else "Unknown"."""
    if attrs.name:
        return attrs.name
    meta = (attrs.obj or {}).get("metadata") or {}
    return meta.get("name") or meta.get("generateName") or "Unknown"


def _forbidden(attrs: Attributes, message: str) -> status.StatusError:
    """admission.NewForbidden: ``<resource> "<name>" is forbidden: <message>``."""
    name, res = _object_name(attrs), attrs.resource
    return status.StatusError(
        403, "Forbidden",
        f'{status.qualified(res.plural, res.group)} "{name}" is forbidden: {message}',
        name=name, group=res.group, kind=res.plural)


def _denied(attrs: Attributes, denial: _Denial) -> status.StatusError:
    if denial.binding:
        message = (f"ValidatingAdmissionPolicy '{denial.policy}' with binding "
                   f"'{denial.binding}' denied request: {denial.message}")
    else:
        message = f"ValidatingAdmissionPolicy '{denial.policy}' denied request: {denial.message}"
    error = _forbidden(attrs, message)
    error.reason = denial.reason or "Invalid"
    error.code = _CODES.get(error.reason, 422)
    error.causes = [status.Cause("", message)]
    return error
