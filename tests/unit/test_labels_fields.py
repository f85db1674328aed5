"""Label and field selectors follow k8s.io/apimachinery's labels.Parse and fields.ParseSelector."""

from __future__ import annotations

import pytest

from gateway.apimachinery.fields import FieldSelector, object_meta_fields, parse_field_selector
from gateway.apimachinery.labels import (
    EXISTS,
    GT,
    IN,
    LT,
    NOT_EXISTS,
    NOT_IN,
    LabelSelector,
    Requirement,
    SelectorError,
    from_label_selector,
    parse_label_selector,
)

# -- label selectors: parsing ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("app=web", [Requirement("app", IN, ("web",))]),
        ("app==web", [Requirement("app", IN, ("web",))]),
        ("app!=web", [Requirement("app", NOT_IN, ("web",))]),
        ("env in (prod,stage)", [Requirement("env", IN, ("prod", "stage"))]),
        ("env notin (prod)", [Requirement("env", NOT_IN, ("prod",))]),
        ("canary", [Requirement("canary", EXISTS)]),
        ("!legacy", [Requirement("legacy", NOT_EXISTS)]),
        ("replicas>2", [Requirement("replicas", GT, ("2",))]),
        ("replicas<10", [Requirement("replicas", LT, ("10",))]),
        ("app=", [Requirement("app", IN, ("",))]),
        ("app==", [Requirement("app", IN, ("",))]),
        ("app!=", [Requirement("app", NOT_IN, ("",))]),
        ("app=,tier=db", [Requirement("app", IN, ("",)), Requirement("tier", IN, ("db",))]),
        ("example.com/app=web", [Requirement("example.com/app", IN, ("web",))]),
        ("a.b-c_d=A.b-C_9", [Requirement("a.b-c_d", IN, ("A.b-C_9",))]),
        # "in" and "notin" are only keywords in the operator position
        ("in=notin", [Requirement("in", IN, ("notin",))]),
        ("x in (in,notin)", [Requirement("x", IN, ("in", "notin"))]),
    ],
)
def test_parse_label_selector(text: str, expected: list[Requirement]) -> None:
    assert parse_label_selector(text).requirements == tuple(expected)


@pytest.mark.parametrize("text", ["", " ", "\t \n"])
def test_empty_label_selector_selects_everything(text: str) -> None:
    selector = parse_label_selector(text)
    assert selector.empty
    assert selector.matches({})
    assert selector.matches({"any": "thing"})
    assert selector.matches(None)


def test_label_selector_whitespace_is_ignored() -> None:
    spaced = parse_label_selector("  app = web ,  env  in  ( prod , stage ) , ! legacy , x >  3 ")
    tight = parse_label_selector("app=web,env in (prod,stage),!legacy,x>3")
    assert spaced == tight
    assert spaced.requirements == (
        Requirement("app", IN, ("web",)),
        Requirement("env", IN, ("prod", "stage")),
        Requirement("legacy", NOT_EXISTS),
        Requirement("x", GT, ("3",)),
    )


def test_label_selector_tabs_and_newlines_are_whitespace() -> None:
    assert parse_label_selector("a=b,\tc\n!=\r d").requirements == (
        Requirement("a", IN, ("b",)),
        Requirement("c", NOT_IN, ("d",)),
    )


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("x in ()", ("",)),
        ("x in (,a)", ("", "a")),
        ("x in (a)", ("a",)),
        ("x notin ()", ("",)),
    ],
)
def test_label_selector_empty_values_in_sets(text: str, values: tuple[str, ...]) -> None:
    (req,) = parse_label_selector(text).requirements
    assert set(req.values) == set(values)


@pytest.mark.parametrize(
    ("text", "values"),
    [
        # kube's parseIdentifiersList inserts "" for a trailing ",)" and for ",,"
        ("x in (a,)", {"a", ""}),
        ("x in (a,,b)", {"a", "", "b"}),
    ],
)
def test_label_selector_empty_value_from_dangling_comma_in_set(text: str,
                                                               values: set[str]) -> None:
    (req,) = parse_label_selector(text).requirements
    assert set(req.values) == values
    assert req.matches({"x": ""})


