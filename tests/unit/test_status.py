"""metav1.Status bodies: which errors carry a details object, and what is left out of it."""

from __future__ import annotations

from gateway.admission.webhooks import denied
from gateway.apimachinery import status


def test_a_webhook_denial_carries_no_details_it_did_not_send() -> None:
    # webhookerrors.ToStatusErr keeps the webhook's own Status: no details unless it sent some
    body = denied("deny.webhooks.test", {"code": 403, "reason": "Forbidden",
                                         "message": "no thanks"}).to_status()
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": 'admission webhook "deny.webhooks.test" denied the request: '
                               "no thanks", "reason": "Forbidden", "code": 403}


def test_errors_that_name_a_resource_carry_details_even_empty() -> None:
    # apierrors.NewForbidden of a non-resource request: a GroupResource of "" and no name
    body = status.StatusError(403, "Forbidden", "forbidden: ...", name="", group="",
                              kind="").to_status()
    assert body["details"] == {}
    assert status.not_found().to_status()["details"] == {}
    assert "details" not in status.bad_request("x").to_status()


def test_timeouts_and_internal_errors() -> None:
    assert status.timeout("deadline").to_status()["details"] == {}
    body = status.internal_error("boom").to_status()
    assert body["details"] == {"causes": [{"message": "boom"}]}  # an empty reason is left out
    body = status.unknown_error("etcdserver: mvcc: database space exceeded").to_status()
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "etcdserver: mvcc: database space exceeded", "code": 500}
