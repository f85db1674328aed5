"""The address the gateway advertises when --advertise-address is left out, chosen the way
kube-apiserver chooses it (k8s.io/apimachinery/pkg/util/net: ResolveBindAddress and
ChooseHostInterface).

A bind address that is unset, unspecified (0.0.0.0, ::) or loopback says nothing about where
other members of the cluster reach the gateway, so the host's own address is looked up: the
first global unicast address of an interface that carries a default route (IPv4 routes first,
unless the bind address is IPv6), else a global address on the loopback interface. Without a
routing table (not Linux) every interface that is up is tried. Any other bind address is
advertised as it is.

Interfaces are read from /sys/class/net (flags), /proc/net/if_inet6 (IPv6 addresses) and the
SIOCGIFADDR ioctl (an interface's primary IPv4 address), so no library is needed.
"""

from __future__ import annotations

import ipaddress
import socket
import struct
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

ROUTE_FILE = Path("/proc/net/route")
ROUTE6_FILE = Path("/proc/net/ipv6_route")
IF_INET6_FILE = Path("/proc/net/if_inet6")
SYS_NET = Path("/sys/class/net")

_IFF_UP = 0x1
_IFF_LOOPBACK = 0x8
_IFF_POINTOPOINT = 0x10
_SIOCGIFADDR = 0x8915

PREFER_IPV4 = (4, 6)
PREFER_IPV6 = (6, 4)


class NoHostAddressError(Exception):
    """No interface of the host has an address another machine could reach."""


@dataclass(frozen=True)
class Route:
    """A default route: the interface it leaves through, and its family (4 or 6)."""

    interface: str
    family: int


class Interfaces(Protocol):
    """What the choice needs to know of the host's interfaces (tests give their own)."""

    def names(self) -> list[str]: ...

    def flags(self, name: str) -> int | None:
        """IFF_* flags, or None when there is no such interface."""

    def addresses(self, name: str) -> list[IPAddress]: ...


def is_global_unicast(ip: IPAddress) -> bool:
    """Go's net.IP.IsGlobalUnicast: anything but unspecified, loopback, multicast,
    link-local and the IPv4 broadcast address (private ranges count as global here)."""
    return not (ip.is_unspecified or ip.is_loopback or ip.is_multicast or ip.is_link_local
                or ip == ipaddress.IPv4Address("255.255.255.255"))


def family_of(ip: IPAddress) -> int:
    """4 or 6; an IPv4-mapped IPv6 address is IPv4, as Go's To4 sees it."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return 4
    return ip.version


def parse_default_routes(route_text: str, route6_text: str = "") -> list[Route]:
    """Default routes from the text of /proc/net/route and /proc/net/ipv6_route: IPv4
    routes to 0.0.0.0, IPv6 routes to :: that have a gateway (the others are loopback)."""
    routes = []
    for line in route_text.splitlines():
        fields = line.split()
        if len(fields) < 3 or fields[0] == "Iface":
            continue
        if int(fields[1], 16) == 0:
            routes.append(Route(fields[0], 4))
    for line in route6_text.splitlines():
        fields = line.split()
        if len(fields) < 10:
            continue
        if int(fields[0], 16) == 0 and int(fields[4], 16) != 0:
            routes.append(Route(fields[9], 6))
    return routes


class LinuxInterfaces:
    """The host's interfaces as Linux shows them in /sys and /proc."""

    def names(self) -> list[str]:
        return [name for _, name in socket.if_nameindex()]

    def flags(self, name: str) -> int | None:
        try:
            return int((SYS_NET / name / "flags").read_text().strip(), 16)
        except (OSError, ValueError):
            return None

    def addresses(self, name: str) -> list[IPAddress]:
        found: list[IPAddress] = []
        v4 = _ipv4_address(name)
        if v4 is not None:
            found.append(v4)
        try:
            lines = IF_INET6_FILE.read_text().splitlines()
        except OSError:
            lines = []
        for line in lines:
            fields = line.split()
            if len(fields) >= 6 and fields[5] == name:
                found.append(ipaddress.IPv6Address(bytes.fromhex(fields[0])))
        return found


