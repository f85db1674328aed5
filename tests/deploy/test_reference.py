"""docs/reference/ says what the code does: the flag and metric reference regenerated from the
argument parser and the metrics registry must equal the committed files, and no metric declared
anywhere in gateway/ may be missing from it."""

from __future__ import annotations

import ast
from pathlib import Path

from tools import reference

ROOT = Path(__file__).resolve().parents[2]
METRIC_TYPES = {"Counter", "Gauge", "Histogram", "Summary", "Info", "Enum"}


def test_reference_matches_the_code() -> None:
    stale = reference.stale()
    assert not stale, (
        f"{', '.join(map(str, stale))} differ from the code (a flag or metric was added, "
        f"removed or changed). Regenerate with:\n\n    {reference.COMMAND}\n\n"
        + "\n".join(diff[:4000] for diff in stale.values()))


def declared_metric_names() -> dict[str, str]:
    """Metric name → file:line, for every prometheus_client metric constructed with a literal
    name anywhere in gateway/ (also those the Gateway object does not register at start)."""
    names = {}
    for path in sorted((ROOT / "gateway").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            first = node.args[0]
            if called in METRIC_TYPES and isinstance(first, ast.Constant) \
                    and isinstance(first.value, str):
                names[first.value] = f"{path.relative_to(ROOT)}:{node.lineno}"
    return names


def test_every_declared_metric_is_in_the_reference() -> None:
    declared = declared_metric_names()
    assert "apiserver_request_duration_seconds" in declared  # the scan finds metrics at all
    documented = {metric["name"] for metric in reference.collect_metrics()}
    missing = {name: where for name, where in declared.items() if name not in documented}
    assert not missing, (
        f"metrics declared in the code but not in the registry the gateway serves, so not in "
        f"docs/reference/metrics.md: {missing}. Register them in the Gateway's registry "
        f"(gateway.metrics.registry) and regenerate with: {reference.COMMAND}")


def test_a_stale_reference_is_reported(tmp_path: Path) -> None:
    """The check compares for real: an edited file is named with a diff of the change."""
    for path, text in reference.render().items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text.replace("`--secure-port`", "`--secure-prot`"))
    stale = reference.stale(tmp_path)
    assert list(stale) == [reference.FLAGS_MD]
    assert "-| `--secure-prot` |" in stale[reference.FLAGS_MD]
    assert "+| `--secure-port` |" in stale[reference.FLAGS_MD]
