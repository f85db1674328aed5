"""Labels, annotations and finalizers checked on every object, with ValidateObjectMeta's words."""

from __future__ import annotations

from gateway.registry.validation import object_meta_causes

QUALIFIED = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
             "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
             "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")


def test_good_metadata_has_no_causes() -> None:
    assert object_meta_causes({
        "labels": {"app": "web", "example.com/tier": "", "a.b": "x_y-z.1"},
        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}",
                        "Mixed.Case/Key": "anything at all"},
        "finalizers": ["kubernetes", "example.com/cleanup"],
    }) == []


def test_bad_label_key_and_value() -> None:
    causes = object_meta_causes({"labels": {"bad key!": "x", "ok": "-bad-"}})
    assert [(c.reason, c.field) for c in causes] == [
        ("FieldValueInvalid", "metadata.labels"), ("FieldValueInvalid", "metadata.labels")]
    assert causes[0].message == f'Invalid value: "bad key!": {QUALIFIED}'
    assert causes[1].message.startswith('Invalid value: "-bad-": a valid label must be an empty '
                                        "string or consist of alphanumeric characters")


def test_label_value_too_long() -> None:
    (cause,) = object_meta_causes({"labels": {"k": "v" * 64}})
    assert cause.message.endswith(": must be no more than 63 characters")


def test_bad_annotation_key_and_total_size() -> None:
    (cause,) = object_meta_causes({"annotations": {"a/b/c": "x"}})
    assert (cause.reason, cause.field) == ("FieldValueInvalid", "metadata.annotations")
    assert cause.message.startswith('Invalid value: "a/b/c": a qualified name must consist of')
    (too_big,) = object_meta_causes({"annotations": {"big": "x" * (256 * 1024)}})
    assert (too_big.reason, too_big.message) == (
        "FieldValueTooLong", "Too long: may not be more than 262144 bytes")


def test_bad_finalizer() -> None:
    (cause,) = object_meta_causes({"finalizers": ["not valid"]})
    assert cause.field == "metadata.finalizers"
    assert cause.message == f'Invalid value: "not valid": {QUALIFIED}'
