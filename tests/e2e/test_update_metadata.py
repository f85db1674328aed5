"""What an update may and may not do to ObjectMeta, as kube-apiserver decides it: a uid in a PUT
body is a precondition (409), a patch that changes the uid, or sets a deletion time or grace
period, is refused as immutable (422), and the server's own fields (generation,
creationTimestamp, resourceVersion) are kept whatever the body says."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.support.api import API, CM, configmap, expect_status

pytestmark = pytest.mark.slow
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


def made(api: API, ns: str, name: str, **extra: Any) -> dict[str, Any]:
    body = configmap(name, k="v")
    body["metadata"].update(extra)
    code, obj = api.post(CM.format(ns=ns), body)
    assert code == 201, obj
    return obj


def test_a_uid_in_a_put_body_is_a_precondition(api: API, ns: str) -> None:
    obj = made(api, ns, "cm")
    stored_uid, other = obj["metadata"]["uid"], str(uuid.uuid4())
    obj["metadata"]["uid"] = other
    obj["data"] = {"k": "changed"}
    expect_status(api.put(f"{CM.format(ns=ns)}/cm", obj), 409, "Conflict",
                  message=f'Operation cannot be fulfilled on configmaps "cm": Precondition '
                          f'failed: UID in precondition: {other}, UID in object meta: '
                          f'{stored_uid}')
    code, current = api.get(f"{CM.format(ns=ns)}/cm")
    assert code == 200 and current["data"] == {"k": "v"}, current
    # the precondition is checked before the resourceVersion
    obj["metadata"]["resourceVersion"] = "1"
    assert api.put(f"{CM.format(ns=ns)}/cm", obj)[0] == 409
    # the right uid, or none at all, is an ordinary update
    obj["metadata"]["uid"] = stored_uid
    obj["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    code, updated = api.put(f"{CM.format(ns=ns)}/cm", obj)
    assert code == 200 and updated["data"] == {"k": "changed"}, updated
    del updated["metadata"]["uid"]
    code, again = api.put(f"{CM.format(ns=ns)}/cm", updated)
    assert code == 200 and again["metadata"]["uid"] == stored_uid, again


@pytest.mark.parametrize("content_type,patch", [
    (MERGE, lambda uid: {"metadata": {"uid": uid}}),
    (STRATEGIC, lambda uid: {"metadata": {"uid": uid}}),
    (JSON_PATCH, lambda uid: [{"op": "replace", "path": "/metadata/uid", "value": uid}]),
])
def test_a_patch_cannot_change_the_uid(api: API, ns: str, content_type: str, patch) -> None:
    obj = made(api, ns, "cm")
    other = str(uuid.uuid4())
    expect_status(api.patch(f"{CM.format(ns=ns)}/cm", patch(other), content_type), 422,
                  "Invalid",
                  message=f'ConfigMap "cm" is invalid: metadata.uid: Invalid value: "{other}": '
                          f'field is immutable',
                  causes=[{"reason": "FieldValueInvalid",
                           "message": f'Invalid value: "{other}": field is immutable',
                           "field": "metadata.uid"}])
    code, current = api.get(f"{CM.format(ns=ns)}/cm")
    assert code == 200
    assert current["metadata"]["uid"] == obj["metadata"]["uid"]
    assert current["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]


def test_a_patch_cannot_set_a_deletion_time_or_grace_period(api: API, ns: str) -> None:
    made(api, ns, "cm")
    expect_status(api.patch(f"{CM.format(ns=ns)}/cm",
                            {"metadata": {"deletionTimestamp": "2030-01-02T03:04:05Z"}}, MERGE),
                  422, "Invalid",
                  message='ConfigMap "cm" is invalid: metadata.deletionTimestamp: Invalid value: '
                          '2030-01-02 03:04:05 +0000 UTC: field is immutable')
    expect_status(api.patch(f"{CM.format(ns=ns)}/cm",
                            {"metadata": {"deletionGracePeriodSeconds": 30}}, MERGE),
                  422, "Invalid",
                  message='ConfigMap "cm" is invalid: metadata.deletionGracePeriodSeconds: '
                          'Invalid value: 30: field is immutable')


def test_server_owned_fields_are_kept(api: API, ns: str) -> None:
    obj = made(api, ns, "cm")
    meta = obj["metadata"]
    code, patched = api.patch(f"{CM.format(ns=ns)}/cm", {"metadata": {
        "creationTimestamp": "2001-01-01T00:00:00Z", "generation": 42,
        "labels": {"a": "b"}}}, MERGE)
    assert code == 200, patched
    assert patched["metadata"]["creationTimestamp"] == meta["creationTimestamp"]
    assert patched["metadata"].get("generation") == meta.get("generation")
    assert patched["metadata"]["labels"] == {"a": "b"}


def test_name_and_namespace_cannot_change(api: API, ns: str) -> None:
    made(api, ns, "cm")
    expect_status(api.patch(f"{CM.format(ns=ns)}/cm", {"metadata": {"name": "other"}}, MERGE),
                  400, "BadRequest",
                  message="the name of the object (other) does not match the name on the URL "
                          "(cm)")
    expect_status(api.patch(f"{CM.format(ns=ns)}/cm", {"metadata": {"namespace": "default"}},
                            MERGE), 400, "BadRequest",
                  message=f"the namespace of the object (default) does not match the "
                          f"namespace on the request ({ns})")


def test_no_new_finalizer_while_deleting(api: API, ns: str) -> None:
    made(api, ns, "held", finalizers=["example.com/hold"])
    code, _ = api.delete(f"{CM.format(ns=ns)}/held")
    assert code == 200
    expect_status(api.patch(f"{CM.format(ns=ns)}/held", {"metadata": {
        "finalizers": ["example.com/hold", "example.com/b", "example.com/a"]}}, MERGE),
                  422, "Invalid",
                  message='ConfigMap "held" is invalid: metadata.finalizers: Forbidden: no new '
                          'finalizers can be added if the object is being deleted, found new '
                          'finalizers []string{"example.com/a", "example.com/b"}')
    code, _ = api.patch(f"{CM.format(ns=ns)}/held", {"metadata": {"finalizers": None}}, MERGE)
    assert code == 200
    assert api.get(f"{CM.format(ns=ns)}/held")[0] == 404
