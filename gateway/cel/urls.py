"""kube's URL library (apiserver pkg/cel/library/urls.go): ``url()`` takes what Go's
url.ParseRequestURI takes (an absolute URI or an absolute path), and the getters answer as Go's
url.URL does. The parser follows net/url's steps and error words for what requests carry
(scheme, authority with user info, host and port, path, query); a URL is held as its text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote_to_bytes

from cel_expr_python import cel

from gateway.apimachinery.gowords import go_quote
from gateway.cel import opaque

T = cel.Type
URL = opaque.cel_type(opaque.URL)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*")
_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})(.{0,2})")
_PORT = re.compile(r":[0-9]*")
#: Go's shouldEscape for a path: what it leaves as it is
_PATH_SAFE = "/;,:=@&+$!*'()~-._"
_HOST_CHARS = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:\[\]%]*")


@dataclass
class Parsed:
    scheme: str = ""
    opaque: str = ""
    host: str = ""
    path: str = ""
    raw_path: str = ""
    raw_query: str = ""


def _fail(text: str, reason: str) -> ValueError:
    return ValueError(f"parse {go_quote(text)}: {reason}")


def _unescape(text: str, whole: str) -> str:
    bad = _ESCAPE.search(text)
    if bad:
        raise _fail(whole, f"invalid URL escape {go_quote('%' + bad.group(1))}")
    return unquote_to_bytes(text).decode("utf-8", "replace")


def parse_request_uri(text: str) -> Parsed:
    """url.ParseRequestURI; ValueError in its words (``parse "<url>": <why>``)."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise _fail(text, "net/url: invalid control character in URL")
    if not text:
        raise _fail(text, "empty url")
    url = Parsed()
    if text == "*":
        url.path = "*"
        return url
    rest = text
    match = _SCHEME.match(text)
    if text.startswith(":"):
        raise _fail(text, "missing protocol scheme")
    if match and text[match.end():match.end() + 1] == ":":
        url.scheme, rest = match.group().lower(), text[match.end() + 1:]
    if rest.endswith("?") and rest.count("?") == 1:
        rest = rest[:-1]
    else:
        rest, _, url.raw_query = rest.partition("?")
    if not rest.startswith("/"):
        if url.scheme:
            url.opaque = rest
            return url
        raise _fail(text, "invalid URI for request")
    if url.scheme and rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        rest = slash + path
        url.host = _host(authority.rpartition("@")[2] if "@" in authority else authority, text)
    url.path = _unescape(rest, text)
    if rest != _escape_path(url.path):
        url.raw_path = rest
    return url


def _host(host: str, whole: str) -> str:
    """parseHost: brackets for IPv6, a port of digits only, no stray characters."""
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            raise _fail(whole, "missing ']' in host")
        port = host[end + 1:]
        if port and not _PORT.fullmatch(port):
            raise _fail(whole, f"invalid port {go_quote(port)} after host")
        return host
    if ":" in host:
        port = host[host.rfind(":"):]
        if not _PORT.fullmatch(port):
            raise _fail(whole, f"invalid port {go_quote(port)} after host")
    for char in host:
        if not _HOST_CHARS.fullmatch(char):
            raise _fail(whole, f"invalid character {go_quote(char)} in host name")
    return _unescape(host, whole)


def _escape_path(path: str) -> str:
    return quote(path, safe=_PATH_SAFE)


def _hostname(host: str) -> str:
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host[1:]
    return host.rpartition(":")[0] if ":" in host else host


def _port(host: str) -> str:
    colon = host.rfind(":")
    if colon < 0 or (host.startswith("[") and "]" in host[colon:]):
        return ""
    return host[colon + 1:]


def _query(raw: str) -> dict[str, list[str]]:
    """url.ParseQuery, malformed pairs left out (what URL.Query() answers)."""
    values: dict[str, list[str]] = {}
    for pair in raw.split("&"):
        if not pair or ";" in pair:
            continue
        key, _, value = pair.partition("=")
        try:
            key, value = (_unescape(part.replace("+", " "), raw) for part in (key, value))
        except ValueError:
            continue
        values.setdefault(key, []).append(value)
    return values


def _parsed(arg: Any) -> Parsed:
    return parse_request_uri(opaque.value_of(arg, opaque.URL))


def _url(text: str) -> Any:
    parse_request_uri(text)
    return opaque.make(opaque.URL, text)


def _is_url(text: str) -> bool:
    try:
        parse_request_uri(text)
    except ValueError:
        return False
    return True


def _wrapped(f: Any) -> Any:
    def convert(text: str) -> Any:
        try:
            return f(text)
        except ValueError as err:
            raise ValueError(f"URL parse error during conversion from string: {err}") from None
    return convert


def declarations(runtime: bool) -> list[cel.FunctionDecl]:
    impl = (lambda f: f) if runtime else (lambda f: None)
    getters = {
        "getScheme": lambda u: u.scheme,
        "getHost": lambda u: u.host,
        "getHostname": lambda u: _hostname(u.host),
        "getPort": lambda u: _port(u.host),
        "getEscapedPath": lambda u: u.raw_path or _escape_path(u.path),
    }
    decls = [
        cel.FunctionDecl("url", [cel.Overload("string_to_url", URL, [T.STRING],
                                              impl=impl(_wrapped(_url)))]),
        cel.FunctionDecl("isURL", [cel.Overload("is_url_string", T.BOOL, [T.STRING],
                                                impl=impl(_is_url))]),
        cel.FunctionDecl("getQuery", [cel.Overload(
            "url_get_query", T.Map(T.STRING, T.List(T.STRING)), [URL], is_member=True,
            impl=impl(lambda u: _query(_parsed(u).raw_query)))]),
    ]
    for name, getter in getters.items():
        decls.append(cel.FunctionDecl(name, [cel.Overload(
            f"url_{name}", T.STRING, [URL], is_member=True,
            impl=impl(lambda u, g=getter: g(_parsed(u))))]))
    return decls
