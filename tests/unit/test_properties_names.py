"""Properties of object name validation (issue 19, item 4: hostile input): the DNS-1123
label and subdomain validators, and label keys and values, agree with kube's regular
expressions and byte-length limits (k8s.io/apimachinery/pkg/util/validation), written here
again as the reference, on any text."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.apimachinery.labels import label_value_errors, qualified_name_errors
from gateway.registry.validation import (
    dns1035_label_errors,
    dns1123_label_errors,
    dns1123_subdomain_errors,
    path_segment_causes,
)

PROPERTY = settings(max_examples=300, derandomize=True, database=None, deadline=None)

# kube's expressions, anchored as Go's MatchString of "^...$" is (no newline before the end)
LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
QUALIFIED = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def go_len(text: str) -> int:
    """Go's len(string): bytes of UTF-8."""
    return len(text.encode("utf-8", "surrogatepass"))


#: Text near names (what they are made of, long runs, a trailing newline) and any text.
NAMEISH = st.one_of(
    st.text(alphabet="abz09-.", max_size=70),
    st.text(alphabet="a.-", min_size=60, max_size=260),
    st.text(alphabet="abZ9-._/é\n", max_size=80),
    st.text(alphabet="aé", min_size=32, max_size=63),  # longer in bytes than in characters
    st.text(alphabet="a.é", min_size=127, max_size=253),
    # lone surrogates: JSON's \ud800 escapes decode to them (Go keeps U+FFFD instead)
    st.text(alphabet=st.sampled_from("ab\ud800\udfff"), max_size=10),
    st.from_regex(SUBDOMAIN, fullmatch=True).map(lambda name: name + "\n"),
    st.text(max_size=70))


@PROPERTY
@given(NAMEISH)
def test_dns1123_label(name: str) -> None:
    errors = dns1123_label_errors(name)
    assert (errors == []) == bool(LABEL.fullmatch(name) and go_len(name) <= 63), errors
    assert any("no more than 63" in e for e in errors) == (go_len(name) > 63)


@PROPERTY
@given(NAMEISH)
def test_dns1035_label(name: str) -> None:
    errors = dns1035_label_errors(name)
    assert (errors == []) == bool(DNS1035.fullmatch(name) and go_len(name) <= 63), errors
    assert any("no more than 63" in e for e in errors) == (go_len(name) > 63)


@PROPERTY
@given(NAMEISH)
def test_dns1123_subdomain(name: str) -> None:
    errors = dns1123_subdomain_errors(name)
    assert (errors == []) == bool(SUBDOMAIN.fullmatch(name) and go_len(name) <= 253), errors
    assert any("no more than 253" in e for e in errors) == (go_len(name) > 253)


@PROPERTY
@given(NAMEISH)
def test_path_segment_names(name: str) -> None:
    """Names of kinds that only need to be usable in a path (RBAC's)."""
    good = name not in (".", "..") and "/" not in name and "%" not in name
    assert (path_segment_causes(name) == []) == good


@PROPERTY
@given(st.one_of(NAMEISH, st.builds(lambda p, n: f"{p}/{n}", NAMEISH, NAMEISH)))
def test_label_keys(key: str) -> None:
    """[prefix/]name: a DNS-1123 subdomain prefix of at most 253 bytes, a name of at most 63
    that is a qualified name."""
    prefix, _, name = key.rpartition("/") if key.count("/") == 1 else ("", "", key)
    good = key.count("/") <= 1 and bool(QUALIFIED.fullmatch(name)) and go_len(name) <= 63 and (
        "/" not in key or (prefix != "" and bool(SUBDOMAIN.fullmatch(prefix))
                           and go_len(prefix) <= 253))
    assert (qualified_name_errors(key) == []) == good, (key, qualified_name_errors(key))


@PROPERTY
@given(NAMEISH)
def test_label_values(value: str) -> None:
    good = value == "" or (bool(QUALIFIED.fullmatch(value)) and go_len(value) <= 63)
    assert (label_value_errors(value) == []) == good, (value, label_value_errors(value))
