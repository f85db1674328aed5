"""Rules of the smaller parts of a CRD, as apiextensions-apiserver v1.32 checks them
(pkg/apis/apiextensions/validation/validation.go): names, stored versions, a version's
deprecation warning, the scale subresource, printer columns and selectable fields.
"""

from __future__ import annotations

from typing import Any

from gateway.apiextensions.structural import FieldPathError, path_string, valid_field_path
from gateway.apimachinery.status import Cause
from gateway.registry.validation import dns1035_label_errors, duplicate, invalid, required

PRINTER_TYPES = ["boolean", "date", "integer", "number", "string"]
PRINTER_FORMATS = ["byte", "date", "date-time", "double", "float", "int32", "int64", "password"]
MAX_SELECTABLE_FIELDS = 8


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def dns1035_causes(path: str, value: str, prefix: str = "") -> list[Cause]:
    """One cause with IsDNS1035Label's errors joined by ","; with a prefix (kinds), the
    lowercase value is checked."""
    errors = dns1035_label_errors(value.lower() if prefix else value)
    return [invalid(path, value, prefix + ",".join(errors))] if errors else []


def names_causes(names: dict, path: str) -> list[Cause]:
    """ValidateCustomResourceDefinitionNames (spec.names and status.acceptedNames)."""
    causes: list[Cause] = []
    mixed = "may have mixed case, but should otherwise match: "
    for key, prefix in (("plural", ""), ("singular", ""), ("kind", mixed), ("listKind", mixed)):
        if isinstance(value := names.get(key), str) and value:
            causes += dns1035_causes(f"{path}.{key}", value, prefix)
    for i, short in enumerate(names.get("shortNames") or []):
        causes += dns1035_causes(f"{path}.shortNames[{i}]", short or "")
    kind = names.get("kind") or ""
    if kind and kind == names.get("listKind"):
        causes.append(invalid(f"{path}.listKind", kind, "kind and listKind may not be the same"))
    for i, category in enumerate(names.get("categories") or []):
        causes += dns1035_causes(f"{path}.categories[{i}]", category or "")
    return causes


def stored_versions_causes(stored: Any, versions: Any) -> list[Cause]:
    """status.storedVersions holds the storage version, and only versions of the spec."""
    path = "status.storedVersions"
    stored = [s for s in stored if isinstance(s, str)] if isinstance(stored, list) else None
    if not stored:
        shown = "[]string(nil)" if stored is None else "[]string{}"
        return [Cause("FieldValueInvalid", f"Invalid value: {shown}: must have at least one "
                      "stored version", path)]
    causes: list[Cause] = []
    left = {name: i for i, name in enumerate(stored)}
    for version in versions or []:
        name = _dict(version).get("name") or ""
        if _dict(version).get("storage") is True and name not in left:
            causes.append(invalid(path, stored, f"must have the storage version {name}"))
        left.pop(name, None)
    for name, i in sorted(left.items(), key=lambda item: item[1]):
        causes.append(invalid(f"{path}[{i}]", name, "must appear in spec.versions"))
    return causes


def deprecation_warning_errors(deprecated: bool, warning: Any) -> list[str]:
    if not deprecated and warning is not None:
        return ["can only be set for deprecated versions"]
    if not isinstance(warning, str):
        return []
    errors = []
    if len(warning.encode()) > 256:
        errors.append("must be <= 256 characters long")
    if not warning:
        errors.append("must not be an empty string")
    bad = next((i for i, char in enumerate(warning) if not char.isprintable()), None)
    if bad is not None:
        # Go's unicode.IsPrint: letters, marks, numbers, punctuation, symbols and the space
        errors.append("must only contain printable UTF-8 characters; non-printable character "
                      f"found at index {len(warning[:bad].encode())}")
    return errors


def subresources_causes(subresources: Any, path: str) -> list[Cause]:
    """ValidateCustomResourceDefinitionSubresources: the scale subresource's JSON paths."""
    scale = _dict(subresources).get("scale")
    if not isinstance(scale, dict):
        return []
    causes: list[Cause] = []
    for key, under in (("specReplicasPath", ".spec"), ("statusReplicasPath", ".status")):
        value, where = scale.get(key) or "", f"{path}.scale.{key}"
        if not value:
            causes.append(required(where))
        elif errors := simple_json_path_causes(value, where):
            causes += errors
        elif not value.startswith(under + "."):
            causes.append(invalid(where, value, f"should be a json path under {under}"))
    selector, where = scale.get("labelSelectorPath") or "", f"{path}.scale.labelSelectorPath"
    if selector:
        if errors := simple_json_path_causes(selector, where):
            causes += errors
        elif not selector.startswith((".spec.", ".status.")):
            causes.append(invalid(where, selector, "should be a json path under either .spec "
                                  "or .status"))
    return causes


def simple_json_path_causes(text: str, path: str) -> list[Cause]:
    if not text:
        return [invalid(path, text, "must not be empty")]
    if text[0] != ".":
        return [invalid(path, text, "must be a simple json path starting with .")]
    return []


def column_causes(column: dict, path: str) -> list[Cause]:
    """ValidateCustomResourceColumnDefinition (kube names the path part JSONPath)."""
    causes: list[Cause] = []
    if not column.get("name"):
        causes.append(required(f"{path}.name"))
    types = f"must be one of {','.join(PRINTER_TYPES)}"
    kind = column.get("type") or ""
    if not kind:
        causes.append(required(f"{path}.type", types))
    elif kind not in PRINTER_TYPES:
        causes.append(invalid(f"{path}.type", kind, types))
    fmt = column.get("format") or ""
    if fmt and fmt not in PRINTER_FORMATS:
        causes.append(invalid(f"{path}.format", fmt,
                              f"must be one of {','.join(PRINTER_FORMATS)}"))
    json_path = column.get("jsonPath") or ""
    if not json_path:
        causes.append(required(f"{path}.JSONPath"))
    else:
        causes += simple_json_path_causes(json_path, f"{path}.JSONPath")
    return causes


def selectable_fields_causes(fields: list, schema: Any, path: str) -> list[Cause]:
    """ValidateCustomResourceSelectableFields: at most 8 distinct paths, each to a string,
    integer or boolean field outside metadata."""
    causes: list[Cause] = []
    seen: list[str] = []
    for i, entry in enumerate(fields):
        where, text = f"{path}[{i}].jsonPath", _dict(entry).get("jsonPath") or ""
        if not text:
            causes.append(required(where))
            continue
        try:
            parts, found = valid_field_path(text, schema, allow_array_notation=False)
        except FieldPathError as err:
            causes.append(invalid(where, text, f"is an invalid path: {err}"))
            continue
        if parts[:1] == ["metadata"]:
            causes.append(invalid(where, text, "must not point to fields in metadata"))
        if _dict(found).get("type") not in ("string", "boolean", "integer"):
            causes.append(invalid(where, text, "must point to a field of type string, boolean "
                                  "or integer. Enum string fields and strings with formats are "
                                  "allowed."))
        if (key := path_string(parts)) in seen:
            causes.append(duplicate(where, text))
        else:
            seen.append(key)
    if len(seen) > MAX_SELECTABLE_FIELDS:
        causes.append(Cause("FieldValueTooMany", f"Too many: {len(seen)}: must have at most "
                            f"{MAX_SELECTABLE_FIELDS} items", path))
    return causes
