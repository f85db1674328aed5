"""The authentication.k8s.io group: token and self-subject reviews."""
