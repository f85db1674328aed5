"""Custom resources through the official ``kubernetes`` Python client, as an operator written in
Python drives them: CustomObjectsApi (namespaced and cluster-scoped objects, patches, the status
subresource, selectors and paging), the dynamic client (discovery, CRUD, server-side apply),
watches (order, resuming, bookmarks, a second served version) and the Table and metadata-only
forms a CRD's printer columns give.

One gateway serves the module; one group of CRDs (a namespaced Widget served at v1 and v1beta1
and stored at v1, a cluster-scoped Gizmo) is created once, and each test works in a namespace
of its own (or on names of its own, for Gizmos)."""

from __future__ import annotations

import copy
import itertools
import json
import queue
import re
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client, config, dynamic, watch
from kubernetes.client import ApiException
from kubernetes.dynamic import exceptions as dynamic_errors

from tests.support.gateway import GatewayProcess

pytestmark = pytest.mark.slow

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
METADATA_LIST = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
METADATA = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"

#: A namespaced kind with two served versions (v1 stored), defaults, an enum, the status
#: subresource and printer columns of every type (one only with -o wide).
COLUMNS = [
    {"name": "Size", "type": "string", "jsonPath": ".spec.size"},
    {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
    {"name": "Hosts", "type": "string", "jsonPath": ".spec.hosts"},
    {"name": "Weight", "type": "number", "jsonPath": ".spec.weight", "priority": 1,
     "description": "How heavy the widget is"},
    {"name": "Ready", "type": "boolean", "jsonPath": ".status.ready"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]
SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {"type": "object", "required": ["size"], "properties": {
            "size": {"type": "string", "enum": ["small", "large"]},
            "replicas": {"type": "integer", "minimum": 0, "default": 1},
            "image": {"type": "string"},
            "hosts": {"type": "array", "items": {"type": "string"}},
            "weight": {"type": "number"}}},
        "status": {"type": "object", "properties": {
            "ready": {"type": "boolean"}, "phase": {"type": "string"}}},
    },
}


def _crds(group: str) -> list[dict[str, Any]]:
    version = {"served": True, "schema": {"openAPIV3Schema": SCHEMA},
               "subresources": {"status": {}}, "additionalPrinterColumns": COLUMNS}
    short = "cw" + group.split(".")[0][1:]
    widgets = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                           "shortNames": [short], "categories": [f"all-{short}"]},
                 "versions": [{"name": "v1", "storage": True, **copy.deepcopy(version)},
                              {"name": "v1beta1", "storage": False,
                               **copy.deepcopy(version)}]},
    }
    gizmos = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gizmos.{group}"},
        "spec": {"group": group, "scope": "Cluster",
                 "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                     "openAPIV3Schema": {"type": "object", "properties": {"spec": {
                         "type": "object", "properties": {"color": {"type": "string"}}}}}}}]},
    }
    return [widgets, gizmos]


@pytest.fixture(scope="module")
def group(gateway: GatewayProcess) -> str:
    """The module's CRD group, its CRDs created and Established."""
    g = f"c{uuid.uuid4().hex[:8]}.example.com"
    gateway.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(_crds(g)))
    gateway.kubectl("wait", "--for=condition=established", "--timeout=30s",
                    f"crd/widgets.{g}", f"crd/gizmos.{g}")
    return g


@pytest.fixture(scope="module")
def api_client(gateway: GatewayProcess) -> Iterator[client.ApiClient]:
    api = config.new_client_from_config(config_file=str(gateway.kubeconfig))
    yield api
    api.close()


@pytest.fixture(scope="module")
def custom(api_client: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client)


@pytest.fixture(scope="module")
def dyn(api_client: client.ApiClient, group: str) -> dynamic.DynamicClient:
    return dynamic.DynamicClient(api_client)


def widget(group: str, name: str, version: str = "v1", labels: dict[str, str] | None = None,
           **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": f"{group}/{version}", "kind": "Widget", "metadata": meta,
            "spec": {"size": "small", **spec}}


def create(custom: client.CustomObjectsApi, group: str, ns: str, name: str,
           **kwargs: Any) -> dict[str, Any]:
    return custom.create_namespaced_custom_object(group, "v1", ns, "widgets",
                                                  widget(group, name, **kwargs))


def status_of(err: ApiException) -> dict[str, Any]:
    return json.loads(err.body)


def names(listed: dict[str, Any]) -> list[str]:
    return [item["metadata"]["name"] for item in listed["items"]]


_END = object()


