"""The fast lane's request-head parser takes only strictly well-formed HTTP/1.1 heads: anything
else goes to aiohttp, whose parser answers it (so the lane never reads a head differently)."""

from __future__ import annotations

import pytest

from gateway.aggregator.fastlane import parse_head


def test_a_plain_head() -> None:
    parsed = parse_head(b"GET /apis/g/v/things?limit=1 HTTP/1.1\r\nHost: gw\r\n"
                        b"Authorization: Bearer t\r\nX-Two: a\r\nx-two:  b \r\nEmpty:")
    assert parsed is not None
    method, target, headers = parsed
    assert (method, target) == ("GET", "/apis/g/v/things?limit=1")
    assert headers["host"] == "gw" and headers["AUTHORIZATION"] == "Bearer t"
    assert headers.getall("X-Two") == ["a", "b"]
    assert headers["Empty"] == ""


def test_header_values_keep_their_bytes() -> None:
    parsed = parse_head("GET / HTTP/1.1\r\nX-Name: Zoë".encode())
    assert parsed is not None and parsed[2]["X-Name"] == "Zoë"


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
    b"GET / HTTP/1.1\r\nX-A: a\x00b",  # a control byte in a value
    b"GET / HTTP/1.1\r\n\r\nX-A: a",  # an empty line inside the head
    b"GET /\x7f HTTP/1.1",  # DEL in the target
])
def test_anything_unusual_is_left_to_aiohttp(raw: bytes) -> None:
    assert parse_head(raw) is None
