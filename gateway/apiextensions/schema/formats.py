"""The string formats a CRD schema can ask for, checked as kube-openapi's strfmt checks them.

apiextensions-apiserver keeps only the formats in its supportedFormats list (others, int32 and
double included, are dropped before validation: "ignored"); names are compared without dashes
(date-time is datetime). Each check below is the one strfmt's default registry runs.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

from gateway.apimachinery.gowords import parse_duration
from gateway.registry.validation import parse_ip

_HOSTNAME = re.compile(
    r"^([a-zA-Z0-9]((-?[a-zA-Z0-9]{0,62})?)|([a-zA-Z0-9](([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)"
    r"(\.)){1,}([a-zA-Z]){2,63})$")
_UUID = {
    "uuid": r"[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}",
    "uuid3": r"3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}",
    "uuid4": r"4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}",
    "uuid5": r"5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}",
}
_UUID_RE = {name: re.compile(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?" + tail + "$", re.ASCII)
            for name, tail in _UUID.items()}
_CREDIT_CARD = re.compile(
    r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}"
    r"|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35[0-9]{3})[0-9]{11})$")
_ISBN10 = re.compile(r"^(?:[0-9]{9}X|[0-9]{10})$")
_ISBN13 = re.compile(r"^(?:[0-9]{13})$")
_HEXCOLOR = re.compile(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$")
_BYTE = r"(0|[1-9][0-9]?|1[0-9][0-9]?|2[0-4][0-9]|25[0-5])"
_RGBCOLOR = re.compile(rf"^rgb\([ \t\n\f\r]*{_BYTE}[ \t\n\f\r]*,[ \t\n\f\r]*{_BYTE}"
                       rf"[ \t\n\f\r]*,[ \t\n\f\r]*{_BYTE}[ \t\n\f\r]*\)$")
_SSN = re.compile(r"^[0-9]{3}[- ]?[0-9]{2}[- ]?[0-9]{4}$")
_BASE64 = re.compile(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|"
                     r"[A-Za-z0-9+/]{4})$")
_SPACES_AND_MINUS = re.compile(r"[\t\n\f\r -]+")
_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_TIME = re.compile(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$")
_SCALA_DURATION = re.compile(r"(([0-9]+)[\t\n\f\r ]*([A-Za-zµ]+))")
_TIME_UNITS = (("ns", "nano"), ("us", "µs", "micro"), ("ms", "milli"), ("s", "sec"),
               ("m", "min"), ("h", "hr", "hour"), ("d", "day"), ("w", "wk", "week"))
_MAC_LENGTHS = (6, 8, 20)
_HEX = frozenset("0123456789abcdefABCDEF")


def _hostname_shape(text: str) -> str:
    """The hostname with every letter (\\p{L}) as 'a' and every symbol (\\p{S}) as '0', so
    that an ASCII expression checks RE2's Unicode classes (symbols may not end a name)."""
    out = []
    for char in text:
        category = unicodedata.category(char)
        if category.startswith("S"):
            out.append("0")
        elif category.startswith("L") and not char.isascii():
            out.append("a")
        else:
            out.append(char)
    return "".join(out)


def is_hostname(text: str) -> bool:
    if not _HOSTNAME.fullmatch(_hostname_shape(text)):
        return False
    return len(text.encode()) <= 255 and all(len(p.encode()) <= 63 for p in text.split("."))


def _days_in(year: int, month: int) -> int:
    if month == 2:
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        return 29 if leap else 28
    return 30 if month in (4, 6, 9, 11) else 31


def is_date(text: str) -> bool:
    """time.Parse("2006-01-02", s): four-digit year, months 1-12, days the month has."""
    match = _DATE.fullmatch(text)
    if not match:
        return False
    year, month, day = (int(g) for g in match.groups())
    return 1 <= month <= 12 and 1 <= day <= _days_in(year, month)


def is_datetime(text: str) -> bool:
    """strfmt.IsDateTime: a date, a "t" (any case), then hh:mm:ss[.frac] and a zone."""
    if len(text) < 4:
        return False
    parts = text.lower().split("t")
    if len(parts) < 2 or not is_date(parts[0]):
        return False
    match = _TIME.fullmatch(parts[1])
    return match is not None and match[1] <= "23" and match[2] <= "59" and match[3] <= "59"


