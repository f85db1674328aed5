"""Protobuf watch events as the WatchEncoder writes them, read back with kube's own definitions
(tests/support/kubeproto): objects, BOOKMARK and ERROR events, PartialObjectMetadata, and one
encoding per event and form shared by every watcher."""

from __future__ import annotations

import io

from gateway.endpoints.negotiation import MediaType
from gateway.endpoints.tableconvert import partial_metadata
from gateway.endpoints.watch import INITIAL_EVENTS_END, WatchEncoder
from gateway.storage.errors import TooOldResourceVersionError
from gateway.storage.interface import EventType, WatchEvent
from tests.support import kubeproto

PROTOBUF = MediaType("protobuf")
CM = {"apiVersion": "v1", "kind": "ConfigMap",
      "metadata": {"name": "c", "namespace": "n", "resourceVersion": "12"}, "data": {"k": "v"}}


def frames(*encoded: bytes) -> list:
    return kubeproto.read_frames(io.BytesIO(b"".join(encoded)), len(encoded))


def test_object_events_and_their_one_encoding() -> None:
    first = WatchEncoder("ConfigMap", "v1", PROTOBUF)
    second = WatchEncoder("ConfigMap", "v1", PROTOBUF)
    event = WatchEvent(EventType.MODIFIED, "/core/configmaps/n/c", CM, 12)
    encoded = first.encode(event)
    assert second.encode(event) is encoded  # made once, shared by every watcher of the form
    json_encoder = WatchEncoder("ConfigMap", "v1", MediaType("json"))
    assert json_encoder.encode(event).startswith(b'{"type":"MODIFIED"')  # another form
    (frame,) = frames(encoded)
    assert frame.type == "MODIFIED"
    cm = kubeproto.decode(frame.object.raw, kubeproto.CORE + "ConfigMap", "v1", "ConfigMap")
    assert (cm.metadata.name, cm.metadata.resourceVersion, dict(cm.data)) == ("c", "12",
                                                                             {"k": "v"})


def test_bookmark_and_error_events() -> None:
    encoder = WatchEncoder("ConfigMap", "v1", PROTOBUF)
    bookmark = encoder.encode(WatchEvent(EventType.BOOKMARK, "", None, 40,
                                         initial_events_end=True))
    error = encoder.encode(WatchEvent(EventType.ERROR, "", None, 0,
                                      error=TooOldResourceVersionError(3, 20, 40)))
    marked, failed = frames(bookmark, error)
    assert marked.type == "BOOKMARK"
    cm = kubeproto.decode(marked.object.raw, kubeproto.CORE + "ConfigMap", "v1", "ConfigMap")
    assert cm.metadata.resourceVersion == "40"
    assert dict(cm.metadata.annotations) == {INITIAL_EVENTS_END: "true"}
    assert failed.type == "ERROR"
    status = kubeproto.decode(failed.object.raw, kubeproto.META + "Status", "v1", "Status")
    assert (status.code, status.reason, status.status) == (410, "Expired", "Failure")
    assert status.message.startswith("too old resource version: 3")


def test_partial_object_metadata_events() -> None:
    """client-go's metadata informers watch as PartialObjectMetadata in protobuf; bookmarks
    are transformed too, as kube's embedded encoder transforms every object."""
    media = MediaType("protobuf", "PartialObjectMetadata")
    encoder = WatchEncoder("ConfigMap", "v1", media, lambda obj, first: partial_metadata(obj))
    added = encoder.encode(WatchEvent(EventType.ADDED, "/core/configmaps/n/c", CM, 12))
    bookmark = encoder.encode(WatchEvent(EventType.BOOKMARK, "", None, 13))
    for frame, name, rv in zip(frames(added, bookmark), ("c", ""), ("12", "13"), strict=True):
        partial = kubeproto.decode(frame.object.raw, kubeproto.META + "PartialObjectMetadata",
                                   "meta.k8s.io/v1", "PartialObjectMetadata")
        assert (partial.metadata.name, partial.metadata.resourceVersion) == (name, rv)
