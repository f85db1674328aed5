# cython: language_level=3
"""Compiled twins of gateway/transport/wire.py's functions (see there for what each does):
the same answers, measured several times faster (tests/unit/test_wire.py holds the two to
the same answers, on chosen and on random input). The heads are scanned byte by byte here;
text is made only for what is returned."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeASCII, PyUnicode_DecodeUTF8
from libc.string cimport memcmp

cdef unsigned char _TOKEN[256]
for _c in bytearray(b"!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"):
    _TOKEN[_c] = 1


cdef inline str _text(const unsigned char* p, Py_ssize_t n):
    return PyUnicode_DecodeUTF8(<const char*>p, n, "surrogateescape")


cdef inline bint _is_blank(unsigned char c):
    return c == 32 or c == 9


cdef inline bint _named(const unsigned char* p, Py_ssize_t n, const char* lower,
                        Py_ssize_t size):
    """Whether the n bytes at p are ``lower`` but for the case of ASCII letters."""
    cdef Py_ssize_t i
    cdef unsigned char c
    if n != size:
        return False
    for i in range(n):
        c = p[i]
        if 65 <= c <= 90:
            c += 32
        if c != <unsigned char>lower[i]:
            return False
    return True


def parse_request_head(bytes raw):
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(raw)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(raw)
    cdef Py_ssize_t i = 0, start, name_end, value_start, value_end
    cdef unsigned char c
    while i < n and 65 <= p[i] <= 90:
        i += 1
    if i == 0 or i >= n or p[i] != 32:
        return None
    method = PyUnicode_DecodeASCII(<const char*>p, i, NULL)
    i += 1
    if i >= n or p[i] != 47:
        return None
    start = i
    while i < n and 33 <= p[i] <= 126:
        i += 1
    target = PyUnicode_DecodeASCII(<const char*>p + start, i - start, NULL)
    if n - i < 9 or memcmp(p + i, b" HTTP/1.1", 9) != 0:
        return None
    i += 9
    headers = []
    while i < n:
        if n - i < 2 or p[i] != 13 or p[i + 1] != 10:
            return None
        i += 2
        start = i
        while i < n and _TOKEN[p[i]]:
            i += 1
        if i == start or i >= n or p[i] != 58:
            return None
        name_end = i
        i += 1
        value_start = i
        while i < n:
            c = p[i]
            if c == 13:
                break
            if c <= 8 or 10 <= c <= 31 or c == 127:
                return None
            i += 1
        value_end = i
        while value_start < value_end and _is_blank(p[value_start]):
            value_start += 1
        while value_end > value_start and _is_blank(p[value_end - 1]):
            value_end -= 1
        headers.append((PyUnicode_DecodeASCII(<const char*>p + start, name_end - start, NULL),
                        _text(p + value_start, value_end - value_start)))
    return method, target, headers


def parse_response_head(bytes raw):
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(raw)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(raw) - 4
    cdef Py_ssize_t i = 0, line_end, first, second, colon, value_start, value_end, j
    cdef int status
    cdef bint chunked = False, keep_alive, digits
    if n < 0:
        n = 0
    line_end = 0
    while line_end < n and not (p[line_end] == 13 and line_end + 1 < n
                                 and p[line_end + 1] == 10):
        line_end += 1
    if line_end + 1 >= n:
        line_end = n
    first = 0
    while first < line_end and p[first] != 32:
        first += 1
    second = first + 1
    while second < line_end and p[second] != 32:
        second += 1
    if first >= line_end or second - first - 1 != 3 or line_end < 7 \
            or memcmp(p, b"HTTP/1.", 7) != 0 or first < 7:
        raise ValueError(f"malformed HTTP response {raw[:64]!r}")
    for j in range(first + 1, second):
        if not 48 <= p[j] <= 57:
            raise ValueError(f"malformed HTTP response {raw[:64]!r}")
    status = (p[first + 1] - 48) * 100 + (p[first + 2] - 48) * 10 + (p[first + 3] - 48)
    if 100 <= status < 200 and status != 101:
        return None
    reason = _text(p + second + 1, line_end - second - 1) if second < line_end else ""
    keep_alive = first == 8 and memcmp(p, b"HTTP/1.1", 8) == 0
    headers = []
    length = None
    i = line_end + 2
    while i <= n and line_end < n:
        line_end = i
        while line_end < n and not (p[line_end] == 13 and line_end + 1 < n
                                     and p[line_end + 1] == 10):
            line_end += 1
        if line_end + 1 >= n:
            line_end = n
        colon = i
        while colon < line_end and p[colon] != 58:
            colon += 1
        if colon >= line_end or colon == i:
            raise ValueError(
                f"malformed response header {_text(p + i, line_end - i)[:64]!r}")
        name = _text(p + i, colon - i)
        if name != name.strip():
            raise ValueError(
                f"malformed response header {_text(p + i, line_end - i)[:64]!r}")
        value_start = colon + 1
        value_end = line_end
        while value_start < value_end and _is_blank(p[value_start]):
            value_start += 1
        while value_end > value_start and _is_blank(p[value_end - 1]):
            value_end -= 1
        value = _text(p + value_start, value_end - value_start)
        headers.append((name, value))
        if _named(p + i, colon - i, b"content-length", 14):
            digits = value_end > value_start
            for j in range(value_start, value_end):
                if not 48 <= p[j] <= 57:
                    digits = False
                    break
            if not digits or (length is not None and length != int(value)):
                raise ValueError("bad Content-Length")
            length = int(value)
        elif _named(p + i, colon - i, b"transfer-encoding", 17):
            chunked = value.lower().rsplit(",", 1)[-1].strip() == "chunked"
            if not chunked:
                keep_alive = False
        elif _named(p + i, colon - i, b"connection", 10):
            tokens = {t.strip() for t in value.lower().split(",")}
            if "close" in tokens:
                keep_alive = False
            elif "keep-alive" in tokens:
                keep_alive = True
        i = line_end + 2
    if chunked:
        length = None
    if status == 101:
        keep_alive = False
    return status, reason, headers, length, chunked, keep_alive


def request_head(method, target, host, headers):
    # names and values may be str subclasses (multidict's istr): not typed as str
    cdef list lines = [method, " ", target, " HTTP/1.1\r\nHost: ", host, "\r\n"]
    cdef bint length = False
    for name, value in headers:
        lines += (name, ": ", value, "\r\n")
        if not length and len(name) == 14 and name.lower() == "content-length":
            length = True
    if method == "DELETE" and not length:
        lines.append("Content-Length: 0\r\n")
    lines.append("\r\n")
    return "".join(lines).encode("utf-8", "surrogateescape")


cdef list _merged(headers, list wanted):
    # wire.py's _merged: each name lowered once
    cdef dict names = {}
    cdef dict held = {}
    cdef list own = []
    cdef tuple entry
    cdef list values, pairs
    for name, value in wanted:
        lower = name.lower()
        entry = names.get(lower)
        if entry is None:
            names[lower] = (name, [value])
        else:
            (<list>entry[1]).append(value)
    for pair in headers:
        lower = pair[0].lower()
        if lower in names:
            pairs = held.get(lower)
            if pairs is None:
                held[lower] = [pair]
            else:
                pairs.append(pair)
        else:
            own.append(pair)
    for lower, entry in names.items():
        name = entry[0]
        values = entry[1]
        for value in values:
            own.append((name, value))
        pairs = held.get(lower)
        if pairs is not None:
            for pair in pairs:
                if pair[1] not in values:
                    own.append(pair)
    return own


def response_head(int code, reason, headers, wanted, length, bint head, bint keep_alive,
                  date):
    # names and values may be str subclasses (multidict's istr): not typed as str
    cdef list lines
    cdef bint bodiless, empty, chunked = False
    cdef bint has_type = False, has_date = False, has_connection = False
    if wanted:
        headers = _merged(headers, wanted)
    bodiless = code == 204 or code == 304 or 100 <= code < 200
    lines = ["HTTP/1.1 ", str(code), " ", reason, "\r\n"]
    declared = None
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
        lines += (name, ": ", value, "\r\n")
    empty = head or bodiless
    if declared is not None and (length is None or empty):
        length = int(declared)
    if empty:
        if not bodiless and (declared is not None or length):
            lines += ("Content-Length: ", str(length), "\r\n")
    else:
        if length is None:
            chunked = True
            lines.append("Transfer-Encoding: chunked\r\n")
        else:
            lines += ("Content-Length: ", str(length), "\r\n")
        if length != 0 and not has_type:
            lines.append("Content-Type: application/octet-stream\r\n")
    if not has_date:
        lines += ("Date: ", date, "\r\n")
    if not has_connection and not keep_alive:
        lines.append("Connection: close\r\n")
    lines.append("\r\n")
    return "".join(lines).encode("utf-8", "surrogateescape"), chunked
