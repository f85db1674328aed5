"""A CRD's conversion webhook settings and its API approval annotation, checked as
apiextensions-apiserver v1.32 checks them (k8s.io/apiserver pkg/util/webhook/validation.go for
the URL, Service and CA bundle; client-go's transport for what a bad CA bundle is called;
pkg/apihelpers for the approval of protected groups).
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any
from urllib.parse import urlsplit

from cryptography import x509

from gateway.apimachinery.gowords import go_quote
from gateway.apimachinery.status import Cause
from gateway.registry.validation import (
    dns1035_label_errors,
    invalid,
    required,
)
from gateway.registry.webhookclient import service_causes, url_causes

#: ConversionReview versions this apiserver (and the one before it) understands.
REVIEW_VERSIONS = ["v1", "v1beta1"]
APPROVAL = "api-approved.kubernetes.io"
_ENHANCEMENT = "see https://github.com/kubernetes/enhancements/pull/1111"


# -- conversionReviewVersions -------------------------------------------------------------------


def recognized_or_empty(versions: Any) -> bool:
    """hasValidConversionReviewVersionOrEmpty."""
    return not versions or any(v in REVIEW_VERSIONS for v in versions)


def review_versions_causes(versions: Any, require_recognized: bool, path: str) -> list[Cause]:
    """At least one version, no duplicates, DNS-1035 labels, one this server understands."""
    if not versions:
        return [required(path)]
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, version in enumerate(versions):
        version = version if isinstance(version, str) else ""
        if version in seen:
            causes.append(invalid(f"{path}[{i}]", version, "duplicate version"))
            continue
        seen.add(version)
        causes += [invalid(f"{path}[{i}]", version, e) for e in dns1035_label_errors(version)]
    if require_recognized and not recognized_or_empty(versions):
        causes.append(invalid(path, list(versions),
                              f"must include at least one of {', '.join(REVIEW_VERSIONS)}"))
    return causes


# -- clientConfig -------------------------------------------------------------------------------


def client_config_causes(config: dict, path: str, allow_invalid_ca_bundle: bool) -> list[Cause]:
    """Exactly one of url and service; a CA bundle that loads (when it must)."""
    url, service = config.get("url"), config.get("service")
    if (url is None) == (service is None):
        causes = [required(path, "exactly one of url or service is required")]
    elif url is not None:
        causes = url_causes(f"{path}.url", url)
    else:
        causes = service_causes(f"{path}.service", service if isinstance(service, dict) else {})
    bundle = _decoded(config.get("caBundle"))
    if bundle and not allow_invalid_ca_bundle and (error := ca_bundle_error(bundle)):
        causes.append(Cause("FieldValueInvalid", f"Invalid value: {go_bytes(bundle)}: {error}",
                            f"{path}.caBundle"))
    return causes


# -- caBundle -----------------------------------------------------------------------------------


def _decoded(value: Any) -> bytes:
    if not isinstance(value, str) or not value:
        return b""
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return b""  # the field checker reports bad base64 before validation


def go_bytes(data: bytes) -> str:
    """%#v of a []byte."""
    return "[]byte{" + ", ".join(f"0x{b:x}" for b in data) + "}"


_PEM = re.compile(rb"-----BEGIN ([^\r\n]*?)-----[ \t\r]*\n(.*?)\n-----END \1-----[ \t\r]*(?:\n|$)",
                  re.S)


def _pem_decode(data: bytes) -> tuple[tuple[bytes, bool, bytes] | None, bytes]:
    """pem.Decode: the next well-formed block (type, has headers, body) and what follows it;
    blocks that do not decode are skipped."""
    for match in _PEM.finditer(data):
        start = match.start()
        if start and data[start - 1:start] != b"\n":
            continue
        lines = match.group(2).split(b"\n")
        headers = bool(lines) and b":" in lines[0]
        body = b"".join(line for line in lines if b":" not in line).replace(b"\r", b"")
        try:
            der = base64.b64decode(body.replace(b" ", b"").replace(b"\t", b""), validate=True)
        except (binascii.Error, ValueError):
            continue
        return (match.group(1), headers, der), data[match.end():]
    return None, b""


def _parses(der: bytes) -> bool:
    try:
        x509.load_der_x509_certificate(der)
    except ValueError:
        return False
    return True


def ca_bundle_error(data: bytes) -> str | None:
    """What client-go says of CA data it cannot load: none of its PEM blocks is a
    certificate that parses."""
    rest, loaded = data, False
    while rest and not loaded:
        block, rest = _pem_decode(rest)
        if block is None:
            break
        kind, headers, der = block
        loaded = kind == b"CERTIFICATE" and not headers and _parses(der)
    if loaded:
        return None
    return f"unable to load root certificates: {_why(data)}"


def _why(data: bytes) -> str:
    """createErrorParsingCAData's words."""
    rest = data
    while rest:
        block, rest = _pem_decode(rest)
        if block is None:
            return "unable to parse bytes as PEM block"
        kind, headers, der = block
        if kind == b"CERTIFICATE" and not headers and not _parses(der):
            return "failed to parse certificate: x509: malformed certificate"
    return "no valid certificate authority data seen"


def allow_invalid_ca_bundle(established: bool, old_config: Any) -> bool:
    """An invalid CA bundle may stay while the CRD is not established, or when the old one
    was invalid already."""
    if not established:
        return True
    old = _decoded(old_config.get("caBundle")) if isinstance(old_config, dict) else b""
    return bool(old) and ca_bundle_error(old) is not None


# -- API approval -------------------------------------------------------------------------------


def protected_group(group: str) -> bool:
    """Groups of the Kubernetes project itself: *.k8s.io and *.kubernetes.io."""
    return any(group == base or group.endswith("." + base)
               for base in ("k8s.io", "kubernetes.io"))


def approval_state(annotations: Any) -> tuple[str, str]:
    """GetAPIApprovalState: missing, bypassed, approved or invalid, and why."""
    value = (annotations or {}).get(APPROVAL, "") if isinstance(annotations, dict) else ""
    if not value:
        return "missing", (f"protected groups must have approval annotation "
                           f"{go_quote(APPROVAL)}, {_ENHANCEMENT}")
    if value.startswith("unapproved"):
        return "bypassed", f"not approved: {go_quote(value)}"
    parts = urlsplit(value)
    if parts.scheme and parts.netloc and not re.search(r"[\s\x00-\x1f\x7f]", value):
        return "approved", f"approved in {value}"
    return "invalid", (f"protected groups must have approval annotation {go_quote(APPROVAL)} "
                       f'with either a URL or a reason starting with "unapproved", '
                       f"{_ENHANCEMENT}")


def approval_causes(new: dict, old: dict | None) -> list[Cause]:
    """validateAPIApproval: CRDs of protected groups say where their API was approved."""
    group = (new.get("spec") or {}).get("group") or ""
    if not isinstance(group, str) or not protected_group(group):
        return []
    annotations = (new.get("metadata") or {}).get("annotations")
    state, reason = approval_state(annotations)
    if old is not None and approval_state((old.get("metadata") or {}).get("annotations"))[0] \
            == state:
        return []
    path = f"metadata.annotations[{APPROVAL}]"
    if state == "missing":
        return [required(path, reason)]
    if state == "invalid":
        assert isinstance(annotations, dict)  # an invalid approval is a value found in them
        return [invalid(path, annotations.get(APPROVAL), reason)]
    return []
