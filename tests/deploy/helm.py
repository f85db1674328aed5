"""Render the gateway chart with real Helm (Helm's Go SDK in the helm-python-sdk wheel: no
helm binary), and lay out the files a rendered gateway pod would see.

``render(values)`` is what most tests need: the manifests of one release, as dicts.
"""

from __future__ import annotations

import atexit
import base64
import functools
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import helm_python
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "chart" / "gateway"
RELEASE = "gw"
NAMESPACE = "gateway"
#: The Kubernetes version the chart is linted and validated for (the project's reference).
KUBE_VERSION = "v1.32.0"

HelmError = helm_python.HelmError


@functools.cache
def chart() -> helm_python.Chart:
    """The chart, loaded once per process (a loaded chart is immutable and thread-safe)."""
    return helm_python.Chart.load(CHART)


@functools.cache
def chart_without_schema() -> helm_python.Chart:
    """The chart with its values.schema.json left out: what `--skip-schema-validation` renders,
    so the templates' own checks can be seen."""
    where = tempfile.mkdtemp(prefix="chart-")
    atexit.register(shutil.rmtree, where, True)
    copy = Path(where) / CHART.name
    shutil.copytree(CHART, copy, ignore=shutil.ignore_patterns("values.schema.json"))
    return helm_python.Chart.load(copy)


def render_files(values: dict[str, Any] | None = None, *, name: str = RELEASE,
                 namespace: str = NAMESPACE, upgrade: bool = False,
                 config: helm_python.Config | None = None, schema: bool = True
                 ) -> dict[str, str]:
    """Template path -> rendered text (NOTES.txt included), as `helm template` renders it;
    with ``config``, `lookup` reads that cluster; ``schema=False`` skips values.schema.json.
    Raises HelmError for rejected values."""
    options: dict[str, Any] = {"name": name, "namespace": namespace}
    if upgrade:
        options.update(is_install=False, is_upgrade=True)
    if config is not None:
        return config.render(chart(), values or {}, **options)
    return dict(_render_offline(json.dumps(values or {}, sort_keys=True), schema,
                                tuple(sorted(options.items()))))


@functools.lru_cache(maxsize=64)
def _render_offline(values: str, schema: bool, options: tuple[tuple[str, Any], ...]
                    ) -> tuple[tuple[str, str], ...]:
    """Offline renders are memoized (the chart's key generation makes each take a while):
    the same values give the same keys and certificates within one test process."""
    target = chart() if schema else chart_without_schema()
    return tuple(target.render(json.loads(values), **dict(options)).items())


def manifests_of(files: dict[str, str]) -> list[dict[str, Any]]:
    """The Kubernetes objects in rendered templates (NOTES and empty documents left out)."""
    objects: list[dict[str, Any]] = []
    for path in sorted(files):
        if path.endswith("NOTES.txt"):
            continue
        objects += [doc for doc in yaml.safe_load_all(files[path]) if doc]
    return objects


def combinations() -> dict[str, dict[str, Any]]:
    """The documented combinations: the defaults, and each values file under the chart's ci/
    (tls modes x storage modes, replicas, backends), by name."""
    found: dict[str, dict[str, Any]] = {"default": {}}
    for path in sorted((CHART / "ci").glob("*-values.yaml")):
        found[path.name.removesuffix("-values.yaml")] = yaml.safe_load(path.read_text())
    return found


def render(values: dict[str, Any] | None = None, **kwargs: Any) -> list[dict[str, Any]]:
    """The manifests of one release rendered with ``values`` (merged over values.yaml)."""
    return manifests_of(render_files(values, **kwargs))


def notes(values: dict[str, Any] | None = None, **kwargs: Any) -> str:
    return render_files(values, **kwargs)[f"{CHART.name}/templates/NOTES.txt"]


def lint(values: dict[str, Any] | None = None, **kwargs: Any) -> list[str]:
    """`helm lint --strict` for the project's Kubernetes version: every finding above info."""
    report = helm_python.lint(CHART, values, strict=True, namespace=NAMESPACE,
                              kube_version=KUBE_VERSION, **kwargs)
    return [f"{m['path']}: {m['error']}" for m in report["messages"] if m["severity"] >= 2]


# -- looking things up in the manifests ---------------------------------------------------------


def find(manifests: list[dict[str, Any]], kind: str, name: str | None = None
         ) -> list[dict[str, Any]]:
    return [m for m in manifests
            if m["kind"] == kind and (name is None or m["metadata"]["name"] == name)]


