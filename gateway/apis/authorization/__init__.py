"""The authorization.k8s.io group: access and rules reviews."""
