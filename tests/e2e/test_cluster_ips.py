"""Service cluster IPs allocated from --service-cluster-ip-range as kube-apiserver allocates
them: families and policies, requested addresses, immutability, release, restarts, and
concurrent creates on one gateway and on two gateways over one etcd."""

from __future__ import annotations

import asyncio
import ipaddress
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gateway.storage.sqlite import SQLiteStorage
from tests.support.api import API, expect_status
from tests.support.etcd import EtcdServer
from tests.support.gateway import GatewayProcess
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

RANGE = ipaddress.ip_network("10.0.0.0/24")
OUTSIDE = ('Invalid value: []string{"10.1.2.3"}: failed to allocate IP 10.1.2.3: the provided IP '
           "(10.1.2.3) is not in the valid range. The range of valid IPs is 10.0.0.0/24")


def services(ns: str) -> str:
    return f"/api/v1/namespaces/{ns}/services"


def service(name: str, **spec: object) -> dict:
    return {"metadata": {"name": name}, "spec": {"ports": [{"port": 80}], **spec}}


def taken(ip: str) -> str:
    return (f'Invalid value: []string{{"{ip}"}}: failed to allocate IP {ip}: provided IP is '
            "already allocated")


def expect_invalid(answer: tuple[int, object], name: str, field: str, message: str) -> None:
    expect_status(answer, 422, "Invalid", message=f'Service "{name}" is invalid: {field}: '
                  f"{message}", causes=[{"reason": "FieldValueInvalid", "message": message,
                                          "field": field}])


