"""Auditing: who did what, when, with what outcome (audit.k8s.io/v1 Events)."""
