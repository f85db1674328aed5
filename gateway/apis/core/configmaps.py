"""core/v1 configmaps: keys must be config keys, the whole under 1 MiB, immutable honoured."""

from __future__ import annotations

import re

from gateway.endpoints.status import Cause
from gateway.registry.resource import ResourceDef
from gateway.registry.strategy import Object, Strategy
from gateway.registry.tables import AGE, NAME, Column
from gateway.registry.validation import invalid
from gateway.storage.codec import dumps

MAX_DATA_BYTES = 1024 * 1024
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


def size_causes(*maps: dict) -> list[Cause]:
    if sum(len(dumps(m)) for m in maps) > MAX_DATA_BYTES:
        return [Cause("FieldValueTooLong", f"Too long: must have at most {MAX_DATA_BYTES} "
                      "bytes", "data")]
    return []


def immutable_causes(new: Object, old: Object, fields: tuple[str, ...]) -> list[Cause]:
    """An object marked immutable keeps its data, and stays immutable."""
    if not old.get("immutable"):
        return []
    causes = []
    if not new.get("immutable"):
        causes.append(Cause("FieldValueForbidden", "Forbidden: field is immutable when "
                            "`immutable` is set", "immutable"))
    for field in fields:
        if (new.get(field) or {}) != (old.get(field) or {}):
            causes.append(Cause("FieldValueForbidden", "Forbidden: field is immutable when "
                                "`immutable` is set", field))
    return causes


class ConfigMapStrategy(Strategy):
    def validate(self, obj: Object) -> list[Cause]:
        data, binary = obj.get("data") or {}, obj.get("binaryData") or {}
        causes = config_key_causes("data", list(data)) + config_key_causes(
            "binaryData", list(binary))
        for key in set(data) & set(binary):
            causes.append(invalid(f"data[{key}]", key, "duplicate of key present in "
                                  "binaryData"))
        return causes + size_causes(data, binary)

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        return self.validate(new) + immutable_causes(new, old, ("data", "binaryData"))


def _data_count(obj: Object) -> int:
    return len(obj.get("data") or {}) + len(obj.get("binaryData") or {})


CONFIGMAPS = ResourceDef(
    group="", version="v1", kind="ConfigMap", plural="configmaps", singular="configmap",
    namespaced=True, strategy=ConfigMapStrategy(), short_names=("cm",),
    columns=(NAME, Column("Data", "integer", "Number of data entries.", _data_count), AGE),
    schema="io.k8s.api.core.v1.ConfigMap",
)