def take(events: Iterator[Any], count: int, timeout: float = 15) -> list[Any]:
    """The first ``count`` items of a watch iterator, or fail after ``timeout``."""
    out: queue.Queue[Any] = queue.Queue()

    def pump() -> None:
        try:
            for item in itertools.islice(events, count):
                out.put(item)
            out.put(_END)  # the stream ended (or gave what was asked)
        except Exception as err:  # surfaced to the test below
            out.put(err)

    threading.Thread(target=pump, daemon=True).start()
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        try:
            item = out.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"only {len(got)} of {count} watch events: {got}") from None
        if isinstance(item, Exception):
            raise item
        if item is _END:
            raise AssertionError(f"the watch ended after {len(got)} of {count} events: {got}")
        got.append(item)
    return got


def raw(gateway: GatewayProcess, path: str, accept: str) -> dict[str, Any]:
    code, body = gateway.request("GET", path, headers={"Accept": accept})
    assert code == 200, body
    return json.loads(body)


# -- CustomObjectsApi: namespaced objects ------------------------------------------------------


def test_namespaced_custom_object_create_get_list_replace_delete(custom, group, ns):
    made = custom.create_namespaced_custom_object(
        group, "v1", ns, "widgets", {**widget(group, "one", image="nginx"),
                                     "status": {"ready": True}})
    assert made["apiVersion"] == f"{group}/v1" and made["kind"] == "Widget"
    assert made["metadata"]["namespace"] == ns and made["metadata"]["uid"]
    assert made["metadata"]["generation"] == 1
    assert made["spec"] == {"size": "small", "image": "nginx", "replicas": 1}  # defaulted
    assert "status" not in made  # the status subresource owns it

    got = custom.get_namespaced_custom_object(group, "v1", ns, "widgets", "one")
    assert got == made

    listed = custom.list_namespaced_custom_object(group, "v1", ns, "widgets")
    assert listed["kind"] == "WidgetList" and listed["apiVersion"] == f"{group}/v1"
    assert names(listed) == ["one"]
    assert int(listed["metadata"]["resourceVersion"]) >= int(made["metadata"]["resourceVersion"])

    got["spec"] = {"size": "large"}
    replaced = custom.replace_namespaced_custom_object(group, "v1", ns, "widgets", "one", got)
    assert replaced["spec"] == {"size": "large", "replicas": 1}
    assert replaced["metadata"]["generation"] == 2
    assert replaced["metadata"]["uid"] == made["metadata"]["uid"]

    with pytest.raises(ApiException) as err:  # got still carries the old resourceVersion
        custom.replace_namespaced_custom_object(group, "v1", ns, "widgets", "one", got)
    assert err.value.status == 409
    assert status_of(err.value)["reason"] == "Conflict"
    assert status_of(err.value)["message"] == (
        f'Operation cannot be fulfilled on widgets.{group} "one": the object has been '
        "modified; please apply your changes to the latest version and try again")

    with pytest.raises(ApiException) as err:
        create(custom, group, ns, "one")
    assert err.value.status == 409
    assert status_of(err.value)["reason"] == "AlreadyExists"
    assert status_of(err.value)["message"] == f'widgets.{group} "one" already exists'

    deleted = custom.delete_namespaced_custom_object(group, "v1", ns, "widgets", "one")
    assert deleted["kind"] == "Status" and deleted["status"] == "Success"
    assert deleted["details"] == {"name": "one", "group": group, "kind": "widgets",
                                  "uid": made["metadata"]["uid"]}
    with pytest.raises(ApiException) as err:
        custom.get_namespaced_custom_object(group, "v1", ns, "widgets", "one")
    assert err.value.status == 404
    assert status_of(err.value)["message"] == f'widgets.{group} "one" not found'
    assert status_of(err.value)["details"] == {"name": "one", "group": group,
                                               "kind": "widgets"}


