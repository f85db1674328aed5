"""field.Path strings as k8s.io/apimachinery writes them: "spec.items[0].name", map keys in
brackets ("spec.templates[web]"), and "<nil>" for the root (a nil *field.Path)."""

from __future__ import annotations

ROOT = "<nil>"


def child(path: str, name: str) -> str:
    """Path.Child: the name after a dot, or alone at the root."""
    return f"{path}.{name}" if path else name


def key(path: str, name: str) -> str:
    """Path.Key (and Index): the subscript in brackets, also at the root ("[a]")."""
    return f"{path}[{name}]"


def index(path: str, i: int) -> str:
    return f"{path}[{i}]"


def shown(path: str) -> str:
    """What field.Error's Field says for the path: "<nil>" for the root."""
    return path or ROOT
