"""Reading Kubernetes protobuf request bodies (application/vnd.kubernetes.protobuf).

kubectl's typed commands (``create configmap``, ``create secret``, ``create token``, ``auth
can-i``...) send built-in objects as protobuf. A body is the magic ``k8s\\0`` followed by a
runtime.Unknown envelope: the object's apiVersion and kind, and the object's own message. The
message is turned into the same JSON-shaped dict a JSON body gives, using the field table in
protobuf_types; as when kube-apiserver decodes into Go types, empty scalar fields are left out.
Writing protobuf (responses, watch events) is protobuf_encode's, over the same tables.
"""

from __future__ import annotations

import base64
import json
import struct
from datetime import UTC, datetime, timedelta
from typing import Any

from gateway.apimachinery import status
from gateway.endpoints.protobuf_flags import APIEXTENSIONS, APIREGISTRATION
from gateway.endpoints.protobuf_types import (
    AM,
    INLINE,
    JSON_MESSAGE,
    LIST_MESSAGES,
    MAP,
    MESSAGES,
    META,
    META_V1BETA1,
    OPTIONAL,
    REPEATED,
    SHAPED_MESSAGES,
)

PROTOBUF = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

_TIME, _MICRO = META + "Time", META + "MicroTime"
_SPECIAL = {
    _TIME, _MICRO, AM + "util.intstr.IntOrString", AM + "api.resource.Quantity",
    AM + "runtime.RawExtension", META + "FieldsV1", META + "Duration", JSON_MESSAGE,
}
#: The wire type each field type must arrive with; Go's generated Unmarshal rejects any other
#: ("proto: wrong wireType = 0 for field Metadata"). Messages and maps are length-delimited.
_WIRE_OF = {
    "string": 2, "bytes": 2, "bool": 0, "int32": 0, "int64": 0, "uint32": 0, "uint64": 0,
    "double": 1, "float": 5,
}
_LENGTH_DELIMITED = 2
#: Field number → wire type of the special messages and of the runtime.Unknown envelope.
_SPECIAL_WIRES = {
    _TIME: {1: 0, 2: 0},  # seconds int64, nanos int32
    _MICRO: {1: 0, 2: 0},
    AM + "util.intstr.IntOrString": {1: 0, 2: 0, 3: 2},  # type, intVal, strVal
    AM + "api.resource.Quantity": {1: 2},  # string
    AM + "runtime.RawExtension": {1: 2},  # raw
    META + "FieldsV1": {1: 2},  # Raw
    META + "Duration": {1: 0},  # int64 nanoseconds
    JSON_MESSAGE: {1: 2},  # raw JSON text
}
_UNKNOWN_WIRES = {1: 2, 2: 2, 3: 2, 4: 2}  # typeMeta, raw, contentEncoding, contentType
_TYPE_META_WIRES = {1: 2, 2: 2}  # apiVersion, kind
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_GO_ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)  # time.Time{}: IsZero, its JSON is null
_MASK32, _MASK64 = (1 << 32) - 1, (1 << 64) - 1
#: API groups whose protobuf package is not the group's first word.
_PACKAGE_OF_GROUP = {"": "core", "rbac.authorization.k8s.io": "rbac"}
#: API groups whose messages are not k8s.io/api's: the extension servers' own packages.
_PREFIX_OF_GROUP = {"apiextensions.k8s.io": APIEXTENSIONS,
                    "apiregistration.k8s.io": APIREGISTRATION}
META_GROUP = "meta.k8s.io"
#: Kinds registered in every group version (unversioned), whose messages are apimachinery's.
_META_KINDS = frozenset({"Status", "DeleteOptions"})


class ProtobufError(ValueError):
    pass


