"""Three real, published CRDs (tests/data/crds/, see its NOTICE.md) served as kube-apiserver
serves them: Gateway API's HTTPRoute (many CEL rules, defaults, two versions),
prometheus-operator's ServiceMonitor (patterns, int-or-string, a set list) and cert-manager's
Certificate (the status subresource, printer columns with JSONPath filters).

Each CRD is accepted by ``kubectl apply --server-side`` (the module's gateway) and by plain
``kubectl apply`` (a fresh gateway), becomes Established, and its instances behave as on
Kubernetes: a valid instance from the project's documentation is accepted with its schema's
defaults applied, and instances that break the schema or its x-kubernetes-validations rules
are refused with 422 and the field paths and messages kube gives (rule messages read from the
CRD files themselves)."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.gateway import GatewayProcess

pytestmark = pytest.mark.slow

DATA = Path(__file__).resolve().parent.parent / "data" / "crds"
FILES = {
    "httproutes.gateway.networking.k8s.io": DATA / "gateway.networking.k8s.io_httproutes.yaml",
    "servicemonitors.monitoring.coreos.com":
        DATA / "monitoring.coreos.com_servicemonitors.yaml",
    "certificates.cert-manager.io": DATA / "cert-manager.io_certificates.yaml",
}
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
HTTPROUTES = "/apis/gateway.networking.k8s.io/v1/namespaces/{ns}/httproutes"
SERVICEMONITORS = "/apis/monitoring.coreos.com/v1/namespaces/{ns}/servicemonitors"
CERTIFICATES = "/apis/cert-manager.io/v1/namespaces/{ns}/certificates"
#: The note kube adds when a blocking schema error kept the CEL rules from running
#: (customResourceStrategy's hasBlockingErr: a field.Invalid with a nil path and value).
UNCHECKED = ("FieldValueInvalid", "<nil>",
             'Invalid value: "null": some validation rules were not checked because the '
             "object was invalid; correct the existing errors to complete validation")


def load(name: str) -> dict[str, Any]:
    return yaml.safe_load(FILES[name].read_text())


def rule_messages(crd_name: str, path: str, version: str = "v1") -> list[str]:
    """The messages of the x-kubernetes-validations rules at ``path`` of a CRD's schema
    (``spec.rules[].matches[].path``: ``[]`` steps into an array's items)."""
    crd = load(crd_name)
    [served] = [v for v in crd["spec"]["versions"] if v["name"] == version]
    schema = served["schema"]["openAPIV3Schema"]
    for step in path.split("."):
        name, items = (step[:-2], True) if step.endswith("[]") else (step, False)
        schema = schema["properties"][name]
        if items:
            schema = schema["items"]
    return [rule["message"] for rule in schema.get("x-kubernetes-validations", [])]


def rule_message(crd_name: str, path: str, starts: str) -> str:
    """The one rule message at ``path`` that starts with ``starts``."""
    [message] = [m for m in rule_messages(crd_name, path) if m.startswith(starts)]
    return message


def cel_cause(field: str, message: str, kind: str = "object") -> tuple[str, str, str]:
    """A failed x-kubernetes-validations rule as kube reports it: field.Invalid with the
    schema's type as the value."""
    return ("FieldValueInvalid", field, f'Invalid value: "{kind}": {message}')


def post(gw: GatewayProcess, path: str, obj: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    code, body = gw.request("POST", path, obj)
    return code, json.loads(body)


def causes(status: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(c.get("reason", ""), c.get("field", ""), c.get("message", ""))
            for c in status.get("details", {}).get("causes", [])]


def refused(gw: GatewayProcess, path: str, obj: dict[str, Any], kind: str, group: str,
            expected: list[tuple[str, str, str]]) -> dict[str, Any]:
    """POST ``obj``; assert kube's 422 Invalid with exactly the ``expected`` causes."""
    code, status = post(gw, path, obj)
    assert code == 422, status
    assert (status["kind"], status["status"], status["reason"]) == ("Status", "Failure",
                                                                   "Invalid")
    name = obj["metadata"]["name"]
    assert status["details"]["name"] == name and status["details"]["group"] == group
    assert status["details"]["kind"] == kind
    assert causes(status) == expected, status
    parts = [f"{field}: {message}" if field else message for _, field, message in expected]
    summary = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    assert status["message"] == f'{kind}.{group} "{name}" is invalid: {summary}'
    return status


def conditions(crd: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in crd["status"]["conditions"]}


def table(out: str) -> list[list[str]]:
    """kubectl's table output, cut at the header's column starts."""
    lines = [line for line in out.splitlines() if line.strip()]
    starts = [m.start() for m in re.finditer(r"(?<!\S)\S", lines[0])]
    bounds = list(zip(starts, [*starts[1:], None], strict=True))
    return [[line[a:b].strip() for a, b in bounds] for line in lines]


@pytest.fixture(scope="module")
def server_side(gateway: GatewayProcess) -> str:
    """The three CRDs applied with ``kubectl apply --server-side`` and Established; the
    command's output."""
    out = gateway.kubectl("apply", "--server-side", *(f"-f={f}" for f in FILES.values()))
    gateway.kubectl("wait", "--for=condition=established", "--timeout=30s",
                    *(f"crd/{name}" for name in FILES))
    return out.stdout


# -- the CRDs ----------------------------------------------------------------------------------


def test_server_side_apply_accepts_and_establishes_the_real_crds(gateway, server_side):
    assert sorted(server_side.splitlines()) == sorted(
        f"customresourcedefinition.apiextensions.k8s.io/{name} serverside-applied"
        for name in FILES)
    for name in FILES:
        code, body = gateway.request("GET", f"{CRD_PATH}/{name}")
        assert code == 200, body
        crd, source = json.loads(body), load(name)
        assert conditions(crd) == {"NamesAccepted": ("True", "NoConflicts"),
                                   "Established": ("True", "InitialNamesAccepted")}, name
        names = source["spec"]["names"]
        assert crd["status"]["acceptedNames"] == {**names}, name
        assert crd["status"]["storedVersions"] == ["v1"]
        # the spec is kept as written, with the one default a v1 CRD gets
        assert crd["spec"] == {**source["spec"], "conversion": {"strategy": "None"}}, name
        assert crd["metadata"]["annotations"] == source["metadata"]["annotations"]
        applied = [m for m in crd["metadata"]["managedFields"] if m["operation"] == "Apply"]
        assert [m["manager"] for m in applied] == ["kubectl"]
    # applied again, nothing changes
    again = gateway.kubectl("apply", "--server-side", *(f"-f={f}" for f in FILES.values()))
    assert sorted(again.stdout.splitlines()) == sorted(
        f"customresourcedefinition.apiextensions.k8s.io/{name} serverside-applied"
        for name in FILES)


def test_plain_kubectl_apply_accepts_and_establishes_the_real_crds(tmp_path):
    with GatewayProcess(tmp_path / "plain") as gw:
        out = gw.kubectl("apply", *(f"-f={f}" for f in FILES.values())).stdout
        assert sorted(out.splitlines()) == sorted(
            f"customresourcedefinition.apiextensions.k8s.io/{name} created" for name in FILES)
        out = gw.kubectl("wait", "--for=condition=established", "--timeout=30s",
                         *(f"crd/{name}" for name in FILES)).stdout
        assert sorted(out.splitlines()) == sorted(
            f"customresourcedefinition.apiextensions.k8s.io/{name} condition met"
            for name in FILES)
        for name in FILES:
            code, body = gw.request("GET", f"{CRD_PATH}/{name}")
            assert code == 200, body
            crd = json.loads(body)
            assert crd["spec"] == {**load(name)["spec"], "conversion": {"strategy": "None"}}
            last = json.loads(crd["metadata"]["annotations"][
                "kubectl.kubernetes.io/last-applied-configuration"])
            assert last["spec"] == load(name)["spec"]
        versions = {name: json.loads(gw.request("GET", f"{CRD_PATH}/{name}")[1])["metadata"][
            "resourceVersion"] for name in FILES}
        again = gw.kubectl("apply", *(f"-f={f}" for f in FILES.values())).stdout
        # the HTTPRoute manifest carries creationTimestamp: null and an empty status, which
        # differ from the live object: kubectl sends that patch ("configured"), and the
        # server finds nothing to change
        assert sorted(again.splitlines()) == sorted(
            f"customresourcedefinition.apiextensions.k8s.io/{name} "
            f"{'configured' if name.startswith('httproutes') else 'unchanged'}"
            for name in FILES)
        assert versions == {name: json.loads(gw.request("GET", f"{CRD_PATH}/{name}")[1])[
            "metadata"]["resourceVersion"] for name in FILES}
        # served at once: one instance each
        gw.kubectl("create", "-f", "-", input=yaml.safe_dump_all(
            [httproute("r"), servicemonitor("s"), certificate("c")]))
        out = gw.kubectl("get", "httproutes,servicemonitors,certificates", "-o", "name").stdout
        assert out.split() == ["httproute.gateway.networking.k8s.io/r",
                               "servicemonitor.monitoring.coreos.com/s",
                               "certificate.cert-manager.io/c"]


def test_kubectl_sees_the_real_crds_names_and_categories(gateway, server_side):
    out = gateway.kubectl("api-resources", "-o", "wide").stdout
    rows = {row[0]: row for row in table(out)[1:]}
    assert rows["httproutes"][1:5] == ["", "gateway.networking.k8s.io/v1", "true",
                                       "HTTPRoute"]
    assert rows["httproutes"][-1] == "gateway-api"
    assert rows["servicemonitors"][1:5] == ["smon", "monitoring.coreos.com/v1", "true",
                                            "ServiceMonitor"]
    assert rows["servicemonitors"][-1] == "prometheus-operator"
    assert rows["certificates"][1:5] == ["cert,certs", "cert-manager.io/v1", "true",
                                         "Certificate"]
    assert rows["certificates"][-1] == "cert-manager"
    ns = f"n-{uuid.uuid4().hex[:6]}"
    gateway.kubectl("create", "namespace", ns)
    gateway.kubectl("create", "-n", ns, "-f", "-", input=yaml.safe_dump_all(
        [httproute("r"), servicemonitor("s"), certificate("c")]))
    for resource, expected in (("gateway-api", "httproute.gateway.networking.k8s.io/r"),
                               ("prometheus-operator", "servicemonitor.monitoring.coreos.com/s"),
                               ("cert-manager", "certificate.cert-manager.io/c"),
                               ("smon", "servicemonitor.monitoring.coreos.com/s"),
                               ("cert", "certificate.cert-manager.io/c"),
                               ("certs", "certificate.cert-manager.io/c")):
        assert gateway.kubectl("get", resource, "-n", ns, "-o", "name").stdout == \
            expected + "\n", resource


# -- HTTPRoute ---------------------------------------------------------------------------------

HTTPROUTE = "httproutes.gateway.networking.k8s.io"
GW_GROUP = "gateway.networking.k8s.io"


def httproute(name: str, **spec: Any) -> dict[str, Any]:
    """A minimal valid HTTPRoute; ``spec`` replaces parts of it."""
    return {"apiVersion": f"{GW_GROUP}/v1", "kind": "HTTPRoute", "metadata": {"name": name},
            "spec": {"parentRefs": [{"name": "example-gateway"}],
                     "rules": [{"backendRefs": [{"name": "svc", "port": 8080}]}], **spec}}


def test_a_documented_httproute_is_accepted_with_its_defaults(gateway, server_side, ns):
    # "HTTP routing" in the Gateway API documentation (gateway-api.sigs.k8s.io)
    documented = yaml.safe_load("""
        apiVersion: gateway.networking.k8s.io/v1
        kind: HTTPRoute
        metadata:
          name: bar-route
        spec:
          parentRefs:
          - name: example-gateway
          hostnames:
          - "bar.example.com"
          rules:
          - matches:
            - headers:
              - type: Exact
                name: env
                value: canary
            backendRefs:
            - name: bar-svc-canary-v1
              port: 8080
          - backendRefs:
            - name: bar-svc
              port: 8080
    """)
    code, made = post(gateway, HTTPROUTES.format(ns=ns), documented)
    assert code == 201, made
    defaulted_backend = {"group": "", "kind": "Service", "weight": 1}
    prefix_all = {"path": {"type": "PathPrefix", "value": "/"}}
    assert made["spec"] == {
        "parentRefs": [{"name": "example-gateway", "group": GW_GROUP, "kind": "Gateway"}],
        "hostnames": ["bar.example.com"],
        "rules": [
            {"matches": [{"headers": [{"type": "Exact", "name": "env", "value": "canary"}],
                          **prefix_all}],
             "backendRefs": [{"name": "bar-svc-canary-v1", "port": 8080,
                              **defaulted_backend}]},
            {"matches": [prefix_all],
             "backendRefs": [{"name": "bar-svc", "port": 8080, **defaulted_backend}]},
        ],
    }
    assert "status" not in made

    # no rules at all: the default rule matches every path
    code, bare = post(gateway, HTTPROUTES.format(ns=ns), {
        "apiVersion": f"{GW_GROUP}/v1", "kind": "HTTPRoute", "metadata": {"name": "bare"},
        "spec": {"parentRefs": [{"name": "example-gateway", "sectionName": "http"}]}})
    assert code == 201, bare
    assert bare["spec"]["rules"] == [{"matches": [prefix_all]}]

    # a redirect (adapted from "HTTP redirects and rewrites"): statusCode defaults to 302,
    # a header match's type to Exact
    code, redirect = post(gateway, HTTPROUTES.format(ns=ns), {
        "apiVersion": f"{GW_GROUP}/v1", "kind": "HTTPRoute",
        "metadata": {"name": "http-filter-redirect"},
        "spec": {"parentRefs": [{"name": "redirect-gateway", "sectionName": "http"}],
                 "hostnames": ["redirect.example"],
                 "rules": [{"matches": [{"headers": [{"name": "x", "value": "y"}]}],
                            "filters": [{"type": "RequestRedirect",
                                         "requestRedirect": {"scheme": "https"}}]}]}})
    assert code == 201, redirect
    [rule] = redirect["spec"]["rules"]
    assert rule["filters"][0]["requestRedirect"] == {"scheme": "https", "statusCode": 302}
    assert rule["matches"][0]["headers"] == [{"name": "x", "value": "y", "type": "Exact"}]

    # the other served version reads the same object
    code, body = gateway.request(
        "GET", f"/apis/{GW_GROUP}/v1beta1/namespaces/{ns}/httproutes/bar-route")
    beta = json.loads(body)
    assert code == 200 and beta["apiVersion"] == f"{GW_GROUP}/v1beta1"
    assert beta["spec"] == made["spec"]


def test_kubectl_get_httproutes_shows_hostnames_and_age(gateway, server_side, ns):
    """Hostnames is a string column over a list: kube prints it as JSON (client-go
    jsonpath); Age is a date column: how long ago."""
    post(gateway, HTTPROUTES.format(ns=ns), httproute(
        "two-hosts", hostnames=["foo.example.com", "bar.example.com"]))
    rows = table(gateway.kubectl("get", "httproutes", "-n", ns).stdout)
    assert rows[0] == ["NAME", "HOSTNAMES", "AGE"]
    assert rows[1][:2] == ["two-hosts", '["foo.example.com","bar.example.com"]']
    assert re.fullmatch(r"\d+s", rows[1][2]), rows


HTTPROUTE_PATH_RULES = "spec.rules[].matches[].path"


@pytest.mark.parametrize(("case", "change", "expected"), [
    ("relative-path",
     lambda s: s["rules"][0].update(matches=[{"path": {"type": "PathPrefix", "value": "foo"}}]),
     [cel_cause("spec.rules[0].matches[0].path", rule_message(
         HTTPROUTE, HTTPROUTE_PATH_RULES, "value must be an absolute path"))]),
    ("double-slash",
     lambda s: s["rules"][0].update(matches=[{"path": {"type": "Exact", "value": "/a//b"}}]),
     [cel_cause("spec.rules[0].matches[0].path", rule_message(
         HTTPROUTE, HTTPROUTE_PATH_RULES, "must not contain '//'"))]),
    ("bad-path-characters",
     lambda s: s["rules"][0].update(matches=[{"path": {"type": "PathPrefix", "value": "/a b"}}]),
     [cel_cause("spec.rules[0].matches[0].path", rule_message(
         HTTPROUTE, HTTPROUTE_PATH_RULES, "must only contain valid characters"))]),
    ("same-parent-twice",
     lambda s: s.update(parentRefs=[{"name": "gw"}, {"name": "gw"}]),
     [cel_cause("spec.parentRefs", rule_message(
         HTTPROUTE, "spec.parentRefs", "sectionName must be unique"), kind="array")]),
    ("same-parent-one-section",
     lambda s: s.update(parentRefs=[{"name": "gw"}, {"name": "gw", "sectionName": "http"}]),
     [cel_cause("spec.parentRefs", rule_message(
         HTTPROUTE, "spec.parentRefs", "sectionName must be specified"), kind="array")]),
    ("service-without-port",
     lambda s: s["rules"][0]["backendRefs"][0].pop("port"),
     [cel_cause("spec.rules[0].backendRefs[0]", rule_message(
         HTTPROUTE, "spec.rules[].backendRefs[]", "Must have port for Service reference"))]),
    ("redirect-with-backends",
     lambda s: s["rules"][0].update(filters=[{"type": "RequestRedirect",
                                               "requestRedirect": {"scheme": "https"}}]),
     [cel_cause("spec.rules[0]", rule_message(
         HTTPROUTE, "spec.rules[]", "RequestRedirect filter must not be used together"))]),
    ("filter-without-its-config",
     lambda s: s["rules"][0].update(filters=[{"type": "RequestHeaderModifier"}]),
     [cel_cause("spec.rules[0].filters[0]", rule_message(
         HTTPROUTE, "spec.rules[].filters[]",
         "filter.requestHeaderModifier must be specified"))]),
    ("repeated-filter",
     lambda s: s["rules"][0].update(filters=[
         {"type": "RequestHeaderModifier", "requestHeaderModifier": {"remove": ["a"]}},
         {"type": "RequestHeaderModifier", "requestHeaderModifier": {"remove": ["b"]}}]),
     [cel_cause("spec.rules[0].filters", rule_message(
         HTTPROUTE, "spec.rules[].filters", "RequestHeaderModifier filter cannot be repeated"),
         kind="array")]),
    ("rewrite-prefix-with-exact-match",
     lambda s: s["rules"][0].update(
         matches=[{"path": {"type": "Exact", "value": "/x"}}],
         filters=[{"type": "URLRewrite", "urlRewrite": {
             "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/y"}}}]),
     [cel_cause("spec.rules[0]", rule_message(
         HTTPROUTE, "spec.rules[]", "When using URLRewrite filter with path.replacePrefixMatch"))]),
    ("redirect-full-path-missing",
     lambda s: s.update(rules=[{"filters": [{"type": "RequestRedirect", "requestRedirect": {
         "path": {"type": "ReplaceFullPath"}}}]}]),
     [cel_cause("spec.rules[0].filters[0].requestRedirect.path", rule_message(
         HTTPROUTE, "spec.rules[].filters[].requestRedirect.path",
         "replaceFullPath must be specified"))]),
    ("backend-timeout-over-request-timeout",
     lambda s: s["rules"][0].update(timeouts={"request": "1s", "backendRequest": "2s"}),
     [cel_cause("spec.rules[0].timeouts", rule_message(
         HTTPROUTE, "spec.rules[].timeouts", "backendRequest timeout cannot be longer"))]),
    ("two-rule-failures",
     lambda s: s["rules"][0].update(filters=[{"type": "URLRewrite", "urlRewrite": {
         "path": {"type": "ReplaceFullPath", "replacePrefixMatch": "/y"}}}]),
     [cel_cause("spec.rules[0].filters[0].urlRewrite.path", rule_message(
         HTTPROUTE, "spec.rules[].filters[].urlRewrite.path",
         "replaceFullPath must be specified")),
      cel_cause("spec.rules[0].filters[0].urlRewrite.path", rule_message(
          HTTPROUTE, "spec.rules[].filters[].urlRewrite.path",
          "type must be 'ReplacePrefixMatch'"))]),
])
def test_httproute_cel_rules_refuse_with_their_messages(gateway, server_side, ns, case,
                                                        change, expected):
    route = httproute(case)
    change(route["spec"])
    refused(gateway, HTTPROUTES.format(ns=ns), route, "HTTPRoute", GW_GROUP, expected)


HOSTNAME_PATTERN = r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


@pytest.mark.parametrize(("case", "change", "expected"), [
    ("hostname-pattern",
     lambda s: s.update(hostnames=["Foo_Bar"]),
     [("FieldValueInvalid", "spec.hostnames[0]",
       f'Invalid value: "Foo_Bar": spec.hostnames[0] in body should match '
       f"'{HOSTNAME_PATTERN}'")]),
    ("port-out-of-range",
     lambda s: s["rules"][0]["backendRefs"][0].update(port=70000),
     [("FieldValueInvalid", "spec.rules[0].backendRefs[0].port",
       "Invalid value: 70000: spec.rules[0].backendRefs[0].port in body should be less than "
       "or equal to 65535")]),
    ("duplicate-header-match",
     lambda s: s["rules"][0].update(matches=[{"headers": [{"name": "a", "value": "1"},
                                                          {"name": "a", "value": "2"}]}]),
     [("FieldValueDuplicate", "spec.rules[0].matches[0].headers[1]",
       'Duplicate value: map[string]interface {}{"name":"a"}')]),
    # blocking errors (Required, NotSupported, TooMany, TypeInvalid): the rules are not run
    ("parent-without-name",
     lambda s: s["parentRefs"][0].pop("name"),
     [("FieldValueRequired", "spec.parentRefs[0].name", "Required value"), UNCHECKED]),
    ("unknown-method",
     lambda s: s["rules"][0].update(matches=[{"method": "FETCH"}]),
     [("FieldValueNotSupported", "spec.rules[0].matches[0].method",
       'Unsupported value: "FETCH": supported values: "GET", "HEAD", "POST", "PUT", '
       '"DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"'), UNCHECKED]),
    ("too-many-hostnames",
     lambda s: s.update(hostnames=[f"h{i}.example.com" for i in range(17)]),
     [("FieldValueTooMany", "spec.hostnames", "Too many: 17: must have at most 16 items"),
      UNCHECKED]),
    ("weight-of-the-wrong-type",
     lambda s: s["rules"][0]["backendRefs"][0].update(weight="heavy"),
     [("FieldValueTypeInvalid", "spec.rules[0].backendRefs[0].weight",
       'Invalid value: "string": spec.rules[0].backendRefs[0].weight in body must be of type '
       'integer: "string"'), UNCHECKED]),
])
def test_httproute_schema_refuses_with_kube_messages(gateway, server_side, ns, case, change,
                                                     expected):
    route = httproute(case)
    change(route["spec"])
    refused(gateway, HTTPROUTES.format(ns=ns), route, "HTTPRoute", GW_GROUP, expected)


def test_httproute_parent_rules_tell_parents_apart_by_namespace(gateway, server_side, ns):
    """The parentRefs rules read the field "namespace" (a CEL keyword: __namespace__ in the
    rule); parents in different namespaces are different parents."""
    path = HTTPROUTES.format(ns=ns)
    code, made = post(gateway, path, httproute("two-namespaces", parentRefs=[
        {"name": "gw", "namespace": "a"}, {"name": "gw", "namespace": "b"}]))
    assert code == 201, made
    code, made = post(gateway, path, httproute("two-sections", parentRefs=[
        {"name": "gw", "sectionName": "http"}, {"name": "gw", "sectionName": "https"}]))
    assert code == 201, made
    route = httproute("same-namespace", parentRefs=[{"name": "gw", "namespace": "a"},
                                                    {"name": "gw", "namespace": "a"}])
    refused(gateway, path, route, "HTTPRoute", GW_GROUP, [cel_cause(
        "spec.parentRefs", rule_message(HTTPROUTE, "spec.parentRefs",
                                        "sectionName must be unique"), kind="array")])


def test_httproute_rules_run_on_update_too(gateway, server_side, ns):
    code, made = post(gateway, HTTPROUTES.format(ns=ns), httproute("upd"))
    assert code == 201, made
    made["spec"]["rules"][0]["matches"] = [{"path": {"type": "PathPrefix", "value": "/a/../b"}}]
    code, body = gateway.request("PUT", HTTPROUTES.format(ns=ns) + "/upd", made)
    status = json.loads(body)
    assert code == 422, status
    assert causes(status) == [cel_cause("spec.rules[0].matches[0].path", rule_message(
        HTTPROUTE, HTTPROUTE_PATH_RULES, "must not contain '/../'"))]
    code, body = gateway.request(
        "PATCH", HTTPROUTES.format(ns=ns) + "/upd",
        {"spec": {"parentRefs": [{"name": "gw"}, {"name": "gw"}]}},
        headers={"Content-Type": "application/merge-patch+json"})
    assert code == 422, body
    assert causes(json.loads(body)) == [cel_cause("spec.parentRefs", rule_message(
        HTTPROUTE, "spec.parentRefs", "sectionName must be unique"), kind="array")]


# -- ServiceMonitor ----------------------------------------------------------------------------

SM_GROUP = "monitoring.coreos.com"


def servicemonitor(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{SM_GROUP}/v1", "kind": "ServiceMonitor",
            "metadata": {"name": name, "labels": {"team": "frontend"}},
            "spec": {"selector": {"matchLabels": {"app": "example-app"}},
                     "endpoints": [{"port": "web"}], **spec}}


def test_a_documented_servicemonitor_is_accepted_with_its_defaults(gateway, server_side, ns):
    # prometheus-operator's "Getting started" ServiceMonitor, then one with a relabeling
    documented = yaml.safe_load("""
        apiVersion: monitoring.coreos.com/v1
        kind: ServiceMonitor
        metadata:
          name: example-app
          labels:
            team: frontend
        spec:
          selector:
            matchLabels:
              app: example-app
          endpoints:
          - port: web
    """)
    code, made = post(gateway, SERVICEMONITORS.format(ns=ns), documented)
    assert code == 201, made
    assert made["spec"] == documented["spec"]

    relabeled = servicemonitor("relabeled", endpoints=[{
        "port": "web", "interval": "30s", "targetPort": 8080,
        "relabelings": [{"sourceLabels": ["__meta_kubernetes_pod_node_name"],
                         "targetLabel": "node"}]}])
    code, made = post(gateway, SERVICEMONITORS.format(ns=ns), relabeled)
    assert code == 201, made
    [endpoint] = made["spec"]["endpoints"]
    assert endpoint["relabelings"] == [{"sourceLabels": ["__meta_kubernetes_pod_node_name"],
                                        "targetLabel": "node", "action": "replace"}]
    assert endpoint["targetPort"] == 8080
    # int-or-string takes a name as well; unknown fields are pruned
    named = servicemonitor("named", endpoints=[{"port": "web", "targetPort": "metrics",
                                                "bogus": True}])
    code, made = post(gateway, SERVICEMONITORS.format(ns=ns), named)
    assert code == 201, made
    assert made["spec"]["endpoints"] == [{"port": "web", "targetPort": "metrics"}]

    rows = table(gateway.kubectl("get", "smon", "-n", ns).stdout)
    assert rows[0] == ["NAME", "AGE"]
    assert [r[0] for r in rows[1:]] == ["example-app", "named", "relabeled"]
    assert all(re.fullmatch(r"\d+s", r[1]) for r in rows[1:]), rows


DURATION = ("^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?"
            "(([0-9]+)ms)?)$")


@pytest.mark.parametrize(("case", "change", "expected"), [
    ("no-selector", lambda s: s.pop("selector"),
     [("FieldValueRequired", "spec.selector", "Required value")]),
    ("unknown-scheme", lambda s: s["endpoints"][0].update(scheme="ftp"),
     [("FieldValueNotSupported", "spec.endpoints[0].scheme",
       'Unsupported value: "ftp": supported values: "http", "https"')]),
    ("interval-pattern", lambda s: s["endpoints"][0].update(interval="30 seconds"),
     [("FieldValueInvalid", "spec.endpoints[0].interval",
       'Invalid value: "30 seconds": spec.endpoints[0].interval in body should match '
       f"'{DURATION}'")]),
    ("duplicate-in-a-set", lambda s: s.update(scrapeProtocols=["PrometheusProto",
                                                                "PrometheusProto"]),
     [("FieldValueDuplicate", "spec.scrapeProtocols[1]", 'Duplicate value: "PrometheusProto"')]),
    ("wrong-type", lambda s: s.update(jobLabel=5),
     [("FieldValueTypeInvalid", "spec.jobLabel",
       'Invalid value: "integer": spec.jobLabel in body must be of type string: "integer"')]),
])
def test_servicemonitor_schema_refuses_with_kube_messages(gateway, server_side, ns, case,
                                                          change, expected):
    """No x-kubernetes-validations here: the schema's errors alone (and no note about rules
    left unchecked)."""
    monitor = servicemonitor(case)
    change(monitor["spec"])
    refused(gateway, SERVICEMONITORS.format(ns=ns), monitor, "ServiceMonitor", SM_GROUP,
            expected)


# -- Certificate -------------------------------------------------------------------------------

CM_GROUP = "cert-manager.io"
DOCUMENTED_CERTIFICATE = """
    apiVersion: cert-manager.io/v1
    kind: Certificate
    metadata:
      name: example-com
    spec:
      secretName: example-com-tls
      duration: 2160h # 90d
      renewBefore: 360h # 15d
      subject:
        organizations:
          - jetstack
      isCA: false
      privateKey:
        algorithm: RSA
        encoding: PKCS1
        size: 2048
      usages:
        - server auth
        - client auth
      dnsNames:
        - example.com
        - www.example.com
      uris:
        - spiffe://cluster.local/ns/sandbox/sa/example
      emailAddresses:
        - john.doe@cert-manager.io
      ipAddresses:
        - 192.168.0.5
      issuerRef:
        name: ca-issuer
        kind: Issuer
        group: cert-manager.io
"""


def certificate(name: str) -> dict[str, Any]:
    cert = yaml.safe_load(DOCUMENTED_CERTIFICATE)
    cert["metadata"]["name"] = name
    return cert


def test_a_documented_certificate_and_its_status(gateway, server_side, ns):
    # cert-manager's "Certificate resource" documentation example
    documented = yaml.safe_load(DOCUMENTED_CERTIFICATE)
    path = CERTIFICATES.format(ns=ns)
    code, made = post(gateway, path, {**documented, "status": {"revision": 9}})
    assert code == 201, made
    assert made["spec"] == documented["spec"]  # no defaults in this schema
    assert "status" not in made  # the status subresource owns it

    ready = {"type": "Ready", "status": "True", "reason": "Ready",
             "message": "Certificate is up to date and has not expired",
             "lastTransitionTime": "2025-01-01T00:00:00Z", "observedGeneration": 1}
    code, body = gateway.request(
        "PATCH", f"{path}/example-com/status",
        {"status": {"conditions": [ready], "revision": 1,
                    "notAfter": "2026-01-01T00:00:00Z"}},
        headers={"Content-Type": "application/merge-patch+json"})
    assert code == 200, body
    assert json.loads(body)["status"]["conditions"] == [ready]

    rows = table(gateway.kubectl("get", "certificates", "-n", ns).stdout)
    assert rows[0] == ["NAME", "READY", "SECRET", "AGE"]
    assert rows[1][:3] == ["example-com", "True", "example-com-tls"]
    wide = table(gateway.kubectl("get", "certificates", "-n", ns, "-o", "wide").stdout)
    assert wide[0] == ["NAME", "READY", "SECRET", "ISSUER", "STATUS", "AGE"]
    assert wide[1][:5] == ["example-com", "True", "example-com-tls", "ca-issuer",
                           "Certificate is up to date and has not expired"]
    assert re.fullmatch(r"\d+s", wide[1][5]), wide


def test_certificate_status_is_validated(gateway, server_side, ns):
    path = CERTIFICATES.format(ns=ns)
    code, made = post(gateway, path, certificate("status-checks"))
    assert code == 201, made
    status_path = f"{path}/status-checks/status"

    def patch_status(status: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        code, body = gateway.request("PATCH", status_path, {"status": status},
                                     headers={"Content-Type": "application/merge-patch+json"})
        return code, json.loads(body)

    code, status = patch_status({"conditions": [{"type": "Ready", "status": "Maybe"}]})
    assert code == 422, status
    assert causes(status) == [
        ("FieldValueNotSupported", "status.conditions[0].status",
         'Unsupported value: "Maybe": supported values: "True", "False", "Unknown"')]
    code, status = patch_status({"conditions": [{"type": "Ready", "status": "True"},
                                                {"type": "Ready", "status": "False"}]})
    assert code == 422, status
    assert causes(status) == [("FieldValueDuplicate", "status.conditions[1]",
                               'Duplicate value: map[string]interface {}{"type":"Ready"}')]
    code, status = patch_status({"notAfter": "next year"})
    assert code == 422, status
    assert causes(status) == [
        ("FieldValueTypeInvalid", "status.notAfter",
         'Invalid value: "next year": status.notAfter in body must be of type date-time: '
         '"next year"')]


@pytest.mark.parametrize(("case", "change", "expected"), [
    ("no-issuer", lambda s: s.pop("issuerRef"),
     [("FieldValueRequired", "spec.issuerRef", "Required value")]),
    ("issuer-without-name", lambda s: s["issuerRef"].pop("name"),
     [("FieldValueRequired", "spec.issuerRef.name", "Required value")]),
    ("unknown-algorithm", lambda s: s["privateKey"].update(algorithm="DSA"),
     [("FieldValueNotSupported", "spec.privateKey.algorithm",
       'Unsupported value: "DSA": supported values: "RSA", "ECDSA", "Ed25519"')]),
    ("size-of-the-wrong-type", lambda s: s["privateKey"].update(size="big"),
     [("FieldValueTypeInvalid", "spec.privateKey.size",
       'Invalid value: "string": spec.privateKey.size in body must be of type integer: '
       '"string"')]),
])
def test_certificate_schema_refuses_with_kube_messages(gateway, server_side, ns, case, change,
                                                       expected):
    cert = certificate(case)
    change(cert["spec"])
    refused(gateway, CERTIFICATES.format(ns=ns), cert, "Certificate", CM_GROUP, expected)


def test_certificate_unknown_usage_is_refused_at_its_index(gateway, server_side, ns):
    cert = certificate("usages")
    cert["spec"]["usages"] = ["server auth", "flying"]
    crd = load("certificates.cert-manager.io")
    allowed = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"]["usages"]["items"]["enum"]
    refused(gateway, CERTIFICATES.format(ns=ns), cert, "Certificate", CM_GROUP, [
        ("FieldValueNotSupported", "spec.usages[1]",
         'Unsupported value: "flying": supported values: '
         + ", ".join(f'"{u}"' for u in allowed))])


def test_documented_instances_survive_a_second_kubectl_apply(gateway, server_side, ns):
    """kubectl apply of each instance twice. The HTTPRoute's lists get defaults inside their
    items, so kubectl's three-way merge patch sends its lists again ("configured"); the
    server, defaulting them the same way, finds nothing to change."""
    objects = [httproute("round"), servicemonitor("round"), certificate("round")]
    for obj in objects:
        obj["metadata"]["namespace"] = ns
    out = gateway.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objects))
    assert out.stdout.splitlines() == ["httproute.gateway.networking.k8s.io/round created",
                                       "servicemonitor.monitoring.coreos.com/round created",
                                       "certificate.cert-manager.io/round created"]

    def versions() -> list[tuple[str, int]]:
        listed = json.loads(gateway.kubectl(
            "get", "httproutes,servicemonitors,certificates", "-n", ns, "-o", "json").stdout)
        return [(i["metadata"]["resourceVersion"], i["metadata"]["generation"])
                for i in listed["items"]]

    before = versions()
    out = gateway.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objects))
    assert out.stdout.splitlines() == ["httproute.gateway.networking.k8s.io/round configured",
                                       "servicemonitor.monitoring.coreos.com/round unchanged",
                                       "certificate.cert-manager.io/round unchanged"]
    assert versions() == before
