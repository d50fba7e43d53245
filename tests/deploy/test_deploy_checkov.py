"""checkov (built-in CKV_K8S_* plus the DocQuery rules in policies/checkov): 0 failed."""

from __future__ import annotations

import re

import deploy_support as ds
import negative_cases
import pytest
from deploy_support import CheckovRun


def _defined_ids() -> set[str]:
    ids: set[str] = set()
    for path in ds.CHECKOV_DIR.iterdir():
        if path.suffix == ".py":
            ids |= set(re.findall(r'id="(CKV2?_DQ_\d+)"', path.read_text()))
        elif path.suffix == ".yaml":
            ids |= set(re.findall(r"^\s*id:\s*(CKV2?_DQ_\d+)", path.read_text(), re.M))
    return ids


def _fmt(results: list[dict]) -> str:
    return "\n".join(f"{r['check_id']} {r['resource']} {r.get('file_path')}" for r in results)


@pytest.mark.parametrize("name", sorted(ds.combos()))
def test_checkov_passes(checkov_runs: dict[str, CheckovRun], name: str) -> None:
    run = checkov_runs[name]
    assert run.reports, "checkov produced no report"
    assert run.summary["parsing_errors"] == 0
    assert run.summary["failed"] == 0, _fmt(run.results("failed"))
    assert run.summary["passed"] > 0


def test_every_skip_carries_its_reason(checkov_runs: dict[str, CheckovRun]) -> None:
    for name, run in checkov_runs.items():
        if name == "negative":
            continue
        for r in run.results("skipped"):
            assert (r.get("check_result", {}).get("suppress_comment") or "").strip(), (name, r["check_id"])


def test_every_custom_rule_loaded_and_ran(checkov_runs: dict[str, CheckovRun]) -> None:
    """checkov logs and carries on when an external check fails to import: catch that."""
    defined = _defined_ids()
    assert len(defined) >= 14
    seen = {r["check_id"] for run in checkov_runs.values() for r in run.results("passed") + run.results("failed")}
    assert defined <= seen, sorted(defined - seen)


def test_every_custom_rule_fails_on_its_negative_case(checkov_runs: dict[str, CheckovRun]) -> None:
    failed = {(r["check_id"], r["resource"]) for r in checkov_runs["negative"].results("failed")}
    missing = []
    for resource, check_id in negative_cases.expected().items():
        if not any(cid == check_id and f".{resource}" in res for cid, res in failed):
            missing.append(f"{check_id} did not fail on {resource}")
    assert not missing, "\n".join(missing)
    assert {cid for cid in negative_cases.expected().values()} == _defined_ids()


def test_dockerfile_checks(checkov_runs: dict[str, CheckovRun]) -> None:
    run = checkov_runs["dockerfile"]
    assert run.summary["failed"] == 0, _fmt(run.results("failed"))
    passed = {r["check_id"] for r in run.results("passed")}
    # HEALTHCHECK present, non-root USER, base image not "latest"
    assert {"CKV_DOCKER_2", "CKV_DOCKER_3", "CKV_DOCKER_7"} <= passed
