"""Field validation helpers with kube's messages (k8s.io/apimachinery's validation)."""

from __future__ import annotations

import re

from gateway.endpoints.status import Cause
from gateway.registry.labels import label_value_errors, qualified_name_errors

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_FMT = f"{_LABEL_FMT}(\\.{_LABEL_FMT})*"


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def invalid(path: str, value: str, detail: str) -> Cause:
    return Cause("FieldValueInvalid", f"Invalid value: {_quote(value)}: {detail}", path)


def required(path: str, detail: str = "") -> Cause:
    return Cause("FieldValueRequired", "Required value" + (f": {detail}" if detail else ""), path)


def dns1123_label_errors(value: str) -> list[str]:
    errors = []
    if len(value) > DNS1123_LABEL_MAX:
        errors.append(f"must be no more than {DNS1123_LABEL_MAX} characters")
    if not _LABEL.match(value):
        errors.append(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
            "or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  "
            f"or '123-abc', regex used for validation is '{_LABEL_FMT}')"
        )
    return errors


def dns1123_subdomain_errors(value: str) -> list[str]:
    errors = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        errors.append(f"must be no more than {DNS1123_SUBDOMAIN_MAX} characters")
    if not _SUBDOMAIN.match(value):
        errors.append(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
            "characters, '-' or '.', and must start and end with an alphanumeric character "
            f"(e.g. 'example.com', regex used for validation is '{_SUBDOMAIN_FMT}')"
        )
    return errors


def name_causes(name: str, *, label: bool, path: str = "metadata.name") -> list[Cause]:
    """Causes for a bad object name (DNS-1123 label or subdomain)."""
    errors = dns1123_label_errors(name) if label else dns1123_subdomain_errors(name)
    return [invalid(path, name, error) for error in errors]


def path_segment_causes(name: str, path: str = "metadata.name") -> list[Cause]:
    """Names that only need to be usable in a URL path (RBAC objects): not '.' or '..', no
    '/' or '%'."""
    if name in (".", ".."):
        return [invalid(path, name, f'may not be \'{name}\'')]
    for bad in ("/", "%"):
        if bad in name:
            return [invalid(path, name, f"may not contain '{bad}'")]
    return []


#: apimachinery's TotalAnnotationSizeLimitB: keys and values together.
ANNOTATIONS_MAX_BYTES = 256 * 1024


def object_meta_causes(meta: dict) -> list[Cause]:
    """Labels, annotations and finalizers as ValidateObjectMeta checks them on every object."""
    causes: list[Cause] = []
    for key, value in (meta.get("labels") or {}).items():
        causes += [invalid("metadata.labels", key, e) for e in qualified_name_errors(key)]
        causes += [invalid("metadata.labels", str(value), e)
                   for e in label_value_errors(str(value))]
    annotations = meta.get("annotations") or {}
    for key in annotations:
        causes += [invalid("metadata.annotations", key, e)
                   for e in qualified_name_errors(key.lower())]
    size = sum(len(k.encode()) + len(str(v).encode()) for k, v in annotations.items())
    if size > ANNOTATIONS_MAX_BYTES:
        causes.append(Cause("FieldValueTooLong", "Too long: may not be more than "
                            f"{ANNOTATIONS_MAX_BYTES} bytes", "metadata.annotations"))
    for finalizer in meta.get("finalizers") or []:
        causes += [invalid("metadata.finalizers", str(finalizer), e)
                   for e in qualified_name_errors(str(finalizer))]
    return causes
