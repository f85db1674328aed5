"""Aggregated discovery (apidiscovery.k8s.io/v2) over a real backend: a gateway run with
--enable-aggregator-routing and the test extension apiserver (tests/support/backend.py) put
behind it with ``kubectl apply``, as a user would. kubectl finds the backend's resources; a
dead backend's group version stays listed, Stale, with its last known resources, and turns
Current when it is back; /apis never waits on a backend."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.api import API
from tests.support.backend import APISERVICE_NAME, GROUP, VERSION, BackendProcess
from tests.support.gateway import GatewayProcess, send
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
APISERVICES = "/apis/apiregistration.k8s.io/v1/apiservices"
NAMESPACE = "wardle"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    proc = GatewayProcess(tmp_path_factory.mktemp("gateway"), "--enable-aggregator-routing")
    with proc:
        yield proc


@pytest.fixture(scope="module")
def backend(gateway: GatewayProcess, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[BackendProcess]:
    """The backend, applied behind the gateway, Available, and discovered."""
    proc = BackendProcess.for_gateway(tmp_path_factory.mktemp("backend"), gateway,
                                      namespace=NAMESPACE)
    with proc:
        gateway.kubectl("apply", "-f", "-", input=proc.manifests_yaml("127.0.0.1"))
        eventually(lambda: gateway.kubectl(
            "get", "apiservice", APISERVICE_NAME,
            "-o", "jsonpath={.status.conditions[?(@.type=='Available')].status}"
        ).stdout == "True", what="the APIService Available")
        eventually(lambda: _fresh_flunders(gateway), what="flunders discovered, Current")
        yield proc


# -- helpers -----------------------------------------------------------------------------------


def aggregated(gateway: GatewayProcess, *, timeout: float = 30,
               **headers: str) -> tuple[int, dict[str, Any] | None, dict[str, str]]:
    code, body, response_headers = send(gateway.url + "/apis", "GET", gateway.ssl_context(),
                                        headers={"Accept": AGGREGATED, **headers},
                                        timeout=timeout)
    return code, json.loads(body) if code == 200 else None, response_headers


def versions(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every version entry by group version."""
    return {f"{item['metadata']['name']}/{entry['version']}": entry
            for item in doc["items"] for entry in item["versions"]}


def _entry(gateway: GatewayProcess, group_version: str = f"{GROUP}/{VERSION}"
           ) -> dict[str, Any] | None:
    code, doc, _ = aggregated(gateway)
    assert code == 200 and doc is not None
    return versions(doc).get(group_version)


def _fresh_flunders(gateway: GatewayProcess) -> bool:
    entry = _entry(gateway)
    assert entry is not None and entry["freshness"] == "Current", entry
    assert [r["resource"] for r in entry.get("resources", [])] == ["flunders"], entry
    return True


def touch(gateway: GatewayProcess, name: str = APISERVICE_NAME) -> None:
    """Change the APIService (an annotation): discovery asks its backend again at once
    (otherwise within a minute, or when the availability controller rewrites its status)."""
    gateway.kubectl("annotate", "apiservice", name, f"test/touched={uuid.uuid4().hex[:8]}",
                    "--overwrite")


def flunder(name: str) -> str:
    return yaml.safe_dump({"apiVersion": f"{GROUP}/{VERSION}", "kind": "Flunder",
                           "metadata": {"name": name, "namespace": NAMESPACE},
                           "spec": {"reference": "x"}})


# -- kubectl -----------------------------------------------------------------------------------


def test_kubectl_finds_and_uses_the_backends_resources(gateway, backend):
    out = gateway.kubectl("api-resources", "--api-group", GROUP).stdout.splitlines()
    assert out[0].split() == ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
    assert [line.split() for line in out[1:]] == [
        ["flunders", "fl", f"{GROUP}/{VERSION}", "true", "Flunder"]]
    assert f"{GROUP}/{VERSION}" in gateway.kubectl("api-versions").stdout.split()

    name = f"f-{uuid.uuid4().hex[:6]}"
    # (kubectl validates against the backend's OpenAPI, aggregated by the gateway)
    created = gateway.kubectl("create", "-f", "-", input=flunder(name))
    assert created.stdout.strip() == f"flunder.{GROUP}/{name} created"
    listed = gateway.kubectl("get", "flunders", "-n", NAMESPACE).stdout.splitlines()
    assert listed[0].split()[0] == "NAME" and name in [row.split()[0] for row in listed[1:]]
    short = gateway.kubectl("get", "fl", name, "-n", NAMESPACE, "-o", "json").stdout
    assert json.loads(short)["metadata"]["name"] == name
    by_category = gateway.kubectl("get", "wardle", "-n", NAMESPACE, "-o", "name").stdout
    assert f"flunder.{GROUP}/{name}" in by_category.split()


