"""kube's sample-apiserver "wardle" on gateway.extension: flunders and fischers.

- ``wardle.example.com/v1alpha1``: Flunder (namespaced, ``spec.reference`` and
  ``spec.referenceType``) and Fischer (cluster-scoped, ``disallowedFlunders``);
- ``wardle.example.com/v1beta1``: Flunder with ``spec.fischerReference`` and
  ``spec.flunderReference``, converted to and from v1alpha1 (the storage version);
- flunders have a status subresource, printer columns, the short name ``fl``;
- BanFlunder admission: a flunder whose name a fischer disallows is not created.

Serve it with ``python -m examples.wardle`` and kube's extension apiserver flags
(``--secure-port``, ``--tls-cert-file``, ``--authentication-kubeconfig``, ...; ``--help``).
"""

from __future__ import annotations

from typing import Any

from gateway.extension import (
    APIGroup,
    Attributes,
    Objects,
    Resource,
    StatusError,
    Strategy,
    Version,
    invalid,
    serve,
)

GROUP = "wardle.example.com"
REFERENCE_TYPES = ["Flunder", "Fischer"]


def _kind_schema(spec: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {
        "spec": {"type": "object", "properties": spec},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}


FLUNDER_V1ALPHA1 = _kind_schema({
    "reference": {"type": "string", "description": "The name of a Flunder or Fischer."},
    "referenceType": {"type": "string", "enum": REFERENCE_TYPES}})
FLUNDER_V1BETA1 = _kind_schema({
    "fischerReference": {"type": "string", "description": "The Fischer referred to."},
    "flunderReference": {"type": "string", "description": "The Flunder referred to."},
    "referenceType": {"type": "string", "enum": REFERENCE_TYPES}})
FISCHER_V1ALPHA1 = {"type": "object", "properties": {
    "disallowedFlunders": {"type": "array", "items": {"type": "string"},
                           "description": "Names no Flunder may have."}}}


def _columns(*wide: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": "Reference-Type", "type": "string", "jsonPath": ".spec.referenceType"},
            *({**column, "priority": 1} for column in wide),
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]


def convert_flunder(obj: dict[str, Any], to_version: str) -> dict[str, Any]:
    """v1alpha1's one reference <-> v1beta1's two, chosen by referenceType."""
    spec = obj.get("spec") or {}
    kind = spec.get("referenceType", "")
    if to_version == "v1beta1":
        new = {"referenceType": kind} if kind else {}
        if spec.get("reference"):
            new["fischerReference" if kind == "Fischer" else "flunderReference"] = \
                spec["reference"]
    else:
        new = {"referenceType": kind} if kind else {}
        reference = spec.get("fischerReference") or spec.get("flunderReference")
        if reference:
            new["reference"] = reference
    obj["spec"] = new
    return obj


class FlunderStrategy(Strategy):
    """sample-apiserver's ValidateFlunderSpec, on the object in v1beta1's terms."""

    def validate(self, obj: dict[str, Any]) -> list[Any]:
        if not obj["apiVersion"].endswith("/v1beta1"):
            obj = convert_flunder({**obj, "spec": dict(obj.get("spec") or {})}, "v1beta1")
        spec = obj.get("spec") or {}
        kind = spec.get("referenceType", "")
        fischer, flunder = spec.get("fischerReference", ""), spec.get("flunderReference", "")
        if fischer and flunder:
            return [invalid("spec.fischerReference", fischer,
                            "cannot be set with flunderReference at the same time")]
        for name, value in (("Flunder", flunder), ("Fischer", fischer)):
            path = f"spec.{name.lower()}Reference"
            if value and kind != name:
                return [invalid(path, value, f"cannot be set if referenceType is not {name}")]
            if not value and kind == name:
                return [invalid(path, value, f"cannot be empty if referenceType is {name}")]
        return []


async def ban_flunder(attrs: Attributes, objects: Objects) -> None:
    """sample-apiserver's BanFlunder: no flunder a fischer disallows is created."""
    if attrs.operation != "CREATE" or attrs.subresource:
        return
    for fischer in objects.list("fischers"):
        if attrs.name in (fischer.get("disallowedFlunders") or []):
            raise StatusError(
                403, "Forbidden", f'flunders.{GROUP} "{attrs.name}" is forbidden: this name '
                "may not be used, please change the resource name",
                name=attrs.name, group=GROUP, kind="flunders")


WARDLE = APIGroup(GROUP, [
    Resource(
        "Flunder", "flunders", short_names=["fl"], categories=["wardle"], status=True,
        strategy=FlunderStrategy(), convert=convert_flunder, admission=[ban_flunder],
        versions=[
            Version("v1alpha1", FLUNDER_V1ALPHA1, storage=True, printer_columns=_columns(
                {"name": "Reference", "type": "string", "jsonPath": ".spec.reference"})),
            Version("v1beta1", FLUNDER_V1BETA1, printer_columns=_columns(
                {"name": "Flunder", "type": "string", "jsonPath": ".spec.flunderReference"},
                {"name": "Fischer", "type": "string", "jsonPath": ".spec.fischerReference"})),
        ]),
    Resource("Fischer", "fischers", namespaced=False, categories=["wardle"],
             versions=[Version("v1alpha1", FISCHER_V1ALPHA1, storage=True)]),
])


def main(argv: list[str] | None = None) -> None:
    serve([WARDLE], argv, prog="python -m examples.wardle",
          etcd_prefix=f"/registry/{GROUP}")
