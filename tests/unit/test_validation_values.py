"""Field errors as kube-apiserver v1.32 words them: values shown by their Go type, IP addresses
read as k8s.io/utils/net reads them, and the per-resource rules built on those."""

from __future__ import annotations

import pytest

from gateway.apis.admissionregistration.webhooks import WebhookConfigurationStrategy
from gateway.apis.core.configmaps import ConfigMapStrategy
from gateway.apis.core.events import legacy_event_causes
from gateway.apis.core.secrets import SecretStrategy
from gateway.registry.validation import go_value, invalid, non_special_ip_causes, parse_ip


def causes(found) -> list[tuple[str, str, str]]:
    return [(c.field, c.reason, c.message) for c in found]


@pytest.mark.parametrize("value, shown", [
    (70000, "70000"), (0, "0"), (-1, "-1"), (True, "true"), (None, "null"),
    ("x", '"x"'), ('a"b\n', '"a\\"b\\n"'), (1.5, "1.5"), (2.0, "2"),
    (["v3"], '[]string{"v3"}'),
])
def test_values_are_shown_as_go_shows_them(value, shown):
    assert go_value(value) == shown
    assert invalid("f", value, "bad").message == f"Invalid value: {shown}: bad"


@pytest.mark.parametrize("text, packed", [
    ("10.0.0.1", bytes([10, 0, 0, 1])),
    ("010.000.0.1", bytes([10, 0, 0, 1])),  # sloppy: leading zeros
    ("::ffff:127.0.0.1", bytes([127, 0, 0, 1])),
    ("2001:db8::1", bytes.fromhex("20010db8000000000000000000000001")),
    ("nope", None), ("1.2.3", None), ("256.1.1.1", None), ("fe80::1%eth0", None),
    (" 10.0.0.1", None), ("", None),
])
def test_ips_are_read_sloppily(text, packed):
    assert parse_ip(text) == packed


@pytest.mark.parametrize("ip, detail", [
    ("0.0.0.0", "may not be unspecified (0.0.0.0)"),
    ("::", "may not be unspecified (::)"),
    ("127.0.0.1", "may not be in the loopback range (127.0.0.0/8, ::1/128)"),
    ("::1", "may not be in the loopback range (127.0.0.0/8, ::1/128)"),
    ("169.254.1.1", "may not be in the link-local range (169.254.0.0/16, fe80::/10)"),
    ("fe80::1", "may not be in the link-local range (169.254.0.0/16, fe80::/10)"),
    ("224.0.0.5", "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"),
    ("ff02::1", "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"),
])
def test_special_ips(ip, detail):
    assert causes(non_special_ip_causes("ip", ip)) == [
        ("ip", "FieldValueInvalid", f"Invalid value: {go_value(ip)}: {detail}")]
    assert non_special_ip_causes("ip", "10.1.2.3") == []


