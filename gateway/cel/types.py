"""The CEL types of a structural schema, and the values ``self`` is bound to.

kube gives every schema node a declared type (apiserver pkg/cel/common/schemas.go,
SchemaDeclType): integer → int, number → double, boolean → bool, string → string (bytes,
duration or timestamp for the formats byte, duration, date and date-time), array → list,
object with additionalProperties → map(string, T), object → an object type whose fields are the
properties with a CEL name (pkg/cel/escaping.go), x-kubernetes-int-or-string → dyn. A node
without a type (only x-kubernetes-preserve-unknown-fields) has no CEL type: its rules are not
run and a parent's rule cannot name it. The root of a resource and embedded resources also get
``apiVersion``, ``kind`` and ``metadata.name``/``metadata.generateName``.

For the type checker, object types become protobuf messages built on the fly (cel-expr-python
checks field selections against message descriptors, with cel-go's wording). At run time the
values are plain maps (pkg/cel/common/values.go): an absent or null property is absent (so
``self.x`` is "no such key: x"), keys are the escaped names, date-time strings are timestamps.
"""

from __future__ import annotations

import base64
import datetime
import itertools
import re
from dataclasses import dataclass, field
from typing import Any

from cel_expr_python import cel
from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    duration_pb2,
    struct_pb2,
    timestamp_pb2,
)

from gateway.apimachinery.gowords import parse_duration
from gateway.cel import opaque

T = cel.Type
_FD = descriptor_pb2.FieldDescriptorProto
_RESERVED = frozenset({
    "true", "false", "null", "in", "as", "break", "const", "continue", "else", "for",
    "function", "if", "import", "let", "loop", "package", "namespace", "return", "var",
    "void", "while"})
_SIMPLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EXPAND = re.compile(r"__|[-./]|[^A-Za-z0-9_]")
_WORDS = {"__": "__underscores__", ".": "__dot__", "-": "__dash__", "/": "__slash__"}
_SCALARS = {"int": T.INT, "double": T.DOUBLE, "bool": T.BOOL, "string": T.STRING,
            "bytes": T.BYTES, "timestamp": T.TIMESTAMP, "duration": T.DURATION, "dyn": T.DYN}
_PROTO_SCALARS = {"int": _FD.TYPE_INT64, "double": _FD.TYPE_DOUBLE, "bool": _FD.TYPE_BOOL,
                  "string": _FD.TYPE_STRING, "bytes": _FD.TYPE_BYTES}
_PROTO_MESSAGES = {"timestamp": ".google.protobuf.Timestamp",
                   "duration": ".google.protobuf.Duration", "dyn": ".google.protobuf.Value",
                   "list": ".google.protobuf.ListValue", "map": ".google.protobuf.Struct"}
_WELL_KNOWN = (timestamp_pb2, duration_pb2, struct_pb2)
_counter = itertools.count(1)


def escape(name: str) -> str | None:
    """pkg/cel/escaping.go Escape: the CEL name of a property, None when it has none."""
    if not name or name[0].isdigit():
        return None
    if name in _RESERVED:
        return f"__{name}__"
    if _SIMPLE.fullmatch(name) and "__" not in name:
        return name
    parts = []
    for match in _EXPAND.finditer(name):
        if match.group() not in _WORDS:
            return None
        parts.append((match.start(), match.end(), _WORDS[match.group()]))
    out, last = [], 0
    for start, end, word in parts:
        out.append(name[last:start] + word)
        last = end
    return "".join(out) + name[last:]


@dataclass(eq=False)
class Decl:
    """A CEL type declared for a schema node (kube's DeclType)."""

    kind: str  # int double bool string bytes timestamp duration dyn list map object
    elem: Decl | None = None
    #: object fields: property name → (CEL name, type)
    fields: dict[str, tuple[str, Decl]] = field(default_factory=dict)
    #: an object type's message name in its package, when it has one of its own
    #: (kube's hand-made types: ``AdmissionRequest``); else a generated one
    name: str = ""

    @property
    def item(self) -> Decl:
        """A list's or a map's element type (decl_type makes those only with one)."""
        assert self.elem is not None
        return self.elem


def types_of(schema: dict) -> list[str]:
    kind = schema.get("type")
    return kind if isinstance(kind, list) else [kind] if kind else []


