"""Field ownership: metadata.managedFields, and server-side apply (kube's fieldmanager).

Every write records which manager set which fields. An Update (create, PUT, patch) gives its
manager the fields it changed and takes them from the others. An Apply gives its manager
exactly the fields of the applied configuration; it fails with a conflict when it would change
a field another manager owns (unless forced, which takes the field over), removes fields this
manager applied before and no longer applies (unless someone else owns them too), and merges
the rest into the object: lists of type map by their keys, sets by value, everything else as a
whole.

Field sets are kept as kube writes them (FieldsV1): ``{"f:data": {".": {}, "f:key": {}}}``.
"""

from __future__ import annotations

import builtins
import json
from functools import lru_cache
from typing import Any

from gateway.apimachinery import status
from gateway.apimachinery.clock import now_rfc3339
from gateway.apimachinery.objects import copy_object
from gateway.schema.walk import (
    is_atomic,
    is_map,
    items_schema,
    list_type,
    property_schema,
    resolve,
)

Object = dict[str, Any]
Path = tuple[str, ...]
MEMBER = object()  # a container that is owned as such: FieldsV1's "."

#: Fields nobody manages: identity and what the server sets.
IGNORED_METADATA = frozenset({"name", "namespace", "uid", "resourceVersion", "generation",
                              "creationTimestamp", "deletionTimestamp", "managedFields",
                              "selfLink", "deletionGracePeriodSeconds"})


# -- field sets -------------------------------------------------------------------------------


def _key_fields(element: Any, list_schema: dict) -> dict[str, Any]:
    """The map keys of a list element; a missing key takes its schema default (TCP for a port)."""
    if not isinstance(element, dict):
        return {}
    item = items_schema(list_schema) or {}
    fields = {}
    for key in resolve(list_schema).get("x-kubernetes-list-map-keys", []):
        if key in element:
            fields[key] = element[key]
        elif "default" in (sub := resolve(property_schema(item, key) or {})):
            fields[key] = sub["default"]
    return fields


def _key_of(element: Any, list_schema: dict) -> str:
    return "k:" + json.dumps(_key_fields(element, list_schema), separators=(",", ":"),
                             sort_keys=True)


def _is_element(element: Any, key: dict[str, Any], list_schema: dict) -> bool:
    return isinstance(element, dict) and _key_fields(element, list_schema) == key


def _value_key(value: Any) -> str:
    return "v:" + json.dumps(value, separators=(",", ":"), sort_keys=True)


def flatten(obj: Object, schema: dict, *, skip_status: bool = False) -> dict[Path, Any]:
    """Every managed path of ``obj`` and its value (MEMBER for containers owned as such)."""
    out: dict[Path, Any] = {}
    for key, value in obj.items():
        if key in ("apiVersion", "kind") or (skip_status and key == "status"):
            continue
        sub = property_schema(schema, key) or {}
        if key == "metadata" and isinstance(value, dict):
            meta = {k: v for k, v in value.items() if k not in IGNORED_METADATA}
            _flatten(meta, sub, ("f:metadata",), out, struct=True)
            continue
        _flatten_field(value, sub, ("f:" + key,), out)
    return out


def _flatten_field(value: Any, schema: dict, path: Path, out: dict[Path, Any]) -> None:
    if value is None or is_atomic(schema):
        out[path] = value
        return
    if not value:  # an empty map or list is owned as such
        out[path] = MEMBER if isinstance(value, dict | list) else value
        return
    resolved = resolve(schema)
    if resolved.get("type") == "array":
        out[path] = MEMBER
        _flatten_list(value, resolved, path, out)
    elif is_map(resolved):
        out[path] = MEMBER
        _flatten(value, resolved, path, out, struct=False)
    else:
        _flatten(value, resolved, path, out, struct=True)


def _flatten(value: dict, schema: dict, path: Path, out: dict[Path, Any], *,
             struct: bool) -> None:
    if not isinstance(value, dict):
        out[path] = value
        return
    for key, item in value.items():
        _flatten_field(item, property_schema(schema, key) or {}, (*path, "f:" + key), out)


def _flatten_list(value: list, schema: dict, path: Path, out: dict[Path, Any]) -> None:
    kind, items = list_type(schema), items_schema(schema) or {}
    for element in value:
        if kind == "set":
            out[(*path, _value_key(element))] = element
        elif isinstance(element, dict):
            element_path = (*path, _key_of(element, schema))
            out[element_path] = MEMBER
            _flatten(element, resolve(items), element_path, out, struct=True)


