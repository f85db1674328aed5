"""The `kubernetes` Service, Endpoints and EndpointSlice in `default`, as kube-apiserver's
bootstrap controller and lease reconciler keep them, seen with kubectl."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from gateway.apimachinery.hostnet import default_advertise_address
from tests.support.gateway import GatewayProcess
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

ADVERTISED = "192.0.2.77"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    proc = GatewayProcess(tmp_path_factory.mktemp("gateway"), "--advertise-address", ADVERTISED)
    with proc:
        yield proc


def kubectl_json(gw: GatewayProcess, *args: str) -> dict:
    return json.loads(gw.kubectl(*args, "-o", "json").stdout)


def kubernetes_slice(gw: GatewayProcess) -> dict:
    slices = kubectl_json(gw, "get", "endpointslices", "-n", "default")["items"]
    return next(s for s in slices if s["metadata"]["name"] == "kubernetes")


def test_the_kubernetes_service(gateway):
    svc = kubectl_json(gateway, "get", "svc", "kubernetes", "-n", "default",
                       "--show-managed-fields")
    assert svc["metadata"]["labels"] == {"component": "apiserver", "provider": "kubernetes"}
    assert svc["spec"] == {
        "clusterIP": "10.0.0.1", "clusterIPs": ["10.0.0.1"],
        "internalTrafficPolicy": "Cluster", "ipFamilies": ["IPv4"],
        "ipFamilyPolicy": "SingleStack",
        "ports": [{"name": "https", "port": 443, "protocol": "TCP",
                   "targetPort": gateway.port}],
        "sessionAffinity": "None", "type": "ClusterIP"}
    assert svc["status"] == {"loadBalancer": {}}
    assert [m["manager"] for m in svc["metadata"]["managedFields"]] == ["kube-apiserver"]
    table = gateway.kubectl("get", "svc", "kubernetes", "-n", "default").stdout.split()
    assert table[6:11] == ["kubernetes", "ClusterIP", "10.0.0.1", "<none>", "443/TCP"], table


def test_its_endpoints_and_endpoint_slice(gateway):
    endpoints = kubectl_json(gateway, "get", "endpoints", "kubernetes")
    assert endpoints["metadata"]["labels"] == {
        "endpointslice.kubernetes.io/skip-mirror": "true"}
    assert endpoints["subsets"] == [{
        "addresses": [{"ip": ADVERTISED}],
        "ports": [{"name": "https", "port": gateway.port, "protocol": "TCP"}]}]
    table = gateway.kubectl("get", "endpoints", "kubernetes").stdout
    assert f"{ADVERTISED}:{gateway.port}" in table
    found = kubernetes_slice(gateway)
    assert found["metadata"]["labels"] == {"kubernetes.io/service-name": "kubernetes"}
    assert (found["addressType"], found["endpoints"], found["ports"]) == (
        "IPv4", [{"addresses": [ADVERTISED], "conditions": {"ready": True}}],
        [{"name": "https", "port": gateway.port, "protocol": "TCP"}])


def test_deleted_endpoints_and_slice_come_back(gateway):
    gateway.kubectl("delete", "endpoints", "kubernetes")
    gateway.kubectl("delete", "endpointslice", "kubernetes", "-n", "default")
    back = eventually(lambda: gateway.kubectl("get", "endpoints", "kubernetes", "-o", "json",
                                              check=False).stdout, what="the endpoints back")
    assert json.loads(back)["subsets"][0]["addresses"] == [{"ip": ADVERTISED}]
    found = eventually(lambda: kubernetes_slice(gateway), what="the endpoint slice back")
    assert found["endpoints"][0]["addresses"] == [ADVERTISED]


def test_endpoints_listing_other_addresses_are_reset(gateway):
    gateway.kubectl("patch", "endpoints", "kubernetes", "--type=merge", "-p", json.dumps(
        {"subsets": [{"addresses": [{"ip": "198.51.100.1"}],
                      "ports": [{"name": "https", "port": 1234, "protocol": "TCP"}]}]}))

    def reset() -> dict | None:
        endpoints = kubectl_json(gateway, "get", "endpoints", "kubernetes")
        return endpoints if endpoints["subsets"][0]["addresses"] == [{"ip": ADVERTISED}] \
            else None

    endpoints = eventually(reset, what="the endpoints reset")
    # as kube's lease reconciler, the addresses are reset and the port left as it is
    assert endpoints["subsets"][0]["ports"] == [{"name": "https", "port": 1234,
                                                 "protocol": "TCP"}]
    assert eventually(lambda: kubernetes_slice(gateway)["ports"][0]["port"] == 1234,
                      what="the slice following the endpoints")
    # made anew, they get the gateway's port again
    gateway.kubectl("delete", "endpoints", "kubernetes")
    assert eventually(lambda: gateway.kubectl("get", "endpoints", "kubernetes", "-o", "json",
                                              check=False).stdout, what="the endpoints back")
    endpoints = kubectl_json(gateway, "get", "endpoints", "kubernetes")
    assert endpoints["subsets"][0]["ports"][0]["port"] == gateway.port


def test_a_deleted_kubernetes_service_is_recreated(gateway):
    gateway.kubectl("delete", "svc", "kubernetes", "-n", "default")
    svc = eventually(lambda: json.loads(gateway.kubectl(
        "get", "svc", "kubernetes", "-n", "default", "-o", "json", check=False).stdout or "{}"),
        what="the service back")
    # its address was given back on delete, so it gets the same one again
    assert svc["spec"]["clusterIP"] == "10.0.0.1"
    endpoints = eventually(lambda: gateway.kubectl("get", "endpoints", "kubernetes",
                                                   check=False).returncode == 0,
                           what="the endpoints back")
    assert endpoints


def test_the_hooks_are_kubes(gateway):
    code, body = gateway.request("GET", "/readyz?verbose")
    assert code == 200
    text = body.decode()
    assert "[+]poststarthook/bootstrap-controller ok" in text
    assert "[+]poststarthook/start-service-ip-repair-controllers ok" in text


def test_the_default_advertise_address_and_range_flag(tmp_path):
    """Without --advertise-address the host's address (kube's choice for a loopback bind
    address); the service's address follows --service-cluster-ip-range."""
    with GatewayProcess(tmp_path, "--service-cluster-ip-range=10.96.0.0/16") as gw:
        endpoints = kubectl_json(gw, "get", "endpoints", "kubernetes")
        assert endpoints["subsets"][0]["addresses"] == [
            {"ip": default_advertise_address("127.0.0.1")}]
        svc = kubectl_json(gw, "get", "svc", "kubernetes")
        assert svc["spec"]["clusterIP"] == "10.96.0.1"


def test_bad_flags_stop_the_gateway_with_kubes_words(tmp_path):
    proc = GatewayProcess(tmp_path, "--service-cluster-ip-range=10.0.0.0/30")
    proc.start(wait=None)
    assert proc.proc is not None and proc.proc.wait(60) == 2
    assert ("error determining service IP ranges for primary service cidr: the service "
            "cluster IP range must be at least 8 IP addresses") in proc.log()
