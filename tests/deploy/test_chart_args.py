"""The rendered Deployment's command line, parsed by the real `gateway serve` argument parser
and turned into ServeOptions: every flag exists and every value is valid, for every documented
combination. The pod's mounts are laid out under a temporary root (the rendered Secrets and
ConfigMaps as files, placeholders for Secrets that come from outside the chart) so that even
the flags naming files are checked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.cli import build_parser
from gateway.options import OptionsError, ServeOptions
from tests.deploy import helm

COMBINATIONS = helm.combinations()
POD_IP = "10.244.1.17"


def _serve_parser() -> Any:
    parser = build_parser()
    (subparsers,) = [a for a in parser._actions if a.dest == "command"]
    return subparsers.choices["serve"]


def parse(args: list[str]) -> ServeOptions:
    try:
        namespace = build_parser().parse_args(["serve", *args])
    except SystemExit as exit_:
        raise AssertionError(f"gateway serve refused {args}: exit {exit_.code}") from None
    return ServeOptions.from_args(namespace)


def test_the_container_runs_gateway_serve() -> None:
    container = helm.container(helm.render({}))
    assert container["command"] == ["gateway", "serve"]


@pytest.mark.parametrize("name", COMBINATIONS)
def test_every_flag_is_a_gateway_serve_flag(name: str) -> None:
    known = _serve_parser()._option_string_actions
    for arg in helm.container(helm.render(COMBINATIONS[name]))["args"]:
        flag = arg.partition("=")[0]
        assert flag in known, f"{flag} is not a flag of gateway serve"
        assert "=" in arg, f"{arg}: every flag carries its value after '='"


@pytest.mark.parametrize("name", COMBINATIONS)
def test_the_command_line_builds_valid_serve_options(name: str, tmp_path: Path) -> None:
    values = helm.chart().merge_values(COMBINATIONS[name])
    manifests = helm.render(COMBINATIONS[name])
    args, _ = helm.materialize(manifests, tmp_path, pod_ip=POD_IP)
    options = parse(args)

    assert options.secure_port == values["containerPort"]
    assert options.advertise_address == POD_IP
    assert options.authorization_modes == values["auth"]["authorizationModes"]
    assert options.anonymous_auth is values["auth"]["anonymous"]
    assert options.enable_aggregator_routing is values["aggregator"]["enableAggregatorRouting"]
    assert options.log_format == values["logging"]["format"]
    assert options.tls_cert_file == tmp_path / "etc/gateway/tls/tls.crt"
    assert options.token_auth_file is not None and options.token_auth_file.is_file()
    assert options.proxy_client_cert_file is not None
    assert options.requestheader_allowed_names == values["aggregator"]["proxyClient"][
        "allowedNames"]
    if values["storage"]["mode"] == "etcd":
        assert options.etcd_servers == values["storage"]["etcd"]["endpoints"]
        assert options.etcd_prefix == values["storage"]["etcd"]["prefix"]
    else:
        assert not options.uses_etcd
        assert options.data_dir == tmp_path / "var/lib/gateway"
    if values["audit"]["enabled"]:
        assert options.audit_policy_file is not None and options.audit_policy_file.is_file()


def test_durations_and_limits_reach_the_options(tmp_path: Path) -> None:
    manifests = helm.render({"server": {"requestTimeout": "1m30s", "shutdownDelayDuration": "0",
                                        "eventTTL": "2h", "maxRequestsInflight": 0,
                                        "minRequestTimeout": 60},
                             "storage": {"mode": "etcd",
                                         "etcd": {"endpoints": ["https://e:2379"],
                                                  "compactionInterval": "10m"}}})
    options = parse(helm.materialize(manifests, tmp_path)[0])
    assert options.request_timeout == 90.0
    assert options.shutdown_delay_duration == 0.0
    assert options.event_ttl == 7200.0
    assert options.etcd_compaction_interval == 600.0
    assert options.max_requests_inflight == 0
    assert options.min_request_timeout == 60


def test_a_value_the_gateway_refuses_is_caught_here(tmp_path: Path) -> None:
    """The check is real: a range the schema's pattern lets through but that is no CIDR is
    refused by the gateway's own validation."""
    manifests = helm.render({"server": {"serviceClusterIPRange": "10.0.0.0/33"}})
    with pytest.raises(OptionsError, match="service-cluster-ip-range"):
        parse(helm.materialize(manifests, tmp_path)[0])
