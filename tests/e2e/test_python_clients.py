"""The official ``kubernetes`` Python client and lightkube against a real gateway: typed CRUD,
selectors and paging, leases with microsecond times, errors as ApiException, the dynamic client
with discovery and server-side apply, and watches (resumed, and 410 for a compacted revision)."""

from __future__ import annotations

import datetime
import functools
import itertools
import json
import queue
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config, dynamic, watch
from kubernetes.client import ApiException
from kubernetes.dynamic import exceptions as dynamic_errors
from lightkube import Client as LightClient
from lightkube import KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap

from tests.support.api import ROOT_CA, configmap
from tests.support.gateway import GatewayProcess
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
UTC = datetime.UTC


@pytest.fixture(scope="module")
def api_client(gateway: GatewayProcess) -> Iterator[client.ApiClient]:
    api = config.new_client_from_config(config_file=str(gateway.kubeconfig))
    yield api
    api.close()


@pytest.fixture(scope="module")
def core(api_client) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture(scope="module")
def leases(api_client) -> client.CoordinationV1Api:
    return client.CoordinationV1Api(api_client)


@pytest.fixture(scope="module")
def dyn(api_client) -> dynamic.DynamicClient:
    return dynamic.DynamicClient(api_client)


def cm(name: str, labels: dict[str, str] | None = None, **data: str) -> client.V1ConfigMap:
    """tests.support.api.configmap, typed for this client."""
    body = configmap(name, labels, **data)
    return client.V1ConfigMap(metadata=client.V1ObjectMeta(**body["metadata"]),
                              data=body["data"] or None)


def names(items: list[Any]) -> list[str]:
    return [item.metadata.name for item in items]


def status_of(err: ApiException) -> dict[str, Any]:
    return json.loads(err.body)


def take(events: Iterator[Any], count: int, timeout: float = 10) -> list[Any]:
    """The first ``count`` items of a never-ending watch iterator, or fail after ``timeout``."""
    out: queue.Queue[Any] = queue.Queue()

    def pump() -> None:
        try:
            for item in itertools.islice(events, count):
                out.put(item)
        except Exception as err:  # surfaced to the test below
            out.put(err)

    threading.Thread(target=pump, daemon=True).start()
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        item = out.get(timeout=max(0.01, deadline - time.monotonic()))
        if isinstance(item, Exception):
            raise item
        got.append(item)
    return got


# -- CoreV1Api --------------------------------------------------------------------------------


def test_configmap_create_read_replace_patch_delete(core, ns):
    made = core.create_namespaced_config_map(ns, cm("conf", {"app": "demo"}, k="v", drop="me"))
    assert isinstance(made, client.V1ConfigMap)
    assert made.metadata.namespace == ns and made.data == {"k": "v", "drop": "me"}
    assert made.metadata.uid and made.metadata.resource_version.isdigit()

    read = core.read_namespaced_config_map("conf", ns)
    assert read.metadata.uid == made.metadata.uid and read.data == made.data

    read.data = {"k": "replaced", "drop": "me"}
    replaced = core.replace_namespaced_config_map("conf", ns, read)
    assert replaced.data["k"] == "replaced"
    assert int(replaced.metadata.resource_version) > int(made.metadata.resource_version)

    # merge patch: null deletes a key, a list is replaced whole
    merged = core.patch_namespaced_config_map(
        "conf", ns, {"data": {"drop": None, "new": "1"},
                     "metadata": {"finalizers": ["example.com/a"]}}, _content_type=MERGE)
    assert merged.data == {"k": "replaced", "new": "1"}
    merged = core.patch_namespaced_config_map(
        "conf", ns, {"metadata": {"finalizers": ["example.com/b"]}}, _content_type=MERGE)
    assert merged.metadata.finalizers == ["example.com/b"]
    # strategic merge patch: finalizers is a merge list, so the values are added; as in kube's
    # normalizeElementOrder, the patch's items come before the server-only ones
    strategic = core.patch_namespaced_config_map(
        "conf", ns, {"metadata": {"finalizers": ["example.com/c"], "labels": {"tier": "x"}}},
        _content_type=STRATEGIC)
    assert strategic.metadata.finalizers == ["example.com/c", "example.com/b"]
    assert strategic.metadata.labels == {"app": "demo", "tier": "x"}
    assert strategic.data == {"k": "replaced", "new": "1"}
    core.patch_namespaced_config_map("conf", ns, {"metadata": {"finalizers": None}},
                                     _content_type=MERGE)

    gone = core.delete_namespaced_config_map("conf", ns)  # this client hands back a dict
    assert (gone["kind"], gone["status"]) == ("Status", "Success")
    assert gone["details"] == {"name": "conf", "kind": "configmaps", "uid": made.metadata.uid}
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map("conf", ns)
    assert (err.value.status, status_of(err.value)["message"]) == (
        404, 'configmaps "conf" not found')


