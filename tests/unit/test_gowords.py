"""Go's library errors, as kube-apiserver passes them on, for the inputs clients send."""

from __future__ import annotations

import pytest

from gateway.apimachinery.gowords import (
    json_syntax_error,
    parse_duration,
    parse_int,
    parse_uint,
    raw_url_b64decode,
)
from gateway.storage import continuetoken
from gateway.storage.errors import InvalidContinueError


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1h30m", 5400.0), ("-1.5s", -1.5), ("0", 0.0), ("200ms", 0.2), ("1.5\u00b5s", 1.5e-6)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("soon", 'time: invalid duration "soon"'),
        ("", 'time: invalid duration ""'),
        (".s", 'time: invalid duration ".s"'),
        ("5", 'time: missing unit in duration "5"'),
        ("5x", 'time: unknown unit "x" in duration "5x"'),
        ("1e3s", 'time: unknown unit "e" in duration "1e3s"'),
        ("9223372036854775808ns", 'time: invalid duration "9223372036854775808ns"'),
        ("5\u00e9", 'time: unknown unit "\\xc3\\xa9" in duration "5\\xc3\\xa9"'),
    ],
)
def test_duration_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_duration(text)
    assert str(err.value) == message


def test_strconv() -> None:
    assert parse_int("-12") == (-12, "")
    assert parse_int("1_000") == (None, 'strconv.ParseInt: parsing "1_000": invalid syntax')
    assert parse_int("9223372036854775808") == (
        None, 'strconv.ParseInt: parsing "9223372036854775808": value out of range')
    assert parse_uint("+1") == (None, 'strconv.ParseUint: parsing "+1": invalid syntax')
    assert parse_uint("18446744073709551615") == (2**64 - 1, "")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"{}", ""),
        (b"{not json", "invalid character 'n' looking for beginning of object key string"),
        (b"", "unexpected end of JSON input"),
        (b'{"a":1}x', "invalid character 'x' after top-level value"),
        (b'{"a" 1}', "invalid character '1' after object key"),
        (b'{"a":1 "b"}', "invalid character '\"' after object key:value pair"),
        (b"[1 2]", "invalid character '2' after array element"),
        (b"-x", "invalid character 'x' in numeric literal"),
        (b"1.x", "invalid character 'x' after decimal point in numeric literal"),
        (b"trux", "invalid character 'x' in literal true (expecting 'e')"),
        (b'"\\q"', "invalid character 'q' in string escape code"),
        (b"'a'", "invalid character '\\'' looking for beginning of value"),
    ],
)
def test_json_syntax(data: bytes, message: str) -> None:
    assert json_syntax_error(data) == message


def test_base64() -> None:
    assert raw_url_b64decode("YWI") == b"ab"
    for text, at in (("a!b", 1), ("abcde", 4), ("YWI=", 3)):
        with pytest.raises(ValueError) as err:
            raw_url_b64decode(text)
        assert str(err.value) == f"illegal base64 data at input byte {at}"


@pytest.mark.parametrize(
    ("document", "detail"),
    [
        (b"[]", "json: cannot unmarshal array into Go value of type storage.continueToken"),
        (b'{"v":"meta.k8s.io/v1","rv":1.5,"start":"a"}',
         "json: cannot unmarshal number 1.5 into Go struct field continueToken.rv of type int64"),
        (b'{"v":5}', "json: cannot unmarshal number into Go struct field continueToken.v of "
                     "type string"),
        (b'{"v":"v2"}', "server does not recognize this encoded version v2"),
        (b'{"v":"meta.k8s.io/v1","start":"a"}',
         "incorrect encoded start resourceVersion (version meta.k8s.io/v1)"),
        (b'{"v":"meta.k8s.io/v1","rv":3}', "encoded start key empty (version meta.k8s.io/v1)"),
        (b'{"v":"meta.k8s.io/v1","rv":3,"start":"../x"}', "../x"),
    ],
)
def test_continue_tokens_kube_refuses(document: bytes, detail: str) -> None:
    import base64

    token = base64.urlsafe_b64encode(document).decode().rstrip("=")
    with pytest.raises(InvalidContinueError) as err:
        continuetoken.decode(token)
    assert err.value.explained == f"continue key is not valid: {detail}"


def test_a_continue_token_round_trips() -> None:
    token = continuetoken.encode(7, "b\x00")
    assert continuetoken.decode(token) == continuetoken.ContinueToken(7, "b\x00")