def test_sequential_creates_get_distinct_addresses_in_range(api, ns):
    seen = set()
    for i in range(12):
        code, made = api.post(services(ns), service(f"s{i}"))
        assert code == 201, made
        spec = made["spec"]
        ip = ipaddress.ip_address(spec["clusterIP"])
        assert ip in RANGE and ip not in (RANGE.network_address, RANGE.broadcast_address)
        assert spec["clusterIPs"] == [spec["clusterIP"]]
        assert (spec["ipFamilies"], spec["ipFamilyPolicy"]) == (["IPv4"], "SingleStack")
        assert made["status"] == {"loadBalancer": {}}
        seen.add(ip)
    assert len(seen) == 12
    assert ipaddress.ip_address("10.0.0.1") not in seen, "the kubernetes service has it"
    # the allocated fields are not the client's: its managed fields do not claim them
    code, got = api.get(f"{services(ns)}/s0")
    owned = got["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]
    assert not {"f:clusterIP", "f:clusterIPs", "f:ipFamilies", "f:ipFamilyPolicy"} & set(owned)


def test_requested_addresses(api, ns):
    code, made = api.post(services(ns), service("chosen", clusterIP="10.0.0.10"))
    assert code == 201, made
    assert (made["spec"]["clusterIP"], made["spec"]["clusterIPs"]) == ("10.0.0.10", ["10.0.0.10"])
    expect_invalid(api.post(services(ns), service("outside", clusterIP="10.1.2.3")),
                   "outside", "spec.clusterIPs", OUTSIDE)
    expect_invalid(api.post(services(ns), service("again", clusterIP="10.0.0.10")),
                   "again", "spec.clusterIPs", taken("10.0.0.10"))
    expect_invalid(api.post(services(ns), service("kube", clusterIP="10.0.0.1")),
                   "kube", "spec.clusterIPs", taken("10.0.0.1"))
    result = api.gw.kubectl("create", "service", "clusterip", "viakubectl", "-n", ns,
                            "--tcp=80", "--clusterip=10.1.2.3", check=False)
    assert result.returncode == 1
    assert result.stderr == ('error: failed to create ClusterIP service: Service "viakubectl" '
                             f"is invalid: spec.clusterIPs: {OUTSIDE}\n")


def test_headless_and_external_name(api, ns):
    code, made = api.post(services(ns), service("headless", clusterIP="None",
                                                selector={"app": "x"}))
    assert code == 201, made
    spec = made["spec"]
    assert (spec["clusterIP"], spec["clusterIPs"]) == ("None", ["None"])
    assert (spec["ipFamilies"], spec["ipFamilyPolicy"]) == (["IPv4"], "SingleStack")
    # without a selector kube assumes endpoints of both families, even on a single-stack range
    code, made = api.post(services(ns), {"metadata": {"name": "bare"},
                                         "spec": {"clusterIP": "None"}})
    assert code == 201, made
    assert (made["spec"]["ipFamilies"], made["spec"]["ipFamilyPolicy"]) == (
        ["IPv4", "IPv6"], "RequireDualStack")
    code, made = api.post(services(ns), {"metadata": {"name": "alias"}, "spec": {
        "type": "ExternalName", "externalName": "db.example.com"}})
    assert code == 201, made
    assert made["spec"] == {"type": "ExternalName", "externalName": "db.example.com",
                            "sessionAffinity": "None"}
    forbidden = "Forbidden: may not be set for ExternalName services"
    expect_status(api.post(services(ns), {"metadata": {"name": "alias2"}, "spec": {
        "type": "ExternalName", "externalName": "db.example.com", "clusterIP": "10.0.0.30"}}),
        422, "Invalid", causes=[{"reason": "FieldValueForbidden", "message": forbidden,
                                 "field": "spec.clusterIPs"}])
    expect_invalid(api.post(services(ns), service("lbheadless", type="LoadBalancer",
                                                  clusterIP="None")),
                   "lbheadless", "spec.clusterIPs[0]",
                   "Invalid value: \"None\": may not be set to 'None' for LoadBalancer services")


def test_node_port_and_load_balancer_get_addresses_and_kubes_defaults(api, ns):
    for kind in ("NodePort", "LoadBalancer"):
        code, made = api.post(services(ns), service(kind.lower(), type=kind))
        assert code == 201, made
        spec = made["spec"]
        assert ipaddress.ip_address(spec["clusterIP"]) in RANGE
        assert spec["externalTrafficPolicy"] == "Cluster"
    assert spec["allocateLoadBalancerNodePorts"] is True


def test_ip_family_policies_on_a_single_stack_range(api, ns):
    code, made = api.post(services(ns), service("prefer", ipFamilyPolicy="PreferDualStack"))
    assert code == 201, made
    assert (made["spec"]["ipFamilies"], len(made["spec"]["clusterIPs"])) == (["IPv4"], 1)
    expect_invalid(api.post(services(ns), service("require", ipFamilyPolicy="RequireDualStack")),
                   "require", "spec.ipFamilyPolicy", 'Invalid value: "RequireDualStack": this '
                   "cluster is not configured for dual-stack services")
    expect_invalid(api.post(services(ns), service("six", ipFamilies=["IPv6"])),
                   "six", "spec.ipFamilies[0]",
                   'Invalid value: "IPv6": not configured on this cluster')
    expect_invalid(api.post(services(ns), service("sixip", clusterIP="fd00::5")),
                   "sixip", "spec.clusterIPs[0]",
                   'Invalid value: []string{"fd00::5"}: IPv6 is not configured on this cluster')


def test_the_cluster_ip_is_kept_and_immutable(api, ns):
    code, made = api.post(services(ns), service("keep"))
    assert code == 201, made
    ip = made["spec"]["clusterIP"]
    # resubmitting without the allocated address keeps it
    code, updated = api.put(f"{services(ns)}/keep", service("keep", ports=[{"port": 81}]))
    assert code == 200, updated
    assert (updated["spec"]["clusterIP"], updated["spec"]["clusterIPs"]) == (ip, [ip])
    expect_invalid(api.put(f"{services(ns)}/keep", service("keep", clusterIP="10.0.0.222")),
                   "keep", "spec.clusterIPs[0]",
                   'Invalid value: []string{"10.0.0.222"}: may not change once set')
    manifest = (f"apiVersion: v1\nkind: Service\nmetadata:\n  name: applied\n  namespace: {ns}\n"
                "spec:\n  ports:\n  - port: 80\n")
    api.gw.kubectl("apply", "-f", "-", input=manifest)
    first = json.loads(api.gw.kubectl("get", "svc", "applied", "-n", ns, "-o", "json").stdout)
    api.gw.kubectl("apply", "-f", "-", input=manifest.replace("80", "8080"))
    again = json.loads(api.gw.kubectl("get", "svc", "applied", "-n", ns, "-o", "json").stdout)
    assert again["spec"]["clusterIP"] == first["spec"]["clusterIP"]


def test_addresses_are_given_back(api, ns):
    assert api.post(services(ns), service("first", clusterIP="10.0.0.11"))[0] == 201
    assert api.delete(f"{services(ns)}/first")[0] == 200
    code, made = api.post(services(ns), service("second", clusterIP="10.0.0.11"))
    assert code == 201, made
    # turning into an ExternalName gives it back too
    code, _ = api.patch(f"{services(ns)}/second", {"spec": {
        "type": "ExternalName", "externalName": "x.example.com"}}, "application/merge-patch+json")
    assert code == 200
    code, made = api.post(services(ns), service("third", clusterIP="10.0.0.11"))
    assert code == 201, made
    # and back: a new address
    code, back = api.patch(f"{services(ns)}/second", {"spec": {
        "type": "ClusterIP", "externalName": None}}, "application/merge-patch+json")
    assert code == 200, back
    assert back["spec"]["clusterIP"] not in ("10.0.0.11", None)
    # a deleted service's endpoints go with it
    assert api.post(f"/api/v1/namespaces/{ns}/endpoints", {
        "metadata": {"name": "third"}, "subsets": [{"addresses": [{"ip": "10.9.0.1"}]}]})[0] == 201
    assert api.delete(f"{services(ns)}/third")[0] == 200
    assert api.get(f"/api/v1/namespaces/{ns}/endpoints/third")[0] == 404


def test_a_dry_run_reserves_nothing(api, ns):
    code, made = api.post(f"{services(ns)}?dryRun=All", service("dry", clusterIP="10.0.0.12"))
    assert (code, made["spec"]["clusterIP"]) == (201, "10.0.0.12")
    assert api.post(services(ns), service("wet", clusterIP="10.0.0.12"))[0] == 201
    # kube's dry-run allocator names the network address instead of picking one
    code, made = api.post(f"{services(ns)}?dryRun=All", service("dry2"))
    assert (code, made["spec"]["clusterIP"]) == (201, "10.0.0.0")


def test_an_out_of_range_port_is_shown_as_an_integer(api, ns):
    out = "Invalid value: 70000: must be between 1 and 65535, inclusive"
    expect_status(api.post(services(ns), service("badport", ports=[{"port": 70000}])),
                  422, "Invalid",
                  message=f'Service "badport" is invalid: [spec.ports[0].port: {out}, '
                          f"spec.ports[0].targetPort: {out}]")


def create_many(api: API, ns: str, count: int, prefix: str = "c") -> list[str]:
    def create(i: int) -> str:
        code, made = api.post(services(ns), service(f"{prefix}{i}"))
        assert code == 201, made
        return made["spec"]["clusterIP"]

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(create, range(count)))


