"""The flowcontrol.apiserver.k8s.io group."""