def test_the_aggregated_document_places_the_backend_and_keeps_its_etag(gateway, backend):
    code, doc, headers = aggregated(gateway)
    assert code == 200 and doc is not None
    assert headers["Content-Type"] == AGGREGATED and headers["Cache-Control"] == "public"
    names = [item["metadata"]["name"] for item in doc["items"]]
    # apiregistration pinned first; then by groupPriorityMinimum: the backend's 1000 after
    # every built-in group of the gateway (all above 16000)
    assert names[0] == "apiregistration.k8s.io" and names[-1] == GROUP, names
    assert names.index("authentication.k8s.io") < names.index("rbac.authorization.k8s.io") \
        < names.index("coordination.k8s.io"), names
    [wardle] = [item for item in doc["items"] if item["metadata"]["name"] == GROUP]
    [entry] = wardle["versions"]
    [resource] = entry["resources"]
    assert entry["version"] == VERSION and entry["freshness"] == "Current"
    assert resource["resource"] == "flunders" and resource["shortNames"] == ["fl"]
    assert resource["responseKind"] == {"group": GROUP, "version": VERSION, "kind": "Flunder"}
    assert all(v["freshness"] == "Current" for v in versions(doc).values())
    assert aggregated(gateway, **{"If-None-Match": headers["ETag"]})[0] == 304

    # the backend's discovery is asked as the aggregator, for the aggregated document
    [asked, *_] = [r for r in reversed(backend.requests("/apis"))
                   if r.user == "system:kube-aggregator"]
    assert asked.groups == ["system:masters"]
    assert asked.header("Accept").startswith(AGGREGATED + ",")


def test_a_dead_backend_is_stale_with_its_last_resources_then_current(gateway, backend):
    _, before, headers = aggregated(gateway)
    assert before is not None
    known = versions(before)[f"{GROUP}/{VERSION}"]["resources"]
    backend.kill()
    try:
        touch(gateway)

        def stale() -> dict[str, Any]:
            code, doc, _ = aggregated(gateway)
            assert code == 200 and doc is not None
            entry = versions(doc)[f"{GROUP}/{VERSION}"]
            assert entry["freshness"] == "Stale", entry
            return doc

        doc = eventually(stale, what="the dead backend's group version Stale")
        assert versions(doc)[f"{GROUP}/{VERSION}"]["resources"] == known
        # the served document changed with it
        assert aggregated(gateway, **{"If-None-Match": headers["ETag"]})[0] == 200
        # the legacy /apis still lists it, and the local groups are Current as ever
        code, groups = API(gateway).get("/apis")
        assert code == 200 and GROUP in [g["name"] for g in groups["groups"]]
        assert all(v["freshness"] == "Current" for gv, v in versions(doc).items()
                   if not gv.startswith(GROUP))
    finally:
        if not backend.alive():
            backend.start()
    touch(gateway)
    eventually(lambda: _fresh_flunders(gateway), what="the group version Current again")


def test_apis_never_waits_for_backends(gateway, backend, tmp_path: Path):
    """20 remote APIServices: 15 on the backend (one of them its own group, 14 groups it does
    not serve), 5 on a second backend whose /apis hangs for 30 s."""
    api = API(gateway)
    slow = BackendProcess.for_gateway(tmp_path / "slow", gateway, name="slow",
                                      namespace=NAMESPACE)
    made: list[str] = []
    with slow:
        slow.behave(delays={"/apis": 30})
        gateway.kubectl("apply", "-f", "-", input=slow.manifests_yaml(
            "127.0.0.1", namespace_object=False, apiservice=False))
        suffix = uuid.uuid4().hex[:6]
        up = [f"g{i}-{suffix}.example.com" for i in range(14)]
        down = [f"down{i}-{suffix}.example.com" for i in range(5)]
        try:
            for group, service in [*((g, backend.name) for g in up),
                                   *((g, slow.name) for g in down)]:
                body = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                        "metadata": {"name": f"v1.{group}"},
                        "spec": {"group": group, "version": "v1",
                                 "service": {"namespace": NAMESPACE, "name": service},
                                 "insecureSkipTLSVerify": True,
                                 "groupPriorityMinimum": 900, "versionPriority": 15}}
                code, created = api.post(APISERVICES, body)
                assert code == 201, created
                made.append(f"v1.{group}")

            # the slow backend has been asked for its discovery, and hangs
            asked = eventually(lambda: [r for r in slow.requests("/apis")
                                        if r.user == "system:kube-aggregator"],
                               what="the slow backend asked for /apis")
            code, doc, _ = aggregated(gateway, timeout=20)
            answered = time.time()
            assert code == 200 and doc is not None
            assert answered < asked[0].time + 30, "/apis waited for the hanging backend"
            listed = versions(doc)
            for group in down:
                assert listed[f"{group}/v1"] == {"version": "v1", "freshness": "Stale"}
            code, legacy = api.get("/apis")
            assert {*up, *down} <= {g["name"] for g in legacy["groups"]}

            def settled() -> bool:
                _, doc, _ = aggregated(gateway, timeout=20)
                assert doc is not None
                listed = versions(doc)
                for group in up:  # asked, answered: not in the backend's document
                    assert listed[f"{group}/v1"] == {"version": "v1",
                                                     "freshness": "Current"}, group
                for group in down:
                    assert listed[f"{group}/v1"]["freshness"] == "Stale", group
                assert listed[f"{GROUP}/{VERSION}"]["freshness"] == "Current"
                return True

            eventually(settled, timeout=60, what="up Current, down Stale")
            # kubectl still finds the resources of the backends that answer
            out = gateway.kubectl("api-resources", check=False)
            assert "flunders" in out.stdout.split(), out
        finally:
            for name in made:
                api.delete(f"{APISERVICES}/{name}")

    def forgotten() -> bool:
        _, doc, _ = aggregated(gateway)
        assert doc is not None
        left = {gv.split("/")[0] for gv in versions(doc)} & {*up, *down}
        assert not left, left
        return True

    eventually(forgotten, what="deleted APIServices leaving discovery")