def test_merge_and_json_patches(custom, group, ns):
    create(custom, group, ns, "p", replicas=3)

    merged = custom.patch_namespaced_custom_object(
        group, "v1", ns, "widgets", "p", {"spec": {"image": "redis", "replicas": None}})
    # null removes the field; the schema's default comes back on the way in
    assert merged["spec"] == {"size": "small", "image": "redis", "replicas": 1}
    assert merged["metadata"]["generation"] == 2

    patched = custom.patch_namespaced_custom_object(
        group, "v1", ns, "widgets", "p",
        [{"op": "test", "path": "/spec/size", "value": "small"},
         {"op": "replace", "path": "/spec/size", "value": "large"},
         {"op": "add", "path": "/spec/hosts", "value": ["a.example.com"]},
         {"op": "add", "path": "/spec/hosts/-", "value": "b.example.com"},
         {"op": "remove", "path": "/spec/image"}],
        _content_type=JSON_PATCH)
    assert patched["spec"] == {"size": "large", "replicas": 1,
                               "hosts": ["a.example.com", "b.example.com"]}
    assert patched["metadata"]["generation"] == 3

    # a patch whose result breaks the schema
    with pytest.raises(ApiException) as err:
        custom.patch_namespaced_custom_object(group, "v1", ns, "widgets", "p",
                                              {"spec": {"size": "medium"}})
    assert err.value.status == 422
    [cause] = status_of(err.value)["details"]["causes"]
    assert cause == {"reason": "FieldValueNotSupported", "field": "spec.size",
                     "message": 'Unsupported value: "medium": supported values: "small", '
                                '"large"'}
    unchanged = custom.get_namespaced_custom_object(group, "v1", ns, "widgets", "p")
    assert unchanged["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]


def test_a_json_patch_whose_test_operation_fails(custom, group, ns):
    """kube's patch handler answers a JSON patch that does not apply with
    NewGenericServerResponse(422, ...): reason Invalid and a fixed message, the patch
    library's own error left out."""
    create(custom, group, ns, "t", size="large")
    with pytest.raises(ApiException) as err:
        custom.patch_namespaced_custom_object(
            group, "v1", ns, "widgets", "t",
            [{"op": "test", "path": "/spec/size", "value": "small"}], _content_type=JSON_PATCH)
    assert err.value.status == 422
    status = status_of(err.value)
    assert status["reason"] == "Invalid"
    assert status["message"] == "the server rejected our request due to an error in our request"
    with pytest.raises(ApiException) as err:
        custom.patch_namespaced_custom_object(
            group, "v1", ns, "widgets", "t",
            [{"op": "remove", "path": "/spec/nothing"}], _content_type=JSON_PATCH)
    assert err.value.status == 422
    assert status_of(err.value)["message"] == \
        "the server rejected our request due to an error in our request"


def test_the_status_subresource(custom, group, ns):
    made = create(custom, group, ns, "s")

    whole = custom.get_namespaced_custom_object_status(group, "v1", ns, "widgets", "s")
    assert whole == made  # /status reads the whole object

    patched = custom.patch_namespaced_custom_object_status(
        group, "v1", ns, "widgets", "s",
        {"status": {"ready": True, "phase": "Running"}, "spec": {"size": "large"}})
    assert patched["status"] == {"ready": True, "phase": "Running"}
    assert patched["spec"]["size"] == "small"  # /status ignores the spec
    assert patched["metadata"]["generation"] == 1
    assert int(patched["metadata"]["resourceVersion"]) > \
        int(made["metadata"]["resourceVersion"])

    patched["status"] = {"ready": False}
    replaced = custom.replace_namespaced_custom_object_status(group, "v1", ns, "widgets", "s",
                                                              patched)
    assert replaced["status"] == {"ready": False}

    # the main resource ignores the status
    replaced["status"] = {"ready": True, "phase": "Hacked"}
    replaced["spec"]["image"] = "nginx"
    updated = custom.replace_namespaced_custom_object(group, "v1", ns, "widgets", "s",
                                                      replaced)
    assert updated["status"] == {"ready": False}
    assert updated["spec"]["image"] == "nginx" and updated["metadata"]["generation"] == 2

    with pytest.raises(ApiException) as err:
        custom.patch_namespaced_custom_object_status(group, "v1", ns, "widgets", "s",
                                                     {"status": {"ready": "yes"}})
    assert err.value.status == 422
    [cause] = status_of(err.value)["details"]["causes"]
    assert (cause["reason"], cause["field"]) == ("FieldValueTypeInvalid", "status.ready")
    assert cause["message"] == \
        'Invalid value: "string": status.ready in body must be of type boolean: "string"'


# -- CustomObjectsApi: cluster-scoped objects --------------------------------------------------


def test_cluster_scoped_custom_objects(custom, group):
    name = f"gz-{uuid.uuid4().hex[:6]}"
    body = {"apiVersion": f"{group}/v1", "kind": "Gizmo",
            "metadata": {"name": name, "namespace": "default", "labels": {"mark": name}},
            "spec": {"color": "red"}}
    made = custom.create_cluster_custom_object(group, "v1", "gizmos", body)
    assert "namespace" not in made["metadata"]  # cleared for a cluster-scoped kind
    assert made["spec"] == {"color": "red"}

    got = custom.get_cluster_custom_object(group, "v1", "gizmos", name)
    assert got["metadata"]["uid"] == made["metadata"]["uid"]
    listed = custom.list_cluster_custom_object(group, "v1", "gizmos", label_selector=f"mark={name}")
    assert listed["kind"] == "GizmoList" and names(listed) == [name]

    patched = custom.patch_cluster_custom_object(group, "v1", "gizmos", name,
                                                 {"spec": {"color": "blue"}})
    assert patched["spec"] == {"color": "blue"} and patched["metadata"]["generation"] == 2
    patched = custom.patch_cluster_custom_object(
        group, "v1", "gizmos", name, [{"op": "add", "path": "/metadata/labels/extra",
                                       "value": "yes"}], _content_type=JSON_PATCH)
    assert patched["metadata"]["labels"] == {"mark": name, "extra": "yes"}
    assert patched["metadata"]["generation"] == 2  # metadata alone does not bump it

    patched["spec"]["color"] = "green"
    replaced = custom.replace_cluster_custom_object(group, "v1", "gizmos", name, patched)
    assert replaced["spec"] == {"color": "green"}

    deleted = custom.delete_cluster_custom_object(group, "v1", "gizmos", name)
    assert deleted["status"] == "Success" and deleted["details"]["kind"] == "gizmos"
    with pytest.raises(ApiException) as err:
        custom.get_cluster_custom_object(group, "v1", "gizmos", name)
    assert err.value.status == 404
    assert status_of(err.value)["message"] == f'gizmos.{group} "{name}" not found'


# -- selectors and paging ----------------------------------------------------------------------


def test_list_with_label_selectors(custom, group, ns):
    create(custom, group, ns, "web-prod", labels={"tier": "web", "env": "prod"})
    create(custom, group, ns, "web-dev", labels={"tier": "web", "env": "dev"})
    create(custom, group, ns, "db-prod", labels={"tier": "db", "env": "prod"})
    create(custom, group, ns, "bare")

    def selected(selector: str) -> list[str]:
        return names(custom.list_namespaced_custom_object(group, "v1", ns, "widgets",
                                                          label_selector=selector))

    assert selected("tier=web") == ["web-dev", "web-prod"]
    assert selected("tier!=web") == ["bare", "db-prod"]
    assert selected("tier in (web,db),env=prod") == ["db-prod", "web-prod"]
    assert selected("env notin (prod)") == ["bare", "web-dev"]
    assert selected("tier") == ["db-prod", "web-dev", "web-prod"]
    assert selected("!tier") == ["bare"]
    assert selected("tier=cache") == []

    everywhere = custom.list_cluster_custom_object(group, "v1", "widgets",
                                                   label_selector="tier=db")
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in everywhere["items"]] \
        == [(ns, "db-prod")]

    with pytest.raises(ApiException) as err:
        custom.list_namespaced_custom_object(group, "v1", ns, "widgets",
                                             label_selector="tier in web")
    assert err.value.status == 400