def is_duration(text: str) -> bool:
    """time.ParseDuration, or strfmt's Scala-like "3 days" form."""
    try:
        parse_duration(text)
        return True
    except ValueError:
        pass
    found = False
    for _, number, unit in _SCALA_DURATION.findall(text):
        if int(number) > 2**63 - 1:
            return False
        unit = unit.strip().lower()
        for variants in _TIME_UNITS:
            last = len(variants) - 1
            if any((i == last and unit.startswith(v)) or v.lower() == unit
                   for i, v in enumerate(variants)):
                found = True
    return found


def is_ipv4(text: str) -> bool:
    """k8s.io/utils/net.ParseIPSloppy (leading zeros allowed) of a string with a dot."""
    return parse_ip(text) is not None and "." in text


def is_ipv6(text: str) -> bool:
    """govalidator.IsIPv6: net.ParseIP (strict) of a string with a colon."""
    if ":" not in text or "%" in text or not text.isascii():
        return False
    tail = text.rpartition(":")[2]
    if "." in tail and any(len(p) > 1 and p[0] == "0" for p in tail.split(".")):
        return False
    return parse_ip(text) is not None


def is_cidr(text: str) -> bool:
    """netutils.ParseCIDRSloppy: a sloppy address, "/", a prefix length in range."""
    address, slash, prefix = text.partition("/")
    ip = parse_ip(address) if slash else None
    if ip is None or not prefix.isascii() or not prefix.isdigit():
        return False
    bits = 32 if ":" not in address else 128
    return int(prefix) <= bits


def is_mac(text: str) -> bool:
    """net.ParseMAC: 6, 8 or 20 octets as aa:bb.., aa-bb.. or aabb.ccdd.. ."""
    if len(text) < 14:
        return False
    if text[2] in ":-":
        if (len(text) + 1) % 3 != 0 or (len(text) + 1) // 3 not in _MAC_LENGTHS:
            return False
        groups = [text[i:i + 2] for i in range(0, len(text), 3)]
        seps = {text[i] for i in range(2, len(text), 3)}
        return seps == {text[2]} and all(len(g) == 2 and set(g) <= _HEX for g in groups)
    if text[4] == ".":
        if (len(text) + 1) % 5 != 0 or 2 * (len(text) + 1) // 5 not in _MAC_LENGTHS:
            return False
        groups = [text[i:i + 4] for i in range(0, len(text), 5)]
        seps = {text[i] for i in range(4, len(text), 5)}
        return seps == {"."} and all(len(g) == 4 and set(g) <= _HEX for g in groups)
    return False


def _isbn(text: str, version: int) -> bool:
    value = _SPACES_AND_MINUS.sub("", text)
    if version == 10:
        if not _ISBN10.fullmatch(value):
            return False
        total = sum((i + 1) * int(value[i]) for i in range(9))
        total += 100 if value[9] == "X" else 10 * int(value[9])
        return total % 11 == 0
    if not _ISBN13.fullmatch(value):
        return False
    total = sum((1, 3)[i % 2] * int(value[i]) for i in range(12))
    return int(value[12]) - (10 - total % 10) % 10 == 0


def is_credit_card(text: str) -> bool:
    """govalidator.IsCreditCard: the digits match a known issuer and pass Luhn's check."""
    digits = re.sub(r"[^0-9]+", "", text)
    if not _CREDIT_CARD.fullmatch(digits):
        return False
    total = 0
    for i, char in enumerate(reversed(digits)):
        number = int(char) * (2 if i % 2 else 1)
        total += number % 10 + 1 if number >= 10 else number
    return total % 10 == 0


def is_uri(text: str) -> bool:
    """url.ParseRequestURI: an absolute URI, or an absolute path (or "*")."""
    if not text or any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        return False
    if text == "*":
        return True
    scheme, rest = _scheme(text)
    if scheme is None:
        return False
    one_query = rest.endswith("?") and rest.count("?") == 1
    rest = rest[:-1] if one_query else rest.partition("?")[0]
    if not rest.startswith("/"):
        return bool(scheme)
    path = rest
    if scheme and rest.startswith("//"):
        authority, slash, tail = rest[2:].partition("/")
        if not _valid_authority(authority):
            return False
        path = slash + tail
    return _valid_escapes(path)


def _scheme(text: str) -> tuple[str | None, str]:
    """getScheme: the scheme ("" when there is none), or None when the URL starts with ':'."""
    for i, char in enumerate(text):
        if char.isascii() and char.isalpha():
            continue
        if char.isascii() and (char.isdigit() or char in "+-.") and i > 0:
            continue
        if char == ":":
            return (None, text) if i == 0 else (text[:i], text[i + 1:])
        return "", text
    return "", text


