"""core/v1 configmaps: keys must be config keys, the whole under 1 MiB, immutable honoured."""

from __future__ import annotations

import base64
import binascii
import re

from gateway.apimachinery.status import Cause
from gateway.registry.resource import ResourceDef
from gateway.registry.strategy import Object, Strategy
from gateway.registry.tables import AGE, NAME, Column
from gateway.registry.validation import (
    DNS1123_SUBDOMAIN_MAX,
    WHOLE_OBJECT,
    forbidden,
    invalid,
    too_long,
)

#: core.MaxSecretSize, the limit on a ConfigMap's or a Secret's data (in bytes, as stored).
MAX_DATA_BYTES = 1024 * 1024
_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")


def config_key_errors(key: str) -> list[str]:
    """validation.IsConfigMapKey: length, alphabet, and no leading '..'."""
    errors = []
    if len(key.encode()) > DNS1123_SUBDOMAIN_MAX:
        errors.append(f"must be no more than {DNS1123_SUBDOMAIN_MAX} characters")
    if not _CONFIG_KEY.fullmatch(key):
        errors.append("a valid config key must consist of alphanumeric characters, '-', '_' or "
                      "'.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for "
                      "validation is '[-._a-zA-Z0-9]+')")
    if key in (".", ".."):
        errors.append(f"must not be '{key}'")
    elif key.startswith(".."):
        errors.append("must not start with '..'")
    return errors


def config_key_causes(path: str, keys: list[str]) -> list[Cause]:
    """A cause per error of each key, at ``path[key]``."""
    return [invalid(f"{path}[{key}]", key, error) for key in keys
            for error in config_key_errors(key)]


def text_bytes(values: dict) -> int:
    """The stored size of string values (UTF-8)."""
    return sum(len(str(v).encode()) for v in values.values())


def binary_bytes(values: dict) -> int:
    """The stored size of base64 values: their decoded bytes."""
    total = 0
    for value in values.values():
        try:
            total += len(base64.b64decode(str(value)))
        except (binascii.Error, ValueError):
            total += len(str(value)) * 3 // 4
    return total


def size_causes(path: str, size: int) -> list[Cause]:
    """kube sums the values' bytes; over the limit is one TooLong cause at ``path``."""
    return [too_long(path, MAX_DATA_BYTES)] if size > MAX_DATA_BYTES else []


IMMUTABLE = "field is immutable when `immutable` is set"


def immutable_causes(new: Object, old: Object, fields: tuple[str, ...]) -> list[Cause]:
    """An object marked immutable keeps its data, and stays immutable."""
    if not old.get("immutable"):
        return []
    causes = []
    if not new.get("immutable"):
        causes.append(forbidden("immutable", IMMUTABLE))
    for field in fields:
        if (new.get(field) or {}) != (old.get(field) or {}):
            causes.append(forbidden(field, IMMUTABLE))
    return causes


class ConfigMapStrategy(Strategy):
    def validate(self, obj: Object) -> list[Cause]:
        """ValidateConfigMap: each data key (and its clash with a binaryData key), each
        binaryData key, then the total size, reported against the whole object."""
        data, binary = obj.get("data") or {}, obj.get("binaryData") or {}
        causes: list[Cause] = []
        for key in data:
            causes += config_key_causes("data", [key])
            if key in binary:
                causes.append(invalid(f"data[{key}]", key, "duplicate of key present in "
                                      "binaryData"))
        causes += config_key_causes("binaryData", list(binary))
        return causes + size_causes(WHOLE_OBJECT, text_bytes(data) + binary_bytes(binary))

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        """ValidateConfigMapUpdate: the immutability rules first, then the create rules."""
        return immutable_causes(new, old, ("data", "binaryData")) + self.validate(new)


def _data_count(obj: Object) -> int:
    return len(obj.get("data") or {}) + len(obj.get("binaryData") or {})


CONFIGMAPS = ResourceDef(
    group="", version="v1", kind="ConfigMap", plural="configmaps", singular="configmap",
    namespaced=True, strategy=ConfigMapStrategy(), short_names=("cm",),
    columns=(NAME, Column("Data", "integer", "Number of data entries.", _data_count), AGE),
    schema="io.k8s.api.core.v1.ConfigMap",
)