def test_list_with_field_selectors(custom, group, ns, api):
    for name in ("a", "b", "c"):
        create(custom, group, ns, name)
    other = api.namespace()
    create(custom, group, other, "a")

    def selected(selector: str, namespace: str | None = ns) -> list[tuple[str, str]]:
        if namespace is None:
            listed = custom.list_cluster_custom_object(group, "v1", "widgets",
                                                       field_selector=selector)
        else:
            listed = custom.list_namespaced_custom_object(group, "v1", namespace, "widgets",
                                                          field_selector=selector)
        return [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in listed["items"]]

    assert selected("metadata.name=b") == [(ns, "b")]
    assert selected("metadata.name!=b") == [(ns, "a"), (ns, "c")]
    assert selected("metadata.name==a", None) == sorted([(ns, "a"), (other, "a")])
    assert selected(f"metadata.namespace={other}", None) == [(other, "a")]
    assert selected(f"metadata.name=a,metadata.namespace={ns}", None) == [(ns, "a")]
    gizmo = f"gz-{uuid.uuid4().hex[:6]}"
    custom.create_cluster_custom_object(group, "v1", "gizmos", {
        "apiVersion": f"{group}/v1", "kind": "Gizmo", "metadata": {"name": gizmo}})
    assert names(custom.list_cluster_custom_object(
        group, "v1", "gizmos", field_selector=f"metadata.name={gizmo}")) == [gizmo]


def test_unsupported_field_selectors(custom, group, ns):
    """CRs support only metadata.name and, for namespaced kinds, metadata.namespace; any
    other label is refused with crConverter.ConvertFieldLabel's error as a BadRequest."""
    with pytest.raises(ApiException) as err:
        custom.list_namespaced_custom_object(group, "v1", ns, "widgets",
                                             field_selector="spec.size=small")
    assert err.value.status == 400
    assert status_of(err.value)["reason"] == "BadRequest"
    assert status_of(err.value)["message"] == "field label not supported: spec.size"
    with pytest.raises(ApiException) as err:
        custom.list_cluster_custom_object(group, "v1", "gizmos",
                                          field_selector="metadata.namespace=default")
    assert err.value.status == 400
    assert status_of(err.value)["message"] == "field label not supported: metadata.namespace"