@pytest.mark.parametrize(
    "text",
    [
        "app=web,",  # trailing comma
        "app=web, ",
        ",app=web",  # leading comma
        "app=web,,tier=db",
        "x in (a",  # unterminated set
        "x in a",  # no parenthesis
        "x in (a)(",
        "x notin",
        "x in",
        "x (a)",  # no operator
        "x y",  # an identifier where the operator belongs
        "x !y",
        "x=a=b",
        "x=a b",
        "x=(a)",
        "x==,",
        "!x=y",  # !key takes no value
        "!",
        "!,",
        "=a",
        "x>",  # Gt needs an integer
        "x>a",
        "x<1.5",
        "x>+5",
        "x in (a,=)",
        "x in (a b)",  # kube: found 'b', expected: ',' or ')'
    ],
)
def test_label_selector_syntax_errors(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_label_selector(text)


@pytest.mark.parametrize(
    ("text", "invalid"),
    [
        # keys: kube's parser reports them with a nil field path
        ("-app=web", "<nil>: Invalid value: \"-app\""),  # name must start alphanumeric
        ("app-=web", "<nil>: Invalid value: \"app-\""),
        ("a" * 64 + "=x", f"<nil>: Invalid value: \"{'a' * 64}\""),  # name longer than 63
        ("Example.com/app=x", "<nil>: Invalid value: \"Example.com/app\""),  # lowercase DNS
        ("/app=x", "<nil>: Invalid value: \"/app\""),  # empty prefix
        ("example.com/=x", "<nil>: Invalid value: \"example.com/\""),  # empty name
        ("a/b/c=x", "<nil>: Invalid value: \"a/b/c\""),
        ("a_/b=x", "<nil>: Invalid value: \"a_/b\""),
        ("!-bad", "<nil>: Invalid value: \"-bad\""),
        ("-bad", "<nil>: Invalid value: \"-bad\""),
        ("bad- in (a)", "<nil>: Invalid value: \"bad-\""),
        ("x.", "<nil>: Invalid value: \"x.\""),
        # values must start and end with an alphanumeric, 63 characters at most
        ("app=-web", "values[0][app]: Invalid value: \"-web\""),
        ("app=web-", "values[0][app]: Invalid value: \"web-\""),
        ("app=" + "v" * 64, f"values[0][app]: Invalid value: \"{'v' * 64}\""),
        ("app!=.x", "values[0][app]: Invalid value: \".x\""),
        ("app in (ok,-bad)", "values[0][app]: Invalid value: \"-bad\""),
        ("app notin (bad_)", "values[0][app]: Invalid value: \"bad_\""),
        ("app=a/b", "values[0][app]: Invalid value: \"a/b\""),
    ],
)
def test_label_selector_invalid_keys_and_values(text: str, invalid: str) -> None:
    with pytest.raises(SelectorError) as err:
        parse_label_selector(text)
    assert str(err.value).startswith(f"unable to parse requirement: {invalid}: "), err.value


def test_label_selector_key_limits() -> None:
    name = "a" * 63
    prefix = ".".join(["b" * 63] * 3) + "." + "c" * 61  # 253 characters
    assert len(prefix) == 253
    assert parse_label_selector(f"{name}=x").requirements[0].key == name
    assert parse_label_selector(f"{prefix}/{name}").requirements[0].key == f"{prefix}/{name}"
    with pytest.raises(SelectorError):
        parse_label_selector(f"{prefix}c/{name}")  # prefix of 254 characters


def test_label_selector_value_limit() -> None:
    assert parse_label_selector("app=" + "v" * 63).requirements[0].values == ("v" * 63,)


@pytest.mark.parametrize("text", ["x>-1", "x<-5"])
def test_label_selector_gt_lt_value_must_be_a_valid_label_value(text: str) -> None:
    # kube's NewRequirement validates every value as a label value, Gt and Lt included;
    # "-1" does not start with an alphanumeric character.
    with pytest.raises(SelectorError, match=r'^unable to parse requirement: values\[0\]\[x\]: '
                                            r'Invalid value: "-\d": a valid label must be'):
        parse_label_selector(text)


def test_label_selector_gt_value_must_fit_int64() -> None:
    # strconv.ParseInt(v, 10, 64) fails on overflow
    with pytest.raises(SelectorError) as err:
        parse_label_selector("x>99999999999999999999")
    assert str(err.value) == (
        'unable to parse requirement: values[0]: Invalid value: "99999999999999999999": '
        "for 'Gt', 'Lt' operators, the value must be an integer")


def test_selector_error_is_a_value_error() -> None:
    assert issubclass(SelectorError, ValueError)


# -- label selectors: matching --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        ("app=web", {"app": "web"}, True),
        ("app=web", {"app": "db"}, False),
        ("app=web", {}, False),
        ("app==web", {"app": "web", "x": "y"}, True),
        ("app!=web", {"app": "web"}, False),
        ("app!=web", {"app": "db"}, True),
        ("app!=web", {}, True),  # a missing key is "not equal"
        ("app=", {"app": ""}, True),
        ("app=", {}, False),
        ("app=", {"app": "x"}, False),
        ("app!=", {}, True),
        ("app!=", {"app": ""}, False),
        ("env in (prod,stage)", {"env": "stage"}, True),
        ("env in (prod,stage)", {"env": "dev"}, False),
        ("env in (prod,stage)", {}, False),
        ("env notin (prod,stage)", {"env": "prod"}, False),
        ("env notin (prod,stage)", {"env": "dev"}, True),
        ("env notin (prod,stage)", {}, True),
        ("x in ()", {"x": ""}, True),
        ("x in ()", {"x": "a"}, False),
        ("canary", {"canary": ""}, True),
        ("canary", {"canary": "yes"}, True),
        ("canary", {}, False),
        ("!canary", {}, True),
        ("!canary", {"canary": ""}, False),
        ("replicas>2", {"replicas": "3"}, True),
        ("replicas>2", {"replicas": "2"}, False),
        ("replicas>2", {"replicas": "-7"}, False),
        ("replicas>2", {}, False),
        ("replicas>2", {"replicas": "many"}, False),
        ("replicas<2", {"replicas": "1"}, True),
        ("replicas<2", {"replicas": "2"}, False),
        ("replicas<2", {"replicas": "-1"}, True),
        ("replicas<2", {}, False),
        ("replicas<2", {"replicas": "1.5"}, False),
        ("replicas>0", {"replicas": "007"}, True),
        ("app=web,tier!=db", {"app": "web", "tier": "cache"}, True),
        ("app=web,tier!=db", {"app": "web", "tier": "db"}, False),
        ("app=web,!legacy,env in (a,b)", {"app": "web", "env": "b"}, True),
        ("app=web,!legacy,env in (a,b)", {"app": "web", "env": "b", "legacy": "1"}, False),
    ],
)
def test_label_selector_matches(text: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_label_selector(text).matches(labels) is expected


@pytest.mark.parametrize(("value", "expected"), [("50", True), ("5_0", False)])
def test_label_selector_gt_compares_only_go_integers(value: str, expected: bool) -> None:
    # strconv.ParseInt(v, 10, 64) takes an optional sign and decimal digits only, while
    # Python's int() also takes underscores. "5_0" is a valid label value; kube does not
    # treat it as 50, so replicas>3 does not match it.
    assert parse_label_selector("replicas>3").matches({"replicas": value}) is expected


def test_requirement_matches_truth_table() -> None:
    labels = {"a": "1"}
    assert Requirement("a", EXISTS).matches(labels)
    assert not Requirement("b", EXISTS).matches(labels)
    assert Requirement("b", NOT_EXISTS).matches(labels)
    assert not Requirement("a", NOT_EXISTS).matches(labels)
    assert Requirement("a", IN, ("0", "1")).matches(labels)
    assert not Requirement("a", NOT_IN, ("0", "1")).matches(labels)
    assert Requirement("a", GT, ("0",)).matches(labels)
    assert not Requirement("a", LT, ("1",)).matches(labels)


def test_label_selector_none_labels_are_empty() -> None:
    assert parse_label_selector("!x").matches(None)
    assert not parse_label_selector("x").matches(None)


# -- metav1.LabelSelector objects -----------------------------------------------------------------


def test_from_label_selector() -> None:
    selector = from_label_selector({
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "env", "operator": "In", "values": ["prod", "stage"]},
            {"key": "tier", "operator": "NotIn", "values": ["db"]},
            {"key": "canary", "operator": "Exists"},
            {"key": "legacy", "operator": "DoesNotExist"},
        ],
    })
    assert isinstance(selector, LabelSelector)
    assert selector.matches({"app": "web", "env": "prod", "canary": ""})
    assert not selector.matches({"app": "web", "env": "prod"})
    assert not selector.matches({"app": "web", "env": "prod", "canary": "", "tier": "db"})
    assert not selector.matches({"app": "web", "env": "dev", "canary": ""})
    assert not selector.matches({"app": "web", "env": "prod", "canary": "", "legacy": "y"})


