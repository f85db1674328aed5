"""The container images, checked without a container engine: deploy/Dockerfile and the kind
example's Dockerfile linted by hadolint (strictest threshold, no ignore pragmas), parsed and held
to what the chart and the docs rely on (a slim Python base, the builder's wheels only, no
compilers, a numeric non-root user, `gateway serve` with the flags the real parser accepts, OCI
labels), the HEALTHCHECK command run against a real gateway, and the build context that
.dockerignore lets through checked against what the Dockerfiles COPY."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from dockerfile_parse import DockerfileParser

from gateway.cli import build_parser
from gateway.options import ServeOptions
from tests.support.buildcontext import context_files, dockerignore_pattern, in_context
from tests.support.gateway import GatewayProcess, free_port

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
EXAMPLE_DOCKERFILE = ROOT / "deploy" / "kind" / "example" / "Dockerfile"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
#: Compilers and build tools: none may be installed in a final stage.
BUILD_TOOLS = {"gcc", "g++", "cc", "c++", "clang", "make", "cmake", "build-essential", "rustc",
               "cargo", "gfortran", "autoconf", "automake", "libtool", "pkg-config", "cython",
               "maturin", "setuptools-rust", "python3-dev", "python-dev"}
PACKAGE_MANAGERS = {"apt-get", "apt", "apk", "yum", "dnf", "microdnf", "conda"}
OCI_LABELS = ("title", "description", "licenses", "version", "revision")


def tool(name: str) -> str:
    """A test tool installed by the test extra next to this interpreter."""
    path = Path(sys.executable).parent / name
    assert path.exists(), f"{name} is missing: pip install -e '.[test]'"
    return str(path)


def stages(path: Path) -> list[list[dict[str, Any]]]:
    """The instructions of each stage (comments dropped), in order."""
    out: list[list[dict[str, Any]]] = []
    for item in DockerfileParser(str(path), cache_content=True).structure:
        if item["instruction"] == "FROM":
            out.append([])
        if out and item["instruction"] != "COMMENT":
            out[-1].append(item)
    return out


def instructions(stage: list[dict[str, Any]], name: str) -> list[str]:
    return [item["value"] for item in stage if item["instruction"] == name]


def exec_form(value: str) -> list[str]:
    """A JSON-array (exec form) ENTRYPOINT or CMD; shell form is refused."""
    parsed = json.loads(value)
    assert isinstance(parsed, list) and all(isinstance(p, str) for p in parsed), value
    return parsed


# ---------------------------------------------------------------------------------------------
# lint
# ---------------------------------------------------------------------------------------------

def test_hadolint_finds_nothing(tmp_path: Path) -> None:
    # an explicit empty configuration: no ambient .hadolint.yaml can ignore a rule
    config = tmp_path / "hadolint.yaml"
    config.write_text("ignored: []\n")
    result = subprocess.run(
        [tool("hadolint"), "--config", str(config), "--no-color", "--format", "json",
         "--failure-threshold", "style", "--disable-ignore-pragma",
         str(DOCKERFILE), str(EXAMPLE_DOCKERFILE)],
        capture_output=True, text=True, cwd=tmp_path, timeout=60)
    findings = json.loads(result.stdout or "[]")
    assert result.returncode == 0 and findings == [], (
        "hadolint:\n" + "\n".join(f"{f['file']}:{f['line']} {f['code']} {f['message']}"
                                  for f in findings) + result.stderr)


def test_hadolint_reports_a_bad_dockerfile(tmp_path: Path) -> None:
    """The lint runs for real: an unpinned apt-get install of a compiler is reported."""
    bad = tmp_path / "Dockerfile"
    bad.write_text(DOCKERFILE.read_text().replace(
        "USER 65532:65532", "RUN apt-get update && apt-get install -y gcc\nUSER 65532:65532"))
    result = subprocess.run([tool("hadolint"), "--no-color", "--format", "json", str(bad)],
                            capture_output=True, text=True, timeout=60)
    codes = {finding["code"] for finding in json.loads(result.stdout)}
    assert result.returncode != 0 and {"DL3008", "DL3009", "DL3015"} <= codes, codes


# ---------------------------------------------------------------------------------------------
# the gateway image
# ---------------------------------------------------------------------------------------------

def test_builds_a_virtualenv_then_copies_it_into_a_slim_python() -> None:
    builder, final = stages(DOCKERFILE)
    parser = DockerfileParser(str(DOCKERFILE), cache_content=True)
    base_builder, base_final = parser.parent_images
    assert base_builder == base_final, "the virtualenv is built for the final stage's Python"
    match = re.fullmatch(r"python:(3)\.(\d+)-slim(-\w+)?", base_final)
    assert match, f"the final base is not a slim Python image: {base_final}"
    minimum = re.search(r">=\s*3\.(\d+)", PYPROJECT["project"]["requires-python"])
    assert minimum and int(match.group(2)) >= int(minimum.group(1))
    runs = instructions(builder, "RUN")
    assert any("python -m venv /opt/gateway" in run for run in runs)
    # the dependencies before the code is copied (their layer outlives a change to the code),
    # then the project
    copies = instructions(builder, "COPY")
    assert copies[0].split()[:-1] == ["pyproject.toml"], copies
    assert any(re.search(r"/opt/gateway/bin/pip install --no-deps [^&]*\s\.(\s|$)", run)
               for run in runs)
    # the final stage takes the virtualenv and installs nothing itself
    assert instructions(final, "COPY") == ["--from=builder /opt/gateway /opt/gateway"]
    assert not [run for run in instructions(final, "RUN") if re.search(r"\bpip\b", run)]
    assert any(env.startswith("PATH=/opt/gateway/bin:") for env in instructions(final, "ENV"))


def test_no_compilers_or_package_managers_in_the_final_stage() -> None:
    builder, final = stages(DOCKERFILE)
    for run in instructions(final, "RUN"):
        words = set(re.split(r"[\s;&|()]+", run))
        assert not words & PACKAGE_MANAGERS, f"the final stage installs system packages: {run}"
        assert not words & BUILD_TOOLS, f"the final stage installs a build tool: {run}"
        assert not [w for w in words if w.endswith("-dev")], run
    # the compiler is the builder's, which gives the final stage its virtualenv only (checked
    # above); tests/deploy/test_image.py looks for compilers in the built image itself
    assert any("gcc" in run for run in instructions(builder, "RUN"))


def test_runs_as_a_numeric_non_root_user() -> None:
    users = instructions(stages(DOCKERFILE)[-1], "USER")
    assert users, "the final stage sets no USER: it would run as root"
    match = re.fullmatch(r"(\d+)(?::(\d+))?", users[-1])
    assert match, f"USER {users[-1]} is not numeric: runAsNonRoot cannot verify a name"
    uid = int(match.group(1))
    assert uid != 0 and int(match.group(2) or uid) != 0
    # the chart runs the image as that very user
    values = yaml.safe_load((ROOT / "deploy/chart/gateway/values.yaml").read_text())
    assert values["podSecurityContext"]["runAsUser"] == uid
    assert values["securityContext"]["runAsUser"] == uid


def test_entrypoint_is_gateway_serve_with_flags_the_parser_accepts() -> None:
    final = stages(DOCKERFILE)[-1]
    entrypoint = exec_form(instructions(final, "ENTRYPOINT")[-1])
    assert entrypoint[:2] == ["gateway", "serve"]
    args = build_parser().parse_args(entrypoint[1:])
    options = ServeOptions.from_args(args)
    volumes = {v for value in instructions(final, "VOLUME") for v in exec_form(value)}
    assert {str(options.data_dir), str(options.cert_dir)} <= volumes, volumes
    assert instructions(final, "EXPOSE") == [str(options.secure_port)]
    # the script the wheel installs is the one named
    assert PYPROJECT["project"]["scripts"]["gateway"] == "gateway.cli:main"


def test_oci_labels() -> None:
    parser = DockerfileParser(str(DOCKERFILE), cache_content=True)
    labels = parser.labels
    assert labels["org.opencontainers.image.base.name"] == parser.baseimage
    for name in OCI_LABELS:
        assert labels.get(f"org.opencontainers.image.{name}"), f"label {name} missing"
    assert labels["org.opencontainers.image.version"] == PYPROJECT["project"]["version"]
    assert labels["org.opencontainers.image.licenses"] == PYPROJECT["project"]["license"]["text"]


@pytest.mark.slow
def test_healthcheck_command_checks_a_real_gateway(tmp_path: Path) -> None:
    final = stages(DOCKERFILE)[-1]
    value = instructions(final, "HEALTHCHECK")[-1]
    command = exec_form(value[value.index("CMD") + 3:].strip())
    assert command[0] == "python" and "6443" in command[-1]

    def check(port: int) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, *command[1:-1], command[-1].replace("6443", str(port))]
        return subprocess.run(argv, capture_output=True, text=True, timeout=30)

    with GatewayProcess(tmp_path / "gw") as gateway:
        healthy = check(gateway.port)
        assert healthy.returncode == 0, healthy.stderr
    assert check(free_port()).returncode != 0  # nothing listening: unhealthy


# ---------------------------------------------------------------------------------------------
# the build context
# ---------------------------------------------------------------------------------------------

def copy_sources(path: Path) -> list[str]:
    sources = []
    for stage in stages(path):
        for value in instructions(stage, "COPY"):
            words = [w for w in shlex.split(value) if not w.startswith("--")]
            if "--from=" not in value:
                sources += words[:-1]
    return sources


def test_dockerignore_rules_behave_as_docker_reads_them() -> None:
    rules = [(False, dockerignore_pattern("*")), (True, dockerignore_pattern("gateway")),
             (False, dockerignore_pattern("**/__pycache__"))]
    assert in_context("gateway/cli.py", rules)
    assert not in_context("gateway/app/__pycache__/run.cpython-311.pyc", rules)
    assert not in_context("docs/deploy.md", rules)


def test_build_context_holds_what_the_dockerfiles_copy_and_nothing_secret() -> None:
    files = context_files()
    for dockerfile in (DOCKERFILE, EXAMPLE_DOCKERFILE):
        for source in copy_sources(dockerfile):
            source = source.rstrip("/")
            assert source in files or any(f.startswith(source + "/") for f in files), (
                f"{dockerfile.relative_to(ROOT)} copies {source}, which .dockerignore leaves "
                f"out of the build context")
    assert PYPROJECT["project"]["readme"] in files  # the wheel's metadata reads it
    assert "gateway/cli.py" in files
    for path in files:
        top = path.split("/")[0]
        assert top in {"pyproject.toml", "setup.py", "README.md", "gateway", "examples"}, path
        assert not path.endswith((".key", ".kubeconfig", ".db")), path
    # the kind example's image: examples/wardle, whose every module it copies
    example = {"examples/__init__.py", *(str(path.relative_to(ROOT)) for path in
                                        (ROOT / "examples" / "wardle").rglob("*.py"))}
    assert {f for f in files if f.startswith("examples/")} == example
    assert set(copy_sources(EXAMPLE_DOCKERFILE)) == example
