"""metav1.Time and MicroTime values are read and written back as kube-apiserver does."""

from __future__ import annotations

import pytest

from gateway.schema import coordination, core  # noqa: F401 - registers the schemas
from gateway.schema.times import Precision, normalized
from gateway.schema.walk import check

LEASE = "io.k8s.api.coordination.v1.Lease"
EVENT = "io.k8s.api.core.v1.Event"


@pytest.mark.parametrize(("precision", "given", "written"), [
    # metav1.Time: UTC, to the second
    (Precision.SECONDS, "2024-05-06T07:08:09Z", "2024-05-06T07:08:09Z"),
    (Precision.SECONDS, "2024-05-06T07:08:09.999Z", "2024-05-06T07:08:09Z"),
    (Precision.SECONDS, "2024-05-06T09:08:09+02:00", "2024-05-06T07:08:09Z"),
    (Precision.SECONDS, "2024-05-06T00:30:00-01:00", "2024-05-06T01:30:00Z"),
    # metav1.MicroTime: UTC, with six digits
    (Precision.MICROSECONDS, "2024-05-06T07:08:09.123456Z", "2024-05-06T07:08:09.123456Z"),
    (Precision.MICROSECONDS, "2024-05-06T07:08:09.123456+00:00",
     "2024-05-06T07:08:09.123456Z"),
    (Precision.MICROSECONDS, "2024-05-06T09:08:09.000001+02:00",
     "2024-05-06T07:08:09.000001Z"),
])
def test_times_are_written_in_utc_at_their_precision(precision: Precision, given: str,
                                                     written: str) -> None:
    assert normalized(given, precision) == written


@pytest.mark.parametrize(("given", "precision"), [
    ("2024-05-06T07:08:09.1Z", Precision.MICROSECONDS),
    ("2024-05-06T07:08:09Z", Precision.MICROSECONDS),
    ("2024-05-06T07:08:09.1234567Z", Precision.MICROSECONDS),
    ("not-a-time", Precision.SECONDS),
    ("", Precision.SECONDS),
    ("2024-05-06 07:08:09Z", Precision.SECONDS),
    ("2024-13-06T07:08:09Z", Precision.SECONDS),
    ("2024-05-06T07:08:09", Precision.SECONDS),
])
def test_what_is_not_such_a_time_is_an_error(given: str, precision: Precision) -> None:
    with pytest.raises(ValueError, match="parsing time"):
        normalized(given, precision)


def test_check_rewrites_times_in_place_and_reports_bad_ones() -> None:
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "l", "creationTimestamp": "2024-05-06T09:08:09.5+02:00"},
             "spec": {"renewTime": "2024-05-06T09:08:09.123456+02:00",
                      "acquireTime": "2024-05-06T07:08:09.1Z"}}
    result = check(lease, {"$ref": LEASE})
    assert lease["metadata"]["creationTimestamp"] == "2024-05-06T07:08:09Z"
    assert lease["spec"]["renewTime"] == "2024-05-06T07:08:09.123456Z"
    assert result.errors == [
        'parsing time "2024-05-06T07:08:09.1Z" as "2006-01-02T15:04:05.000000Z07:00": cannot '
        'parse "2024-05-06T07:08:09.1Z" as "2006-01-02T15:04:05.000000Z07:00"']


def test_times_inside_lists_are_rewritten() -> None:
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {
        "name": "e", "managedFields": [{"manager": "m", "time": "2024-05-06T09:08:09+02:00"}]},
        "involvedObject": {}, "firstTimestamp": "2024-05-06T09:08:09+02:00"}
    assert check(event, {"$ref": EVENT}).errors == []
    assert event["metadata"]["managedFields"][0]["time"] == "2024-05-06T07:08:09Z"
    assert event["firstTimestamp"] == "2024-05-06T07:08:09Z"
