"""Lists and watches over HTTP, with kube-apiserver's resourceVersion rules; conformance checks
in our own words from the Kubernetes e2e suite's chunking.go and watch.go."""

from __future__ import annotations

import threading
import time
from urllib.parse import quote

import pytest

from tests.support.api import API, CM, configmap, rv
from tests.support.gateway import GatewayProcess

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def api(gateway) -> API:
    return API(gateway)


@pytest.fixture
def ns(api) -> str:
    return api.namespace()


def names(items: list[dict]) -> list[str]:
    return [o["metadata"]["name"] for o in items]


# -- lists ------------------------------------------------------------------------------------


def test_chunking_keeps_one_revision_and_counts_what_remains(api, ns):
    path = CM.format(ns=ns)
    for i in range(400):
        api.post(path, configmap(f"c-{i:03d}"))
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
        assert page["metadata"]["remainingItemCount"] == 400 - len(seen)
        if pages == 3:  # writes while paging do not show up in the pinned snapshot
            api.post(path, configmap("zzz-late"))
    assert seen == [f"c-{i:03d}" for i in range(400)]
    assert pages == 24


def test_resource_version_rules(api, ns):
    path = CM.format(ns=ns)
    _, first = api.post(path, configmap("a", v="1"))
    first["data"]["v"] = "2"
    api.put(f"{path}/a", first)
    _, now = api.get(path)
    assert now["items"][0]["data"] == {"v": "2"}
    # "0": any state the cache has
    assert api.get(f"{path}?resourceVersion=0")[0] == 200
    # N with a limit and no match: exactly the state at N
    code, exact = api.get(f"{path}?resourceVersion={rv(first)}&limit=10")
    assert code == 200 and exact["items"][0]["data"] == {"v": "1"}
    assert exact["metadata"]["resourceVersion"] == str(rv(first))
    code, exact = api.get(f"{path}?resourceVersion={rv(first)}&resourceVersionMatch=Exact")
    assert exact["items"][0]["data"] == {"v": "1"}
    # NotOlderThan: at least as new as N
    code, newer = api.get(f"{path}?resourceVersion={rv(first)}"
                          "&resourceVersionMatch=NotOlderThan")
    assert newer["items"][0]["data"] == {"v": "2"}


def test_a_resource_version_from_the_future_times_out(api, ns):
    path = CM.format(ns=ns)
    _, made = api.post(path, configmap("f"))
    started = time.monotonic()
    code, status = api.get(f"{path}?resourceVersion={rv(made) + 100000}"
                           "&resourceVersionMatch=NotOlderThan")
    assert code == 504 and status["reason"] == "Timeout"
    assert status["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
    assert time.monotonic() - started >= 2.5, "it waited for the cache first"
    code, status = api.get(f"{path}?resourceVersion={rv(made) + 100000}&limit=5")
    assert code == 504


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("?continue=abc&resourceVersion=5", 400),
        ("?resourceVersionMatch=Exact", 422),
        ("?resourceVersion=0&resourceVersionMatch=Exact", 422),
        ("?resourceVersion=5&resourceVersionMatch=Sometimes", 422),
        ("?sendInitialEvents=true", 422),
        ("?continue=not-a-token", 400),
        ("?resourceVersion=abc", 400),
        ("?resourceVersion=99999999999999999999", 400),  # beyond uint64
        ("?limit=99999999999999999999", 400),  # beyond int64
        ("?limit=1_000", 400),  # Go's integers have no underscores
        ("?timeoutSeconds=x", 400),
        ("?labelSelector=a%20in%20(", 400),
        ("?fieldSelector=spec.nothing%3Dx", 400),
    ],
)
def test_bad_list_options(api, ns, query, code):
    got, status = api.get(CM.format(ns=ns) + query)
    assert got == code, status
    assert status["kind"] == "Status"


def test_label_selectors(api, ns):
    path = CM.format(ns=ns)
    for name, labels in (("a", {"env": "prod", "tier": "web"}), ("b", {"env": "dev"}),
                         ("c", {"tier": "db"}), ("d", {})):
        api.post(path, configmap(name, labels=labels))
    cases = {
        "env=prod": ["a"], "env==prod": ["a"], "env!=prod": ["b", "c", "d"],
        "env in (prod,dev)": ["a", "b"], "env notin (prod)": ["b", "c", "d"],
        "tier": ["a", "c"], "!tier": ["b", "d"], "env=prod,tier=web": ["a"],
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
    assert names(listed["items"]) == ["two"]
    secrets = f"/api/v1/namespaces/{ns}/secrets"
    api.post(secrets, {"metadata": {"name": "opaque"}, "stringData": {"a": "b"}})
    api.post(secrets, {"metadata": {"name": "basic"}, "type": "kubernetes.io/basic-auth",
                       "stringData": {"username": "u"}})
    code, listed = api.get(f"{secrets}?fieldSelector=type%3Dkubernetes.io/basic-auth")
    assert code == 200 and names(listed["items"]) == ["basic"]
    code, status = api.get(f"{path}?fieldSelector=type%3Dx")
    assert code == 400 and status["message"] == "field label not supported: type"


def test_all_namespaces(api):
    first, second = api.namespace(), api.namespace()
    api.post(CM.format(ns=first), configmap("x", labels={"mark": first}))
    api.post(CM.format(ns=second), configmap("x", labels={"mark": first}))
    _, listed = api.get(f"/api/v1/configmaps?labelSelector=mark%3D{first}")
    assert sorted(o["metadata"]["namespace"] for o in listed["items"]) == sorted(
        [first, second])


# -- watches ----------------------------------------------------------------------------------


def background(action, delay: float = 0.7) -> threading.Thread:
    def run() -> None:
        time.sleep(delay)
        action()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_watch_stream_format(api, gateway, ns):
    path = CM.format(ns=ns)
    response = gateway.open("GET", f"{path}?watch=true&timeoutSeconds=5", timeout=10)
    try:
        assert response.status == 200  # headers arrived before any event
        assert response.headers["Transfer-Encoding"] == "chunked"
        assert response.headers["Content-Type"] == "application/json"
        api.post(path, configmap("w1"))
        line = response.readline()
    finally:
        response.close()
    assert line.endswith(b"\n") and line.startswith(b'{"type":"ADDED","object":{')


def test_watch_from_unset_resource_version_starts_with_the_current_state(api, ns):
    path = CM.format(ns=ns)
    api.post(path, configmap("existing"))
    thread = background(lambda: api.post(path, configmap("later")))
    events = api.watch(f"{path}?watch=1&timeoutSeconds=3", max_events=2)
    thread.join()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "existing"), ("ADDED", "later")]
    assert all(e["object"]["apiVersion"] == "v1" and e["object"]["kind"] == "ConfigMap"
               for e in events)


