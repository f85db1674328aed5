"""Deleting a namespace deletes its objects of remote APIServices too, as kube's namespace
controller does through kube-aggregator: a real extension apiserver (tests/support/backend.py)
behind the gateway over mTLS, registered with ``kubectl apply`` (the gateway runs with
``--enable-aggregator-routing``), objects created and namespaces deleted with kubectl, and
what is left asked from the backend itself.

While the backend holds objects back (finalizers), refuses to delete them or cannot be reached,
the namespace stays Terminating and its conditions say why in kube's words; once the backend
lets go, the namespace goes.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.backend import APISERVICE_NAME, GROUP, GROUP_VERSION, GV_PATH, BackendProcess
from tests.support.certs import Pair
from tests.support.gateway import GatewayProcess
from tests.support.namespaces import OK, namespace, wait_for_conditions
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

HOLD = "example.com/hold"
CONTROLLER = "system:serviceaccount:kube-system:namespace-controller"
CONTROLLER_GROUPS = ["system:serviceaccounts", "system:serviceaccounts:kube-system",
                     "system:authenticated"]
APISERVICE = f"/apis/apiregistration.k8s.io/v1/apiservices/{APISERVICE_NAME}"
DISCOVERY_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
#: Long enough for the availability controller and the discovery manager to notice a change.
SETTLE_TIMEOUT = 60.0


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    with GatewayProcess(tmp_path_factory.mktemp("remote-content"),
                        "--enable-aggregator-routing") as proc:
        yield proc


@pytest.fixture(scope="module")
def backend(gw: GatewayProcess, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[BackendProcess]:
    with BackendProcess.for_gateway(tmp_path_factory.mktemp("wardle"), gw) as proc:
        yield proc


@pytest.fixture(autouse=True)
def serving(gw: GatewayProcess, backend: BackendProcess) -> BackendProcess:
    """Every test starts with the backend registered, reachable, Available and discovered,
    answering every request (a test that failed half-way may have left it otherwise)."""
    if not backend.alive():
        backend.restart()
    backend.behave()
    gw.kubectl("apply", "-f", "-", input=backend.manifests_yaml("127.0.0.1"))
    wait_available(gw, True)
    eventually(lambda: discovered(gw) == "Current", timeout=SETTLE_TIMEOUT, interval=0.2,
               what="the backend's group version discovered")
    return backend


def available(gw: GatewayProcess) -> str:
    obj = json.loads(gw.kubectl("get", "apiservice", APISERVICE_NAME, "-o", "json").stdout)
    return next((c["status"] for c in (obj.get("status") or {}).get("conditions") or []
                 if c["type"] == "Available"), "")


def wait_available(gw: GatewayProcess, wanted: bool) -> None:
    eventually(lambda: available(gw) == ("True" if wanted else "False"),
               timeout=SETTLE_TIMEOUT, interval=0.2,
               what=f"{APISERVICE_NAME} Available {wanted}")


def discovered(gw: GatewayProcess) -> str:
    """The freshness of the backend's group version in the gateway's aggregated discovery."""
    code, body = gw.request("GET", "/apis", headers={"Accept": DISCOVERY_V2})
    assert code == 200, body
    for group in json.loads(body)["items"]:
        if group["metadata"]["name"] == GROUP:
            return next((v["freshness"] for v in group["versions"]), "")
    return ""


def new_namespace(gw: GatewayProcess) -> str:
    name = f"remote-{uuid.uuid4().hex[:8]}"
    gw.kubectl("create", "namespace", name)
    return name


def create_flunders(gw: GatewayProcess, ns: str, *names: str,
                    finalizers: tuple[str, ...] = ()) -> None:
    """Flunders made with kubectl, through the gateway's proxy."""
    docs = [{"apiVersion": GROUP_VERSION, "kind": "Flunder",
             "metadata": {"name": name, "namespace": ns,
                          **({"finalizers": list(finalizers)} if finalizers else {})},
             "spec": {"reference": "e2e"}} for name in names]
    gw.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))


