"""managedFields and server-side apply, as kube's fieldmanager (structured-merge-diff) does them."""

from __future__ import annotations

import copy
import json

import pytest

import gateway.apis.install  # noqa: F401 - defines every schema
from gateway.apimachinery.status import Cause, StatusError
from gateway.registry import fieldmanager as fm
from tests.support import api

CONFIGMAP = {"$ref": "io.k8s.api.core.v1.ConfigMap"}
SERVICE = {"$ref": "io.k8s.api.core.v1.Service"}
PORT80 = 'k:{"port":80,"protocol":"TCP"}'
PORT443 = 'k:{"port":443,"protocol":"TCP"}'
T0 = "2024-01-01T00:00:00Z"
T1 = "2024-06-01T12:00:00Z"


@pytest.fixture(autouse=True)
def frozen_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fm, "_now", lambda: T1)


def configmap(data: dict[str, str], **meta) -> dict:
    """ConfigMap ns/c with ``data``; ``meta`` adds metadata fields (labels, uid, ...)."""
    obj = api.configmap("c", namespace="ns", **data)
    obj["metadata"].update(meta)
    return obj


def service(ports: list[dict], **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "s", "namespace": "ns"},
            "spec": {"ports": ports, **spec}}


def entries(obj: dict) -> dict[tuple[str, str], dict]:
    """managedFields by (manager, operation)."""
    return {(e["manager"], e["operation"]): e for e in obj["metadata"].get("managedFields", [])}


def fields_of(obj: dict, manager: str, operation: str = "Update") -> dict:
    return entries(obj)[(manager, operation)]["fieldsV1"]


def owned(obj: dict, manager: str, operation: str = "Update") -> set[tuple[str, ...]]:
    """The paths ``manager`` owns (none when it has no entry)."""
    entry = entries(obj).get((manager, operation))
    return fm.from_fields_v1(entry["fieldsV1"]) if entry else set()


def created(obj: dict, schema: dict = CONFIGMAP, manager: str = "creator") -> dict:
    """``obj`` as a create by ``manager`` leaves it."""
    obj = copy.deepcopy(obj)
    fm.record_update(None, obj, schema, manager=manager, api_version="v1")
    for entry in obj["metadata"]["managedFields"]:
        entry["time"] = T0
    return obj


# -- field sets -----------------------------------------------------------------------------------


def test_flatten_configmap() -> None:
    obj = configmap({"k": "v"}, labels={"app": "x"}, uid="u", resourceVersion="7",
                    creationTimestamp=T0, generation=1,
                    managedFields=[{"manager": "m"}])
    flat = fm.flatten(obj, CONFIGMAP)
    assert flat == {
        ("f:data",): fm.MEMBER,
        ("f:data", "f:k"): "v",
        ("f:metadata", "f:labels"): fm.MEMBER,
        ("f:metadata", "f:labels", "f:app"): "x",
    }


def test_fields_v1_of_a_configmap() -> None:
    obj = configmap({"k": "v", "other": "w"}, labels={"app": "x"},
                    annotations={"example.com/a": "1"})
    assert fm.to_fields_v1(set(fm.flatten(obj, CONFIGMAP))) == {
        "f:data": {".": {}, "f:k": {}, "f:other": {}},
        "f:metadata": {
            "f:annotations": {".": {}, "f:example.com/a": {}},
            "f:labels": {".": {}, "f:app": {}},
        },
    }


def test_fields_v1_of_an_empty_map_is_a_leaf() -> None:
    assert fm.to_fields_v1(set(fm.flatten(configmap({}), CONFIGMAP))) == {"f:data": {}}


