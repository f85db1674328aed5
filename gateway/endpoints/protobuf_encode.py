"""Writing Kubernetes protobuf (application/vnd.kubernetes.protobuf): objects, lists and Status
answers in kube's envelope, and watch events in kube's stream framing.

An object goes out as kube-apiserver's protobuf serializer writes it: the magic ``k8s\\0``, then
a runtime.Unknown whose typeMeta names the apiVersion and kind, whose raw is the object's own
message, and whose contentEncoding and contentType are empty (Go writes them all the same). The
message is made from the JSON-shaped object with the field tables of protobuf_types, in field
number order as Go's generated Marshal lays them out: a singular field that is not a pointer
always (empty or zero when the object lacks it), a pointer, list or map only when set, map
entries sorted by key.

A watch stream is a run of frames: a 4-byte big-endian length, then a meta/v1 WatchEvent
{type, object: RawExtension{raw: the object's full encoding, envelope included}}, the event
itself written bare (kube's raw serializer, no magic, no envelope).
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from gateway.endpoints.protobuf import MAGIC, ProtobufError, message_for
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
from gateway.storage.codec import dumps

_TIME, _MICRO = META + "Time", META + "MicroTime"
_INT_OR_STRING, _QUANTITY = AM + "util.intstr.IntOrString", AM + "api.resource.Quantity"
_RAW, _FIELDS = AM + "runtime.RawExtension", META + "FieldsV1"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SECOND = timedelta(seconds=1)
_WIRE = {"string": 2, "bytes": 2, "bool": 0, "int32": 0, "int64": 0, "uint32": 0, "uint64": 0,
         "double": 1, "float": 5}
_ONE_BYTE = [bytes((n,)) for n in range(128)]

Object = dict[str, Any]


def _varint(value: int) -> bytes:
    """Go's encodeVarint: a negative int32/int64 is its 64-bit two's complement (ten bytes)."""
    if 0 <= value < 128:
        return _ONE_BYTE[value]
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _delimited(key: bytes, data: bytes) -> bytes:
    return key + _varint(len(data)) + data


# -- scalars and the types whose JSON is not an object --------------------------------------------


def _scalar_writer(kind: str) -> Callable[[Any], bytes]:
    """The value bytes of a scalar (after its key); None is the zero value."""
    if kind == "string":
        return lambda v: _delimited(b"", (v or "").encode())
    if kind == "bytes":
        return lambda v: _delimited(b"", base64.b64decode(v or ""))
    if kind == "bool":
        return lambda v: b"\x01" if v else b"\x00"
    if kind in ("int32", "int64", "uint32", "uint64"):
        return lambda v: _varint(int(v or 0))
    if kind == "double":
        return lambda v: struct.pack("<d", float(v or 0))
    if kind == "float":
        return lambda v: struct.pack("<f", float(v or 0))
    raise ProtobufError(f"unsupported scalar type {kind}")


def _seconds(value: str) -> tuple[int, int]:
    """An RFC 3339 time as (Unix seconds, nanoseconds), as Go's Time.Unix and Nanosecond."""
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _SECOND, moment.microsecond * 1000


def _special(name: str, value: Any) -> bytes:
    """The message bytes of a type kube marshals by hand (None: its zero value)."""
    if name in (_TIME, _MICRO):
        if not value:
            return b""  # the zero time marshals to nothing
        seconds, nanos = _seconds(value)
        return b"\x08" + _varint(seconds) + b"\x10" + _varint(nanos if name == _MICRO else 0)
    if name == _INT_OR_STRING:
        if isinstance(value, str):
            return b"\x08\x01\x10\x00" + _delimited(b"\x1a", value.encode())
        return b"\x08\x00\x10" + _varint(int(value or 0)) + b"\x1a\x00"
    if name == _QUANTITY:
        return _delimited(b"\x0a", str(value if value is not None else "0").encode())
    if name in (_RAW, _FIELDS, JSON_MESSAGE):  # JSON text; JSON's null is an empty raw
        return b"" if value is None else _delimited(b"\x0a", dumps(value))
    raise ProtobufError(f"unsupported message {name}")


_SPECIAL = frozenset({_TIME, _MICRO, _INT_OR_STRING, _QUANTITY, _RAW, _FIELDS, JSON_MESSAGE})


def _shaped(shape: dict[str, str], value: Any) -> Any:
    """The fields of a JSONSchemaPropsOr* message from its JSON, as its Go UnmarshalJSON
    fills them: a list, an object (with ``allows`` true where there is one) or a bool."""
    if isinstance(value, list) and "list" in shape:
        return {shape["list"]: value}
    if isinstance(value, dict) and "object" in shape:
        return {shape["object"]: value, **({shape["bool"]: True} if "bool" in shape else {})}
    if isinstance(value, bool) and "bool" in shape:
        return {shape["bool"]: value}
    if value is None:
        return {}
    raise ProtobufError(f"unexpected JSON {type(value).__name__} for {', '.join(shape)}")