def test_pagination_with_limit_and_continue(custom, group, ns):
    for i in range(7):
        create(custom, group, ns, f"w{i}", labels={"odd": str(i % 2)})

    first = custom.list_namespaced_custom_object(group, "v1", ns, "widgets", limit=3)
    assert names(first) == ["w0", "w1", "w2"]
    assert first["metadata"]["remainingItemCount"] == 4 and first["metadata"]["continue"]
    create(custom, group, ns, "w9")  # after the first page: not in this list's snapshot
    second = custom.list_namespaced_custom_object(group, "v1", ns, "widgets", limit=3,
                                                  _continue=first["metadata"]["continue"])
    assert names(second) == ["w3", "w4", "w5"]
    assert second["metadata"]["remainingItemCount"] == 1
    third = custom.list_namespaced_custom_object(group, "v1", ns, "widgets", limit=3,
                                                 _continue=second["metadata"]["continue"])
    assert names(third) == ["w6"]
    assert "continue" not in third["metadata"] and "remainingItemCount" not in third["metadata"]
    assert first["metadata"]["resourceVersion"] == second["metadata"]["resourceVersion"] == \
        third["metadata"]["resourceVersion"]

    # with a selector, pages hold matching objects only
    seen, token = [], None
    while True:
        kwargs = {"_continue": token} if token else {}
        page = custom.list_namespaced_custom_object(group, "v1", ns, "widgets", limit=2,
                                                    label_selector="odd=1", **kwargs)
        assert len(page["items"]) <= 2
        seen += names(page)
        token = page["metadata"].get("continue")
        if not token:
            break
    assert seen == ["w1", "w3", "w5"]

    everything = custom.list_namespaced_custom_object(group, "v1", ns, "widgets")
    assert names(everything) == ["w0", "w1", "w2", "w3", "w4", "w5", "w6", "w9"]


# -- the dynamic client ------------------------------------------------------------------------


def test_dynamic_client_discovery_get_create_delete(dyn, group, ns):
    short = "cw" + group.split(".")[0][1:]
    widgets = dyn.resources.get(api_version=f"{group}/v1", kind="Widget")
    assert (widgets.name, widgets.kind, widgets.namespaced) == ("widgets", "Widget", True)
    assert widgets.short_names == [short] and widgets.categories == [f"all-{short}"]
    assert set(widgets.subresources) == {"status"}
    assert set(widgets.verbs) == {"create", "delete", "deletecollection", "get", "list",
                                  "patch", "update", "watch"}
    assert dyn.resources.get(api_version=f"{group}/v1", short_names=[short]).kind == "Widget"
    found = {(r.group_version, r.kind) for r in dyn.resources.search(group=group)
             if not r.kind.endswith("List")}
    assert {(f"{group}/v1", "Widget"), (f"{group}/v1beta1", "Widget"),
            (f"{group}/v1", "Gizmo")} <= found
    gizmos = dyn.resources.get(api_version=f"{group}/v1", kind="Gizmo")
    assert gizmos.namespaced is False

    made = widgets.create(body=widget(group, "dyn", size="large"), namespace=ns)
    assert made.kind == "Widget" and made.spec.size == "large" and made.spec.replicas == 1
    got = widgets.get(name="dyn", namespace=ns)
    assert got.metadata.uid == made.metadata.uid
    listed = widgets.get(namespace=ns)
    assert listed.kind == "WidgetList" and [i.metadata.name for i in listed.items] == ["dyn"]

    # the other served version: created there, read back here (stored once)
    old = dyn.resources.get(api_version=f"{group}/v1beta1", kind="Widget")
    beta = old.create(body=widget(group, "beta", version="v1beta1"), namespace=ns)
    assert beta.apiVersion == f"{group}/v1beta1"
    assert widgets.get(name="beta", namespace=ns).apiVersion == f"{group}/v1"
    assert old.get(name="dyn", namespace=ns).apiVersion == f"{group}/v1beta1"

    status = widgets.status.patch(body={"status": {"ready": True}}, name="dyn",
                                  namespace=ns, content_type=MERGE)
    assert status.status.ready is True

    # the dynamic client's default patch is a strategic merge patch, which CRs refuse
    with pytest.raises(dynamic_errors.DynamicApiError) as err:
        widgets.patch(body={"spec": {"image": "x"}}, name="dyn", namespace=ns)
    assert err.value.status == 415
    assert json.loads(err.value.body)["message"] == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, "
        "application/apply-patch+yaml")

    deleted = widgets.delete(name="dyn", namespace=ns)
    assert deleted.status == "Success"
    with pytest.raises(dynamic_errors.NotFoundError):
        widgets.get(name="dyn", namespace=ns)


