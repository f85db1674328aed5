"""Lists and watches over HTTP, with kube-apiserver's resourceVersion rules; conformance checks
in our own words from the Kubernetes e2e suite's chunking.go and watch.go."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

import pytest

from tests.support.api import CM, ROOT_CA, configmap, expect_status, rv
from tests.support.gateway import GatewayProcess

pytestmark = pytest.mark.slow


def names(items: list[dict]) -> list[str]:
    return [o["metadata"]["name"] for o in items]


def passed_on(message: str) -> dict[str, Any]:
    """The Status kube makes of an error that is not one (ErrorToAPIStatus): 500, no reason,
    no details."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "code": 500}


# -- lists ------------------------------------------------------------------------------------


def test_chunking_keeps_one_revision_and_counts_what_remains(api, ns):
    path = CM.format(ns=ns)
    for i in range(400):
        assert api.post(path, configmap(f"c-{i:03d}"))[0] == 201
    seen, token, revision, pages = [], "", None, 0
    while True:
        query = "?limit=17" + (f"&continue={quote(token)}" if token else "")
        code, page = api.get(path + query)
        assert code == 200
        assert len(page["items"]) <= 17
        revision = revision or page["metadata"]["resourceVersion"]
        assert page["metadata"]["resourceVersion"] == revision
        seen += names(page["items"])
        token = page["metadata"].get("continue", "")
        pages += 1
        if not token:
            assert "remainingItemCount" not in page["metadata"]
            break
        # 400 and the root CA every namespace holds
        assert page["metadata"]["remainingItemCount"] == 401 - len(seen)
        if pages == 3:  # writes while paging do not show up in the pinned snapshot
            assert api.post(path, configmap("zzz-late"))[0] == 201
    assert seen == [f"c-{i:03d}" for i in range(400)] + [ROOT_CA]
    assert pages == 24


def test_resource_version_rules(api, ns):
    path = CM.format(ns=ns)
    code, first = api.post(path, configmap("a", v="1"))
    assert code == 201, first
    first["data"]["v"] = "2"
    assert api.put(f"{path}/a", first)[0] == 200
    _, now = api.get(path)
    assert now["items"][0]["data"] == {"v": "2"}
    # "0": any state the cache has
    assert api.get(f"{path}?resourceVersion=0")[0] == 200
    # N with a limit and no match: exactly the state at N
    code, exact = api.get(f"{path}?resourceVersion={rv(first)}&limit=10")
    assert code == 200 and exact["items"][0]["data"] == {"v": "1"}
    assert exact["metadata"]["resourceVersion"] == str(rv(first))
    code, exact = api.get(f"{path}?resourceVersion={rv(first)}&resourceVersionMatch=Exact")
    assert code == 200 and exact["items"][0]["data"] == {"v": "1"}
    # NotOlderThan: at least as new as N
    code, newer = api.get(f"{path}?resourceVersion={rv(first)}"
                          "&resourceVersionMatch=NotOlderThan")
    assert code == 200 and newer["items"][0]["data"] == {"v": "2"}


def test_a_resource_version_from_the_future_times_out(api, ns):
    path = CM.format(ns=ns)
    code, made = api.post(path, configmap("f"))
    assert code == 201, made
    future = rv(made) + 100000
    # storage.NewTooLargeResourceVersionError: errors.NewTimeoutError's "Timeout: " prefix,
    # retry after 1 s, and the ResourceVersionTooLarge cause
    too_large = [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]
    started = time.monotonic()
    status = expect_status(api.get(f"{path}?resourceVersion={future}"
                                   "&resourceVersionMatch=NotOlderThan"), 504, "Timeout",
                           causes=too_large)
    # a lower bound only: the cache was given its time to catch up before the answer
    assert time.monotonic() - started >= 2.5, "it waited for the cache first"
    current = int(status["message"].rpartition(" ")[2])
    assert current >= rv(made)
    assert status["message"] == (f"Timeout: Too large resource version: {future}, "
                                 f"current: {current}")
    assert status["details"] == {"retryAfterSeconds": 1, "causes": too_large}
    # an exact list (a limit, no match) is answered from the store at once, as refused
    status = expect_status(api.get(f"{path}?resourceVersion={future}&limit=5"), 504, "Timeout",
                           causes=too_large)
    current = int(status["message"].rpartition(" ")[2])
    assert status["message"] == (f"Timeout: Too large resource version: {future}, "
                                 f"current: {current}")


