"""Duplicate fields in a request body, as kube's strict decoding names them, and the object Go's
decoders make of such a body.

kube decodes a JSON body with sigs.k8s.io/json (``duplicate field "data"``, ``unknown field
"spec.x"``: the path of the field, keys joined with '.', list items as ``[i]``), and a YAML
body twice: go-yaml in strict mode for the duplicates (``yaml: unmarshal errors:`` then one
``line N: key "data" already set in map`` a duplicate), then the JSON it converts to. A
duplicated key keeps its last value, except that Go's decoder, filling a typed (built-in)
object, decodes the second object into the first: the two objects merge.

orjson parses every body and keeps the last of two equal keys without a word, so looking for
duplicates must cost nothing on the common path: ``may_have_duplicates`` compares the ':' of
the raw body with those of the parsed object serialized again (one per key, plus those inside
strings: equal exactly when no key repeats; a body with an escaped ':' takes the slow path).
Only a body that may have duplicates is parsed a second time, key by key (``json_pairs``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import yaml
from orjson import dumps

from gateway.apimachinery.gowords import go_quote, without_lone_surrogates


def may_have_duplicates(body: bytes, obj: Any) -> bool:
    """False when ``body``, which parsed as ``obj``, certainly repeats no key (two C calls)."""
    if b"\\" in body and b"\\u003" in body:  # an escaped ':' would unbalance the count
        return True
    try:
        return dumps(obj).count(b":") != body.count(b":")
    except (TypeError, ValueError):  # what orjson does not write (integers past 64 bits)
        return True


@dataclass
class Findings:
    """What strict decoding found in a body, before the version layer adds its unknown
    fields: ``leading`` errors (kube reports them first), and, for a JSON body decoded into a
    typed object, the duplicates with the place of each key in the document, so that they
    are told in document order among the unknown fields, as kube's one pass tells them."""

    leading: list[str] = field(default_factory=list)
    #: (place, path) of each duplicated key, at its second occurrence.
    duplicates: list[tuple[int, str]] = field(default_factory=list)
    #: The place of the first occurrence of each key's path.
    places: dict[str, int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.leading or self.duplicates)

    def ordered(self, unknown: list[str], *, typed: bool) -> list[str]:
        """Every strict error with ``unknown`` (paths the version did not know), as kube
        lists them: for a typed object, in document order, without the duplicates inside an
        unknown field (Go skips its value); otherwise the duplicates first."""
        messages = list(self.leading)
        if not typed:
            messages += [f"duplicate field {go_quote(p)}" for _, p in self.duplicates]
            return messages + [f"unknown field {go_quote(p)}" for p in unknown]
        skipped = tuple(unknown)
        told = [(place, f"duplicate field {go_quote(path)}") for place, path in self.duplicates
                if not _under(path, skipped)]
        told += [(self.places.get(path, 1 << 62), f"unknown field {go_quote(path)}")
                 for path in unknown]
        told.sort(key=lambda item: item[0])  # stable: the walker's order among equals
        return messages + [message for _, message in told]


def _under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith((r + ".", r + "[")) for r in roots)


class _Pairs(list):
    """An object's members as json.loads found them, repeats included."""


def json_pairs(body: bytes, *, merge: bool) -> tuple[Any, Findings]:
    """Parse ``body`` (known to be JSON) key by key: the object Go's decoder makes of it (the
    last of two equal keys wins; ``merge``: objects under equal keys merge, as a typed decode
    does) and its duplicate keys."""
    raw = json.loads(body.decode("utf-8", "replace"), object_pairs_hook=_Pairs)
    findings = Findings()
    counter = [0]
    seen: set[str] = set()

    def build(value: Any, path: str) -> Any:
        if isinstance(value, _Pairs):
            out: dict[str, Any] = {}
            for key, item in value:
                sub = f"{path}.{key}" if path else key
                counter[0] += 1
                findings.places.setdefault(sub, counter[0])
                if key in out:
                    if sub not in seen:
                        seen.add(sub)
                        findings.duplicates.append((counter[0], sub))
                    new = build(item, sub)
                    out[key] = _merged(out[key], new) if merge else new
                else:
                    out[key] = build(item, sub)
            return out
        if isinstance(value, list):
            return [build(item, f"{path}[{i}]") for i, item in enumerate(value)]
        return value

    return build(raw, ""), findings