def on_backend(gw: GatewayProcess, backend: BackendProcess, ns: str) -> dict[str, Any]:
    """The flunders the backend itself holds in ``ns``, by name (asked with the front-proxy
    client certificate as the admin, not through the gateway)."""
    cert = Pair(Path(gw.cert_dir) / "front-proxy-client.crt",
                Path(gw.cert_dir) / "front-proxy-client.key")
    code, body, _ = backend.request("GET", f"{GV_PATH}/namespaces/{ns}/flunders",
                                    headers={"X-Remote-User": "admin",
                                             "X-Remote-Group": "system:masters"}, cert=cert)
    assert code == 200, body
    return {o["metadata"]["name"]: o for o in json.loads(body)["items"]}


def delete_namespace(gw: GatewayProcess, ns: str) -> None:
    gw.kubectl("delete", "namespace", ns, "--wait=false")


def wait_gone(gw: GatewayProcess, ns: str) -> None:
    gw.kubectl("wait", "--for=delete", f"namespace/{ns}", f"--timeout={int(SETTLE_TIMEOUT)}s",
               timeout=SETTLE_TIMEOUT + 10)
    assert namespace(gw, ns) is None


def release(gw: GatewayProcess, ns: str, *names: str) -> None:
    for name in names:
        gw.kubectl("-n", ns, "patch", "flunder", name, "--type=json",
                   "-p", '[{"op": "remove", "path": "/metadata/finalizers"}]')


def test_remote_objects_go_with_their_namespace(gw, backend):
    ns, other = new_namespace(gw), new_namespace(gw)
    create_flunders(gw, ns, "a", "b", "c")
    create_flunders(gw, other, "kept")
    gw.kubectl("-n", ns, "create", "configmap", "local")
    assert sorted(on_backend(gw, backend, ns)) == ["a", "b", "c"]
    backend.clear_requests()

    delete_namespace(gw, ns)
    wait_gone(gw, ns)
    assert on_backend(gw, backend, ns) == {}
    assert list(on_backend(gw, backend, other)) == ["kept"], "another namespace's objects stay"

    # the collection was deleted at once, by the namespace controller, through the proxy's
    # mTLS with the front-proxy client certificate
    deletes = backend.requests(f"{GV_PATH}/namespaces/{ns}/flunders", method="DELETE")
    assert deletes, backend.requests()
    for received in deletes:
        assert (received.user, received.groups, received.client_cn) == (
            CONTROLLER, CONTROLLER_GROUPS, "front-proxy-client")
    assert not backend.requests(prefix=f"{GV_PATH}/namespaces/{ns}/flunders/", method="DELETE")


def test_the_gateway_allows_the_controller_what_a_backend_asks_about(gw):
    """A backend that authorizes with SubjectAccessReviews asks the gateway about the
    controller's identity: kube's bootstrap role lets it delete anything."""
    for verb in ("deletecollection", "delete", "list"):
        answer = gw.kubectl("auth", "can-i", verb, f"flunders.{GROUP}", "-n", "somewhere",
                            f"--as={CONTROLLER}", check=False)
        assert answer.stdout.strip() == "yes", (verb, answer.stderr)
    assert gw.kubectl("auth", "can-i", "create", f"flunders.{GROUP}", "-n", "somewhere",
                      f"--as={CONTROLLER}", check=False).stdout.strip() == "no"


