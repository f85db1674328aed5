"""Kubernetes protobuf request bodies (application/vnd.kubernetes.protobuf), built by hand here
with field numbers of the v1.32 API, decode to the JSON-shaped objects kube-apiserver sees."""

from __future__ import annotations

import base64

import pytest

from gateway.apimachinery.status import StatusError
from gateway.endpoints import protobuf

# -- a tiny protobuf encoder ----------------------------------------------------------------------


def varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # negative int32/int64 values are ten-byte varints
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def tag(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def vint(number: int, value: int | bool) -> bytes:
    """A varint field (int32, int64, bool, enum)."""
    return tag(number, 0) + varint(int(value))


def ld(number: int, data: bytes | str) -> bytes:
    """A length-delimited field (string, bytes, embedded message, map entry)."""
    if isinstance(data, str):
        data = data.encode()
    return tag(number, 2) + varint(len(data)) + data


def entry(number: int, key: str, value: bytes | str) -> bytes:
    """One map<string, ...> entry."""
    return ld(number, ld(1, key) + ld(2, value))


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    """magic + runtime.Unknown{typeMeta: {apiVersion, kind}, raw, contentEncoding, contentType}"""
    type_meta = ld(1, api_version) + ld(2, kind)
    return protobuf.MAGIC + ld(1, type_meta) + ld(2, raw) + ld(3, "") + ld(4, "")


def time_msg(seconds: int, nanos: int = 0) -> bytes:
    """meta.v1.Time / MicroTime: {seconds: 1, nanos: 2}"""
    return vint(1, seconds) + vint(2, nanos)


def int_or_string(value: int | str) -> bytes:
    """util.intstr.IntOrString: {type: 1, intVal: 2, strVal: 3}"""
    if isinstance(value, int):
        return vint(1, 0) + vint(2, value) + ld(3, "")
    return vint(1, 1) + vint(2, 0) + ld(3, value)


def object_meta(name: str = "", namespace: str = "", *, labels: dict | None = None,
                annotations: dict | None = None, finalizers: tuple[str, ...] = (),
                creation: bytes | None = None, zero_fields: bool = False) -> bytes:
    """meta.v1.ObjectMeta: name 1, generateName 2, namespace 3, selfLink 4, uid 5,
    resourceVersion 6, generation 7, creationTimestamp 8, labels 11, annotations 12,
    finalizers 14."""
    out = ld(1, name) if name else b""
    if zero_fields:  # what Go's generated Marshal writes for an object's unset fields
        out += ld(2, "") + ld(4, "") + ld(5, "") + ld(6, "") + vint(7, 0)
    out += ld(3, namespace) if namespace else b""
    if creation is not None:
        out += ld(8, creation)
    elif zero_fields:
        out += ld(8, b"")
    for key, value in (labels or {}).items():
        out += entry(11, key, value)
    for key, value in (annotations or {}).items():
        out += entry(12, key, value)
    for finalizer in finalizers:
        out += ld(14, finalizer)
    return out


def decode(api_version: str, kind: str, raw: bytes) -> dict:
    return protobuf.decode_body(envelope(api_version, kind, raw))


def assert_bad_request(body: bytes) -> StatusError:
    with pytest.raises(StatusError) as err:
        protobuf.decode_body(body)
    assert err.value.code == 400
    assert err.value.reason == "BadRequest"
    return err.value


# -- the encoder itself ---------------------------------------------------------------------------


def test_encoder_matches_known_bytes() -> None:
    assert varint(1) == b"\x01"
    assert varint(300) == b"\xac\x02"
    assert varint(-1) == b"\xff" * 9 + b"\x01"
    assert ld(1, "v1") == b"\x0a\x02v1"
    assert vint(2, 150) == b"\x10\x96\x01"


# -- ConfigMap ------------------------------------------------------------------------------------


def test_decode_configmap() -> None:
    raw = (
        ld(1, object_meta("settings", "default", labels={"app": "web", "tier": "fe"},
                          annotations={"example.com/note": "hi"}))
        + entry(2, "a", "1")
        + entry(2, "empty", "")
        + entry(3, "blob", b"\x00\xffhi")
    )
    assert decode("v1", "ConfigMap", raw) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "settings",
            "namespace": "default",
            "labels": {"app": "web", "tier": "fe"},
            "annotations": {"example.com/note": "hi"},
        },
        "data": {"a": "1", "empty": ""},
        "binaryData": {"blob": base64.b64encode(b"\x00\xffhi").decode()},
    }