def fields_v1_of(obj: Object, schema: dict, *, skip_status: bool = False) -> Object:
    """``to_fields_v1(set(flatten(obj, ...)))`` built in one walk, without the paths: what a
    create's manager owns (every field of the new object)."""
    tree: Object = {}
    for key, value in obj.items():
        if key in ("apiVersion", "kind") or (skip_status and key == "status"):
            continue
        sub = property_schema(schema, key) or {}
        if key == "metadata" and isinstance(value, dict):
            meta = {k: v for k, v in value.items() if k not in IGNORED_METADATA}
            node = _map_fields(meta, sub)
            if node:
                tree["f:metadata"] = node
            continue
        tree["f:" + key] = _field_fields(value, sub)
    return _sorted_fields(tree)


def _field_fields(value: Any, schema: dict) -> Object:
    """The FieldsV1 node of one field (see _flatten_field)."""
    if value is None or is_atomic(schema) or not value:
        return {}
    resolved = resolve(schema)
    if resolved.get("type") == "array":
        return _member(_list_fields(value, resolved))
    if is_map(resolved):
        return _member(_map_fields(value, resolved))
    return _map_fields(value, resolved)


def _member(children: Object) -> Object:
    return {".": {}, **children} if children else {}


def _map_fields(value: Any, schema: dict) -> Object:
    if not isinstance(value, dict):
        return {}
    return {"f:" + key: _field_fields(item, property_schema(schema, key) or {})
            for key, item in value.items()}


def _list_fields(value: list, schema: dict) -> Object:
    kind, items = list_type(schema), items_schema(schema) or {}
    out: Object = {}
    for element in value:
        if kind == "set":
            out[_value_key(element)] = {}
        elif isinstance(element, dict):
            out[_key_of(element, schema)] = _member(_map_fields(element, resolve(items)))
    return out


def _sorted_fields(node: Object) -> Object:
    """Each level in path_order, "." first."""
    keys = [key for key in node if key != "."]
    if len(keys) > 1:
        keys.sort(key=_part_order)
    out: Object = {".": {}} if "." in node else {}
    for key in keys:
        out[key] = _sorted_fields(node[key])
    return out


def path_order(path: Path) -> tuple:
    """Paths in structured-merge-diff's order: fields, then keyed items, then set values;
    numbers compared as numbers, so port 80 comes before port 443."""
    return tuple(_part_order(part) for part in path)


@lru_cache(maxsize=4096)
def _part_order(part: str) -> tuple:
    kind, _, rest = part.partition(":")
    if kind == "f":
        return (0, rest)
    value = json.loads(rest)
    if kind == "k":
        return (1, tuple(item for name, field in sorted(value.items())
                         for item in ((2, name), _value_order(field))))
    return (2, _value_order(value))


def _value_order(value: Any) -> tuple:
    if isinstance(value, bool):
        return (1, str(value))
    if isinstance(value, int | float):
        return (0, value)
    return (2, json.dumps(value, sort_keys=True))


def to_fields_v1(paths: set[Path]) -> Object:
    """A set of paths in FieldsV1's nested form: each level in path_order, and a member that
    has children marked with "." (a leaf is {})."""
    tree: dict = {}
    for path in paths:
        node = tree
        for part in path:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            node = child
        node[_MEMBER] = True
    return _nested(tree)


#: Marks a node whose own path is in the set (None: never a FieldsV1 key).
_MEMBER = None


def _nested(node: dict) -> Object:
    out: Object = {}
    if _MEMBER in node and len(node) > 1:
        out["."] = {}
    keys = [key for key in node if key is not None]
    if len(keys) > 1:
        keys.sort(key=_part_order)
    for key in keys:
        out[key] = _nested(node[key])
    return out


def from_fields_v1(tree: Any, prefix: Path = ()) -> set[Path]:
    paths: set[Path] = set()
    if not isinstance(tree, dict):
        return paths
    for key, child in tree.items():
        if key == ".":
            paths.add(prefix)
            continue
        path = (*prefix, key)
        if not child:
            paths.add(path)
        else:
            paths |= from_fields_v1(child, path)
    return paths


