"""kube's IP and CIDR libraries (apiserver pkg/cel/library/ip.go, cidr.go) with Go's netip
semantics: strict parsing (no leading zeros, no zones, no IPv4-mapped IPv6), addresses written
as netip writes them, a CIDR keeping its address unmasked (``cidr('10.0.0.1/8').ip()`` is
10.0.0.1; ``masked()`` clears the host bits).
"""

from __future__ import annotations

import ipaddress
from typing import Any

from cel_expr_python import cel

from gateway.apimachinery.gowords import go_quote
from gateway.cel import opaque

T = cel.Type
IP = opaque.cel_type(opaque.IP)
CIDR = opaque.cel_type(opaque.CIDR)

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class AddressError(ValueError):
    """netip's error for text that is no address."""


def _error(text: str, message: str, at: str = "") -> AddressError:
    """netip's parseAddrError."""
    where = f" (at {go_quote(at)})" if at else ""
    return AddressError(f"ParseAddr({go_quote(text)}): {message}{where}")


def _ipv4_fields(text: str, part: str) -> list[int]:
    """parseIPv4Fields: four decimal octets, no leading zeros."""
    fields: list[int] = []
    value, digits = 0, 0
    for i, char in enumerate(part):
        if "0" <= char <= "9":
            if digits == 1 and value == 0:
                raise _error(text, "IPv4 field has octet with leading zero")
            value, digits = value * 10 + int(char), digits + 1
            if value > 255:
                raise _error(text, "IPv4 field has value >255")
        elif char == ".":
            if i == 0 or i == len(part) - 1 or part[i - 1] == ".":
                raise _error(text, "IPv4 field must have at least one digit", part[i:])
            if len(fields) == 3:
                raise _error(text, "IPv4 address too long")
            fields.append(value)
            value, digits = 0, 0
        else:
            raise _error(text, "unexpected character", part[i:])
    if len(fields) < 3:
        raise _error(text, "IPv4 address too short")
    return [*fields, value]


def _ipv6(text: str) -> tuple[int, str]:
    """parseIPv6: the address as an integer, and its zone."""
    rest, zone = text, ""
    if "%" in text:
        rest, _, zone = text.partition("%")
        if not zone:
            raise _error(text, "zone must be a non-empty string")
    groups: list[int] = []  # 16-bit groups
    ellipsis = -1
    if rest.startswith("::"):
        ellipsis, rest = 0, rest[2:]
        if not rest:
            return 0, zone
    while len(groups) < 8:
        digits = 0
        while digits < len(rest) and rest[digits] in "0123456789abcdefABCDEF":
            if digits > 3:
                raise _error(text, "each group must have 4 or less digits", rest)
            digits += 1
        if digits == 0:
            raise _error(text, "each colon-separated field must have at least one digit", rest)
        if digits < len(rest) and rest[digits] == ".":
            if ellipsis < 0 and len(groups) != 6:
                raise _error(text, "embedded IPv4 address must replace the final 2 fields of "
                                   "the address", rest)
            if len(groups) > 6:
                raise _error(text, "too many hex fields to fit an embedded IPv4 at the end of "
                                   "the address", rest)
            a, b, c, d = _ipv4_fields(text, rest)
            groups += [a << 8 | b, c << 8 | d]
            rest = ""
            break
        groups.append(int(rest[:digits], 16))
        rest = rest[digits:]
        if not rest:
            break
        if rest[0] != ":":
            raise _error(text, "unexpected character, want colon", rest)
        if len(rest) == 1:
            raise _error(text, "colon must be followed by more characters", rest)
        rest = rest[1:]
        if rest[0] == ":":
            if ellipsis >= 0:
                raise _error(text, "multiple :: in address", rest)
            ellipsis, rest = len(groups), rest[1:]
            if not rest:
                break
    if rest:
        raise _error(text, "trailing garbage after address", rest)
    if len(groups) < 8:
        if ellipsis < 0:
            raise _error(text, "address string too short")
        groups = groups[:ellipsis] + [0] * (8 - len(groups)) + groups[ellipsis:]
    elif ellipsis >= 0:
        raise _error(text, "the :: must expand to at least one field of zeros")
    value = 0
    for group in groups:
        value = value << 16 | group
    return value, zone


