"""Keeps kube-system/extension-apiserver-authentication current, as kube-apiserver's
cluster authentication trust controller does: the CAs and request-header settings an
extension apiserver reads to trust requests the gateway forwards, and to verify client
certificates itself.

What the ConfigMap holds is the union of what it held and what this gateway uses: CA bundles
are merged certificate by certificate (duplicates and certificates expired for more than five
minutes dropped), the header lists name by name. So replicas with different CAs each add
theirs, and after a CA rotation the old CA stays listed beside the new one until it expires,
for the extension apiservers still seeing clients of the old one. It is written at start,
whenever --client-ca-file or --requestheader-client-ca-file changes on disk, and every minute
(which also brings back a deleted or edited ConfigMap).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
from collections.abc import Iterable, Sequence

import structlog
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from gateway.apimachinery import status
from gateway.apimachinery.dynamicfile import FileContent
from gateway.auth.authn.x509 import CABundle
from gateway.auth.rbac.bootstrap import AUTH_CONFIGMAP
from gateway.options import ServeOptions
from gateway.registry.store import RESTStore, WriteOptions
from gateway.storage.errors import StorageError
from gateway.storage.interface import Object

log = structlog.get_logger(__name__)
NAMESPACE = "kube-system"
#: How often the ConfigMap is checked whatever happened (kube: a minute).
RESYNC_INTERVAL = 60.0
#: Certificates expired longer ago than this are dropped from the bundles (kube's slack).
EXPIRY_SLACK = datetime.timedelta(minutes=5)

_HEADER_KEYS = ("requestheader-username-headers", "requestheader-uid-headers",
                "requestheader-group-headers", "requestheader-extra-headers-prefix",
                "requestheader-allowed-names")


def _headers(options: ServeOptions) -> dict[str, Sequence[str]]:
    return {
        "requestheader-username-headers": options.requestheader_username_headers,
        "requestheader-uid-headers": options.requestheader_uid_headers,
        "requestheader-group-headers": options.requestheader_group_headers,
        "requestheader-extra-headers-prefix": options.requestheader_extra_headers_prefix,
        "requestheader-allowed-names": options.requestheader_allowed_names,
    }


def _certificates(pem: str, where: str) -> list[x509.Certificate]:
    if not pem:
        return []
    try:
        return x509.load_pem_x509_certificates(pem.encode())
    except ValueError as err:
        log.warning("the authentication ConfigMap holds a bundle that does not parse; "
                    "replaced by this gateway's", key=where, error=str(err))
        return []


def _names(value: str, where: str) -> list[str]:
    if not value:
        return []
    try:
        names = json.loads(value)
    except ValueError:
        names = None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        log.warning("the authentication ConfigMap holds a list that does not parse; "
                    "replaced by this gateway's", key=where)
        return []
    return names


def _union_certificates(*bundles: Iterable[x509.Certificate]) -> str:
    """The certificates in order, each once, without those expired beyond the slack."""
    cutoff = datetime.datetime.now(datetime.UTC) - EXPIRY_SLACK
    seen: set[bytes] = set()
    pem = []
    for bundle in bundles:
        for cert in bundle:
            der = cert.public_bytes(Encoding.DER)
            if der in seen or cert.not_valid_after_utc <= cutoff:
                continue
            seen.add(der)
            pem.append(cert.public_bytes(Encoding.PEM).decode())
    return "".join(pem)


def _union_names(*lists: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(name for names in lists for name in names))


def _json(names: list[str]) -> str:
    return json.dumps(names, separators=(",", ":"))  # as Go's encoding/json writes it


def auth_configmap_data(options: ServeOptions, client_ca: CABundle | None,
                        requestheader_ca: CABundle | None,
                        existing: dict[str, str] | None = None) -> dict[str, str]:
    """The ConfigMap's data: ``existing`` (its current data) merged with this gateway's."""
    existing = existing or {}
    data: dict[str, str] = {}
    client = _union_certificates(
        _certificates(existing.get("client-ca-file", ""), "client-ca-file"),
        client_ca.certificates if client_ca is not None else ())
    if client:
        data["client-ca-file"] = client
    front = _union_certificates(
        _certificates(existing.get("requestheader-client-ca-file", ""),
                      "requestheader-client-ca-file"),
        requestheader_ca.certificates if requestheader_ca is not None else ())
    if front:
        data["requestheader-client-ca-file"] = front
        mine = _headers(options) if requestheader_ca is not None else {}
        for key in _HEADER_KEYS:
            data[key] = _json(_union_names(_names(existing.get(key, ""), key),
                                           mine.get(key, ())))
    return data


class AuthenticationInfoController:
    """Writes the ConfigMap (``sync``) and keeps it current (``run``)."""

    def __init__(self, configmaps: RESTStore, options: ServeOptions,
                 client_ca: FileContent[CABundle] | None,
                 requestheader_ca: FileContent[CABundle] | None) -> None:
        self.configmaps = configmaps
        self.options = options
        self.client_ca = client_ca
        self.requestheader_ca = requestheader_ca
        self._changed = asyncio.Event()
        for content in (client_ca, requestheader_ca):
            if content is not None:
                content.on_change(lambda _: self._changed.set())

    async def sync(self) -> None:
        """Create the ConfigMap, or bring its data up to date."""
        write = WriteOptions(manager="kube-apiserver")
        client_ca = self.client_ca.value if self.client_ca is not None else None
        front_ca = self.requestheader_ca.value if self.requestheader_ca is not None else None
        try:
            current = await self.configmaps.get(NAMESPACE, AUTH_CONFIGMAP)
        except status.StatusError as err:
            if err.code != 404:
                raise
            data = auth_configmap_data(self.options, client_ca, front_ca)
            obj = {"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": AUTH_CONFIGMAP, "namespace": NAMESPACE}, "data": data}
            await self.configmaps.create(NAMESPACE, obj, write)
            log.info("published the extension apiserver authentication ConfigMap")
            return
        data = auth_configmap_data(self.options, client_ca, front_ca, current.get("data"))
        if current.get("data") != data:

            def refreshed(cur: Object | None) -> Object:
                # a patch that may not create: a missing object is the store's 404
                assert cur is not None
                return {**cur, "data": auth_configmap_data(self.options, client_ca, front_ca,
                                                           cur.get("data"))}

            await self.configmaps.patch(NAMESPACE, AUTH_CONFIGMAP, refreshed, write)
            log.info("updated the extension apiserver authentication ConfigMap")

    async def run(self) -> None:
        """Sync on every change of a CA file and every RESYNC_INTERVAL, until cancelled."""
        delay = 0.2
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), RESYNC_INTERVAL)
            self._changed.clear()
            try:
                await self.sync()
                delay = 0.2
            except (StorageError, status.StatusError) as err:
                log.warning("updating the authentication ConfigMap failed; retrying",
                            error=str(err))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                self._changed.set()
