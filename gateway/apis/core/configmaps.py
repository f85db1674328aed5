"""core/v1 configmaps: data keys must be config keys, and the whole under 1 MiB."""

from __future__ import annotations

import re

from gateway.endpoints.status import Cause
from gateway.registry.resource import ResourceDef
from gateway.registry.strategy import Object, Strategy
from gateway.registry.validation import invalid
from gateway.storage.codec import dumps

MAX_CONFIGMAP_BYTES = 1024 * 1024
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


def config_key_causes(path: str, keys: list[str]) -> list[Cause]:
    causes = []
    for key in keys:
        if not key or len(key) > 253 or not _CONFIG_KEY.match(key) or key in (".", ".."):
            causes.append(invalid(
                f"{path}[{key}]" if key else path, key,
                "a valid config key must consist of alphanumeric characters, '-', '_' or '.' "
                "(e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation "
                "is '[-._a-zA-Z0-9]+')",
            ))
    return causes


class ConfigMapStrategy(Strategy):
    def validate(self, obj: Object) -> list[Cause]:
        data = obj.get("data") or {}
        binary = obj.get("binaryData") or {}
        causes = []
        if not isinstance(data, dict):
            return [invalid("data", str(data), "must be a map of string keys to string values")]
        causes += config_key_causes("data", list(data))
        causes += config_key_causes("binaryData", list(binary))
        causes += [invalid(f"data[{k}]", "", "must be a string")
                   for k, v in data.items() if not isinstance(v, str)]
        for key in set(data) & set(binary):
            causes.append(invalid(f"data[{key}]", key, "duplicate of key present in binaryData"))
        if len(dumps(data)) + len(dumps(binary)) > MAX_CONFIGMAP_BYTES:
            causes.append(Cause("FieldValueTooLong",
                                f"Too long: must have at most {MAX_CONFIGMAP_BYTES} bytes", ""))
        return causes


CONFIGMAPS = ResourceDef(
    group="", version="v1", kind="ConfigMap", plural="configmaps", singular="configmap",
    namespaced=True, strategy=ConfigMapStrategy(), short_names=("cm",),
)
