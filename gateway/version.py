"""The version the gateway reports: the Kubernetes API level it speaks, and its own."""

from __future__ import annotations

import platform
from importlib import metadata

KUBE_MAJOR = "1"
KUBE_MINOR = "32"
KUBE_PATCH = "0"


def gateway_version() -> str:
    try:
        return metadata.version("gateway")
    except metadata.PackageNotFoundError:  # running from a source tree
        return "0.0.0"


def git_version() -> str:
    """kube's gitVersion, with the gateway's own version as semver build metadata."""
    return f"v{KUBE_MAJOR}.{KUBE_MINOR}.{KUBE_PATCH}+gateway.{gateway_version()}"


def version_info() -> dict[str, str]:
    """The body of GET /version (k8s.io/apimachinery's version.Info)."""
    machine = platform.machine().lower()
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)
    return {
        "major": KUBE_MAJOR,
        "minor": KUBE_MINOR,
        "gitVersion": git_version(),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": f"python{platform.python_version()}",
        "compiler": platform.python_implementation().lower(),
        "platform": f"{platform.system().lower()}/{arch}",
    }
