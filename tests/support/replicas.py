"""Gateway replicas on an etcd cluster, as the chart's etcd mode deploys them, on loopback.

Each replica listens on its own loopback address (127.0.0.1, .2, .3) and one shared port,
as pods behind a Service do, advertises that address (so the ``kubernetes`` Service lists
each), and is given the etcd endpoints in its own order (so their connections spread over
the members). They share one development PKI, made once with every address in the serving
certificate. One extension apiserver backend (tests/support/backend.py) is registered with
an APIService, reached through --enable-aggregator-routing.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

from tests.support.backend import GV_PATH, BackendProcess
from tests.support.etcd import EtcdCluster
from tests.support.gateway import GatewayProcess, free_port, gateway_command
from tests.support.load import Replica
from tests.support.wait import eventually

#: How long a replica may take to turn ready (three start at once on a busy machine).
READY_TIMEOUT = 120.0


class Replicas:
    """``count`` gateways on ``cluster`` plus one registered backend; ``start()``, ``stop()``,
    and ``restore()`` to bring back whatever a test killed."""

    def __init__(self, workdir: Path, cluster: EtcdCluster, count: int = 3,
                 *extra: str) -> None:
        self.workdir = Path(workdir)
        self.cluster = cluster
        self.port = free_port()
        self.hosts = [f"127.0.0.{i + 1}" for i in range(count)]
        pki = self.workdir / "pki"
        subprocess.run([*gateway_command(), "certs", "--cert-dir", str(pki),
                        *(f"--tls-san={host}" for host in self.hosts[1:])],
                       check=True, capture_output=True, timeout=60)
        self.gateways: list[GatewayProcess] = []
        for i, host in enumerate(self.hosts):
            where = self.workdir / f"replica-{i}"
            shutil.copytree(pki, where / "certs")
            # `gateway certs` points the kubeconfig at 127.0.0.1:6443; a replica leaves it so
            # when something answers there (another gateway on the machine): each its own
            (where / "certs" / "admin.kubeconfig").unlink(missing_ok=True)
            self.gateways.append(GatewayProcess(
                where, *cluster.gateway_flags(rotate=i), f"--advertise-address={host}",
                "--enable-aggregator-routing", *extra, port=self.port, host=host))
        self.backend = BackendProcess.for_gateway(self.workdir / "backend", self.gateways[0])

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> Replicas:
        for gateway in self.gateways:
            gateway.start(wait=None)
        for gateway in self.gateways:
            gateway.wait_for("/readyz", READY_TIMEOUT)
        self.backend.start()
        self.gateways[0].kubectl("apply", "-f", "-",
                                 input=yaml.safe_dump_all(self.backend.manifests("127.0.0.1")))
        self.wait_backend_available()
        return self

    def wait_backend_available(self, timeout: float = 90) -> None:
        """Until every live replica proxies the backend's group version."""
        for gateway in self.live():
            eventually(lambda gateway=gateway: gateway.request("GET", GV_PATH)[0] == 200,
                       timeout=timeout, interval=0.2,
                       what=f"{GV_PATH} through {gateway.host}")

    def stop(self) -> None:
        for gateway in self.gateways:
            gateway.stop()
        self.backend.stop()

    def restore(self) -> None:
        """Every etcd member running and resumed, every replica ready, the backend serving
        (a test's faults undone before the next test)."""
        for member in self.cluster.members:
            member.resume()
            if not member.running:
                member.proc = None
                member.start(wait=False)
        self.cluster.wait_healthy()
        for gateway in self.gateways:
            if gateway.proc is None or gateway.proc.poll() is not None:
                gateway.start(wait=None)
        for gateway in self.gateways:
            gateway.wait_for("/readyz", READY_TIMEOUT)
        if not self.backend.alive():
            self.backend.start()
        self.wait_backend_available()

    # -- views ----------------------------------------------------------------------------

    def live(self) -> list[GatewayProcess]:
        return [g for g in self.gateways if g.proc is not None and g.proc.poll() is None]

    def replicas(self, *, live: bool = False) -> list[Replica]:
        """How clients reach them (all, or the running ones)."""
        return [Replica.of(g) for g in (self.live() if live else self.gateways)]

    def logs(self) -> str:
        return "\n".join(f"--- {g.host}\n{g.log()[-3000:]}" for g in self.gateways)