LIST_OPTIONS = 'ListOptions.meta.k8s.io "" is invalid: '


#: field.NotSupported of ValidateListOptions for an unknown resourceVersionMatch
UNSUPPORTED_MATCH = ('Unsupported value: "Sometimes": supported values: "Exact", '
                     '"NotOlderThan", ""')


@pytest.mark.parametrize(
    ("query", "causes"),
    [
        # ValidateListOptions: every problem at once, in its order
        ("?resourceVersionMatch=Exact",
         [("resourceVersionMatch", "FieldValueForbidden", "Forbidden: resourceVersionMatch is "
           "forbidden unless resourceVersion is provided")]),
        ("?resourceVersion=0&resourceVersionMatch=Exact",
         [("resourceVersionMatch", "FieldValueForbidden", 'Forbidden: resourceVersionMatch '
           '"exact" is forbidden for resourceVersion "0"')]),
        ("?resourceVersion=5&resourceVersionMatch=Sometimes",
         [("resourceVersionMatch", "FieldValueNotSupported", UNSUPPORTED_MATCH)]),
        ("?resourceVersionMatch=Sometimes",
         [("resourceVersionMatch", "FieldValueForbidden", "Forbidden: resourceVersionMatch is "
           "forbidden unless resourceVersion is provided"),
          ("resourceVersionMatch", "FieldValueNotSupported", UNSUPPORTED_MATCH)]),
        ("?sendInitialEvents=true",
         [("sendInitialEvents", "FieldValueForbidden",
           "Forbidden: sendInitialEvents is forbidden for list")]),
        ("?watch=1&sendInitialEvents=true",
         [("resourceVersionMatch", "FieldValueForbidden", "Forbidden: sendInitialEvents "
           "requires setting resourceVersionMatch to NotOlderThan")]),
    ],
)
def test_invalid_list_options(api, ns, query, causes):
    errors = [f"{field}: {message}" for field, _, message in causes]
    summary = errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]"
    status = expect_status(api.get(CM.format(ns=ns) + query), 422, "Invalid",
                           message=f"{LIST_OPTIONS}{summary}",
                           causes=[{"reason": reason, "message": message, "field": field}
                                   for field, reason, message in causes])
    assert (status["details"]["group"], status["details"]["kind"]) == ("meta.k8s.io",
                                                                       "ListOptions")


@pytest.mark.parametrize(
    ("query", "message"),
    [
        # storage.DecodeContinue's errors, the Go decoders' words at the end
        ("?continue=not-a-token", "invalid continue token: continue key is not valid: invalid "
                                  "character '\\u009e' looking for beginning of value"),
        ("?continue=a%21b", "invalid continue token: continue key is not valid: illegal base64 "
                            "data at input byte 1"),
        # the parameter codec's strconv.ParseInt errors, as they come
        ("?limit=99999999999999999999",
         'strconv.ParseInt: parsing "99999999999999999999": value out of range'),
        ("?limit=1_000", 'strconv.ParseInt: parsing "1_000": invalid syntax'),
        ("?limit=", 'strconv.ParseInt: parsing "": invalid syntax'),
        ("?timeoutSeconds=x", 'strconv.ParseInt: parsing "x": invalid syntax'),
        # configmaps have no field label conversion of their own: the default one answers
        ("?fieldSelector=spec.nothing%3Dx",
         '"spec.nothing" is not a known field selector: only "metadata.name", '
         '"metadata.namespace"'),
        # the etcd3 store refuses a resourceVersion that is no revision (an exact list)
        ("?resourceVersion=abc&limit=5", 'invalid resource version: resourceVersion: Invalid '
                                         'value: "abc": strconv.ParseUint: parsing "abc": '
                                         "invalid syntax"),
    ],
)
def test_bad_list_options(api, ns, query, message):
    expect_status(api.get(CM.format(ns=ns) + query), 400, "BadRequest", message=message)


