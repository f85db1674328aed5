"""Reading Kubernetes protobuf request bodies (application/vnd.kubernetes.protobuf).

kubectl's typed commands (``create configmap``, ``create secret``, ``create token``, ``auth
can-i``...) send built-in objects as protobuf. A body is the magic ``k8s\\0`` followed by a
runtime.Unknown envelope: the object's apiVersion and kind, and the object's own message. The
message is turned into the same JSON-shaped dict a JSON body gives, using the field table in
protobuf_types; as when kube-apiserver decodes into Go types, empty scalar fields are left out.
Responses are always JSON (every such client also accepts it).
"""

from __future__ import annotations

import base64
import json
import struct
from datetime import UTC, datetime
from typing import Any

from gateway.endpoints import status
from gateway.endpoints.protobuf_types import AM, INLINE, MAP, MESSAGES, META, REPEATED

PROTOBUF = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

_TIME, _MICRO = META + "Time", META + "MicroTime"
_SPECIAL = {
    _TIME, _MICRO, AM + "util.intstr.IntOrString", AM + "api.resource.Quantity",
    AM + "runtime.RawExtension", META + "FieldsV1", META + "Duration",
}
#: API groups whose protobuf package is not the group's first word.
_PACKAGE_OF_GROUP = {"": "core", "rbac.authorization.k8s.io": "rbac"}


class ProtobufError(ValueError):
    pass


# -- the wire format ----------------------------------------------------------------------------


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result, shift = 0, 0
    while True:
        if pos >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 70:
            raise ProtobufError("varint too long")


def _fields(data: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, raw value) of every field of a message, in order."""
    out, pos = [], 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise ProtobufError("truncated field")
            value, pos = data[pos:pos + length], pos + length
        elif wire == 5:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
        out.append((number, wire, value))
    return out


def _signed(value: int, bits: int) -> int:
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


def _scalar(kind: str, wire: int, raw: Any) -> Any:
    if kind == "string":
        return raw.decode()
    if kind == "bytes":
        return base64.b64encode(raw).decode()
    if kind == "bool":
        return bool(raw)
    if kind in ("int32", "int64"):
        return _signed(raw, 64)
    if kind in ("uint32", "uint64"):
        return raw
    if kind == "double":
        return struct.unpack("<d", raw)[0]
    if kind == "float":
        return struct.unpack("<f", raw)[0]
    raise ProtobufError(f"unsupported scalar type {kind}")


# -- messages -----------------------------------------------------------------------------------


def _special(name: str, data: bytes) -> Any:
    """Types whose JSON form is not an object: times, int-or-string, quantities, raw JSON."""
    fields = {n: v for n, _, v in _fields(data)}
    if name in (_TIME, _MICRO):
        seconds, nanos = fields.get(1, 0), fields.get(2, 0)
        if not seconds and not nanos:
            return None
        moment = datetime.fromtimestamp(_signed(seconds, 64) + nanos / 1e9, UTC)
        if name == _MICRO:
            return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    if name.endswith("IntOrString"):
        return _signed(fields.get(2, 0), 64) if fields.get(1, 0) == 0 else \
            fields.get(3, b"").decode()
    if name.endswith("Quantity"):
        return fields.get(1, b"").decode()
    if name.endswith("Duration"):
        return f"{_signed(fields.get(1, 0), 64) / 1e9}s"
    raw = fields.get(1, b"")
    return json.loads(raw) if raw else {}


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == 0 or value is False or value == {}


def decode_message(name: str, data: bytes) -> Any:
    if name in _SPECIAL:
        return _special(name, data)
    table = MESSAGES.get(name)
    if table is None:
        raise ProtobufError(f"unknown message {name}")
    out: dict[str, Any] = {}
    for number, wire, raw in _fields(data):
        spec = table.get(number)
        if spec is None:
            continue  # a field newer than our table: ignored, as unknown JSON fields are
        json_name, kind = spec[0], spec[1]
        flag = spec[2] if len(spec) > 2 else ""
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
    return {k: v for k, v in out.items() if not _empty(v)}


def _map_entry(value_kind: str, raw: bytes) -> tuple[str, Any]:
    key, value = "", None
    for number, wire, field in _fields(raw):
        if number == 1:
            key = field.decode()
        elif number == 2:
            value = decode_message(value_kind, field) if "." in value_kind else \
                _scalar(value_kind, wire, field)
    if value is None:
        value = "" if value_kind in ("string", "bytes") else {}
    return key, value


def message_for(api_version: str, kind: str) -> str:
    """The protobuf message of a kind: k8s.io.api.<group's last word>.<version>.<Kind>."""
    if kind == "DeleteOptions":
        return META + "DeleteOptions"
    group, _, version = api_version.rpartition("/")
    package = _PACKAGE_OF_GROUP.get(group) or group.split(".")[0]
    return f"k8s.io.api.{package}.{version}.{kind}"


def decode_body(body: bytes) -> dict[str, Any]:
    """The object in a Kubernetes protobuf body, as JSON-shaped data (400 when it is not)."""
    try:
        if not body.startswith(MAGIC):
            raise ProtobufError("missing the k8s protobuf prefix")
        envelope = {n: v for n, _, v in _fields(body[len(MAGIC):])}
        type_meta = {n: v.decode() for n, _, v in _fields(envelope.get(1, b""))}
        api_version, kind = type_meta.get(1, ""), type_meta.get(2, "")
        obj = decode_message(message_for(api_version, kind), envelope.get(2, b""))
    except (ProtobufError, UnicodeDecodeError, ValueError, struct.error) as err:
        raise status.bad_request(f"unable to decode the protobuf body: {err}") from None
    if not isinstance(obj, dict):
        raise status.bad_request("the protobuf body does not hold an object")
    return {"apiVersion": api_version, "kind": kind, **obj}
