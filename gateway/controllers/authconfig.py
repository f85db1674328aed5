"""Publishes kube-system/extension-apiserver-authentication, as kube-apiserver does: the CAs
and request-header settings an extension apiserver reads to trust requests the gateway
forwards, and to verify client certificates itself."""

from __future__ import annotations

import json

import structlog

from gateway.apimachinery import status
from gateway.auth.rbac.bootstrap import AUTH_CONFIGMAP
from gateway.options import ServeOptions
from gateway.registry.store import RESTStore, WriteOptions

log = structlog.get_logger(__name__)
NAMESPACE = "kube-system"


def auth_configmap_data(options: ServeOptions) -> dict[str, str]:
    data: dict[str, str] = {}
    if options.client_ca_file is not None:
        data["client-ca-file"] = options.client_ca_file.read_text()
    if options.requestheader_client_ca_file is not None:
        data["requestheader-client-ca-file"] = options.requestheader_client_ca_file.read_text()
        for key, values in (
            ("requestheader-username-headers", options.requestheader_username_headers),
            ("requestheader-group-headers", options.requestheader_group_headers),
            ("requestheader-extra-headers-prefix", options.requestheader_extra_headers_prefix),
            ("requestheader-allowed-names", options.requestheader_allowed_names),
            ("requestheader-uid-headers", options.requestheader_uid_headers),
        ):
            data[key] = json.dumps(list(values))
    return data


async def publish_auth_configmap(configmaps: RESTStore, options: ServeOptions) -> None:
    """Create the ConfigMap, or bring its data up to date."""
    data = auth_configmap_data(options)
    write = WriteOptions(manager="kube-apiserver")
    try:
        current = await configmaps.get(NAMESPACE, AUTH_CONFIGMAP)
    except status.StatusError as err:
        if err.code != 404:
            raise
        obj = {"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": AUTH_CONFIGMAP, "namespace": NAMESPACE}, "data": data}
        await configmaps.create(NAMESPACE, obj, write)
        log.info("published the extension apiserver authentication ConfigMap")
        return
    if current.get("data") != data:
        await configmaps.patch(NAMESPACE, AUTH_CONFIGMAP, lambda cur: {**cur, "data": data},
                               write)
        log.info("updated the extension apiserver authentication ConfigMap")