def test_from_label_selector_empty_matches_everything() -> None:
    for empty in (None, {}, {"matchLabels": {}, "matchExpressions": []}):
        selector = from_label_selector(empty)
        assert selector is not None
        assert selector.empty
        assert selector.matches({"a": "b"})


def test_from_label_selector_unknown_operator_is_none() -> None:
    assert from_label_selector({"matchExpressions": [{"key": "a", "operator": "Gt"}]}) is None


# -- field selectors ------------------------------------------------------------------------------

META = frozenset({"metadata.name", "metadata.namespace"})
SECRET = META | {"type"}


def test_parse_field_selector_terms() -> None:
    selector = parse_field_selector("metadata.name=a,metadata.namespace!=b,type==c", SECRET)
    assert [(t.field, t.value, t.negated) for t in selector.terms] == [
        ("metadata.name", "a", False),
        ("metadata.namespace", "b", True),
        ("type", "c", False),
    ]
    assert not selector.empty


@pytest.mark.parametrize("text", ["", ","])
def test_empty_field_selector(text: str) -> None:
    selector = parse_field_selector(text, META)
    assert selector.empty
    assert selector.matches({"metadata.name": "x"})
    assert selector.exact_value("metadata.name") is None


def test_field_selector_skips_empty_terms() -> None:
    selector = parse_field_selector("metadata.name=a,,metadata.namespace=b,", META)
    assert [(t.field, t.value) for t in selector.terms] == [
        ("metadata.name", "a"), ("metadata.namespace", "b")]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (r"metadata.name=a\,b", "a,b"),
        (r"metadata.name=a\=b", "a=b"),
        (r"metadata.name=a\\b", "a\\b"),
        (r"metadata.name=\\", "\\"),
        (r"metadata.name=\,\=\\", ",=\\"),
        ("metadata.name=", ""),
        ("metadata.name==x", "x"),  # "==" is checked before "="
        ("metadata.name==\\=x", "=x"),
        ("metadata.name=a!b", "a!b"),
    ],
)
def test_field_selector_values_and_escapes(text: str, value: str) -> None:
    (term,) = parse_field_selector(text, META).terms
    assert term.field == "metadata.name"
    assert term.value == value
    assert not term.negated


