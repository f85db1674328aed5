"""A Deployment's pod run with podman the way the kubelet runs it, so an image is tested with
exactly what a manifest (the chart's, the kind example's) gives it:

- the container's ``command`` replaces the image's entrypoint, its ``args`` follow, with the
  kubelet's $(VAR) expansion (``POD_IP`` from the downward API is the container's address);
- the pod's and the container's securityContext: the numeric user and group, fsGroup as a
  supplementary group owning the volumes, a read-only root filesystem, no privilege
  escalation, capabilities dropped; the resource limits;
- the volumes: Secrets and ConfigMaps as read-only files (``defaultMode``, group fsGroup),
  emptyDirs as tmpfs of their ``sizeLimit``, PersistentVolumeClaims as host directories the
  caller keeps (so a new container finds the data of the old), made group-writable as
  fsGroup does; the image's own VOLUMEs are ignored, as Kubernetes ignores them;
- the container ports published on 127.0.0.1 (free ports), since the container has a network
  namespace of its own.

The files of Secrets and ConfigMaps come from ``objects``: the rendered ones (``objects_of``)
and those a release expects to exist already (an existingSecret), as the caller gives them.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes.utils import parse_quantity

from tests.deploy.helm import expand
from tests.support.gateway import free_port
from tests.support.podman import CONTAINER_IP, HOST_LOOPBACK

#: Where a Secret or ConfigMap volume's files come from: kind -> name -> key -> content.
Objects = dict[str, dict[str, dict[str, bytes]]]


@dataclass
class Pod:
    """What ``podman run`` needs to run the pod's first container."""

    options: list[str]
    args: list[str]
    ports: dict[int, int] = field(default_factory=dict)  # containerPort -> port on 127.0.0.1
    grace: float = 30.0  # terminationGracePeriodSeconds
    container: dict[str, Any] = field(default_factory=dict)

    def url(self, port: int | str, path: str = "") -> str:
        """https://127.0.0.1:<published port><path> for a container port (number or name)."""
        if isinstance(port, str):
            port = next(p["containerPort"] for p in self.container.get("ports", [])
                        if p.get("name") == port)
        return f"https://127.0.0.1:{self.ports[port]}{path}"