def test_fields_v1_of_a_service() -> None:
    obj = service([{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080},
                   {"port": 443, "protocol": "TCP", "targetPort": "https"}],
                  selector={"app": "web"}, type="ClusterIP", clusterIPs=["10.0.0.1"])
    obj["metadata"]["finalizers"] = ["a", "b"]
    assert fm.to_fields_v1(set(fm.flatten(obj, SERVICE))) == {
        "f:metadata": {"f:finalizers": {".": {}, 'v:"a"': {}, 'v:"b"': {}}},
        "f:spec": {
            "f:clusterIPs": {},  # an atomic list is a leaf
            "f:ports": {
                ".": {},
                PORT80: {".": {}, "f:name": {}, "f:port": {}, "f:protocol": {},
                         "f:targetPort": {}},
                PORT443: {".": {}, "f:port": {}, "f:protocol": {}, "f:targetPort": {}},
            },
            "f:selector": {},  # an atomic map is a leaf
            "f:type": {},
        },
    }


def test_flatten_skips_status_when_asked() -> None:
    obj = service([{"port": 80, "protocol": "TCP"}])
    obj["status"] = {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}
    assert ("f:status", "f:loadBalancer", "f:ingress") in fm.flatten(obj, SERVICE)
    assert not any(p[0] == "f:status" for p in fm.flatten(obj, SERVICE, skip_status=True))


def test_fields_v1_round_trip() -> None:
    obj = service([{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}],
                  selector={"app": "web"})
    obj["metadata"]["labels"] = {"app": "web"}
    paths = set(fm.flatten(obj, SERVICE))
    assert fm.from_fields_v1(fm.to_fields_v1(paths)) == paths


@pytest.mark.parametrize(
    "fields_v1",
    [
        # as kube-apiserver writes them
        {"f:data": {".": {}, "f:key": {}}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}},
        {"f:data": {"f:key": {}}},
        {"f:spec": {"f:ports": {PORT80: {".": {}, "f:port": {}, "f:targetPort": {}}},
                    "f:selector": {}}},
        {"f:metadata": {"f:finalizers": {".": {}, 'v:"example.com/x"': {}}}},
        {"f:status": {"f:loadBalancer": {"f:ingress": {}}}},
    ],
)
def test_fields_v1_from_kube_round_trip(fields_v1: dict) -> None:
    assert fm.to_fields_v1(fm.from_fields_v1(fields_v1)) == fields_v1


def test_from_fields_v1_paths() -> None:
    assert fm.from_fields_v1({"f:data": {".": {}, "f:k": {}}, "f:spec": {"f:x": {}}}) == {
        ("f:data",), ("f:data", "f:k"), ("f:spec", "f:x")}
    assert fm.from_fields_v1(None) == set()
    assert fm.from_fields_v1({}) == set()


@pytest.mark.parametrize(
    ("path", "text"),
    [
        (("f:data", "f:k"), ".data.k"),
        (("f:spec", "f:ports", PORT80, "f:targetPort"),
         '.spec.ports[port=80,protocol="TCP"].targetPort'),
        (("f:metadata", "f:finalizers", 'v:"example.com/x"'),
         '.metadata.finalizers[="example.com/x"]'),
        (("f:webhooks", 'k:{"name":"a.example.com"}', "f:timeoutSeconds"),
         '.webhooks[name="a.example.com"].timeoutSeconds'),
    ],
)
def test_field_path_string(path: tuple[str, ...], text: str) -> None:
    assert fm.field_path_string(path) == text


# -- Update ---------------------------------------------------------------------------------------


def test_record_update_on_create() -> None:
    obj = configmap({"k": "v"}, labels={"app": "x"})
    fm.record_update(None, obj, CONFIGMAP, manager="kubectl-create", api_version="v1")
    assert obj["metadata"]["managedFields"] == [{
        "manager": "kubectl-create",
        "operation": "Update",
        "apiVersion": "v1",
        "time": T1,
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:data": {".": {}, "f:k": {}},
                     "f:metadata": {"f:labels": {".": {}, "f:app": {}}}},
    }]
    assert obj["data"] == {"k": "v"}  # the object itself is left alone


def test_record_update_on_create_of_a_service() -> None:
    obj = service([{"port": 80, "protocol": "TCP", "targetPort": 8080}], type="ClusterIP")
    fm.record_update(None, obj, SERVICE, manager="kubectl", api_version="v1")
    assert fields_of(obj, "kubectl") == {"f:spec": {
        "f:ports": {".": {}, PORT80: {".": {}, "f:port": {}, "f:protocol": {},
                                      "f:targetPort": {}}},
        "f:type": {},
    }}