def test_field_selector_escaped_comma_does_not_split() -> None:
    # the "=" must be escaped too: UnescapeValue refuses a bare "=" in a value
    selector = parse_field_selector(r"metadata.name=a\,metadata.namespace\=b", META)
    assert len(selector.terms) == 1
    assert selector.terms[0].value == "a,metadata.namespace=b"


def test_field_selector_not_equal() -> None:
    (term,) = parse_field_selector(r"metadata.name!=a\,b", META).terms
    assert (term.field, term.value, term.negated) == ("metadata.name", "a,b", True)


@pytest.mark.parametrize(
    "text",
    [
        r"metadata.name=a\b",  # unknown escape
        r"metadata.name=a\n",
        r"metadata.name=\x",
    ],
)
def test_field_selector_invalid_escapes(text: str) -> None:
    with pytest.raises(SelectorError, match="invalid field selector"):
        parse_field_selector(text, META)


def test_field_selector_trailing_backslash_is_an_error() -> None:
    # kube's UnescapeValue: "Ending with a single backslash is an invalid sequence"
    with pytest.raises(SelectorError):
        parse_field_selector("metadata.name=a\\", META)


@pytest.mark.parametrize("text", ["metadata.name=a=b", "metadata.name==a=b", "type!=a=b"])
def test_field_selector_unescaped_equals_in_value_is_an_error(text: str) -> None:
    # kube's UnescapeValue: "unescaped character in value" for a bare '=' (or ',')
    with pytest.raises(SelectorError):
        parse_field_selector(text, SECRET)