# -- the wire format ----------------------------------------------------------------------------


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """A varint as Go reads it: at most ten bytes, kept to 64 bits."""
    result, shift = 0, 0
    while True:
        if shift >= 64:
            raise ProtobufError("varint too long")
        if pos >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result & _MASK64, pos
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, raw value) of every field of a message, in order."""
    out: list[tuple[int, int, Any]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = _fixed(data, pos, 8)
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise ProtobufError("truncated field")
            value, pos = data[pos:pos + length], pos + length
        elif wire == 5:
            value, pos = _fixed(data, pos, 4)
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
        out.append((number, wire, value))
    return out


def _fixed(data: bytes, pos: int, size: int) -> tuple[bytes, int]:
    if pos + size > len(data):
        raise ProtobufError("truncated field")
    return data[pos:pos + size], pos + size


def _known_fields(name: str, data: bytes, wires: dict[int, int]) -> dict[int, Any]:
    """The last value of each field in ``wires``, checked against its wire type; other fields
    are skipped, as Go's generated Unmarshal skips fields it does not know."""
    out: dict[int, Any] = {}
    for number, wire, value in _fields(data):
        expected = wires.get(number)
        if expected is None:
            continue
        if wire != expected:
            raise ProtobufError(f"wrong wire type {wire} for field {number} of {name}")
        out[number] = value
    return out


def _check_wire(message: str, field: str, kind: str, wire: int) -> None:
    """A field on the wire as another type is a malformed body (400), not a server error."""
    expected = _WIRE_OF.get(kind, _LENGTH_DELIMITED)  # messages and maps
    if wire != expected:
        raise ProtobufError(f"wrong wire type {wire} for field {field} of {message}")


