"""Objects of remote APIServices in a namespace being deleted: which resources there are and
the calls that delete them, as kube's namespace controller finds and deletes them through
kube-aggregator (the controller's side is gateway.controllers.namespaces).

Which resources: client-go's ServerPreferredNamespacedResources over the merged aggregated
discovery (the document ``/apis`` serves, kept by the discovery manager): groups in their
order; a ``Stale`` version is a failed group version (``stale GroupVersion discovery:
<group>/<version>``, client-go's words) whose resources are skipped; each group resource is
taken once, from the first fresh version that lists it (the preferred one when it does), and
kept when it is namespaced and has the ``delete`` verb. Of those, the ones whose version a
remote APIService serves are given here, with the failures of remote group versions; the
gateway's own resources are the controller's stores.

The calls go to the backend as the proxy sends a request (the Service resolved, the proxy
client certificate, the APIService's caBundle for ``<service>.<namespace>.svc``) with the
namespace controller's identity in ``X-Remote-User``/``X-Remote-Group``, as the aggregator
forwards kube-controller-manager's namespace controller:

- ``DELETE .../namespaces/<ns>/<plural>`` (deletecollection) and ``DELETE .../<plural>/<name>``
  with a ``DeleteOptions`` body asking for background propagation (client-go's metadata
  client sends these);
- ``GET .../namespaces/<ns>/<plural>`` asking for a ``PartialObjectMetadataList`` first, a
  plain list otherwise; only the items' metadata is read.

An answer outside 200-206 is the error client-go makes of it: a Failure Status's message,
else NewGenericServerResponse's words. What the proxy would answer itself is answered here in
its stead: an APIService that is not Available, a Service that does not resolve, or a backend
that cannot be reached is a 503 (``the server is currently unable to handle the request``), a
call that outlasts kube-apiserver's request timeout (60 s) a 504, a redirect a 502.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import aiohttp
import orjson
import structlog
from yarl import URL

from gateway.aggregator.proxy import describe_error, identity_headers
from gateway.aggregator.routes import Route
from gateway.apimachinery import status
from gateway.apimachinery.user import UserInfo
from gateway.controllers.namespacecontent import USER, Discovered
from gateway.server.discovery import STALE, VersionDocument
from gateway.storage.interface import Object
from gateway.transport import clients as transport
from gateway.transport.clients import ClientManager, TLSConfigError
from gateway.transport.resolver import ResolveError, ServiceResolver
from gateway.transport.webhook import http_error

log = structlog.get_logger(__name__)

#: A call is given up after this long (kube-apiserver's --request-timeout, which bounds a
#: proxied request).
REQUEST_TIMEOUT = 60.0
#: What client-go's metadata client asks a list for (JSON only: the items' metadata is read).
LIST_ACCEPT = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
#: The body of every delete (metav1.DeleteOptions as client-go's metadata client encodes it).
DELETE_OPTIONS = orjson.dumps({"kind": "DeleteOptions", "apiVersion": "v1",
                               "propagationPolicy": "Background"})
#: What the proxy answers (a 502) in place of a backend's redirect.
REDIRECT_REFUSED = b"the backend attempted to redirect this request, which is not permitted"
#: The reasons NewGenericServerResponse gives the codes the controller tells apart.
_GENERIC_REASONS = {404: "NotFound", 405: "MethodNotAllowed"}

#: The merged discovery: every group with its version documents, in kube's order.
Documents = Callable[[], list[tuple[str, list[VersionDocument]]]]
#: The route of a group version (None: no APIService for it).
Routes = Callable[[str, str], Route | None]


class RemoteNamespacedResources:
    """The namespaced resources of remote APIServices, for the namespace controller."""

    def __init__(self, documents: Documents, routes: Routes, clients: ClientManager,
                 resolver: ServiceResolver, *, user: UserInfo = USER,
                 timeout: float = REQUEST_TIMEOUT) -> None:
        self.documents = documents
        self.routes = routes
        self.clients = clients
        self.resolver = resolver
        self.user = user
        self.timeout = timeout

    def _remote(self, group: str, version: str) -> bool:
        route = self.routes(group, version)
        return route is not None and not route.local

    def discover(self) -> Discovered:
        """The remote resources to empty and the remote group versions that failed (see
        the module's doc)."""
        found = Discovered()
        for group, documents in self.documents():
            if not group:
                continue  # the core group is the gateway's own
            chosen: set[str] = set()
            for document in documents:
                remote = self._remote(group, document.version)
                if document.freshness == STALE:
                    if remote:
                        gv = f"{group}/{document.version}"
                        found.failed[gv] = f"stale GroupVersion discovery: {gv}"
                    continue
                for entry in document.resources:
                    plural = entry.get("resource") or ""
                    if not plural or "/" in plural or plural in chosen:
                        continue
                    chosen.add(plural)
                    verbs = tuple(entry.get("verbs") or ())
                    if remote and entry.get("scope") == "Namespaced" and "delete" in verbs:
                        found.resources.append(
                            RemoteResource(self, group, document.version, plural, verbs))
        return found

    # -- calls --------------------------------------------------------------------------------

    async def call(self, group: str, version: str, method: str, path: str, *,
                   accept: str = "application/json", body: bytes | None = None) -> bytes:
        """One request to the backend of ``group``/``version``: the body of a 2xx answer,
        or the StatusError client-go would make of the answer the aggregator gives."""
        route = self.routes(group, version)
        if route is None or route.local:
            raise client_error(404, "text/plain", b"404 page not found")
        if not route.available:
            raise client_error(503, "text/plain", b"service unavailable")
        try:
            context = self.clients.context(route.ca_bundle,
                                           insecure=route.insecure_skip_tls_verify,
                                           client_cert=True)
        except TLSConfigError as err:  # the proxy's plain-text 500 with client-go's words
            raise client_error(500, "text/plain", str(err).encode()) from None
        service = route.service
        assert service is not None
        try:
            address = await self.resolver.resolve(service.namespace, service.name, service.port)
        except ResolveError as err:
            log.debug("namespace controller: a backend's Service does not resolve",
                      apiservice=route.name, error=str(err))
            raise client_error(503, "text/plain", b"service unavailable") from None
        host = f"[{address.host}]" if ":" in address.host else address.host
        url = URL(f"https://{host}:{address.port}{path}", encoded=True)
        headers = [("Accept", accept), *identity_headers(self.user)]
        if body is not None:
            headers.append(("Content-Type", "application/json"))
        try:
            async with asyncio.timeout(self.timeout):
                async with self.clients.session().request(
                        method, url, data=body, headers=headers, ssl=context,
                        server_hostname=address.server_name,
                        timeout=transport.timeout(self.timeout),
                        allow_redirects=False) as response:
                    code = response.status
                    content_type = response.headers.get("Content-Type", "")
                    location = response.headers.get("Location")
                    data = await response.read()
        except TimeoutError:
            raise client_error(504, "text/plain", b"") from None
        except (aiohttp.ClientError, OSError, ValueError) as err:
            log.debug("namespace controller: a backend cannot be reached",
                      apiservice=route.name, error=describe_error(err, address))
            raise client_error(503, "text/plain", b"error trying to reach service") from None
        if 300 <= code < 400 and location:
            raise client_error(502, "text/plain", REDIRECT_REFUSED)
        if not 200 <= code <= 206:
            raise client_error(code, content_type, data)
        return data


class RemoteResource:
    """One resource of a remote APIService, as the namespace controller empties it."""

    def __init__(self, remote: RemoteNamespacedResources, group: str, version: str,
                 plural: str, verbs: tuple[str, ...]) -> None:
        self.remote = remote
        self.group = group
        self.version = version
        self.plural = plural
        self.verbs = verbs

    def _path(self, namespace: str, name: str = "") -> str:
        path = (f"/apis/{self.group}/{self.version}/namespaces/{quote(namespace, safe='')}/"
                f"{self.plural}")
        return f"{path}/{quote(name, safe='')}" if name else path

    async def delete_collection(self, namespace: str) -> None:
        await self.remote.call(self.group, self.version, "DELETE", self._path(namespace),
                               body=DELETE_OPTIONS)

    async def list(self, namespace: str) -> list[Object]:
        data = await self.remote.call(self.group, self.version, "GET", self._path(namespace),
                                      accept=LIST_ACCEPT)
        try:
            items = orjson.loads(data).get("items") or []
        except (orjson.JSONDecodeError, AttributeError) as err:
            raise status.internal_error(f"decoding the list of {self.plural}.{self.group}: "
                                        f"{err}") from None
        return [item for item in items if isinstance(item, dict)]

    async def delete(self, namespace: str, name: str) -> None:
        await self.remote.call(self.group, self.version, "DELETE", self._path(namespace, name),
                               body=DELETE_OPTIONS)


def client_error(code: int, content_type: str, data: bytes) -> status.StatusError:
    """The error client-go makes of an answer outside 200-206: the Status in the body, else
    NewGenericServerResponse's code, reason and words."""
    reason = _GENERIC_REASONS.get(code, "")
    try:
        body: Any = orjson.loads(data)
    except orjson.JSONDecodeError:
        body = None
    if isinstance(body, dict) and body.get("kind") == "Status" and \
            body.get("status") == "Failure":
        reason = v if isinstance(v := body.get("reason"), str) else ""
        code = c if isinstance(c := body.get("code"), int) and c else code
    return status.StatusError(code, reason, http_error(code, content_type, data))
