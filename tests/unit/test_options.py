"""Flag parsing and validation: kube's names, one clear error naming the flag."""

from __future__ import annotations

import pytest

from gateway.cli import build_parser
from gateway.options import OptionsError, ServeOptions, parse_duration


def options(*argv: str) -> ServeOptions:
    return ServeOptions.from_args(build_parser().parse_args(["serve", *argv]))


def test_defaults_are_kube_apiservers():
    opts = options()
    assert opts.secure_port == 6443
    assert opts.authorization_modes == ["RBAC"]
    assert opts.request_timeout == 60.0
    assert opts.min_request_timeout == 1800
    assert opts.max_requests_inflight == 400
    assert opts.max_mutating_requests_inflight == 200
    assert opts.enable_priority_and_fairness
    assert opts.etcd_count_metric_poll_period == 60.0
    assert opts.etcd_prefix == "/registry"
    assert opts.requestheader_username_headers == ["X-Remote-User"]
    assert not opts.uses_etcd
    assert str(opts.state_db) == ".gateway/state.db"


def test_lists_accept_commas_and_repeats():
    opts = options("--etcd-servers", "http://a:2379,http://b:2379",
                   "--etcd-servers=http://c:2379", "--authorization-mode=AlwaysAllow,RBAC")
    assert opts.etcd_servers == ["http://a:2379", "http://b:2379", "http://c:2379"]
    assert opts.authorization_modes == ["AlwaysAllow", "RBAC"]
    assert opts.uses_etcd


def test_go_booleans_and_durations():
    assert options("--enable-aggregator-routing").enable_aggregator_routing
    assert not options("--anonymous-auth=false").anonymous_auth
    assert options("--request-timeout=1m30s").request_timeout == 90.0
    assert parse_duration("1h0m0s") == 3600.0
    assert parse_duration("250ms") == 0.25


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--secure-port=70000"], "--secure-port"),
        (["--secure-port=0"], "--secure-port"),
        (["--bind-address=not-an-ip"], "--bind-address"),
        (["--authorization-mode=Webhook"], "--authorization-mode"),
        (["--client-ca-file=/does/not/exist"], "--client-ca-file"),
        (["--tls-cert-file=/etc/hostname"], "--tls-private-key-file"),
        (["--etcd-servers=localhost:2379"], "--etcd-servers"),
        (["--etcd-servers=http://localhost"], "--etcd-servers"),
        (["--log-format=xml"], "--log-format"),
        (["--max-requests-inflight=-1"], "--max-requests-inflight"),
        (["--max-requests-inflight=0", "--max-mutating-requests-inflight=0"],
         "--enable-priority-and-fairness"),
        (["--etcd-count-metric-poll-period=-1s"], "--etcd-count-metric-poll-period"),
    ],
)
def test_bad_values_name_their_flag(argv, flag):
    with pytest.raises(OptionsError) as err:
        options(*argv)
    assert str(err.value).startswith(flag)
    assert "\n" not in str(err.value)


def test_priority_and_fairness_needs_a_positive_total_and_may_be_turned_off():
    """kube's words when the in-flight limits leave APF no seats; without APF, 0 turns the
    limits off."""
    with pytest.raises(OptionsError, match="MaxRequestsInFlight=0 and "
                       "MaxMutatingRequestsInFlight=0; they must add up to something positive"):
        options("--max-requests-inflight=0", "--max-mutating-requests-inflight=0")
    off = options("--enable-priority-and-fairness=false", "--max-requests-inflight=0",
                  "--max-mutating-requests-inflight=0")
    assert not off.enable_priority_and_fairness
    assert options("--max-requests-inflight=0").enable_priority_and_fairness


def test_unparseable_values_exit_2_with_one_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["serve", "--secure-port", "abc"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--secure-port" in err
