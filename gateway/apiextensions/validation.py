"""Validation of apiextensions.k8s.io/v1 CustomResourceDefinitions, with apiextensions-apiserver
v1.32's rules, paths and messages (pkg/apis/apiextensions/validation/validation.go).

kube validates the internal form of a CRD, which v1 converts to by hoisting: a schema,
subresources, printer columns or selectable fields that every version has alike become
top-level fields (spec.validation, spec.subresources, spec.additionalPrinterColumns,
spec.selectableFields), and errors about them carry those paths. The conversion webhook's
fields are likewise reported as spec.conversion.webhookClientConfig and
spec.conversion.conversionReviewVersions. Objects are expected defaulted (default_crd).

The generic ObjectMeta rules (the name as a DNS subdomain, labels, annotations, immutable
metadata on update) are the store's; here is only the CRD's own rule for its name.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from gateway.apiextensions import webhookconfig
from gateway.apiextensions.fieldrules import (
    column_causes,
    deprecation_warning_errors,
    dns1035_causes,
    names_causes,
    selectable_fields_causes,
    stored_versions_causes,
    subresources_causes,
)
from gateway.apiextensions.schemadefaults import DefaultCheck, has_defaults, has_unpruned_defaults
from gateway.apiextensions.schemarules import (
    CelCompile,
    Options,
    has_invalid_map_list_keys,
    has_invalid_types,
    has_kubernetes_extensions,
    has_non_atomic_set_type,
    validation_causes,
)
from gateway.apiextensions.structural import is_non_structural, structural_error
from gateway.apimachinery.status import Cause
from gateway.registry.validation import (
    dns1123_subdomain_errors,
    forbidden,
    invalid,
    not_supported,
    required,
)

IMMUTABLE = "field is immutable"
_HOISTED = (("schema", "validation"), ("subresources", "subresources"),
            ("additionalPrinterColumns", "additionalPrinterColumns"),
            ("selectableFields", "selectableFields"))


@dataclass(frozen=True)
class _Rules:
    """validationOptions beyond the schema's: what a create requires, relaxed on update."""

    schema: Options = field(default_factory=Options)
    require_openapi_schema: bool = True
    require_recognized_review_version: bool = True
    require_immutable_names: bool = False
    allow_invalid_ca_bundle: bool = True
    cel_compile: CelCompile | None = None
    default_check: DefaultCheck | None = None


# -- the internal form ---------------------------------------------------------------------------


