"""The core ("") group, version v1, that the kube core server serves."""
