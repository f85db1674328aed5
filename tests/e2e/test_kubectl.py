"""kubectl against the gateway, command by command, as a user types them."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid

import pytest
import yaml

from tests.support.gateway import GatewayProcess

pytestmark = pytest.mark.slow


@pytest.fixture
def ns(gateway: GatewayProcess) -> str:
    name = f"k-{uuid.uuid4().hex[:8]}"
    gateway.kubectl("create", "namespace", name)
    return name


def k(gateway: GatewayProcess, *args: str, **kwargs) -> str:
    return gateway.kubectl(*args, **kwargs).stdout


def get_json(gateway: GatewayProcess, *args: str) -> dict:
    return json.loads(k(gateway, "get", *args, "-o", "json"))


def write(tmp_path, name: str, doc: dict) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def configmap(name: str, ns: str, **data: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "labels": {"app": "demo"}},
            "data": data}


def test_create_the_typed_kinds(gateway, ns):
    # kubectl sends these as protobuf
    k(gateway, "create", "configmap", "cm1", "-n", ns, "--from-literal=a=1",
      "--from-literal=b=2")
    k(gateway, "create", "secret", "generic", "s1", "-n", ns, "--from-literal=password=pw")
    k(gateway, "create", "serviceaccount", "sa1", "-n", ns)
    k(gateway, "create", "service", "clusterip", "svc1", "-n", ns, "--tcp=80:8080")
    cm = get_json(gateway, "configmap", "cm1", "-n", ns)
    assert cm["data"] == {"a": "1", "b": "2"}
    secret = get_json(gateway, "secret", "s1", "-n", ns)
    assert secret["type"] == "Opaque" and secret["data"] == {"password": "cHc="}
    assert get_json(gateway, "serviceaccount", "sa1", "-n", ns)["metadata"]["uid"]
    svc = get_json(gateway, "service", "svc1", "-n", ns)
    assert svc["spec"]["ports"][0]["targetPort"] == 8080


def test_get_output_formats(gateway, ns):
    k(gateway, "create", "configmap", "out", "-n", ns, "--from-literal=k=v")
    table = k(gateway, "get", "configmap", "out", "-n", ns)
    assert table.split("\n")[0].split() == ["NAME", "DATA", "AGE"]
    assert table.split("\n")[1].split()[:2] == ["out", "1"]
    assert yaml.safe_load(k(gateway, "get", "cm", "out", "-n", ns, "-o", "yaml"))["data"] == {
        "k": "v"}
    assert k(gateway, "get", "cm", "out", "-n", ns, "-o", "jsonpath={.data.k}") == "v"
    assert k(gateway, "get", "cm", "-n", ns, "-o", "name").split() == ["configmap/out"]
    k(gateway, "create", "service", "clusterip", "wide", "-n", ns, "--tcp=443")
    wide = k(gateway, "get", "svc", "wide", "-n", ns, "-o", "wide").split("\n")
    assert wide[0].split() == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE",
                               "SELECTOR"]
    assert "443/TCP" in wide[1] and "app=wide" in wide[1]


def test_describe(gateway, ns):
    k(gateway, "create", "configmap", "described", "-n", ns, "--from-literal=key=value")
    out = k(gateway, "describe", "configmap", "described", "-n", ns)
    assert "Name:         described" in out and "key:" in out and "value" in out


def test_apply_twice_then_server_side(gateway, ns, tmp_path):
    path = write(tmp_path, "cm.yaml", configmap("applied", ns, k1="v1"))
    assert "configmap/applied created" in k(gateway, "apply", "-f", path)
    assert "configmap/applied unchanged" in k(gateway, "apply", "-f", path)
    path = write(tmp_path, "cm.yaml", configmap("applied", ns, k1="v2"))
    assert "configmap/applied configured" in k(gateway, "apply", "-f", path)
    assert "serverside-applied" in k(gateway, "apply", "--server-side", "-f", path)
    obj = json.loads(k(gateway, "get", "cm", "applied", "-n", ns, "-o", "json",
                       "--show-managed-fields"))
    managers = {(e["manager"], e["operation"]) for e in obj["metadata"]["managedFields"]}
    assert ("kubectl", "Apply") in managers


def test_server_side_apply_conflicts_and_force(gateway, ns, tmp_path):
    path = write(tmp_path, "ssa.yaml", configmap("ssa", ns, owned="a"))
    k(gateway, "apply", "--server-side", "--field-manager=alice", "-f", path)
    path = write(tmp_path, "ssa.yaml", configmap("ssa", ns, owned="b"))
    result = gateway.kubectl("apply", "--server-side", "--field-manager=bob", "-f", path,
                             check=False)
    assert result.returncode != 0
    assert 'conflict with "alice"' in result.stderr and ".data.owned" in result.stderr
    k(gateway, "apply", "--server-side", "--field-manager=bob", "--force-conflicts", "-f", path)
    assert get_json(gateway, "cm", "ssa", "-n", ns)["data"] == {"owned": "b"}


def test_diff(gateway, ns, tmp_path):
    path = write(tmp_path, "d.yaml", configmap("diffed", ns, k="old"))
    k(gateway, "apply", "-f", path)
    assert gateway.kubectl("diff", "-f", path, check=False).returncode == 0
    path = write(tmp_path, "d.yaml", configmap("diffed", ns, k="new"))
    result = gateway.kubectl("diff", "-f", path, check=False)
    assert result.returncode == 1
    assert "-  k: old" in result.stdout and "+  k: new" in result.stdout


def test_edit_with_an_editor_script(gateway, ns, tmp_path):
    k(gateway, "create", "configmap", "edited", "-n", ns, "--from-literal=k=before")
    editor = tmp_path / "editor.sh"
    editor.write_text("#!/bin/sh\nsed -i 's/k: before/k: after/' \"$1\"\n")
    editor.chmod(0o755)
    subprocess.run(["kubectl", "--kubeconfig", str(gateway.kubeconfig), "edit", "cm", "edited",
                    "-n", ns], check=True, capture_output=True, timeout=60,
                   env={**os.environ, "KUBE_EDITOR": str(editor)})
    assert get_json(gateway, "cm", "edited", "-n", ns)["data"] == {"k": "after"}


def test_patch_of_every_type(gateway, ns):
    k(gateway, "create", "service", "clusterip", "patched", "-n", ns, "--tcp=80:8080")
    k(gateway, "patch", "svc", "patched", "-n", ns, "--type=strategic",
      "-p", '{"spec":{"ports":[{"port":443,"name":"https"},{"port":80,"name":"http"}]}}')
    ports = {p["port"]: p for p in get_json(gateway, "svc", "patched", "-n", ns)["spec"]["ports"]}
    assert set(ports) == {80, 443}, "strategic merge keeps the existing port by its key"
    assert ports[80]["targetPort"] == 8080 and ports[80]["name"] == "http"
    k(gateway, "patch", "svc", "patched", "-n", ns, "--type=merge",
      "-p", '{"metadata":{"labels":{"merged":"yes"}}}')
    k(gateway, "patch", "svc", "patched", "-n", ns, "--type=json",
      "-p", '[{"op":"replace","path":"/spec/ports/0/port","value":8443}]')
    svc = get_json(gateway, "svc", "patched", "-n", ns)
    assert svc["metadata"]["labels"]["merged"] == "yes"
    assert svc["spec"]["ports"][0]["port"] == 8443
    bad = gateway.kubectl("patch", "svc", "patched", "-n", ns, "--type=json",
                          "-p", '[{"op":"remove","path":"/spec/nothing"}]', check=False)
    assert bad.returncode != 0 and "nothing" in bad.stderr


def test_label_and_annotate(gateway, ns):
    k(gateway, "create", "configmap", "tagged", "-n", ns)
    k(gateway, "label", "cm", "tagged", "-n", ns, "tier=web")
    k(gateway, "annotate", "cm", "tagged", "-n", ns, "owner=team")
    meta = get_json(gateway, "cm", "tagged", "-n", ns)["metadata"]
    assert meta["labels"] == {"tier": "web"} and meta["annotations"] == {"owner": "team"}
    assert k(gateway, "get", "cm", "-n", ns, "-l", "tier=web", "-o", "name").split() == [
        "configmap/tagged"]
    assert k(gateway, "get", "cm", "-n", ns, "-l", "tier!=web", "-o", "name").split() == []
    k(gateway, "label", "cm", "tagged", "-n", ns, "tier-")
    assert get_json(gateway, "cm", "tagged", "-n", ns)["metadata"].get("labels", {}) == {}


def test_delete_and_wait_for_delete(gateway, ns):
    k(gateway, "create", "configmap", "short-lived", "-n", ns)
    waiter = subprocess.Popen(
        ["kubectl", "--kubeconfig", str(gateway.kubeconfig), "wait", "--for=delete",
         "cm/short-lived", "-n", ns, "--timeout=30s"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1)
    assert 'configmap "short-lived" deleted' in k(gateway, "delete", "cm", "short-lived",
                                                   "-n", ns)
    out, err = waiter.communicate(timeout=40)
    assert waiter.returncode == 0, err
    assert "condition met" in out


def test_get_watch_output_watch_events(gateway, ns):
    watcher = subprocess.Popen(
        ["kubectl", "--kubeconfig", str(gateway.kubeconfig), "get", "cm", "-n", ns, "-w",
         "--output-watch-events", "--request-timeout=30s"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.5)
        k(gateway, "create", "configmap", "watched", "-n", ns)
        k(gateway, "label", "cm", "watched", "-n", ns, "x=y")
        k(gateway, "delete", "cm", "watched", "-n", ns)
        time.sleep(1.5)
    finally:
        watcher.terminate()
    out = watcher.communicate(timeout=10)[0]
    events = [line.split()[:2] for line in out.splitlines() if "watched" in line]
    assert events == [["ADDED", "watched"], ["MODIFIED", "watched"], ["DELETED", "watched"]]


def test_api_resources_and_versions(gateway):
    resources = k(gateway, "api-resources")
    for line in ("configmaps", "leases", "endpointslices", "validatingwebhookconfigurations"):
        assert line in resources
    assert "cm" in resources.split("configmaps")[1].split("\n")[0]
    versions = k(gateway, "api-versions").split()
    assert {"v1", "coordination.k8s.io/v1", "discovery.k8s.io/v1",
            "admissionregistration.k8s.io/v1"} <= set(versions)
    namespaced = k(gateway, "api-resources", "--namespaced=false", "-o", "name").split()
    assert "namespaces" in namespaced and "configmaps" not in namespaced


def test_explain(gateway):
    out = k(gateway, "explain", "configmap.data")
    assert "KIND:       ConfigMap" in out and "map[string]string" in out
    recursive = k(gateway, "explain", "service.spec", "--recursive")
    assert "ports" in recursive and "targetPort" in recursive
    assert "holderIdentity" in k(gateway, "explain", "lease.spec")


def test_dry_run_server_stores_nothing(gateway, ns, tmp_path):
    out = k(gateway, "create", "configmap", "dry", "-n", ns, "--from-literal=a=b",
            "--dry-run=server", "-o", "yaml")
    assert yaml.safe_load(out)["data"] == {"a": "b"}
    assert gateway.kubectl("get", "cm", "dry", "-n", ns, check=False).returncode != 0
    path = write(tmp_path, "dry.yaml", configmap("dry2", ns, a="b"))
    k(gateway, "apply", "-f", path, "--dry-run=server")
    assert gateway.kubectl("get", "cm", "dry2", "-n", ns, check=False).returncode != 0


def test_chunked_get(gateway, ns):
    for i in range(12):
        k(gateway, "create", "configmap", f"chunk-{i:02d}", "-n", ns)
    out = gateway.kubectl("get", "cm", "-n", ns, "--chunk-size=5", "-o", "name", "-v=6")
    names = [n for n in out.stdout.split() if n.startswith("configmap/chunk-")]
    assert names == [f"configmap/chunk-{i:02d}" for i in range(12)]
    assert out.stderr.count("limit=5") >= 3, "kubectl paged through the list"


def test_create_namespace_and_delete_it_with_its_content(gateway):
    name = f"doomed-{uuid.uuid4().hex[:6]}"
    k(gateway, "create", "namespace", name)
    k(gateway, "create", "configmap", "inside", "-n", name)
    k(gateway, "create", "secret", "generic", "inside", "-n", name, "--from-literal=a=b")
    k(gateway, "create", "serviceaccount", "inside", "-n", name)
    out = k(gateway, "delete", "namespace", name, timeout=60)
    assert f'namespace "{name}" deleted' in out
    assert gateway.kubectl("get", "namespace", name, check=False).returncode != 0
    _, body = gateway.request("GET", f"/api/v1/namespaces/{name}/configmaps")
    assert json.loads(body)["items"] == []
    forbidden = gateway.kubectl("delete", "namespace", "default", check=False)
    assert "may not be deleted" in forbidden.stderr
