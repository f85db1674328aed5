"""Reading an audit policy file: what is not a policy is a PolicyError (one line, which stops
the start cleanly: gateway/app/run.py), never another exception with a stack trace."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.auth.audit.policy import Level, Policy, PolicyError, load_policy

HEAD = "apiVersion: audit.k8s.io/v1\nkind: Policy\n"


def _load(tmp_path: Path, text: str) -> Policy:
    path = tmp_path / "policy.yaml"
    path.write_text(HEAD + text)
    return load_policy(path)


def test_omitted_stages_are_read(tmp_path: Path) -> None:
    policy = _load(tmp_path, "omitStages: [RequestReceived]\n"
                             "rules:\n- level: Metadata\n  omitStages: [ResponseStarted]\n")
    assert policy.omit_stages == ("RequestReceived",)
    assert policy.rules[0].level == Level.METADATA
    assert policy.rules[0].omit_stages == ("ResponseStarted",)


@pytest.mark.parametrize("text", [
    "omitStages: 5\n",  # was a TypeError ('int' object is not iterable), found by mypy
    "omitStages: true\n",
    "rules:\n- level: Metadata\n  omitStages: 5\n",
])
def test_omitted_stages_that_are_not_a_list(tmp_path: Path, text: str) -> None:
    with pytest.raises(PolicyError, match="omitStages: not a list of stages"):
        _load(tmp_path, text)


def test_an_unknown_stage(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="unknown stage 'Sometime'"):
        _load(tmp_path, "omitStages: [Sometime]\n")