def _semantic(value: Any) -> Any:
    """A value as Semantic.DeepEqual compares the Go fields it decodes into: null, "", false and
    empty lists are their zero values."""
    if isinstance(value, dict):
        out = {k: _semantic(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not None and v != "" and v is not False
                and v != []}
    if isinstance(value, list):
        return [_semantic(v) for v in value]
    return value


@dataclass
class _Hub:
    """The internal form of a spec: hoisted top-level fields, and versions without them."""

    top: dict[str, Any]
    versions: list[dict[str, Any]]

    def schemas(self) -> list[Any]:
        return [_open_api(self.top.get("validation"))] + [
            _open_api(v.get("schema")) for v in self.versions]


def _hub(spec: dict[str, Any]) -> _Hub:
    versions = [dict(v) if isinstance(v, dict) else {} for v in spec.get("versions") or []]
    top: dict[str, Any] = {}
    for key, hoisted in _HOISTED:
        if versions and all(_semantic(v.get(key)) == _semantic(versions[0].get(key))
                            for v in versions):
            top[hoisted] = versions[0].get(key)
            for version in versions:
                version.pop(key, None)
    return _Hub(top, versions)


def _open_api(validation: Any) -> Any:
    return validation.get("openAPIV3Schema") if isinstance(validation, dict) else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _status_on(subresources: Any) -> bool:
    return _dict(subresources).get("status") is not None


# -- public API ----------------------------------------------------------------------------------


def validate_crd(crd: dict, *, cel_compile: CelCompile | None = None,
                 default_check: DefaultCheck | None = None) -> list[Cause]:
    """ValidateCustomResourceDefinition: the causes that make a new CRD invalid.

    ``cel_compile(schema, path)`` reports CEL rules that do not compile; it is called for each
    schema kube compiles (spec.validation.openAPIV3Schema when all versions share one, else
    spec.versions[i].schema.openAPIV3Schema) once the schema is otherwise valid.
    ``default_check(value, schema, path)`` reports a default that does not validate against
    its schema (this module checks only that defaults keep no unknown fields)."""
    rules = _Rules(cel_compile=cel_compile, default_check=default_check)
    spec, status = _dict(crd.get("spec")), _dict(crd.get("status"))
    causes = _name_causes(_dict(crd.get("metadata")), spec)
    causes += _spec_causes(spec, rules)
    causes += names_causes(_dict(status.get("acceptedNames")), "status.acceptedNames")
    causes += stored_versions_causes(status.get("storedVersions"), spec.get("versions"))
    causes += webhookconfig.approval_causes(crd, None)
    causes += _preserve_unknown_fields_causes(crd, None)
    return causes


def validate_crd_update(new: dict, old: dict, *, cel_compile: CelCompile | None = None,
                        default_check: DefaultCheck | None = None) -> list[Cause]:
    """ValidateCustomResourceDefinitionUpdate: the create rules, relaxed where the old object
    already broke them, plus what may not change."""
    rules = replace(_update_rules(old), cel_compile=cel_compile, default_check=default_check)
    spec, old_spec = _dict(new.get("spec")), _dict(old.get("spec"))
    status = _dict(new.get("status"))
    causes = _spec_causes(spec, rules)
    if rules.require_immutable_names:
        causes += _immutable(spec.get("scope"), old_spec.get("scope"), "spec.scope")
        causes += _immutable(_dict(spec.get("names")).get("kind"),
                             _dict(old_spec.get("names")).get("kind"), "spec.names.kind")
    causes += _immutable(spec.get("group"), old_spec.get("group"), "spec.group")
    causes += _immutable(_dict(spec.get("names")).get("plural"),
                         _dict(old_spec.get("names")).get("plural"), "spec.names.plural")
    causes += names_causes(_dict(status.get("acceptedNames")), "status.acceptedNames")
    causes += stored_versions_causes(status.get("storedVersions"), spec.get("versions"))
    causes += webhookconfig.approval_causes(new, old)
    causes += _preserve_unknown_fields_causes(new, old)
    return causes


def validate_crd_status(new: dict, old: dict) -> list[Cause]:
    """ValidateUpdateCustomResourceDefinitionStatus: the accepted names (the generic metadata
    rules are the store's)."""
    return names_causes(_dict(_dict(new.get("status")).get("acceptedNames")),
                        "status.acceptedNames")


def _update_rules(old: dict) -> _Rules:
    """What the old object already had decides how strict the update is."""
    old_spec = _dict(old.get("spec"))
    hub = _hub(old_spec)
    schemas = [s for s in hub.schemas() if isinstance(s, dict)]
    conversion = old_spec.get("conversion")
    return _Rules(
        schema=Options(
            require_valid_property_type=not any(map(has_invalid_types, schemas)),
            require_structural=not any(map(is_non_structural, schemas)),
            require_pruned_defaults=not any(map(has_unpruned_defaults, schemas)),
            require_atomic_set_type=not any(map(has_non_atomic_set_type, schemas)),
            require_map_list_keys_map_set=not any(map(has_invalid_map_list_keys, schemas)),
        ),
        require_openapi_schema=_all_versions_have_schemas(hub),
        require_recognized_review_version=not isinstance(conversion, dict)
        or webhookconfig.recognized_or_empty(_review_versions(conversion)),
        require_immutable_names=_established(old),
        allow_invalid_ca_bundle=webhookconfig.allow_invalid_ca_bundle(
            _established(old), _client_config(_dict(conversion))),
    )


def _established(crd: dict) -> bool:
    return any(c.get("type") == "Established" and c.get("status") == "True"
               for c in _dict(crd.get("status")).get("conditions") or [] if isinstance(c, dict))


def _all_versions_have_schemas(hub: _Hub) -> bool:
    if isinstance(_open_api(hub.top.get("validation")), dict):
        return True
    return all(isinstance(_open_api(v.get("schema")), dict) for v in hub.versions)


def _immutable(new: Any, old: Any, path: str) -> list[Cause]:
    if _semantic(new) == _semantic(old):
        return []
    return [invalid(path, new if new is not None else "", IMMUTABLE)]


# -- metadata and names ----------------------------------------------------------------------------


def _name_causes(meta: dict, spec: dict) -> list[Cause]:
    """The name (and a generateName) must be <spec.names.plural>.<spec.group>."""
    expected = f"{_dict(spec.get('names')).get('plural') or ''}.{spec.get('group') or ''}"
    detail = 'must be spec.names.plural+"."+spec.group'
    causes = []
    for key in ("generateName", "name"):
        value = meta.get(key) or ""
        if value and value != expected:
            causes.append(invalid(f"metadata.{key}", value, detail))
    return causes


def _preserve_unknown_fields_causes(new: dict, old: dict | None) -> list[Cause]:
    """spec.preserveUnknownFields may stay true, never become true."""
    if old is not None and _dict(old.get("spec")).get("preserveUnknownFields") is True:
        return []
    if _dict(new.get("spec")).get("preserveUnknownFields") is True:
        return [invalid("spec.preserveUnknownFields", True, "cannot set to true, set "
                        "x-kubernetes-preserve-unknown-fields to true in "
                        "spec.versions[*].schema instead")]
    return []


# -- the spec ------------------------------------------------------------------------------------


def _group_causes(group: str) -> list[Cause]:
    if not group:
        return [required("spec.group")]
    if errors := dns1123_subdomain_errors(group):
        return [invalid("spec.group", group, ",".join(errors))]
    if "." not in group:
        return [invalid("spec.group", group, "should be a domain with at least one dot")]
    return []


def _enum(path: str, value: str, accepted: list[str]) -> list[Cause]:
    if not value:
        return [required(path)]
    return [] if value in accepted else [not_supported(path, value, accepted)]


def _spec_causes(spec: dict, rules: _Rules) -> list[Cause]:
    """validateCustomResourceDefinitionSpec, on the internal (hoisted) form."""
    hub = _hub(spec)
    preserve = spec.get("preserveUnknownFields") is True
    causes = _group_causes(spec.get("group") or "")
    causes += _enum("spec.scope", spec.get("scope") or "", ["Cluster", "Namespaced"])
    causes += _schema_presence_causes(hub, rules, preserve)
    schema_opts = rules.schema
    has_schemas = [s for s in hub.schemas() if isinstance(s, dict)]
    if not preserve or any(map(has_kubernetes_extensions, has_schemas)):
        schema_opts = replace(schema_opts, require_structural=True)
    if schema_opts.allow_defaults and any(map(has_defaults, has_schemas)):
        schema_opts = replace(schema_opts, require_structural=True)
        if preserve:
            causes.append(invalid("spec.preserveUnknownFields", True,
                                  "must be false in order to use defaults in the schema"))
    rules = replace(rules, schema=schema_opts)
    causes += _versions_causes(hub, rules)
    causes += _required_names_causes(_dict(spec.get("names")))
    causes += names_causes(_dict(spec.get("names")), "spec.names")
    any_status = _status_on(hub.top.get("subresources")) or any(
        _status_on(v.get("subresources")) for v in hub.versions)
    causes += _version_parts_causes(hub.top, "spec", any_status, rules, top=True)
    conversion = spec.get("conversion")
    strategy = _dict(conversion).get("strategy") or ""
    if isinstance(conversion, dict) and strategy != "None" and preserve:
        causes.append(invalid("spec.conversion.strategy", strategy,
                              "must be None if spec.preserveUnknownFields is true"))
    causes += _conversion_causes(conversion, rules)
    return causes


def _schema_presence_causes(hub: _Hub, rules: _Rules, preserve: bool) -> list[Cause]:
    """Every version needs a schema (or, for old objects that lacked some, every served one
    does unless unknown fields are kept)."""
    if isinstance(_open_api(hub.top.get("validation")), dict):
        return []
    causes = []
    for i, version in enumerate(hub.versions):
        if isinstance(_open_api(version.get("schema")), dict):
            continue
        path = f"spec.versions[{i}].schema.openAPIV3Schema"
        if rules.require_openapi_schema:
            causes.append(required(path, "schemas are required"))
        elif not preserve and version.get("served") is True:
            causes.append(required(path, "because otherwise all fields are pruned"))
    return causes


def _versions_causes(hub: _Hub, rules: _Rules) -> list[Cause]:
    causes: list[Cause] = []
    names: set[str] = set()
    unique, storage = True, 0
    per_version_subresources = any(v.get("subresources") is not None for v in hub.versions)
    for i, version in enumerate(hub.versions):
        name = version.get("name") or ""
        storage += version.get("storage") is True
        unique = unique and name not in names
        names.add(name)
        causes += dns1035_causes(f"spec.versions[{i}].name", name)
        subresources = version.get("subresources") if per_version_subresources \
            else hub.top.get("subresources")
        causes += _version_causes(version, f"spec.versions[{i}]", _status_on(subresources),
                                  rules)
    shown = "[]apiextensions.CustomResourceDefinitionVersion{...}"
    if not unique:
        causes.append(Cause("FieldValueInvalid", f"Invalid value: {shown}: must contain unique "
                            "version names", "spec.versions"))
    if storage != 1:
        causes.append(Cause("FieldValueInvalid", f"Invalid value: {shown}: must have exactly "
                            "one version marked as storage version", "spec.versions"))
    if hub.versions and (first := hub.versions[0].get("name") or ""):
        # the internal spec.version is the first version's name, and is checked again
        causes += dns1035_causes("spec.version", first)
    return causes


def _required_names_causes(names: dict) -> list[Cause]:
    return [required(f"spec.names.{key}") for key in ("plural", "singular", "kind", "listKind")
            if not names.get(key)]


def _version_causes(version: dict, path: str, status_on: bool, rules: _Rules) -> list[Cause]:
    """validateCustomResourceDefinitionVersion."""
    causes = [invalid(f"{path}.deprecationWarning", version["deprecationWarning"], error)
              for error in deprecation_warning_errors(version.get("deprecated") is True,
                                                      version.get("deprecationWarning"))]
    return causes + _version_parts_causes(version, path, status_on, rules, top=False)


def _version_parts_causes(parts: dict, path: str, status_on: bool, rules: _Rules, *,
                          top: bool) -> list[Cause]:
    """The schema, subresources, columns and selectable fields of a version, or the hoisted
    ones of the spec (``top``)."""
    validation = parts.get("validation" if top else "schema")
    causes = validation_causes(validation, status_on, rules.schema,
                               f"{path}.validation" if top else f"{path}.schema",
                               cel_compile=rules.cel_compile, default_check=rules.default_check)
    causes += subresources_causes(parts.get("subresources"), f"{path}.subresources")
    for i, column in enumerate(parts.get("additionalPrinterColumns") or []):
        causes += column_causes(_dict(column), f"{path}.additionalPrinterColumns[{i}]")
    selectable = parts.get("selectableFields") or []
    if selectable:
        causes += _selectable_causes(selectable, validation, path, top)
    return causes


def _selectable_causes(selectable: list, validation: Any, path: str, top: bool) -> list[Cause]:
    where = f"{path}.selectableFields"
    schema = _open_api(validation)
    if top and validation is None:
        return [invalid(where, "", "selectableFields may only be set when validations.schema "
                        "is included")]
    if not top and not isinstance(schema, dict):
        return [invalid(where, "", "selectableFields may only be set when "
                        "version.schema.openAPIV3Schema is not included")]
    causes = []
    if error := structural_error(schema):
        schema = None
        # kube's path for the shared schema here is spec.schema.openAPIV3Schema
        causes.append(invalid(f"{path}.schema.openAPIV3Schema", "", error))
    return causes + selectable_fields_causes(selectable, schema, where)


# -- conversion ----------------------------------------------------------------------------------


def _client_config(conversion: dict) -> Any:
    return _dict(conversion.get("webhook")).get("clientConfig")


def _review_versions(conversion: dict) -> Any:
    return _dict(conversion.get("webhook")).get("conversionReviewVersions")


def _conversion_causes(conversion: Any, rules: _Rules) -> list[Cause]:
    """validateCustomResourceConversion, under the internal form's paths."""
    if not isinstance(conversion, dict):
        return []
    path = "spec.conversion"
    strategy = conversion.get("strategy") or ""
    causes = _enum(f"{path}.strategy", strategy, ["None", "Webhook"])
    config, versions = _client_config(conversion), _review_versions(conversion)
    if strategy != "Webhook":
        not_webhook = "should not be set when strategy is not set to Webhook"
        if config is not None:
            causes.append(forbidden(f"{path}.webhookClientConfig", not_webhook))
        if versions:
            causes.append(forbidden(f"{path}.conversionReviewVersions", not_webhook))
        return causes
    if not isinstance(config, dict):
        causes.append(required(f"{path}.webhookClientConfig",
                               "required when strategy is set to Webhook"))
    else:
        causes += webhookconfig.client_config_causes(config, f"{path}.webhookClientConfig",
                                                     rules.allow_invalid_ca_bundle)
    causes += webhookconfig.review_versions_causes(
        versions, rules.require_recognized_review_version, f"{path}.conversionReviewVersions")
    return causes
