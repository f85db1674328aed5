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


def _ipv4_error(text: str) -> str:
    """netip.parseIPv4's complaint about dotted text ("" when it has none)."""
    fields = text.split(".")
    if len(fields) < 4:
        return "IPv4 address too short"
    if len(fields) > 4:
        return "IPv4 address too long"
    for field in fields:
        if not field:
            return "IPv4 field must have at least one digit"
        for char in field:
            if not ("0" <= char <= "9"):
                return f"unexpected character: {go_quote(char)}"
        if len(field) > 1 and field[0] == "0":
            return "IPv4 field has octet with leading zero"
        if int(field) > 255:
            return "IPv4 field has value >255"
    return ""


def parse_netip(text: str) -> Address:
    """netip.ParseAddr (a zone is reported, not kept); AddressError in its words."""
    if "%" in text and ":" in text:
        raise AddressError("zone")
    if ":" not in text and "." in text:
        problem = _ipv4_error(text)
        if problem:
            raise AddressError(f"ParseAddr({go_quote(text)}): {problem}")
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        raise AddressError(f"ParseAddr({go_quote(text)}): unable to parse IP") from None


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


def _contains_cidr(cidr: Any, other: Any) -> bool:
    address, bits = _cidr(cidr)
    inner, inner_bits = parse_cidr(other) if isinstance(other, str) else _cidr(other)
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
            "string_to_cidr", CIDR, [T.STRING], impl=impl(lambda s: make_cidr(*parse_cidr(s))))]),
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