def _signed(value: int, bits: int) -> int:
    """The low ``bits`` bits of a varint as a signed number (Go's int32(v) / int64(v))."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


def _scalar(kind: str, wire: int, raw: Any) -> Any:
    if kind == "string":
        return raw.decode()
    if kind == "bytes":
        return base64.b64encode(raw).decode()
    if kind == "bool":
        return raw != 0
    if kind == "int32":
        return _signed(raw, 32)
    if kind == "int64":
        return _signed(raw, 64)
    if kind == "uint32":
        return raw & _MASK32
    if kind == "uint64":
        return raw
    if kind in ("double", "float"):
        return _number(struct.unpack("<d" if kind == "double" else "<f", raw)[0])
    raise ProtobufError(f"unsupported scalar type {kind}")


def _number(value: float) -> float | int:
    """A whole float as an int, so that its JSON is Go's (float64 10 is ``10``, not ``10.0``;
    Go switches to an exponent at 1e21)."""
    return int(value) if value.is_integer() and abs(value) < 1e21 else value


# -- messages -----------------------------------------------------------------------------------


def _special(name: str, data: bytes) -> Any:
    """Types whose JSON form is not an object: times, int-or-string, quantities, raw JSON."""
    fields = _known_fields(name, data, _SPECIAL_WIRES[name])
    if name in (_TIME, _MICRO):
        seconds, nanos = _signed(fields.get(1, 0), 64), _signed(fields.get(2, 0), 32)
        if not seconds and not nanos:
            return None
        return _time(name, seconds, nanos)
    if name.endswith("IntOrString"):
        return _signed(fields.get(2, 0), 32) if fields.get(1, 0) == 0 else \
            fields.get(3, b"").decode()
    if name.endswith("Quantity"):
        return fields.get(1, b"").decode()
    if name.endswith("Duration"):
        return f"{_signed(fields.get(1, 0), 64) / 1e9}s"
    raw = fields.get(1, b"")
    if name == JSON_MESSAGE:  # any JSON value; an empty raw is Go's null
        return json.loads(raw) if raw else None
    return json.loads(raw) if raw else {}


def _time(name: str, seconds: int, nanos: int) -> str | None:
    """A Timestamp as kube-apiserver writes it back. metav1.Time's Unmarshal drops the nanos
    and its JSON is RFC 3339 in seconds; MicroTime's cuts the nanos to microseconds (toward
    zero, time.Duration.Truncate) and its JSON has six digits. Neither rounds."""
    micros = 0 if name == _TIME else abs(nanos) // 1000 * (1 if nanos >= 0 else -1)
    try:
        moment = _EPOCH + timedelta(seconds=seconds, microseconds=micros)
    except OverflowError:
        raise ProtobufError(f"time out of range: {seconds}s") from None
    if moment == _GO_ZERO_TIME:
        return None
    spec = "seconds" if name == _TIME else "microseconds"
    return moment.replace(tzinfo=None).isoformat(timespec=spec) + "Z"


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == 0 or value is False or value == {}


def decode_message(name: str, data: bytes) -> Any:
    if name in _SPECIAL:
        return _special(name, data)
    table = MESSAGES.get(name)
    if table is None:
        raise ProtobufError(f"unknown message {name}")
    out: dict[str, Any] = {}
    present: set[str] = set()  # pointer scalars on the wire: set in Go even when 0/false/""
    for number, wire, raw in _fields(data):
        spec = table.get(number)
        if spec is None:
            continue  # a field newer than our table: ignored, as unknown JSON fields are
        json_name, kind = spec[0], spec[1]
        flag = spec[2] if len(spec) > 2 else ""
        _check_wire(name, json_name, kind, wire)
        if kind.startswith(MAP):
            key, value = _map_entry(kind[len(MAP):], raw)
            out.setdefault(json_name, {})[key] = value
            continue
        value = decode_message(kind, raw) if "." in kind else _scalar(kind, wire, raw)
        if flag == REPEATED:
            out.setdefault(json_name, []).append(value)
        elif flag == INLINE and isinstance(value, dict):
            out.update(value)
        else:
            out[json_name] = value
            if flag == OPTIONAL:
                present.add(json_name)
    if name in LIST_MESSAGES:
        return out.get("items", [])
    if name in SHAPED_MESSAGES:
        return _unshaped(SHAPED_MESSAGES[name], out)
    return {k: v for k, v in out.items()
            if (k in present and v is not None) or not _empty(v)}


def _unshaped(shape: dict[str, str], fields: dict[str, Any]) -> Any:
    """The JSON of a JSONSchemaPropsOr* message, as its Go MarshalJSON picks it: the list if
    it has items, else the object if set, else the bool (false when unset), else null."""
    if "list" in shape and fields.get(shape["list"]):
        return fields[shape["list"]]
    if "object" in shape and fields.get(shape["object"]) is not None:
        return fields[shape["object"]]
    if "bool" in shape:
        return bool(fields.get(shape["bool"]))
    return None


def _map_entry(value_kind: str, raw: bytes) -> tuple[str, Any]:
    key, value = "", None
    for number, wire, field in _fields(raw):
        if number == 1:
            _check_wire("map entry", "key", "string", wire)
            key = field.decode()
        elif number == 2:
            _check_wire("map entry", "value", value_kind, wire)
            value = decode_message(value_kind, field) if "." in value_kind else \
                _scalar(value_kind, wire, field)
    if value is None:
        value = "" if value_kind in ("string", "bytes") else \
            [] if value_kind in LIST_MESSAGES else {}
    return key, value


def message_for(api_version: str, kind: str) -> str:
    """The protobuf message of a kind: k8s.io.api.<group's first word>.<version>.<Kind>, or
    the extension server's package for apiextensions and apiregistration; the meta.k8s.io
    kinds and the unversioned Status and DeleteOptions are apimachinery's."""
    if kind in _META_KINDS:
        return META + kind
    group, _, version = api_version.rpartition("/")
    if group == META_GROUP:
        if version == "v1beta1" and kind == "PartialObjectMetadataList":
            return META_V1BETA1 + kind
        return META + kind  # v1beta1's PartialObjectMetadata is v1's
    if group in _PREFIX_OF_GROUP:
        return f"{_PREFIX_OF_GROUP[group]}{version}.{kind}"
    package = _PACKAGE_OF_GROUP.get(group) or group.split(".")[0]
    return f"k8s.io.api.{package}.{version}.{kind}"


def decode_body(body: bytes) -> dict[str, Any]:
    """The object in a Kubernetes protobuf body, as JSON-shaped data (400 when it is not)."""
    try:
        if not body.startswith(MAGIC):
            raise ProtobufError("missing the k8s protobuf prefix")
        envelope = _known_fields("runtime.Unknown", body[len(MAGIC):], _UNKNOWN_WIRES)
        type_meta = _known_fields("runtime.TypeMeta", envelope.get(1, b""), _TYPE_META_WIRES)
        api_version, kind = type_meta.get(1, b"").decode(), type_meta.get(2, b"").decode()
        obj = decode_message(message_for(api_version, kind), envelope.get(2, b""))
    except (ProtobufError, UnicodeDecodeError, ValueError, struct.error) as err:
        raise status.bad_request(f"unable to decode the protobuf body: {err}") from None
    if not isinstance(obj, dict):
        raise status.bad_request("the protobuf body does not hold an object")
    return {"apiVersion": api_version, "kind": kind, **obj}