# " " too: fields.ParseSelector trims nothing, and " " is a term without an operator
@pytest.mark.parametrize("text", ["metadata.name", "bogus", "metadata.name!x", " "])
def test_field_selector_term_without_operator(text: str) -> None:
    with pytest.raises(SelectorError, match="invalid selector"):
        parse_field_selector(text, META)


def test_field_selector_term_without_operator_message() -> None:
    # kube: fmt.Errorf("invalid selector: '%s'; can't understand '%s'", selector, part)
    with pytest.raises(SelectorError) as err:
        parse_field_selector("metadata.name=a,bogus", META)
    assert str(err.value) == "invalid selector: 'metadata.name=a,bogus'; can't understand 'bogus'"


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("spec.nodeName=n", "spec.nodeName"),
        ("type=Opaque", "type"),
        ("metadata.name=a,status.phase!=Running", "status.phase"),
        ("=x", ""),
    ],
)
def test_field_selector_unsupported_field(text: str, field: str) -> None:
    with pytest.raises(SelectorError) as err:
        parse_field_selector(text, META)
    assert str(err.value) == f"field label not supported: {field}"


def test_field_selector_whitespace_is_not_trimmed() -> None:
    # kube's fields.ParseSelector does not trim: the field is "metadata.name ", which no
    # resource supports.
    with pytest.raises(SelectorError, match="field label not supported"):
        parse_field_selector("metadata.name = x", META)


def test_field_selector_matches() -> None:
    selector = parse_field_selector("metadata.name=a,type!=kubernetes.io/tls", SECRET)
    assert selector.matches({"metadata.name": "a", "type": "Opaque"})
    assert not selector.matches({"metadata.name": "a", "type": "kubernetes.io/tls"})
    assert not selector.matches({"metadata.name": "b", "type": "Opaque"})
    # a missing field is the empty string
    assert parse_field_selector("type=", SECRET).matches({"metadata.name": "a"})
    assert parse_field_selector("type!=x", SECRET).matches({})
    assert not parse_field_selector("type!=", SECRET).matches({"type": ""})


def test_field_selector_matches_escaped_values() -> None:
    selector = parse_field_selector(r"metadata.name=a\,b\=c\\d", META)
    assert selector.matches({"metadata.name": "a,b=c\\d"})
    assert not selector.matches({"metadata.name": r"a\,b\=c\\d"})


def test_field_selector_exact_value() -> None:
    selector = parse_field_selector("metadata.namespace!=x,metadata.name==web", META)
    assert selector.exact_value("metadata.name") == "web"
    assert selector.exact_value("metadata.namespace") is None  # negated: not pinned
    assert selector.exact_value("type") is None
    assert parse_field_selector("metadata.name=", META).exact_value("metadata.name") == ""
    assert FieldSelector(()).exact_value("metadata.name") is None


def test_object_meta_fields() -> None:
    obj = {"metadata": {"name": "a", "namespace": "ns"}}
    assert object_meta_fields(obj, True) == {"metadata.name": "a", "metadata.namespace": "ns"}
    assert object_meta_fields(obj, False) == {"metadata.name": "a"}
    assert object_meta_fields({}, True) == {"metadata.name": "", "metadata.namespace": ""}


def test_default_field_label_conversion() -> None:
    # kinds without a conversion of their own (configmaps): metadata.name and
    # metadata.namespace, whatever the scope, and DefaultMetaV1FieldSelectorConversion's words
    selector = parse_field_selector("metadata.namespace=x", frozenset({"metadata.name"}),
                                    own_conversion=False)
    assert [t.field for t in selector.terms] == ["metadata.namespace"]
    with pytest.raises(SelectorError) as err:
        parse_field_selector("type=x", META, own_conversion=False)
    assert str(err.value) == ('"type" is not a known field selector: only "metadata.name", '
                              '"metadata.namespace"')
