"""podman for tests: images built from the project's Dockerfiles and containers run from them.

Images are built on a local stand-in for the Python base image, made by the shared
``container-base.sh`` (Debian bookworm's Python from debootstrap: no image registry is needed,
only Debian's and PyPI's servers). podman keeps the base, the layers and pip's cache mount
between runs on one machine, so only the first build is slow, and an image whose inputs have
not changed is not built again at all.

The flags are the ones that machine needs (the script's header says why): runc as the runtime,
rlimits within the host's, the host's network for the build's downloads. Containers get a
network namespace of their own (slirp4netns, as a pod has its own), with their ports published
on 127.0.0.1 and the host's loopback reachable at ``HOST_LOOPBACK``.

When podman cannot run (not root, no runc, no script), ``PodmanUnusable`` says why: a test
that needs it fails with that reason rather than skipping.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.buildcontext import context_files

ROOT = Path(__file__).resolve().parents[2]
#: The shared script making the stand-in base (``../shared/tools`` next to the clone).
BASE_SCRIPT = ROOT.parent / "shared" / "tools" / "container-base.sh"
BASE_IMAGE = "localhost/python:3.11-slim-bookworm-local"
PODMAN = ("podman", "--runtime", "runc")
#: podman's default rlimits exceed this kind of machine's; the same for builds and containers.
ULIMITS = ("--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024")
#: The host's 127.0.0.1 as a container on slirp4netns with allow_host_loopback sees it.
HOST_LOOPBACK = "10.0.2.2"
#: A container's own address on slirp4netns (a pod's IP).
CONTAINER_IP = "10.0.2.100"
NETWORK = "slirp4netns:allow_host_loopback=true"
#: Serializes base and image builds among the test processes of a machine (xdist workers,
#: engineers): a second build waits and then finds every layer cached.
LOCK = Path("/var/tmp/gateway-podman-tests.lock")


class PodmanUnusable(RuntimeError):
    """podman cannot build or run containers here; the message says why and what to do."""


def podman(*args: str, timeout: float = 120, check: bool = True,
           input: str | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([*PODMAN, *args], capture_output=True, text=True, timeout=timeout,
                            input=input)
    if check and result.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args[:3])} ... failed ({result.returncode}):\n"
                           f"{result.stderr[-4000:]}")
    return result


@contextlib.contextmanager
def machine_lock() -> Iterator[None]:
    with open(LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def require() -> None:
    """Make sure podman can build and run here, making the base image (and installing podman,
    runc and debootstrap with apt) when missing; PodmanUnusable with the reason otherwise."""
    if os.geteuid() != 0:
        raise PodmanUnusable(
            "the image tests run podman as root (rootful podman with runc, as the shared "
            "container-base.sh sets it up); run the suite as root, as CI does")
    with machine_lock():
        if not shutil.which("podman") or subprocess.run(
                ["podman", "image", "exists", BASE_IMAGE], capture_output=True).returncode != 0:
            make_base()
    if not shutil.which("slirp4netns"):  # podman recommends it; a bare install may lack it
        apt_install("slirp4netns")
    for tool in ("podman", "runc", "slirp4netns"):
        if not shutil.which(tool):
            raise PodmanUnusable(f"{tool} is not installed: apt-get install -y {tool}")
    probe = podman("run", "--rm", "--network=none", *ULIMITS, BASE_IMAGE, "true", check=False,
                   timeout=120)
    if probe.returncode != 0:
        raise PodmanUnusable(f"podman cannot run a container here:\n{probe.stderr[-2000:]}")


def apt_install(*packages: str) -> None:
    """apt-get install, as the shared base script installs its tools; PodmanUnusable when it
    fails."""
    result = subprocess.run(["sh", "-c", "apt-get update -qq && apt-get install -y -qq " +
                             " ".join(packages)], capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        raise PodmanUnusable(f"apt-get install {' '.join(packages)} failed:\n"
                             f"{result.stderr[-2000:]}")


def make_base() -> None:
    """The shared script: the stand-in base image (a few minutes, once per machine)."""
    if not BASE_SCRIPT.exists():
        raise PodmanUnusable(f"{BASE_SCRIPT} is missing: it makes the base image "
                             f"{BASE_IMAGE} (the project's shared tools, next to the clone)")
    result = subprocess.run(["bash", str(BASE_SCRIPT), BASE_IMAGE], capture_output=True,
                            text=True, timeout=1800)
    if result.returncode != 0:
        raise PodmanUnusable(f"{BASE_SCRIPT.name} could not make {BASE_IMAGE} "
                             f"({result.returncode}):\n{result.stdout[-2000:]}"
                             f"{result.stderr[-2000:]}")


def image_id(reference: str) -> str | None:
    result = podman("image", "inspect", "--format", "{{.Id}}", reference, check=False)
    return result.stdout.strip() if result.returncode == 0 else None


def inspect_image(reference: str) -> dict:
    return json.loads(podman("image", "inspect", reference).stdout)[0]


@contextlib.contextmanager
def mounted(reference: str) -> Iterator[Path]:
    """The image's root filesystem, mounted read-only on the host while the block runs."""
    path = Path(podman("image", "mount", reference).stdout.strip())
    try:
        yield path
    finally:
        podman("image", "unmount", reference, check=False)


@dataclass
class Build:
    tag: str
    id: str
    seconds: float
    #: the images this build untagged (the tag's, and kept stages'), to remove_chains() later
    replaced: list[str] = field(default_factory=list)
    current: bool = False  # the tag already held an image of the same inputs: no build ran


#: The label holding a digest of everything a build reads (see ``inputs_digest``).
INPUTS_LABEL = "org.gateway.tests.build-inputs"


