"""Objects as a meta.k8s.io/v1 Table, or as PartialObjectMetadata(List)."""

from __future__ import annotations

from typing import Any

from gateway.apimachinery import status
from gateway.registry.tables import Column

Object = dict[str, Any]
META_V1 = "meta.k8s.io/v1"
INCLUDE_OBJECT = ("None", "Metadata", "Object")


def include_object_option(value: str | None) -> str:
    if not value:
        return "Metadata"
    if value not in INCLUDE_OBJECT:
        raise status.bad_request(f'unrecognized includeObject value: "{value}"')
    return value


def partial_metadata(obj: Object, version: str = "v1") -> Object:
    return {"kind": "PartialObjectMetadata", "apiVersion": f"meta.k8s.io/{version}",
            "metadata": obj.get("metadata", {})}


def partial_metadata_list(items: list[Object], list_meta: Object,
                          version: str = "v1") -> Object:
    return {"kind": "PartialObjectMetadataList", "apiVersion": f"meta.k8s.io/{version}",
            "metadata": list_meta, "items": [partial_metadata(o, version) for o in items]}


def table(columns: tuple[Column, ...], items: list[Object], list_meta: Object,
          include_object: str, *, headers: bool = True, version: str = "v1") -> Object:
    """A Table of ``items``; ``headers`` False omits the column definitions (watch events
    after the first)."""
    rows = []
    for obj in items:
        row: Object = {"cells": [column.cell(obj) for column in columns]}
        if include_object == "Object":
            row["object"] = obj
        elif include_object == "Metadata":
            row["object"] = partial_metadata(obj, version)
        rows.append(row)
    out: Object = {"kind": "Table", "apiVersion": f"meta.k8s.io/{version}", "metadata": list_meta}
    if headers:
        out["columnDefinitions"] = [column.definition() for column in columns]
    out["rows"] = rows
    return out