def test_server_side_apply_through_the_dynamic_client(dyn, group, ns):
    """Field ownership of a CR follows its schema: two managers applying different fields
    of the spec both keep them; a changed field owned by another is a conflict."""
    widgets = dyn.resources.get(api_version=f"{group}/v1", kind="Widget")
    alice = widgets.server_side_apply(body=widget(group, "ssa", size="small"), namespace=ns,
                                      field_manager="alice")
    assert alice.spec.to_dict() == {"size": "small", "replicas": 1}
    both = widgets.server_side_apply(
        body={"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "ssa"},
              "spec": {"image": "nginx"}}, namespace=ns, field_manager="bob")
    assert both.spec.to_dict() == {"size": "small", "image": "nginx", "replicas": 1}
    owned = {m["manager"]: m["fieldsV1"] for m in both.to_dict()["metadata"]["managedFields"]}
    assert "f:size" in owned["alice"]["f:spec"] and "f:image" not in owned["alice"]["f:spec"]
    assert "f:image" in owned["bob"]["f:spec"] and "f:size" not in owned["bob"]["f:spec"]

    with pytest.raises(dynamic_errors.ConflictError) as err:
        widgets.server_side_apply(
            body={"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "ssa"},
                  "spec": {"image": "nginx", "size": "large"}},
            namespace=ns, field_manager="bob")
    status = json.loads(err.value.body)
    assert status["reason"] == "Conflict"
    assert status["message"] == 'Apply failed with 1 conflict: conflict with "alice": .spec.size'
    assert status["details"]["causes"] == [{"reason": "FieldManagerConflict",
                                            "message": 'conflict with "alice"',
                                            "field": ".spec.size"}]
    forced = widgets.server_side_apply(
        body={"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "ssa"},
              "spec": {"image": "nginx", "size": "large"}},
        namespace=ns, field_manager="bob", force_conflicts=True)
    assert forced.spec.size == "large"


# -- watches -----------------------------------------------------------------------------------


def test_watch_sees_added_modified_deleted_in_order_and_resumes(custom, group, ns):
    start = custom.list_namespaced_custom_object(group, "v1", ns, "widgets")
    rv = start["metadata"]["resourceVersion"]
    create(custom, group, ns, "a")
    create(custom, group, ns, "b")
    custom.patch_namespaced_custom_object(group, "v1", ns, "widgets", "a",
                                          {"spec": {"size": "large"}})
    custom.delete_namespaced_custom_object(group, "v1", ns, "widgets", "b")

    stream = watch.Watch()
    events = take(stream.stream(custom.list_namespaced_custom_object, group, "v1", ns,
                                "widgets", resource_version=rv), 4)
    stream.stop()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]
    assert all(e["object"]["kind"] == "Widget" and e["object"]["apiVersion"] == f"{group}/v1"
               for e in events)
    assert events[2]["object"]["spec"] == {"size": "large", "replicas": 1}
    revisions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert revisions == sorted(set(revisions)) and revisions[0] > int(rv)

    # resumed from the second event's resourceVersion: only what came after it
    stream = watch.Watch()
    resumed = take(stream.stream(custom.list_namespaced_custom_object, group, "v1", ns,
                                 "widgets", resource_version=str(revisions[1])), 2)
    stream.stop()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in resumed] == [
        ("MODIFIED", "a"), ("DELETED", "b")]

    # and writes made while it runs arrive too
    stream = watch.Watch()
    live = stream.stream(custom.list_namespaced_custom_object, group, "v1", ns, "widgets",
                         resource_version=str(revisions[-1]))
    threading.Timer(0.3, lambda: create(custom, group, ns, "c")).start()
    [event] = take(live, 1)
    stream.stop()
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "c")


def test_watch_with_a_label_selector(custom, group, ns):
    rv = custom.list_namespaced_custom_object(group, "v1", ns, "widgets")["metadata"][
        "resourceVersion"]
    create(custom, group, ns, "plain")
    create(custom, group, ns, "marked", labels={"watch": "me"})
    custom.patch_namespaced_custom_object(group, "v1", ns, "widgets", "plain",
                                          {"metadata": {"labels": {"watch": "me"}}})
    custom.patch_namespaced_custom_object(group, "v1", ns, "widgets", "marked",
                                          {"metadata": {"labels": {"watch": None}}})
    stream = watch.Watch()
    events = take(stream.stream(custom.list_namespaced_custom_object, group, "v1", ns,
                                "widgets", resource_version=rv, label_selector="watch=me"), 3)
    stream.stop()
    # an object entering the selection is ADDED, one leaving it DELETED (kube's cacher)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "marked"), ("ADDED", "plain"), ("DELETED", "marked")]