def inputs_digest(dockerfile: Path, build_args: dict[str, str], labels: dict[str, str]
                  ) -> str:
    """A digest of a build's inputs: the Dockerfile, the arguments (with the ID of the local
    image an argument names, such as the base), the labels, and every file of the build
    context."""
    digest = hashlib.sha256(dockerfile.read_bytes())
    for key, value in sorted(build_args.items()) + sorted(labels.items()):
        digest.update(f"\0{key}={value}={image_id(value) if '/' in value else ''}".encode())
    for path in sorted(context_files()):
        file = ROOT / path
        if file.is_file():
            digest.update(f"\0{path}\0".encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()


def stage_tag(tag: str, stage: str) -> str:
    """Where a kept stage of ``tag``'s build is tagged: repo-stage:version."""
    repository, _, version = tag.rpartition(":")
    return f"{repository}-{stage}:{version}"


def build(dockerfile: Path, tag: str, *, build_args: dict[str, str] | None = None,
          labels: dict[str, str] | None = None, keep_stages: tuple[str, ...] = (),
          log: Path | None = None, timeout: float = 1800) -> Build:
    """The image ``tag`` of ``dockerfile`` (the repository root as context): found current
    when its inputs have not changed since it was built, otherwise ``podman build`` in
    docker format (OCI images drop HEALTHCHECK) with the layer cache. RuntimeError with the
    end of the build's output when it fails.

    ``labels`` are set on the image whatever the cache holds (a Dockerfile LABEL made from a
    build argument is not: buildah reuses the cached step when only the argument changed).
    ``keep_stages`` are built and tagged first (``stage_tag``): a builder stage the final
    image does not descend from is then a chain of its own that remove_chains() can clean."""
    build_args, labels = dict(build_args or {}), dict(labels or {})
    args = [f"--build-arg={k}={v}" for k, v in build_args.items()]
    output = ""
    with machine_lock():
        inputs = inputs_digest(dockerfile, build_args, labels)
        before = image_id(tag)
        if before and inspect_image(tag).get("Labels", {}).get(INPUTS_LABEL) == inputs:
            return Build(tag, before, 0.0, current=True)
        started = time.monotonic()
        replaced = []
        targets = [(["--target", stage], stage_tag(tag, stage)) for stage in keep_stages]
        finals = [f"--label={k}={v}" for k, v in {**labels, INPUTS_LABEL: inputs}.items()]
        for target, name in [*targets, (finals, tag)]:
            old = image_id(name)
            result = podman("build", "--format=docker", "--layers", "--network=host", *ULIMITS,
                            *args, *target, "-f", str(dockerfile), "-t", name, str(ROOT),
                            timeout=timeout, check=False)
            output += result.stdout + result.stderr
            if log is not None:
                log.write_text(output)
            if result.returncode != 0:
                raise RuntimeError(f"podman build -f {dockerfile.relative_to(ROOT)} -t {name} "
                                   f"failed ({result.returncode}):\n{output[-6000:]}")
            if old not in (None, image_id(name)):
                replaced.append(old)
        seconds = time.monotonic() - started
    after = image_id(tag)
    assert after, f"the build left no image tagged {tag}"
    return Build(tag, after, seconds, replaced)


def remove_chains(*images: str) -> None:
    """Best effort: each image a rebuild replaced and its untagged ancestors that no other
    image builds on (the old build's own layers), so repeated builds do not pile up.
    podman refuses to remove an image another one builds on or a container uses, which ends
    the walk where the old build shares layers with the new one."""
    for image in images:
        current: str | None = image
        while current:
            found = podman("image", "inspect", current, check=False)
            if found.returncode != 0:
                break
            info = json.loads(found.stdout)[0]
            if current != image and info.get("RepoTags"):
                break
            if podman("rmi", current, check=False).returncode != 0:
                break
            current = info.get("Parent") or None


class Container:
    """One detached container; a context manager that removes it (and its anonymous
    volumes) on exit."""

    def __init__(self, image: str, options: list[str], args: list[str], *,
                 name: str | None = None) -> None:
        self.image = image
        self.options = options
        self.args = args
        self.name = name or f"gateway-test-{uuid.uuid4().hex[:10]}"

    def start(self) -> Container:
        podman("run", "-d", "--name", self.name, f"--network={NETWORK}", *ULIMITS,
               *self.options, self.image, *self.args, timeout=180)
        return self

    def inspect(self) -> dict:
        return json.loads(podman("container", "inspect", self.name).stdout)[0]

    @property
    def running(self) -> bool:
        return bool(self.inspect()["State"]["Running"])

    def exec(self, *command: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return podman("exec", self.name, *command, timeout=timeout, check=False)

    def healthcheck(self) -> subprocess.CompletedProcess[str]:
        """The image's HEALTHCHECK, run once now (exit 0: healthy)."""
        return podman("healthcheck", "run", self.name, timeout=60, check=False)

    def logs(self) -> str:
        result = podman("logs", self.name, check=False)
        return (result.stdout + result.stderr)[-6000:]

    def stop(self, grace: float) -> tuple[int, float]:
        """SIGTERM, then SIGKILL after ``grace`` seconds, as the kubelet stops a container:
        (exit code, seconds it took)."""
        started = time.monotonic()
        podman("stop", "-t", str(int(grace)), self.name, timeout=grace + 60)
        return int(self.inspect()["State"]["ExitCode"]), time.monotonic() - started

    def remove(self) -> None:
        podman("rm", "-f", "-v", self.name, check=False, timeout=120)

    def __enter__(self) -> Container:
        try:
            return self.start()
        except BaseException:
            self.remove()
            raise

    def __exit__(self, *exc: object) -> None:
        self.remove()
