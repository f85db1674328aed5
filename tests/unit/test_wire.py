"""The proxy's HTTP heads (gateway/transport/wire.py): what each function answers, for the
pure-Python functions and for their compiled twins (gateway/transport/_wire.pyx) alike, and
the two giving the same answer (or the same error) on thousands of random heads, hostile bytes
included. The compiled cases are skipped only where the extension was not built."""

from __future__ import annotations

import importlib
import os
import random

import pytest
from multidict import CIMultiDict

from gateway.transport import wire

try:
    compiled = importlib.import_module("gateway.transport._wire")
except ImportError:  # built without a compiler: the pure-Python functions only
    compiled = None

IMPLEMENTATIONS = [pytest.param(wire.PYTHON, id="python"),
                   pytest.param(None if compiled is None else {
                       name: getattr(compiled, name) for name in wire.PYTHON}, id="compiled",
                       marks=pytest.mark.skipif(compiled is None,
                                                reason="the extension is not built"))]


@pytest.fixture(params=IMPLEMENTATIONS)
def impl(request: pytest.FixtureRequest) -> dict:
    return request.param


def test_the_compiled_functions_are_in_use_when_built() -> None:
    forced = bool(os.environ.get("GATEWAY_PURE_PYTHON"))
    assert ("python" if compiled is None or forced else "compiled") == wire.IMPLEMENTATION


# -- request heads --------------------------------------------------------------------------------


def test_a_plain_request_head(impl: dict) -> None:
    parsed = impl["parse_request_head"](
        b"GET /apis/g/v/things?limit=1 HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer t\r\n"
        b"X-Two: a\r\nx-two:  b \r\nEmpty:\r\nTab:\tv\t")
    assert parsed == ("GET", "/apis/g/v/things?limit=1", [
        ("Host", "gw"), ("Authorization", "Bearer t"), ("X-Two", "a"), ("x-two", "b"),
        ("Empty", ""), ("Tab", "v")])


def test_request_header_values_keep_their_bytes(impl: dict) -> None:
    parsed = impl["parse_request_head"]("GET / HTTP/1.1\r\nX-Name: Zoë".encode() + b"\xff")
    assert parsed is not None and parsed[2] == [("X-Name", "Zoë\udcff")]
    assert parsed[2][0][1].encode("utf-8", "surrogateescape") == "Zoë".encode() + b"\xff"


@pytest.mark.parametrize("raw", [
    b"GET / HTTP/1.0\r\nHost: gw",  # another version
    b"get / HTTP/1.1\r\nHost: gw",  # a method is upper case
    b"GET http://gw/ HTTP/1.1\r\nHost: gw",  # absolute form
    b"GET * HTTP/1.1",  # asterisk form
    b"GET  / HTTP/1.1",  # two spaces
    b"GET / HTTP/1.1 \r\nHost: gw",  # trailing space on the request line
    b"GET /a b HTTP/1.1",  # a space in the target
    b"GET / HTTP/1.1\r\nHost : gw",  # whitespace before the colon
    b"GET / HTTP/1.1\r\nHost: gw\r\n folded",  # obs-fold
    b"GET / HTTP/1.1\r\nHost gw",  # no colon
    b"GET / HTTP/1.1\r\nX-A: a\nX-B: b",  # a bare LF inside the head
    b"GET / HTTP/1.1\r\nX-A: a\rX-B: b",  # a bare CR inside the head
    b"GET / HTTP/1.1\r\nX-A: a\x00b",  # a control byte in a value
    b"GET / HTTP/1.1\r\nX-A: a\x7f",  # DEL in a value
    b"GET / HTTP/1.1\r\n\r\nX-A: a",  # an empty line inside the head
    b"GET / HTTP/1.1\r\n",  # a line ending with nothing after it
    b"GET /\x7f HTTP/1.1",  # DEL in the target
    b"GET /\xc3\xa9 HTTP/1.1",  # a non-ASCII target
    b"GET / HTTP/1.1\r\nX-\xc3\xa9: a",  # a non-token name
    b"",
])
def test_anything_unusual_is_refused(impl: dict, raw: bytes) -> None:
    assert impl["parse_request_head"](raw) is None


# -- response heads -------------------------------------------------------------------------------


def test_a_plain_response_head(impl: dict) -> None:
    parsed = impl["parse_response_head"](
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5\r\n"
        b"X-A:  b \r\nEmpty:\r\n\r\n")
    assert parsed == (200, "OK", [("Content-Type", "application/json"),
                                  ("Content-Length", "5"), ("X-A", "b"), ("Empty", "")],
                      5, False, True)


