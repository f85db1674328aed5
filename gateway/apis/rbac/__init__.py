"""The rbac.authorization.k8s.io group."""