def test_secret_create_read_replace_patch_delete(core, ns):
    made = core.create_namespaced_secret(ns, client.V1Secret(
        metadata=client.V1ObjectMeta(name="creds"), string_data={"user": "admin"}))
    assert made.type == "Opaque"
    assert made.data == {"user": "YWRtaW4="} and made.string_data is None

    read = core.read_namespaced_secret("creds", ns)
    assert read.data == {"user": "YWRtaW4="}

    read.data["password"] = "czNjcjN0"
    replaced = core.replace_namespaced_secret("creds", ns, read)
    assert replaced.data == {"user": "YWRtaW4=", "password": "czNjcjN0"}

    merged = core.patch_namespaced_secret("creds", ns, {"data": {"user": None}},
                                          _content_type=MERGE)
    assert merged.data == {"password": "czNjcjN0"}
    strategic = core.patch_namespaced_secret(
        "creds", ns, {"metadata": {"labels": {"role": "db"}}, "stringData": {"extra": "x"}},
        _content_type=STRATEGIC)
    assert strategic.data == {"password": "czNjcjN0", "extra": "eA=="}
    assert strategic.metadata.labels == {"role": "db"}

    core.delete_namespaced_secret("creds", ns)
    assert core.list_namespaced_secret(ns).items == []
    with pytest.raises(ApiException) as err:
        core.read_namespaced_secret("creds", ns)
    assert (err.value.status, status_of(err.value)["message"]) == (
        404, 'secrets "creds" not found')


def test_list_with_label_and_field_selectors(core, ns):
    for name, labels in (("a", {"env": "prod"}), ("b", {"env": "dev"}), ("c", None)):
        core.create_namespaced_config_map(ns, cm(name, labels))
    assert names(core.list_namespaced_config_map(ns, label_selector="env=prod").items) == ["a"]
    assert names(core.list_namespaced_config_map(ns, label_selector="env").items) == ["a", "b"]
    # and the root CA every namespace holds has no such label either
    assert names(core.list_namespaced_config_map(ns, label_selector="!env").items) == [
        "c", ROOT_CA]
    assert names(core.list_namespaced_config_map(
        ns, field_selector="metadata.name=b").items) == ["b"]
    listed = core.list_config_map_for_all_namespaces(
        field_selector=f"metadata.namespace={ns},metadata.name!=b", label_selector="env")
    assert names(listed.items) == ["a"]


def test_list_pages_with_limit_and_continue(core, ns):
    for i in range(5):
        core.create_namespaced_config_map(ns, cm(f"page-{i}"))
    pages, token, versions, remaining = [], None, set(), []
    while True:
        page = core.list_namespaced_config_map(ns, limit=2, _continue=token)
        pages.append(names(page.items))
        versions.add(page.metadata.resource_version)
        remaining.append(page.metadata.remaining_item_count)
        token = page.metadata.var_continue
        if not token:
            break
        if len(pages) == 1:  # not in the snapshot the pages were cut from
            core.create_namespaced_config_map(ns, cm("page-9-late"))
    assert pages == [[ROOT_CA, "page-0"], ["page-1", "page-2"], ["page-3", "page-4"]]
    assert remaining == [4, 2, None]
    assert len(versions) == 1, "every page is from one revision"


def test_create_and_list_namespaces(core):
    mark = uuid.uuid4().hex[:8]
    made = core.create_namespace(client.V1Namespace(
        metadata=client.V1ObjectMeta(name=f"py-ns-{mark}", labels={"mark": mark})))
    assert made.status.phase == "Active"
    listed = core.list_namespace()
    assert {f"py-ns-{mark}", "default", "kube-system"} <= set(names(listed.items))
    assert names(core.list_namespace(label_selector=f"mark={mark}").items) == [f"py-ns-{mark}"]


# -- CoordinationV1Api ------------------------------------------------------------------------


