"""Admission: what a write goes through after the resource's own checks and before storage.

``matching`` says which webhooks a write goes to; ``webhooks`` calls them (mutating, then
validating). The built-in checks (namespace lifecycle, RBAC escalation) are store hooks in
gateway.registry.store and gateway.auth.rbac.
"""
