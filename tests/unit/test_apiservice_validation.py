"""APIService rules as kube-aggregator v1.32 has them: validation in its words and order, the
strategy's status handling, the table cells, and the order of groups and versions that /apis
follows."""

from __future__ import annotations

import pytest

from gateway.aggregator.apiservices import (
    APISERVICES,
    apiservice_causes,
    available_cell,
    service_cell,
    set_condition,
    status_causes,
)
from gateway.aggregator.autoregister import PRIORITIES, local_apiservices
from gateway.aggregator.registration import sorted_groups
from gateway.aggregator.routes import Route
from gateway.apimachinery.versions import version_rank

SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
             "characters, '-' or '.', and must start and end with an alphanumeric character "
             "(e.g. 'example.com', regex used for validation is "
             "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
DNS1035 = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
           "with an alphabetic character, and end with an alphanumeric character (e.g. "
           "'my-name',  or 'abc-123', regex used for validation is "
           "'[a-z]([-a-z0-9]*[a-z0-9])?')")


def apiservice(name: str = "v1.foo.io", *, meta: dict | None = None, **spec) -> dict:
    base = {"group": "foo.io", "version": "v1", "groupPriorityMinimum": 100,
            "versionPriority": 10}
    return {"metadata": {"name": name, **(meta or {})}, "spec": {**base, **spec}}


def causes(obj: dict) -> list[tuple[str, str, str]]:
    return [(c.field, c.reason, c.message) for c in apiservice_causes(obj)]


def test_a_valid_local_and_a_valid_remote_apiservice():
    assert causes(apiservice()) == []
    assert causes(apiservice("v1.", group="")) == []
    remote = {"namespace": "ns", "name": "svc", "port": 8443}
    assert causes(apiservice(service=remote, caBundle="aGVsbG8=")) == []
    assert causes(apiservice(service=remote, insecureSkipTLSVerify=True)) == []
    assert causes(apiservice(groupPriorityMinimum=20000, versionPriority=1000)) == []


@pytest.mark.parametrize("obj, expected", [
    (apiservice("v1.bar.io"), [("metadata.name", "FieldValueInvalid",
                                'Invalid value: "v1.bar.io": must be '
                                '`spec.version+"."+spec.group`: "v1.foo.io"')]),
    (apiservice("v1", group=""), [("metadata.name", "FieldValueInvalid",
                                   'Invalid value: "v1": must be '
                                   '`spec.version+"."+spec.group`: "v1."')]),
    # a bad path segment is the only name error
    (apiservice(".."), [("metadata.name", "FieldValueInvalid",
                         "Invalid value: \"..\": may not be '..'")]),
    (apiservice("v1/%x"), [
        ("metadata.name", "FieldValueInvalid", "Invalid value: \"v1/%x\": may not contain '/'"),
        ("metadata.name", "FieldValueInvalid", "Invalid value: \"v1/%x\": may not contain '%'"),
    ]),
    (apiservice("v1.foo.io", meta={"generateName": "x"}), [
        ("metadata.generateName", "FieldValueInvalid",
         'Invalid value: "x": must be `spec.version+"."+spec.group`: "v1.foo.io"'),
    ]),
    (apiservice("v2.", group="", version="v2"), [
        ("spec.group", "FieldValueRequired",
         "Required value: only v1 may have an empty group and it better be legacy kube"),
    ]),
    (apiservice("v1.Foo", group="Foo"), [
        ("spec.group", "FieldValueInvalid", f'Invalid value: "Foo": {SUBDOMAIN}'),
    ]),
    (apiservice(".foo.io", version=""), [
        ("spec.version", "FieldValueInvalid", f'Invalid value: "": {DNS1035}'),
    ]),
    (apiservice("1.foo.io", version="1"), [
        ("spec.version", "FieldValueInvalid", f'Invalid value: "1": {DNS1035}'),
    ]),
    (apiservice(groupPriorityMinimum=0, versionPriority=1001), [
        ("spec.groupPriorityMinimum", "FieldValueInvalid",
         "Invalid value: 0: must be positive and less than 20000"),
        ("spec.versionPriority", "FieldValueInvalid",
         "Invalid value: 1001: must be positive and less than 1000"),
    ]),
    (apiservice(groupPriorityMinimum=20001, versionPriority=-1), [
        ("spec.groupPriorityMinimum", "FieldValueInvalid",
         "Invalid value: 20001: must be positive and less than 20000"),
        ("spec.versionPriority", "FieldValueInvalid",
         "Invalid value: -1: must be positive and less than 1000"),
    ]),
    (apiservice(caBundle="aGVsbG8=", insecureSkipTLSVerify=True), [
        ("spec.caBundle", "FieldValueInvalid",
         'Invalid value: "5 bytes": local APIServices may not have a caBundle'),
        ("spec.insecureSkipTLSVerify", "FieldValueInvalid",
         "Invalid value: true: local APIServices may not have insecureSkipTLSVerify"),
    ]),
    (apiservice(service={"port": 65536}, caBundle="aGVsbG8=", insecureSkipTLSVerify=True), [
        ("spec.service.namespace", "FieldValueRequired", "Required value"),
        ("spec.service.name", "FieldValueRequired", "Required value"),
        ("spec.service.port", "FieldValueInvalid", "Invalid value: 65536: port is not valid: "
         "must be between 1 and 65535, inclusive"),
        ("spec.insecureSkipTLSVerify", "FieldValueInvalid",
         "Invalid value: true: may not be true if caBundle is present"),
    ]),
])
def test_validation_in_kubes_words_and_order(obj, expected):
    assert causes(obj) == expected


