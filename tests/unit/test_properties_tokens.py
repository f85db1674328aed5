"""Properties of continue tokens and resourceVersion parameters (issue 19, item 4: hostile
input): any text given as ``continue`` decodes to a token or is kube's "continue key is not
valid"; a token the gateway wrote decodes to what it wrote; and a list of a real store (the
embedded one, behind the registry as the handler calls it) with any continue token,
resourceVersion, resourceVersionMatch and limit is a list or a Status kube answers too: 400
(a bad token or version), 410 (expired), 422 (options), or kube's own 504 for a revision the
store has not reached, or the 500 its watch cache answers for a resourceVersion that is no
number. Never a 500 of the gateway's own."""

from __future__ import annotations

import asyncio
import base64
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gateway.apis.install  # noqa: F401 - defines every schema
from gateway.apimachinery import status
from gateway.apimachinery.listoptions import ListOptions
from gateway.apis.core.configmaps import CONFIGMAPS
from gateway.registry.store import RESTStore, WriteOptions
from gateway.storage import continuetoken
from gateway.storage.errors import InvalidContinueError
from gateway.storage.factory import StorageFactory
from gateway.storage.sqlite import SQLiteStorage

PROPERTY = settings(max_examples=300, derandomize=True, database=None, deadline=None)

#: Base64url text, and text near it (padding, the standard alphabet, line breaks).
B64ISH = st.text(alphabet="ABCDEFabcdef0123456789-_+/=\r\n .", max_size=60)
JSONISH = st.one_of(
    st.fixed_dictionaries({}, optional={
        "v": st.one_of(st.just("meta.k8s.io/v1"), st.text(max_size=5), st.integers()),
        "rv": st.one_of(st.integers(-(2**64), 2**64), st.floats(), st.text(max_size=5),
                        st.none()),
        "start": st.one_of(st.sampled_from(("a", "/a", "../x", "a/../../b", "default/x\x00",
                                            "", "//")), st.text(max_size=8), st.integers()),
        "RV": st.integers(), "x": st.booleans()}),
    st.lists(st.integers(), max_size=2), st.text(max_size=5), st.none(), st.integers())


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


TOKENS = st.one_of(
    st.text(max_size=40), B64ISH,
    st.binary(max_size=40).map(b64),
    JSONISH.map(lambda value: b64(json.dumps(value).encode())))


@PROPERTY
@given(TOKENS)
def test_any_continue_text_is_a_token_or_kubes_invalid_continue(text: str) -> None:
    try:
        token = continuetoken.decode(text)
    except InvalidContinueError as err:
        assert str(err) == "continue key is not valid"
        return
    assert token.revision > 0
    assert ".." not in token.start_key.split("/")


@PROPERTY
@given(st.integers(1, 2**63 - 1), st.text(min_size=1, max_size=20).filter(
    lambda key: "//" not in "/" + key and not {".", ".."} & set(key.split("/"))
    and not key.endswith("/") and not key.startswith("/")))
def test_a_token_decodes_to_what_was_encoded(revision: int, start: str) -> None:
    token = continuetoken.decode(continuetoken.encode(revision, start))
    assert (token.revision, token.start_key) == (revision, start)


# -- lists of a real store ------------------------------------------------------------------------

#: resourceVersion values: numbers near what the store holds, past it, and text.
VERSIONS = st.one_of(st.sampled_from(("", "0", "1", "3", "99999999", "18446744073709551615",
                                      "18446744073709551616", "-1", "01", " 1", "1e3")),
                     st.integers(0, 2**64).map(str), st.text(max_size=6))
#: kube's watch cache passes strconv's error on for a resourceVersion that is no number (its
#: versioner's storage.InvalidError, which no Status interprets: a 500 without a reason).
KUBES_OWN_500 = re.compile(r'resourceVersion: Invalid value: ".*": strconv\.ParseUint: ', re.S)
MATCHES = st.sampled_from(("", "", "NotOlderThan", "Exact", "exact", "Bogus"))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[asyncio.AbstractEventLoop,
                                                                        RESTStore, list[str]]]:
    """A configmap store on the embedded storage with a few objects, and tokens it wrote."""
    loop = asyncio.new_event_loop()
    path = Path(tmp_path_factory.mktemp("tokens")) / "state.db"

    async def start() -> tuple[SQLiteStorage, StorageFactory, RESTStore, list[str]]:
        storage = SQLiteStorage(path)
        factory = StorageFactory(storage)
        await storage.start()
        await factory.start_caches()
        configmaps = RESTStore(CONFIGMAPS, factory.cacher(CONFIGMAPS.storage_prefix))
        for i in range(5):
            await configmaps.create("default", {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": f"c{i}", "namespace": "default"}}, WriteOptions())
        tokens = []
        page = await configmaps.list("default", ListOptions(limit=1))
        while page.continue_token:
            tokens.append(page.continue_token)
            page = await configmaps.list("default", ListOptions(
                limit=1, continue_token=page.continue_token))
        return storage, factory, configmaps, tokens

    storage, factory, configmaps, tokens = loop.run_until_complete(start())
    assert len(tokens) == 4
    yield loop, configmaps, tokens

    async def stop() -> None:
        await factory.close()
        await storage.close()

    loop.run_until_complete(stop())
    loop.close()


@PROPERTY
@given(data=st.data())
def test_any_list_of_a_real_store_is_a_list_or_kubes_status(
        store: tuple[asyncio.AbstractEventLoop, RESTStore, list[str]], data: st.DataObject
) -> None:
    loop, configmaps, written = store
    token = data.draw(st.one_of(st.just(""), st.sampled_from(written), TOKENS))
    options = ListOptions(continue_token=token, resource_version=data.draw(VERSIONS),
                          resource_version_match=data.draw(MATCHES),
                          limit=data.draw(st.integers(0, 3)))
    try:
        result = loop.run_until_complete(configmaps.list("default", options))
    except status.StatusError as err:
        assert err.code in (400, 410, 422) or (
            err.code == 504 and "Too large resource version" in err.message) or (
            err.code == 500 and KUBES_OWN_500.match(err.message)), err
        return
    assert all(item["metadata"]["namespace"] == "default" for item in result.items)