def test_decode_configmap_as_go_marshals_it() -> None:
    # Go's generated Marshal writes unset strings and numbers of ObjectMeta and an empty
    # creationTimestamp; as after decoding into Go types, those are not in the result
    raw = ld(1, object_meta("c", "ns", zero_fields=True)) + entry(2, "k", "v")
    assert decode("v1", "ConfigMap", raw) == {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "ns"},
        "data": {"k": "v"},
    }


def test_decode_configmap_immutable() -> None:
    raw = ld(1, object_meta("c")) + vint(4, True)
    assert decode("v1", "ConfigMap", raw)["immutable"] is True


def test_decode_ignores_unknown_fields() -> None:
    raw = ld(1, object_meta("c")) + ld(99, "from the future") + vint(98, 7) + entry(2, "k", "v")
    assert decode("v1", "ConfigMap", raw) == {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}


def test_decode_finalizers_and_repeated_strings() -> None:
    raw = ld(1, object_meta("c", finalizers=("a.example.com/x", "b.example.com/y")))
    assert decode("v1", "ConfigMap", raw)["metadata"]["finalizers"] == [
        "a.example.com/x", "b.example.com/y"]


def test_decode_map_entry_without_value() -> None:
    raw = ld(1, object_meta("c")) + ld(2, ld(1, "k")) + ld(3, ld(1, "b"))
    obj = decode("v1", "ConfigMap", raw)
    assert obj["data"] == {"k": ""}
    assert obj["binaryData"] == {"b": ""}


# -- Secret ---------------------------------------------------------------------------------------


def test_decode_secret_bytes_data() -> None:
    raw = (
        ld(1, object_meta("creds", "ns"))
        + entry(2, "password", b"s3cr3t")
        + entry(2, "binary", bytes(range(256)))
        + ld(3, "Opaque")
        + entry(4, "plain", "text")
    )
    obj = decode("v1", "Secret", raw)
    assert obj == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "creds", "namespace": "ns"},
        "data": {"password": "czNjcjN0",
                 "binary": base64.b64encode(bytes(range(256))).decode()},
        "type": "Opaque",
        "stringData": {"plain": "text"},
    }
    assert base64.b64decode(obj["data"]["binary"]) == bytes(range(256))


# -- Service --------------------------------------------------------------------------------------


def service_port(name: str, port: int, target: int | str, protocol: str = "TCP") -> bytes:
    """core.v1.ServicePort: name 1, protocol 2, port 3, targetPort 4, nodePort 5"""
    return (ld(1, name) + ld(2, protocol) + vint(3, port) + ld(4, int_or_string(target))
            + vint(5, 0))


def test_decode_service_with_ports() -> None:
    spec = (
        ld(1, service_port("http", 80, 8080))
        + ld(1, service_port("https", 443, "https"))
        + ld(1, service_port("dns", 53, 5353, "UDP"))
        + entry(2, "app", "web")
        + ld(3, "10.0.0.10")
        + ld(4, "ClusterIP")
        + ld(7, "None")
        + ld(18, "10.0.0.10")
        + ld(19, "IPv4")
        + ld(17, "SingleStack")
        + vint(12, 0)
    )
    obj = decode("v1", "Service", ld(1, object_meta("web", "default")) + ld(2, spec))
    assert obj == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "ports": [
                {"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080},
                {"name": "https", "protocol": "TCP", "port": 443, "targetPort": "https"},
                {"name": "dns", "protocol": "UDP", "port": 53, "targetPort": 5353},
            ],
            "selector": {"app": "web"},
            "clusterIP": "10.0.0.10",
            "type": "ClusterIP",
            "sessionAffinity": "None",
            "clusterIPs": ["10.0.0.10"],
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
        },
    }


def test_decode_service_session_affinity_config() -> None:
    spec = ld(7, "ClientIP") + ld(14, ld(1, vint(1, 10800)))
    obj = decode("v1", "Service", ld(1, object_meta("web")) + ld(2, spec))
    assert obj["spec"]["sessionAffinityConfig"] == {"clientIP": {"timeoutSeconds": 10800}}


def test_decode_negative_integers() -> None:
    spec = ld(1, ld(1, "p") + vint(3, 80) + vint(5, -1))
    obj = decode("v1", "Service", ld(2, spec))
    assert obj["spec"]["ports"] == [{"name": "p", "port": 80, "nodePort": -1}]


# -- times ----------------------------------------------------------------------------------------


