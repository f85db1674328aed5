"""apiserver_terminated_watchers_total labelled as kube 1.32's cacher labels it: the
GroupResource of the watch cache that closed the watcher (``configmaps``,
``widgets.example.com``)."""

from __future__ import annotations

from gateway.server.metrics import Metrics


def test_a_cache_prefix_becomes_kubes_group_resource_label() -> None:
    metrics = Metrics()
    metrics.watcher_terminated("/core/configmaps/")
    metrics.watcher_terminated("/core/configmaps/")
    metrics.watcher_terminated("/example.com/widgets/")
    value = metrics.registry.get_sample_value
    assert value("apiserver_terminated_watchers_total", {"resource": "configmaps"}) == 2
    assert value("apiserver_terminated_watchers_total",
                 {"resource": "widgets.example.com"}) == 1
