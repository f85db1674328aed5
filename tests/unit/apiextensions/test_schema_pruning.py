"""Pruning of custom resources as kube-apiserver v1.32 does it on decoding.

Facts come from apiextensions-apiserver pkg/apiserver/schema/pruning/algorithm.go (what is
pruned, the kept TypeMeta/ObjectMeta fields), schema/options.go (how pruned paths are
written: keys joined with ".", indices as "[i]"), schema/defaulting/prunenulls.go
(non-nullable nulls without default), schema/objectmeta/{algorithm,coerce}.go (embedded
metadata read as ObjectMeta and written back), and customresource_handler.go
(unstructuredSchemaCoercer.apply: the order of the steps).
"""

from __future__ import annotations

from gateway.apiextensions.schema import prune, prune_non_nullable_nulls
from gateway.apiextensions.schema.pruning import prune_unknown


def _obj(**props: dict) -> dict:
    return {"type": "object", "properties": props}


SCHEMA = _obj(spec=_obj(
    replicas={"type": "integer"},
    items={"type": "array", "items": _obj(name={"type": "string"})},
    labels={"type": "object", "additionalProperties": _obj(v={"type": "string"})},
))


def test_unknown_fields_go_and_are_reported_sorted() -> None:
    obj = {"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "x", "junk": 1},
           "spec": {"replicas": 1, "foo": 2, "items": [{"name": "a", "bar": 3}],
                    "labels": {"a": {"v": "x", "x": 4}}},
           "status": {"ready": True}}
    assert prune(obj, SCHEMA) == ["spec.foo", "spec.items[0].bar", "spec.labels.a.x", "status"]
    assert obj == {"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "x", "junk": 1},
                   "spec": {"replicas": 1, "items": [{"name": "a"}], "labels": {"a": {"v": "x"}}}}


def test_type_and_object_meta_fields_are_pruned_below_the_root() -> None:
    obj = {"spec": {"kind": "x", "metadata": {}, "apiVersion": "v"}}
    assert prune(obj, SCHEMA) == ["spec.apiVersion", "spec.kind", "spec.metadata"]
    assert obj == {"spec": {}}


def test_not_at_the_root_meta_fields_go_silently_at_the_top() -> None:
    obj = {"kind": "K", "replicas": 1, "foo": 1}
    assert prune(obj, SCHEMA["properties"]["spec"], root=False) == ["foo"]
    assert obj == {"replicas": 1}


def test_preserve_unknown_fields_keeps_them_but_prunes_what_is_specified() -> None:
    schema = _obj(spec={"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                        "properties": {"known": _obj(a={"type": "string"})}})
    obj = {"spec": {"free": {"deep": [1, {"x": None}]}, "known": {"a": "x", "b": "y"}}}
    assert prune(obj, schema) == ["spec.known.b"]
    assert obj == {"spec": {"free": {"deep": [1, {"x": None}]}, "known": {"a": "x"}}}


def test_preserve_unknown_fields_carries_into_list_items() -> None:
    schema = _obj(list={"type": "array", "x-kubernetes-preserve-unknown-fields": True,
                        "items": _obj(a={"type": "string"})})
    obj = {"list": [{"a": "x", "b": "y"}]}
    assert prune(obj, schema) == []
    assert obj == {"list": [{"a": "x", "b": "y"}]}


def test_without_a_schema_objects_are_emptied_and_scalars_kept() -> None:
    schema = _obj(m={"type": "object", "additionalProperties": True},
                  l={"type": "array"})
    obj = {"m": {"s": "x", "o": {"a": 1}}, "l": [1, {"b": 2}]}
    assert prune(obj, schema) == ["l[1].b", "m.o.a"]
    assert obj == {"m": {"s": "x", "o": {}}, "l": [1, {}]}


def test_embedded_resources_keep_their_type_meta() -> None:
    schema = _obj(spec=_obj(template={"type": "object", "x-kubernetes-embedded-resource": True,
                                      "properties": {"spec": _obj(a={"type": "string"})}}))
    obj = {"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "other": 1,
                                 "spec": {"a": "x", "b": "y"}}}}
    assert prune(obj, schema) == ["spec.template.other", "spec.template.spec.b"]
    assert obj == {"spec": {"template": {"apiVersion": "v1", "kind": "Pod",
                                         "spec": {"a": "x"}}}}


