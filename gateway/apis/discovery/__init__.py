"""The discovery.k8s.io group."""