def objects_of(manifests: list[dict[str, Any]]) -> Objects:
    """The data of the rendered Secrets and ConfigMaps, as files would hold it."""
    found: Objects = {"Secret": {}, "ConfigMap": {}}
    for obj in manifests:
        if obj["kind"] == "Secret":
            found["Secret"][obj["metadata"]["name"]] = {
                k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
        elif obj["kind"] == "ConfigMap":
            found["ConfigMap"][obj["metadata"]["name"]] = {
                k: v.encode() for k, v in (obj.get("data") or {}).items()}
    return found


def pod_of(deployment: dict[str, Any], objects: Objects, root: Path, *,
           claims: dict[str, Path] | None = None, services: tuple[str, ...] = (),
           ports: dict[int, int] | None = None) -> Pod:
    """The podman options for ``deployment``'s first container, its volume files laid out
    under ``root``. ``claims``: claimName -> host directory; ``services``: DNS names that
    resolve to the host's loopback (where the cluster's DNS would answer with a Service's
    address); ``ports``: host ports to publish on (free ones otherwise)."""
    spec = deployment["spec"]["template"]["spec"]
    container = spec["containers"][0]
    pod_security = spec.get("securityContext") or {}
    security = {**pod_security, **(container.get("securityContext") or {})}
    fs_group = pod_security.get("fsGroup")
    options: list[str] = ["--image-volume=ignore"]

    uid, gid = security.get("runAsUser"), security.get("runAsGroup")
    if security.get("runAsNonRoot") and uid in (None, 0):
        raise ValueError("runAsNonRoot without a non-root runAsUser: the kubelet would need "
                         "the image's user, which this runner does not check")
    if uid is not None:
        options.append(f"--user={uid}" + (f":{gid}" if gid is not None else ""))
    if fs_group is not None and fs_group != gid:
        options.append(f"--group-add={fs_group}")
    if security.get("readOnlyRootFilesystem"):
        options += ["--read-only", "--read-only-tmpfs=false"]
    if security.get("allowPrivilegeEscalation") is False:
        options.append("--security-opt=no-new-privileges")
    capabilities = security.get("capabilities") or {}
    options += [f"--cap-drop={c.lower()}" for c in capabilities.get("drop", [])]
    options += [f"--cap-add={c.lower()}" for c in capabilities.get("add", [])]
    if (security.get("seccompProfile") or {}).get("type") not in (None, "RuntimeDefault"):
        raise ValueError(f"seccomp profile {security['seccompProfile']} is not supported here")

    limits = (container.get("resources") or {}).get("limits") or {}
    if "memory" in limits:
        options.append(f"--memory={int(parse_quantity(limits['memory']))}b")
    if "cpu" in limits:
        options.append(f"--cpus={float(parse_quantity(limits['cpu']))}")

    env = {"POD_IP": CONTAINER_IP}
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = var["value"]
        elif (var.get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath") == "status.podIP":
            env[var["name"]] = CONTAINER_IP
        else:
            raise ValueError(f"env {var['name']}: only values and status.podIP are supported")
        options.append(f"--env={var['name']}={env[var['name']]}")

    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        options.append(_mount(volumes[mount["name"]], mount, objects, root, fs_group,
                              claims or {}))

    published: dict[int, int] = {}
    for port in container.get("ports", []):
        number = int(port["containerPort"])
        published[number] = (ports or {}).get(number) or free_port()
        options.append(f"--publish=127.0.0.1:{published[number]}:{number}")
    options += [f"--add-host={name}:{HOST_LOOPBACK}" for name in services]

    if "command" in container:
        options.append(f"--entrypoint={json.dumps(container['command'])}")
    args = [expand(arg, env) for arg in container.get("args", [])]
    return Pod(options, args, published, float(spec.get("terminationGracePeriodSeconds", 30)),
               container)


def _mount(volume: dict[str, Any], mount: dict[str, Any], objects: Objects, root: Path,
           fs_group: int | None, claims: dict[str, Path]) -> str:
    target = mount["mountPath"]
    read_only = ",ro=true" if mount.get("readOnly") else ""
    if "emptyDir" in volume:
        size = (volume["emptyDir"] or {}).get("sizeLimit")
        size_option = f",tmpfs-size={int(parse_quantity(size))}" if size else ""
        return f"--mount=type=tmpfs,destination={target},tmpfs-mode=1777{size_option}"
    if "persistentVolumeClaim" in volume:
        host = claims[volume["persistentVolumeClaim"]["claimName"]]
        host.mkdir(parents=True, exist_ok=True)
        # what fsGroup does to a volume's root (fsGroupChangePolicy OnRootMismatch)
        if fs_group is not None and host.stat().st_gid != fs_group:
            os.chown(host, 0, fs_group)
            os.chmod(host, 0o2770)
        return f"--mount=type=bind,source={host},destination={target}{read_only}"
    for kind, key in (("Secret", "secret"), ("ConfigMap", "configMap")):
        if key in volume:
            source = volume[key]
            name = source["secretName"] if kind == "Secret" else source["name"]
            break
    else:
        raise ValueError(f"volume {volume['name']}: unsupported kind {sorted(volume)}")
    data = objects.get(kind, {}).get(name)
    if data is None:
        raise ValueError(f"{kind} {name} (volume {volume['name']}) is neither rendered nor "
                         f"given as an existing object")
    files = {item["path"]: (data[item["key"]], item.get("mode")) for item in source["items"]} \
        if "items" in source else {key: (value, None) for key, value in data.items()}
    host = root / volume["name"]
    host.mkdir(parents=True, exist_ok=True)
    os.chmod(host, 0o755)
    default_mode = source.get("defaultMode", 0o644)
    for path, (content, mode) in files.items():
        file = host / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(content)
        if fs_group is not None:
            os.chown(file, 0, fs_group)
        os.chmod(file, mode if mode is not None else default_mode)
    return f"--mount=type=bind,source={host},destination={target},ro=true"
