"""Writing Kubernetes protobuf: every message of the field tables survives the gateway's own
decoder (decode(encode(x)) == x), and what is written is what kube's own .proto definitions
read, field for field and byte for byte (protoc-compiled, tests/support/kubeproto)."""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest
from google.protobuf.message import Message
from google.protobuf.unknown_fields import UnknownFieldSet

from gateway.endpoints.protobuf import decode_body, decode_message, message_for
from gateway.endpoints.protobuf_encode import (
    encode_message,
    encode_object,
    has_message,
    watch_frame,
)
from gateway.endpoints.protobuf_types import (
    AM,
    INLINE,
    JSON_MESSAGE,
    LIST_MESSAGES,
    MAP,
    MESSAGES,
    META,
    OPTIONAL,
    REPEATED,
    SHAPED_MESSAGES,
)
from gateway.endpoints.protobuf_types_ext import APIEXT, APIREG
from tests.support import kubeproto

SCALARS: dict[str, Any] = {"string": "text", "bytes": "AAEC", "bool": True, "int32": -7,
                           "int64": 1 << 40, "uint32": 7, "uint64": 1 << 50, "double": 1.5,
                           "float": 0.25}
SPECIALS: dict[str, Any] = {
    META + "Time": "2024-05-01T10:20:30Z",
    META + "MicroTime": "2024-05-01T10:20:30.123456Z",
    AM + "util.intstr.IntOrString": "http",
    AM + "api.resource.Quantity": "100m",
    AM + "runtime.RawExtension": {"kind": "Raw", "items": [1, 2]},
    META + "FieldsV1": {"f:data": {"f:a": {}}},
    JSON_MESSAGE: {"any": ["json", 1, None, False]},
}
ZEROS: dict[str, Any] = {"string": "", "bool": False, "int32": 0, "int64": 0}


def sample(name: str, outer: tuple[str, ...] = ()) -> Any:
    """A value of message ``name`` with every field set to something not empty; a message met
    again inside itself (JSONSchemaProps) gets its scalar fields only, so that it ends."""
    if name in SPECIALS:
        return SPECIALS[name]
    if name in LIST_MESSAGES:  # JSON is the bare list (ExtraValue)
        return ["text", "more"]
    if name in SHAPED_MESSAGES:  # JSON is the object form (the other forms: tests below)
        (kind,) = [k for j, k, *_ in MESSAGES[name].values()
                   if j == SHAPED_MESSAGES[name]["object"]]
        return sample(kind, (*outer, name))
    again = name in outer
    outer = (*outer, name)
    out: dict[str, Any] = {}
    for json_name, kind, *flag in MESSAGES[name].values():
        if again and kind in MESSAGES:
            continue
        if kind.startswith(MAP):
            value_kind = kind[len(MAP):]
            if again and value_kind in MESSAGES:
                continue
            out[json_name] = {"b": _value(value_kind, outer), "a": _value(value_kind, outer)}
            continue
        value = _value(kind, outer)
        if flag == [REPEATED]:
            out[json_name] = [value, _value(kind, outer)]
        elif flag == [INLINE]:
            out.update(value)
        else:
            out[json_name] = value
    return out


def _value(kind: str, outer: tuple[str, ...]) -> Any:
    return sample(kind, outer) if "." in kind else SCALARS[kind]


def pointer_zeros(name: str) -> dict[str, Any]:
    """Every pointer field of ``name`` set to its zero value: set, so kept (Go's *bool false)."""
    out: dict[str, Any] = {}
    if name in SHAPED_MESSAGES:  # JSON that is not its fields
        return out
    for json_name, kind, *flag in MESSAGES[name].values():
        if flag == [OPTIONAL] and kind in ZEROS:
            out[json_name] = ZEROS[kind]
        elif flag == [OPTIONAL] and kind not in SPECIALS and "." in kind:
            out[json_name] = {}
    return out


ALL = sorted(MESSAGES)


