"""The admissionregistration.k8s.io group."""
