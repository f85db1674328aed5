"""The coordination.k8s.io group."""