EMBEDDED = {"type": "object", "x-kubernetes-embedded-resource": True,
            "x-kubernetes-preserve-unknown-fields": True}


def test_embedded_metadata_is_written_back_as_object_meta() -> None:
    schema = _obj(spec=_obj(templates={"type": "object", "additionalProperties": EMBEDDED}))
    obj = {"spec": {"templates": {"web": {
        "apiVersion": "v1", "kind": "Pod", "x": 1,
        "metadata": {"name": "a", "namespace": "", "labels": {}, "generation": 0,
                     "creationTimestamp": None, "foo": "bar",
                     "ownerReferences": [{"kind": "K", "zzz": 1}],
                     "deletionTimestamp": "2024-01-01T12:00:00.5+02:00"}}}}}
    # pruning's paths first, then the metadata's, each sorted (unstructuredSchemaCoercer)
    assert prune(obj, schema) == ["spec.templates[web].metadata.foo",
                                  "spec.templates[web].metadata.ownerReferences[0].zzz"]
    assert obj["spec"]["templates"]["web"] == {
        "apiVersion": "v1", "kind": "Pod", "x": 1,
        "metadata": {"name": "a", "deletionTimestamp": "2024-01-01T10:00:00Z",
                     "ownerReferences": [{"apiVersion": "", "kind": "K", "name": "",
                                          "uid": ""}]}}


def test_pruned_and_metadata_paths_come_in_two_sorted_groups() -> None:
    schema = _obj(b={"type": "object", "x-kubernetes-embedded-resource": True})
    obj = {"a": 1, "b": {"apiVersion": "v1", "kind": "K", "metadata": {"zz": 1}, "c": 2}}
    assert prune(obj, schema) == ["a", "b.c", "b.metadata.zz"]


def test_the_root_metadata_is_left_alone() -> None:
    obj = {"metadata": {"name": "x", "unknown": 1, "labels": {}}}
    assert prune(obj, _obj()) == []
    assert obj == {"metadata": {"name": "x", "unknown": 1, "labels": {}}}


def test_embedded_metadata_that_does_not_decode_stays() -> None:
    schema = _obj(t=EMBEDDED)
    obj = {"t": {"apiVersion": "v1", "kind": "K", "metadata": {"labels": "x", "foo": 1}}}
    assert prune(obj, schema) == []
    assert obj["t"]["metadata"] == {"labels": "x", "foo": 1}


def test_non_nullable_nulls_without_default_go() -> None:
    schema = _obj(a={"type": "string"}, b={"type": "string", "nullable": True},
                  c={"type": "string", "default": "x"},
                  m={"type": "object", "additionalProperties": {"type": "string"}},
                  l={"type": "array", "items": {"type": "string"}})
    obj = {"a": None, "b": None, "c": None, "m": {"k": None}, "l": [None]}
    assert prune(obj, schema) == []
    assert obj == {"b": None, "c": None, "m": {}, "l": [None]}


def test_nulls_of_unknown_schema_stay_and_the_step_can_be_skipped() -> None:
    schema = _obj(p={"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                  a={"type": "string"})
    obj = {"p": {"free": None}, "a": None}
    prune(obj, schema, nulls=False)
    assert obj == {"p": {"free": None}, "a": None}
    prune_non_nullable_nulls(obj, schema)
    assert obj == {"p": {"free": None}}


def test_prune_unknown_alone() -> None:
    obj = {"spec": {"replicas": None, "x": 1}}
    assert prune_unknown(obj, SCHEMA) == ["spec.x"]
    assert obj == {"spec": {"replicas": None}}


def test_odd_input_does_not_crash() -> None:
    assert prune("scalar", SCHEMA) == []
    obj = {"spec": [1, 2]}
    assert prune(obj, {"properties": {"spec": "nonsense"}}) == []
    assert prune({"x": 1}, None) == ["x"]  # type: ignore[arg-type]
