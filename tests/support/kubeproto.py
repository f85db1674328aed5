"""A Kubernetes protobuf reader that shares nothing with the gateway: kube's own .proto files
(tests/data/kubeproto, trimmed from kubernetes/api, apimachinery, kube-aggregator and
apiextensions-apiserver v0.32.0) compiled by protoc (grpcio-tools) once per test process, their
messages made by the protobuf runtime.

The k8s-proto package on PyPI would be the ready-made form of this, but it pins protobuf<4
(the gateway needs protobuf>=4.21), and its 2019 generated modules cannot be imported by the
protobuf runtime of today (upb refuses descriptors made in Python)."""

from __future__ import annotations

import struct
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

PROTOS = Path(__file__).resolve().parent.parent / "data" / "kubeproto"
MAGIC = b"k8s\x00"
META = "k8s.io.apimachinery.pkg.apis.meta.v1."
CORE = "k8s.io.api.core.v1."


@cache
def _pool() -> descriptor_pool.DescriptorPool:
    files = sorted(str(p.relative_to(PROTOS)) for p in PROTOS.rglob("*.proto"))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "kube.pb"
        subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTOS}",
                        "--include_imports", f"--descriptor_set_out={out}", *files],
                       check=True, capture_output=True)
        descriptors = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for file in descriptors.file:
        pool.Add(file)
    return pool


def message_class(full_name: str) -> type[Message]:
    return message_factory.GetMessageClass(_pool().FindMessageTypeByName(full_name))


def message_names() -> list[str]:
    """Every message kube's trimmed files define (full names)."""
    names: list[str] = []
    for file in (str(p.relative_to(PROTOS)) for p in PROTOS.rglob("*.proto")):
        descriptor = _pool().FindFileByName(file)
        names += [m.full_name for m in descriptor.message_types_by_name.values()]
    return names


def parse(full_name: str, data: bytes) -> Any:
    message = message_class(full_name)()
    message.ParseFromString(data)
    return message


def unwrap(body: bytes) -> Any:
    """The runtime.Unknown envelope of a protobuf body (after kube's magic)."""
    assert body[:4] == MAGIC, body[:16]
    return parse("k8s.io.apimachinery.pkg.runtime.Unknown", body[4:])


def decode(body: bytes, full_name: str, api_version: str, kind: str) -> Any:
    """The object in ``body``, read as kube's message ``full_name``, after checking that the
    envelope names ``api_version`` and ``kind`` (and no encoding or content type, as kube)."""
    envelope = unwrap(body)
    assert (envelope.typeMeta.apiVersion, envelope.typeMeta.kind) == (api_version, kind), \
        envelope.typeMeta
    assert (envelope.contentEncoding, envelope.contentType) == ("", "")
    return parse(full_name, envelope.raw)


def read_frames(stream: Any, count: int) -> list[Any]:
    """``count`` meta/v1 WatchEvents from a protobuf watch stream: each a 4-byte big-endian
    length and the event."""
    events = []
    for _ in range(count):
        (length,) = struct.unpack(">I", _read_exactly(stream, 4))
        events.append(parse(META + "WatchEvent", _read_exactly(stream, length)))
    return events


def _read_exactly(stream: Any, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            raise EOFError(f"stream ended after {len(data)} of {size} bytes")
        data += chunk
    return data
