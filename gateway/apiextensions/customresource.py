"""How one served version of a CRD is served: its resource description, its strategy (kube's
customResourceStrategy) and its version layer (decoding, defaulting, pruning, conversion).

Built from the CRD object whenever it changes; nothing here is process-wide, so two CRDs, or
two versions of one, never share schema state.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from gateway.apiextensions.conversion import (
    ConversionError,
    Converter,
    NoneConverter,
    as_status,
)
from gateway.apiextensions.paths import read_path, write_path
from gateway.apiextensions.printing import columns_for
from gateway.apiextensions.scaleview import ScaleView
from gateway.apiextensions.schema import CompiledSchema, cel, compile_schema
from gateway.apiextensions.schemarules import has_invalid_types
from gateway.apiextensions.structural import is_non_structural
from gateway.apimachinery.gowords import go_quote
from gateway.apimachinery.objects import copy_object
from gateway.apimachinery.status import Cause
from gateway.registry.admission import SubresourceView
from gateway.registry.resource import ResourceDef
from gateway.registry.strategy import Strategy
from gateway.registry.versions import VersionLayer, unknown_fields

Object = dict[str, Any]
CRD_GROUP = "apiextensions.k8s.io"
#: What a PATCH of a custom resource may be (kube's CRD handler: no strategic merge patch).
PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json",
               "application/apply-patch+yaml")


@dataclass(frozen=True)
class ServedVersion:
    """What a CRD says of one of its versions, read once per CRD change."""

    crd_name: str
    group: str
    version: str
    storage_version: str
    kind: str
    list_kind: str
    plural: str
    singular: str
    namespaced: bool
    short_names: tuple[str, ...]
    categories: tuple[str, ...]
    schema: Object
    status: bool
    scale: Object | None
    columns: tuple[Object, ...]
    selectable_fields: tuple[str, ...] = ()
    #: spec.conversion: a change of strategy or webhook is served anew.
    conversion: Object = field(default_factory=dict)
    rules: Any = field(default=None, compare=False)
    #: The schema prepared once: validation, pruning and defaulting without re-reading it.
    compiled: CompiledSchema | None = field(default=None, compare=False)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


def served_versions(crd: Object) -> list[ServedVersion]:
    """The served versions of a CRD whose names were accepted, in the CRD's order."""
    spec, accepted = crd.get("spec", {}), crd.get("status", {}).get("acceptedNames", {})
    names = {**spec.get("names", {}), **{k: v for k, v in accepted.items() if v}}
    storage = next((v["name"] for v in spec.get("versions", []) if v.get("storage")), "")
    out = []
    for entry in spec.get("versions", []):
        if not entry.get("served"):
            continue
        schema = (entry.get("schema") or {}).get("openAPIV3Schema") or {}
        subresources = entry.get("subresources") or {}
        rules, _ = cel.compile_schema(schema)
        out.append(ServedVersion(
            crd_name=crd["metadata"]["name"], group=spec["group"], version=entry["name"],
            storage_version=storage, kind=names.get("kind", ""),
            list_kind=names.get("listKind") or f"{names.get('kind', '')}List",
            plural=names.get("plural", ""), singular=names.get("singular", ""),
            namespaced=spec.get("scope") == "Namespaced",
            short_names=tuple(names.get("shortNames") or ()),
            categories=tuple(names.get("categories") or ()), schema=schema,
            status="status" in subresources, scale=subresources.get("scale"),
            columns=tuple(entry.get("additionalPrinterColumns") or ()),
            selectable_fields=tuple(f.get("jsonPath", "").lstrip(".")
                                    for f in entry.get("selectableFields") or ()),
            conversion=dict(spec.get("conversion") or {}), rules=rules,
            compiled=compile_schema(schema) if schema else None))
    return out


#: Errors after which kube does not run the CEL rules (its hasBlockingErr).
_BLOCKING = ("FieldValueNotSupported", "FieldValueRequired", "FieldValueTooLong",
             "FieldValueTooMany", "FieldValueTypeInvalid")
_SKIPPED = ("some validation rules were not checked because the object was invalid; correct "
            "the existing errors to complete validation")


