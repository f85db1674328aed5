"""The per-version serving layer between a client and the stored objects of a resource.

A resource is stored once, at its storage version, and may be served at several versions
(custom resources). What a served version does to an object lives here, apart from the store
(kube's per-version codecs, decoding checks, defaulting and pruning):

- ``decode``: a request body's own checks before anything else looks at it: fields the version
  does not know (dropped, with a warning or a 400 under fieldValidation=Strict), wrong types
  (400), nulls;
- ``own_fields``: the fields the write's manager set, recorded in managedFields along the
  version's schema and under its apiVersion;
- ``to_storage`` / ``from_storage``: conversion to and from the storage version. Objects read
  from storage may be shared (the watch cache hands the same dict to every reader): a layer
  that changes something copies first and never writes into what it was given. A layer whose
  conversion calls out (a CRD's conversion webhook) is ``remote``: the store then awaits
  ``to_storage_async`` and ``from_storage_many`` (a list converted in one call), and watches
  convert each event before it is encoded.

``BuiltinVersion`` is the layer of a built-in resource: one version, the stored one, checked
against its OpenAPI definition by the generic walker; conversion is the identity.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from gateway.apimachinery import status
from gateway.apimachinery.gowords import go_quote
from gateway.apimachinery.objects import drop_nulls
from gateway.apimachinery.strictjson import Findings
from gateway.registry import fieldmanager
from gateway.registry.admission import SubresourceView
from gateway.registry.resource import ResourceDef
from gateway.schema.walk import check

Object = dict[str, Any]


class VersionLayer:
    """The identity layer: nothing checked, nothing converted."""

    #: from_storage and to_storage give back what they are given (the store skips them).
    identity: bool = True
    #: Conversion calls out: only the async methods may be used.
    remote: bool = False
    #: ``from_storage`` may change labels (kube defaults some on every decode): selectors
    #: must see the object as read, not as stored.
    labels_on_read: bool = False
    #: Bodies decode into a Go struct (a built-in kind), not an unstructured map: duplicate
    #: objects merge, and strict errors are told in document order.
    typed: bool = False

    def __init__(self, resource: ResourceDef) -> None:
        self.resource = resource

    def decode(self, obj: Object, field_validation: str, warnings: list[str], *,
               defaults: bool = True) -> None:
        """Check a request body of this version in place (400 on what cannot be decoded);
        ``defaults`` False leaves the schema's defaults out (an apply configuration: what the
        server defaults is not the applier's to own)."""

    def to_storage(self, obj: Object) -> Object:
        return obj

    def from_storage(self, obj: Object) -> Object:
        return obj

    def own_fields(self, old: Object | None, new: Object, manager: str,
                   subresource: str) -> None:
        """Record in ``new``'s managedFields what the write's manager set, along this
        version's schema and under its apiVersion."""
        resource = self.resource
        fieldmanager.record_update(old, new, resource.schema_ref, manager=manager,
                                   api_version=resource.api_version, subresource=subresource)

    async def to_storage_async(self, obj: Object) -> Object:
        return self.to_storage(obj)

    async def from_storage_many(self, objs: list[Object]) -> list[Object]:
        return [self.from_storage(obj) for obj in objs]

    # -- what admission sees ------------------------------------------------------------------

    def subresource_view(self, subresource: str) -> SubresourceView | None:
        """How admission sees ``subresource`` when its object is not the resource's own."""
        return None

    def equivalent_versions(self) -> tuple[str, ...]:
        """The other versions the same objects are served at (for matchPolicy Equivalent)."""
        return ()

    async def convert(self, obj: Object, api_version: str) -> Object:
        """``obj`` (of this resource, at any served version) at ``api_version``."""
        return obj


class StrictDecodingError(status.StatusError):
    """Strict decoding errors under fieldValidation=Strict (kube's strictDecodingError). A
    create or an update names the kind it could not decode (kube's transformDecodeError); a
    JSON, merge or strategic merge patch makes it a 422 about the patch."""

    def __init__(self, message: str) -> None:
        super().__init__(400, "BadRequest", message)

    def for_kind(self, kind: str, version: str) -> status.StatusError:
        return status.bad_request(f'{kind} in version "{version}" cannot be handled as a '
                                  f"{kind}: {self.message}")

    def for_patch(self, value: str) -> status.StatusError:
        """kube's NewInvalid for the field "patch" with ``value`` (the patched object's JSON,
        or the strategic merge patch as Go prints its map)."""
        return status.invalid("", "", [status.Cause(
            "FieldValueInvalid", f"Invalid value: {go_quote(value)}: {self.message}", "patch")])


#: What strict decoding found in the body of the write being served (duplicate fields, a
#: JSON patch's unknown fields), for the version layer to report with its unknown fields.
_FINDINGS: ContextVar[Findings | None] = ContextVar("strict_findings", default=None)


@contextmanager
def reporting(findings: Findings) -> Iterator[None]:
    """Have the decoding checks of the write served in this block report ``findings``."""
    if not findings:
        yield
        return
    token = _FINDINGS.set(findings)
    try:
        yield
    finally:
        _FINDINGS.reset(token)


def unknown_fields(paths: list[str], field_validation: str, warnings: list[str], *,
                   typed: bool = False) -> None:
    """Fields a version does not know, with what strict decoding found in the body, as kube
    reports them: a 400 under Strict, warnings under Warn (the default), nothing under
    Ignore. ``typed``: the body was decoded into a Go struct (document order)."""
    findings = _FINDINGS.get()
    if field_validation == "Ignore" or not (paths or findings):
        return
    if findings:
        messages = findings.ordered(paths, typed=typed)
    else:
        messages = [f"unknown field {go_quote(path)}" for path in paths]
    if field_validation == "Strict":
        raise StrictDecodingError("strict decoding error: " + ", ".join(messages))
    for message in messages:
        if message not in warnings:  # kube's warning recorder keeps each text once
            warnings.append(message)


class BuiltinVersion(VersionLayer):
    """A built-in resource: Go's decoding of its known type, as the generic walker mimics it
    (nulls dropped, unknown fields reported, type errors refused)."""

    typed = True

    def decode(self, obj: Object, field_validation: str, warnings: list[str], *,
               defaults: bool = True) -> None:
        drop_nulls(obj)
        resource = self.resource
        result = check(obj, resource.schema_ref)
        if result.errors:
            raise status.bad_request(
                f'{resource.kind} in version "{resource.version}" cannot be handled as a '
                f"{resource.kind}: {'; '.join(result.errors)}")
        unknown_fields(result.unknown, field_validation, warnings, typed=True)
