"""The paths and operations of /openapi/v2 and /openapi/v3, as kube publishes them: one path
for the collection, one for the item, the all-namespaces list of a namespaced kind, and the
status (and, for a custom resource, scale) subresource; operation ids and tags made as kube's
GetOperationIDAndTags makes them; a custom resource's operations as apiextensions-apiserver's
builder writes them (its patch types, no strategic merge; POST and PUT of JSON or YAML)."""

from __future__ import annotations

from typing import Any

from gateway.registry.resource import ResourceDef
from gateway.schema.dsl import META
from gateway.server.openapi_custom import SCALE, is_custom, list_definition_name

JSON = "application/json"
PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json",
               "application/strategic-merge-patch+json", "application/apply-patch+yaml")


# -- operations --------------------------------------------------------------------------------

#: kube's operation verbs (GetOperationIDAndTags' trie: the shortest one an operation name
#: starts with is its verb).
_VERBS = ("get", "log", "read", "replace", "patch", "delete", "deletecollection", "watch",
          "connect", "proxy", "list", "create")


def valid_operation_id(text: str, capitalize_first: bool) -> str:
    """kube's ToValidOperationID: letters and "_" kept (digits but first), anything else
    dropped and the next kept character capitalized."""
    out = []
    capitalize = capitalize_first
    for index, char in enumerate(text):
        if char.isalpha() or char == "_" or (index != 0 and char.isdigit()):
            out.append(char.upper() if capitalize else char)
            capitalize = False
        else:
            capitalize = True
    return "".join(out)


def operation_id_and_tags(operation: str, path: str) -> tuple[str, list[str]]:
    """kube's GetOperationIDAndTags: ``listNamespacedConfigMap`` at /api/v1/... is
    ``listCoreV1NamespacedConfigMap``, tagged ``core_v1``; a group loses ``.k8s.io``."""
    verb = min((v for v in _VERBS if operation.startswith(v)), key=len, default="")
    rest = operation[len(verb):]
    parts = path.strip("/").split("/")
    if parts[:1] == ["api"]:
        parts = ["apis", "core", *parts[1:]]
    tags = []
    prefix = verb
    if len(parts) >= 2 and parts[0] == "apis":
        trimmed = parts[1].removesuffix(".k8s.io")
        prefix += valid_operation_id(trimmed, prefix != "")
        tag = valid_operation_id(trimmed, False)
        if len(parts) > 2:
            prefix += valid_operation_id(parts[2], prefix != "")
            tag += "_" + valid_operation_id(parts[2], False)
        tags.append(tag)
    elif parts:
        tags.append(valid_operation_id(parts[0], False))
    return prefix + valid_operation_id(rest, prefix != ""), tags


def _param(name: str, where: str, v3: bool, *, required: bool = False,
           kind: str = "string") -> dict[str, Any]:
    param: dict[str, Any] = {"name": name, "in": where}
    if required:
        param["required"] = True
    if v3:
        param["schema"] = {"type": kind, "uniqueItems": True}
    else:
        param.update(type=kind, uniqueItems=True)
    return param


WRITE_PARAMS = ("dryRun", "fieldManager", "fieldValidation")
LIST_PARAMS = (("allowWatchBookmarks", "boolean"), ("continue", "string"),
               ("fieldSelector", "string"), ("labelSelector", "string"), ("limit", "integer"),
               ("resourceVersion", "string"), ("resourceVersionMatch", "string"),
               ("sendInitialEvents", "boolean"), ("timeoutSeconds", "integer"),
               ("watch", "boolean"))
#: What a custom resource's POST and PUT consume (a built-in's: anything).
CUSTOM_CONSUMES = (JSON, "application/yaml")


