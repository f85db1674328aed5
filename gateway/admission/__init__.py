"""Admission: what a write goes through after the resource's own checks and before storage.

``chain`` runs the plugins in kube's order: mutating webhooks, then ValidatingAdmissionPolicies
(``policy``), then validating webhooks (``matching`` says which webhooks a write goes to,
``webhooks`` calls them). ``expressions`` and ``conditions`` compile and run the CEL both use.
The built-in checks (namespace lifecycle, RBAC escalation) are store hooks in
gateway.registry.store and gateway.auth.rbac.
"""
