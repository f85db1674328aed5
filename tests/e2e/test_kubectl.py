"""kubectl against the gateway, command by command, as a user types them."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO

import pytest
import yaml

from tests.support.api import configmap
from tests.support.gateway import GatewayProcess

pytestmark = pytest.mark.slow


def k(gateway: GatewayProcess, *args: str, **kwargs) -> str:
    return gateway.kubectl(*args, **kwargs).stdout


def get_json(gateway: GatewayProcess, *args: str) -> dict:
    return json.loads(k(gateway, "get", *args, "-o", "json"))


def write(tmp_path, name: str, doc: dict) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def demo(name: str, ns: str, **data: str) -> dict:
    return configmap(name, {"app": "demo"}, namespace=ns, **data)


class Lines:
    """A child's output stream read line by line on a thread, so a test can wait for a line
    (an event) with a deadline that only decides when to call the test failed."""

    def __init__(self, stream: IO[str]) -> None:
        self.seen: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, wanted: Callable[[str], bool], timeout: float = 60) -> str:
        while True:
            try:
                line = self._queue.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no such line after {timeout}s: {self.seen}") from None
            if line is None:
                raise AssertionError(f"the stream ended without it: {self.seen}")
            self.seen.append(line)
            if wanted(line):
                return line


@contextmanager
def kubectl_running(gateway: GatewayProcess, *args: str) -> Iterator[
        tuple[subprocess.Popen[str], Lines, Lines]]:
    """kubectl in the background at -v=6, which logs each request once its response headers
    are in: a watch's line on stderr means the watch is established."""
    proc = subprocess.Popen(["kubectl", "--kubeconfig", str(gateway.kubeconfig), "-v=6", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "KUBECACHEDIR": str(gateway.workdir / "kubecache")})
    assert proc.stdout is not None and proc.stderr is not None
    try:
        yield proc, Lines(proc.stdout), Lines(proc.stderr)
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(30)


def watch_established(line: str) -> bool:
    return "watch=true" in line and " 200 OK " in line


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
    # with the root CA every namespace holds
    assert k(gateway, "get", "cm", "-n", ns, "-o", "name").split() == [
        "configmap/kube-root-ca.crt", "configmap/out"]
    k(gateway, "create", "service", "clusterip", "wide", "-n", ns, "--tcp=443")
    wide = k(gateway, "get", "svc", "wide", "-n", ns, "-o", "wide").split("\n")
    assert wide[0].split() == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE",
                               "SELECTOR"]
    assert "443/TCP" in wide[1] and "app=wide" in wide[1]


def test_describe(gateway, ns):
    k(gateway, "create", "configmap", "described", "-n", ns, "--from-literal=key=value")
    out = k(gateway, "describe", "configmap", "described", "-n", ns)
    assert out == (f"Name:         described\nNamespace:    {ns}\nLabels:       <none>\n"
                   "Annotations:  <none>\n\nData\n====\nkey:\n----\nvalue\n\n\n"
                   "BinaryData\n====\n\nEvents:  <none>\n")


def test_apply_twice_then_server_side(gateway, ns, tmp_path):
    path = write(tmp_path, "cm.yaml", demo("applied", ns, k1="v1"))
    assert "configmap/applied created" in k(gateway, "apply", "-f", path)
    assert "configmap/applied unchanged" in k(gateway, "apply", "-f", path)
    path = write(tmp_path, "cm.yaml", demo("applied", ns, k1="v2"))
    assert "configmap/applied configured" in k(gateway, "apply", "-f", path)
    assert "serverside-applied" in k(gateway, "apply", "--server-side", "-f", path)
    obj = json.loads(k(gateway, "get", "cm", "applied", "-n", ns, "-o", "json",
                       "--show-managed-fields"))
    managers = {(e["manager"], e["operation"]) for e in obj["metadata"]["managedFields"]}
    assert ("kubectl", "Apply") in managers


def test_server_side_apply_conflicts_and_force(gateway, ns, tmp_path):
    path = write(tmp_path, "ssa.yaml", demo("ssa", ns, owned="a"))
    k(gateway, "apply", "--server-side", "--field-manager=alice", "-f", path)
    path = write(tmp_path, "ssa.yaml", demo("ssa", ns, owned="b"))
    result = gateway.kubectl("apply", "--server-side", "--field-manager=bob", "-f", path,
                             check=False)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.splitlines()[0] == (
        'error: Apply failed with 1 conflict: conflict with "alice": .data.owned'), result.stderr
    k(gateway, "apply", "--server-side", "--field-manager=bob", "--force-conflicts", "-f", path)
    assert get_json(gateway, "cm", "ssa", "-n", ns)["data"] == {"owned": "b"}


