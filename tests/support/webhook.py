"""A real admission webhook server for end-to-end tests: HTTPS on a free port, in a thread.

Each path is one behaviour (allow, deny, mutate, ...), and every AdmissionReview received is
kept so that a test can read what the gateway sent. Its certificate comes from a CA of its own
and names localhost, 127.0.0.1 and ``hooks.webhooks.svc``, so it can be reached by URL or as
the Service webhooks/hooks.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import threading
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.support.certs import SERVER_AUTH, Issuer, issue_pair, pem

SERVICE_NAME = "hooks.webhooks.svc"


def _patch(operations: list[dict[str, Any]]) -> str:
    return base64.b64encode(json.dumps(operations).encode()).decode()


class WebhookServer:
    """Paths: /allow, /deny, /deny-plain, /mutate, /record-labels, /mutate-invalid, /warn,
    /slow, /bad-uid, /validating-patch, /cap-replicas (a Scale's replicas held to 3), any
    other path allows; and for CRD conversion /convert (a Widget's ``spec.size`` in v1 is
    ``spec.dimension`` in v2) and /convert-fail (a Failure result). ``reviews[path]`` lists
    the reviews each one received."""

    def __init__(self, workdir: Path) -> None:
        ca = Issuer.new("webhook-test-ca")
        pair = issue_pair(workdir, "tls", SERVICE_NAME, ca, usages=(SERVER_AUTH,),
                          sans=("localhost", SERVICE_NAME, "127.0.0.1"))
        self.ca_bundle = base64.b64encode(pem(ca.cert)).decode()
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(pair.cert, pair.key)
        self.reviews: dict[str, list[dict[str, Any]]] = {}
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> WebhookServer:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("webhook server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def received(self, path: str) -> list[dict[str, Any]]:
        return list(self.reviews.get(path, []))

    def clear(self) -> None:
        self.reviews.clear()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_post("/{behaviour}", self._handle)
        runner = web.AppRunner(app)
        self._loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=self.context)
        self._loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(runner.cleanup())

    async def _handle(self, request: web.Request) -> web.Response:
        behaviour = request.match_info["behaviour"]
        review = await request.json()
        review["query"] = dict(request.query)
        self.reviews.setdefault("/" + behaviour, []).append(review)
        if behaviour.startswith("convert"):
            return web.json_response(_conversion(review, behaviour))
        uid = review["request"]["uid"]
        response: dict[str, Any] = {"uid": uid, "allowed": True}
        if behaviour == "deny":
            response = {"uid": uid, "allowed": False, "status": {
                "code": 403, "reason": "Forbidden", "message": "no thanks"}}
        elif behaviour == "deny-plain":
            response = {"uid": uid, "allowed": False}
        elif behaviour == "mutate":
            labels = (review["request"]["object"].get("metadata") or {}).get("labels")
            operations = [{"op": "add", "path": "/metadata/labels", "value": {}}] \
                if labels is None else []
            operations.append({"op": "add", "path": "/metadata/labels/mutated", "value": "yes"})
            response.update(patchType="JSONPatch", patch=_patch(operations))
        elif behaviour == "record-labels":
            labels = (review["request"]["object"].get("metadata") or {}).get("labels") or {}
            operations = [{"op": "add", "path": "/metadata/annotations",
                           "value": {"labels-seen": ",".join(sorted(labels))}}]
            response.update(patchType="JSONPatch", patch=_patch(operations))
        elif behaviour == "mutate-invalid":
            response.update(patchType="JSONPatch", patch=_patch([
                {"op": "add", "path": "/metadata/name", "value": "renamed"},
                {"op": "add", "path": "/metadata/labels", "value": {"bad key!": "x"}}]))
        elif behaviour == "validating-patch":
            response.update(patchType="JSONPatch", patch=_patch([
                {"op": "add", "path": "/data", "value": {}}]))
        elif behaviour == "cap-replicas":  # a Scale's spec.replicas held to at most 3
            if review["request"]["object"]["spec"]["replicas"] > 3:
                response.update(patchType="JSONPatch", patch=_patch([
                    {"op": "replace", "path": "/spec/replicas", "value": 3}]))
        elif behaviour == "warn":
            response["warnings"] = ["configmaps are watched here"]
        elif behaviour == "slow":
            await asyncio.sleep(3)
        elif behaviour == "bad-uid":
            response["uid"] = "not-the-request"
        return web.json_response({"apiVersion": review["apiVersion"], "kind": "AdmissionReview",
                                  "response": response})


def _conversion(review: dict[str, Any], behaviour: str) -> dict[str, Any]:
    """A ConversionReview's answer: Widgets between v1 (spec.size) and v2 (spec.dimension)."""
    request = review["request"]
    response: dict[str, Any] = {"uid": request["uid"]}
    if behaviour == "convert-fail":
        response["result"] = {"status": "Failure", "message": "cannot convert widgets today"}
        return {"apiVersion": review["apiVersion"], "kind": "ConversionReview",
                "response": response}
    desired = request["desiredAPIVersion"]
    converted = []
    for obj in request["objects"]:
        out = json.loads(json.dumps(obj))
        spec = out.setdefault("spec", {})
        if desired.endswith("/v2") and "size" in spec:
            spec["dimension"] = spec.pop("size")
        elif desired.endswith("/v1") and "dimension" in spec:
            spec["size"] = spec.pop("dimension")
        out["apiVersion"] = desired
        converted.append(out)
    response.update(convertedObjects=converted, result={"status": "Success"})
    return {"apiVersion": review["apiVersion"], "kind": "ConversionReview",
            "response": response}
