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
    kind = (types_of(schema) or [None])[0]
    if kind == "array":
        elem = decl_type(schema.get("items"), _embedded(schema.get("items")))
        return Decl("list", elem) if elem else None
    if kind == "object":
        return _object_decl(schema)
    if kind == "string":
        fmt = schema.get("format")
        return Decl({"byte": "bytes", "duration": "duration", "date": "timestamp",
                     "date-time": "timestamp"}.get(fmt, "string"))
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

    def __init__(self) -> None:
        self.package = f"k8s.crd{next(_counter)}"
        self.file = descriptor_pb2.FileDescriptorProto(
            name=f"{self.package.replace('.', '/')}.proto", package=self.package,
            syntax="proto2", dependency=[m.DESCRIPTOR.name for m in _WELL_KNOWN])
        self.names: dict[int, str] = {}

    def cel_type(self, decl: Decl) -> cel.Type:
        """The checker's type for a declared type."""
        if decl.kind == "list":
            return T.List(self.cel_type(decl.elem))
        if decl.kind == "map":
            return T.Map(T.STRING, self.cel_type(decl.elem))
        if decl.kind == "object":
            return T(self.message(decl))
        return _SCALARS[decl.kind]

    def message(self, decl: Decl) -> str:
        if id(decl) in self.names:
            return self.names[id(decl)]
        name = f"Object{len(self.names) + 1}"
        self.names[id(decl)] = full = f"{self.package}.{name}"
        message = self.file.message_type.add(name=name)
        for number, (cel_name, prop) in enumerate(decl.fields.values(), start=1):
            self._field(message, cel_name, number, prop)
        return full

    def _field(self, message: Any, name: str, number: int, decl: Decl) -> None:
        label = _FD.LABEL_OPTIONAL
        if decl.kind == "list" and decl.elem.kind not in ("list", "map"):
            label, decl = _FD.LABEL_REPEATED, decl.elem
        elif decl.kind == "map" and decl.elem.kind not in ("list", "map"):
            entry = message.nested_type.add(name=f"{_camel(name)}Entry")
            entry.options.map_entry = True
            self._field(entry, "key", 1, Decl("string"))
            self._field(entry, "value", 2, decl.elem)
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

    def pool(self) -> descriptor_pool.DescriptorPool:
        """A pool with the well-known types and the messages declared so far."""
        pool = descriptor_pool.DescriptorPool()
        for module in _WELL_KNOWN:
            proto = descriptor_pb2.FileDescriptorProto()
            module.DESCRIPTOR.CopyToProto(proto)
            pool.Add(proto)
        pool.Add(self.file)
        return pool


def _camel(name: str) -> str:
    """protoc's name for the entry message of a map field: CamelCase without underscores."""
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


# -- values --------------------------------------------------------------------------------


def to_cel(value: Any, decl: Decl | None) -> Any:
    """UnstructuredToVal: the JSON value as the CEL runtime is given it."""
    if value is None or decl is None or decl.kind == "dyn":
        return value
    kind = decl.kind
    if kind == "object" and isinstance(value, dict):
        return {decl.fields[k][0]: to_cel(v, decl.fields[k][1])
                for k, v in value.items() if k in decl.fields and v is not None}
    if kind == "map" and isinstance(value, dict):
        return {k: to_cel(v, decl.elem) for k, v in value.items()}
    if kind == "list" and isinstance(value, list):
        return [to_cel(v, decl.elem) for v in value]
    if isinstance(value, str):
        return _string_value(value, kind)
    if kind == "double" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


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


def parse_timestamp(text: str) -> timestamp_pb2.Timestamp:
    """strfmt.ParseDateTime (RFC 3339 and its looser ISO 8601 forms), or a date (format: date)."""
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