def test_record_update_moves_changed_fields_to_the_new_manager() -> None:
    old = created(configmap({"k": "v", "keep": "1"}, labels={"app": "x"}))
    new = copy.deepcopy(old)
    new["data"]["k"] = "changed"
    new["data"]["added"] = "2"
    fm.record_update(old, new, CONFIGMAP, manager="editor", api_version="v1")
    assert fields_of(new, "editor") == {"f:data": {"f:added": {}, "f:k": {}}}
    assert entries(new)[("editor", "Update")]["time"] == T1
    assert fields_of(new, "creator") == {
        "f:data": {".": {}, "f:keep": {}},
        "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
    }
    assert entries(new)[("creator", "Update")]["time"] == T0


def test_record_update_removed_fields_leave_every_owner() -> None:
    old = created(configmap({"k": "v", "keep": "1"}, labels={"app": "x"}))
    new = copy.deepcopy(old)
    del new["data"]["k"]
    del new["metadata"]["labels"]
    fm.record_update(old, new, CONFIGMAP, manager="editor", api_version="v1")
    assert ("editor", "Update") not in entries(new)  # it set nothing
    assert fields_of(new, "creator") == {"f:data": {".": {}, "f:keep": {}}}


def test_record_update_drops_a_manager_left_with_nothing() -> None:
    old = created(configmap({"k": "v"}))
    new = copy.deepcopy(old)
    new["data"]["k"] = "w"
    fm.record_update(old, new, CONFIGMAP, manager="editor", api_version="v1")
    new2 = copy.deepcopy(new)
    new2["data"] = {"other": "x"}
    fm.record_update(new, new2, CONFIGMAP, manager="third", api_version="v1")
    assert set(entries(new2)) == {("creator", "Update"), ("third", "Update")}
    assert fields_of(new2, "creator") == {"f:data": {}}
    assert fields_of(new2, "third") == {"f:data": {"f:other": {}}}


def test_record_update_same_manager_accumulates() -> None:
    old = created(configmap({"k": "v"}))
    new = copy.deepcopy(old)
    new["data"]["k2"] = "v2"
    fm.record_update(old, new, CONFIGMAP, manager="creator", api_version="v1")
    (entry,) = new["metadata"]["managedFields"]
    assert entry["fieldsV1"] == {"f:data": {".": {}, "f:k": {}, "f:k2": {}}}
    assert entry["time"] == T1


def test_record_update_no_op_leaves_managed_fields_alone() -> None:
    old = created(configmap({"k": "v"}, labels={"app": "x"}))
    new = copy.deepcopy(old)
    fm.record_update(old, new, CONFIGMAP, manager="someone-else", api_version="v1")
    assert new["metadata"]["managedFields"] == old["metadata"]["managedFields"]


def test_record_update_no_op_without_managed_fields_in_the_request() -> None:
    old = created(configmap({"k": "v"}))
    new = copy.deepcopy(old)
    del new["metadata"]["managedFields"]  # a client that does not send them keeps them
    fm.record_update(old, new, CONFIGMAP, manager="someone-else", api_version="v1")
    assert new["metadata"]["managedFields"] == old["metadata"]["managedFields"]


def test_record_update_empty_managed_fields_in_the_request_reset_them() -> None:
    # kube's isResetManagedFields: a non-nil empty list (or one empty entry) is a reset; the
    # update then only records what this write changed
    old = created(configmap({"k": "v", "keep": "1"}))
    new = copy.deepcopy(old)
    new["metadata"]["managedFields"] = []
    new["data"]["k"] = "w"
    fm.record_update(old, new, CONFIGMAP, manager="editor", api_version="v1")
    assert set(entries(new)) == {("editor", "Update")}
    assert owned(new, "editor") == {("f:data", "f:k")}


def test_record_update_single_empty_entry_resets_managed_fields() -> None:
    old = created(configmap({"k": "v"}))
    new = copy.deepcopy(old)
    new["metadata"]["managedFields"] = [{}]
    fm.record_update(old, new, CONFIGMAP, manager="editor", api_version="v1")
    assert "managedFields" not in new["metadata"]