# -- managedFields entries ---------------------------------------------------------------------


def _now() -> str:
    return now_rfc3339()


class Entries:
    """An object's managedFields as (manager, operation, subresource) -> (apiVersion, paths,
    time). An entry whose paths did not change keeps its FieldsV1 as it was read, so a write
    that changes no ownership does not build the trees again."""

    def __init__(self, managed: list[Object] | None, *, stored: bool = True) -> None:
        """``stored``: ``managed`` was written by this server (FieldsV1 in its order), not
        sent by a client, so unchanged trees may be kept as they are."""
        self.entries: dict[tuple[str, str, str], tuple[str, set[Path], str]] = {}
        #: The FieldsV1 each entry was read with, while its paths are unchanged.
        self._read: dict[tuple[str, str, str], Object] = {}
        for entry in managed or []:
            key = (entry.get("manager", ""), entry.get("operation", "Update"),
                   entry.get("subresource", ""))
            fields = entry.get("fieldsV1") or {}
            paths = from_fields_v1(fields)
            self.entries[key] = (entry.get("apiVersion", ""), paths, entry.get("time", ""))
            if stored and isinstance(fields, dict):
                self._read[key] = fields

    def owners(self, path: Path, *, excluding: tuple[str, str, str]) -> list[Object]:
        return [{"manager": key[0], "operation": key[1], "subresource": key[2],
                 "apiVersion": value[0]}
                for key, value in self.entries.items()
                if key != excluding and path in value[1]]

    def set(self, key: tuple[str, str, str], api_version: str, paths: set[Path]) -> None:
        current = self.entries.get(key)
        if current is None or current[1] != paths:
            self._read.pop(key, None)
        self.entries[key] = (api_version, paths, _now())

    def take(self, paths: builtins.set[Path], *, keep: tuple[str, str, str]) -> None:
        """Remove ``paths`` from every entry but ``keep``."""
        for key, (version, owned, stamp) in list(self.entries.items()):
            if key != keep and owned & paths:
                self.entries[key] = (version, owned - paths, stamp)
                self._read.pop(key, None)

    def forget(self, paths: builtins.set[Path]) -> None:
        """Fields that no longer exist are owned by nobody."""
        self.take(paths, keep=("", "", "\0"))

    def to_list(self) -> list[Object]:
        out = []
        for key, (version, paths, stamp) in self.entries.items():
            if not paths:
                continue
            manager, operation, subresource = key
            fields = self._read.get(key)
            entry: Object = {"manager": manager, "operation": operation, "apiVersion": version,
                             "time": stamp or _now(), "fieldsType": "FieldsV1",
                             "fieldsV1": fields if fields is not None else to_fields_v1(paths)}
            if subresource:
                entry["subresource"] = subresource
            out.append(entry)
        return out


# -- Update -------------------------------------------------------------------------------------


def record_update(old: Object | None, new: Object, schema: dict, *, manager: str,
                  api_version: str, subresource: str = "") -> None:
    """Give ``manager`` the fields this write changed; write new.metadata.managedFields."""
    meta = new.setdefault("metadata", {})
    given = meta.get("managedFields")
    if old is None and not given:  # a create: the manager owns every field
        _record_create(new, schema, manager, api_version, subresource)
        return
    previous = (old or {}).get("metadata", {}).get("managedFields")
    entries = Entries(previous if given is None else given, stored=given is None)
    skip_status = subresource != "status" and _has_status(schema)
    old_flat = flatten(old, schema, skip_status=skip_status) if old else {}
    new_flat = flatten(new, schema, skip_status=skip_status)
    if subresource == "status":
        old_flat = {p: v for p, v in old_flat.items() if p[0] == "f:status"}
        new_flat = {p: v for p, v in new_flat.items() if p[0] == "f:status"}
    changed = {p for p, v in new_flat.items() if p not in old_flat or old_flat[p] != v}
    entries.forget(set(old_flat) - set(new_flat))
    key = (manager, "Update", subresource)
    if changed:
        entries.take(changed, keep=key)
        owned = entries.entries.get(key, ("", set(), ""))[1]
        entries.set(key, api_version, (owned & set(new_flat)) | changed)
    meta["managedFields"] = entries.to_list()
    if not meta["managedFields"]:
        del meta["managedFields"]


