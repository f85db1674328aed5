"""Declaring an API: a group, its resources and their versions, as data, with hooks.

A resource is declared as a CustomResourceDefinition says it (kind, plural, scope, an
OpenAPI v3 schema per version, short names, categories, printer columns, a status
subresource), plus what a CRD cannot say, in Python: a strategy (defaults, validation,
preparing creates and updates), conversion between versions, admission, and subresources
of one's own. ``gateway.extension.resources`` turns these into what the gateway's CRDs are
served by, so they get the same schema validation, pruning, defaulting, status split, Table,
discovery and OpenAPI.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.apimachinery.requestinfo import RequestInfo
from gateway.apimachinery.status import Cause
from gateway.registry.admission import Attributes

Object = dict[str, Any]


class Strategy:
    """What a resource does beyond its schema, as kube's REST strategies: every hook gets the
    object at the version the client wrote it in (``obj["apiVersion"]`` says which). The
    defaults do nothing; override what you need."""

    def prepare_for_create(self, obj: Object) -> None:
        """Set defaults, clear what a client may not set. (status is already cleared when the
        resource has a status subresource.)"""

    def prepare_for_update(self, new: Object, old: Object) -> None:
        """Carry over what an update may not change."""

    def validate(self, obj: Object) -> list[Cause]:
        """What makes ``obj`` invalid (422), beyond its schema."""
        return []

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        """What makes an update invalid; by default the create rules."""
        return self.validate(new)


#: ``convert(obj, to_version)``: a copy of ``obj`` (at any served version of the resource)
#: made into ``to_version`` (e.g. "v1beta1"); apiVersion is set afterwards. Raise ValueError
#: with why when it cannot be converted.
Convert = Callable[[Object, str], Object]


class Objects:
    """What an admission hook may read of the server's resources: their current objects at
    the storage version, from the watch caches (as a Go admission plugin reads a lister)."""

    def __init__(self, read: Callable[[str], list[Object]]) -> None:
        self._read = read

    def list(self, plural: str) -> list[Object]:
        return self._read(plural)


#: An admission hook: return to admit, raise a StatusError (e.g. ``forbidden(attrs, why)``)
#: to refuse. ``attrs.operation`` is CREATE, UPDATE or DELETE; ``attrs.user`` who asks.
Admit = Callable[[Attributes, Objects], Awaitable[None]]
#: A mutating admission hook: the object as it is to be written (``attrs.obj`` changed, or a
#: new one), or None to leave it; raising refuses the write. The result is validated again.
Mutate = Callable[[Attributes, Objects], Awaitable["Object | None"]]

#: A subresource of one's own: given the request and what it asks for (``info.name``,
#: ``info.namespace``, ``info.verb``) and the resource's REST store; returns the response.
SubresourceHandler = Callable[[Any, RequestInfo, Any], Awaitable[Any]]


@dataclass(frozen=True)
class Version:
    """One version of a resource."""

    name: str
    #: The OpenAPI v3 schema of the kind (a CRD version's openAPIV3Schema).
    schema: Object
    served: bool = True
    #: Objects are stored at this version (exactly one version of a resource is).
    storage: bool = False
    #: kubectl's columns, as a CRD's additionalPrinterColumns ({name, type, jsonPath,
    #: priority, description, format}); priority 1 shows with ``-o wide`` only.
    printer_columns: Sequence[Object] = ()
    #: Field paths (".spec.color") field selectors may use besides metadata.name/namespace.
    selectable_fields: Sequence[str] = ()


@dataclass(frozen=True)
class Subresource:
    """A subresource served by a handler of one's own (``status`` is built in): every method
    on ``.../<plural>/<name>/<subresource>`` goes to ``handler``, authorized first as kube
    authorizes it (the request's verb on ``<plural>/<subresource>``); discovery lists it
    (with the verb ``get``), OpenAPI does not describe it."""

    handler: SubresourceHandler


@dataclass(frozen=True)
class Resource:
    kind: str
    plural: str
    versions: Sequence[Version]
    singular: str = ""
    namespaced: bool = True
    short_names: Sequence[str] = ()
    categories: Sequence[str] = ()
    #: A status subresource: status is written through /status only, and not by the object.
    status: bool = False
    strategy: Strategy = field(default_factory=Strategy)
    #: Between versions; without it only apiVersion changes (a CRD's ``None`` strategy).
    convert: Convert | None = None
    #: Run on every write of this resource, after the strategy, in order: the mutating
    #: hooks first (kube's mutating admission), then the validating ones.
    mutating_admission: Sequence[Mutate] = ()
    admission: Sequence[Admit] = ()
    subresources: Mapping[str, Subresource] = field(default_factory=dict)

    @property
    def singular_name(self) -> str:
        return self.singular or self.kind.lower()

    @property
    def storage_version(self) -> str:
        stored = [v.name for v in self.versions if v.storage]
        if len(stored) != 1:
            raise ValueError(f"{self.plural}: exactly one version must be the storage "
                             f"version ({len(stored)} are)")
        return stored[0]


@dataclass(frozen=True)
class APIGroup:
    """An API group and its resources (e.g. wardle.example.com: flunders, fischers)."""

    name: str
    resources: Sequence[Resource]