# -- messages -------------------------------------------------------------------------------------

#: How a field is written: always (a singular value, the zero one when unset), when set (a
#: pointer, or a []byte, which Go also leaves out when nil), each item of a list or of a map
#: (sorted by key), or as a message made of the parent's own fields (an embedded struct).
ALWAYS, WHEN_SET, EACH, EACH_ENTRY, EMBEDDED = range(5)
#: One field of a message, ready to write: (JSON name, key bytes, how, value writer).
_Field = tuple[str, bytes, int, Callable[[Any], bytes]]
_PLANS: dict[str, list[_Field]] = {}


def _value_writer(kind: str) -> Callable[[Any], bytes]:
    if "." in kind:
        return lambda v: _delimited(b"", encode_message(kind, v))
    return _scalar_writer(kind)


def _map_entry_writer(value_kind: str) -> Callable[[tuple[str, Any]], bytes]:
    value_key, value = _key(2, _WIRE.get(value_kind, 2)), _value_writer(value_kind)

    def entry(item: tuple[str, Any]) -> bytes:
        return _delimited(b"", _delimited(b"\x0a", item[0].encode()) + value_key + value(item[1]))

    return entry


def _plan(name: str) -> list[_Field]:
    """The fields of ``name`` in number order, each with its key and writer (made once)."""
    plan = _PLANS.get(name)
    if plan is not None:
        return plan
    table = MESSAGES.get(name)
    if table is None:
        raise ProtobufError(f"unknown message {name}")
    plan = []
    for number in sorted(table):
        spec = table[number]
        json_name, kind = spec[0], spec[1]
        flag = spec[2] if len(spec) > 2 else ""
        key = _key(number, _WIRE.get(kind, 2))
        if kind.startswith(MAP):
            plan.append((json_name, key, EACH_ENTRY, _map_entry_writer(kind[len(MAP):])))
        elif flag == INLINE:
            plan.append((json_name, key, EMBEDDED, _value_writer(kind)))
        elif flag == REPEATED:
            plan.append((json_name, key, EACH, _value_writer(kind)))
        else:
            how = WHEN_SET if flag == OPTIONAL or kind == "bytes" else ALWAYS
            plan.append((json_name, key, how, _value_writer(kind)))
    _PLANS[name] = plan
    return plan


def encode_message(name: str, obj: Any) -> bytes:
    """The message ``name`` made of the JSON-shaped ``obj`` (None or {}: every field unset)."""
    if name in _SPECIAL:
        return _special(name, obj)
    if name in LIST_MESSAGES and isinstance(obj, list):
        obj = {"items": obj}
    elif name in SHAPED_MESSAGES:
        obj = _shaped(SHAPED_MESSAGES[name], obj)
    if obj is None:
        obj = {}
    elif not isinstance(obj, dict):
        raise ProtobufError(f"{name} is not an object")
    out = bytearray()
    for json_name, key, how, write in _plan(name):
        if how == EMBEDDED:
            out += key + write(obj)
            continue
        value = obj.get(json_name)
        if how == ALWAYS or (how == WHEN_SET and value is not None):
            out += key + write(value)
        elif how == EACH:
            for item in value or ():
                out += key + write(item)
        elif how == EACH_ENTRY and value:
            for item in sorted(value.items()):
                out += key + write(item)
    return bytes(out)


# -- what goes on the wire ------------------------------------------------------------------------


def has_message(api_version: str, kind: str) -> bool:
    """Whether the gateway can write ``kind`` of ``api_version`` as protobuf."""
    return message_for(api_version, kind) in MESSAGES


def encode_object(obj: Object) -> bytes:
    """An object (or list, or Status) as kube's protobuf serializer writes it: magic, then
    runtime.Unknown{typeMeta{apiVersion, kind}, raw, contentEncoding "", contentType ""}."""
    api_version, kind = obj.get("apiVersion") or "", obj.get("kind") or ""
    try:
        raw = encode_message(message_for(api_version, kind), obj)
    except (ValueError, TypeError, AttributeError) as err:  # ProtobufError is a ValueError
        raise ProtobufError(f"cannot write {kind} as protobuf: {err}") from None
    type_meta = _delimited(b"\x0a", api_version.encode()) + _delimited(b"\x12", kind.encode())
    return MAGIC + _delimited(b"\x0a", type_meta) + _delimited(b"\x12", raw) + b"\x1a\x00\x22\x00"


def watch_frame(event_type: str, embedded: bytes) -> bytes:
    """One event of a protobuf watch stream: the length, then WatchEvent{type, object{raw}}."""
    event = _delimited(b"\x0a", event_type.encode()) + \
        _delimited(b"\x12", _delimited(b"\x0a", embedded))
    return struct.pack(">I", len(event)) + event