def with_type_and_object_meta(schema: dict) -> dict:
    """WithTypeAndObjectMeta: the root of a resource always has apiVersion, kind, metadata."""
    props = schema.get("properties") or {}
    meta = props.get("metadata") or {}
    meta_props = meta.get("properties") or {}
    if ("string" in types_of(props.get("kind", {}))
            and "string" in types_of(props.get("apiVersion", {}))
            and "object" in types_of(meta) and meta_props
            and "string" in types_of(meta_props.get("name", {}))
            and "string" in types_of(meta_props.get("generateName", {}))):
        return schema
    string = {"type": "string"}
    extra = {"kind": string, "apiVersion": string, "metadata": {
        "type": "object", "properties": {"name": string, "generateName": string}}}
    return {**schema, "properties": {**props, **extra}}


def decl_type(schema: dict | None, root: bool = False) -> Decl | None:
    """SchemaDeclType: the CEL type of a node, None for a node CEL cannot see."""
    if not isinstance(schema, dict):
        return None
    if schema.get("x-kubernetes-int-or-string"):
        return Decl("dyn")
    if root:
        schema = with_type_and_object_meta(schema)
    kind = next(iter(types_of(schema)), "")
    if kind == "array":
        elem = decl_type(schema.get("items"), _embedded(schema.get("items")))
        return Decl("list", elem) if elem else None
    if kind == "object":
        return _object_decl(schema)
    if kind == "string":
        fmt = schema.get("format")
        return Decl({"byte": "bytes", "duration": "duration", "date": "timestamp",
                     "date-time": "timestamp"}.get(fmt, "string") if isinstance(fmt, str)
                    else "string")
    return {"boolean": Decl("bool"), "number": Decl("double"),
            "integer": Decl("int")}.get(kind)


def _embedded(schema: Any) -> bool:
    return isinstance(schema, dict) and bool(schema.get("x-kubernetes-embedded-resource"))


def _object_decl(schema: dict) -> Decl | None:
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        elem = decl_type(extra, _embedded(extra))
        return Decl("map", elem) if elem else None
    fields = {}
    for name, prop in (schema.get("properties") or {}).items():
        cel_name, prop_type = escape(name), decl_type(prop, _embedded(prop))
        if cel_name and prop_type:
            fields[name] = (cel_name, prop_type)
    return Decl("object", fields=fields)


class TypeBuilder:
    """Declares object types as protobuf messages in a pool of their own (one per schema)."""

    def __init__(self, package: str = "") -> None:
        self.package = package or f"k8s.crd{next(_counter)}"
        self.file = descriptor_pb2.FileDescriptorProto(
            name=f"{self.package.replace('.', '/')}.proto", package=self.package,
            syntax="proto2", dependency=[m.DESCRIPTOR.name for m in _WELL_KNOWN])
        self.names: dict[int, str] = {}

    def cel_type(self, decl: Decl) -> cel.Type:
        """The checker's type for a declared type."""
        if decl.kind == "list":
            return T.List(self.cel_type(decl.item))
        if decl.kind == "map":
            return T.Map(T.STRING, self.cel_type(decl.item))
        if decl.kind == "object":
            return T(self.message(decl))
        return _SCALARS[decl.kind]

    def message(self, decl: Decl) -> str:
        if id(decl) in self.names:
            return self.names[id(decl)]
        name = decl.name or f"Object{len(self.names) + 1}"
        self.names[id(decl)] = full = f"{self.package}.{name}"
        message = self.file.message_type.add(name=name)
        for number, (cel_name, prop) in enumerate(decl.fields.values(), start=1):
            self._field(message, cel_name, number, prop)
        return full

    def _field(self, message: Any, name: str, number: int, decl: Decl) -> None:
        label = _FD.LABEL_OPTIONAL
        if decl.kind == "list" and decl.item.kind not in ("list", "map"):
            label, decl = _FD.LABEL_REPEATED, decl.item
        elif decl.kind == "map" and decl.item.kind not in ("list", "map"):
            entry = message.nested_type.add(name=f"{_camel(name)}Entry")
            entry.options.map_entry = True
            self._field(entry, "key", 1, Decl("string"))
            self._field(entry, "value", 2, decl.item)
            message.field.add(name=name, json_name=name, number=number,
                              label=_FD.LABEL_REPEATED, type=_FD.TYPE_MESSAGE,
                              type_name=f".{self.package}.{message.name}.{entry.name}")
            return
        if decl.kind in _PROTO_SCALARS:
            message.field.add(name=name, json_name=name, number=number, label=label,
                              type=_PROTO_SCALARS[decl.kind])
            return
        type_name = (f".{self.message(decl)}" if decl.kind == "object"
                     else _PROTO_MESSAGES[decl.kind])
        message.field.add(name=name, json_name=name, number=number, label=label,
                          type=_FD.TYPE_MESSAGE, type_name=type_name)

    def pool(self, *others: TypeBuilder) -> descriptor_pool.DescriptorPool:
        """A pool with the well-known types, kube's opaque ones and the messages declared
        so far (here and in ``others``)."""
        pool = default_pool()
        for builder in (self, *others):
            pool.Add(builder.file)
        return pool


