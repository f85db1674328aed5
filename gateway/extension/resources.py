"""From declarations to served resources, on the machinery the gateway serves CRDs with.

Each declared resource is written as the CustomResourceDefinition it amounts to (names
accepted, one version stored), and each served version becomes what the apiextensions server
makes of a CRD's version: a ``ResourceDef`` (custom resource strategy: schema and CEL
validation, generation, the status split), a ``CustomResourceVersion`` (pruning, defaulting,
conversion to and from the storage version) and a REST store over the resource's one watch
cache. The declaration's strategy runs after the schema's checks; its conversion is an
in-process converter in place of a webhook; its admission hooks join the server's admission
chain.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import Iterator
from typing import Any

from gateway.apiextensions.conversion import ConversionError, Converter, NoneConverter
from gateway.apiextensions.customresource import (
    CustomResourceStrategy,
    CustomResourceVersion,
    ServedVersion,
    resource_of,
    served_versions,
)
from gateway.apimachinery.status import Cause
from gateway.apimachinery.versions import version_rank
from gateway.extension.api import (
    APIGroup,
    Convert,
    Object,
    Objects,
    Resource,
    Strategy,
)
from gateway.registry.admission import Attributes
from gateway.registry.resource import ResourceDef


def crd_of(group: str, resource: Resource) -> Object:
    """The CustomResourceDefinition the declaration amounts to, its names accepted."""
    names: Object = {"plural": resource.plural, "singular": resource.singular_name,
                     "kind": resource.kind, "listKind": f"{resource.kind}List"}
    if resource.short_names:
        names["shortNames"] = list(resource.short_names)
    if resource.categories:
        names["categories"] = list(resource.categories)
    storage = resource.storage_version
    versions = []
    for version in resource.versions:
        entry: Object = {"name": version.name, "served": version.served,
                         "storage": version.name == storage,
                         "schema": {"openAPIV3Schema": copy.deepcopy(version.schema)}}
        if resource.status:
            entry["subresources"] = {"status": {}}
        if version.printer_columns:
            entry["additionalPrinterColumns"] = [dict(c) for c in version.printer_columns]
        if version.selectable_fields:
            entry["selectableFields"] = [{"jsonPath": p} for p in version.selectable_fields]
        versions.append(entry)
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{resource.plural}.{group}"},
            "spec": {"group": group, "names": names, "versions": versions,
                     "scope": "Namespaced" if resource.namespaced else "Cluster"},
            "status": {"acceptedNames": names}}


class HookStrategy(CustomResourceStrategy):
    """kube's custom resource strategy, then the declaration's hooks."""

    def __init__(self, served: ServedVersion, hooks: Strategy) -> None:
        super().__init__(served)
        self.hooks = hooks

    def prepare_for_create(self, obj: Object) -> None:
        super().prepare_for_create(obj)
        self.hooks.prepare_for_create(obj)

    def prepare_for_update(self, new: Object, old: Object) -> None:
        super().prepare_for_update(new, old)
        self.hooks.prepare_for_update(new, old)

    def validate(self, obj: Object) -> list[Cause]:
        causes = super().validate(obj)
        return causes or self.hooks.validate(obj)

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        causes = super().validate_update(new, old)
        return causes or self.hooks.validate_update(new, old)


class HookConverter(Converter):
    """Conversion by the declaration's function, in process (in place of a CRD's webhook):
    only what is not yet at the wanted version is converted, metadata is kept."""

    def __init__(self, convert: Convert) -> None:
        self._convert = convert

    async def convert(self, objects: list[Object], to_api_version: str) -> list[Object]:
        version = to_api_version.rpartition("/")[2]
        out = []
        for obj in objects:
            if obj.get("apiVersion") == to_api_version:
                out.append(obj)
                continue
            try:
                converted = self._convert(copy.deepcopy(obj), version)
            except (ValueError, KeyError, TypeError) as err:
                raise ConversionError(f"converting {obj.get('apiVersion')} to "
                                      f"{to_api_version}: {err}") from None
            converted["apiVersion"] = to_api_version
            converted["metadata"] = copy.deepcopy(obj.get("metadata") or {})
            out.append(converted)
        return out


@dataclasses.dataclass
class ServedResource:
    """One served version of a declared resource: what the store and endpoints are built
    from."""

    declared: Resource
    resource: ResourceDef
    layer: CustomResourceVersion


def served_resources(group: APIGroup) -> Iterator[ServedResource]:
    """Every served version of every resource of ``group``, the group's versions in kube's
    priority order (GA, beta, alpha: the first is the preferred version)."""
    by_version: dict[str, list[ServedResource]] = {}
    for declared in group.resources:
        crd = crd_of(group.name, declared)
        converter: Converter = HookConverter(declared.convert) if declared.convert \
            else NoneConverter()
        versions = served_versions(crd)
        names = functools.partial(tuple, [v.version for v in versions])
        for served in versions:
            resource = resource_of(served)
            resource = dataclasses.replace(
                resource, strategy=HookStrategy(served, declared.strategy),
                subresources=(*resource.subresources, *declared.subresources))
            layer = CustomResourceVersion(resource, served, converter,
                                          siblings=names)
            by_version.setdefault(served.version, []).append(
                ServedResource(declared, resource, layer))
    for version in sorted(by_version, key=version_rank):
        yield from by_version[version]


class AdmissionHooks:
    """The declarations' admission hooks, one plugin of the admission chain for each phase:
    ``AdmissionHooks(groups, objects, mutating=True)`` runs the mutating hooks (``mutate``),
    else the validating ones (``validate``), of the resource written."""

    def __init__(self, groups: list[APIGroup], objects: Objects, *, mutating: bool) -> None:
        self.objects = objects
        self.hooks: dict[tuple[str, str], list[Any]] = {}
        for group in groups:
            for resource in group.resources:
                hooks = resource.mutating_admission if mutating else resource.admission
                if hooks:
                    self.hooks[(group.name, resource.plural)] = list(hooks)

    @property
    def configured(self) -> bool:
        return bool(self.hooks)

    def _of(self, attrs: Attributes) -> list[Any]:
        return self.hooks.get((attrs.resource.group, attrs.resource.plural), [])

    async def validate(self, attrs: Attributes) -> None:
        for hook in self._of(attrs):
            await hook(attrs, self.objects)

    async def mutate(self, attrs: Attributes) -> Object | None:
        changed = None
        for hook in self._of(attrs):
            result = await hook(attrs, self.objects)
            if result is not None:
                attrs.obj = changed = result
        return changed
