"""--advertise-address's default (kube's ResolveBindAddress / ChooseHostInterface) and the
service-network flags' checks, with kube-apiserver's messages."""

from __future__ import annotations

import ipaddress

import pytest

from gateway.apimachinery import hostnet
from gateway.apimachinery.hostnet import (
    LinuxInterfaces,
    NoHostAddressError,
    Route,
    choose_from_interfaces,
    choose_from_routes,
    default_advertise_address,
    is_global_unicast,
    parse_default_routes,
    resolve_bind_address,
)
from gateway.cli import build_parser
from gateway.options import OptionsError, ServeOptions

UP, LOOPBACK, P2P = 0x1, 0x8, 0x10

ROUTES_V4 = """Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0
eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
"""
ROUTES_V6 = (
    "fd000000000000000000000000000000 40 00000000000000000000000000000000 00 "
    "00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth1\n"
    "00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
    "fd000000000000000000000000000001 00000400 00000002 00000000 00000003     eth1\n"
    "00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
    "00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo\n"
)


class Host:
    """A host's interfaces, as the choice reads them: flags and addresses by name."""

    def __init__(self, **interfaces: tuple[int, list[str]]) -> None:
        self.interfaces = interfaces

    def names(self) -> list[str]:
        return list(self.interfaces)

    def flags(self, name: str) -> int | None:
        found = self.interfaces.get(name)
        return None if found is None else found[0]

    def addresses(self, name: str) -> list[hostnet.IPAddress]:
        return [ipaddress.ip_address(a) for a in self.interfaces[name][1]]


def test_default_routes_are_read_from_the_kernels_tables():
    routes = parse_default_routes(ROUTES_V4, ROUTES_V6)
    # the IPv4 route to 0.0.0.0, the IPv6 route to :: with a gateway (not the loopback one)
    assert routes == [Route("eth0", 4), Route("eth1", 6)]


def test_the_default_routes_interface_gives_the_address():
    host = Host(lo=(UP | LOOPBACK, ["127.0.0.1", "::1"]),
                eth0=(UP, ["fe80::1", "192.0.2.2"]), eth1=(UP, ["fd00::2"]))
    routes = parse_default_routes(ROUTES_V4, ROUTES_V6)
    assert str(choose_from_routes(routes, host)) == "192.0.2.2"
    # an IPv6 bind address prefers IPv6 routes
    assert str(choose_from_routes(routes, host, hostnet.PREFER_IPV6)) == "fd00::2"


def test_an_interface_that_is_down_or_link_local_only_is_passed_over():
    routes = [Route("eth0", 4), Route("eth1", 4)]
    host = Host(eth0=(0, ["192.0.2.2"]), eth1=(UP, ["169.254.3.4", "198.51.100.7"]))
    assert str(choose_from_routes(routes, host)) == "198.51.100.7"
    # routes over link-local addresses: a global address on the loopback interface serves
    host = Host(lo=(UP | LOOPBACK, ["127.0.0.1", "203.0.113.9"]), eth0=(UP, ["169.254.0.2"]))
    assert str(choose_from_routes([Route("eth0", 4)], host)) == "203.0.113.9"
    with pytest.raises(NoHostAddressError, match="unable to select an IP from default routes"):
        choose_from_routes([Route("eth0", 4)], Host(eth0=(UP, ["169.254.0.2"]),
                                                    lo=(UP | LOOPBACK, ["127.0.0.1"])))


def test_without_routes_any_up_interface_but_loopback_and_point_to_point():
    host = Host(lo=(UP | LOOPBACK, ["127.0.0.1"]), tun0=(UP | P2P, ["10.8.0.1"]),
                eth0=(UP, ["10.1.2.3"]))
    assert str(choose_from_interfaces(host)) == "10.1.2.3"
    with pytest.raises(NoHostAddressError, match="no acceptable interface"):
        choose_from_interfaces(Host(lo=(UP | LOOPBACK, ["127.0.0.1"])))


def test_global_unicast_is_gos():
    for address in ("10.0.0.1", "192.0.2.2", "fd00::2", "2001:db8::1"):
        assert is_global_unicast(ipaddress.ip_address(address)), address
    for address in ("0.0.0.0", "127.0.0.1", "169.254.1.1", "224.0.0.1", "255.255.255.255",
                    "::", "::1", "fe80::1", "ff02::1"):
        assert not is_global_unicast(ipaddress.ip_address(address)), address


