"""Field validation helpers with kube's messages (k8s.io/apimachinery's validation)."""

from __future__ import annotations

import ipaddress
import re
from datetime import UTC, datetime
from typing import Any

from gateway.apimachinery.gowords import go_quote
from gateway.apimachinery.labels import label_value_errors, qualified_name_errors
from gateway.apimachinery.status import Cause

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_FMT = f"{_LABEL_FMT}(\\.{_LABEL_FMT})*"


def go_value(value: Any) -> str:
    """A bad value as field.Error shows it, by its Go type: strings quoted (%q), integers,
    floats and booleans bare (%v), a missing value as null, a list of strings as Go's %#v
    writes a []string."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float(value)
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return "[]string{" + ", ".join(go_quote(v) for v in value) + "}"
    return str(value)


def _go_float(value: float) -> str:
    """%v of a float64: the shortest digits, in exponent form below 1e-4 and from 1e21."""
    if value != value or value in (float("inf"), float("-inf")):
        return {"nan": "NaN", "inf": "+Inf", "-inf": "-Inf"}[repr(value)]
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    if "e" in text:
        mantissa, exponent = text.split("e")
        sign = "-" if exponent.startswith("-") else "+"
        return f"{mantissa}e{sign}{exponent.lstrip('+-').rjust(2, '0')}"
    return text


def invalid(path: str, value: Any, detail: str) -> Cause:
    """field.Invalid: the value shown as Go shows a value of its type (see go_value)."""
    return Cause("FieldValueInvalid", f"Invalid value: {go_value(value)}: {detail}", path)


def required(path: str, detail: str = "") -> Cause:
    return Cause("FieldValueRequired", "Required value" + (f": {detail}" if detail else ""), path)


def forbidden(path: str, detail: str) -> Cause:
    return Cause("FieldValueForbidden", f"Forbidden: {detail}", path)


def duplicate(path: str, value: Any) -> Cause:
    return Cause("FieldValueDuplicate", f"Duplicate value: {go_value(value)}", path)


def not_supported(path: str, value: Any, supported: list[str] | tuple[str, ...]) -> Cause:
    """field.NotSupported, the supported values quoted in the order given."""
    listed = ", ".join(go_quote(v) for v in supported)
    return Cause("FieldValueNotSupported",
                 f"Unsupported value: {go_value(value)}: supported values: {listed}", path)


def too_long(path: str, limit: int) -> Cause:
    """field.TooLong with a limit in bytes (the value itself is never shown)."""
    return Cause("FieldValueTooLong", f"Too long: may not be more than {limit} bytes", path)


#: field.NewPath("").String(): kube's path for an error about the whole object.
WHOLE_OBJECT = "[]"


def dns1123_label_errors(value: str) -> list[str]:
    """validation.IsDNS1123Label; its limit counts bytes, as Go's len does."""
    errors = []
    if len(value.encode("utf-8", "surrogatepass")) > DNS1123_LABEL_MAX:
        errors.append(f"must be no more than {DNS1123_LABEL_MAX} characters")
    if not _LABEL.fullmatch(value):
        errors.append(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
            "or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  "
            f"or '123-abc', regex used for validation is '{_LABEL_FMT}')"
        )
    return errors


_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


def dns1035_label_errors(value: str) -> list[str]:
    errors = []
    if len(value.encode("utf-8", "surrogatepass")) > DNS1123_LABEL_MAX:
        errors.append(f"must be no more than {DNS1123_LABEL_MAX} characters")
    if not _DNS1035_LABEL.fullmatch(value):
        errors.append(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
            "with an alphabetic character, and end with an alphanumeric character (e.g. "
            "'my-name',  or 'abc-123', regex used for validation is "
            "'[a-z]([-a-z0-9]*[a-z0-9])?')"
        )
    return errors


def dns1123_subdomain_errors(value: str) -> list[str]:
    """validation.IsDNS1123Subdomain; its limit counts bytes, as Go's len does."""
    errors = []
    if len(value.encode("utf-8", "surrogatepass")) > DNS1123_SUBDOMAIN_MAX:
        errors.append(f"must be no more than {DNS1123_SUBDOMAIN_MAX} characters")
    if not _SUBDOMAIN.fullmatch(value):
        errors.append(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
            "characters, '-' or '.', and must start and end with an alphanumeric character "
            f"(e.g. 'example.com', regex used for validation is '{_SUBDOMAIN_FMT}')"
        )
    return errors


_PORT_NAME_CHARSET = re.compile(r"[-a-z0-9]+")
_HAS_LETTER = re.compile(r"[a-z]")


def port_name_errors(name: str) -> list[str]:
    """validation.IsValidPortName (IANA service names)."""
    errors = []
    if len(name.encode()) > 15:
        errors.append("must be no more than 15 characters")
    if not _PORT_NAME_CHARSET.fullmatch(name):
        errors.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not _HAS_LETTER.search(name):
        errors.append("must contain at least one letter (a-z)")
    if "--" in name:
        errors.append("must not contain consecutive hyphens")
    if name.startswith("-") or name.endswith("-"):
        errors.append("must not begin or end with a hyphen")
    return errors


PORT_RANGE_ERROR = "must be between 1 and 65535, inclusive"


def port_number_causes(path: str, port: int) -> list[Cause]:
    """validation.IsValidPortNum."""
    return [] if 1 <= port <= 65535 else [invalid(path, port, PORT_RANGE_ERROR)]