def test_record_update_keeps_managed_fields_given_in_the_request() -> None:
    old = created(configmap({"k": "v"}))
    new = copy.deepcopy(old)
    new["metadata"]["managedFields"] = [{
        "manager": "handmade", "operation": "Update", "apiVersion": "v1", "time": T0,
        "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:k": {}}}}]
    fm.record_update(old, new, CONFIGMAP, manager="editor", api_version="v1")
    assert set(entries(new)) == {("handmade", "Update")}


def status_service() -> dict:
    obj = service([{"port": 80, "protocol": "TCP", "targetPort": 8080}], type="ClusterIP")
    obj["status"] = {"loadBalancer": {}}
    return created(obj, SERVICE)


def test_record_update_of_the_status_subresource_only_touches_status() -> None:
    old = status_service()
    new = copy.deepcopy(old)
    new["status"] = {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}
    new["spec"]["type"] = "NodePort"  # not this subresource's business
    fm.record_update(old, new, SERVICE, manager="lb-controller", api_version="v1",
                     subresource="status")
    entry = next(e for e in new["metadata"]["managedFields"] if e["manager"] == "lb-controller")
    assert entry["operation"] == "Update"
    assert entry["subresource"] == "status"
    assert entry["fieldsV1"] == {"f:status": {"f:loadBalancer": {"f:ingress": {}}}}
    creator = fields_of(new, "creator")
    assert "f:status" not in creator
    assert creator["f:spec"]["f:type"] == {}  # still the creator's


def test_record_update_of_the_main_resource_ignores_status() -> None:
    old = status_service()
    new = copy.deepcopy(old)
    new["status"] = {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}
    fm.record_update(old, new, SERVICE, manager="editor", api_version="v1")
    assert ("editor", "Update") not in entries(new)
    assert new["metadata"]["managedFields"] == old["metadata"]["managedFields"]


def test_record_update_status_and_main_entries_are_separate() -> None:
    old = status_service()
    new = copy.deepcopy(old)
    new["spec"]["type"] = "NodePort"
    fm.record_update(old, new, SERVICE, manager="ctl", api_version="v1")
    newer = copy.deepcopy(new)
    newer["status"] = {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}
    fm.record_update(new, newer, SERVICE, manager="ctl", api_version="v1",
                     subresource="status")
    keys = {(e["manager"], e.get("subresource", "")) for e in newer["metadata"]["managedFields"]}
    assert keys == {("creator", ""), ("ctl", ""), ("ctl", "status")}


# -- Apply ----------------------------------------------------------------------------------------


def apply(current: dict | None, applied: dict, manager: str = "applier", *,
          force: bool = False, schema: dict = CONFIGMAP) -> dict:
    return fm.apply(current, copy.deepcopy(applied), schema, manager=manager,
                    api_version="v1", force=force)


def test_apply_creates_from_nothing() -> None:
    result = apply(None, configmap({"k": "v"}, labels={"app": "x"}))
    assert result["apiVersion"] == "v1"
    assert result["kind"] == "ConfigMap"
    assert result["data"] == {"k": "v"}
    assert result["metadata"]["name"] == "c"
    assert result["metadata"]["namespace"] == "ns"
    assert result["metadata"]["labels"] == {"app": "x"}
    (entry,) = result["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"], entry["apiVersion"]) == (
        "applier", "Apply", "v1")
    assert entry["fieldsType"] == "FieldsV1"
    assert entry["time"] == T1
    paths = fm.from_fields_v1(entry["fieldsV1"])
    assert {("f:data", "f:k"), ("f:metadata", "f:labels", "f:app")} <= paths
    assert not any(p[-1] in ("f:name", "f:namespace") for p in paths)


