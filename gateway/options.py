"""The flags of ``gateway serve``: kube-apiserver's names and defaults, validated once.

Every flag is declared once, in ``add_serve_flags``; ``ServeOptions.from_args`` turns the parsed
namespace into typed values and checks them, raising OptionsError with one line that names the
flag. The command line prints that line and exits 2.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from gateway.apimachinery.netutil import IPRange, service_network

AUTHORIZATION_MODES = ("AlwaysAllow", "AlwaysDeny", "RBAC")
LOG_FORMATS = ("json", "console")


class OptionsError(Exception):
    """A flag's value is unusable; the message is one line naming the flag."""


def parse_bool(value: str | bool) -> bool:
    """Go's strconv.ParseBool, as kube's boolean flags accept it."""
    if isinstance(value, bool):
        return value
    lowered = value.lower()
    if lowered in ("1", "t", "true"):
        return True
    if lowered in ("0", "f", "false"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean value {value!r}")


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: str) -> float:
    """Go's time.ParseDuration ("1m0s", "90s", "1h30m"), in seconds; a bare 0 is allowed."""
    text = value.strip()
    if text in ("0", ""):
        return 0.0
    sign = -1.0 if text.startswith("-") else 1.0
    text = text.lstrip("+-")
    total, pos = 0.0, 0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(text) or pos == 0:
        raise argparse.ArgumentTypeError(f"invalid duration {value!r} (e.g. 60s, 1m0s, 1h)")
    return sign * total


def _list(values: list[str] | None) -> list[str]:
    """kube's StringSlice: repeated flags and comma-separated values both add items."""
    items: list[str] = []
    for value in values or []:
        items += [part.strip() for part in value.split(",") if part.strip()]
    return items


@dataclass(frozen=True)
class NamedCertKey:
    """One --tls-sni-cert-key: a certificate and key, and the names they are served for
    (empty: the certificate's own)."""

    cert_file: Path
    key_file: Path
    names: tuple[str, ...] = ()


def parse_named_cert_key(value: str) -> NamedCertKey:
    """kube's NamedCertKey: ``certfile,keyfile[:name1,name2]``; OptionsError otherwise."""
    flag = "--tls-sni-cert-key"
    names: tuple[str, ...] = ()
    pair, colon, listed = value.partition(":")
    if colon:
        if not listed.strip():
            raise OptionsError(f"{flag}: {value!r}: empty names list is not allowed")
        names = tuple(name.strip() for name in listed.split(","))
    files = pair.strip().split(",")
    if len(files) != 2:
        raise OptionsError(f"{flag}: {value!r}: expected comma separated certificate and key "
                           "file paths")
    return NamedCertKey(Path(files[0].strip()), Path(files[1].strip()), names)