def _record_create(new: Object, schema: dict, manager: str, api_version: str,
                   subresource: str) -> None:
    meta = new["metadata"]
    meta.pop("managedFields", None)
    skip_status = subresource != "status" and _has_status(schema)
    fields = fields_v1_of(new, schema, skip_status=skip_status)
    if subresource == "status":
        fields = {k: v for k, v in fields.items() if k == "f:status"}
    if not fields:
        return
    entry: Object = {"manager": manager, "operation": "Update", "apiVersion": api_version,
                     "time": _now(), "fieldsType": "FieldsV1", "fieldsV1": fields}
    if subresource:
        entry["subresource"] = subresource
    meta["managedFields"] = [entry]


def _has_status(schema: dict) -> bool:
    return property_schema(schema, "status") is not None


# -- Apply --------------------------------------------------------------------------------------


def apply(current: Object | None, applied: Object, schema: dict, *, manager: str,
          api_version: str, force: bool, subresource: str = "") -> Object:
    """The object after ``manager`` applies ``applied`` (409 on conflicts unless forced)."""
    base: Object = copy_object(current) if current is not None else {
        "apiVersion": applied.get("apiVersion"), "kind": applied.get("kind"),
        "metadata": {k: v for k, v in (applied.get("metadata") or {}).items()
                     if k in ("name", "namespace")},
    }
    entries = Entries(base.get("metadata", {}).get("managedFields"))
    key = (manager, "Apply", subresource)
    skip_status = subresource != "status" and _has_status(schema)
    applied_set = applied_fields(applied, schema, skip_status=skip_status)
    current_flat = flatten(base, schema, skip_status=skip_status) if current else {}
    changed = {p for p, v in applied_set.items()
               if p not in current_flat or current_flat[p] != v}
    if not force:
        _check_conflicts(changed, entries, key)
    previously = entries.entries.get(key, ("", set(), ""))[1]
    others = set().union(*(paths for k, (_, paths, _) in entries.entries.items() if k != key))
    result = _merge(base, applied, schema)
    _prune(result, previously - set(applied_set) - others, others, schema)
    entries.take(changed, keep=key)
    entries.set(key, api_version, set(applied_set))
    result_flat = flatten(result, schema, skip_status=skip_status)
    entries.forget(set(current_flat) - set(result_flat))
    result.setdefault("metadata", {})["managedFields"] = entries.to_list()
    return result


def applied_fields(applied: Object, schema: dict, *, skip_status: bool) -> dict[Path, Any]:
    """What an applier owns: the applied configuration's leaves and list elements.

    Unlike an update, an apply does not own the maps and lists that hold its fields (no "."
    for .data or .spec.ports), so dropping its last label does not claim the labels map.
    """
    return {path: value for path, value in flatten(applied, schema, skip_status=skip_status).items()
            if not (value is MEMBER and path[-1].startswith("f:"))}


def _prune(obj: Object, removed: set[Path], kept: set[Path], schema: dict) -> None:
    """Remove the fields an applier no longer applies that nobody else owns.

    A list element goes as a whole, unless someone else owns a field inside it; then only the
    unowned fields in it go.
    """
    elements = {p for p in removed if p[-1][:2] in ("k:", "v:")
                and not any(o[:len(p)] == p and len(o) > len(p) for o in kept)}
    for path in sorted(removed, key=len, reverse=True):
        inside_removed_element = any(path[:i] in elements for i in range(1, len(path)))
        if path in elements or not (path[-1][:2] in ("k:", "v:") or inside_removed_element):
            _remove(obj, path, schema)


def _check_conflicts(changed: set[Path], entries: Entries, key: tuple[str, str, str]) -> None:
    conflicts = [(owner, path) for path in sorted(changed, key=path_order)
                 for owner in entries.owners(path, excluding=key)]
    if conflicts:
        raise conflict_error(conflicts)


def field_path_string(path: Path) -> str:
    """A path as kube prints it in conflicts: .spec.ports[port=80,protocol="TCP"].name"""
    out = ""
    for part in path:
        kind, _, rest = part.partition(":")
        if kind == "f":
            out += "." + rest
        elif kind == "k":
            keys = json.loads(rest)
            out += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in keys.items()) + "]"
        elif kind == "v":
            out += f"[={rest}]"
    return out


