"""Validation of a custom resource against its CRD version's schema, as kube-apiserver v1.32
reports it.

kube validates in three passes, and so does ``validate``: kube-openapi's schema validator
(whose errors apiextensions-apiserver's kubeOpenAPIResultToFieldErrors turns into field
errors), the embedded resources' TypeMeta and ObjectMeta (schema/objectmeta), and the
uniqueness of x-kubernetes-list-type set and map lists (schema/listtype). CEL rules
(x-kubernetes-validations) are checked elsewhere.

Field paths: a kube-openapi error's path is its dotted name ("spec.labels.foo",
"spec.items[0].name") put after ``path``; the other passes write map keys in brackets
("spec.templates[web].kind"). An error about the root itself has the field "<nil>", and the
allOf/anyOf/oneOf/not errors always name ``path`` (so "<nil>" when it is empty).
"""

from __future__ import annotations

from typing import Any

from gateway.apiextensions.schema import _openapi
from gateway.apiextensions.schema._embedded import embedded_causes
from gateway.apiextensions.schema._gofmt import go_json, go_v
from gateway.apiextensions.schema._listtype import list_causes
from gateway.apiextensions.schema._paths import child, shown
from gateway.apimachinery.gowords import go_quote
from gateway.apimachinery.status import Cause
from gateway.registry.validation import required, too_long

__all__ = ["embedded_causes", "list_causes", "schema_causes", "validate"]


def validate(schema: dict, obj: Any, path: str = "") -> list[Cause]:
    """All of kube's schema checks of ``obj`` (a custom resource, or its status when
    ``schema`` is the status schema and ``path`` "status"), in kube's order."""
    if not isinstance(schema, dict):
        return []
    return schema_causes(schema, obj, path) + embedded_causes(schema, obj, path) + \
        list_causes(schema, obj, path)


def schema_causes(schema: dict, obj: Any, path: str = "") -> list[Cause]:
    """kube-openapi's validation, as ValidateCustomResource reports it."""
    result = _openapi.validate(schema, obj, "")
    return [_cause(error, path) for error in result.errors]


def _field(error: _openapi.Error, path: str) -> str:
    """errPath: the error's name (one leading dot dropped) as a child of ``path``."""
    name = error.name
    if not name or name == ".":
        return shown(path)
    return child(path, name[1:] if name.startswith(".") else name)


def _value(error: _openapi.Error) -> Any:
    return "" if error.value is _openapi.NO_VALUE or error.value is None else error.value


def _supported(values: list) -> str:
    """field.NotSupported's list: strings as they are, other values as JSON, all quoted."""
    return ", ".join(go_quote(v if isinstance(v, str) else go_json(v)) for v in values)


def _cause(error: _openapi.Error, path: str) -> Cause:
    if error.code == _openapi.COMPOSITE:
        return Cause("FieldValueInvalid", f'Invalid value: "": {error.message}', shown(path))
    at = _field(error, path)
    if error.code == _openapi.REQUIRED:
        return required(at)
    if error.code == _openapi.ENUM:
        value = None if error.value is _openapi.NO_VALUE else error.value
        return Cause("FieldValueNotSupported", f"Unsupported value: {go_v(value)}: supported "
                     f"values: {_supported(error.values or [])}", at)
    if error.code == _openapi.TOO_LONG:
        return too_long(at, error.valid)
    if error.code in (_openapi.MAX_ITEMS, _openapi.MAX_PROPERTIES):
        return Cause("FieldValueTooMany", f"Too many: {error.value}: must have at most "
                     f"{error.valid} items", at)
    reason = "FieldValueTypeInvalid" if error.code == _openapi.TYPE else "FieldValueInvalid"
    return Cause(reason, f"Invalid value: {go_v(_value(error))}: {error.message}", at)