def parse_netip(text: str) -> Address:
    """netip.ParseAddr; AddressError in its words ("zone" for an address with a zone)."""
    for char in text:
        if char == ".":
            a, b, c, d = _ipv4_fields(text, text)
            return ipaddress.IPv4Address(bytes((a, b, c, d)))
        if char == ":":
            value, zone = _ipv6(text)
            if zone:
                raise AddressError("zone")
            return ipaddress.IPv6Address(value)
        if char == "%":
            raise _error(text, "missing IPv6 address")
    raise _error(text, "unable to parse IP")


def parse_ip(text: str) -> Address:
    """kube's parseIPAddr: netip's address, without a zone or an IPv4-mapped IPv6 form."""
    try:
        address = parse_netip(text)
    except AddressError as err:
        if str(err) == "zone":
            raise ValueError(f"IP address {go_quote(text)} with zone value is not allowed") \
                from None
        raise ValueError(f"IP Address {go_quote(text)} parse error during conversion from "
                         f"string: {err}") from None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        raise ValueError(f"IPv4-mapped IPv6 address {go_quote(text)} is not allowed")
    return address


def _prefix_error(text: str) -> tuple[Address, int]:
    """netip.ParsePrefix; ValueError in its words."""
    def fail(message: str) -> ValueError:
        return ValueError(f"netip.ParsePrefix({go_quote(text)}): {message}")

    address_text, slash, bits_text = text.rpartition("/")
    if not slash:
        raise fail("no '/'")
    try:
        address = parse_netip(address_text)
    except AddressError as err:
        if str(err) == "zone":
            raise fail("IPv6 zones cannot be present in a prefix") from None
        raise fail(str(err)) from None
    if (len(bits_text) > 1 and not "1" <= bits_text[0] <= "9") or not (
            bits_text.isascii() and bits_text.isdigit()):
        raise fail(f"bad bits after slash: {go_quote(bits_text)}")
    bits = int(bits_text)
    if bits > address.max_prefixlen:
        raise fail("prefix length out of range")
    return address, bits


def parse_cidr(text: str) -> tuple[Address, int]:
    """kube's parseCIDR: (address as written, prefix length)."""
    try:
        address, bits = _prefix_error(text)
    except ValueError as err:
        raise ValueError(f"network address parse error during conversion from string: {err}") \
            from None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        raise ValueError(f"IPv4-mapped IPv6 address {go_quote(text)} is not allowed")
    return address, bits


# -- values --------------------------------------------------------------------------------


def make_ip(address: Address) -> Any:
    return opaque.make(opaque.IP, str(address))


def make_cidr(address: Address, bits: int) -> Any:
    return opaque.make(opaque.CIDR, f"{address}/{bits}")


def _ip(arg: Any) -> Address:
    return ipaddress.ip_address(opaque.value_of(arg, opaque.IP))


def _cidr(arg: Any) -> tuple[Address, int]:
    address, _, bits = opaque.value_of(arg, opaque.CIDR).rpartition("/")
    return ipaddress.ip_address(address), int(bits)


def _network(address: Address, bits: int) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    return ipaddress.ip_network(f"{address}/{bits}", strict=False)


# -- netip's predicates --------------------------------------------------------------------


def _first16(address: Address) -> int:
    return int(address) >> 112


def is_link_local_multicast(address: Address) -> bool:
    if address.version == 4:
        return address in ipaddress.IPv4Network("224.0.0.0/24")
    return _first16(address) & 0xFF0F == 0xFF02


def is_link_local_unicast(address: Address) -> bool:
    if address.version == 4:
        return address in ipaddress.IPv4Network("169.254.0.0/16")
    return _first16(address) & 0xFFC0 == 0xFE80


def is_global_unicast(address: Address) -> bool:
    if address.version == 4 and str(address) in ("0.0.0.0", "255.255.255.255"):
        return False
    return not (address.is_unspecified or address.is_loopback or address.is_multicast
                or is_link_local_unicast(address))


def _contains_ip(cidr: Any, other: Any) -> bool:
    address, bits = _cidr(cidr)
    ip = _ip(make_ip(parse_ip(other))) if isinstance(other, str) else _ip(other)
    return ip.version == address.version and ip in _network(address, bits)


def _string_to_cidr(text: str) -> Any:
    """stringToCIDR: kube words its errors once more around parseCIDR's."""
    try:
        return make_cidr(*parse_cidr(text))
    except ValueError as err:
        raise ValueError(f"network address parse error during conversion from string: {err}") \
            from None