def _operation(resource: ResourceDef, action: str, name: str, path: str, response: str,
               v3: bool, *, query: tuple = (), body: str | None = None,
               patch: bool = False) -> dict[str, Any]:
    """One operation; ``name`` is kube's operation name (``listNamespacedConfigMap``)."""
    operation_id, tags = operation_id_and_tags(name, path)
    op: dict[str, Any] = {
        "operationId": operation_id,
        "parameters": [_param(p, "query", v3, kind=kind) for p, kind in query],
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": resource.group, "kind": resource.kind,
                                            "version": resource.version},
        "tags": tags,
    }
    ref = "#/components/schemas/" if v3 else "#/definitions/"
    if patch:
        types: tuple[str, ...] = resource.patch_types or PATCH_TYPES
    else:
        types = CUSTOM_CONSUMES if is_custom(resource) else ("*/*",)
    if v3:
        op["responses"] = {"200": {"description": "OK", "content": {
            JSON: {"schema": {"$ref": ref + response}}}}}
        if body is not None:
            op["requestBody"] = {"required": True, "content": {
                t: {"schema": {"$ref": ref + body}} for t in types}}
    else:
        op["responses"] = {"200": {"description": "OK", "schema": {"$ref": ref + response}}}
        op["produces"] = [JSON, "application/yaml"]
        if body is not None:
            op["parameters"].append({"name": "body", "in": "body", "required": True,
                                     "schema": {"$ref": ref + body}})
            if patch or is_custom(resource):
                op["consumes"] = list(types)
    return op


#: The verb each method of a collection path (False) and an item path (True) needs.
OPERATION_VERBS = {
    False: {"get": "list", "post": "create", "delete": "deletecollection"},
    True: {"get": "get", "put": "update", "patch": "patch", "delete": "delete"},
}


def resource_paths(resource: ResourceDef, v3: bool) -> dict[str, Any]:
    """The paths and operations of one resource, as kube publishes them (a custom resource's
    as apiextensions-apiserver's builder does: its patch types, its status and scale)."""
    base = f"/apis/{resource.group}/{resource.version}" if resource.group else "/api/v1"
    ns = resource.namespaced
    named = ("Namespaced" if ns else "") + resource.kind
    collection = f"{base}/namespaces/{{namespace}}/{resource.plural}" if ns else \
        f"{base}/{resource.plural}"
    item = collection + "/{name}"
    kind, list_kind = resource.schema, list_definition_name(resource)
    status_ref = f"{META}.Status"
    write = tuple((p, "string") for p in WRITE_PARAMS)
    patch_query = (*write, ("force", "boolean"))
    path_params = [_param("namespace", "path", v3, required=True)] if ns else []
    item_params = [_param("name", "path", v3, required=True), *path_params]

    def op(action: str, verb: str, path: str, response: str, **kw: Any) -> dict[str, Any]:
        return _operation(resource, action, verb, path, response, v3, **kw)

    paths = {
        collection: {
            "get": op("list", f"list{named}", collection, list_kind, query=LIST_PARAMS),
            "post": op("post", f"create{named}", collection, kind, query=write, body=kind),
            "delete": op("deletecollection", f"deletecollection{named}", collection,
                         status_ref, query=LIST_PARAMS + write),
            "parameters": path_params,
        },
        item: {
            "get": op("get", f"read{named}", item, kind),
            "put": op("put", f"replace{named}", item, kind, query=write, body=kind),
            "patch": op("patch", f"patch{named}", item, kind, query=patch_query,
                        body=f"{META}.Patch", patch=True),
            "delete": op("delete", f"delete{named}", item, status_ref, query=(
                ("dryRun", "string"), ("gracePeriodSeconds", "integer"),
                ("propagationPolicy", "string")), body=f"{META}.DeleteOptions"),
            "parameters": item_params,
        },
    }
    for path in (collection, item):  # only what the resource serves (a review: create)
        operations = paths[path]
        for method, verb in OPERATION_VERBS[path == item].items():
            if verb not in resource.verbs:
                del operations[method]
        if operations.keys() <= {"parameters"}:
            del paths[path]
    if ns and "list" in resource.verbs:
        every = f"{base}/{resource.plural}"
        paths[every] = {"get": op("list", f"list{resource.kind}ForAllNamespaces", every,
                                  list_kind, query=LIST_PARAMS)}
    for sub in resource.subresources:
        if sub == "status":
            speaks = kind
        elif sub == "scale" and is_custom(resource):
            speaks = SCALE
        else:
            continue
        path = f"{item}/{sub}"
        suffix = sub[:1].upper() + sub[1:]
        paths[path] = {
            "get": op("get", f"read{named}{suffix}", path, speaks),
            "put": op("put", f"replace{named}{suffix}", path, speaks, query=write,
                      body=speaks),
            "patch": op("patch", f"patch{named}{suffix}", path, speaks, query=patch_query,
                        body=f"{META}.Patch", patch=True),
            "parameters": item_params,
        }
    return paths