def test_watch_with_bookmarks(custom, group, ns):
    """kube's watch cache sends a watcher that allows bookmarks one 2s before its timeout
    (cacheWatcher.nextBookmarkTime), at the cache's revision, once that is past the watch's
    start."""
    rv = custom.list_namespaced_custom_object(group, "v1", ns, "widgets")["metadata"][
        "resourceVersion"]
    stream = watch.Watch()
    events = stream.stream(custom.list_namespaced_custom_object, group, "v1", ns, "widgets",
                           resource_version=rv, allow_watch_bookmarks=True, timeout_seconds=6)
    threading.Timer(0.3, lambda: create(custom, group, ns, "bm")).start()
    got = take(events, 2, timeout=20)
    stream.stop()
    assert [e["type"] for e in got] == ["ADDED", "BOOKMARK"], got
    added, bookmark = got[0]["raw_object"], got[1]["raw_object"]
    assert bookmark["kind"] == "Widget" and bookmark["apiVersion"] == f"{group}/v1"
    assert int(bookmark["metadata"]["resourceVersion"]) >= \
        int(added["metadata"]["resourceVersion"])
    assert stream.resource_version == bookmark["metadata"]["resourceVersion"]


def test_watch_of_the_other_version_converts_objects_stored_at_v1(custom, gateway, group, ns):
    code, crd = gateway.request("GET", "/apis/apiextensions.k8s.io/v1/"
                                       f"customresourcedefinitions/widgets.{group}")
    assert code == 200
    assert json.loads(crd)["status"]["storedVersions"] == ["v1"]
    rv = custom.list_namespaced_custom_object(group, "v1beta1", ns, "widgets")["metadata"][
        "resourceVersion"]
    create(custom, group, ns, "via-v1")
    custom.create_namespaced_custom_object(group, "v1beta1", ns, "widgets",
                                           widget(group, "via-beta", version="v1beta1"))
    custom.patch_namespaced_custom_object(group, "v1", ns, "widgets", "via-beta",
                                          {"spec": {"size": "large"}})
    custom.delete_namespaced_custom_object(group, "v1", ns, "widgets", "via-v1")

    stream = watch.Watch()
    events = take(stream.stream(custom.list_namespaced_custom_object, group, "v1beta1", ns,
                                "widgets", resource_version=rv), 4)
    stream.stop()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "via-v1"), ("ADDED", "via-beta"), ("MODIFIED", "via-beta"),
        ("DELETED", "via-v1")]
    assert {e["object"]["apiVersion"] for e in events} == {f"{group}/v1beta1"}
    assert custom.get_namespaced_custom_object(group, "v1", ns, "widgets", "via-beta")[
        "apiVersion"] == f"{group}/v1"


# -- Table and metadata-only output ------------------------------------------------------------


def _two_widgets(custom: client.CustomObjectsApi, group: str, ns: str) -> str:
    """A full Widget (every column has a value) and a sparse one; their list's path."""
    create(custom, group, ns, "full", hosts=["a.example.com", "b.example.com"], weight=2.5)
    custom.patch_namespaced_custom_object_status(group, "v1", ns, "widgets", "full",
                                                 {"status": {"ready": True}})
    create(custom, group, ns, "sparse", size="large", replicas=0)
    return f"/apis/{group}/v1/namespaces/{ns}/widgets"


def test_table_column_definitions(custom, gateway, group, ns):
    table = raw(gateway, _two_widgets(custom, group, ns), TABLE)
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert table["metadata"]["resourceVersion"]
    headers = [{k: c[k] for k in ("name", "type", "format", "priority")}
               for c in table["columnDefinitions"]]
    assert headers == [
        {"name": "Name", "type": "string", "format": "name", "priority": 0},
        {"name": "Size", "type": "string", "format": "", "priority": 0},
        {"name": "Replicas", "type": "integer", "format": "", "priority": 0},
        {"name": "Hosts", "type": "string", "format": "", "priority": 0},
        {"name": "Weight", "type": "number", "format": "", "priority": 1},
        {"name": "Ready", "type": "boolean", "format": "", "priority": 0},
        {"name": "Age", "type": "date", "format": "", "priority": 0}]
    # a column's description is its own, else "Custom resource definition column (in
    # JSONPath format): <path>" (kube's tableconvertor.New)
    descriptions = {c["name"]: c["description"] for c in table["columnDefinitions"]}
    assert descriptions["Weight"] == "How heavy the widget is"
    assert descriptions["Size"] == \
        "Custom resource definition column (in JSONPath format): .spec.size"
    assert descriptions["Hosts"] == \
        "Custom resource definition column (in JSONPath format): .spec.hosts"
    assert descriptions["Age"] == \
        "Custom resource definition column (in JSONPath format): .metadata.creationTimestamp"


