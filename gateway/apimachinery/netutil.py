"""Service CIDRs as kube-apiserver reads --service-cluster-ip-range, and the IP ranges its
cluster-IP allocator hands addresses out of (k8s.io/utils/net, pkg/registry/core/service/
ipallocator).

A range never hands out the network address, nor the broadcast address of an IPv4 network;
an IPv6 range is cut at 65536 addresses (its allocation bitmap is kept whole in the store).
The first addresses, up to min(max(16, size/16), 256), are a band kept for IPs that clients
ask for by name (the `kubernetes` Service takes the very first); random allocations come from
above it while it has room.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from functools import cached_property

from gateway.apimachinery.hostnet import default_advertise_address, family_of

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

#: kube-apiserver's default when --service-cluster-ip-range is left out.
DEFAULT_SERVICE_CIDR = "10.0.0.0/24"
#: At most this many host bits: the allocation bitmap of a range lives in one stored object.
MAX_CIDR_BITS = 20
MIN_RANGE_SIZE = 8
_MAX_IPV6_ADDRESSES = 65536
_OFFSET_MIN, _OFFSET_MAX, _OFFSET_STEP = 16, 256, 16

IPV4, IPV6 = "IPv4", "IPv6"


def ip_family(ip: str) -> str:
    """"IPv4" or "IPv6" of an address (IPv4-mapped IPv6 is IPv4, as Go sees it); raises
    ValueError for a non-address."""
    return IPV4 if family_of(ipaddress.ip_address(_unpadded(ip))) == 4 else IPV6


def canonical_ip(ip: str) -> str | None:
    """The address in its canonical spelling, or None when it is not one."""
    try:
        address = ipaddress.ip_address(_unpadded(ip))
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def _unpadded(text: str) -> str:
    """Leading zeros dropped from dotted-quad fields (Go's sloppy parsers allow them)."""
    if ":" in text or text.count(".") != 3:
        return text
    parts = text.split(".")
    if not all(p.isdigit() for p in parts):
        return text
    return ".".join(str(int(p)) for p in parts)


def parse_cidr(text: str) -> Network | None:
    """ParseCIDRSloppy: an address with a prefix length; host bits are dropped."""
    address, slash, length = text.strip().partition("/")
    if not slash or not length.isdigit():
        return None
    try:
        return ipaddress.ip_network(f"{_unpadded(address)}/{length}", strict=False)
    except ValueError:
        return None


def range_size(network: Network) -> int:
    """k8s.io/utils/net RangeSize: how many addresses the network holds (0 for a /0 or /1,
    which kube does not count)."""
    host_bits = network.max_prefixlen - network.prefixlen
    if host_bits >= network.max_prefixlen - 1:
        return 0
    return 1 << host_bits


@dataclass(frozen=True)
class IPRange:
    """The addresses a cluster-IP allocator hands out of one service CIDR."""

    network: Network

    @classmethod
    def parse(cls, cidr: str) -> IPRange:
        network = parse_cidr(cidr)
        if network is None:
            raise ValueError(f"not a CIDR: {cidr!r}")
        return cls(network)

    @property
    def cidr(self) -> str:
        return str(self.network)

    @property
    def family(self) -> str:
        return IPV4 if self.network.version == 4 else IPV6

    @cached_property
    def base(self) -> int:
        """The first address handed out: the one after the network address."""
        return int(self.network.network_address) + 1

    @cached_property
    def size(self) -> int:
        """How many addresses can be handed out."""
        size = range_size(self.network)
        if self.network.version == 6:
            size = min(size, _MAX_IPV6_ADDRESSES)
        else:
            size -= 1  # the broadcast address
        return max(0, size - 1)  # the network address

    @cached_property
    def offset(self) -> int:
        """The size of the band kept for requested addresses."""
        size = range_size(self.network)
        if size <= _OFFSET_MIN:
            return 0
        return min(max(size // _OFFSET_STEP, _OFFSET_MIN), _OFFSET_MAX)

    def index(self, ip: str) -> int | None:
        """The address's place in the range, or None when the range does not hand it out."""
        try:
            address = ipaddress.ip_address(_unpadded(ip))
        except ValueError:
            return None
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if address.version != self.network.version or address not in self.network:
            return None
        offset = int(address) - self.base
        return offset if 0 <= offset < self.size else None

    def address(self, index: int) -> str:
        return str(ipaddress.ip_address(self.base + index))

    @property
    def first_address(self) -> str:
        """GetIndexedIP(cidr, 1): the `kubernetes` Service's cluster IP."""
        return str(self.network.network_address + 1)

    @property
    def network_address(self) -> str:
        return str(self.network.network_address)


def parse_service_cidrs(value: str) -> list[IPRange]:
    """--service-cluster-ip-range: one CIDR, or two of different families (dual-stack);
    empty means kube's default. ValueError carries kube-apiserver's words."""
    entries = value.split(",") if value else []
    if not entries:
        entries = [DEFAULT_SERVICE_CIDR]
    primary = parse_cidr(entries[0])
    if primary is None:
        raise ValueError("service-cluster-ip-range[0] is not a valid cidr")
    if min(range_size(primary), 1 << 16) < MIN_RANGE_SIZE:
        raise ValueError("error determining service IP ranges for primary service cidr: the "
                         f"service cluster IP range must be at least {MIN_RANGE_SIZE} IP "
                         "addresses")
    ranges = [IPRange(primary)]
    if len(entries) > 1:
        secondary = parse_cidr(entries[1])
        if secondary is None:
            raise ValueError("service-cluster-ip-range[1] is not an ip net")
        ranges.append(IPRange(secondary))
    if len(entries) > 2:
        raise ValueError("--service-cluster-ip-range must not contain more than two entries")
    _check_size(primary, "--service-cluster-ip-range")
    if len(ranges) == 2:
        if ranges[0].family == ranges[1].family:
            raise ValueError("--service-cluster-ip-range[0] and --service-cluster-ip-range[1] "
                             "must be of different IP family")
        _check_size(ranges[1].network, "--service-cluster-ip-range[1]")
    return ranges


def _check_size(network: Network, flag: str) -> None:
    bits = network.max_prefixlen
    if bits - network.prefixlen > MAX_CIDR_BITS:
        raise ValueError(f"specified {flag} is too large; for {bits}-bit addresses, the mask "
                         f"must be >= {bits - MAX_CIDR_BITS}")


def service_network(cidrs: str, advertise_address: str,
                    bind_address: str) -> tuple[list[IPRange], str]:
    """The service ranges and the advertised address, defaulted and checked as kube-apiserver
    completes and validates them: the advertised address must be of the primary range's
    family (the `kubernetes` Service is single-stack). ValueError names the flag."""
    ranges = parse_service_cidrs(cidrs)
    if advertise_address:
        try:
            given = ipaddress.ip_address(_unpadded(advertise_address))
        except ValueError:
            raise ValueError(f"--advertise-address: {advertise_address!r} is not an IP "
                             "address") from None
        advertise = "" if given.is_unspecified else str(given)
    else:
        advertise = ""
    if not advertise:
        advertise = default_advertise_address(bind_address)
    if ranges[0].family != ip_family(advertise):
        raise ValueError(f'service IP family "{ranges[0].cidr}" must match public address '
                         f'family "{advertise}"')
    return ranges, advertise
