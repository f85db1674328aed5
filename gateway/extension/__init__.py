"""Write a Kubernetes extension apiserver in Python: ``gateway.extension``.

Named for what it is for (an *extension* apiserver, registered behind the gateway or any
kube-apiserver by an APIService), it is this project's k8s.io/apiserver: declare a group, its
resources and versions as data (``APIGroup``, ``Resource``, ``Version``), add hooks where a
schema is not enough (``Strategy``, a ``convert`` function, admission hooks, subresources),
and ``serve`` it. The resources are served by the gateway's own generic apiserver pieces: the
REST handlers, the generic store and its watch cache over SQLite or etcd, server-side apply,
Table output and printer columns, legacy and aggregated discovery, OpenAPI v2 and v3, with
the gateway's CRD semantics (schema validation, pruning, defaulting, the status
subresource, conversion between versions). Requests are authenticated and authorized by
delegation to the core server, as k8s.io/apiserver's RecommendedOptions do it
(``gateway.extension.authn``, ``gateway.extension.authz``).

A minimal server::

    from gateway.extension import APIGroup, Resource, Version, serve

    group = APIGroup("example.com", [Resource("Widget", "widgets", [
        Version("v1", {"type": "object", "properties": {"spec": {"type": "object"}}},
                storage=True)])])

    if __name__ == "__main__":
        serve([group])

examples/wardle is a whole one (kube's sample-apiserver); docs/tutorial.md walks through it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Sequence

from gateway.apimachinery.status import Cause, StatusError
from gateway.extension.api import (
    APIGroup,
    Objects,
    Resource,
    Strategy,
    Subresource,
    Version,
)
from gateway.extension.authn import AuthenticationStartError
from gateway.extension.kubeclient import KubeConfigError
from gateway.extension.options import ExtensionOptions, add_flags, from_args
from gateway.extension.server import ExtensionServer
from gateway.registry.admission import Attributes
from gateway.registry.validation import invalid, not_supported, required  # kube's field errors
from gateway.storage.errors import StorageError

__all__ = ["APIGroup", "Attributes", "Cause", "ExtensionOptions", "ExtensionServer", "Objects",
           "Resource", "StatusError", "Strategy", "Subresource", "Version", "invalid",
           "not_supported", "parse_flags", "required", "serve"]


def parse_flags(argv: Sequence[str] | None = None, *, prog: str | None = None,
                etcd_prefix: str = "") -> ExtensionOptions:
    """kube's extension apiserver flags (gateway.extension.options) from ``argv``."""
    parser = argparse.ArgumentParser(prog=prog, description="an extension apiserver")
    add_flags(parser, etcd_prefix=etcd_prefix)
    return from_args(parser.parse_args(argv))


def serve(groups: Sequence[APIGroup], argv: Sequence[str] | None = None, *,
          prog: str | None = None, etcd_prefix: str = "") -> None:
    """Parse the flags and serve ``groups`` until SIGTERM; a configuration that cannot be
    used ends the process with one line saying why."""
    from gateway.logs import configure_logging

    options = parse_flags(argv, prog=prog, etcd_prefix=etcd_prefix)
    configure_logging("json")
    try:
        server = ExtensionServer(groups, options)
    except (KubeConfigError, OSError, ValueError) as err:
        sys.exit(f"error: {err}")
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(server.run())
    except (AuthenticationStartError, StorageError) as err:
        sys.exit(f"error: {err}")
    except OSError as err:  # the port
        sys.exit(f"error: --secure-port {options.secure_port}: {err.strerror or err}")
