"""HTTP/1.1 heads on the wire, read and written by the proxy's hot path: the fast lane's
request heads (strictly well-formed ones only), the relay's request heads to a backend and the
backend's response heads, and the response heads the lane writes as aiohttp would.

These four functions are most of the text work of a proxied request, so a compiled twin of
each lives in ``_wire.pyx`` (Cython; built by ``pip install``) and replaces them when it was
built; this module is the reference and the fallback (``GATEWAY_PURE_PYTHON=1`` forces it).
``tests/unit/test_wire.py`` holds both to the same answers.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

#: A strictly well-formed HTTP/1.1 request head, without its final blank line: the request
#: line (origin-form target of visible ASCII), then header fields with token names and
#: values without control characters (a tab aside).
_REQUEST_HEAD = re.compile(
    rb"[A-Z]+ /[!-~]* HTTP/1\.1"
    rb"(?:\r\n[!#$%&'*+\-.^_`|~0-9A-Za-z]+:[^\x00-\x08\x0a-\x1f\x7f]*)*")
#: The response headers that frame a body.
_FRAMING = frozenset({"content-length", "transfer-encoding", "connection"})


def parse_request_head(raw: bytes) -> tuple[str, str, list[tuple[str, str]]] | None:
    """(method, target, headers) of a request head without its final blank line, or None
    when it is not strictly well-formed HTTP/1.1. Values lose the blanks around them; they
    are decoded as UTF-8, undecodable bytes kept as surrogates (so they go out as they came)."""
    if _REQUEST_HEAD.fullmatch(raw) is None:
        return None
    lines = raw.decode("utf-8", "surrogateescape").split("\r\n")
    method, target, _ = lines[0].split(" ")
    headers = []
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.append((name, value.strip(" \t")))
    return method, target, headers


def parse_response_head(raw: bytes) -> tuple[int, str, list[tuple[str, str]], int | None,
                                             bool, bool] | None:
    """(status, reason, headers, Content-Length or None, chunked, keep-alive) of a response
    head (with its final blank line); None for an interim 1xx (101 aside); ValueError when it
    is malformed. Decoded as parse_request_head decodes."""
    lines = raw[:-4].decode("utf-8", "surrogateescape").split("\r\n")
    status_line = lines[0].split(" ", 2)
    code = status_line[1] if len(status_line) > 1 else ""
    if not status_line[0].startswith("HTTP/1.") or len(code) != 3 or not code.isdigit() \
            or not code.isascii():
        raise ValueError(f"malformed HTTP response {raw[:64]!r}")
    status = int(code)
    if 100 <= status < 200 and status != 101:
        return None
    reason = status_line[2] if len(status_line) > 2 else ""
    headers: list[tuple[str, str]] = []
    length: int | None = None
    chunked = False
    keep_alive = status_line[0] == "HTTP/1.1"
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise ValueError(f"malformed response header {line[:64]!r}")
        value = value.strip(" \t")
        headers.append((name, value))
        lower = name.lower()
        if lower not in _FRAMING:
            continue
        if lower == "content-length":
            if not (value.isascii() and value.isdigit()) or \
                    (length is not None and length != int(value)):
                raise ValueError("bad Content-Length")
            length = int(value)
        elif lower == "transfer-encoding":
            chunked = value.lower().rsplit(",", 1)[-1].strip() == "chunked"
            if not chunked:
                keep_alive = False
        else:
            tokens = {t.strip() for t in value.lower().split(",")}
            if "close" in tokens:
                keep_alive = False
            elif "keep-alive" in tokens:
                keep_alive = True
    if chunked:
        length = None
    if status == 101:
        keep_alive = False
    return status, reason, headers, length, chunked, keep_alive


def request_head(method: str, target: str, host: str,
                 headers: Iterable[tuple[str, str]]) -> bytes:
    """A bodiless request's head as aiohttp's client writes it: Host first, the headers in
    their order, and ``Content-Length: 0`` on a DELETE that has none."""
    lines = [f"{method} {target} HTTP/1.1\r\nHost: {host}\r\n"]
    length = False
    for name, value in headers:
        lines.append(f"{name}: {value}\r\n")
        length = length or name.lower() == "content-length"
    if method == "DELETE" and not length:
        lines.append("Content-Length: 0\r\n")
    lines.append("\r\n")
    return "".join(lines).encode("utf-8", "surrogateescape")


def _merged(headers: Iterable[tuple[str, str]], wanted: list[tuple[str, str]]
            ) -> list[tuple[str, str]]:
    """The handler's ``headers`` with the filters' (``wanted``) merged in: the handler's
    other names first, then each wanted name (spelled as first wanted) with its wanted
    values, then the handler's values for it that differ. Each name is lowered once."""
    names: dict[str, tuple[str, list[str]]] = {}
    for name, value in wanted:
        entry = names.get(lower := name.lower())
        if entry is None:
            names[lower] = (name, [value])
        else:
            entry[1].append(value)
    own: list[tuple[str, str]] = []
    held: dict[str, list[tuple[str, str]]] = {}
    for pair in headers:
        lower = pair[0].lower()
        if lower in names:
            held.setdefault(lower, []).append(pair)
        else:
            own.append(pair)
    for lower, (name, values) in names.items():
        own += [(name, value) for value in values]
        if lower in held:
            own += [pair for pair in held[lower] if pair[1] not in values]
    return own


