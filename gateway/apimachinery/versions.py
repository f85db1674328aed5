"""kube's order of API versions (CompareKubeAwareVersionStrings), used wherever versions are
listed: discovery, the aggregator's APIService groups."""

from __future__ import annotations

import re

_KUBE_VERSION = re.compile(r"v(\d+)(?:(alpha|beta)(\d+))?")
_STABILITY = {"alpha": 0, "beta": 1, None: 2}


def version_rank(version: str) -> tuple[int, int, int, int, str]:
    """A sort key putting versions in kube's order: GA, then beta, then alpha, each by higher
    major then higher minor; kube-like versions (v1, v2beta3, v1alpha1) before any other
    string, the others alphabetically."""
    match = _KUBE_VERSION.fullmatch(version)
    if match is None:
        return (1, 0, 0, 0, version)
    major, stability, minor = match.groups()
    return (0, -_STABILITY[stability], -int(major), -int(minor or 0), "")