def _contains_cidr(cidr: Any, other: Any) -> bool:
    address, bits = _cidr(cidr)
    inner, inner_bits = _cidr(_string_to_cidr(other) if isinstance(other, str) else other)
    if inner.version != address.version:
        return False
    return _network(address, bits).overlaps(_network(inner, inner_bits)) and bits <= inner_bits


def _string(arg: Any) -> str:
    """string() of an IP or a CIDR (one function: the runtime dispatches on the kind)."""
    if opaque.type_name(arg) == opaque.CIDR:
        address, bits = _cidr(arg)
        return f"{address}/{bits}"
    return str(_ip(arg))


def _is(parse: Any) -> Any:
    def check(text: str) -> bool:
        try:
            parse(text)
        except ValueError:
            return False
        return True
    return check


def declarations(runtime: bool) -> list[cel.FunctionDecl]:
    impl = (lambda f: f) if runtime else (lambda f: None)

    def ip_member(name: str, result: cel.Type, f: Any) -> cel.FunctionDecl:
        return cel.FunctionDecl(name, [cel.Overload(f"ip_{name}", result, [IP], is_member=True,
                                                    impl=impl(lambda a: f(_ip(a))))])

    decls = [
        cel.FunctionDecl("ip", [
            cel.Overload("string_to_ip", IP, [T.STRING], impl=impl(lambda s: make_ip(
                parse_ip(s)))),
            cel.Overload("cidr_ip", IP, [CIDR], is_member=True,
                         impl=impl(lambda c: make_ip(_cidr(c)[0])))]),
        cel.FunctionDecl("isIP", [cel.Overload("is_ip", T.BOOL, [T.STRING],
                                               impl=impl(_is(parse_ip)))]),
        cel.FunctionDecl("ip.isCanonical", [cel.Overload(
            "ip_is_canonical", T.BOOL, [T.STRING],
            impl=impl(lambda s: str(parse_ip(s)) == s))]),
        ip_member("family", T.INT, lambda a: a.version),
        ip_member("isUnspecified", T.BOOL, lambda a: a.is_unspecified),
        ip_member("isLoopback", T.BOOL, lambda a: a.is_loopback),
        ip_member("isLinkLocalMulticast", T.BOOL, is_link_local_multicast),
        ip_member("isLinkLocalUnicast", T.BOOL, is_link_local_unicast),
        ip_member("isGlobalUnicast", T.BOOL, is_global_unicast),
        cel.FunctionDecl("cidr", [cel.Overload(
            "string_to_cidr", CIDR, [T.STRING], impl=impl(_string_to_cidr))]),
        cel.FunctionDecl("isCIDR", [cel.Overload("is_cidr", T.BOOL, [T.STRING],
                                                 impl=impl(_is(parse_cidr)))]),
        cel.FunctionDecl("containsIP", [
            cel.Overload("cidr_contains_ip_string", T.BOOL, [CIDR, T.STRING], is_member=True,
                         impl=impl(_contains_ip)),
            cel.Overload("cidr_contains_ip_ip", T.BOOL, [CIDR, IP], is_member=True,
                         impl=impl(_contains_ip))]),
        cel.FunctionDecl("containsCIDR", [
            cel.Overload("cidr_contains_cidr_string", T.BOOL, [CIDR, T.STRING], is_member=True,
                         impl=impl(_contains_cidr)),
            cel.Overload("cidr_contains_cidr", T.BOOL, [CIDR, CIDR], is_member=True,
                         impl=impl(_contains_cidr))]),
        cel.FunctionDecl("prefixLength", [cel.Overload(
            "cidr_prefix_length", T.INT, [CIDR], is_member=True,
            impl=impl(lambda c: _cidr(c)[1]))]),
        cel.FunctionDecl("masked", [cel.Overload(
            "cidr_masked", CIDR, [CIDR], is_member=True,
            impl=impl(lambda c: make_cidr(_network(*_cidr(c)).network_address,
                                          _cidr(c)[1])))]),
    ]
    return decls


def string_overloads(runtime: bool) -> list[cel.Overload]:
    """string(IP) and string(CIDR), merged into the standard ``string``: at run time one
    function takes every message kind (kube's types are all messages here)."""
    if runtime:
        return [cel.Overload("ip_to_string", T.STRING, [IP], impl=_string)]
    return [cel.Overload("ip_to_string", T.STRING, [IP]),
            cel.Overload("cidr_to_string", T.STRING, [CIDR])]
