"""kube's opaque CEL types (Quantity, IP, CIDR, URL, format, the authorizer's checks) as
protobuf messages, the only values of their own a Python function can hand cel-expr-python.

Each type is a message of kube's type name (``net.IP``, ``kubernetes.Quantity``,
``kubernetes.authorization.Decision``...), so ``type(ip('::1'))`` and the checker's words name it
as kube does. A message holds what its functions need in one string field (``opaque``), in a
canonical form where ``==`` must mean what kube's Equal means (a Quantity's exact value, an
address in netip's form). Every environment's descriptor pool gets these files (``add_to``);
the values the functions make come from one pool of their own, and a value coming back is
recognised by its type name, never its class (the runtime hands back instances of whatever
pool it holds).
"""

from __future__ import annotations

from typing import Any

from cel_expr_python import cel
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_FD = descriptor_pb2.FieldDescriptorProto
#: The field every opaque message keeps its value in.
FIELD = "opaque"

QUANTITY = "kubernetes.Quantity"
URL = "kubernetes.URL"
FORMAT = "kubernetes.NamedFormat"
IP = "net.IP"
CIDR = "net.CIDR"
AUTHORIZER = "kubernetes.authorization.Authorizer"
PATH_CHECK = "kubernetes.authorization.PathCheck"
GROUP_CHECK = "kubernetes.authorization.GroupCheck"
RESOURCE_CHECK = "kubernetes.authorization.ResourceCheck"
DECISION = "kubernetes.authorization.Decision"
ALL = (QUANTITY, URL, FORMAT, IP, CIDR, AUTHORIZER, PATH_CHECK, GROUP_CHECK, RESOURCE_CHECK,
       DECISION)


def _files() -> list[descriptor_pb2.FileDescriptorProto]:
    """One file per package, each message with its one string field."""
    packages: dict[str, list[str]] = {}
    for full in ALL:
        package, _, name = full.rpartition(".")
        packages.setdefault(package, []).append(name)
    files = []
    for package, names in packages.items():
        proto = descriptor_pb2.FileDescriptorProto(
            name=f"gateway/cel/{package.replace('.', '/')}/opaque.proto", package=package,
            syntax="proto3")
        for name in names:
            message = proto.message_type.add(name=name)
            message.field.add(name=FIELD, json_name=FIELD, number=1,
                              label=_FD.LABEL_OPTIONAL, type=_FD.TYPE_STRING)
        files.append(proto)
    return files


_FILES = _files()


def add_to(pool: descriptor_pool.DescriptorPool) -> descriptor_pool.DescriptorPool:
    """``pool`` with the opaque types in it."""
    for proto in _FILES:
        pool.Add(proto)
    return pool


_POOL = add_to(descriptor_pool.DescriptorPool())
_CLASSES = {full: message_factory.GetMessageClass(_POOL.FindMessageTypeByName(full))
            for full in ALL}


def cel_type(full: str) -> cel.Type:
    return cel.Type(full)


def make(full: str, value: str) -> Any:
    """A value of an opaque type."""
    return _CLASSES[full](**{FIELD: value})


def type_name(value: Any) -> str:
    """The opaque type of a value the runtime hands back ("" for anything else)."""
    descriptor = getattr(value, "DESCRIPTOR", None)
    return descriptor.full_name if descriptor is not None else ""


def value_of(value: Any, full: str) -> str:
    """The string an opaque value holds; TypeError (no such overload) for another type."""
    if type_name(value) != full:
        raise TypeError("no such overload")
    return getattr(value, FIELD)