def test_decode_creation_timestamp() -> None:
    raw = ld(1, object_meta("c", creation=time_msg(1700000000)))
    assert decode("v1", "ConfigMap", raw)["metadata"]["creationTimestamp"] == (
        "2023-11-14T22:13:20Z")


def test_decode_time_with_nanos_is_truncated_to_seconds() -> None:
    # metav1.Time marshals as t.UTC().Format(time.RFC3339): the fraction is cut, not rounded
    raw = ld(1, object_meta("c", creation=time_msg(1700000000, 999_999_999)))
    assert decode("v1", "ConfigMap", raw)["metadata"]["creationTimestamp"] == (
        "2023-11-14T22:13:20Z")


def test_decode_zero_time_is_left_out() -> None:
    raw = ld(1, object_meta("c", creation=time_msg(0, 0)))
    assert "creationTimestamp" not in decode("v1", "ConfigMap", raw)["metadata"]


def lease(renew: bytes) -> bytes:
    """coordination.v1.Lease{metadata, spec{holderIdentity 1, leaseDurationSeconds 2,
    renewTime 4, leaseTransitions 5}}"""
    spec = ld(1, "node-1") + vint(2, 40) + ld(4, renew) + vint(5, 3)
    return ld(1, object_meta("node-1", "kube-node-lease")) + ld(2, spec)


def test_decode_lease_micro_time() -> None:
    obj = decode("coordination.k8s.io/v1", "Lease", lease(time_msg(1700000000, 123_456_000)))
    assert obj == {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "node-1", "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": "node-1", "leaseDurationSeconds": 40,
                 "renewTime": "2023-11-14T22:13:20.123456Z", "leaseTransitions": 3},
    }


@pytest.mark.parametrize(
    ("nanos", "text"),
    [
        (123_456_789, "2023-11-14T22:13:20.123456Z"),
        (999_999_999, "2023-11-14T22:13:20.999999Z"),
        (1_000, "2023-11-14T22:13:20.000001Z"),
        (999, "2023-11-14T22:13:20.000000Z"),
    ],
)
def test_decode_micro_time_truncates_nanoseconds(nanos: int, text: str) -> None:
    # metav1.MicroTime marshals with Format("2006-01-02T15:04:05.000000Z07:00"), which cuts
    # the nanoseconds; clients (client-go's metav1.NowMicro()) send full nanosecond values
    obj = decode("coordination.k8s.io/v1", "Lease", lease(time_msg(1700000000, nanos)))
    assert obj["spec"]["renewTime"] == text


# -- other kinds ----------------------------------------------------------------------------------


def test_decode_validating_webhook_configuration() -> None:
    rule = ld(1, "CREATE") + ld(1, "UPDATE") + ld(2, ld(1, "") + ld(2, "v1")
                                                  + ld(3, "configmaps") + ld(4, "*"))
    client_config = ld(1, ld(1, "ns") + ld(2, "hook") + ld(3, "/validate") + vint(4, 443)) \
        + ld(2, b"\x01\x02\x03")
    hook = (ld(1, "a.example.com") + ld(2, client_config) + ld(3, rule) + ld(4, "Fail")
            + ld(6, "None") + vint(7, 5) + ld(8, "v1")
            + ld(5, ld(1, ld(1, "team") + ld(2, "a"))))
    obj = decode("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration",
                 ld(1, object_meta("hooks")) + ld(2, hook))
    assert obj == {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "hooks"},
        "webhooks": [{
            "name": "a.example.com",
            "clientConfig": {
                "service": {"namespace": "ns", "name": "hook", "path": "/validate",
                            "port": 443},
                "caBundle": "AQID",
            },
            "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""],
                       "apiVersions": ["v1"], "resources": ["configmaps"], "scope": "*"}],
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "timeoutSeconds": 5,
            "admissionReviewVersions": ["v1"],
            "namespaceSelector": {"matchLabels": {"team": "a"}},
        }],
    }


def test_decode_rbac_role_binding() -> None:
    raw = (ld(1, object_meta("rb", "ns"))
           + ld(2, ld(1, "User") + ld(2, "rbac.authorization.k8s.io") + ld(3, "alice"))
           + ld(3, ld(1, "rbac.authorization.k8s.io") + ld(2, "Role") + ld(3, "reader")))
    assert decode("rbac.authorization.k8s.io/v1", "RoleBinding", raw) == {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "rb", "namespace": "ns"},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io",
                      "name": "alice"}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "reader"},
    }