def test_apply_fields_v1_is_the_applied_configuration() -> None:
    # kube records an applier's set as configObject.ToFieldSet(): leaves and list items only,
    # no "." for maps (.data) or for the list itself (.spec.ports).
    result = apply(None, configmap({"k": "v"}, labels={"app": "x"}))
    assert result["metadata"]["managedFields"][0]["fieldsV1"] == {
        "f:data": {"f:k": {}},
        "f:metadata": {"f:labels": {"f:app": {}}},
    }
    svc = apply(None, service([{"port": 80, "protocol": "TCP", "targetPort": 8080}]),
                schema=SERVICE)
    assert svc["metadata"]["managedFields"][0]["fieldsV1"] == {"f:spec": {"f:ports": {
        PORT80: {".": {}, "f:port": {}, "f:protocol": {}, "f:targetPort": {}}}}}


def test_apply_again_drops_fields_no_longer_applied() -> None:
    first = apply(None, configmap({"a": "1", "b": "2"}, labels={"app": "x", "tier": "t"}))
    second = apply(first, configmap({"a": "1"}, labels={"app": "x"}))
    assert second["data"] == {"a": "1"}
    assert second["metadata"]["labels"] == {"app": "x"}
    paths = fm.from_fields_v1(second["metadata"]["managedFields"][0]["fieldsV1"])
    assert ("f:data", "f:b") not in paths
    assert ("f:metadata", "f:labels", "f:tier") not in paths


def test_apply_again_keeps_fields_someone_else_also_owns() -> None:
    first = apply(None, configmap({"a": "1", "b": "2"}))
    shared = apply(first, configmap({"b": "2"}), manager="other")
    result = apply(shared, configmap({"a": "1"}))
    assert result["data"] == {"a": "1", "b": "2"}
    assert fields_of(result, "other", "Apply") is not None
    assert ("f:data", "f:b") in fm.from_fields_v1(fields_of(result, "other", "Apply"))


def test_apply_leaves_fields_of_other_managers() -> None:
    current = created(configmap({"theirs": "1"}))
    result = apply(current, configmap({"mine": "2"}))
    assert result["data"] == {"theirs": "1", "mine": "2"}
    assert ("f:data", "f:theirs") in fm.from_fields_v1(fields_of(result, "creator"))
    mine = fm.from_fields_v1(fields_of(result, "applier", "Apply"))
    assert ("f:data", "f:mine") in mine
    assert ("f:data", "f:theirs") not in mine


def test_apply_conflict_with_an_updater() -> None:
    current = created(configmap({"k": "a"}))
    with pytest.raises(StatusError) as err:
        apply(current, configmap({"k": "b"}))
    error = err.value
    assert error.code == 409
    assert error.reason == "Conflict"
    assert error.message == (
        'Apply failed with 1 conflict: conflict with "creator" using v1: .data.k')
    assert error.causes == [Cause("FieldManagerConflict", 'conflict with "creator" using v1',
                                  ".data.k")]
    status = error.to_status()
    assert status["code"] == 409
    assert status["details"]["causes"] == [{
        "reason": "FieldManagerConflict", "message": 'conflict with "creator" using v1',
        "field": ".data.k"}]
    assert current["data"] == {"k": "a"}


def test_apply_conflict_on_a_port() -> None:
    current = created(service([{"port": 80, "protocol": "TCP", "targetPort": 8080}]), SERVICE)
    with pytest.raises(StatusError) as err:
        apply(current, service([{"port": 80, "protocol": "TCP", "targetPort": 9090}]),
              schema=SERVICE)
    assert err.value.code == 409
    assert [c.field for c in err.value.causes] == [
        '.spec.ports[port=80,protocol="TCP"].targetPort']


def test_apply_conflict_with_another_applier() -> None:
    # kube's printManager: an Apply manager is printed by name only (its identifier has no
    # apiVersion); "using <version>" is for Update managers.
    current = apply(None, configmap({"k": "a"}), manager="first")
    with pytest.raises(StatusError) as err:
        apply(current, configmap({"k": "b"}), manager="second")
    assert err.value.code == 409
    assert err.value.message == 'Apply failed with 1 conflict: conflict with "first": .data.k'
    assert [(c.reason, c.message, c.field) for c in err.value.causes] == [
        ("FieldManagerConflict", 'conflict with "first"', ".data.k")]