def test_condition_statuses_are_true_false_or_unknown():
    obj = apiservice()
    obj["status"] = {"conditions": [{"type": "Available", "status": "True"},
                                    {"type": "X", "status": "Maybe"}]}
    assert [(c.field, c.message) for c in status_causes(obj)] == [
        ("status.conditions[1].status",
         'Unsupported value: "Maybe": supported values: "True", "False", "Unknown"')]


def test_create_resets_status_and_makes_a_local_apiservice_available():
    strategy = APISERVICES.strategy
    local = apiservice()
    local["status"] = {"conditions": [{"type": "Available", "status": "False"}]}
    strategy.prepare_for_create(local)
    [condition] = local["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"],
            condition["message"]) == ("Available", "True", "Local",
                                      "Local APIServices are always available")
    assert condition["lastTransitionTime"]
    remote = apiservice(service={"namespace": "ns", "name": "svc"})
    remote["status"] = {"conditions": [{"type": "Available", "status": "True"}]}
    strategy.prepare_for_create(remote)
    assert remote["status"] == {}  # reset; kube's empty status struct is still written
    assert remote["spec"]["service"]["port"] == 443  # kube's default port


def test_a_condition_moves_its_transition_time_only_when_its_status_changes():
    obj: dict = {}
    set_condition(obj, {"type": "Available", "status": "False", "reason": "A", "message": "a",
                        "lastTransitionTime": "2024-01-01T00:00:00Z"})
    set_condition(obj, {"type": "Available", "status": "False", "reason": "B", "message": "b",
                        "lastTransitionTime": "2024-01-02T00:00:00Z"})
    assert obj["status"]["conditions"] == [
        {"type": "Available", "status": "False", "reason": "B", "message": "b",
         "lastTransitionTime": "2024-01-01T00:00:00Z"}]
    set_condition(obj, {"type": "Available", "status": "True", "reason": "C", "message": "c",
                        "lastTransitionTime": "2024-01-03T00:00:00Z"})
    assert obj["status"]["conditions"][0]["lastTransitionTime"] == "2024-01-03T00:00:00Z"


@pytest.mark.parametrize("conditions, shown", [
    ([], "Unknown"),
    ([{"type": "Other", "status": "True"}], "Unknown"),
    ([{"type": "Available", "status": "True", "reason": "Passed"}], "True"),
    ([{"type": "Available", "status": "False", "reason": "MissingEndpoints"}],
     "False (MissingEndpoints)"),
    ([{"type": "Available", "status": "Unknown", "reason": "ServiceAccessError"}],
     "Unknown (ServiceAccessError)"),
    ([{"type": "Available", "status": "False"}], "False"),
])
def test_available_column(conditions, shown):
    assert available_cell({"status": {"conditions": conditions}}) == shown


def test_service_column():
    assert service_cell(apiservice()) == "Local"
    assert service_cell(apiservice(service={"namespace": "ns", "name": "svc"})) == "ns/svc"


@pytest.mark.parametrize("higher, lower", [
    ("v1", "v2beta1"), ("v2", "v1"), ("v1beta2", "v1beta1"), ("v2beta1", "v1beta2"),
    ("v1beta1", "v1alpha1"), ("v1alpha2", "v1alpha1"), ("v1alpha1", "foo"),
    ("abc", "abd"), ("v1", "v1x"),
])
def test_kube_aware_version_order(higher, lower):
    assert version_rank(higher) < version_rank(lower)


def route(group: str, version: str, group_priority: int, version_priority: int,
          remote: bool = False) -> Route:
    service = {"namespace": "ns", "name": "svc"} if remote else None
    return Route.from_apiservice({
        "metadata": {"name": f"{version}.{group}"},
        "spec": {"group": group, "version": version, "service": service,
                 "groupPriorityMinimum": group_priority, "versionPriority": version_priority}})


def test_groups_by_priority_then_name_versions_by_priority_then_kube_order():
    groups = sorted_groups([
        route("b.io", "v1", 100, 10), route("a.io", "v1", 100, 10),
        route("z.io", "v1beta1", 50, 10, remote=True), route("z.io", "v1", 50, 10),
        route("z.io", "v2alpha1", 500, 20, remote=True), route("", "v1", 18000, 1),
    ])
    # z.io is placed by its highest-priority APIService; the core group is left out
    assert [(g.name, g.versions) for g in groups] == [
        ("z.io", ("v2alpha1", "v1", "v1beta1")), ("a.io", ("v1",)), ("b.io", ("v1",))]
    assert groups[0].remote == frozenset({"v2alpha1", "v1beta1"})


def test_local_apiservices_only_for_group_versions_in_kubes_table():
    wanted = local_apiservices([("", "v1"), ("coordination.k8s.io", "v1"),
                                ("apiregistration.k8s.io", "v1"), ("new.example.com", "v1")])
    assert [w["metadata"]["name"] for w in wanted] == ["v1.", "v1.coordination.k8s.io"]
    assert wanted[0]["metadata"]["labels"] == {
        "kube-aggregator.kubernetes.io/automanaged": "onstart"}
    assert wanted[1]["spec"] == {"group": "coordination.k8s.io", "version": "v1",
                                 "groupPriorityMinimum": 16500, "versionPriority": 15}
    assert PRIORITIES[("autoscaling", "v2")] == (17500, 30)
    assert all(not causes({**w, "spec": w["spec"]}) for w in local_apiservices(PRIORITIES))
