"""Small helpers for driving the gateway's REST API over HTTPS in end-to-end tests."""

from __future__ import annotations

import json
import uuid
from typing import Any

from tests.support.gateway import GatewayProcess
from tests.support.wait import eventually

CM = "/api/v1/namespaces/{ns}/configmaps"
#: The ConfigMap every namespace holds (kube-controller-manager's root-ca-cert-publisher).
ROOT_CA = "kube-root-ca.crt"


class API:
    """JSON in, (status, JSON or text) out, as the admin user."""

    def __init__(self, gateway: GatewayProcess) -> None:
        self.gw = gateway

    def call(self, method: str, path: str, body: Any = None,
             headers: dict[str, str] | None = None) -> tuple[int, Any]:
        code, raw = self.gw.request(method, path, body, headers)
        try:
            return code, json.loads(raw)
        except ValueError:
            return code, raw.decode(errors="replace")

    def get(self, path: str, **headers: str) -> tuple[int, Any]:
        return self.call("GET", path, headers=headers or None)

    def post(self, path: str, body: Any, **headers: str) -> tuple[int, Any]:
        return self.call("POST", path, body, headers or None)

    def put(self, path: str, body: Any) -> tuple[int, Any]:
        return self.call("PUT", path, body)

    def patch(self, path: str, body: Any, content_type: str) -> tuple[int, Any]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return self.call("PATCH", path, data, {"Content-Type": content_type})

    def delete(self, path: str, body: Any = None) -> tuple[int, Any]:
        return self.call("DELETE", path, body)

    def namespace(self) -> str:
        name = f"t-{uuid.uuid4().hex[:8]}"
        code, body = self.post("/api/v1/namespaces", {"metadata": {"name": name}})
        assert code == 201, body
        self.wait_for_defaults(name)
        return name

    def wait_for_defaults(self, namespace: str) -> None:
        """Until the controllers have put the ``default`` ServiceAccount and the
        ``kube-root-ca.crt`` ConfigMap in the namespace, as kube's e2e framework waits for
        both: what a test then lists in it is the same every time."""
        for path in (f"/api/v1/namespaces/{namespace}/serviceaccounts/default",
                     f"{CM.format(ns=namespace)}/{ROOT_CA}"):
            eventually(lambda path=path: self.get(path)[0] == 200, what=f"{path} to exist")

    def watch(self, path: str, *, max_events: int = 100, timeout: float = 10,
              headers: dict[str, str] | None = None) -> list[dict[str, Any]]:
        """Read watch events until ``max_events``, the stream's end, or ``timeout``."""
        events: list[dict[str, Any]] = []
        response = self.gw.open("GET", path, headers=headers, timeout=timeout)
        try:
            while len(events) < max_events:
                line = response.readline()
                if not line:
                    break
                events.append(json.loads(line))
        except TimeoutError:
            pass
        finally:
            response.close()
        return events


def configmap(name: str, labels: dict[str, str] | None = None, *, namespace: str | None = None,
              **data: str) -> dict[str, Any]:
    """A ConfigMap as a client would send it (the one builder every test uses)."""
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def sized_configmap(name: str, size: int = 10, namespace: str = "default") -> dict[str, Any]:
    """A ConfigMap whose one value is ``size`` bytes long (for storage and size limits)."""
    return configmap(name, namespace=namespace, v="x" * size)


def expect_status(answer: tuple[int, Any], code: int, reason: str, *,
                  message: str | None = None,
                  causes: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """Assert that ``answer`` (status, body) is the one metav1.Status kube gives: its code,
    reason, and, when given, its exact message and ``details.causes``; returns the body."""
    status, body = answer
    assert status == code, (status, body)
    assert isinstance(body, dict) and body.get("kind") == "Status", body
    assert (body["code"], body["reason"], body["status"]) == (code, reason, "Failure"), body
    if message is not None:
        assert body["message"] == message, body["message"]
    if causes is not None:
        assert body.get("details", {}).get("causes") == causes, body.get("details")
    return body


def rv(obj: dict[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])