def test_lease_renewal_keeps_microseconds(leases, ns):
    acquired = datetime.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    made = leases.create_namespaced_lease(ns, client.V1Lease(
        metadata=client.V1ObjectMeta(name="leader"),
        spec=client.V1LeaseSpec(holder_identity="node-a", lease_duration_seconds=15,
                                acquire_time=acquired, renew_time=acquired,
                                lease_transitions=0)))
    assert made.spec.renew_time == acquired and made.spec.acquire_time == acquired

    renewed_at = acquired + datetime.timedelta(seconds=5, microseconds=7)  # .123463
    made.spec.renew_time = renewed_at
    renewed = leases.replace_namespaced_lease("leader", ns, made)
    assert int(renewed.metadata.resource_version) > int(made.metadata.resource_version)

    read = leases.read_namespaced_lease("leader", ns)
    assert read.spec.renew_time == renewed_at
    assert read.spec.renew_time.microsecond == 123463
    assert read.spec.acquire_time == acquired
    assert (read.spec.holder_identity, read.spec.lease_duration_seconds) == ("node-a", 15)
    raw = leases.read_namespaced_lease("leader", ns, _preload_content=False)
    wire = json.loads(raw.read())["spec"]["renewTime"]
    assert wire == "2024-05-06T07:08:14.123463Z", "written in UTC with six digits, as kube does"


# -- errors -----------------------------------------------------------------------------------


def test_replace_with_a_stale_resource_version_is_a_conflict(core, ns):
    stale = core.create_namespaced_config_map(ns, cm("race", v="1"))
    fresh = core.read_namespaced_config_map("race", ns)
    fresh.data = {"v": "2"}
    core.replace_namespaced_config_map("race", ns, fresh)
    stale.data = {"v": "stale"}
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_config_map("race", ns, stale)
    assert err.value.status == 409
    status = status_of(err.value)
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 409, "Conflict")
    assert status["message"] == (
        'Operation cannot be fulfilled on configmaps "race": the object has been modified; '
        "please apply your changes to the latest version and try again")
    assert core.read_namespaced_config_map("race", ns).data == {"v": "2"}


def test_creating_twice_is_already_exists(core, ns):
    core.create_namespaced_config_map(ns, cm("twice"))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(ns, cm("twice"))
    assert err.value.status == 409
    status = status_of(err.value)
    assert (status["code"], status["reason"]) == (409, "AlreadyExists")
    assert status["message"] == 'configmaps "twice" already exists'
    assert status["details"] == {"name": "twice", "kind": "configmaps"}


def test_missing_object_is_404_with_a_status(core, leases, ns):
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map("nope", ns)
    assert err.value.status == 404
    status = status_of(err.value)
    assert (status["kind"], status["apiVersion"], status["status"]) == ("Status", "v1", "Failure")
    assert (status["code"], status["reason"]) == (404, "NotFound")
    assert status["message"] == 'configmaps "nope" not found'
    with pytest.raises(ApiException) as err:
        leases.read_namespaced_lease("nope", ns)
    status = status_of(err.value)
    assert status["message"] == 'leases.coordination.k8s.io "nope" not found'
    assert status["details"] == {"name": "nope", "group": "coordination.k8s.io",
                                 "kind": "leases"}


# -- dynamic client ---------------------------------------------------------------------------


def test_dynamic_client_discovers_and_round_trips(dyn, ns):
    configmaps = dyn.resources.get(api_version="v1", kind="ConfigMap")
    assert (configmaps.name, configmaps.namespaced, configmaps.group_version) == (
        "configmaps", True, "v1")
    assert {"create", "get", "list", "watch", "delete", "patch"} <= set(configmaps.verbs)
    lease_type = dyn.resources.get(api_version="coordination.k8s.io/v1", kind="Lease")
    assert (lease_type.name, lease_type.group, lease_type.namespaced) == (
        "leases", "coordination.k8s.io", True)

    made = configmaps.create(namespace=ns, body={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dyn"},
        "data": {"a": "1"}})
    assert made.metadata.name == "dyn" and made.data.a == "1"
    got = configmaps.get(name="dyn", namespace=ns)
    assert got.metadata.uid == made.metadata.uid
    listed = configmaps.get(namespace=ns)
    assert listed.kind == "ConfigMapList" and [i.metadata.name for i in listed.items] == [
        "dyn", ROOT_CA]

    lease = lease_type.create(namespace=ns, body={
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "dl"},
        "spec": {"holderIdentity": "me", "renewTime": "2024-01-01T00:00:00.000001Z"}})
    assert lease.kind == "Lease" and lease.spec.holderIdentity == "me"
    assert lease_type.get(name="dl", namespace=ns).spec.renewTime == (
        "2024-01-01T00:00:00.000001Z")

    deleted = configmaps.delete(name="dyn", namespace=ns)
    assert deleted.kind == "Status" and deleted.status == "Success"
    with pytest.raises(dynamic_errors.NotFoundError) as err:
        configmaps.get(name="dyn", namespace=ns)
    assert (err.value.status, json.loads(err.value.body)["message"]) == (
        404, 'configmaps "dyn" not found')