def response_head(code: int, reason: str, headers: Iterable[tuple[str, str]],
                  wanted: list[tuple[str, str]] | None, length: int | None, head: bool,
                  keep_alive: bool, date: str) -> tuple[bytes, bool]:
    """(the head, whether the body is to be chunked) of a response as aiohttp prepares one:

    - ``wanted`` (the filters' headers) first, as aiohttp's side merges them
      (gateway.apimachinery.context.merge_streamed_headers): each of their names with their
      values, then the handler's values for that name that differ;
    - the body framed by Content-Length (``length``, else the one declared), or chunked when
      no length is known; none for 1xx, 204 and 304, and for a HEAD (``head``) the length
      declared or that of a whole body; Content-Type ``application/octet-stream`` on a body
      without one;
    - Date (``date``) unless given (and no Server header of the gateway's own: kube-apiserver
      sends none); ``Connection: close`` when the connection is not kept."""
    if wanted:
        headers = _merged(headers, wanted)
    bodiless = code in (204, 304) or 100 <= code < 200
    lines = [f"HTTP/1.1 {code} {reason}\r\n"]
    declared: str | None = None
    has_type = has_date = has_connection = False
    for name, value in headers:
        lower = name.lower()
        if lower == "content-length":
            if declared is None:
                declared = value
            continue
        if lower == "transfer-encoding":
            continue
        if lower == "content-type":
            has_type = True
        elif lower == "date":
            has_date = True
        elif lower == "connection":
            has_connection = True
        lines.append(f"{name}: {value}\r\n")
    empty = head or bodiless
    if declared is not None and (length is None or empty):
        length = int(declared)
    chunked = False
    if empty:
        if not bodiless and (declared is not None or length):
            lines.append(f"Content-Length: {length}\r\n")
    else:
        if length is None:
            chunked = True
            lines.append("Transfer-Encoding: chunked\r\n")
        else:
            lines.append(f"Content-Length: {length}\r\n")
        if length != 0 and not has_type:
            lines.append("Content-Type: application/octet-stream\r\n")
    if not has_date:
        lines.append(f"Date: {date}\r\n")
    if not has_connection and not keep_alive:
        lines.append("Connection: close\r\n")
    lines.append("\r\n")
    return "".join(lines).encode("utf-8", "surrogateescape"), chunked


#: The pure-Python functions, whichever are in use (the tests hold the compiled ones to them).
PYTHON = {"parse_request_head": parse_request_head, "parse_response_head": parse_response_head,
          "request_head": request_head, "response_head": response_head}
#: Which implementation is in use: "compiled" or "python".
IMPLEMENTATION = "python"

if not os.environ.get("GATEWAY_PURE_PYTHON"):
    try:
        # the Cython twin of the functions above, with their signatures (test_wire.py holds
        # them to the same answers); mypy reads no compiled module, and sees a redefinition
        from gateway.transport._wire import (  # type: ignore[import-not-found,no-redef]
            parse_request_head,
            parse_response_head,
            request_head,
            response_head,
        )

        IMPLEMENTATION = "compiled"
    except ImportError:
        pass