@pytest.mark.parametrize(
    ("query", "value", "problem"),
    [
        ("?resourceVersion=abc", "abc", "invalid syntax"),
        ("?resourceVersion=99999999999999999999", "99999999999999999999", "value out of range"),
        ("?watch=1&resourceVersion=abc", "abc", "invalid syntax"),
        ("/one?resourceVersion=abc", "abc", "invalid syntax"),
    ],
)
def test_a_resource_version_that_is_no_revision(api, ns, query, value, problem):
    # the watch cache's versioner refuses it with a storage error kube does not translate:
    # ErrorToAPIStatus makes a 500 of it, without reason or details
    assert api.post(CM.format(ns=ns), configmap("one"))[0] == 201
    assert api.get(CM.format(ns=ns) + query) == (500, passed_on(
        f'resourceVersion: Invalid value: "{value}": strconv.ParseUint: parsing "{value}": '
        f"{problem}"))


def test_bad_list_options_with_kubes_own_words(api, ns):
    path = CM.format(ns=ns)
    unsupported = ('Unsupported value: "Sometimes": supported values: "Exact", "NotOlderThan", '
                   '""')
    expect_status(api.get(f"{path}?resourceVersion=5&resourceVersionMatch=Sometimes"),
                  422, "Invalid", message=f"{LIST_OPTIONS}resourceVersionMatch: {unsupported}",
                  causes=[{"reason": "FieldValueNotSupported", "message": unsupported,
                           "field": "resourceVersionMatch"}])
    expect_status(api.get(f"{path}?labelSelector=a%20in%20("), 400, "BadRequest",
                  message="unable to parse requirement: found '', expected: ',', ')' or "
                          "identifier")
    # a real continue token, so that the token itself is not what is refused
    for name in ("a", "b"):
        assert api.post(path, configmap(name))[0] == 201
    code, page = api.get(f"{path}?limit=1")
    assert code == 200 and page["metadata"]["continue"]
    token = quote(page["metadata"]["continue"])
    expect_status(api.get(f"{path}?limit=1&continue={token}&resourceVersion=5"), 400,
                  "BadRequest",
                  message="specifying resource version is not allowed when using continue")
    code, rest = api.get(f"{path}?limit=1&continue={token}")
    assert code == 200 and names(rest["items"]) == ["b"]


def test_label_selectors(api, ns):
    path = CM.format(ns=ns)
    for name, labels in (("a", {"env": "prod", "tier": "web"}), ("b", {"env": "dev"}),
                         ("c", {"tier": "db"}), ("d", {})):
        api.post(path, configmap(name, labels=labels))
    # the root CA every namespace holds has no labels
    cases = {
        "env=prod": ["a"], "env==prod": ["a"], "env!=prod": ["b", "c", "d", ROOT_CA],
        "env in (prod,dev)": ["a", "b"], "env notin (prod)": ["b", "c", "d", ROOT_CA],
        "tier": ["a", "c"], "!tier": ["b", "d", ROOT_CA], "env=prod,tier=web": ["a"],
    }
    for selector, expected in cases.items():
        code, listed = api.get(f"{path}?labelSelector={quote(selector)}")
        assert code == 200 and names(listed["items"]) == expected, selector
        code, cached = api.get(f"{path}?labelSelector={quote(selector)}&resourceVersion=0")
        assert names(cached["items"]) == expected, f"{selector} from the cache"


