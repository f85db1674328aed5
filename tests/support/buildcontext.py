"""The build context of the project's Dockerfiles: what `docker build .` (or podman's) sends
from the repository root once .dockerignore has had its say. The Dockerfile tests check it; the
image tests hash it to know whether an image is still current."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def dockerignore_pattern(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern (Go's filepath.Match plus **) as a regular expression."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out)


def dockerignore_rules() -> list[tuple[bool, re.Pattern[str]]]:
    rules = []
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keep = line.startswith("!")
        rules.append((keep, dockerignore_pattern(line.lstrip("!").strip("/"))))
    return rules


def in_context(path: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Docker's rule: the last pattern matching the path or a parent of it decides."""
    parts = path.split("/")
    prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    included = True
    for keep, regex in rules:
        if any(regex.fullmatch(prefix) for prefix in prefixes):
            included = keep
    return included


def context_files() -> set[str]:
    """What `docker build .` would send from a checkout: the repository's files (tracked, or new
    and not ignored by git) that .dockerignore lets through."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True, timeout=60).stdout
    rules = dockerignore_rules()
    return {path for path in listed.splitlines() if in_context(path, rules)}