@pytest.mark.parametrize("name", ALL)
def test_every_message_survives_the_decoder(name: str) -> None:
    value = sample(name)
    assert decode_message(name, encode_message(name, value)) == value
    zeros = [] if name in LIST_MESSAGES else pointer_zeros(name)
    assert decode_message(name, encode_message(name, zeros)) == zeros


def no_unknown_fields(message: Message) -> None:
    assert len(UnknownFieldSet(message)) == 0, message.DESCRIPTOR.full_name
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            values = list(value.values()) if field.message_type.fields_by_name[
                "value"].message_type else []
        elif field.is_repeated:
            values = list(value)
        else:
            values = [value]
        for item in values:
            no_unknown_fields(item)


@pytest.mark.parametrize("name", ALL)
def test_kubes_definitions_read_every_message_byte_for_byte(name: str) -> None:
    """Parsed by kube's message and written back (maps sorted, as Go's Marshal sorts them),
    the bytes are the gateway's: same fields, numbers, wire types and order; nothing unknown."""
    for value in (sample(name), pointer_zeros(name), {}):
        ours = encode_message(name, value)
        theirs = kubeproto.parse(name, ours)
        no_unknown_fields(theirs)
        assert theirs.SerializeToString(deterministic=True) == ours


def test_unset_fields_are_written_as_gos_marshal_writes_them() -> None:
    """Singular fields that are not pointers are always written (ObjectMeta's empty strings,
    generation 0, an empty creationTimestamp); pointers (deletionTimestamp, details) only
    when set; lists and maps only when they have items."""
    meta = kubeproto.parse(META + "ObjectMeta", encode_message(META + "ObjectMeta",
                                                               {"name": "a"}))
    assert meta.HasField("generateName") and meta.generateName == ""
    assert meta.HasField("generation") and meta.HasField("creationTimestamp")
    assert not meta.HasField("deletionTimestamp")
    assert not meta.HasField("deletionGracePeriodSeconds") and not meta.labels
    status = kubeproto.parse(META + "Status", encode_message(META + "Status", {"code": 500}))
    assert status.HasField("metadata") and not status.HasField("details")
    assert encode_message(META + "Time", None) == b""  # the zero time marshals to nothing


def test_a_status_byte_for_byte() -> None:
    """metav1.Status{ListMeta{}, "Failure", "m", "NotFound", &Details{Name: "a"}, 404} as
    Go's generated Marshal lays it out, in kube's envelope."""
    status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
              "message": "m", "reason": "NotFound", "details": {"name": "a"}, "code": 404}
    list_meta = bytes.fromhex("0a00 1200 1a00")  # selfLink, resourceVersion, continue
    details = bytes.fromhex("0a0161 1200 1a00 2800 3200")  # name, group, kind, retry, uid
    raw = (b"\x0a" + bytes([len(list_meta)]) + list_meta + b"\x12\x07Failure" + b"\x1a\x01m"
           + b"\x22\x08NotFound" + b"\x2a" + bytes([len(details)]) + details
           + b"\x30\x94\x03")
    type_meta = b"\x0a\x02v1\x12\x06Status"
    expected = (b"k8s\x00" + b"\x0a" + bytes([len(type_meta)]) + type_meta
                + b"\x12" + bytes([len(raw)]) + raw + b"\x1a\x00\x22\x00")
    assert encode_object(status) == expected


def test_times_as_kube_writes_them() -> None:
    """metav1.Time drops nanoseconds (nanos written as 0); MicroTime keeps microseconds; a
    time before 1970 counts seconds down (Go's Unix)."""
    time = kubeproto.parse(META + "Time",
                           encode_message(META + "Time", "2024-05-01T10:20:30Z"))
    assert (time.seconds, time.nanos, time.HasField("nanos")) == (1714558830, 0, True)
    micro = kubeproto.parse(META + "MicroTime",
                            encode_message(META + "MicroTime", "1969-12-31T23:59:59.5Z"))
    assert (micro.seconds, micro.nanos) == (-1, 500_000_000)


