"""core/v1 secrets: stringData folded into data, each type's required keys, immutable."""

from __future__ import annotations

import base64
import json

from gateway.apis.core.configmaps import config_key_causes, immutable_causes, size_causes
from gateway.endpoints.status import Cause
from gateway.registry.resource import ResourceDef
from gateway.registry.strategy import Object, Strategy
from gateway.registry.tables import AGE, NAME, Column
from gateway.registry.validation import invalid, required

OPAQUE = "Opaque"
#: type -> keys of which at least one must be present (all, for the last entry's flag)
REQUIRED_KEYS: dict[str, tuple[tuple[str, ...], bool]] = {
    "kubernetes.io/dockercfg": ((".dockercfg",), True),
    "kubernetes.io/dockerconfigjson": ((".dockerconfigjson",), True),
    "kubernetes.io/basic-auth": (("username", "password"), False),
    "kubernetes.io/ssh-auth": (("ssh-privatekey",), True),
    "kubernetes.io/tls": (("tls.crt", "tls.key"), True),
}
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
        data = obj.get("data") or {}
        causes = config_key_causes("data", list(data)) + size_causes(data)
        causes += _type_causes(obj.get("type") or OPAQUE, obj, data)
        return causes

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        causes = self.validate(new) + immutable_causes(new, old, ("data",))
        if new.get("type") != old.get("type"):
            causes.append(Cause("FieldValueInvalid", f'Invalid value: "{new.get("type")}": '
                                "field is immutable", "type"))
        return causes


def _type_causes(kind: str, obj: Object, data: dict[str, str]) -> list[Cause]:
    if kind == "kubernetes.io/service-account-token":
        annotations = obj.get("metadata", {}).get("annotations") or {}
        if not annotations.get(SA_NAME_ANNOTATION):
            return [required(f"metadata.annotations[{SA_NAME_ANNOTATION}]")]
        return []
    rule = REQUIRED_KEYS.get(kind)
    if rule is None:
        return []
    keys, all_needed = rule
    present = [k for k in keys if k in data]
    if all_needed:
        causes = [required(f"data[{k}]") for k in keys if k not in data]
    else:
        causes = [] if present else [required("data[username]", "or data[password]")]
    if kind == "kubernetes.io/dockerconfigjson" and ".dockerconfigjson" in data:
        try:
            json.loads(base64.b64decode(data[".dockerconfigjson"]))
        except ValueError as err:
            causes.append(invalid("data[.dockerconfigjson]", "<secret contents redacted>",
                                  str(err)))
    return causes


SECRETS = ResourceDef(
    group="", version="v1", kind="Secret", plural="secrets", singular="secret",
    namespaced=True, strategy=SecretStrategy(),
    columns=(NAME, Column("Type", "string", "The type of the secret.",
                          lambda o: o.get("type", "")),
             Column("Data", "integer", "Number of data entries.",
                    lambda o: len(o.get("data") or {})), AGE),
    schema="io.k8s.api.core.v1.Secret",
)