def test_dynamic_server_side_apply(dyn, ns):
    configmaps = dyn.resources.get(api_version="v1", kind="ConfigMap")

    def apply(manager: str, force: bool | None = None, **data: str):
        return configmaps.server_side_apply(
            namespace=ns, field_manager=manager, force_conflicts=force,
            body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"},
                  "data": data})

    first = apply("alice", a="1", b="2")
    assert first.data.to_dict() == {"a": "1", "b": "2"}
    entry = first.metadata.managedFields[0]
    assert (entry.manager, entry.operation) == ("alice", "Apply")
    assert apply("alice", a="1").data.to_dict() == {"a": "1"}, "a field no longer applied goes"

    with pytest.raises(dynamic_errors.ConflictError) as err:
        apply("bob", a="9")
    status = json.loads(err.value.body)
    assert (status["code"], status["reason"]) == (409, "Conflict")
    assert status["message"] == 'Apply failed with 1 conflict: conflict with "alice": .data.a'
    assert status["details"]["causes"] == [{"reason": "FieldManagerConflict",
                                            "message": 'conflict with "alice"',
                                            "field": ".data.a"}]

    forced = apply("bob", force=True, a="9")
    assert forced.data.to_dict() == {"a": "9"}
    owners = {m.manager: m.fieldsV1.to_dict() for m in forced.metadata.managedFields}
    assert "f:a" in owners["bob"]["f:data"]
    assert "f:a" not in owners.get("alice", {}).get("f:data", {})


# -- watches ----------------------------------------------------------------------------------


def test_watch_resumed_from_a_resource_version_gets_the_later_events(core, ns):
    start = core.create_namespaced_config_map(ns, cm("first"))
    core.create_namespaced_config_map(ns, cm("second"))
    start.data = {"changed": "yes"}
    core.replace_namespaced_config_map("first", ns, start)
    core.delete_namespaced_config_map("second", ns)
    stream = watch.Watch()
    events = take(stream.stream(core.list_namespaced_config_map, ns,
                                resource_version=start.metadata.resource_version), 3)
    stream.stop()
    assert [(e["type"], e["object"].metadata.name) for e in events] == [
        ("ADDED", "second"), ("MODIFIED", "first"), ("DELETED", "second")]
    assert all(isinstance(e["object"], client.V1ConfigMap) for e in events)
    assert events[1]["object"].data == {"changed": "yes"}
    revisions = [int(e["object"].metadata.resource_version) for e in events]
    assert revisions == sorted(set(revisions))
    assert revisions[0] > int(start.metadata.resource_version)


def test_watch_sees_writes_made_while_it_runs(core, ns):
    start = core.create_namespaced_config_map(ns, cm("before"))

    def write() -> None:
        core.create_namespaced_config_map(ns, cm("during"))
        core.patch_namespaced_config_map("during", ns, {"data": {"x": "1"}},
                                         _content_type=MERGE)

    writer = threading.Thread(target=write)

    @functools.wraps(core.list_namespaced_config_map)  # its docstring names the event type
    def list_then_write(*args: Any, **kwargs: Any) -> Any:
        response = core.list_namespaced_config_map(*args, **kwargs)
        writer.start()  # the watch's response has begun: the writes come while it runs
        return response

    stream = watch.Watch()
    events = [(event["type"], event["object"].metadata.name) for event in take(
        stream.stream(list_then_write, ns, resource_version=start.metadata.resource_version,
                      timeout_seconds=60), 2)]
    stream.stop()
    writer.join()
    assert events == [("ADDED", "during"), ("MODIFIED", "during")]