def test_apply_same_value_is_shared_ownership() -> None:
    current = created(configmap({"k": "a"}))
    result = apply(current, configmap({"k": "a"}))
    assert result["data"] == {"k": "a"}
    assert ("f:data", "f:k") in fm.from_fields_v1(fields_of(result, "creator"))
    assert ("f:data", "f:k") in fm.from_fields_v1(fields_of(result, "applier", "Apply"))


def test_apply_force_takes_ownership() -> None:
    current = created(configmap({"k": "a", "other": "o"}))
    result = apply(current, configmap({"k": "b"}), force=True)
    assert result["data"] == {"k": "b", "other": "o"}
    creator = fm.from_fields_v1(fields_of(result, "creator"))
    assert ("f:data", "f:k") not in creator
    assert ("f:data", "f:other") in creator
    assert ("f:data", "f:k") in fm.from_fields_v1(fields_of(result, "applier", "Apply"))


def test_apply_force_only_takes_the_conflicting_fields() -> None:
    # structured-merge-diff's Updater.update: with force, each other manager loses only the
    # fields the apply modified or added; a field applied with the value it already has stays
    # shared.
    current = created(configmap({"same": "1", "k": "a"}))
    result = apply(current, configmap({"same": "1", "k": "b"}), force=True)
    assert result["data"] == {"same": "1", "k": "b"}
    creator = owned(result, "creator")
    assert ("f:data", "f:same") in creator
    assert ("f:data", "f:k") not in creator


def test_apply_no_conflict_for_new_fields() -> None:
    current = created(configmap({"k": "a"}))
    result = apply(current, configmap({"k2": "b"}))
    assert result["data"] == {"k": "a", "k2": "b"}


def test_apply_does_not_modify_the_current_object() -> None:
    current = created(configmap({"k": "a"}))
    before = copy.deepcopy(current)
    apply(current, configmap({"k2": "b"}))
    assert current == before


def test_apply_merges_service_ports_by_key() -> None:
    first = apply(None, service([{"port": 80, "protocol": "TCP", "targetPort": 8080}]),
                  manager="a", schema=SERVICE)
    second = apply(first, service([{"port": 443, "protocol": "TCP", "targetPort": 8443}]),
                   manager="b", schema=SERVICE)
    assert second["spec"]["ports"] == [
        {"port": 80, "protocol": "TCP", "targetPort": 8080},
        {"port": 443, "protocol": "TCP", "targetPort": 8443},
    ]
    a_paths = fm.from_fields_v1(fields_of(second, "a", "Apply"))
    b_paths = fm.from_fields_v1(fields_of(second, "b", "Apply"))
    assert ("f:spec", "f:ports", PORT80, "f:targetPort") in a_paths
    assert ("f:spec", "f:ports", PORT443, "f:targetPort") in b_paths
    assert not any(PORT80 in p for p in b_paths)


def test_apply_merges_fields_of_one_port() -> None:
    first = apply(None, service([{"port": 80, "protocol": "TCP", "targetPort": 8080}]),
                  manager="a", schema=SERVICE)
    second = apply(first, service([{"port": 80, "protocol": "TCP", "name": "http"}]),
                   manager="b", schema=SERVICE)
    assert second["spec"]["ports"] == [
        {"port": 80, "protocol": "TCP", "targetPort": 8080, "name": "http"}]


def test_apply_drops_a_port_no_longer_applied() -> None:
    first = apply(None, service([{"port": 80, "protocol": "TCP"},
                                 {"port": 443, "protocol": "TCP"}]), schema=SERVICE)
    second = apply(first, service([{"port": 80, "protocol": "TCP"}]), schema=SERVICE)
    assert second["spec"]["ports"] == [{"port": 80, "protocol": "TCP"}]
    assert not any(PORT443 in p for p in owned(second, "applier", "Apply"))