def default_pool() -> descriptor_pool.DescriptorPool:
    """A new pool with the well-known types and kube's opaque types (every environment's)."""
    pool = descriptor_pool.DescriptorPool()
    for module in _WELL_KNOWN:
        proto = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(proto)
        pool.Add(proto)
    return opaque.add_to(pool)


def _camel(name: str) -> str:
    """protoc's name for the entry message of a map field: CamelCase without underscores."""
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


# -- values --------------------------------------------------------------------------------


#: kinds whose values to_cel passes as they are, whatever they are
_AS_IS = frozenset({"dyn", "int", "bool", "string"})


def to_cel(value: Any, decl: Decl | None) -> Any:
    """UnstructuredToVal: the JSON value as the CEL runtime is given it."""
    if value is None or decl is None:
        return value
    kind = decl.kind
    if kind in _AS_IS:
        return value
    if kind == "object" and isinstance(value, dict):
        fields = decl.fields
        return {fields[k][0]: to_cel(v, fields[k][1])
                for k, v in value.items() if k in fields and v is not None}
    if kind == "map" and isinstance(value, dict):
        return {k: to_cel(v, decl.elem) for k, v in value.items()}
    if kind == "list" and isinstance(value, list):
        return [to_cel(v, decl.elem) for v in value]
    if isinstance(value, str):
        return _string_value(value, kind)
    if kind == "double" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


@dataclass(frozen=True, eq=False)
class FieldView:
    """The fields of an object node its rules can read (``self.x``, ``has(self.x)``,
    ``self.?x``), for a node whose rules never use the value as a whole.

    The rules see the same values either way, except when converting a field the rules do not
    read would fail: a date-time or a duration to_cel raises on or the CEL runtime refuses.
    ``unread_special`` lists the unread fields where such a value can hide; ``may_fail`` looks
    at them, and the caller converts the whole value when it says so.
    """

    fields: dict[str, tuple[str, Decl]]
    unread_special: tuple[tuple[str, Decl], ...]

    def to_cel(self, value: dict) -> dict:
        """to_cel of an object, with only the fields read (in the object's order, as to_cel)."""
        fields = self.fields
        return {fields[k][0]: to_cel(v, fields[k][1])
                for k, v in value.items() if k in fields and v is not None}

    def may_fail(self, value: dict) -> bool:
        return any(_may_fail(value.get(name), decl) for name, decl in self.unread_special)


def field_view(decl: Decl | None, names: set[str] | None) -> FieldView | None:
    """The view of an object type through the CEL names of the fields its rules read; None
    when the rules see it whole (not an object, ``self`` used whole, or every field read)."""
    if decl is None or decl.kind != "object" or names is None:
        return None
    fields = {k: f for k, f in decl.fields.items() if f[0] in names}
    if len(fields) == len(decl.fields):
        return None
    special = tuple((k, f[1]) for k, f in decl.fields.items()
                    if k not in fields and _special(f[1]))
    return FieldView(fields, special)


def _special(decl: Decl) -> bool:
    """Whether values of this type may hold a date-time or a duration."""
    if decl.kind in ("timestamp", "duration"):
        return True
    if decl.elem is not None:
        return _special(decl.elem)
    return any(_special(f[1]) for f in decl.fields.values())


#: to_cel raises OverflowError on some date-times of these years (0001-01-01T00:00:00+01:00:
#: fromisoformat reads it, datetime cannot hold it in UTC); they all begin so
_EDGE_YEARS = ("0001", "9999")
#: the CEL runtime refuses durations beyond 10,000 years (protobuf's range)
_DURATION_SECONDS_MAX = 315_576_000_000


def _may_fail(value: Any, decl: Decl) -> bool:
    """Whether to_cel of the value raises, or gives a value the CEL runtime refuses, because
    of a date-time or a duration in it (other values: the caller's check)."""
    if value is None:
        return False
    kind = decl.kind
    if kind == "timestamp":
        return isinstance(value, str) and value[:4] in _EDGE_YEARS
    if kind == "duration":
        return isinstance(value, str) and _duration_may_fail(value)
    if kind == "object" and isinstance(value, dict):
        fields = decl.fields
        return any(_may_fail(v, fields[k][1]) for k, v in value.items()
                   if k in fields and _special(fields[k][1]))
    if kind == "map" and isinstance(value, dict) and _special(decl.item):
        return any(_may_fail(v, decl.item) for v in value.values())
    if kind == "list" and isinstance(value, list) and _special(decl.item):
        return any(_may_fail(v, decl.item) for v in value)
    return False


