"""core/v1 serviceaccounts."""

from __future__ import annotations

from gateway.registry.resource import ResourceDef
from gateway.registry.strategy import Strategy
from gateway.registry.tables import AGE, NAME, Column

SERVICEACCOUNTS = ResourceDef(
    group="", version="v1", kind="ServiceAccount", plural="serviceaccounts",
    singular="serviceaccount", namespaced=True, strategy=Strategy(), short_names=("sa",),
    columns=(NAME, Column("Secrets", "integer", "Number of secrets the account may use.",
                          lambda o: len(o.get("secrets") or [])), AGE),
    schema="io.k8s.api.core.v1.ServiceAccount",
)