def test_watch_from_a_compacted_resource_version_raises_410(tmp_path):
    """A restarted gateway's watch cache starts at its start revision; older ones are gone."""
    first = GatewayProcess(tmp_path).start()
    api = config.new_client_from_config(config_file=str(first.kubeconfig))
    core = client.CoreV1Api(api)
    ns = f"py-{uuid.uuid4().hex[:8]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    # the root CA the namespace gets is there before the restart, not a write after it
    eventually(lambda: ROOT_CA in names(core.list_namespaced_config_map(ns).items),
               what="the root CA")
    old = core.create_namespaced_config_map(ns, cm("before"))
    core.create_namespaced_config_map(ns, cm("last-before-restart"))
    first.stop()
    second = GatewayProcess(tmp_path, port=first.port).start()
    try:
        api = config.new_client_from_config(config_file=str(second.kubeconfig))
        core = client.CoreV1Api(api)
        core.create_namespaced_config_map(ns, cm("after"))
        too_old = old.metadata.resource_version

        # on the wire: 200, then one ERROR event with a 410 Status
        raw = core.list_namespaced_config_map(ns, watch=True, resource_version=too_old,
                                              timeout_seconds=2, _preload_content=False)
        assert raw.status == 200
        lines = [line for line in raw.read().split(b"\n") if line]
        assert len(lines) == 1
        event = json.loads(lines[0])
        assert event["type"] == "ERROR"
        status = event["object"]
        assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")
        assert status["message"].startswith(f"too old resource version: {too_old} ("), status
        # the number in brackets is the oldest resourceVersion the cache can still resume
        # from: a watch from it is accepted, one below it is not
        oldest = int(status["message"].rsplit("(", 1)[1].rstrip(")"))
        assert int(too_old) < oldest
        for start, accepted in ((oldest, True), (oldest - 1, False)):
            raw = core.list_namespaced_config_map(ns, watch=True, resource_version=str(start),
                                                  timeout_seconds=1, _preload_content=False)
            types = [json.loads(line)["type"] for line in raw.read().split(b"\n") if line]
            assert ("ERROR" not in types) is accepted, (start, types)

        # the client turns it into ApiException(410), with or without its one retry
        with pytest.raises(ApiException) as err:
            list(watch.Watch().stream(core.list_namespaced_config_map, ns,
                                      resource_version=too_old, timeout_seconds=2))
        assert err.value.status == 410
        assert err.value.reason.startswith("Expired: too old resource version")
        with pytest.raises(ApiException) as err:
            next(iter(watch.Watch().stream(core.list_namespaced_config_map, ns,
                                           resource_version=too_old)))
        assert err.value.status == 410

        # a relist gives a resourceVersion that can be watched from: the first event is the
        # next write, nothing older
        fresh = core.list_namespaced_config_map(ns)
        assert names(fresh.items) == ["after", "before", ROOT_CA, "last-before-restart"]
        stream = watch.Watch()
        events = stream.stream(core.list_namespaced_config_map, ns,
                               resource_version=fresh.metadata.resource_version,
                               timeout_seconds=60)
        core.create_namespaced_config_map(ns, cm("after-relist"))
        [event] = take(events, 1)
        stream.stop()
        assert (event["type"], event["object"].metadata.name) == ("ADDED", "after-relist")
        api.close()
    finally:
        second.stop()


# -- lightkube --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def light(gateway: GatewayProcess) -> Iterator[LightClient]:
    lk = LightClient(KubeConfig.from_file(str(gateway.kubeconfig)), field_manager="pytest")
    yield lk
    lk.close()


def test_lightkube_create_get_patch_list_delete(light, ns):
    made = light.create(ConfigMap(metadata=ObjectMeta(name="lk", namespace=ns,
                                                      labels={"via": "lightkube"}),
                                  data={"a": "1"}))
    assert isinstance(made, ConfigMap) and made.metadata.uid
    got = light.get(ConfigMap, "lk", namespace=ns)
    assert got.data == {"a": "1"} and got.metadata.uid == made.metadata.uid
    patched = light.patch(ConfigMap, "lk", {"data": {"b": "2"}}, namespace=ns)
    assert patched.data == {"a": "1", "b": "2"}
    assert int(patched.metadata.resourceVersion) > int(made.metadata.resourceVersion)
    listed = light.list(ConfigMap, namespace=ns, labels={"via": "lightkube"})
    assert [c.metadata.name for c in listed] == ["lk"]
    light.delete(ConfigMap, "lk", namespace=ns)
    with pytest.raises(ApiError) as err:
        light.get(ConfigMap, "lk", namespace=ns)
    assert (err.value.status.code, err.value.status.reason) == (404, "NotFound")


def test_lightkube_watch_sees_added_and_modified(light, ns):
    listed = light.list(ConfigMap, namespace=ns)
    assert [c.metadata.name for c in listed] == [ROOT_CA]
    since = listed.resourceVersion

    light.create(ConfigMap(metadata=ObjectMeta(name="watched", namespace=ns), data={"v": "1"}))
    light.patch(ConfigMap, "watched", {"data": {"v": "2"}}, namespace=ns)
    # a watch from the list's resourceVersion gets both writes, in order
    events = take(light.watch(ConfigMap, namespace=ns, resource_version=since), 2)
    assert [(kind, obj.metadata.name) for kind, obj in events] == [
        ("ADDED", "watched"), ("MODIFIED", "watched")]
    assert [obj.data for _, obj in events] == [{"v": "1"}, {"v": "2"}]
    assert all(isinstance(obj, ConfigMap) for _, obj in events)
