"""A bug in a handler: a 500 Status (no traceback), logged, audited as Panic; the server goes on.

The filters are the gateway's own, composed as the handler chain composes them, on a real
aiohttp server; only the innermost handler is the test's, with a bug on one path.
"""

from __future__ import annotations

import json

import structlog
from aiohttp import web

from gateway.auth.audit.backend import AuditLog
from gateway.auth.audit.policy import Policy
from gateway.server.filters.audit import with_audit
from gateway.server.filters.recovery import with_panic_recovery
from gateway.server.filters.requestid import with_request_id
from gateway.server.filters.requestinfo import with_request_info

BOOM = "/api/v1/namespaces/default/configmaps/boom"
FINE = "/api/v1/namespaces/default/configmaps/fine"


async def buggy(request: web.BaseRequest) -> web.StreamResponse:
    if request.path == BOOM:
        return {}["missing"]  # a bug: KeyError
    return web.json_response({"kind": "ConfigMap", "apiVersion": "v1"})


async def test_a_handler_bug_is_a_500_status_and_the_server_stays_up(
        aiohttp_raw_server, aiohttp_client, tmp_path) -> None:
    audit_path = tmp_path / "audit.log"
    chain = with_request_id(with_panic_recovery(with_request_info(
        with_audit(buggy, Policy(), AuditLog(str(audit_path))))))
    client = await aiohttp_client(await aiohttp_raw_server(chain))
    with structlog.testing.capture_logs() as logs:
        response = await client.get(BOOM, headers={"Audit-ID": "boom-request"})
        text = await response.text()
    assert response.status == 500
    body = json.loads(text)
    assert (body["kind"], body["status"], body["reason"], body["code"]) == (
        "Status", "Failure", "InternalError", 500)
    assert body["message"] == ("Internal error occurred: an error on the server has prevented "
                               "the request from succeeding")
    assert "Traceback" not in text and "KeyError" not in text
    panics = [e for e in logs if e["event"] == "panic while serving a request"]
    assert len(panics) == 1 and panics[0]["path"] == BOOM and panics[0]["exc_info"]
    # the server goes on
    again = await client.get(FINE)
    assert again.status == 200
    assert (await again.json())["kind"] == "ConfigMap"
    events = [json.loads(line) for line in audit_path.read_text().splitlines()]
    boom = [e for e in events if e["auditID"] == "boom-request"]
    assert [e["stage"] for e in boom] == ["RequestReceived", "Panic"]
    assert boom[-1]["responseStatus"]["code"] == 500
    assert any(e["stage"] == "ResponseComplete" and e["objectRef"].get("name") == "fine"
               for e in events)
