"""A binding's params (kube's generic.CollectParams): the objects of the policy's paramKind
its paramRef names, by name or by selector, in the request's namespace (or the one the
paramRef names) for a namespaced kind; none found is an error under
``parameterNotFoundAction: Deny`` and no evaluation at all under ``Allow``. The errors are
kube's words; the plugin reports them as the binding's misconfiguration.

Params are read from the kind's store at the paramKind's version (its watch cache; a custom
resource's objects converted to that version), as kube's informer of that version holds them.
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.apimachinery import status
from gateway.apimachinery.labels import LabelSelector, from_label_selector
from gateway.apimachinery.listoptions import ListOptions
from gateway.registry.admission import Object
from gateway.registry.store import RESTStore


class ParamError(Exception):
    """The params of a binding cannot be had (kube's error, in its words)."""


def param_gvk(param_kind: Object) -> tuple[str, str, str]:
    """(group, version, kind) of a paramKind (schema.ParseGroupVersion of its apiVersion)."""
    api_version = param_kind.get("apiVersion") or ""
    group, _, version = api_version.rpartition("/") if api_version != "/" else ("", "", "")
    return group, version, param_kind.get("kind") or ""


def gvk_string(group: str, version: str, kind: str) -> str:
    """schema.GroupVersionKind's String()."""
    return f"{group}/{version}, Kind={kind}"


async def collect(param_kind: Object | None, store: RESTStore | None, ref: Object | None,
                  namespace: str) -> Sequence[Object | None]:
    """The params to evaluate the policy with: [None] when the policy or the binding has no
    params; [] when none were found and that is allowed."""
    if param_kind is None or ref is None:
        return [None]
    assert store is not None  # a paramKind not served is the policy's error, found before
    namespaced = store.resource.namespaced
    where = ""
    if namespaced:
        where = ref.get("namespace") or namespace
        if not where:
            raise ParamError("cannot use namespaced paramRef in policy binding that matches "
                             "cluster-scoped resources")
    elif ref.get("namespace"):
        raise ParamError("paramRef.namespace must not be provided for a cluster-scoped "
                         "`paramKind`")
    if ref.get("name"):
        params = await _named(store, where, ref["name"])
    elif ref.get("selector") is not None:
        selector = from_label_selector(ref["selector"])
        params = await _selected(store, where, selector) if selector is not None else []
    else:
        raise ParamError("one of name or selector must be provided")
    if not params and ref.get("parameterNotFoundAction") == "Deny":
        raise ParamError("no params found for policy binding with `Deny` "
                         "parameterNotFoundAction")
    return params


async def _named(store: RESTStore, namespace: str, name: str) -> list[Object]:
    try:
        return [await store.get(namespace, name, "0")]
    except status.StatusError as err:
        if err.code == 404:
            return []
        raise ParamError(err.message) from None


async def _selected(store: RESTStore, namespace: str,
                    selector: LabelSelector) -> list[Object]:
    try:
        listed = await store.list(namespace, ListOptions(label_selector=selector,
                                                         resource_version="0"))
    except status.StatusError as err:
        raise ParamError(err.message) from None
    return sorted(listed.items, key=lambda o: (o["metadata"].get("namespace", ""),
                                               o["metadata"]["name"]))