def test_config_keys_and_binary_size():
    found = ConfigMapStrategy().validate({"data": {"..x": "1", "ok": "2"},
                                          "binaryData": {"ok": "eA=="}})
    assert causes(found) == [
        ("data[..x]", "FieldValueInvalid", 'Invalid value: "..x": must not start with \'..\''),
        ("data[ok]", "FieldValueInvalid",
         'Invalid value: "ok": duplicate of key present in binaryData')]
    # binaryData counts by its decoded bytes: 1 MiB of bytes is 4/3 MiB of base64, and fits
    mib = "A" * (1024 * 1024 * 4 // 3)
    assert ConfigMapStrategy().validate({"binaryData": {"b": mib}}) == []


def test_secret_types():
    strategy = SecretStrategy()
    assert causes(strategy.validate({"type": "kubernetes.io/ssh-auth",
                                     "data": {"ssh-privatekey": ""}})) == [
        ("data[ssh-privatekey]", "FieldValueRequired", "Required value")]
    assert causes(strategy.validate({"type": "kubernetes.io/dockercfg", "data": {}})) == [
        ("data[.dockercfg]", "FieldValueRequired", "Required value")]
    assert causes(strategy.validate({"type": "kubernetes.io/dockerconfigjson",
                                     "data": {".dockerconfigjson": "W10="}})) == [  # []
        ("data[.dockerconfigjson]", "FieldValueInvalid",
         'Invalid value: "<secret contents redacted>": json: cannot unmarshal array into Go '
         "value of type map[string]interface {}")]
    assert strategy.validate({"type": "kubernetes.io/basic-auth",
                              "data": {"password": ""}}) == []
    assert strategy.validate({"type": "example.com/anything", "data": {}}) == []


def test_legacy_event_rules():
    def event(namespace: str, **fields) -> dict:
        return {"metadata": {"namespace": namespace}, **fields}

    assert legacy_event_causes(event("default")) == []
    assert legacy_event_causes(event("ns", involvedObject={"namespace": "ns"})) == []
    assert causes(legacy_event_causes(event("ns", involvedObject={"namespace": "other"}))) == [
        ("involvedObject.namespace", "FieldValueInvalid",
         'Invalid value: "other": does not match event.namespace')]
    new_style = event("kube-system", eventTime="2024-01-01T00:00:00.000000Z",
                      reportingComponent="ctl", reportingInstance="i", action="a",
                      reason="r" * 129)
    assert causes(legacy_event_causes(new_style)) == [
        ("reason", "FieldValueInvalid", 'Invalid value: "": can have at most 128 characters')]
    assert causes(legacy_event_causes(event("default", eventTime="2024-01-01T00:00:00Z"))) == [
        ("reportingController", "FieldValueRequired", "Required value"),
        ("reportingController", "FieldValueInvalid",
         "Invalid value: \"\": name part must be non-empty"),
        ("reportingController", "FieldValueInvalid",
         "Invalid value: \"\": name part must consist of alphanumeric characters, '-', '_' or "
         "'.', and must start and end with an alphanumeric character (e.g. 'MyName',  or "
         "'my.name',  or '123-abc', regex used for validation is "
         "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
        ("reportingInstance", "FieldValueRequired", "Required value"),
        ("action", "FieldValueRequired", "Required value"),
        ("reason", "FieldValueRequired", "Required value")]


def test_webhook_client_config_and_review_versions():
    hook = {"name": "a.b.c", "sideEffects": "None", "admissionReviewVersions": ["v3", "v3"],
            "clientConfig": {"url": "https://u:p@host/x?q=1#f"}}
    assert causes(WebhookConfigurationStrategy(False).validate({"webhooks": [hook]})) == [
        ("webhooks[0].clientConfig.url", "FieldValueInvalid",
         'Invalid value: "u:p": user information is not permitted in the URL'),
        ("webhooks[0].clientConfig.url", "FieldValueInvalid",
         'Invalid value: "f": fragments are not permitted in the URL'),
        ("webhooks[0].clientConfig.url", "FieldValueInvalid",
         'Invalid value: "q=1": query parameters are not permitted in the URL'),
        ("webhooks[0].admissionReviewVersions[1]", "FieldValueInvalid",
         'Invalid value: "v3": duplicate version'),
        ("webhooks[0].admissionReviewVersions", "FieldValueInvalid",
         'Invalid value: []string{"v3", "v3"}: must include at least one of v1, v1beta1')]
    hook.update(clientConfig={"service": {"port": 0, "path": "x//"}}, timeoutSeconds=31,
                admissionReviewVersions=["v1"], name="Bad")
    assert causes(WebhookConfigurationStrategy(False).validate({"webhooks": [hook]})) == [
        ("webhooks[0].name", "FieldValueInvalid",
         "Invalid value: \"Bad\": a lowercase RFC 1123 subdomain must consist of lower case "
         "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
         "character (e.g. 'example.com', regex used for validation is "
         "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
        ("webhooks[0].timeoutSeconds", "FieldValueInvalid",
         "Invalid value: 31: the timeout value must be between 1 and 30 seconds"),
        ("webhooks[0].clientConfig.service.name", "FieldValueRequired",
         "Required value: service name is required"),
        ("webhooks[0].clientConfig.service.namespace", "FieldValueRequired",
         "Required value: service namespace is required"),
        ("webhooks[0].clientConfig.service.port", "FieldValueInvalid",
         "Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive"),
        ("webhooks[0].clientConfig.service.path", "FieldValueInvalid",
         "Invalid value: \"x//\": must start with a '/'"),
        # kube drops the first character whatever it is, then one trailing '/'
        ("webhooks[0].clientConfig.service.path", "FieldValueInvalid",
         "Invalid value: \"x//\": segment[0] may not be empty"),
        ("webhooks[0].clientConfig.service.path", "FieldValueInvalid",
         "Invalid value: \"x//\": segment[1] may not be empty")]
