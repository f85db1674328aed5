"""Where a proxied watch may end (gateway/aggregator/watchframes.py): only between two whole
events, in JSON or protobuf framing, however the bytes were split into chunks; never for a
response that is not a watch or whose framing is unknown."""

from __future__ import annotations

import pytest

from gateway.aggregator.watchframes import WatchFrames, watch_frames

JSON = [("Content-Type", "application/json")]
PROTOBUF = [("content-type", "application/vnd.kubernetes.protobuf;stream=watch")]


def boundaries(frames: WatchFrames, chunks: list[bytes]) -> list[bool]:
    out = []
    for chunk in chunks:
        frames.feed(chunk)
        out.append(frames.between_events)
    return out


def test_only_a_watch_with_known_framing_is_followed() -> None:
    assert watch_frames("list", JSON) is None
    assert watch_frames("get", PROTOBUF) is None
    assert watch_frames("watch", [("Content-Type", "text/plain")]) is None
    assert watch_frames("watch", []) is None
    assert watch_frames("watch", JSON) is not None
    assert watch_frames("watch", PROTOBUF) is not None


def test_json_events_end_with_their_newline() -> None:
    frames = watch_frames("watch", JSON)
    assert frames is not None and frames.between_events  # nothing passed yet
    event = b'{"type":"ADDED","object":{"metadata":{"name":"a"}}}\n'
    assert boundaries(frames, [event, event[:10], event[10:], event + event[:5]]) == [
        True, False, True, False]


def frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


@pytest.mark.parametrize("split", [1, 2, 3, 5, 7, 64])
def test_protobuf_frames_whatever_the_chunks(split: int) -> None:
    stream = frame(b"k8s\x00" + b"x" * 40) + frame(b"") + frame(b"\n" * 300)
    ends = {4 + 44, 4 + 44 + 4, len(stream)}
    frames = watch_frames("watch", PROTOBUF)
    assert frames is not None
    passed = 0
    for chunk in (stream[i:i + split] for i in range(0, len(stream), split)):
        frames.feed(chunk)
        passed += len(chunk)
        assert frames.between_events == (passed in ends), passed