def add_serve_flags(parser: argparse.ArgumentParser) -> None:
    """Declare every flag of ``gateway serve``."""
    add = parser.add_argument
    flag_bool: dict[str, Any] = {"type": parse_bool, "nargs": "?", "const": True,
                                 "metavar": "BOOL"}
    # serving
    add("--secure-port", type=int, default=6443, help="HTTPS port (default 6443)")
    add("--bind-address", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    add("--tls-cert-file", help="serving certificate (default: the development PKI's)")
    add("--tls-private-key-file", help="key of --tls-cert-file")
    add("--tls-san", action="append", help="extra SAN for the generated serving certificate")
    add("--tls-sni-cert-key", action="append", metavar="CERT,KEY[:NAMES]",
        help="a certificate and key served to clients asking for one of NAMES by SNI "
        "(domain patterns, '*.' wildcards; default: the certificate's names); repeatable")
    add("--cert-dir", default="certs", help="where the development PKI lives (default certs)")
    add("--advertise-address", help="IP published in the kubernetes Service's endpoints "
        "(default: the host's default-route address, as kube-apiserver chooses it)")
    add("--service-cluster-ip-range", default="", help="CIDR, or an IPv4,IPv6 pair, Service "
        "cluster IPs are allocated from (default 10.0.0.0/24)")
    # storage
    add("--data-dir", default=".gateway", help="embedded store directory (default .gateway)")
    add("--etcd-servers", action="append", help="etcd URLs; selects the etcd store")
    add("--etcd-prefix", default="/registry", help="key prefix in etcd (default /registry)")
    add("--etcd-cafile", help="CA bundle that signs etcd's serving certificate")
    add("--etcd-certfile", help="client certificate for etcd")
    add("--etcd-keyfile", help="client key for etcd")
    add("--etcd-compaction-interval", type=parse_duration, default=300.0,
        help="how often etcd history is compacted (5m0s); 0 disables")
    # authentication and authorization
    add("--client-ca-file", help="CA bundle for client certificates (default: the dev CA)")
    add("--token-auth-file", help="static bearer tokens, kube's CSV format")
    add("--anonymous-auth", default=True, **flag_bool, help="allow anonymous requests")
    add("--authorization-mode", action="append", help="RBAC (default), AlwaysAllow, AlwaysDeny")
    add("--service-account-key-file", action="append", help="keys that verify SA tokens")
    add("--service-account-signing-key-file", help="key that signs service-account tokens")
    add("--service-account-issuer", action="append", help="issuer of service-account tokens")
    add("--api-audiences", action="append", help="audiences tokens must carry")
    add("--requestheader-client-ca-file", help="CA of front-proxy client certificates")
    add("--requestheader-allowed-names", action="append", help="front-proxy CNs allowed")
    add("--requestheader-username-headers", action="append", help="default X-Remote-User")
    add("--requestheader-group-headers", action="append", help="default X-Remote-Group")
    add("--requestheader-extra-headers-prefix", action="append", help="default X-Remote-Extra-")
    add("--requestheader-uid-headers", action="append", help="headers carrying the user's UID")
    # aggregation
    add("--proxy-client-cert-file", help="client certificate the gateway shows backends")
    add("--proxy-client-key-file", help="key of --proxy-client-cert-file")
    add("--enable-aggregator-routing", default=False, **flag_bool,
        help="route to endpoint addresses instead of the service's DNS name")
    # limits and timeouts
    add("--max-requests-inflight", type=int, default=400, help="non-mutating in-flight limit; "
        "with --max-mutating-requests-inflight, the server's total concurrency under APF")
    add("--max-mutating-requests-inflight", type=int, default=200, help="mutating limit")
    add("--enable-priority-and-fairness", default=True, **flag_bool,
        help="API Priority and Fairness in place of the max-in-flight limits (default true)")
    add("--etcd-count-metric-poll-period", type=parse_duration, default=60.0,
        help="how often each resource's objects are counted (1m0s); 0 disables")
    add("--request-timeout", type=parse_duration, default=60.0, help="default 1m0s")
    add("--min-request-timeout", type=int, default=1800, help="watch timeout floor, seconds")
    add("--shutdown-delay-duration", type=parse_duration, default=0.0,
        help="keep serving this long after SIGTERM while /readyz fails")
    add("--event-ttl", type=parse_duration, default=3600.0, help="events expire after (1h0m0s)")
    add("--root-ca-file", help="CA bundle published as kube-root-ca.crt (default: the dev CA)")
    # audit
    add("--audit-log-path", help="audit log file, - for stdout")
    add("--audit-policy-file", help="audit policy")
    add("--audit-log-maxsize", type=int, default=0, help="megabytes before rotation")
    add("--audit-log-maxbackup", type=int, default=0, help="rotated files to keep")
    add("--audit-log-maxage", type=int, default=0, help="days to keep rotated files")
    add("--cors-allowed-origins", action="append", help="allowed CORS origin patterns")
    # logging
    add("--log-format", default="json", help="json (default) or console")
    add("-v", "--v", dest="verbosity", type=int, default=0, help="log verbosity (4+ is debug)")


@dataclass
class ServeOptions:
    """The validated configuration of ``gateway serve``."""

    secure_port: int = 6443
    bind_address: str = "0.0.0.0"
    tls_cert_file: Path | None = None
    tls_private_key_file: Path | None = None
    tls_sans: list[str] = field(default_factory=list)
    tls_sni_cert_keys: list[NamedCertKey] = field(default_factory=list)
    #: The serving certificates are the development PKI's (none were given).
    dev_pki: bool = False
    cert_dir: Path = Path("certs")
    advertise_address: str = ""  # resolved by validate() when left out
    service_cluster_ip_range: str = ""
    service_ip_ranges: list[IPRange] = field(default_factory=list)  # set by validate()
    data_dir: Path = Path(".gateway")
    etcd_servers: list[str] = field(default_factory=list)
    etcd_prefix: str = "/registry"
    etcd_cafile: Path | None = None
    etcd_certfile: Path | None = None
    etcd_keyfile: Path | None = None
    etcd_compaction_interval: float = 300.0
    client_ca_file: Path | None = None
    token_auth_file: Path | None = None
    anonymous_auth: bool = True
    authorization_modes: list[str] = field(default_factory=lambda: ["RBAC"])
    service_account_key_files: list[Path] = field(default_factory=list)
    service_account_signing_key_file: Path | None = None
    service_account_issuers: list[str] = field(default_factory=list)
    api_audiences: list[str] = field(default_factory=list)
    requestheader_client_ca_file: Path | None = None
    requestheader_allowed_names: list[str] = field(default_factory=list)
    requestheader_username_headers: list[str] = field(default_factory=lambda: ["X-Remote-User"])
    requestheader_group_headers: list[str] = field(default_factory=lambda: ["X-Remote-Group"])
    requestheader_extra_headers_prefix: list[str] = field(
        default_factory=lambda: ["X-Remote-Extra-"]
    )
    requestheader_uid_headers: list[str] = field(default_factory=list)
    proxy_client_cert_file: Path | None = None
    proxy_client_key_file: Path | None = None
    enable_aggregator_routing: bool = False
    max_requests_inflight: int = 400
    max_mutating_requests_inflight: int = 200
    enable_priority_and_fairness: bool = True
    etcd_count_metric_poll_period: float = 60.0
    request_timeout: float = 60.0
    min_request_timeout: int = 1800
    shutdown_delay_duration: float = 0.0
    event_ttl: float = 3600.0
    root_ca_file: Path | None = None
    audit_log_path: str | None = None
    audit_policy_file: Path | None = None
    audit_log_maxsize: int = 0
    audit_log_maxbackup: int = 0
    audit_log_maxage: int = 0
    cors_allowed_origins: list[str] = field(default_factory=list)
    log_format: str = "json"
    verbosity: int = 0

    @property
    def uses_etcd(self) -> bool:
        return bool(self.etcd_servers)

    @property
    def state_db(self) -> Path:
        return self.data_dir / "state.db"

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ServeOptions:
        """Typed, checked options; OptionsError names the first bad flag."""
        opts = cls(
            secure_port=args.secure_port,
            bind_address=args.bind_address,
            tls_cert_file=_path(args.tls_cert_file),
            tls_private_key_file=_path(args.tls_private_key_file),
            tls_sans=_list(args.tls_san),
            tls_sni_cert_keys=[parse_named_cert_key(v) for v in args.tls_sni_cert_key or []],
            cert_dir=Path(args.cert_dir),
            advertise_address=args.advertise_address or "",
            service_cluster_ip_range=args.service_cluster_ip_range or "",
            data_dir=Path(args.data_dir),
            etcd_servers=_list(args.etcd_servers),
            etcd_prefix=args.etcd_prefix,
            etcd_cafile=_path(args.etcd_cafile),
            etcd_certfile=_path(args.etcd_certfile),
            etcd_keyfile=_path(args.etcd_keyfile),
            etcd_compaction_interval=args.etcd_compaction_interval,
            client_ca_file=_path(args.client_ca_file),
            token_auth_file=_path(args.token_auth_file),
            anonymous_auth=args.anonymous_auth,
            authorization_modes=_list(args.authorization_mode) or ["RBAC"],
            service_account_key_files=[Path(p) for p in _list(args.service_account_key_file)],
            service_account_signing_key_file=_path(args.service_account_signing_key_file),
            service_account_issuers=_list(args.service_account_issuer),
            api_audiences=_list(args.api_audiences),
            requestheader_client_ca_file=_path(args.requestheader_client_ca_file),
            requestheader_allowed_names=_list(args.requestheader_allowed_names),
            requestheader_username_headers=_list(args.requestheader_username_headers)
            or ["X-Remote-User"],
            requestheader_group_headers=_list(args.requestheader_group_headers)
            or ["X-Remote-Group"],
            requestheader_extra_headers_prefix=_list(args.requestheader_extra_headers_prefix)
            or ["X-Remote-Extra-"],
            requestheader_uid_headers=_list(args.requestheader_uid_headers),
            proxy_client_cert_file=_path(args.proxy_client_cert_file),
            proxy_client_key_file=_path(args.proxy_client_key_file),
            enable_aggregator_routing=args.enable_aggregator_routing,
            max_requests_inflight=args.max_requests_inflight,
            max_mutating_requests_inflight=args.max_mutating_requests_inflight,
            enable_priority_and_fairness=args.enable_priority_and_fairness,
            etcd_count_metric_poll_period=args.etcd_count_metric_poll_period,
            request_timeout=args.request_timeout,
            min_request_timeout=args.min_request_timeout,
            shutdown_delay_duration=args.shutdown_delay_duration,
            event_ttl=args.event_ttl,
            root_ca_file=_path(args.root_ca_file),
            audit_log_path=args.audit_log_path,
            audit_policy_file=_path(args.audit_policy_file),
            audit_log_maxsize=args.audit_log_maxsize,
            audit_log_maxbackup=args.audit_log_maxbackup,
            audit_log_maxage=args.audit_log_maxage,
            cors_allowed_origins=_list(args.cors_allowed_origins),
            log_format=args.log_format,
            verbosity=args.verbosity,
        )
        opts.validate()
        return opts

    def validate(self) -> None:
        _check_port("--secure-port", self.secure_port)
        _check_ip("--bind-address", self.bind_address)
        try:
            self.service_ip_ranges, self.advertise_address = service_network(
                self.service_cluster_ip_range, self.advertise_address, self.bind_address)
        except ValueError as err:
            raise OptionsError(str(err)) from None
        for name in ("--max-requests-inflight", "--max-mutating-requests-inflight",
                     "--min-request-timeout", "--audit-log-maxsize", "--audit-log-maxbackup",
                     "--audit-log-maxage"):
            value = getattr(self, name.lstrip("-").replace("-", "_"))
            if value < 0:
                raise OptionsError(f"{name}: must not be negative, got {value}")
        if self.enable_priority_and_fairness and \
                self.max_requests_inflight + self.max_mutating_requests_inflight <= 0:
            raise OptionsError(
                "--enable-priority-and-fairness: invalid configuration: MaxRequestsInFlight="
                f"{self.max_requests_inflight} and MaxMutatingRequestsInFlight="
                f"{self.max_mutating_requests_inflight}; they must add up to something "
                "positive")
        if self.etcd_count_metric_poll_period < 0:
            raise OptionsError("--etcd-count-metric-poll-period: must not be negative")
        if self.request_timeout <= 0:
            raise OptionsError("--request-timeout: must be greater than 0")
        if self.event_ttl <= 0:
            raise OptionsError("--event-ttl: must be greater than 0")
        if self.etcd_compaction_interval < 0:
            raise OptionsError("--etcd-compaction-interval: must not be negative")
        if self.shutdown_delay_duration < 0:
            raise OptionsError("--shutdown-delay-duration: must not be negative")
        self._validate_modes()
        self._validate_pairs()
        self._validate_files()
        self._validate_etcd()
        for pattern in self.cors_allowed_origins:
            try:
                re.compile(pattern)
            except re.error as err:
                raise OptionsError(f"--cors-allowed-origins: {pattern!r} is not a regular "
                                   f"expression: {err}") from None
        if self.log_format not in LOG_FORMATS:
            raise OptionsError(
                f"--log-format: unknown format {self.log_format!r} (json or console)"
            )

    def _validate_modes(self) -> None:
        for mode in self.authorization_modes:
            if mode not in AUTHORIZATION_MODES:
                raise OptionsError(
                    f"--authorization-mode: unknown authorization mode {mode!r} "
                    f"(supported: {', '.join(AUTHORIZATION_MODES)})"
                )
        if len(set(self.authorization_modes)) != len(self.authorization_modes):
            raise OptionsError("--authorization-mode: a mode is listed more than once")

    def _validate_pairs(self) -> None:
        pairs = [
            ("--tls-cert-file", self.tls_cert_file, "--tls-private-key-file",
             self.tls_private_key_file),
            ("--proxy-client-cert-file", self.proxy_client_cert_file, "--proxy-client-key-file",
             self.proxy_client_key_file),
            ("--etcd-certfile", self.etcd_certfile, "--etcd-keyfile", self.etcd_keyfile),
        ]
        for first, first_value, second, second_value in pairs:
            if (first_value is None) != (second_value is None):
                given, missing = (first, second) if first_value else (second, first)
                raise OptionsError(f"{missing}: required when {given} is given")

    def _validate_files(self) -> None:
        files = {
            "--tls-cert-file": self.tls_cert_file,
            "--tls-private-key-file": self.tls_private_key_file,
            "--etcd-cafile": self.etcd_cafile,
            "--etcd-certfile": self.etcd_certfile,
            "--etcd-keyfile": self.etcd_keyfile,
            "--client-ca-file": self.client_ca_file,
            "--token-auth-file": self.token_auth_file,
            "--service-account-signing-key-file": self.service_account_signing_key_file,
            "--requestheader-client-ca-file": self.requestheader_client_ca_file,
            "--proxy-client-cert-file": self.proxy_client_cert_file,
            "--proxy-client-key-file": self.proxy_client_key_file,
            "--audit-policy-file": self.audit_policy_file,
            "--root-ca-file": self.root_ca_file,
        }
        for flag, path in files.items():
            if path is not None:
                _check_readable(flag, path)
        for path in self.service_account_key_files:
            _check_readable("--service-account-key-file", path)
        for named in self.tls_sni_cert_keys:
            _check_readable("--tls-sni-cert-key", named.cert_file)
            _check_readable("--tls-sni-cert-key", named.key_file)

    def _validate_etcd(self) -> None:
        for url in self.etcd_servers:
            parsed = urlparse(url)
            if parsed.scheme not in ("http", "https") or not parsed.hostname:
                raise OptionsError(
                    f"--etcd-servers: {url!r} is not an http:// or https:// URL with a host"
                )
            try:
                port = parsed.port
            except ValueError:
                raise OptionsError(f"--etcd-servers: {url!r} has an invalid port") from None
            if port is None:
                raise OptionsError(f"--etcd-servers: {url!r} has no port")
        if not self.etcd_prefix.startswith("/"):
            raise OptionsError(f"--etcd-prefix: must start with '/', got {self.etcd_prefix!r}")


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def _check_port(flag: str, port: int) -> None:
    if not 1 <= port <= 65535:
        raise OptionsError(f"{flag}: {port} is not a valid port (1-65535)")


def _check_ip(flag: str, value: str) -> None:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise OptionsError(f"{flag}: {value!r} is not an IP address") from None


def _check_readable(flag: str, path: Path) -> None:
    if not path.is_file():
        raise OptionsError(f"{flag}: {path} does not exist or is not a file")
    if not os.access(path, os.R_OK):
        raise OptionsError(f"{flag}: {path} is not readable")