def _duration_may_fail(text: str) -> bool:
    """parse_kube_duration raises something else than ValueError (a fraction or a number of
    hundreds of digits), or gives more than 10,000 years. Six characters cannot: Go's form
    stops at 292 years, "<n> <unit>" holds at most 99999 weeks."""
    if len(text) <= 6:
        return False
    try:
        duration = parse_kube_duration(text)
    except ValueError:
        return False  # kept as the string
    except Exception:
        return True
    return abs(duration.seconds) > _DURATION_SECONDS_MAX


def _string_value(value: str, kind: str) -> Any:
    try:
        if kind == "timestamp":
            return parse_timestamp(value)
        if kind == "duration":
            return parse_kube_duration(value)
        if kind == "bytes":
            return base64.b64decode(value, validate=True)
    except ValueError:
        return value
    return value


#: RFC 3339 as protobuf's Timestamp.FromJsonString reads it, in the form objects carry
_RFC3339 = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})"
                      r"(?:\.([0-9]{1,9}))?(?:Z|([+-])([0-9]{2}):([0-9]{2}))")
_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_EPOCH = datetime.datetime(1970, 1, 1)
_SECONDS_MIN, _SECONDS_MAX = -62135596800, 253402300799  # 0001-01-01, 9999-12-31T23:59:59


def parse_timestamp(text: str) -> timestamp_pb2.Timestamp:
    """strfmt.ParseDateTime (RFC 3339 and its looser ISO 8601 forms), or a date (format: date)."""
    stamp = _fast_timestamp(text)
    return stamp if stamp is not None else _parse_timestamp(text)


def _parse_timestamp(text: str) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    try:
        stamp.FromJsonString(text)
        return stamp
    except ValueError:
        pass
    moment = datetime.datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    stamp.FromDatetime(moment)
    return stamp


def _fast_timestamp(text: str) -> timestamp_pb2.Timestamp | None:
    """_parse_timestamp's answer for a plain RFC 3339 date-time (FromJsonString's, computed as
    it does without its strptime) or date (fromisoformat's: FromJsonString refuses them all);
    None for anything else, or anything refused, left to _parse_timestamp."""
    match = _RFC3339.fullmatch(text)
    if match is None:
        date = _DATE.fullmatch(text)
        if date is None:
            return None
        try:
            delta = datetime.datetime(int(date[1]), int(date[2]), int(date[3])) - _EPOCH
        except ValueError:
            return None
        return timestamp_pb2.Timestamp(seconds=delta.days * 86400)
    year, month, day, hour, minute, second, fraction, sign, off_h, off_m = match.groups()
    try:
        delta = datetime.datetime(int(year), int(month), int(day), int(hour), int(minute),
                                  int(second)) - _EPOCH
    except ValueError:
        return None
    seconds = delta.seconds + delta.days * 86400
    nanos = round(float("0." + fraction) * 1e9) if fraction else 0
    if sign == "+":
        seconds -= (int(off_h) * 60 + int(off_m)) * 60
    elif sign == "-":
        seconds += (int(off_h) * 60 + int(off_m)) * 60
    if not (_SECONDS_MIN <= seconds <= _SECONDS_MAX and nanos < 1_000_000_000):
        return None
    return timestamp_pb2.Timestamp(seconds=seconds, nanos=nanos)


_LONG_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "second": 1, "m": 60,
               "minute": 60, "h": 3600, "hour": 3600, "d": 86400, "day": 86400,
               "w": 604800, "wk": 604800, "week": 604800}


def parse_kube_duration(text: str) -> duration_pb2.Duration:
    """strfmt.ParseDuration: Go's time.ParseDuration, else "<n> <unit>" with days and weeks."""
    try:
        seconds = parse_duration(text)
    except ValueError:
        match = re.fullmatch(r"(\d+)\s*([a-zµ]+?)s?", text.strip())
        if not match or match.group(2) not in _LONG_UNITS:
            raise
        seconds = int(match.group(1)) * _LONG_UNITS[match.group(2)]
    out = duration_pb2.Duration()
    out.FromNanoseconds(round(seconds * 1e9))
    return out