def test_int_or_string_and_quantity() -> None:
    number = kubeproto.parse(AM + "util.intstr.IntOrString",
                             encode_message(AM + "util.intstr.IntOrString", 8080))
    assert (number.type, number.intVal, number.strVal) == (0, 8080, "")
    name = kubeproto.parse(AM + "util.intstr.IntOrString",
                           encode_message(AM + "util.intstr.IntOrString", "http"))
    assert (name.type, name.strVal) == (1, "http")


def test_configmap_in_its_envelope_read_by_kubes_definitions() -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "c", "namespace": "n", "labels": {"z": "1", "a": "2"},
                       "creationTimestamp": "2024-05-01T10:20:30Z", "resourceVersion": "7"},
          "data": {"k": "v"}, "binaryData": {"b": "AAE="}, "immutable": False}
    body = encode_object(cm)
    theirs = kubeproto.decode(body, kubeproto.CORE + "ConfigMap", "v1", "ConfigMap")
    assert (theirs.metadata.name, theirs.metadata.namespace) == ("c", "n")
    assert dict(theirs.metadata.labels) == {"z": "1", "a": "2"}
    assert theirs.metadata.creationTimestamp.seconds == 1714558830
    assert dict(theirs.data) == {"k": "v"} and dict(theirs.binaryData) == {"b": b"\x00\x01"}
    assert theirs.HasField("immutable") and theirs.immutable is False
    assert decode_body(body) == {k: v for k, v in cm.items()}  # and our decoder agrees


def test_lists_and_partial_object_metadata() -> None:
    items = [{"metadata": {"name": n}, "data": {"k": n}} for n in ("a", "b")]
    listed = {"apiVersion": "v1", "kind": "ConfigMapList",
              "metadata": {"resourceVersion": "9", "continue": "t", "remainingItemCount": 0},
              "items": items}
    theirs = kubeproto.decode(encode_object(listed), kubeproto.CORE + "ConfigMapList", "v1",
                              "ConfigMapList")
    assert [i.metadata.name for i in theirs.items] == ["a", "b"]
    assert theirs.metadata.resourceVersion == "9"
    assert theirs.metadata.HasField("remainingItemCount")  # a pointer, set to 0
    partial = {"apiVersion": "meta.k8s.io/v1beta1", "kind": "PartialObjectMetadataList",
               "metadata": {"resourceVersion": "9"},
               "items": [{"metadata": {"name": "a"}}]}
    old = kubeproto.decode(encode_object(partial),
                           "k8s.io.apimachinery.pkg.apis.meta.v1beta1.PartialObjectMetadataList",
                           "meta.k8s.io/v1beta1", "PartialObjectMetadataList")
    assert old.items[0].metadata.name == "a" and old.metadata.resourceVersion == "9"


def test_watch_frame() -> None:
    """A 4-byte big-endian length, then WatchEvent{type, object: RawExtension{raw}} whose raw
    is the object's full encoding, magic and envelope included."""
    obj = encode_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}})
    frame = watch_frame("ADDED", obj)
    (length,) = struct.unpack(">I", frame[:4])
    assert length == len(frame) - 4
    event = kubeproto.parse(META + "WatchEvent", frame[4:])
    assert event.type == "ADDED" and event.object.raw == obj
    assert kubeproto.decode(event.object.raw, kubeproto.CORE + "Namespace", "v1",
                            "Namespace").metadata.name == "x"


def test_what_has_a_protobuf_form() -> None:
    assert has_message("v1", "ConfigMap") and has_message("v1", "NamespaceList")
    assert has_message("rbac.authorization.k8s.io/v1", "ClusterRoleBinding")
    assert has_message("meta.k8s.io/v1", "PartialObjectMetadataList")
    assert not has_message("stable.example.com/v1", "CronTab")  # a custom resource
    for api_version, kind in (("flowcontrol.apiserver.k8s.io/v1", "FlowSchema"),
                              ("flowcontrol.apiserver.k8s.io/v1", "PriorityLevelConfigurationList"),
                              ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"),
                              ("admissionregistration.k8s.io/v1",
                               "ValidatingAdmissionPolicyBindingList"),
                              ("apiregistration.k8s.io/v1", "APIServiceList"),
                              ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
                              ("autoscaling/v1", "Scale")):
        assert has_message(api_version, kind), kind


