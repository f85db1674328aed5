"""An acknowledged write survives a SIGKILL of the gateway; nothing partial is ever seen."""

from __future__ import annotations

import threading
import time

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from tests.support.gateway import GatewayProcess

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

    def writer(offset: int) -> None:
        api = core_api(proc)
        i = offset
        while not stop.is_set():
            body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"cm-{i:05d}"),
                                      data=payload(i))
            try:
                api.create_namespaced_config_map("default", body)
            except Exception:  # the gateway was killed under us: not acknowledged
                return
            with lock:
                acknowledged.add(i)
            i += 4

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30
    while len(acknowledged) < 150 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.kill()  # SIGKILL while the writers are still writing
    stop.set()
    for thread in threads:
        thread.join(30)
    assert len(acknowledged) >= 150, proc.log()

    restarted = GatewayProcess(workdir, port=proc.port).start()
    try:
        items = core_api(restarted).list_namespaced_config_map("default").items
        stored = {int(cm.metadata.name.split("-")[1]): cm for cm in items}
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


def test_a_refused_write_leaves_nothing_behind(gateway):
    api = core_api(gateway)
    bad = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="Not_Valid"), data={"a": "b"})
    with pytest.raises(ApiException) as err:
        api.create_namespaced_config_map("default", bad)
    assert err.value.status == 422
    names = [cm.metadata.name for cm in api.list_namespaced_config_map("default").items]
    assert "Not_Valid" not in names