def test_concurrent_creates_never_share_an_address(api, ns):
    ips = create_many(api, ns, 20)
    assert len(set(ips)) == 20


async def forget_allocation(db: Path) -> None:
    store = SQLiteStorage(db)
    await store.start()
    try:
        await store.delete("/ranges/serviceips")
    finally:
        await store.close()


def test_allocations_survive_a_restart(tmp_path: Path):
    with GatewayProcess(tmp_path) as gw:
        api = API(gw)
        ns = api.namespace()
        assert api.post(services(ns), service("kept", clusterIP="10.0.0.13"))[0] == 201
        dynamic = api.post(services(ns), service("dynamic"))[1]["spec"]["clusterIP"]
        gw.stop()
        gw.start()
        for ip in ("10.0.0.13", dynamic):
            expect_invalid(api.post(services(ns), service("again", clusterIP=ip)),
                           "again", "spec.clusterIPs", taken(ip))
        # the allocation lost: the repair pass at start rebuilds it from the services
        gw.stop()
        asyncio.run(forget_allocation(gw.data_dir / "state.db"))
        gw.start()
        for ip in ("10.0.0.13", dynamic):
            expect_invalid(api.post(services(ns), service("again", clusterIP=ip)),
                           "again", "spec.clusterIPs", taken(ip))
        assert api.delete(f"{services(ns)}/kept")[0] == 200
        assert api.post(services(ns), service("again", clusterIP="10.0.0.13"))[0] == 201


def test_a_full_range(tmp_path: Path):
    with GatewayProcess(tmp_path, "--service-cluster-ip-range=10.0.0.0/29") as gw:
        api = API(gw)
        ns = api.namespace()
        # 6 addresses; the kubernetes service holds 10.0.0.1
        ips = {api.post(services(ns), service(f"s{i}"))[1]["spec"]["clusterIP"]
               for i in range(5)}
        assert ips == {f"10.0.0.{i}" for i in range(2, 7)}
        message = "failed to allocate a serviceIP: range is full"
        body = expect_status(api.post(services(ns), service("one-more")), 500, "InternalError",
                             message=f"Internal error occurred: {message}")
        assert body["details"]["causes"] == [{"message": message}]


def test_two_gateways_on_one_etcd(tmp_path: Path):
    with EtcdServer() as etcd:
        flags = (f"--etcd-servers={etcd.endpoint}",)
        first = GatewayProcess(tmp_path / "one", *flags, "--advertise-address=192.0.2.10")
        second = GatewayProcess(tmp_path / "two", *flags, "--advertise-address=192.0.2.11")
        with first, second:
            one, two = API(first), API(second)
            ns = one.namespace()
            assert eventually(lambda: two.get(f"/api/v1/namespaces/{ns}")[0] == 200)
            with ThreadPoolExecutor(2) as pool:
                halves = list(pool.map(lambda a: create_many(a[0], ns, 10, a[1]),
                                       [(one, "a"), (two, "b")]))
            ips = halves[0] + halves[1]
            assert len(set(ips)) == 20, sorted(ips)
            # one kubernetes service, and both gateways in its endpoints
            code, svc = two.get("/api/v1/namespaces/default/services/kubernetes")
            assert (code, svc["spec"]["clusterIP"]) == (200, "10.0.0.1")

            def listed() -> list[dict]:
                endpoints = one.get("/api/v1/namespaces/default/endpoints/kubernetes")[1]
                return endpoints["subsets"][0]["addresses"]

            assert eventually(lambda: listed() == [{"ip": "192.0.2.10"}, {"ip": "192.0.2.11"}],
                              what="both gateways listed")
            # a restarted gateway still refuses an address the other allocated
            second.stop()
            assert eventually(lambda: listed() == [{"ip": "192.0.2.10"}],
                              what="the stopped gateway dropped")
            second.start()
            expect_invalid(two.post(services(ns), service("taken", clusterIP=halves[0][0])),
                           "taken", "spec.clusterIPs", taken(halves[0][0]))