def test_decode_self_subject_access_review() -> None:
    attributes = ld(1, "ns") + ld(2, "get") + ld(5, "configmaps") + ld(7, "c")
    raw = ld(1, object_meta()) + ld(2, ld(1, attributes))
    assert decode("authorization.k8s.io/v1", "SelfSubjectAccessReview", raw) == {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"namespace": "ns", "verb": "get",
                                        "resource": "configmaps", "name": "c"}},
    }


def test_decode_token_request() -> None:
    raw = ld(2, ld(1, "https://kubernetes.default.svc") + vint(4, 3600))
    assert decode("authentication.k8s.io/v1", "TokenRequest", raw) == {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"audiences": ["https://kubernetes.default.svc"], "expirationSeconds": 3600},
    }


def test_decode_service_account_automount_false() -> None:
    # automountServiceAccountToken is a *bool: Go's Marshal writes it whenever it is set, and
    # an explicit false (do not mount the token) survives decoding
    raw = ld(1, object_meta("builder", "ns")) + vint(4, False)
    assert decode("v1", "ServiceAccount", raw) == {
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "builder", "namespace": "ns"},
        "automountServiceAccountToken": False,
    }


def test_decode_delete_options_grace_period_zero() -> None:
    # gracePeriodSeconds is a *int64; 0 means "delete now" and is not the same as unset
    raw = vint(1, 0) + ld(4, "Foreground")
    assert decode("meta.k8s.io/v1", "DeleteOptions", raw) == {
        "apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions",
        "gracePeriodSeconds": 0, "propagationPolicy": "Foreground",
    }


@pytest.mark.parametrize(
    ("api_version", "kind", "message"),
    [
        ("v1", "ConfigMap", "k8s.io.api.core.v1.ConfigMap"),
        ("rbac.authorization.k8s.io/v1", "ClusterRole", "k8s.io.api.rbac.v1.ClusterRole"),
        ("coordination.k8s.io/v1", "Lease", "k8s.io.api.coordination.v1.Lease"),
        ("discovery.k8s.io/v1", "EndpointSlice", "k8s.io.api.discovery.v1.EndpointSlice"),
        ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration",
         "k8s.io.api.admissionregistration.v1.MutatingWebhookConfiguration"),
        ("v1", "DeleteOptions", "k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions"),
    ],
)
def test_message_for(api_version: str, kind: str, message: str) -> None:
    assert protobuf.message_for(api_version, kind) == message


# -- bodies that are not Kubernetes protobuf ------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b'{"apiVersion":"v1","kind":"ConfigMap"}',
        b"k8s",
        b"k8s\x01" + ld(1, ld(1, "v1") + ld(2, "ConfigMap")),  # wrong magic
        ld(1, ld(1, "v1") + ld(2, "ConfigMap")),  # no magic at all
    ],
)
def test_missing_magic_is_400(body: bytes) -> None:
    assert_bad_request(body)


@pytest.mark.parametrize(
    "body",
    [
        protobuf.MAGIC + b"\xff\xff\xff",  # a truncated varint
        protobuf.MAGIC + b"\x0a\x50abc",  # a length past the end
        protobuf.MAGIC + b"\x0b",  # wire type 3 (group start)
        protobuf.MAGIC + b"\x0f",  # wire type 7
        envelope("v1", "ConfigMap", ld(1, ld(1, "c")) + b"\x12\x05ab"),
        envelope("v1", "ConfigMap", ld(1, b"\x0a\x02\xff\xfe")),  # a name that is not UTF-8
        envelope("v1", "Pod", ld(1, object_meta("p"))),  # a kind with no message table
        envelope("", "", b""),
    ],
)
def test_garbage_is_400(body: bytes) -> None:
    err = assert_bad_request(body)
    assert "protobuf" in err.message


@pytest.mark.parametrize(
    "raw",
    [
        vint(1, 5),  # metadata (a message) sent as a varint
        ld(1, vint(1, 5)),  # metadata.name (a string) sent as a varint
        ld(2, b"\x08\x01"),  # a data map entry whose key is a varint
    ],
    ids=["message-as-varint", "string-as-varint", "map-key-as-varint"],
)
def test_wrong_wire_type_is_400(raw: bytes) -> None:
    # Go's generated Unmarshal: "proto: wrong wireType = 0 for field Metadata", a decode error
    # that the API answers with 400, not 500
    assert_bad_request(envelope("v1", "ConfigMap", raw))


def test_decode_body_without_raw_object() -> None:
    body = protobuf.MAGIC + ld(1, ld(1, "v1") + ld(2, "ConfigMap"))
    assert protobuf.decode_body(body) == {"apiVersion": "v1", "kind": "ConfigMap"}