def test_table_cells(custom, gateway, group, ns):
    table = raw(gateway, _two_widgets(custom, group, ns), TABLE)
    rows = {r["cells"][0]: r["cells"] for r in table["rows"]}
    assert sorted(rows) == ["full", "sparse"]
    assert all(len(cells) == 7 for cells in rows.values())
    # the simple columns; a missing value is a null cell
    assert rows["full"][:3] == ["full", "small", 1]
    assert rows["full"][4:6] == [2.5, True]
    assert rows["sparse"][:6] == ["sparse", "large", 0, None, None, None]
    # a string column prints a list as JSON (client-go jsonpath's PrintResults)
    assert rows["full"][3] == '["a.example.com","b.example.com"]'
    # a date column is how long ago (metatable.ConvertToHumanReadableDateType)
    assert re.fullmatch(r"\d+s", rows["full"][6]), rows["full"]


def test_table_rows_objects_and_versions(custom, gateway, group, ns):
    path = _two_widgets(custom, group, ns)
    table = raw(gateway, path, TABLE)
    # each row carries the object's metadata by default
    for row in table["rows"]:
        obj = row["object"]
        assert (obj["kind"], obj["apiVersion"]) == ("PartialObjectMetadata", "meta.k8s.io/v1")
        assert obj["metadata"]["name"] == row["cells"][0] and "spec" not in obj
    bare = raw(gateway, path + "?includeObject=None", TABLE)
    assert all(r.get("object") is None for r in bare["rows"])
    whole = raw(gateway, path + "?includeObject=Object", TABLE)
    assert {r["object"]["kind"] for r in whole["rows"]} == {"Widget"}
    assert {r["object"]["spec"]["size"] for r in whole["rows"]} == {"small", "large"}

    one = raw(gateway, path + "/full", TABLE)
    assert [r["cells"][:3] for r in one["rows"]] == [["full", "small", 1]]
    beta = raw(gateway, f"/apis/{group}/v1beta1/namespaces/{ns}/widgets/full"
                        "?includeObject=Object", TABLE)
    assert beta["rows"][0]["object"]["apiVersion"] == f"{group}/v1beta1"
    paged = raw(gateway, path + "?limit=1", TABLE)
    assert [r["cells"][0] for r in paged["rows"]] == ["full"]
    assert paged["metadata"]["continue"] and paged["metadata"]["remainingItemCount"] == 1


def test_table_of_a_kind_without_printer_columns(custom, gateway, group):
    """No additionalPrinterColumns: Name, then kube's default Age column (a date)."""
    gizmo = f"gz-{uuid.uuid4().hex[:6]}"
    custom.create_cluster_custom_object(group, "v1", "gizmos", {
        "apiVersion": f"{group}/v1", "kind": "Gizmo", "metadata": {"name": gizmo}})
    gizmos = raw(gateway, f"/apis/{group}/v1/gizmos/{gizmo}", TABLE)
    assert [(c["name"], c["type"]) for c in gizmos["columnDefinitions"]] == [
        ("Name", "string"), ("Age", "date")]
    [row] = gizmos["rows"]
    assert row["cells"][0] == gizmo
    assert re.fullmatch(r"\d+s", row["cells"][1]), row


def test_partial_object_metadata_list(custom, gateway, group, ns):
    create(custom, group, ns, "m1", labels={"k": "v"})
    create(custom, group, ns, "m2")
    path = f"/apis/{group}/v1/namespaces/{ns}/widgets"

    listed = raw(gateway, path, METADATA_LIST)
    assert (listed["kind"], listed["apiVersion"]) == ("PartialObjectMetadataList",
                                                      "meta.k8s.io/v1")
    assert listed["metadata"]["resourceVersion"]
    assert [(i["kind"], i["apiVersion"], i["metadata"]["name"]) for i in listed["items"]] == [
        ("PartialObjectMetadata", "meta.k8s.io/v1", "m1"),
        ("PartialObjectMetadata", "meta.k8s.io/v1", "m2")]
    assert listed["items"][0]["metadata"]["labels"] == {"k": "v"}
    assert all(set(i) == {"kind", "apiVersion", "metadata"} for i in listed["items"])

    selected = raw(gateway, path + "?labelSelector=k%3Dv", METADATA_LIST)
    assert [i["metadata"]["name"] for i in selected["items"]] == ["m1"]
    paged = raw(gateway, path + "?limit=1", METADATA_LIST)
    assert [i["metadata"]["name"] for i in paged["items"]] == ["m1"]
    assert paged["metadata"]["continue"] and paged["metadata"]["remainingItemCount"] == 1

    one = raw(gateway, path + "/m2", METADATA)
    assert (one["kind"], one["apiVersion"]) == ("PartialObjectMetadata", "meta.k8s.io/v1")
    assert one["metadata"]["name"] == "m2" and one["metadata"]["namespace"] == ns
