"""An acknowledged write survives a SIGKILL of the gateway; nothing partial is ever seen.

(A SIGKILL leaves the page cache alone, so this passes even without an fsync; that each write
was synced before its response is test_fsync.py's job.)"""

from __future__ import annotations

import threading

import pytest
import urllib3
from kubernetes import client, config

from tests.support.gateway import GatewayProcess
from tests.support.wait import eventually

pytestmark = pytest.mark.slow


def core_api(proc: GatewayProcess) -> client.CoreV1Api:
    return client.CoreV1Api(config.new_client_from_config(config_file=str(proc.kubeconfig)))


def payload(i: int) -> dict[str, str]:
    # several keys and some bulk, so a torn write would show as a mismatch
    return {f"k{j}": f"value-{i}-{j}-" + "x" * 200 for j in range(10)}


def test_acknowledged_writes_survive_sigkill(workdir):
    proc = GatewayProcess(workdir).start()
    acknowledged: set[int] = set()
    lock = threading.Lock()
    stop = threading.Event()
    killed = threading.Event()
    failures: list[BaseException] = []

    def writer(offset: int) -> None:
        api = core_api(proc)
        i = offset
        while not stop.is_set():
            body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"cm-{i:05d}"),
                                      data=payload(i))
            try:
                api.create_namespaced_config_map("default", body)
            except (urllib3.exceptions.HTTPError, OSError) as err:
                # the connection broke: not acknowledged; only the SIGKILL may do that
                if not killed.is_set():
                    failures.append(err)
                return
            except BaseException as err:  # a refusal is a failure of this test
                failures.append(err)
                return
            with lock:
                acknowledged.add(i)
            i += 4

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    eventually(lambda: len(acknowledged) >= 150 or failures, timeout=60,
               what="150 acknowledged writes")
    killed.set()
    proc.kill()  # SIGKILL while the writers are still writing
    stop.set()
    for thread in threads:
        thread.join(30)
    assert not failures, failures
    assert len(acknowledged) >= 150, proc.log()

    restarted = GatewayProcess(workdir, port=proc.port).start()
    try:
        items = core_api(restarted).list_namespaced_config_map("default").items
        # the test's own (not the root CA every namespace holds)
        stored = {int(cm.metadata.name.split("-")[1]): cm for cm in items
                  if cm.metadata.name.startswith("cm-")}
        missing = acknowledged - set(stored)
        assert not missing, f"acknowledged but lost: {sorted(missing)[:10]}"
        for i, cm in stored.items():
            assert cm.data == payload(i), f"cm-{i:05d} is not what was written"
            assert cm.metadata.uid and cm.metadata.resource_version
        # and the store keeps working after the crash
        made = core_api(restarted).create_namespaced_config_map(
            "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="after-crash"))
        )
        assert int(made.metadata.resource_version) > max(
            int(cm.metadata.resource_version) for cm in stored.values()
        )
    finally:
        restarted.stop()

