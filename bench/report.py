"""What a benchmark writes besides its printout: the machine it ran on, a block of
docs/performance.md, and plots.

A benchmark owns the text between ``<!-- NAME begin -->`` and ``<!-- NAME end -->`` in the
document; everything outside those markers is written by people and kept as it is.
"""

from __future__ import annotations

import datetime
import os
import platform
import re
import subprocess
from pathlib import Path

from bench.gotools import ToolMissing

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "performance.md"


def machine() -> dict[str, str]:
    """CPU model, cores, memory, kernel, Python, the date and the gateway's commit."""
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        kib = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f"{kib / 2**20:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": model,
        "cores": str(os.cpu_count()),
        "memory": memory,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "commit": commit + (" (with uncommitted changes)" if dirty else ""),
    }


def machine_line(info: dict[str, str]) -> str:
    return (f"{info['date']}; {info['cpu']}, {info['cores']} cores, {info['memory']}; "
            f"Linux {info['kernel']}; Python {info['python']}; gateway {info['commit']}")


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name} begin -->", f"<!-- {name} end -->"


def read_block(path: Path, name: str) -> str | None:
    if not path.exists():
        return None
    begin, end = markers(name)
    match = re.search(re.escape(begin) + r"\n(.*?)" + re.escape(end), path.read_text(), re.S)
    return match.group(1) if match else None


def write_block(path: Path, name: str, text: str) -> None:
    """Put ``text`` between the markers of ``name`` (appended at the end if none yet)."""
    begin, end = markers(name)
    block = f"{begin}\n{text.rstrip()}\n{end}"
    old = path.read_text() if path.exists() else "# Performance\n"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    new = pattern.sub(lambda _: block, old) if pattern.search(old) else \
        old.rstrip() + "\n\n" + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(new)


def pyplot():
    """matplotlib's pyplot on the Agg backend (files only), or a clear error."""
    try:
        import matplotlib
    except ImportError:
        raise ToolMissing("plots need matplotlib: pip install '.[bench]' "
                          "(or pass --no-docs)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def line_plot(path: Path, title: str, xlabel: str, panels: list[tuple[str, dict, bool]],
              logx: bool = True) -> None:
    """One PNG of side-by-side panels; each panel is (y label, {series: [(x, y), ...]},
    whether its y axis is logarithmic)."""
    plt = pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 3.8), squeeze=False)
    for ax, (ylabel, series, logy) in zip(axes[0], panels, strict=True):
        for label, points in series.items():
            points = [(x, y) for x, y in points if y is not None]
            if points:
                xs, ys = zip(*points, strict=True)
                ax.plot(xs, ys, marker="o", label=label)
        if logx:
            ax.set_xscale("log")
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
