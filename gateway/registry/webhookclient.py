"""Where a webhook is: the checks of a webhook client config's ``url`` and ``service`` that
admission webhooks and CRD conversion webhooks share (kube's k8s.io/apiserver
pkg/util/webhook validation)."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from gateway.apimachinery.gowords import go_quote
from gateway.apimachinery.status import Cause
from gateway.registry.validation import (
    PORT_RANGE_ERROR,
    dns1123_subdomain_errors,
    invalid,
    required,
)

URL_FORM = "; desired format: https://host[/path]"


def _url_parse_error(url: str) -> str | None:
    """url.Parse's error for the mistakes it catches (control characters, a missing scheme,
    bad escapes, a bad port)."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        reason = "net/url: invalid control character in URL"
    elif url.startswith(":"):
        reason = "missing protocol scheme"
    elif match := re.search(r"%(?![0-9A-Fa-f]{2})(.{0,2})", url):
        reason = f"invalid URL escape {go_quote(match.group()[:3])}"
    else:
        try:
            netloc = urlsplit(url).netloc.rpartition("@")[2]
        except ValueError:
            return f"parse {go_quote(url)}: missing ']' in host"
        if bad := re.search(r"[\s\\^`{|}]", netloc):
            return f"parse {go_quote(url)}: invalid character {go_quote(bad.group())} in host name"
        port = re.search(r":([^:\]]*)$", netloc)
        if port is None or port.group(1).isdigit() or not port.group(1):
            return None
        reason = f"invalid port {go_quote(port.group())} after host"
    return f"parse {go_quote(url)}: {reason}"


def url_causes(path: str, url: Any) -> list[Cause]:
    """ValidateWebhookURL with https required."""
    url = url if isinstance(url, str) else ""
    if error := _url_parse_error(url):
        return [required(path, f"url must be a valid URL: {error}{URL_FORM}")]
    parts = urlsplit(url)
    causes: list[Cause] = []
    if parts.scheme != "https":
        causes.append(invalid(path, parts.scheme, "'https' is the only allowed URL scheme"
                              + URL_FORM))
    user, at, host = parts.netloc.rpartition("@")
    if not host:
        causes.append(invalid(path, host, "host must be specified" + URL_FORM))
    if at:
        causes.append(invalid(path, user, "user information is not permitted in the URL"))
    if parts.fragment:
        causes.append(invalid(path, parts.fragment, "fragments are not permitted in the URL"))
    if parts.query:
        causes.append(invalid(path, parts.query, "query parameters are not permitted in the "
                              "URL"))
    return causes


def service_causes(path: str, service: dict) -> list[Cause]:
    """ValidateWebhookService: name, namespace, port, and a path of DNS-1123 segments."""
    causes: list[Cause] = []
    if not service.get("name"):
        causes.append(required(f"{path}.name", "service name is required"))
    if not service.get("namespace"):
        causes.append(required(f"{path}.namespace", "service namespace is required"))
    port = service.get("port")
    port = 443 if port is None else port
    if not isinstance(port, int) or not 1 <= port <= 65535:
        causes.append(invalid(f"{path}.port", port, f"port is not valid: {PORT_RANGE_ERROR}"))
    url_path = service.get("path")
    if not isinstance(url_path, str) or url_path in ("", "/"):
        return causes
    if url_path == "//":
        return [*causes, invalid(f"{path}.path", url_path, "segment[0] may not be empty")]
    if not url_path.startswith("/"):
        causes.append(invalid(f"{path}.path", url_path, "must start with a '/'"))
    steps = url_path[1:]
    steps = steps[:-1] if steps.endswith("/") else steps
    for i, step in enumerate(steps.split("/")):
        if not step:
            causes.append(invalid(f"{path}.path", url_path, f"segment[{i}] may not be empty"))
            continue
        causes += [invalid(f"{path}.path", url_path, f"segment[{i}]: {e}")
                   for e in dns1123_subdomain_errors(step)]
    return causes