def test_finalizers_on_remote_objects_hold_the_namespace(gw, backend):
    ns = new_namespace(gw)
    create_flunders(gw, ns, "held-1", "held-2", finalizers=(HOLD,))
    create_flunders(gw, ns, "free")
    delete_namespace(gw, ns)

    stuck = wait_for_conditions(gw, ns, {
        **OK,
        "NamespaceContentRemaining": (
            "True", "SomeResourcesRemain",
            f"Some resources are remaining: flunders.{GROUP} has 2 resource instances"),
        "NamespaceFinalizersRemaining": (
            "True", "SomeFinalizersRemain",
            f"Some content in the namespace has finalizers remaining: {HOLD} in 2 resource "
            "instances"),
    })
    assert stuck["status"]["phase"] == "Terminating"
    left = on_backend(gw, backend, ns)
    assert sorted(left) == ["held-1", "held-2"]
    assert all(o["metadata"].get("deletionTimestamp") for o in left.values())

    release(gw, ns, "held-1")
    wait_for_conditions(gw, ns, {
        **OK,
        "NamespaceContentRemaining": (
            "True", "SomeResourcesRemain",
            f"Some resources are remaining: flunders.{GROUP} has 1 resource instances"),
        "NamespaceFinalizersRemaining": (
            "True", "SomeFinalizersRemain",
            f"Some content in the namespace has finalizers remaining: {HOLD} in 1 resource "
            "instances"),
    })
    release(gw, ns, "held-2")
    wait_gone(gw, ns)
    assert on_backend(gw, backend, ns) == {}


def test_a_backend_refusing_deletes_holds_the_namespace_until_it_accepts_them(gw, backend):
    ns = new_namespace(gw)
    create_flunders(gw, ns, "a", "b")
    backend.behave(statuses={f"DELETE {GV_PATH}/namespaces/{ns}/flunders*": 403})
    delete_namespace(gw, ns)

    stuck = wait_for_conditions(gw, ns, {
        **OK,
        "NamespaceDeletionContentFailure": (
            "True", "ContentDeletionFailed",
            "Failed to delete all resource types, 1 remaining: told to answer 403"),
    })
    assert stuck["status"]["phase"] == "Terminating"
    assert sorted(on_backend(gw, backend, ns)) == ["a", "b"]

    backend.behave()
    wait_gone(gw, ns)
    assert on_backend(gw, backend, ns) == {}


def test_without_deletecollection_each_object_is_deleted(gw, backend):
    """A backend that answers 405 to deleting the collection gets a delete per object."""
    ns = new_namespace(gw)
    create_flunders(gw, ns, "a", "b")
    backend.clear_requests()
    backend.behave(statuses={f"DELETE {GV_PATH}/namespaces/{ns}/flunders": 405})
    delete_namespace(gw, ns)
    wait_gone(gw, ns)

    assert on_backend(gw, backend, ns) == {}
    singles = backend.requests(prefix=f"{GV_PATH}/namespaces/{ns}/flunders/", method="DELETE")
    assert sorted(r.path.rsplit("/", 1)[1] for r in singles) == ["a", "b"]
    assert {r.user for r in singles} == {CONTROLLER}


def test_an_unreachable_backend_holds_the_namespace_until_it_is_back(gw, backend):
    """The backend's Endpoints gone (its pods down): the APIService turns unavailable, its
    discovery stale, and a namespace being deleted waits, saying so, with its objects kept on
    the backend; the Endpoints back, the objects are deleted and the namespace goes."""
    ns = new_namespace(gw)
    create_flunders(gw, ns, "a", "b")
    gw.kubectl("-n", backend.namespace, "delete", "endpoints", backend.name)
    wait_available(gw, False)
    delete_namespace(gw, ns)

    stuck = wait_for_conditions(gw, ns, {
        **OK,
        "NamespaceDeletionDiscoveryFailure": (
            "True", "DiscoveryFailed",
            "Discovery failed for some groups, 1 failing: unable to retrieve the complete list "
            f"of server APIs: {GROUP_VERSION}: stale GroupVersion discovery: {GROUP_VERSION}"),
    }, timeout=SETTLE_TIMEOUT)
    assert stuck["status"]["phase"] == "Terminating"
    assert sorted(on_backend(gw, backend, ns)) == ["a", "b"]

    gw.kubectl("apply", "-f", "-", input=backend.manifests_yaml("127.0.0.1"))
    wait_gone(gw, ns)
    assert on_backend(gw, backend, ns) == {}