class CustomResourceStrategy(Strategy):
    """kube's customResourceStrategy: no create on update, no unconditional update,
    generation bumped on any change outside metadata (and status, with the status
    subresource), the schema's and the CEL rules' validation."""

    allow_create_on_update = False
    allow_unconditional_update = False
    has_generation = True
    decoding_checks_kind = False

    def __init__(self, served: ServedVersion) -> None:
        self.served = served
        self.has_status = served.status
        self.selectable_fields = served.selectable_fields

    def field_set(self, obj: Object) -> dict[str, str]:
        """The values of the version's selectableFields, as field selectors compare them."""
        out = {}
        for name in self.selectable_fields:
            value = read_path(obj, name)
            if isinstance(value, bool):
                out[name] = "true" if value else "false"
            elif value is not None:
                out[name] = str(value)
        return out

    def validate(self, obj: Object) -> list[Cause]:
        return self._schema_causes(obj, None)

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        return self._schema_causes(new, old)

    def _schema_causes(self, obj: Object, old: Object | None) -> list[Cause]:
        """The kind first (kube's ValidateTypeMeta), then the schema's value validations, then
        the CEL rules unless a value was of the wrong type or not among the supported ones
        (kube's blocking errors: the rules would misread it)."""
        served = self.served
        compiled = served.compiled
        if obj.get("kind") != served.kind:
            return [Cause("FieldValueInvalid", f"Invalid value: {go_quote(str(obj.get('kind')))}:"
                          f" must be {served.kind}", "kind")]
        causes = compiled.validate(_without_meta(obj)) if compiled is not None else []
        if old is not None:  # kube's validation ratcheting: what did not change may stay
            causes = [c for c in causes if not _unchanged(obj, old, c.field)]
        if served.rules is None or served.rules.empty():
            return causes
        if any(c.reason in _BLOCKING for c in causes):
            return [*causes, Cause("FieldValueInvalid", f'Invalid value: "null": {_SKIPPED}',
                                   "<nil>")]
        return causes + cel.validate(served.rules, obj, old, ratchet=old is not None)

    def subresource_update(self, subresource: str, new: Object, old: Object) -> Object:
        """``scale`` changes the spec replicas alone; ``status`` the status alone."""
        if subresource != "scale" or self.served.scale is None:
            return super().subresource_update(subresource, new, old)
        path = self.served.scale.get("specReplicasPath", "")
        result = copy_object(old)
        write_path(result, path, read_path(new, path))
        if "managedFields" in new.get("metadata", {}):
            result["metadata"]["managedFields"] = new["metadata"]["managedFields"]
        return result


_MISSING = object()
_STEP = re.compile(r"\.?([^.\[\]]+)|\[([^\]]*)\]")


def _at(obj: Any, field_path: str) -> Any:
    """The value a cause's field path names (``spec.items[0].name``, ``spec.labels[a]``)."""
    for match in _STEP.finditer(field_path):
        key, index = match.group(1), match.group(2)
        if key is not None and isinstance(obj, dict):
            obj = obj.get(key, _MISSING)
        elif index is not None and isinstance(obj, list) and index.isdigit():
            obj = obj[int(index)] if int(index) < len(obj) else _MISSING
        elif index is not None and isinstance(obj, dict):
            obj = obj.get(index, _MISSING)
        else:
            return _MISSING
        if obj is _MISSING:
            return _MISSING
    return obj


def _unchanged(new: Object, old: Object, field_path: str) -> bool:
    """A cause whose field holds the same value as before the update (or is missing in both):
    kube lets an update keep what an earlier schema allowed."""
    if not field_path or field_path == "<nil>":
        return False
    return _at(new, field_path) == _at(old, field_path)


def _without_meta(obj: Object) -> Object:
    """The object as the schema validates it: metadata is ObjectMeta's business (apiVersion
    and kind are the request's)."""
    return {k: v for k, v in obj.items() if k != "metadata"}