def one(manifests: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = find(manifests, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, got {len(found)}"
    return found[0]


def container(manifests: list[dict[str, Any]], kind: str = "Deployment") -> dict[str, Any]:
    return one(manifests, kind)["spec"]["template"]["spec"]["containers"][0]


def embedded_objects(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the registration job applies into the gateway: Namespaces and Services of the
    backends, then their APIServices."""
    configmaps = [m for m in find(manifests, "ConfigMap")
                  if m["metadata"]["name"].endswith("-apiservices")]
    if not configmaps:
        return []
    text = configmaps[0]["data"]["apiservices.yaml"]
    return [doc for doc in yaml.safe_load_all(text) if doc]


def embedded_apiservices(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The APIService objects the registration job applies into the gateway."""
    return [o for o in embedded_objects(manifests) if o["kind"] == "APIService"]


# -- what a pod sees --------------------------------------------------------------------------


_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def expand(arg: str, env: dict[str, str]) -> str:
    """The kubelet's $(VAR) expansion of a container argument."""
    return _VAR.sub(lambda m: env.get(m.group(1), m.group(0)), arg)


def _volume_files(volume: dict[str, Any], manifests: list[dict[str, Any]]
                  ) -> dict[str, bytes] | None:
    """The files a Secret or ConfigMap volume holds: the rendered object's data, or a
    placeholder per listed key when the object comes from outside the chart (an existing
    Secret, cert-manager's). None for volumes that are directories (emptyDir, PVC)."""
    if "secret" in volume:
        source, name, kind = volume["secret"], volume["secret"]["secretName"], "Secret"
    elif "configMap" in volume:
        source, name, kind = volume["configMap"], volume["configMap"]["name"], "ConfigMap"
    else:
        return None
    found = find(manifests, kind, name)
    if found:
        obj = found[0]
        data = {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()} \
            if kind == "Secret" else {k: v.encode() for k, v in obj["data"].items()}
    else:
        keys = [item["key"] for item in source.get("items", [])] or ["tls.crt", "tls.key", "ca.crt"]
        data = {k: f"placeholder for {kind} {name} key {k}\n".encode() for k in keys}
    if "items" in source:
        return {item["path"]: data[item["key"]] for item in source["items"]}
    return data


def materialize(manifests: list[dict[str, Any]], root: Path, *, kind: str = "Deployment",
                pod_ip: str = "10.244.0.7", container_name: str | None = None
                ) -> tuple[list[str], dict[str, str]]:
    """Lay out the container's mounts under ``root`` (Secret and ConfigMap volumes written as
    files, other volumes as empty directories) and return its arguments and environment with
    every mounted path moved under ``root`` and $(VAR)s expanded. The container is the first
    one, or the (init) container named ``container_name``."""
    pod = one(manifests, kind)["spec"]["template"]["spec"]
    spec = pod["containers"][0] if container_name is None else next(
        c for c in pod.get("initContainers", []) + pod["containers"]
        if c["name"] == container_name)
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    env = {"POD_IP": pod_ip}
    for var in spec.get("env", []):
        if "value" in var:
            env[var["name"]] = var["value"]
    mounts = sorted((m["mountPath"] for m in spec.get("volumeMounts", [])), key=len, reverse=True)
    for mount in spec.get("volumeMounts", []):
        target = root / mount["mountPath"].lstrip("/")
        target.mkdir(parents=True, exist_ok=True)
        files = _volume_files(volumes[mount["name"]], manifests)
        for rel, content in (files or {}).items():
            (target / rel).write_bytes(content)

    def moved(value: str) -> str:
        for mount in mounts:
            if value == mount or value.startswith(mount + "/"):
                return str(root / value.lstrip("/"))
        return value

    args = []
    for arg in spec.get("args", []):
        arg = expand(arg, env)
        flag, sep, value = arg.partition("=")
        args.append(f"{flag}={moved(value)}" if sep else arg)
    return args, env


# -- a `helm` command for tools that shell out to one (checkov's helm framework) ----------------


def _template_output(files: dict[str, str]) -> str:
    """`helm template`'s stdout: each document headed by the template it came from."""
    out = []
    for path in sorted(files):
        if path.endswith("NOTES.txt"):
            continue
        for doc in re.split(r"(?m)^---\s*$", files[path]):
            if doc.strip():
                out.append(f"---\n# Source: {path}\n{doc.strip()}\n")
    return "".join(out)


def main(argv: list[str]) -> int:
    """The subset of the helm CLI checkov calls (`version`, `dependency list`, `template`),
    answered by Helm's Go SDK: there is no helm binary on PyPI for Linux."""
    if argv[:1] == ["version"]:
        print(f'version.BuildInfo{{Version:"{helm_python.helm_sdk_version()}", '
              f'GitCommit:"", GitTreeState:"", GoVersion:""}}')
        return 0
    if argv[:2] == ["dependency", "list"]:
        return 0  # the chart has no dependencies
    if argv[:1] == ["template"]:
        rest = [a for a in argv[1:] if a != "--dependency-update"]
        values: dict[str, Any] = {}
        while "--values" in rest:
            at = rest.index("--values")
            values.update(yaml.safe_load(Path(rest[at + 1]).read_text()) or {})
            del rest[at:at + 2]
        (path,) = rest
        files = helm_python.Chart.load(path).render(
            values, name="release-name", namespace=os.environ.get("HELM_NAMESPACE", "default"))
        sys.stdout.write(_template_output(files))
        return 0
    print(f"unsupported: helm {' '.join(argv)}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
