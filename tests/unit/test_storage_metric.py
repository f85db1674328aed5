"""etcd_request_duration_seconds: every storage operation the gateway's store makes is counted
and timed under its operation and resource, including the ones made after a scrape (the
observations are kept in tallies and folded into the histogram when /metrics is read)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from gateway.server.metrics import Metrics, StorageTimer
from gateway.storage.sqlite import SQLiteStorage


def test_each_operation_is_counted_and_timed_per_resource(tmp_path: Path) -> None:
    metrics = Metrics()
    storage = StorageTimer(metrics).wrap(SQLiteStorage(str(tmp_path / "state.db")))
    value = metrics.registry.get_sample_value

    async def work(names: list[str]) -> None:
        for name in names:
            await storage.create(f"/core/configmaps/default/{name}",
                                 {"metadata": {"name": name, "namespace": "default"}})
        await storage.get(f"/core/configmaps/default/{names[0]}")

    async def run() -> None:
        await storage.start()
        try:
            await work(["a", "b"])
            labels = {"operation": "create", "type": "configmaps"}
            assert value("etcd_request_duration_seconds_count", labels) == 2
            assert value("etcd_request_duration_seconds_sum", labels) > 0
            assert value("etcd_request_duration_seconds_count",
                         {"operation": "get", "type": "configmaps"}) == 1
            await work(["c"])  # after a read of the metrics: counted at the next one
            assert value("etcd_request_duration_seconds_count", labels) == 3
            assert value("etcd_request_duration_seconds_bucket",
                         {**labels, "le": "+Inf"}) == 3
        finally:
            await storage.close()

    asyncio.run(run())
