"""core/v1 secrets: stringData folded into data, each type's required keys, immutable."""

from __future__ import annotations

import base64
import binascii
import json

from gateway.apimachinery.gowords import json_kind, json_syntax_error
from gateway.apimachinery.status import Cause
from gateway.apis.core.configmaps import (
    binary_bytes,
    config_key_causes,
    immutable_causes,
    size_causes,
)
from gateway.registry.resource import ResourceDef
from gateway.registry.strategy import Object, Strategy
from gateway.registry.tables import AGE, NAME, Column
from gateway.registry.validation import invalid, required

OPAQUE = "Opaque"
SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"
DOCKERCFG, DOCKERCFG_KEY = "kubernetes.io/dockercfg", ".dockercfg"
DOCKERCONFIGJSON, DOCKERCONFIGJSON_KEY = "kubernetes.io/dockerconfigjson", ".dockerconfigjson"
BASIC_AUTH = "kubernetes.io/basic-auth"
SSH_AUTH, SSH_PRIVATE_KEY = "kubernetes.io/ssh-auth", "ssh-privatekey"
TLS = "kubernetes.io/tls"
SA_NAME_ANNOTATION = "kubernetes.io/service-account.name"


def fold_string_data(obj: Object) -> None:
    """stringData's values become base64 in data (winning over the same keys), as kube does."""
    string_data = obj.pop("stringData", None)
    if string_data:
        data = obj.setdefault("data", {}) or {}
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        obj["data"] = data


class SecretStrategy(Strategy):
    selectable_fields = ("type",)

    def prepare_for_create(self, obj: Object) -> None:
        fold_string_data(obj)
        obj["type"] = obj.get("type") or OPAQUE

    def prepare_for_update(self, new: Object, old: Object) -> None:
        fold_string_data(new)
        new["type"] = new.get("type") or OPAQUE

    def field_set(self, obj: Object) -> dict[str, str]:
        return {"type": obj.get("type", "")}

    def validate(self, obj: Object) -> list[Cause]:
        """ValidateSecret: the data keys, the total size, then what the type requires."""
        data = obj.get("data") or {}
        causes = config_key_causes("data", list(data)) + size_causes("data", binary_bytes(data))
        return causes + _type_causes(obj.get("type") or OPAQUE, obj, data)

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        """ValidateSecretUpdate: the type may not change, the immutability rules, then the
        create rules."""
        causes = []
        if new.get("type") != old.get("type"):
            causes.append(invalid("type", new.get("type") or "", "field is immutable"))
        return causes + immutable_causes(new, old, ("data",)) + self.validate(new)


def _decoded(value: str) -> bytes:
    try:
        return base64.b64decode(value)
    except (binascii.Error, ValueError):
        return b""


def _json_object_error(raw: bytes) -> str:
    """What Go's json.Unmarshal into a map says of ``raw`` ("" when it takes it)."""
    if error := json_syntax_error(raw):
        return error
    value = json.loads(raw)
    if value is None or isinstance(value, dict):
        return ""
    return (f"json: cannot unmarshal {json_kind(value)} into Go value of type "
            "map[string]interface {}")


def _type_causes(kind: str, obj: Object, data: dict[str, str]) -> list[Cause]:
    if kind == SERVICE_ACCOUNT_TOKEN:
        annotations = obj.get("metadata", {}).get("annotations") or {}
        if not annotations.get(SA_NAME_ANNOTATION):
            return [required(f"metadata.annotations[{SA_NAME_ANNOTATION}]")]
    elif kind in (DOCKERCFG, DOCKERCONFIGJSON):
        key = DOCKERCFG_KEY if kind == DOCKERCFG else DOCKERCONFIGJSON_KEY
        if key not in data:
            return [required(f"data[{key}]")]
        if error := _json_object_error(_decoded(data[key])):
            return [invalid(f"data[{key}]", "<secret contents redacted>", error)]
    elif kind == BASIC_AUTH:
        # either may be empty, but one of the two must be there
        if "username" not in data and "password" not in data:
            return [required("data[username]"), required("data[password]")]
    elif kind == SSH_AUTH:
        if not _decoded(data.get(SSH_PRIVATE_KEY) or ""):
            return [required(f"data[{SSH_PRIVATE_KEY}]")]
    elif kind == TLS:
        return [required(f"data[{key}]") for key in ("tls.crt", "tls.key") if key not in data]
    return []


SECRETS = ResourceDef(
    group="", version="v1", kind="Secret", plural="secrets", singular="secret",
    namespaced=True, strategy=SecretStrategy(),
    columns=(NAME, Column("Type", "string", "The type of the secret.",
                          lambda o: o.get("type", "")),
             Column("Data", "integer", "Number of data entries.",
                    lambda o: len(o.get("data") or {})), AGE),
    schema="io.k8s.api.core.v1.Secret",
)