def test_field_selectors(api, ns):
    path = CM.format(ns=ns)
    api.post(path, configmap("one"))
    api.post(path, configmap("two"))
    code, listed = api.get(f"{path}?fieldSelector=metadata.name%3Dtwo")
    assert names(listed["items"]) == ["two"]
    code, listed = api.get(f"/api/v1/configmaps?fieldSelector=metadata.namespace%3D{ns},"
                           "metadata.name!%3Done")
    assert names(listed["items"]) == [ROOT_CA, "two"]
    secrets = f"/api/v1/namespaces/{ns}/secrets"
    api.post(secrets, {"metadata": {"name": "opaque"}, "stringData": {"a": "b"}})
    api.post(secrets, {"metadata": {"name": "basic"}, "type": "kubernetes.io/basic-auth",
                       "stringData": {"username": "u"}})
    code, listed = api.get(f"{secrets}?fieldSelector=type%3Dkubernetes.io/basic-auth")
    assert code == 200 and names(listed["items"]) == ["basic"]
    # secrets' own field label conversion refuses an unknown label in these words
    expect_status(api.get(f"{secrets}?fieldSelector=spec.x%3Dy"), 400, "BadRequest",
                  message="field label not supported: spec.x")
    # configmaps have none: kube's default conversion answers, whatever the label
    expect_status(api.get(f"{path}?fieldSelector=type%3Dx"), 400, "BadRequest",
                  message='"type" is not a known field selector: only "metadata.name", '
                          '"metadata.namespace"')


def test_all_namespaces(api):
    first, second = api.namespace(), api.namespace()
    assert api.post(CM.format(ns=first), configmap("x", labels={"mark": first}))[0] == 201
    assert api.post(CM.format(ns=second), configmap("x", labels={"mark": first}))[0] == 201
    code, listed = api.get(f"/api/v1/configmaps?labelSelector=mark%3D{first}")
    assert code == 200
    assert sorted(o["metadata"]["namespace"] for o in listed["items"]) == sorted(
        [first, second])


# -- watches ----------------------------------------------------------------------------------


@contextmanager
def watching(gateway: GatewayProcess, path: str) -> Iterator[Callable[[], dict[str, Any]]]:
    """A watch whose events are read one at a time, so that a test acts only once the events
    before its action have arrived (the watch is established by then)."""
    response = gateway.open("GET", path, timeout=30)

    def next_event() -> dict[str, Any]:
        line = response.readline()
        assert line, "the watch ended"
        return json.loads(line)

    try:
        yield next_event
    finally:
        response.close()


def test_watch_stream_format(api, gateway, ns):
    path = CM.format(ns=ns)
    response = gateway.open("GET", f"{path}?watch=true&timeoutSeconds=5", timeout=10)
    try:
        assert response.status == 200  # headers arrived before any event
        assert response.headers["Transfer-Encoding"] == "chunked"
        assert response.headers["Content-Type"] == "application/json"
        assert api.post(path, configmap("w1"))[0] == 201
        line = response.readline()
    finally:
        response.close()
    assert line.endswith(b"\n") and line.startswith(b'{"type":"ADDED","object":{')


def test_watches_and_lists_carry_the_filters_headers(gateway, ns):
    # kube's filters set them on the writer before the handler: a watch, whose head goes out
    # before the handler returns, has them as a plain response does
    path = CM.format(ns=ns)
    response = gateway.open("GET", f"{path}?watch=1&timeoutSeconds=1",
                            headers={"Audit-ID": "watch-me"}, timeout=10)
    try:
        assert response.status == 200
        assert response.headers.get_all("Cache-Control") == ["no-cache, private"]
        assert response.headers.get_all("Audit-ID") == ["watch-me"]
    finally:
        response.close()
    response = gateway.open("GET", path, headers={"Audit-ID": "list-me"})
    try:
        assert response.status == 200
        assert response.headers.get_all("Cache-Control") == ["no-cache, private"]
        assert response.headers.get_all("Audit-ID") == ["list-me"]
    finally:
        response.close()