@pytest.mark.parametrize(("api_version", "kind", "message"), [
    ("flowcontrol.apiserver.k8s.io/v1", "FlowSchema", "k8s.io.api.flowcontrol.v1.FlowSchema"),
    ("autoscaling/v1", "Scale", "k8s.io.api.autoscaling.v1.Scale"),
    ("apiregistration.k8s.io/v1", "APIService", APIREG + "APIService"),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinitionList",
     APIEXT + "CustomResourceDefinitionList"),
])
def test_groups_map_to_kubes_proto_packages(api_version: str, kind: str, message: str) -> None:
    """The extension servers' groups are in their own Go packages, not k8s.io/api."""
    assert message_for(api_version, kind) == message
    kubeproto.message_class(message)  # a message kube's files define


def test_every_message_of_kubes_files_is_in_the_tables() -> None:
    """The trimmed .proto files and the tables hold the same messages, but for those the
    gateway writes by hand or never writes as an object."""
    by_hand = {JSON_MESSAGE, META + "FieldsV1", META + "MicroTime", META + "Time",
               AM + "runtime.RawExtension", AM + "util.intstr.IntOrString"}
    envelopes = {META + "WatchEvent", AM + "runtime.TypeMeta", AM + "runtime.Unknown"}
    assert set(kubeproto.message_names()) == set(MESSAGES) | by_hand | envelopes


PROPS = APIEXT + "JSONSchemaProps"


def test_json_schema_props_as_go_marshals_them() -> None:
    """The fields Go marshals by hand: JSON values are their JSON text in ``raw``; items,
    additionalProperties and dependencies take their field from the JSON type; a whole
    double reads back as a whole number (Go writes 10, not 10.0)."""
    schema = {
        "type": "object", "x-kubernetes-preserve-unknown-fields": False,
        "properties": {
            "list": {"type": "array", "items": {"type": "string", "enum": ["a", None, 0]}},
            "tuple": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]},
            "closed": {"type": "object", "additionalProperties": False},
            "open": {"type": "object", "additionalProperties": True},
            "typed": {"type": "object", "additionalProperties": {"type": "integer"}},
            "size": {"type": "number", "maximum": 10, "minimum": -1.5, "default": 0},
            "flag": {"type": "boolean", "default": False, "example": {"b": [1, "x"]}},
        },
        "dependencies": {"a": ["b", "c"], "d": {"required": ["e"]}},
    }
    raw = encode_message(PROPS, schema)
    assert decode_message(PROPS, raw) == schema
    theirs = kubeproto.parse(PROPS, raw)
    assert theirs.SerializeToString(deterministic=True) == raw
    assert theirs.HasField("xKubernetesPreserveUnknownFields")  # a *bool, set to false
    props = theirs.properties
    assert [json.loads(e.raw) if e.raw else None for e in props["list"].items.schema.enum] == \
        ["a", None, 0]
    assert props["list"].items.HasField("schema") and not props["list"].items.jSONSchemas
    assert [s.type for s in props["tuple"].items.jSONSchemas] == ["string", "integer"]
    assert not props["tuple"].items.HasField("schema")
    closed, opened, typed = (props[n].additionalProperties for n in ("closed", "open", "typed"))
    assert (closed.HasField("allows"), closed.allows, closed.HasField("schema")) == \
        (True, False, False)
    assert (opened.allows, opened.HasField("schema")) == (True, False)
    assert (typed.allows, typed.schema.type) == (True, "integer")
    assert (props["size"].maximum, props["size"].minimum) == (10.0, -1.5)
    assert props["size"].default.raw == b"0" and props["flag"].default.raw == b"false"
    assert json.loads(props["flag"].example.raw) == {"b": [1, "x"]}
    assert list(theirs.dependencies["a"].property) == ["b", "c"]
    assert list(theirs.dependencies["d"].schema.required) == ["e"]
    assert isinstance(decode_message(PROPS, raw)["properties"]["size"]["maximum"], int)