class CustomResourceVersion(VersionLayer):
    """One served version: pruning of unknown fields and non-nullable nulls, defaulting on
    the way in and when read (after conversion), and conversion to and from the storage
    version: strategy None changes apiVersion only, here; Webhook calls the CRD's conversion
    webhook (``remote``: lists in one call, errors as kube's 500)."""

    identity = False

    def __init__(self, resource: ResourceDef, served: ServedVersion,
                 converter: Converter | None = None, *,
                 siblings: Callable[[], Iterable[str]] = tuple) -> None:
        super().__init__(resource)
        self.served = served
        self.converter = converter
        self.remote = converter is not None and not isinstance(converter, NoneConverter)
        #: Every version of the CRD served now (this one among them).
        self.siblings = siblings
        self._scale = ScaleView(served.scale) if served.scale is not None else None

    def decode(self, obj: Object, field_validation: str, warnings: list[str], *,
               defaults: bool = True) -> None:
        compiled = self.served.compiled
        if compiled is None:
            return
        if defaults and compiled.has_defaults:  # kube's order: defaults, pruning, validation
            compiled.apply_defaults(obj)
        unknown_fields(compiled.prune(obj, root=True), field_validation, warnings)

    def to_storage(self, obj: Object) -> Object:
        if obj.get("apiVersion") == self._storage_api_version:
            return obj
        return {**obj, "apiVersion": self._storage_api_version}

    def from_storage(self, obj: Object) -> Object:
        return self._defaulted({**obj, "apiVersion": self.served.api_version})

    async def to_storage_async(self, obj: Object) -> Object:
        if not self.remote:
            return self.to_storage(obj)
        return (await self._convert([obj], self._storage_api_version))[0]

    async def from_storage_many(self, objs: list[Object]) -> list[Object]:
        if not self.remote:
            return [self.from_storage(obj) for obj in objs]
        converted = await self._convert(objs, self.served.api_version)
        return [self._defaulted(obj) for obj in converted]

    async def _convert(self, objs: list[Object], api_version: str) -> list[Object]:
        assert self.converter is not None
        try:
            return await self.converter.convert(objs, api_version)
        except ConversionError as err:
            raise as_status(err) from None

    # -- what admission sees ------------------------------------------------------------------

    def subresource_view(self, subresource: str) -> SubresourceView | None:
        return self._scale if subresource == "scale" else None

    def equivalent_versions(self) -> tuple[str, ...]:
        return tuple(v for v in self.siblings() if v != self.served.version)

    async def convert(self, obj: Object, api_version: str) -> Object:
        """For a webhook of another version: the CRD's conversion (failures as kube's
        admission dispatchers report them, a 500 InternalError)."""
        converter = self.converter if self.converter is not None else NoneConverter()
        try:
            return (await converter.convert([obj], api_version))[0]
        except ConversionError as err:
            raise as_status(err, admission=True) from None

    def _defaulted(self, obj: Object) -> Object:
        """Defaults applied on read: a copy when one is missing (the stored object may be
        shared), the object itself when none is."""
        compiled = self.served.compiled
        return obj if compiled is None else compiled.defaulted(obj)

    @property
    def _storage_api_version(self) -> str:
        return f"{self.served.group}/{self.served.storage_version}"


def resource_of(served: ServedVersion) -> ResourceDef:
    """The resource description the generic store and endpoints serve this version by."""
    subresources = tuple(s for s, on in (("status", served.status),
                                         ("scale", served.scale is not None)) if on)
    return ResourceDef(
        group=served.group, version=served.version, kind=served.kind, plural=served.plural,
        singular=served.singular, namespaced=served.namespaced,
        strategy=CustomResourceStrategy(served), short_names=served.short_names,
        categories=served.categories, columns=columns_for(served.columns),
        subresources=subresources,
        list_kind_name=served.list_kind, patch_types=PATCH_TYPES, own_field_labels=True,
        protobuf=False,
        storage_version=served.storage_version,
        schema=definition_name(served.group, served.version, served.kind),
        definition=served.schema or None, publish_definition=publishable(served.schema))


def publishable(schema: Any) -> bool:
    """Whether kube builds the OpenAPI definition of a kind from ``schema``: every type known,
    convertible to a structural schema and structural."""
    if not isinstance(schema, dict):
        return False
    try:
        return not (has_invalid_types(schema) or is_non_structural(schema))
    except (TypeError, ValueError, AttributeError, KeyError):
        return False


def definition_name(group: str, version: str, kind: str) -> str:
    """kube's OpenAPI name of a custom resource's kind: the group reversed, then version and
    kind (``com.example.stable.v1.CronTab`` for stable.example.com)."""
    return ".".join([*reversed(group.split(".")), version, kind])