def conflict_error(conflicts: list[tuple[Object, Path]]) -> status.StatusError:
    """409 as kube words it: one conflict inline, several grouped by manager."""
    if len(conflicts) == 1:
        owner, path = conflicts[0]
        message = (f"Apply failed with 1 conflict: conflict with {_manager_text(owner)}: "
                   f"{field_path_string(path)}")
    else:
        groups: dict[str, list[str]] = {}
        names: dict[str, str] = {}
        for owner, path in conflicts:
            ident = _manager_identifier(owner)
            groups.setdefault(ident, []).append(f"- {field_path_string(path)}")
            names[ident] = _manager_text(owner)
        lines = [line for ident in sorted(groups)
                 for line in (f"conflicts with {names[ident]}:", *groups[ident])]
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    causes = [status.Cause("FieldManagerConflict", f"conflict with {_manager_text(o)}",
                           field_path_string(p)) for o, p in conflicts]
    return status.StatusError(409, "Conflict", message, causes=causes)


def _manager_identifier(owner: Object) -> str:
    """The key kube sorts managers by: its JSON manager identifier."""
    ident = {"manager": owner["manager"], "operation": owner.get("operation", "Update")}
    if ident["operation"] == "Update":
        ident["apiVersion"] = owner.get("apiVersion", "")
    if owner.get("subresource"):
        ident["subresource"] = owner["subresource"]
    return json.dumps(ident, separators=(",", ":"))


def _manager_text(owner: Object) -> str:
    """A manager as kube names it: "m", "m" with subresource "status", "m" using v1."""
    text = json.dumps(owner["manager"])
    if owner.get("subresource"):
        text += f" with subresource {json.dumps(owner['subresource'])}"
    if owner.get("operation", "Update") == "Update":
        text += f" using {owner.get('apiVersion', '')}"
    return text


def _merge(current: Any, applied: Any, schema: dict) -> Any:
    """``applied`` merged into ``current`` along the schema."""
    if not isinstance(applied, dict) or not isinstance(current, dict) or is_atomic(schema):
        if isinstance(applied, list) and isinstance(current, list) and not is_atomic(schema):
            return _merge_list(current, applied, schema)
        return copy_object(applied)
    result = dict(current)
    for key, value in applied.items():
        sub = property_schema(schema, key) or {}
        if key == "metadata" and isinstance(value, dict):
            value = {k: v for k, v in value.items() if k not in ("managedFields",)}
        result[key] = _merge(current.get(key), value, sub) if key in current else \
            copy_object(value)
    return result


def _merge_list(current: list, applied: list, schema: dict) -> list:
    kind = list_type(schema)
    if kind == "set":
        return current + [v for v in applied if v not in current]
    items = items_schema(schema) or {}
    by_key = {_key_of(e, schema): i for i, e in enumerate(current) if isinstance(e, dict)}
    result = list(current)
    for element in applied:
        index = by_key.get(_key_of(element, schema))
        if index is None:
            result.append(copy_object(element))
        else:
            result[index] = _merge(result[index], element, items)
    return result


def _remove(obj: Any, path: Path, schema: dict) -> None:
    """Delete ``path`` from ``obj`` (a container only once it is empty)."""
    parent, node_schema = obj, schema
    for part in path[:-1]:
        parent, node_schema = _step(parent, part, node_schema)
        if parent is None:
            return
    last = path[-1]
    kind, _, rest = last.partition(":")
    if kind == "f" and isinstance(parent, dict) and rest in parent:
        child = parent[rest]
        container = not is_atomic(property_schema(node_schema, rest) or {})
        if not (container and isinstance(child, dict | list) and child):
            del parent[rest]
    elif kind == "k" and isinstance(parent, list):
        key = json.loads(rest)
        parent[:] = [e for e in parent if not _is_element(e, key, node_schema)]
    elif kind == "v" and isinstance(parent, list):
        value = json.loads(rest)
        parent[:] = [e for e in parent if e != value]


def _step(node: Any, part: str, schema: dict) -> tuple[Any, dict]:
    kind, _, rest = part.partition(":")
    if kind == "f" and isinstance(node, dict):
        return node.get(rest), property_schema(schema, rest) or {}
    if kind == "k" and isinstance(node, list):
        key = json.loads(rest)
        for element in node:
            if _is_element(element, key, schema):
                return element, items_schema(schema) or {}
    return None, {}