def test_apply_port_without_protocol_uses_the_key_default() -> None:
    # structured-merge-diff fills a missing list-map key from the schema's default
    # (ServicePort.protocol defaults to TCP): the applied port is the live TCP port 80.
    current = created(service([{"port": 80, "protocol": "TCP", "targetPort": 8080}]), SERVICE)
    result = apply(current, service([{"port": 80, "targetPort": 8080}]), schema=SERVICE)
    assert result["spec"]["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 8080}]
    applied = fm.from_fields_v1(fields_of(result, "applier", "Apply"))
    assert ("f:spec", "f:ports", PORT80, "f:targetPort") in applied


# -- conflict errors ------------------------------------------------------------------------------


def test_conflict_error_single() -> None:
    error = fm.conflict_error([({"manager": "mgr", "apiVersion": "v1"}, ("f:data", "f:k"))])
    assert error.code == 409
    assert error.reason == "Conflict"
    assert error.message == 'Apply failed with 1 conflict: conflict with "mgr" using v1: .data.k'
    assert error.causes == [Cause("FieldManagerConflict", 'conflict with "mgr" using v1',
                                  ".data.k")]


def test_conflict_error_several() -> None:
    # kube's getConflictMessage groups the paths by manager, managers sorted:
    #   Apply failed with N conflicts: conflicts with "<m>" using <v>:\n- <path>\n- <path>
    mgr_b = {"manager": "b-mgr", "apiVersion": "v1"}
    mgr_a = {"manager": "a-mgr", "apiVersion": "v1"}
    error = fm.conflict_error([
        (mgr_b, ("f:data", "f:x")),
        (mgr_a, ("f:data", "f:y")),
        (mgr_b, ("f:data", "f:z")),
    ])
    assert error.code == 409
    assert len(error.causes) == 3
    assert [c.field for c in error.causes] == [".data.x", ".data.y", ".data.z"]
    assert error.message == (
        'Apply failed with 3 conflicts: conflicts with "a-mgr" using v1:\n'
        '- .data.y\n'
        'conflicts with "b-mgr" using v1:\n'
        '- .data.x\n'
        '- .data.z'
    )


def test_conflicts_and_fields_v1_in_kube_order() -> None:
    # structured-merge-diff orders keyed items by their key values, numbers as numbers
    ports = [{"port": 443, "protocol": "TCP", "targetPort": 1},
             {"port": 80, "protocol": "TCP", "targetPort": 2}]
    current = created(service(ports), SERVICE)
    changed = [dict(p, targetPort=9) for p in ports]
    with pytest.raises(StatusError) as err:
        apply(current, service(changed), schema=SERVICE)
    assert [c.field for c in err.value.causes] == [
        '.spec.ports[port=80,protocol="TCP"].targetPort',
        '.spec.ports[port=443,protocol="TCP"].targetPort']
    tree = fields_of(current, "creator")["f:spec"]["f:ports"]
    assert [k for k in tree if k != "."] == [PORT80, PORT443]


@pytest.mark.parametrize("obj, schema", [
    (configmap({"a": "1", "b": "2"}, labels={"x": "y"}, annotations={},
               finalizers=["f/one", "f/two"], ownerReferences=[
                   {"apiVersion": "v1", "kind": "K", "name": "o", "uid": "u1"}]), CONFIGMAP),
    (configmap({}), CONFIGMAP),
    ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bare"}}, CONFIGMAP),
    (service([{"port": 80, "name": "http"}, {"port": 443, "protocol": "TCP", "name": "s"}],
             selector={"app": "a"}, type="ClusterIP", clusterIPs=["10.0.0.1"],
             sessionAffinityConfig={}), SERVICE),
    ({**service([]), "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}}, SERVICE),
    ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "n", "labels": None},
      "data": None, "binaryData": {"b": "AA=="}}, CONFIGMAP),
])
@pytest.mark.parametrize("skip_status", [False, True])
def test_a_creates_fields_are_the_flattened_paths(obj, schema, skip_status):
    expected = fm.to_fields_v1(set(fm.flatten(obj, schema, skip_status=skip_status)))
    assert fm.fields_v1_of(obj, schema, skip_status=skip_status) == expected
    # the same order at every level too (it is what clients see)
    assert json.dumps(fm.fields_v1_of(obj, schema, skip_status=skip_status)) == \
        json.dumps(expected)