def _merged(old: Any, new: Any) -> Any:
    """A second object decoded into the first, as Go's decoder fills an existing struct or
    map: the keys of both, the second's values winning (objects merging again)."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return new
    out = dict(old)
    for key, value in new.items():
        out[key] = _merged(out[key], value) if key in out else value
    return out


def json_patch_findings(body: bytes, operations: Any) -> Findings:
    """kube's strict decoding of a JSON patch into its list of operations (op, path, from,
    value): unknown and duplicate fields of each operation, and duplicates inside a value,
    in document order, each told as "json patch <error>"."""
    if not isinstance(operations, list) or not all(isinstance(o, dict) for o in operations):
        return Findings()
    if not may_have_duplicates(body, operations) and all(
            _OP_FIELDS.issuperset(op) for op in operations):
        return Findings()
    raw = json.loads(body.decode("utf-8", "replace"), object_pairs_hook=_Pairs)
    messages: list[str] = []

    def tell(message: str) -> None:
        if message not in messages:  # kube keeps each error once
            messages.append(message)

    def duplicates(value: Any, path: str) -> None:
        if isinstance(value, _Pairs):
            keys: set[str] = set()
            for key, item in value:
                sub = f"{path}.{key}"
                if key in keys:
                    tell(f"duplicate field {go_quote(sub)}")
                keys.add(key)
                duplicates(item, sub)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                duplicates(item, f"{path}[{i}]")

    for index, operation in enumerate(raw):
        keys = set()
        for key, item in operation:
            path = f"[{index}].{key}"
            if key not in _OP_FIELDS:
                tell(f"unknown field {go_quote(path)}")
                continue
            if key in keys:
                tell(f"duplicate field {go_quote(path)}")
            keys.add(key)
            if key == "value":
                duplicates(item, path)
    return Findings(leading=[f"json patch {m}" for m in messages])


_OP_FIELDS = frozenset({"op", "path", "from", "value"})


# -- YAML ---------------------------------------------------------------------------------------


def yaml_load(body: bytes, *, strict: bool) -> tuple[Any, str]:
    """A YAML document (the last of two equal keys wins, as go-yaml converts it to JSON) and,
    when ``strict``, go-yaml's strict error for its duplicate keys ("" when none)."""
    loader = yaml.SafeLoader(body)
    try:
        node = loader.get_single_node()
        problems = _yaml_duplicates(loader, node) if strict and node is not None else []
        obj = loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()
    obj = without_lone_surrogates(obj)  # a "\ud800" escape, as go-yaml reads it
    if not problems:
        return obj, ""
    return obj, "yaml: unmarshal errors:\n  " + "\n  ".join(problems)


def _yaml_duplicates(loader: yaml.SafeLoader, node: yaml.Node) -> list[str]:
    """go-yaml's "line N: key K already set in map" for each repeated key, in the order it
    finds them: a value's own problems before its key's (N is the line of the value)."""
    problems: list[str] = []

    def visit(current: yaml.Node, depth: int) -> None:
        if depth > 1000:
            return
        if isinstance(current, yaml.SequenceNode):
            for item in current.value:
                visit(item, depth + 1)
        elif isinstance(current, yaml.MappingNode):
            keys: list[Any] = []
            for key_node, value_node in current.value:
                visit(value_node, depth + 1)
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                try:
                    key = loader.construct_object(key_node, deep=True)
                except yaml.YAMLError:
                    continue
                if _hashable(key) and any(_same_key(key, k) for k in keys):
                    problems.append(f"line {value_node.start_mark.line + 1}: key "
                                    f"{_go_value(key)} already set in map")
                keys.append(key)

    visit(node, 0)
    return problems


def _hashable(key: Any) -> bool:
    return isinstance(key, str | int | float | bool) or key is None


def _same_key(a: Any, b: Any) -> bool:
    """Equal as Go's interface{} map keys: same type and value (1 and true differ)."""
    return type(a) is type(b) and a == b


def _go_value(key: Any) -> str:
    """Go's %#v of a decoded YAML key."""
    if isinstance(key, str):
        return go_quote(key)
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "interface {}(nil)"
    return str(key)
