"""Which webhooks a write goes to: rules, scope and selectors, as kube's webhook matcher reads them.

A rule matches when the operation, API group, version and resource all do; under
``matchPolicy: Equivalent`` a rule naming another served version of the same resource matches
too, and the webhook is then called at that version. Resources are
``plural`` (the object itself), ``plural/sub`` (a subresource), with ``*`` on either side; a
bare ``*`` is every resource but no subresource. The namespace selector is read against the
labels of the request's namespace (for a Namespace, its own labels; cluster-scoped objects
always match); the object selector against the old or the new object's labels.
"""

from __future__ import annotations

from gateway.apimachinery import status
from gateway.apimachinery.labels import LabelSelector, from_label_selector
from gateway.registry.admission import Attributes, Object
from gateway.registry.lister import Lister
from gateway.storage.errors import KeyNotFoundError, StorageError


def matched_version(webhook: Object, attrs: Attributes) -> str | None:
    """The version the webhook is called at: the request's when a rule names it; under
    ``matchPolicy: Equivalent`` (the default) else the first equivalent version a rule names
    (the same objects served at another version of the group); None when it is not called."""
    rules = webhook.get("rules") or []
    version = attrs.resource.version
    if any(rule_matches(rule, attrs, version) for rule in rules):
        return version
    if webhook.get("matchPolicy") == "Exact":
        return None
    return next((other for other in attrs.equivalent_versions
                 if any(rule_matches(rule, attrs, other) for rule in rules)), None)


def rule_matches(rule: Object, attrs: Attributes, version: str) -> bool:
    """A rule (operations, groups, versions, resources, scope) names the write at
    ``version``."""
    res = attrs.resource
    return (_listed(rule.get("operations"), attrs.operation)
            and _listed(rule.get("apiGroups"), res.group)
            and _listed(rule.get("apiVersions"), version)
            and _resource_listed(rule.get("resources") or [], res.plural, attrs.subresource)
            and _scope_matches(rule.get("scope") or "*", attrs))


def _listed(values: list[str] | None, value: str) -> bool:
    return any(v in ("*", value) for v in values or [])


def _resource_listed(patterns: list[str], plural: str, subresource: str) -> bool:
    for pattern in patterns:
        resource, _, sub = pattern.partition("/")
        if resource in ("*", plural) and sub in ("*", subresource):
            return True
    return False


def _scope_matches(scope: str, attrs: Attributes) -> bool:
    is_namespace = attrs.resource.group == "" and attrs.resource.plural == "namespaces"
    if scope == "Namespaced":
        return not is_namespace and bool(attrs.namespace)
    if scope == "Cluster":
        return is_namespace or not attrs.namespace
    return True


def object_selector_matches(webhook: Object, attrs: Attributes) -> bool:
    selector = from_label_selector(webhook.get("objectSelector"))
    if selector is None:
        return False
    return selector.empty or _old_or_new_matches(selector, attrs)


def namespace_selector_matches(webhook: Object, attrs: Attributes,
                               namespace_labels: dict[str, str] | None) -> bool:
    """``namespace_labels``: the labels of the request's namespace (None when not found)."""
    selector = from_label_selector(webhook.get("namespaceSelector"))
    if selector is None:
        return False
    if selector.empty:
        return True
    res = attrs.resource
    if res.group == "" and res.plural == "namespaces":
        return _old_or_new_matches(selector, attrs)
    if not res.namespaced:
        return True
    return selector.matches(namespace_labels or {})


def _old_or_new_matches(selector: LabelSelector, attrs: Attributes) -> bool:
    """A selector on an object matches when either the old or the new object's labels do."""
    return any(selector.matches((obj.get("metadata") or {}).get("labels") or {})
               for obj in (attrs.obj, attrs.old) if obj is not None)


async def request_namespace(namespaces: Lister, attrs: Attributes) -> Object | None:
    """The namespace a namespaced write is in (None for other writes, or when it is not
    found): its labels are what namespace selectors read."""
    if not attrs.namespace or not attrs.resource.namespaced:
        return None
    try:
        return await namespaces.get("", attrs.namespace)
    except KeyNotFoundError:
        return None
    except StorageError as err:
        raise status.internal_error(f"reading namespace {attrs.namespace}: {err}") from None


def labels_of(namespace: Object | None) -> dict[str, str] | None:
    if namespace is None:
        return None
    return (namespace.get("metadata") or {}).get("labels") or {}