def port_num_or_name_causes(path: str, port: int | str) -> list[Cause]:
    """ValidatePortNumOrName: a number in range, or a valid port name."""
    if isinstance(port, str):
        return [invalid(path, port, error) for error in port_name_errors(port)]
    return port_number_causes(path, port)


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
        causes.append(too_long("metadata.annotations", ANNOTATIONS_MAX_BYTES))
    for finalizer in meta.get("finalizers") or []:
        causes += [invalid("metadata.finalizers", str(finalizer), e)
                   for e in qualified_name_errors(str(finalizer))]
    return causes


class _Printed:
    """A value field.Error prints through its String method (no quotes), e.g. a metav1.Time."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text


def go_time_string(rfc3339: Any) -> Any:
    """A metav1.Time as Go's time.Time.String prints it once decoded (kube-apiserver runs in
    UTC): ``2026-01-02 03:04:05 +0000 UTC``, fractional seconds without trailing zeros."""
    if not isinstance(rfc3339, str):
        return rfc3339
    try:
        moment = datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return rfc3339
    fraction = f".{moment.microsecond:06d}".rstrip("0") if moment.microsecond else ""
    return _Printed(moment.strftime("%Y-%m-%d %H:%M:%S") + fraction + " +0000 UTC")


#: ObjectMeta fields no update may change (ValidateObjectMetaAccessorUpdate), with how
#: field.Error shows each one's value.
_IMMUTABLE_META = (("name", None), ("namespace", None), ("uid", None),
                   ("creationTimestamp", go_time_string), ("deletionTimestamp", go_time_string),
                   ("deletionGracePeriodSeconds", None))


def object_meta_update_causes(meta: dict, old: dict) -> list[Cause]:
    """What an update may not change in ObjectMeta (422 "field is immutable"), and no new
    finalizer on an object being deleted."""
    causes: list[Cause] = []
    if old.get("deletionTimestamp"):
        extra = sorted(set(meta.get("finalizers") or []) - set(old.get("finalizers") or []))
        if extra:
            causes.append(forbidden("metadata.finalizers", f"no new finalizers can be added if "
                                    f"the object is being deleted, found new finalizers "
                                    f"{go_value(extra)}"))
    for key, shown in _IMMUTABLE_META:
        value = meta.get(key) or None
        if value != (old.get(key) or None):
            causes.append(invalid(f"metadata.{key}", shown(value) if shown else value,
                                  "field is immutable"))
    return causes


# -- IP addresses, as k8s.io/utils/net's ParseIPSloppy reads them -------------------------------

_DECIMAL = re.compile(r"[0-9]+")


def _sloppy_ipv4(text: str) -> bytes | None:
    """Four dot-separated decimal fields of at most 255 each; leading zeros are allowed (as
    Go before 1.17 allowed them, which kube keeps for fields stored long ago)."""
    parts = text.split(".")
    if len(parts) != 4 or not all(_DECIMAL.fullmatch(p) and int(p) <= 255 for p in parts):
        return None
    return bytes(int(p) for p in parts)


def parse_ip(text: str) -> bytes | None:
    """The address's 4 (IPv4, also when written as IPv4-mapped IPv6) or 16 bytes; None when
    Go's sloppy parser refuses it (no zones, no brackets, no surrounding space)."""
    if ":" not in text:
        return _sloppy_ipv4(text)
    if "%" in text or not text.isascii():
        return None
    head, _, tail = text.rpartition(":")
    if "." in tail:
        v4 = _sloppy_ipv4(tail)
        if v4 is None:
            return None
        text = f"{head}:{'.'.join(str(b) for b in v4)}"
    try:
        packed = ipaddress.IPv6Address(text).packed
    except ValueError:
        return None
    if packed[:12] == b"\0" * 10 + b"\xff\xff":
        return packed[12:]
    return packed


IP_FORMAT_ERROR = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"


def ip_causes(path: str, value: str) -> list[Cause]:
    """validation.IsValidIP: one cause when ``value`` is not an IP address."""
    return [] if parse_ip(value) is not None else [invalid(path, value, IP_FORMAT_ERROR)]


def non_special_ip_causes(path: str, value: str) -> list[Cause]:
    """ValidateNonSpecialIP (endpoints, external IPs): not unspecified, loopback or
    link-local. An unparsable value gets its own, shorter, cause."""
    ip = parse_ip(value)
    if ip is None:
        return [invalid(path, value, "must be a valid IP address")]
    causes = []
    if not any(ip):
        causes.append(invalid(path, value, f"may not be unspecified ({value})"))
    if ip[0] == 127 if len(ip) == 4 else ip == bytes(15) + b"\x01":
        causes.append(invalid(path, value, "may not be in the loopback range (127.0.0.0/8, "
                              "::1/128)"))
    if ip[:2] == b"\xa9\xfe" if len(ip) == 4 else (ip[0] == 0xFE and ip[1] & 0xC0 == 0x80):
        causes.append(invalid(path, value, "may not be in the link-local range "
                              "(169.254.0.0/16, fe80::/10)"))
    if ip[:3] == b"\xe0\0\0" if len(ip) == 4 else (ip[0] == 0xFF and ip[1] & 0x0F == 0x02):
        causes.append(invalid(path, value, "may not be in the link-local multicast range "
                              "(224.0.0.0/24, ff02::/10)"))
    return causes
