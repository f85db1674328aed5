"""Properties of the label and field selector parsers and of the list options they are read
with (issue 19, item 4: hostile input). Any text is either a selector or a SelectorError (a
400), never another exception; a selector written out as kube writes it (String()) parses back
to itself; and the list and watch options of any query are options or a 4xx Status."""

from __future__ import annotations

import string

from aiohttp.test_utils import make_mocked_request
from hypothesis import given, settings
from hypothesis import strategies as st
from multidict import MultiDict
from yarl import URL

from gateway.apimachinery import status
from gateway.apimachinery.fields import FieldSelector, FieldTerm, parse_field_selector
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
    parse_label_selector,
)
from gateway.apimachinery.listoptions import ListOptions, resource_version_error
from gateway.endpoints.listoptions import parse_list_options

#: Derandomized: the same examples on every run (CI stays reproducible), a few hundred each.
PROPERTY = settings(max_examples=300, derandomize=True, database=None, deadline=None)

#: Text made mostly of what selectors are made of, so that parses get deep, and anything else.
SELECTOR_CHARACTERS = "abz09-_./=!(),<> \t\\" + "éπ\0\n"
selector_text = st.one_of(st.text(alphabet=SELECTOR_CHARACTERS, max_size=40), st.text(max_size=40))

# -- label selectors ------------------------------------------------------------------------------

name_part = st.from_regex(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,20}[A-Za-z0-9])?", fullmatch=True)
prefix = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,8}[a-z0-9])?(\.[a-z0-9]{1,5}){0,2}",
                       fullmatch=True)
label_key = st.one_of(name_part, st.builds(lambda p, n: f"{p}/{n}", prefix, name_part))
label_value = st.one_of(st.just(""), name_part)
#: Gt and Lt take integers that are label values too (no sign)
integer = st.integers(0, 2**63 - 1).map(str)


@st.composite
def requirements(draw: st.DrawFn) -> Requirement:
    key = draw(label_key)
    operator = draw(st.sampled_from((EXISTS, NOT_EXISTS, IN, NOT_IN, GT, LT)))
    if operator in (EXISTS, NOT_EXISTS):
        return Requirement(key, operator)
    if operator in (GT, LT):
        return Requirement(key, operator, (draw(integer),))
    values = draw(st.lists(label_value, min_size=1, max_size=4, unique=True))
    return Requirement(key, operator, tuple(sorted(values)))


def test_requirements_are_written_as_kube_writes_them() -> None:
    """The rendering the round trips rely on, spelled out once."""
    selector = parse_label_selector("a=b,!c,d,e notin (y,x),f>3,g<01,h in (),i==")
    assert str(selector) == "a in (b),!c,d,e notin (x,y),f>3,g<01,h in (),i in ()"
    assert str(parse_field_selector(r"b!=x\,y,a==1\=2\\")) == r"a=1\=2\\,b!=x\,y"


@PROPERTY
@given(selector_text)
def test_any_text_is_a_label_selector_or_a_selector_error(text: str) -> None:
    try:
        selector = parse_label_selector(text)
    except SelectorError as err:
        assert str(err)
        return
    assert isinstance(selector, LabelSelector)
    # what parsed once parses again from its written form, to the same selector
    assert parse_label_selector(str(selector)) == selector


@PROPERTY
@given(st.lists(requirements(), max_size=5, unique_by=lambda r: r.key))
def test_a_label_selector_written_out_parses_back(chosen: list[Requirement]) -> None:
    selector = LabelSelector(tuple(sorted(chosen, key=lambda r: r.key)))
    assert parse_label_selector(str(selector)) == selector


@PROPERTY
@given(st.lists(requirements(), min_size=1, max_size=4, unique_by=lambda r: r.key),
       st.dictionaries(label_key, label_value, max_size=4))
def test_a_parsed_selector_matches_as_its_requirements_do(
        chosen: list[Requirement], labels: dict[str, str]) -> None:
    parsed = parse_label_selector(",".join(str(r) for r in chosen))
    assert parsed.matches(labels) == all(r.matches(labels) for r in chosen)


# -- field selectors ------------------------------------------------------------------------------

field_name = st.text(alphabet=string.ascii_letters + string.digits + "._-", min_size=1,
                     max_size=20)
field_value = st.text(alphabet="ab1 -.,=\\é", max_size=10)


@PROPERTY
@given(selector_text)
def test_any_text_is_a_field_selector_or_a_selector_error(text: str) -> None:
    try:
        selector = parse_field_selector(text)
    except SelectorError as err:
        assert str(err)
        return
    assert isinstance(selector, FieldSelector)
    again = parse_field_selector(str(selector))
    assert sorted(again.terms, key=repr) == sorted(selector.terms, key=repr)


@PROPERTY
@given(st.lists(st.builds(FieldTerm, field_name, field_value, st.booleans()), max_size=5))
def test_a_field_selector_written_out_parses_back(terms: list[FieldTerm]) -> None:
    """Values with ',', '=' and '\\' in them are escaped on the way out and back in."""
    selector = FieldSelector(tuple(terms))
    again = parse_field_selector(str(selector))
    assert sorted(again.terms, key=repr) == sorted(terms, key=repr)


# -- list and watch options -----------------------------------------------------------------------

query_value = st.one_of(selector_text, integer, st.sampled_from(
    ("", "0", "1", "-1", "true", "false", "NotOlderThan", "Exact", "x", "9" * 30)))
list_query = st.dictionaries(
    st.sampled_from(("labelSelector", "fieldSelector", "resourceVersion", "resourceVersionMatch",
                     "limit", "continue", "timeoutSeconds", "allowWatchBookmarks",
                     "sendInitialEvents")), query_value, max_size=5)


@PROPERTY
@given(list_query, st.booleans())
def test_any_list_or_watch_query_is_options_or_a_4xx_status(
        query: dict[str, str], watch: bool) -> None:
    request = make_mocked_request("GET", str(URL("/api/v1/configmaps").with_query(
        MultiDict(query))))
    try:
        options = parse_list_options(request, frozenset({"metadata.name"}), watch=watch)
    except status.StatusError as err:
        assert 400 <= err.code < 500, err
        assert err.reason in ("BadRequest", "Invalid"), err
        return
    assert isinstance(options, ListOptions)
    assert options.limit >= 0


@PROPERTY
@given(st.one_of(integer, st.text(max_size=25), st.integers(0, 2**70).map(str)))
def test_a_resource_version_is_a_revision_or_kubes_error(rv: str) -> None:
    """strconv.ParseUint's rule: ASCII digits only, below 2**64; "" and "0" mean any."""
    error = resource_version_error(rv)
    good = rv in ("", "0") or (rv.isascii() and rv.isdigit() and int(rv) < 2**64)
    assert (error == "") == good, (rv, error)
    if good and rv not in ("", "0"):
        assert ListOptions(resource_version=rv).revision == int(rv)
