"""Publishes the ``kube-root-ca.crt`` ConfigMap in every namespace (kube-controller-manager's
root-ca-cert-publisher): the CA bundle that verifies the gateway's serving certificate, under
``ca.crt``, for in-cluster clients to trust it.

A namespace is synced when it is added or updated (while Active), and when its ConfigMap is
updated or deleted: a missing one is created again, one whose data or description annotation
differ is reset. A create refused because the namespace is gone or terminating is fine.

The bundle is ``--root-ca-file``, or, with the development PKI serving, its CA. With a serving
certificate of the user's own and no ``--root-ca-file``, the CA is not known: nothing is
published (kube-controller-manager would fall back to the CA its kubeconfig trusts).
"""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path

import structlog

from gateway import pki
from gateway.apimachinery import status
from gateway.apimachinery.user import service_account_user
from gateway.controllers.serviceaccounts import namespace_terminating
from gateway.controllers.workqueue import WorkQueue, run_workers
from gateway.options import ServeOptions
from gateway.registry.follow import follow
from gateway.registry.store import RESTStore, WriteOptions
from gateway.storage.errors import KeyNotFoundError
from gateway.storage.interface import EventType, Object, WatchEvent

log = structlog.get_logger(__name__)
MANAGER = "kube-controller-manager"
USER = service_account_user("kube-system", "root-ca-cert-publisher")
CONFIGMAP = "kube-root-ca.crt"
DATA_KEY = "ca.crt"
DESCRIPTION_ANNOTATION = "kubernetes.io/description"
DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
    "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
    "guaranteed across distributions of Kubernetes clusters.")
WORKERS = 1


def root_ca_file(options: ServeOptions) -> Path | None:
    """``--root-ca-file``, else the development CA when the development PKI's serving
    certificate is the one in use, else None (the CA is not known)."""
    if options.root_ca_file is not None:
        return options.root_ca_file
    dev = pki.DevPKI.at(options.cert_dir)
    serving = options.tls_cert_file
    if serving is not None and serving.resolve() == dev.serving_cert.resolve():
        return dev.ca_cert
    return None


def load_root_ca(options: ServeOptions) -> bytes | None:
    """The bundle to publish, as the file holds it; PKIError naming the flag when it is not a
    PEM certificate bundle (kube-controller-manager refuses to start then too)."""
    path = root_ca_file(options)
    if path is None:
        return None
    try:
        pki.load_pem_certificates(path)
    except pki.PKIError as err:
        raise pki.PKIError(f"--root-ca-file: {err}") from None
    return path.read_bytes()


class RootCACertPublisher:
    def __init__(self, namespaces: RESTStore, configmaps: RESTStore, root_ca: bytes) -> None:
        self.namespaces = namespaces
        self.configmaps = configmaps
        self.data = {DATA_KEY: root_ca.decode()}
        self.queue = WorkQueue()

    async def run(self) -> None:
        """Follow namespaces and ConfigMaps; sync the namespaces they name, forever."""
        who = "root CA certificate publisher"
        await asyncio.gather(
            follow(self.namespaces, self._namespace_event, initial=True, who=who),
            follow(self.configmaps, self._configmap_event, who=who),
            run_workers(self.queue, self.sync, workers=WORKERS, who=who))

    async def _namespace_event(self, event: WatchEvent) -> None:
        namespace = event.object
        if namespace is None:
            return
        active = (namespace.get("status") or {}).get("phase") == "Active"
        if event.type == EventType.ADDED or (event.type == EventType.MODIFIED and active):
            self.queue.add(namespace["metadata"]["name"])

    async def _configmap_event(self, event: WatchEvent) -> None:
        meta = (event.object or {}).get("metadata") or {}
        if event.type in (EventType.MODIFIED, EventType.DELETED) and \
                meta.get("name") == CONFIGMAP:
            self.queue.add(meta.get("namespace", ""))

    async def sync(self, namespace: str) -> None:
        """Create the ConfigMap, or put its data and description back."""
        try:
            current = await self.configmaps.cacher.get_cached(
                self.configmaps.resource.key(namespace, CONFIGMAP))
        except KeyNotFoundError:
            await self._create(namespace)
            return
        annotations = (current.get("metadata") or {}).get("annotations") or {}
        if current.get("data") == self.data and annotations.get(DESCRIPTION_ANNOTATION):
            return
        try:
            await self.configmaps.patch(namespace, CONFIGMAP, self._reset,
                                        WriteOptions(manager=MANAGER, user=USER))
            log.info("reset the root CA ConfigMap", namespace=namespace)
        except status.StatusError as err:
            if err.code != 404:  # deleted meanwhile: its event brings it back
                raise

    def _reset(self, current: Object | None) -> Object:
        if current is None:
            raise status.not_found("configmaps", CONFIGMAP)
        new = copy.deepcopy(current)
        new["data"] = dict(self.data)
        meta = new.setdefault("metadata", {})
        meta["annotations"] = {**(meta.get("annotations") or {}),
                               DESCRIPTION_ANNOTATION: DESCRIPTION}
        return new

    async def _create(self, namespace: str) -> None:
        obj = {"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": CONFIGMAP, "namespace": namespace,
                            "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION}},
               "data": dict(self.data)}
        try:
            await self.configmaps.create(namespace, obj, WriteOptions(manager=MANAGER,
                                                                      user=USER))
            log.debug("published the root CA ConfigMap", namespace=namespace)
        except status.StatusError as err:
            # the namespace is gone or terminating: nothing to publish (409, one the cache
            # has not seen yet, is tried again: it is then checked like any other)
            if err.code != 404 and not namespace_terminating(err):
                raise
