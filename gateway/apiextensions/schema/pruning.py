"""Pruning of what a structural schema does not specify, as kube-apiserver v1.32 prunes
custom resources when it decodes them (unstructuredSchemaCoercer.apply).

Three steps, in kube's order: unknown fields go (schema/pruning/algorithm.go), then
non-nullable nulls that have no default (schema/defaulting/prunenulls.go), then every embedded
resource's metadata is read as an ObjectMeta and written back (schema/objectmeta), which drops
its unknown and empty fields. The first and last steps report what they dropped, each list
sorted: pruned fields as dotted paths ("spec.foo", "spec.items[0].bar", map keys after a dot:
"spec.labels.a"), embedded metadata fields after the embedded object's field.Path
("spec.template.metadata.foo", "spec.templates[web].metadata.foo").
"""

from __future__ import annotations

from typing import Any

from gateway.apiextensions.schema._embedded import meta_error, walk
from gateway.apiextensions.schema._metadata import coerce_meta

__all__ = ["prune", "prune_non_nullable_nulls", "prune_unknown"]

_META_FIELDS = ("apiVersion", "kind", "metadata")
EMBEDDED = "x-kubernetes-embedded-resource"
PRESERVE = "x-kubernetes-preserve-unknown-fields"


def prune(obj: Any, schema: dict, *, root: bool = True, nulls: bool = True) -> list[str]:
    """Prune ``obj`` in place as kube does on the way in (and from storage); the paths
    dropped, for the `unknown field "<path>"` warnings or errors. ``root``: ``obj`` is a
    whole custom resource, whose apiVersion, kind and metadata stay (its metadata is ObjectMeta
    decoding's business)."""
    paths = prune_unknown(obj, schema, root=root)
    if nulls:
        prune_non_nullable_nulls(obj, schema)
    return paths + coerce_embedded_metadata(obj, schema, root=root)


def prune_unknown(obj: Any, schema: Any, *, root: bool = True) -> list[str]:
    """PruneWithOptions with unknown field paths tracked: the sorted paths removed."""
    if root:
        schema = {**schema, EMBEDDED: True} if isinstance(schema, dict) else {EMBEDDED: True}
    found: list[str] = []
    _prune(obj, schema if isinstance(schema, dict) else None, "", found)
    return sorted(found)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _drop_all(obj: dict, path: str, found: list[str]) -> None:
    found.extend(_join(path, name) for name in obj)
    obj.clear()


def _prune(value: Any, schema: dict | None, path: str, found: list[str]) -> None:
    if schema is not None and schema.get(PRESERVE) is True:
        _keep(value, schema, path, found)
    elif isinstance(value, dict):
        if schema is None:
            _drop_all(value, path, found)
            return
        properties, additional = _children(schema)
        for name in list(value):
            if schema.get(EMBEDDED) is True and name in _META_FIELDS:
                continue
            if name in properties:
                _prune(value[name], _schema(properties[name]), _join(path, name), found)
            elif additional is not None:
                _prune(value[name], _schema(additional), _join(path, name), found)
            else:
                if name not in _META_FIELDS or path:
                    found.append(_join(path, name))
                del value[name]
    elif isinstance(value, list):
        items = _schema(schema.get("items")) if schema is not None else None
        for i, item in enumerate(value):
            _prune(item, items, f"{path}[{i}]", found)


def _keep(value: Any, schema: dict, path: str, found: list[str]) -> None:
    """skipPrune: under x-kubernetes-preserve-unknown-fields unknown fields stay, but what
    the schema specifies is pruned as usual."""
    if isinstance(value, dict):
        properties, additional = _children(schema)
        for name in value:
            if schema.get(EMBEDDED) is True and name in _META_FIELDS:
                continue
            if name in properties:
                _prune(value[name], _schema(properties[name]), _join(path, name), found)
            elif additional is not None:
                _prune(value[name], _schema(additional), _join(path, name), found)
    elif isinstance(value, list):
        items = _schema(schema.get("items"))
        if items is not None:
            for i, item in enumerate(value):
                _keep(item, items, f"{path}[{i}]", found)


def _schema(value: Any) -> dict | None:
    """A sub-schema, or None where the structural schema has none (additionalProperties
    given as a boolean)."""
    return value if isinstance(value, dict) else None


def _children(schema: dict) -> tuple[dict, Any]:
    properties = schema.get("properties")
    return (properties if isinstance(properties, dict) else {},
            schema.get("additionalProperties"))


# -- non-nullable nulls ------------------------------------------------------------------------


def _field_schema(schema: dict | None, name: str) -> dict | None:
    if schema is None:
        return None
    properties, additional = _children(schema)
    if name in properties:
        return _schema(properties[name])
    return _schema(additional)


def _droppable_null(value: Any, schema: dict | None) -> bool:
    return value is None and schema is not None and schema.get("nullable") is not True \
        and schema.get("default") is None


def prune_non_nullable_nulls(obj: Any, schema: Any) -> None:
    """PruneNonNullableNullsWithoutDefaults: a null map value whose schema neither allows
    null nor has a default goes (one with a default is defaulting's). List items stay."""
    schema = _schema(schema)
    if isinstance(obj, dict):
        for name in list(obj):
            sub = _field_schema(schema, name)
            if _droppable_null(obj[name], sub):
                del obj[name]
            else:
                prune_non_nullable_nulls(obj[name], sub)
    elif isinstance(obj, list):
        items = _schema(schema.get("items")) if schema is not None else None
        for item in obj:
            prune_non_nullable_nulls(item, items)


# -- embedded metadata -------------------------------------------------------------------------


def coerce_embedded_metadata(obj: Any, schema: Any, *, root: bool = True) -> list[str]:
    """CoerceWithOptions: each embedded resource's metadata round-tripped through ObjectMeta;
    the sorted paths of the unknown fields it lost. Metadata that does not decode stays as it
    is (kube fails the request; validation reports it)."""
    found: list[str] = []
    for path, resource in walk(schema, obj, ""):
        if (root and not path) or not isinstance(resource.get("metadata"), dict):
            continue
        if meta_error(resource["metadata"]) is None:
            meta_path = f"{path}.metadata" if path else "metadata"
            found += coerce_meta(resource["metadata"], meta_path)
    return sorted(found)