def _ipv4_address(name: str) -> ipaddress.IPv4Address | None:
    """The interface's primary IPv4 address (SIOCGIFADDR), if it has one."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not a Unix
        return None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            answer = fcntl.ioctl(sock.fileno(), _SIOCGIFADDR,
                                 struct.pack("256s", name.encode()[:15]))
        except OSError:
            return None
    return ipaddress.IPv4Address(answer[20:24])


def _global_address(addresses: Iterable[IPAddress], family: int) -> IPAddress | None:
    for ip in addresses:
        if family_of(ip) == family and is_global_unicast(ip):
            return ip
    return None


def _from_interface(nw: Interfaces, name: str, family: int) -> IPAddress | None:
    flags = nw.flags(name)
    if flags is None or not flags & _IFF_UP:
        return None
    return _global_address(nw.addresses(name), family)


def _from_loopback(nw: Interfaces, family: int) -> IPAddress | None:
    for name in nw.names():
        flags = nw.flags(name) or 0
        if flags & _IFF_UP and flags & _IFF_LOOPBACK:
            found = _global_address(nw.addresses(name), family)
            if found is not None:
                return found
    return None


def choose_from_routes(routes: list[Route], nw: Interfaces,
                       families: tuple[int, int] = PREFER_IPV4) -> IPAddress:
    """The address of the first default route's interface, by family preference; a global
    address on the loopback interface counts too (routes over link-local addresses)."""
    for family in families:
        for route in routes:
            if route.family != family:
                continue
            found = _from_interface(nw, route.interface, family) or _from_loopback(nw, family)
            if found is not None:
                return found
    raise NoHostAddressError("unable to select an IP from default routes.")


def choose_from_interfaces(nw: Interfaces,
                           families: tuple[int, int] = PREFER_IPV4) -> IPAddress:
    """Without routes: the first global address of any interface that is up and neither
    loopback nor point-to-point."""
    names = nw.names()
    if not names:
        raise NoHostAddressError("no interfaces found on host.")
    for family in families:
        for name in names:
            flags = nw.flags(name) or 0
            if not flags & _IFF_UP or flags & (_IFF_LOOPBACK | _IFF_POINTOPOINT):
                continue
            found = _global_address(nw.addresses(name), family)
            if found is not None:
                return found
    raise NoHostAddressError("no acceptable interface with global unicast address found on host")


def choose_host_interface(families: tuple[int, int] = PREFER_IPV4,
                          nw: Interfaces | None = None) -> IPAddress:
    """ChooseHostInterface: by the default routes when the host has a routing table."""
    nw = nw if nw is not None else LinuxInterfaces()
    if not ROUTE_FILE.exists() or not sys.platform.startswith("linux"):
        return choose_from_interfaces(nw, families)
    try:
        route6 = ROUTE6_FILE.read_text()
    except OSError:
        route6 = ""
    routes = parse_default_routes(ROUTE_FILE.read_text(), route6)
    if not routes:
        raise NoHostAddressError(f'no default routes found in "{ROUTE_FILE}" or "{ROUTE6_FILE}"')
    return choose_from_routes(routes, nw, families)


def resolve_bind_address(bind_address: str, nw: Interfaces | None = None) -> str:
    """ResolveBindAddress: the host's address for an unset, unspecified or loopback bind
    address (of the bind address's family first), else the bind address itself."""
    bind = ipaddress.ip_address(bind_address) if bind_address else None
    families = PREFER_IPV6 if bind is not None and family_of(bind) == 6 else PREFER_IPV4
    if bind is None or bind.is_unspecified or bind.is_loopback:
        return str(choose_host_interface(families, nw))
    return str(bind)


def default_advertise_address(bind_address: str, nw: Interfaces | None = None) -> str:
    """What --advertise-address defaults to. kube-apiserver refuses to start when no host
    address can be found; the gateway then advertises its bind address, or loopback when it
    binds every address, so that it still runs on a machine without a network."""
    try:
        return resolve_bind_address(bind_address, nw)
    except (NoHostAddressError, OSError, ValueError):
        bind = ipaddress.ip_address(bind_address or "0.0.0.0")
        if not bind.is_unspecified:
            return str(bind)
        return "::1" if bind.version == 6 else "127.0.0.1"