def test_diff(gateway, ns, tmp_path):
    path = write(tmp_path, "d.yaml", demo("diffed", ns, k="old"))
    k(gateway, "apply", "-f", path)
    assert gateway.kubectl("diff", "-f", path, check=False).returncode == 0
    path = write(tmp_path, "d.yaml", demo("diffed", ns, k="new"))
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
    # the reason after the colon is python-jsonpatch's wording, not Go json-patch's
    assert (bad.returncode, bad.stdout, bad.stderr) == (
        1, "", "The request is invalid: the server rejected our request due to an error in "
               "our request\n")  # kube's NewGenericServerResponse(422): no library words


def test_label_and_annotate(gateway, ns):
    k(gateway, "create", "configmap", "tagged", "-n", ns)
    k(gateway, "label", "cm", "tagged", "-n", ns, "tier=web")
    k(gateway, "annotate", "cm", "tagged", "-n", ns, "owner=team")
    meta = get_json(gateway, "cm", "tagged", "-n", ns)["metadata"]
    assert meta["labels"] == {"tier": "web"} and meta["annotations"] == {"owner": "team"}
    assert k(gateway, "get", "cm", "-n", ns, "-l", "tier=web", "-o", "name").split() == [
        "configmap/tagged"]
    # != matches what has no such label: only the root CA every namespace holds
    assert k(gateway, "get", "cm", "-n", ns, "-l", "tier!=web", "-o", "name").split() == [
        "configmap/kube-root-ca.crt"]
    k(gateway, "label", "cm", "tagged", "-n", ns, "tier-")
    assert get_json(gateway, "cm", "tagged", "-n", ns)["metadata"].get("labels", {}) == {}


def test_delete_and_wait_for_delete(gateway, ns):
    k(gateway, "create", "configmap", "short-lived", "-n", ns)
    with kubectl_running(gateway, "wait", "--for=delete", "cm/short-lived", "-n", ns,
                         "--timeout=60s") as (waiter, out, err):
        err.wait_for(watch_established)  # it waits on a watch, not on a deletion already done
        assert k(gateway, "delete", "cm", "short-lived", "-n", ns) == (
            'configmap "short-lived" deleted\n')
        assert out.wait_for(lambda line: True) == "configmap/short-lived condition met\n"
        assert waiter.wait(60) == 0


def test_get_watch_output_watch_events(gateway, ns):
    with kubectl_running(gateway, "get", "cm", "-n", ns, "-w", "--output-watch-events",
                         "--request-timeout=60s") as (_, out, err):
        err.wait_for(watch_established)
        k(gateway, "create", "configmap", "watched", "-n", ns)
        k(gateway, "label", "cm", "watched", "-n", ns, "x=y")
        k(gateway, "delete", "cm", "watched", "-n", ns)
        out.wait_for(lambda line: line.startswith("DELETED"))
    events = [line.split()[:3] for line in out.seen]
    assert events == [["EVENT", "NAME", "DATA"], ["ADDED", "kube-root-ca.crt", "1"],
                      ["ADDED", "watched", "0"],
                      ["MODIFIED", "watched", "0"], ["DELETED", "watched", "0"]]


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
    assert_not_found(gateway, "dry", ns)
    path = write(tmp_path, "dry.yaml", demo("dry2", ns, a="b"))
    assert k(gateway, "apply", "-f", path, "--dry-run=server") == (
        "configmap/dry2 created (server dry run)\n")
    assert_not_found(gateway, "dry2", ns)


def assert_not_found(gateway: GatewayProcess, name: str, ns: str) -> None:
    result = gateway.kubectl("get", "cm", name, "-n", ns, check=False)
    assert (result.returncode, result.stdout, result.stderr) == (
        1, "", f'Error from server (NotFound): configmaps "{name}" not found\n')


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
    gone = gateway.kubectl("get", "namespace", name, check=False)
    assert (gone.returncode, gone.stderr) == (
        1, f'Error from server (NotFound): namespaces "{name}" not found\n')
    _, body = gateway.request("GET", f"/api/v1/namespaces/{name}/configmaps")
    assert json.loads(body)["items"] == []
    forbidden = gateway.kubectl("delete", "namespace", "default", check=False)
    assert (forbidden.returncode, forbidden.stderr) == (
        1, 'Error from server (Forbidden): namespaces "default" is forbidden: this namespace '
           "may not be deleted\n")