def test_a_specific_bind_address_is_advertised_as_it_is():
    assert resolve_bind_address("192.0.2.50", Host()) == "192.0.2.50"
    assert resolve_bind_address("2001:db8::5", Host()) == "2001:db8::5"


def test_loopback_and_unspecified_bind_addresses_advertise_the_hosts_address():
    # as kube: a loopback bind address says nothing about where others reach the gateway
    for bind in ("127.0.0.1", "0.0.0.0"):
        try:
            advertised = ipaddress.ip_address(resolve_bind_address(bind))
        except NoHostAddressError:
            pytest.skip("this host has no global address")
        assert is_global_unicast(advertised), advertised


def test_loopback_only_as_a_last_resort():
    # kube-apiserver refuses to start here; the gateway advertises loopback
    nowhere = Host(lo=(UP | LOOPBACK, ["127.0.0.1", "::1"]))
    assert default_advertise_address("0.0.0.0", nowhere) == "127.0.0.1"
    assert default_advertise_address("::", nowhere) == "::1"
    assert default_advertise_address("127.0.0.5", nowhere) == "127.0.0.5"
    assert default_advertise_address("192.0.2.8", nowhere) == "192.0.2.8"


def test_the_real_hosts_interfaces_are_readable():
    interfaces = LinuxInterfaces()
    names = interfaces.names()
    assert names, "no interfaces"
    assert any((interfaces.flags(n) or 0) & LOOPBACK for n in names)


def options(*argv: str) -> ServeOptions:
    return ServeOptions.from_args(build_parser().parse_args(["serve", *argv]))


def test_service_network_defaults_are_kube_apiservers():
    opts = options("--bind-address=192.0.2.9")
    assert [r.cidr for r in opts.service_ip_ranges] == ["10.0.0.0/24"]
    assert opts.service_ip_ranges[0].first_address == "10.0.0.1"
    assert opts.advertise_address == "192.0.2.9", "a specific bind address is advertised"
    given = options("--advertise-address=198.51.100.4", "--service-cluster-ip-range",
                    "10.96.0.0/16,fd00:10::/108")
    assert given.advertise_address == "198.51.100.4"
    assert [(r.cidr, r.family) for r in given.service_ip_ranges] == [
        ("10.96.0.0/16", "IPv4"), ("fd00:10::/108", "IPv6")]


@pytest.mark.parametrize(("argv", "message"), [
    (["--service-cluster-ip-range=10.0.0.0"], "service-cluster-ip-range[0] is not a valid cidr"),
    (["--service-cluster-ip-range=10.0.0.0/30"],
     "error determining service IP ranges for primary service cidr: the service cluster IP "
     "range must be at least 8 IP addresses"),
    (["--service-cluster-ip-range=10.0.0.0/8"],
     "specified --service-cluster-ip-range is too large; for 32-bit addresses, the mask must "
     "be >= 12"),
    (["--service-cluster-ip-range=10.0.0.0/24,fd00::/64"],
     "specified --service-cluster-ip-range[1] is too large; for 128-bit addresses, the mask "
     "must be >= 108"),
    (["--service-cluster-ip-range=10.0.0.0/24,10.1.0.0/24"],
     "--service-cluster-ip-range[0] and --service-cluster-ip-range[1] must be of different IP "
     "family"),
    (["--service-cluster-ip-range=10.0.0.0/24,nope"],
     "service-cluster-ip-range[1] is not an ip net"),
    (["--service-cluster-ip-range=10.0.0.0/24,fd00::/108,10.1.0.0/24"],
     "--service-cluster-ip-range must not contain more than two entries"),
    (["--advertise-address=fd00::9"],
     'service IP family "10.0.0.0/24" must match public address family "fd00::9"'),
    (["--advertise-address=nope"], "--advertise-address: 'nope' is not an IP address"),
])
def test_bad_service_network_flags_get_kubes_words(argv, message):
    with pytest.raises(OptionsError) as err:
        options("--bind-address=192.0.2.9", *argv)
    assert str(err.value) == message
