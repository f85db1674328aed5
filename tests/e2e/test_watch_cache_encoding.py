"""What the watch cache sends, now that it encodes each object version once and splices those
bytes into JSON lists and watch events: every representation of a list or a watch from the
cache says what the store says, version by version, resourceVersions included; a served version
other than the stored one is never answered with the stored encoding."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
import yaml

from tests.support import kubeproto
from tests.support.api import API, CM, ROOT_CA, configmap, rv
from tests.support.gateway import GatewayProcess, send
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
PARTIAL_LIST = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
PARTIAL = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"
PROTOBUF = "application/vnd.kubernetes.protobuf"
AUDIT_EVERYTHING = """
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: RequestResponse
"""


def history(api, ns: str) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]], int]:
    """Creates, updates (twice), a delete: the objects as the writes left them, what each
    write made (the deleted object's last state for the delete) in order, and a revision
    after them all."""
    path = CM.format(ns=ns)
    made = []
    for name in ("a", "b", "c"):
        code, obj = api.post(path, configmap(name, {"keep": "yes"}, v="1"))
        assert code == 201, obj
        made.append(obj)
    for round_ in ("2", "3"):
        current = api.get(f"{path}/a")[1]
        current["data"] = {"v": round_}
        code, changed = api.put(f"{path}/a", current)
        assert code == 200, changed
        made.append(changed)
    code, status = api.delete(f"{path}/b")
    assert code == 200, status
    made.append(made[1])  # with the deletion's resourceVersion, which the answer does not say
    current = {name: api.get(f"{path}/{name}")[1] for name in ("a", "c", ROOT_CA)}
    return current, made, int(api.get(path)[1]["metadata"]["resourceVersion"])


def without_rv(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
    return {**obj, "metadata": meta}


def items(listed: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in listed["items"]}


def test_lists_from_the_cache_say_what_the_store_says(api, ns):
    current, _, last = history(api, ns)
    path = CM.format(ns=ns)
    cached = f"{path}?resourceVersion={last}&resourceVersionMatch=NotOlderThan"
    code, from_cache = api.get(cached)
    assert code == 200, from_cache
    code, from_store = api.get(path)
    assert code == 200, from_store
    assert items(from_cache) == items(from_store) == current
    assert int(from_cache["metadata"]["resourceVersion"]) >= last
    assert from_cache["kind"] == "ConfigMapList" and from_cache["apiVersion"] == "v1"

    code, selected = api.get(f"{path}?resourceVersion=0&labelSelector=keep%3Dyes")
    assert code == 200
    assert items(selected) == {name: current[name] for name in ("a", "c")}

    # the representations that decode the cached objects
    code, raw = api.gw.request("GET", cached, headers={"Accept": "application/yaml"})
    assert code == 200
    assert items(yaml.safe_load(raw)) == current
    code, raw = api.gw.request("GET", cached, headers={"Accept": PROTOBUF})
    assert code == 200
    answer = kubeproto.decode(raw, kubeproto.CORE + "ConfigMapList", "v1", "ConfigMapList")
    assert [(i.metadata.name, i.metadata.resourceVersion, dict(i.data)) for i in answer.items] \
        == [(name, obj["metadata"]["resourceVersion"], obj["data"])
            for name, obj in sorted(current.items())]
    code, table = api.get(f"{cached}&includeObject=Object", Accept=TABLE)
    assert code == 200, table
    assert {row["object"]["metadata"]["name"]: row["object"] for row in table["rows"]} == current
    code, partial = api.get(cached, Accept=PARTIAL_LIST)
    assert code == 200, partial
    assert {o["metadata"]["name"]: o["metadata"] for o in partial["items"]} == {
        name: obj["metadata"] for name, obj in current.items()}


def test_watches_from_the_cache_send_every_version_as_written(api, gateway, ns):
    path = CM.format(ns=ns)
    start = int(api.get(path)[1]["metadata"]["resourceVersion"])
    _, answers, _ = history(api, ns)
    expected = [(t, a) for t, a in zip(
        ["ADDED"] * 3 + ["MODIFIED"] * 2 + ["DELETED"], answers, strict=True)]

    def events(accept: str | None) -> list[tuple[str, dict[str, Any]]]:
        # replayed from the cache's window, and again to a second watcher of the same form
        got = api.watch(f"{path}?watch=1&resourceVersion={start}&timeoutSeconds=2",
                        max_events=len(expected), headers={"Accept": accept} if accept else None)
        return [(e["type"], e["object"]) for e in got]

    sent = events(None)
    assert sent == events(None)
    assert [(t, without_rv(o)) for t, o in sent] == [(t, without_rv(o)) for t, o in expected]
    assert [rv(o) for _, o in sent[:-1]] == [rv(o) for _, o in expected[:-1]]
    assert rv(sent[-1][1]) > rv(expected[-2][1])  # the deletion's
    partial = events(PARTIAL)
    assert [(t, o["kind"], o["metadata"]) for t, o in partial] == [
        (t, "PartialObjectMetadata", o["metadata"]) for t, o in sent]

    # live events, each sent to several watchers at once
    watchers = [gateway.open("GET", f"{path}?watch=1&timeoutSeconds=10") for _ in range(3)]
    try:
        current = api.get(f"{path}/a")[1]
        current["data"] = {"v": "live"}
        code, changed = api.put(f"{path}/a", current)
        assert code == 200, changed
        for watcher in watchers:
            event = json.loads(watcher.readline())
            while event["object"]["metadata"]["name"] != "a" or event["type"] != "MODIFIED":
                event = json.loads(watcher.readline())
            assert event["object"] == changed
    finally:
        for watcher in watchers:
            watcher.close()


def test_served_versions_are_never_the_stored_encoding(api, gateway, ns):
    group = f"g{uuid.uuid4().hex[:8]}.example.com"
    schema = {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"size": {"type": "string"}}}}}}
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"gizmos.{group}"},
           "spec": {"group": group, "scope": "Namespaced",
                    "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": schema},
                                 {"name": "v2", "served": True, "storage": False,
                                  "schema": schema}]}}
    code, body = api.post(CRD_PATH, crd)
    assert code == 201, body
    stored = f"/apis/{group}/v1/namespaces/{ns}/gizmos"
    eventually(lambda: api.get(stored)[0] == 200, what="the CRD served")
    code, made = api.post(stored, {"apiVersion": f"{group}/v1", "kind": "Gizmo",
                                   "metadata": {"name": "one"}, "spec": {"size": "big"}})
    assert code == 201, made
    for version in ("v1", "v2"):
        served = f"/apis/{group}/{version}/namespaces/{ns}/gizmos"
        code, listed = api.get(f"{served}?resourceVersion={rv(made)}"
                               "&resourceVersionMatch=NotOlderThan")
        assert code == 200, listed
        assert [(o["apiVersion"], o["spec"]) for o in listed["items"]] == [
            (f"{group}/{version}", {"size": "big"})]
        events = api.watch(f"{served}?watch=1&resourceVersion=0&timeoutSeconds=1",
                           max_events=1)
        assert [(e["type"], e["object"]["apiVersion"]) for e in events] == [
            ("ADDED", f"{group}/{version}")]


def test_lists_from_the_cache_are_audited_whole(tmp_path):
    """A list answered from spliced encodings (JSON) or decoded one item at a time (protobuf)
    is recorded whole by an audit policy that keeps response objects."""
    (tmp_path / "policy.yaml").write_text(AUDIT_EVERYTHING)
    log = tmp_path / "audit.log"
    with GatewayProcess(tmp_path / "gw", "--audit-log-path", str(log),
                        "--audit-policy-file", str(tmp_path / "policy.yaml")) as gw:
        api = API(gw)
        ns = api.namespace()
        path = CM.format(ns=ns)
        for name in ("a", "b"):
            assert api.post(path, configmap(name, v=name))[0] == 201
        code, listed = api.get(path)
        expected = items(listed)
        cached = f"{path}?resourceVersion={listed['metadata']['resourceVersion']}" \
                 "&resourceVersionMatch=NotOlderThan"
        for accept in ("application/json", PROTOBUF):
            code, raw, headers = send(gw.url + cached, "GET", gw.ssl_context(),
                                      headers={"Accept": accept})
            assert code == 200, raw[:300]
            if accept == PROTOBUF:
                answer = kubeproto.decode(raw, kubeproto.CORE + "ConfigMapList", "v1",
                                          "ConfigMapList")
                assert {i.metadata.name: dict(i.data) for i in answer.items} == {
                    name: obj["data"] for name, obj in expected.items()}
            else:
                assert items(json.loads(raw)) == expected

            def recorded(audit_id: str = headers["Audit-ID"]) -> dict[str, Any]:
                done = [e for e in map(json.loads, log.read_text().splitlines())
                        if e["auditID"] == audit_id and e["stage"] == "ResponseComplete"]
                assert done, "no ResponseComplete event yet"
                return done[0]

            event = eventually(recorded, what="the list's audit event")
            assert items(event["responseObject"]) == expected, accept