def test_watch_from_unset_resource_version_starts_with_the_current_state(api, gateway, ns):
    path = CM.format(ns=ns)
    assert api.post(path, configmap("existing"))[0] == 201
    with watching(gateway, f"{path}?watch=1") as next_event:
        events = [next_event(), next_event()]  # the current state first (with the root CA)
        assert api.post(path, configmap("later"))[0] == 201
        events.append(next_event())
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "existing"), ("ADDED", ROOT_CA), ("ADDED", "later")]
    assert all(e["object"]["apiVersion"] == "v1" and e["object"]["kind"] == "ConfigMap"
               for e in events)


def test_watch_from_a_resource_version_sends_only_later_events(api, gateway, ns):
    path = CM.format(ns=ns)
    code, old = api.post(path, configmap("old"))
    assert code == 201, old
    assert api.post(path, configmap("new"))[0] == 201
    old["data"] = {"changed": "yes"}
    assert api.put(f"{path}/old", old)[0] == 200
    assert api.delete(f"{path}/new")[0] == 200
    events = api.watch(f"{path}?watch=1&resourceVersion={rv(old)}&timeoutSeconds=2")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "new"), ("MODIFIED", "old"), ("DELETED", "new")]
    revisions = [rv(e["object"]) for e in events]
    assert revisions == sorted(revisions)
    # restarting from the last resourceVersion seen loses and repeats nothing
    with watching(gateway, f"{path}?watch=1&resourceVersion={revisions[1]}") as next_event:
        again = [next_event()]
        assert api.post(path, configmap("after-restart"))[0] == 201
        again.append(next_event())
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in again] == [
        ("DELETED", "new"), ("ADDED", "after-restart")]


def test_label_selector_watchers_see_objects_enter_and_leave(api, ns):
    path = CM.format(ns=ns)
    code, made = api.post(path, configmap("mover", labels={"color": "red"}))
    assert code == 201, made
    for color in ("blue", "green", "blue"):
        code, moved = api.patch(f"{path}/mover", {"metadata": {"labels": {"color": color}}},
                                "application/merge-patch+json")
        assert code == 200, moved
    assert api.delete(f"{path}/mover")[0] == 200
    # a watch from before the changes sees them all, whenever it is opened
    events = api.watch(f"{path}?watch=1&resourceVersion={rv(made)}&labelSelector=color%3Dblue",
                       max_events=4)
    assert [e["type"] for e in events] == ["ADDED", "DELETED", "ADDED", "DELETED"]
    assert events[1]["object"]["metadata"]["labels"] == {"color": "blue"}, \
        "leaving: the last state that matched"


def test_watch_timeout_seconds_ends_the_stream(gateway, ns):
    started = time.monotonic()
    response = gateway.open("GET", f"{CM.format(ns=ns)}?watch=1&resourceVersion=0"
                                   "&timeoutSeconds=1", timeout=30)
    try:
        body = response.read()  # to the end of the stream: the server closes it
    finally:
        response.close()
    # the current state (the root CA every namespace holds), and nothing after it
    assert [json.loads(line)["object"]["metadata"]["name"] for line in body.splitlines()] == [
        ROOT_CA]
    # a lower bound only: the server held the stream open for its timeoutSeconds
    assert time.monotonic() - started >= 0.9


def test_watch_list_stream(api, gateway, ns):
    path = CM.format(ns=ns)
    for name in ("a", "b"):
        assert api.post(path, configmap(name))[0] == 201
    with watching(gateway, f"{path}?watch=1&sendInitialEvents=true&allowWatchBookmarks=true"
                           "&resourceVersionMatch=NotOlderThan") as next_event:
        events = [next_event() for _ in range(4)]  # the initial state, then its bookmark
        assert api.post(path, configmap("c"))[0] == 201
        events.append(next_event())
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in events] == [
        ("ADDED", "a"), ("ADDED", "b"), ("ADDED", ROOT_CA), ("BOOKMARK", None), ("ADDED", "c")]
    mark = events[3]["object"]
    assert mark["kind"] == "ConfigMap" and mark["apiVersion"] == "v1"
    assert mark["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert int(mark["metadata"]["resourceVersion"]) >= max(rv(e["object"]) for e in events[:3])