def _valid_escapes(text: str, *, host: bool = False) -> bool:
    """unescape's checks: "%" and two hex digits (in a host only %25 and from %80 on), and in
    a host no ASCII character that would need escaping."""
    for i, char in enumerate(text):
        if char == "%":
            escape = text[i + 1:i + 3]
            if len(escape) < 2 or not set(escape) <= _HEX:
                return False
            if host and int(escape[0], 16) < 8 and escape != "25":
                return False
        elif host and char.isascii() and not (char.isalnum() or char in _HOST_CHARS):
            return False
    return True


_HOST_CHARS = "-_.~$&'()*+,;=:[]<>\""
_USERINFO_CHARS = "-._:~!$&'()*+,;=%@"


def _digits(text: str) -> bool:
    return all("0" <= c <= "9" for c in text)


def _valid_authority(authority: str) -> bool:
    """parseAuthority: userinfo of allowed characters, a host, an optional numeric port."""
    userinfo, at, host = authority.rpartition("@")
    if at and not (all(c.isalnum() or c in _USERINFO_CHARS or not c.isascii() for c in userinfo)
                   and _valid_escapes(userinfo)):
        return False
    if host.startswith("["):
        end = host.rfind("]")
        port = host[end + 1:] if end >= 0 else None
    else:
        colon = host.rfind(":")
        port = host[colon:] if colon >= 0 else ""
    if port is None or (port and (port[0] != ":" or not _digits(port[1:]))):
        return False
    return _valid_escapes(host, host=True)


_ATEXT = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                   "!#$%&'*+-/=?^_`{|}~")


def _dot_atom(text: str) -> bool:
    atoms = text.split(".")
    return all(a and all(c in _ATEXT or not c.isascii() for c in a) for a in atoms)


def _addr_spec(text: str) -> bool:
    local, at, domain = text.rpartition("@")
    if not at or not _dot_atom(domain):
        return False
    if len(local) >= 2 and local[0] == local[-1] == '"':
        return all(c.isprintable() or c == " " for c in local[1:-1])
    return _dot_atom(local)


def is_email(text: str) -> bool:
    """net/mail.ParseAddress, for the usual forms: addr-spec or "Name <addr-spec>"."""
    text = text.strip(" \t")
    if text.endswith(">") and "<" in text:
        name, _, spec = text[:-1].rpartition("<")
        name = name.strip(" \t")
        if name and not (name.startswith('"') and name.endswith('"')) and not all(
                _dot_atom(word) or word == "." for word in name.split()):
            return False
        return _addr_spec(spec)
    return _addr_spec(text)


def is_bson_object_id(text: str) -> bool:
    return len(text) == 24 and set(text) <= _HEX


def _matcher(rx: re.Pattern[str]) -> Callable[[str], bool]:
    return lambda text: bool(rx.fullmatch(text))


CHECKS: dict[str, Callable[[str], bool]] = {
    "bsonobjectid": is_bson_object_id,
    "uri": is_uri,
    "email": is_email,
    "hostname": is_hostname,
    "ipv4": is_ipv4,
    "ipv6": is_ipv6,
    "cidr": is_cidr,
    "mac": is_mac,
    **{name: _matcher(rx) for name, rx in _UUID_RE.items()},
    "isbn": lambda text: _isbn(text, 10) or _isbn(text, 13),
    "isbn10": lambda text: _isbn(text, 10),
    "isbn13": lambda text: _isbn(text, 13),
    "creditcard": is_credit_card,
    "ssn": lambda text: len(text) == 11 and bool(_SSN.fullmatch(text)),
    "hexcolor": lambda text: bool(_HEXCOLOR.fullmatch(text)),
    "rgbcolor": lambda text: bool(_RGBCOLOR.fullmatch(text)),
    "byte": lambda text: bool(_BASE64.fullmatch(text)),
    "password": lambda text: True,
    "date": is_date,
    "duration": is_duration,
    "datetime": is_datetime,
}


def supported(fmt: object) -> str:
    """The format as validation sees it: the name as written when kube supports it, else ""
    (StripUnsupportedFormatsPostProcess)."""
    if not isinstance(fmt, str) or not fmt:
        return ""
    return fmt if fmt.replace("-", "") in CHECKS else ""


def valid(fmt: str, text: str) -> bool:
    """Whether ``text`` is of the (supported) format ``fmt``."""
    check = CHECKS.get(fmt.replace("-", ""))
    return True if check is None else check(text)