def test_watch_from_a_resource_version_sends_only_later_events(api, ns):
    path = CM.format(ns=ns)
    _, old = api.post(path, configmap("old"))
    api.post(path, configmap("new"))
    old["data"] = {"changed": "yes"}
    api.put(f"{path}/old", old)
    api.delete(f"{path}/new")
    events = api.watch(f"{path}?watch=1&resourceVersion={rv(old)}&timeoutSeconds=2")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "new"), ("MODIFIED", "old"), ("DELETED", "new")]
    revisions = [rv(e["object"]) for e in events]
    assert revisions == sorted(revisions)
    # restarting from the last resourceVersion seen loses and repeats nothing
    thread = background(lambda: api.post(path, configmap("after-restart")), 0.5)
    again = api.watch(f"{path}?watch=1&resourceVersion={revisions[1]}&timeoutSeconds=2")
    thread.join()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in again] == [
        ("DELETED", "new"), ("ADDED", "after-restart")]


def test_label_selector_watchers_see_objects_enter_and_leave(api, ns):
    path = CM.format(ns=ns)
    _, made = api.post(path, configmap("mover", labels={"color": "red"}))

    def recolor() -> None:
        for color in ("blue", "green", "blue"):
            api.patch(f"{path}/mover", {"metadata": {"labels": {"color": color}}},
                      "application/merge-patch+json")
        api.delete(f"{path}/mover")

    thread = background(recolor, 0.5)
    events = api.watch(f"{path}?watch=1&resourceVersion={rv(made)}&labelSelector=color%3Dblue"
                       "&timeoutSeconds=3")
    thread.join()
    assert [e["type"] for e in events] == ["ADDED", "DELETED", "ADDED", "DELETED"]
    assert events[1]["object"]["metadata"]["labels"] == {"color": "blue"}, \
        "leaving: the last state that matched"


def test_watch_timeout_seconds_ends_the_stream(api, ns):
    started = time.monotonic()
    events = api.watch(f"{CM.format(ns=ns)}?watch=1&resourceVersion=0&timeoutSeconds=1",
                       timeout=20)
    assert events == []
    assert 0.9 <= time.monotonic() - started < 10


def test_watch_list_stream(api, ns):
    path = CM.format(ns=ns)
    for name in ("a", "b"):
        api.post(path, configmap(name))
    thread = background(lambda: api.post(path, configmap("c")), 1.0)
    events = api.watch(f"{path}?watch=1&sendInitialEvents=true&allowWatchBookmarks=true"
                       "&resourceVersionMatch=NotOlderThan&timeoutSeconds=3", max_events=4)
    thread.join()
    assert [e["type"] for e in events] == ["ADDED", "ADDED", "BOOKMARK", "ADDED"]
    mark = events[2]["object"]
    assert mark["kind"] == "ConfigMap" and mark["apiVersion"] == "v1"
    assert mark["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert int(mark["metadata"]["resourceVersion"]) >= rv(events[1]["object"])
    code, _ = api.get(f"{path}?watch=1&sendInitialEvents=true")
    assert code == 422


def test_too_old_resource_version_is_an_error_event(workdir):
    """A new gateway's cache starts at its start revision; older ones are gone (410)."""
    first = GatewayProcess(workdir).start()
    api = API(first)
    ns = api.namespace()
    _, made = api.post(CM.format(ns=ns), configmap("before"))
    api.post(CM.format(ns=ns), configmap("last-before-restart"))
    first.stop()
    second = GatewayProcess(workdir, port=first.port).start()
    try:
        api = API(second)
        api.post(CM.format(ns=ns), configmap("after"))
        events = api.watch(f"{CM.format(ns=ns)}?watch=1&resourceVersion={rv(made)}")
        assert len(events) == 1 and events[0]["type"] == "ERROR"
        status = events[0]["object"]
        assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")
        assert status["message"].startswith("too old resource version")
    finally:
        second.stop()
