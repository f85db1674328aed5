"""Where a proxied watch stream may end: between two events.

A backend's watch body breaks off when the backend dies. kube's proxy (Go's ReverseProxy)
then aborts the client's connection, whatever it had passed on: over HTTP/2 that resets one
stream, which client-go takes for the watch's end; over HTTP/1.1, the gateway's only protocol,
it is a cut connection, which many clients (the Python client, curl, a reflector's HTTP/1.1
transport in some versions) report as an error. A watch, though, may end at any event
boundary: every client resumes from the last resourceVersion it saw, as after the server's
own timeout. So a watch cut exactly between two events is ended as a watch ends (the
terminating chunk); one cut inside an event is still aborted, since a partial event must not
pass for a whole one. Anything that is not a watch is aborted as before: a truncated list
that looked complete would be worse than an error.

The framing is known for kube's two watch encodings: JSON (each event one JSON document
followed by a newline) and protobuf (each event a 4-byte big-endian length and that many
bytes). Any other content type is treated as unframed: a cut is aborted.
"""

from __future__ import annotations

from typing import Any

_PROTOBUF = "application/vnd.kubernetes.protobuf"


class WatchFrames:
    """Fed every byte of a watch body passed on to the client, says whether what was passed
    ends between two events."""

    __slots__ = ("_inside", "_need", "_prefix", "json")

    def __init__(self, json: bool) -> None:
        self.json = json
        self._inside = False  # JSON: the last byte passed was not an event's newline
        self._need = 0  # protobuf: bytes still to come of the current frame's payload
        self._prefix = b""  # protobuf: the current frame's length bytes read so far

    @property
    def between_events(self) -> bool:
        return not (self._inside or self._need or self._prefix)

    def feed(self, data: bytes) -> None:
        if self.json:
            if data:  # events are compact JSON, each followed by a newline
                self._inside = not data.endswith(b"\n")
            return
        view = memoryview(data)
        while view:
            if self._need:
                step = min(self._need, len(view))
                self._need -= step
                view = view[step:]
                continue
            take = 4 - len(self._prefix)
            self._prefix += bytes(view[:take])
            view = view[take:]
            if len(self._prefix) == 4:
                self._need = int.from_bytes(self._prefix, "big")
                self._prefix = b""


def watch_frames(verb: str | None, headers: Any) -> WatchFrames | None:
    """The frame tracker for a proxied response: for a watch whose content type has known
    framing, else None (a cut is then aborted)."""
    if verb != "watch":
        return None
    content_type = ""
    for key, value in headers:
        if key.lower() == "content-type":
            content_type = value.split(";", 1)[0].strip().lower()
    if content_type == "application/json":
        return WatchFrames(json=True)
    if content_type == _PROTOBUF:
        return WatchFrames(json=False)
    return None
