"""A resource described by data: what the generic REST store and the handlers need to serve it.

Built-in groups declare their resources with this; CRDs will build the same description at run
time, so both travel the very same REST and storage path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from gateway.registry.strategy import Strategy
from gateway.registry.tables import DEFAULT_COLUMNS, Column

OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class Subresource:
    """What a subresource is, wherever it is served."""

    verbs: tuple[str, ...]
    #: (group, version, kind) it reads and writes when that is not the resource's own kind.
    kind: tuple[str, str, str] | None = None


#: Every subresource the gateway serves, described once (discovery, OpenAPI, routing).
SUBRESOURCES: dict[str, Subresource] = {
    "status": Subresource(("get", "patch", "update")),
    "finalize": Subresource(("update",)),
    "scale": Subresource(("get", "patch", "update"), ("autoscaling", "v1", "Scale")),
    "token": Subresource(("create",), ("authentication.k8s.io", "v1", "TokenRequest")),
}


@dataclass(frozen=True)
class ResourceDef:
    group: str
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    strategy: Strategy = field(default_factory=Strategy)
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    #: kubectl's columns (kube's printers); NAME and AGE by default.
    columns: tuple[Column, ...] = DEFAULT_COLUMNS
    #: The OpenAPI definition of the kind, e.g. io.k8s.api.core.v1.ConfigMap.
    schema: str = ""
    #: Subresources served besides the object itself ("status", "finalize", ...).
    subresources: tuple[str, ...] = ()
    #: The list's kind when it is not ``<kind>List`` (a CRD may name it).
    list_kind_name: str = ""
    #: The patch types a PATCH may use, when not every one (custom resources have no
    #: strategic merge patch); others are refused with 415 naming these.
    patch_types: tuple[str, ...] = ()
    #: Request bodies may be protobuf (custom resources have no protobuf form: 415).
    protobuf: bool = True
    #: Its field selectors are converted by a conversion of its own (custom resources: only
    #: its selectable fields, "field label not supported" for others).
    own_field_labels: bool = False
    #: The version objects are stored at, when not this one (a CRD's storage version).
    storage_version: str = ""
    #: The kind's OpenAPI v3 schema when it is not in the process-wide table of definitions
    #: (a custom resource: its CRD version's openAPIV3Schema), published under ``schema``.
    definition: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    #: Whether the OpenAPI documents publish ``definition``; False publishes a bare object
    #: (a CRD schema kube does not publish: a type it does not know, or not structural).
    publish_definition: bool = True

    @property
    def api_version(self) -> str:
        """``v1`` for the core group, ``<group>/<version>`` otherwise."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def subresource_kind(self, name: str) -> tuple[str, str, str]:
        """(group, version, kind) the subresource ``name`` speaks."""
        sub = SUBRESOURCES.get(name)
        if sub is not None and sub.kind is not None:
            return sub.kind
        return self.group, self.version, self.kind

    @property
    def list_kind(self) -> str:
        return self.list_kind_name or f"{self.kind}List"

    @property
    def storage_prefix(self) -> str:
        """Keys live under ``/<group>/<resource>/``; the core group is spelled ``core``."""
        return f"/{self.group or 'core'}/{self.plural}/"

    @cached_property
    def schema_ref(self) -> dict:
        """The kind's schema for field checks, patches and field ownership: its own
        definition (a custom resource's, with ObjectMeta for its metadata), or a reference
        into the table of definitions."""
        if self.definition is not None:
            properties = {**(self.definition.get("properties") or {}),
                          "metadata": {"$ref": OBJECT_META}}
            return {**self.definition, "properties": properties}
        return {"$ref": self.schema} if self.schema else {}

    @property
    def selectable_fields(self) -> frozenset[str]:
        base = {"metadata.name", "metadata.namespace"} if self.namespaced else {"metadata.name"}
        return frozenset(base | set(self.strategy.selectable_fields))

    def key(self, namespace: str, name: str) -> str:
        if self.namespaced:
            return f"{self.storage_prefix}{namespace}/{name}"
        return f"{self.storage_prefix}{name}"

    def list_prefix(self, namespace: str) -> str:
        """All objects of the resource, or of one namespace."""
        if self.namespaced and namespace:
            return f"{self.storage_prefix}{namespace}/"
        return self.storage_prefix