@pytest.mark.parametrize(("raw", "expected"), [
    (b"HTTP/1.1 200\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", (200, "", None, True, True)),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", (200, "OK", None, False, False)),
    (b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", (200, "OK", 1, False, False)),
    (b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\n\r\n", (200, "OK", None, False, True)),
    (b"HTTP/1.1 200 OK\r\nconnection: x, close\r\n\r\n", (200, "OK", None, False, False)),
    (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n",
     (101, "Switching Protocols", None, False, False)),
    (b"HTTP/1.1 404 Not  Found here\r\n\r\n", (404, "Not  Found here", None, False, True)),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\ncontent-length: 3\r\n\r\n",
     (200, "OK", 3, False, True)),
])
def test_response_framing(impl: dict, raw: bytes, expected: tuple) -> None:
    status, reason, _, length, chunked, keep_alive = impl["parse_response_head"](raw)
    assert (status, reason, length, chunked, keep_alive) == expected


def test_an_interim_response_is_skipped(impl: dict) -> None:
    assert impl["parse_response_head"](b"HTTP/1.1 100 Continue\r\n\r\n") is None


@pytest.mark.parametrize("raw", [
    b"HTTP/1.1 20 OK\r\n\r\n",
    b"HTTP/1.1 2000 OK\r\n\r\n",
    b"HTTP/1.1 2x0 OK\r\n\r\n",
    b"HTTP/2 200 OK\r\n\r\n",
    b"HTTP/1.1  200 OK\r\n\r\n",
    b"HTTP/1.1\r\n\r\n",
    b"SPDY/1.1 200 OK\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nNoColon\r\n\r\n",
    b"HTTP/1.1 200 OK\r\n Lead: x\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTrail : x\r\n\r\n",
    b"HTTP/1.1 200 OK\r\n: empty name\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n",
    "HTTP/1.1 200 OK\r\nContent-Length: ٣\r\n\r\n".encode(),  # an Arabic-Indic digit
])
def test_malformed_responses_are_refused(impl: dict, raw: bytes) -> None:
    with pytest.raises(ValueError):
        impl["parse_response_head"](raw)


# -- heads written --------------------------------------------------------------------------------


def test_a_request_head(impl: dict) -> None:
    head = impl["request_head"]("GET", "/apis/g/v/x?a=1", "10.0.0.1:443",
                                [("X-Remote-User", "alice"), ("X-Extra", "Zoë\udcff")])
    assert head == (b"GET /apis/g/v/x?a=1 HTTP/1.1\r\nHost: 10.0.0.1:443\r\n"
                    b"X-Remote-User: alice\r\n") + "X-Extra: Zoë".encode() + \
        b"\xff\r\n\r\n"


def test_a_bodiless_delete_says_so(impl: dict) -> None:
    assert impl["request_head"]("DELETE", "/x", "h", []) == \
        b"DELETE /x HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n"
    assert impl["request_head"]("DELETE", "/x", "h", [("content-length", "0")]) == \
        b"DELETE /x HTTP/1.1\r\nHost: h\r\ncontent-length: 0\r\n\r\n"


def test_a_response_head_as_aiohttp_writes_it(impl: dict) -> None:
    head, chunked = impl["response_head"](
        200, "OK", [("Content-Type", "application/json"), ("Content-Length", "5"),
                    ("Audit-ID", "backend's")],
        [("Audit-ID", "ours"), ("Cache-Control", "no-cache, private")], 5, False, True,
        "Thu, 01 Jan 2026 00:00:00 GMT")
    assert not chunked
    # no Server header of the gateway's own (kube-apiserver sends none)
    assert head.decode().split("\r\n") == [
        "HTTP/1.1 200 OK", "Content-Type: application/json", "Audit-ID: ours",
        "Audit-ID: backend's", "Cache-Control: no-cache, private", "Content-Length: 5",
        "Date: Thu, 01 Jan 2026 00:00:00 GMT", "", ""]


def test_a_backends_server_header_passes(impl: dict) -> None:
    head, _ = impl["response_head"](200, "OK", [("Server", "backend/1")], None, 0, False,
                                    True, "D")
    assert head.decode().split("\r\n") == [
        "HTTP/1.1 200 OK", "Server: backend/1", "Content-Length: 0", "Date: D", "", ""]


def test_headers_from_a_multidict(impl: dict) -> None:
    """The filters' headers come from a CIMultiDict, whose names are a str subclass."""
    wanted = CIMultiDict([("Audit-ID", "a"), ("Cache-Control", "c")])
    head, _ = impl["response_head"](200, "OK", list(CIMultiDict([("audit-id", "b")]).items()),
                                    list(wanted.items()), 0, False, True, "D")
    assert head.split(b"\r\n")[1:4] == [b"Audit-ID: a", b"audit-id: b", b"Cache-Control: c"]
    assert impl["request_head"]("GET", "/", "h", list(wanted.items())) == \
        b"GET / HTTP/1.1\r\nHost: h\r\nAudit-ID: a\r\nCache-Control: c\r\n\r\n"


@pytest.mark.parametrize(("code", "head", "length", "declared", "lines"), [
    (200, False, None, None, ["Transfer-Encoding: chunked",
                              "Content-Type: application/octet-stream"]),
    (200, False, 0, None, ["Content-Length: 0"]),
    (200, True, None, "552", ["Content-Length: 552"]),
    (200, True, 10, None, ["Content-Length: 10"]),
    (200, True, 0, None, []),
    (204, False, None, "5", []),
    (304, True, None, "5", []),
])
def test_framing_written(impl: dict, code: int, head: bool, length: int | None,
                         declared: str | None, lines: list[str]) -> None:
    headers = [("Content-Length", declared)] if declared else []
    written, chunked = impl["response_head"](code, "X", headers, None, length, head, False,
                                             "D")
    assert written.decode().split("\r\n")[1:-2] == [*lines, "Date: D", "Connection: close"]
    assert chunked == (lines[:1] == ["Transfer-Encoding: chunked"])


# -- the two implementations alike ----------------------------------------------------------------

NAMES = ["Host", "Authorization", "content-length", "Content-Length", "Transfer-Encoding",
         "connection", "Connection", "Date", "Server", "Content-Type", "Audit-ID",
         "Cache-Control", "X-Remote-User", "x-a"]
VALUES = ["", "0", "5", "552", " 7 ", "chunked", "gzip, chunked", "close", "keep-alive",
          "x, Close", "Zoë", "a\udcff", "v\t", "1,2", "abc"]
NOISE = [b"\r", b"\n", b"\r\n", b"\t", b" ", b":", b"\x00", b"\x7f", b"\xff", b"\xc3\xa9",
         b"A", b"/", b"HTTP/1.1", b"\x1f", b"\x0b"]


def _mutated(rng: random.Random, raw: bytes) -> bytes:
    data = bytearray(raw)
    for _ in range(rng.randint(0, 3)):
        at = rng.randint(0, len(data))
        kind = rng.random()
        if kind < 0.5:
            data[at:at] = rng.choice(NOISE)
        elif kind < 0.8 and data:
            del data[at:at + rng.randint(1, 3)]
        elif data:
            data[min(at, len(data) - 1)] = rng.randint(0, 255)
    return bytes(data)


def _answer(function, *args):
    try:
        return "ok", function(*args)
    except ValueError as err:
        return "ValueError", str(err)


@pytest.mark.skipif(compiled is None, reason="the extension is not built")
def test_random_heads_get_the_same_answers() -> None:
    rng = random.Random(17)
    python, fast = wire.PYTHON, {name: getattr(compiled, name) for name in wire.PYTHON}
    for _ in range(4000):
        fields = [(rng.choice(NAMES), rng.choice(VALUES)) for _ in range(rng.randint(0, 5))]
        text = "".join(f"\r\n{k}: {v}" for k, v in fields)
        request = _mutated(rng, ("GET /apis/g/v/x?y=1 HTTP/1.1" + text).encode(
            "utf-8", "surrogateescape"))
        assert python["parse_request_head"](request) == fast["parse_request_head"](request), \
            request
        status = rng.choice(["200", "204", "101", "100", "304", "404"])
        response = _mutated(rng, (f"HTTP/1.{rng.choice('01')} {status} OK" + text).encode(
            "utf-8", "surrogateescape")) + b"\r\n\r\n"
        assert _answer(python["parse_response_head"], response) == \
            _answer(fast["parse_response_head"], response), response
        method = rng.choice(["GET", "DELETE", "HEAD"])
        assert python["request_head"](method, "/x", "h:1", fields) == \
            fast["request_head"](method, "/x", "h:1", fields)
        wanted = rng.choice([None, [], [("Audit-ID", "a"), ("cache-control", "c")],
                             [("Audit-ID", "a"), ("audit-id", "b")]])
        args = (rng.choice([200, 204, 304, 101, 404, 500]), "R", fields, wanted,
                rng.choice([None, 0, 3, 552]), rng.random() < 0.3, rng.random() < 0.5, "D")
        assert _answer(python["response_head"], *args) == _answer(fast["response_head"], *args)


def test_a_value_both_sides_give_is_written_once(impl: dict) -> None:
    """The filters' Cache-Control, which a backend may send too: once, the filters' spelling
    first, then the backend's other values for the name (aiohttp's side merges alike)."""
    head, _ = impl["response_head"](
        200, "OK", [("cache-control", "no-cache, private"), ("Cache-Control", "max-age=1"),
                    ("X-Other", "o")],
        [("Cache-Control", "no-cache, private"), ("Audit-ID", "a")], 0, False, True, "D")
    assert head.decode().split("\r\n")[1:5] == [
        "X-Other: o", "Cache-Control: no-cache, private", "Cache-Control: max-age=1",
        "Audit-ID: a"]
