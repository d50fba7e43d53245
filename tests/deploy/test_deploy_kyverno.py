"""The Kyverno twins of the checkov rules: one per rule, well-formed, expressions parse.

No Kyverno CLI installs here, so this checks what can be checked offline:
structure, the checkov-id mapping, JMESPath syntax (with the jmespath package
from the tools venv), and, where only standard JMESPath functions are used,
the expressions' results on the rendered bundle.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import deploy_support as ds
import yaml
from deploy_support import Rendering


def _policies() -> list[tuple[Path, dict[str, Any]]]:
    out = []
    for path in sorted(ds.KYVERNO_DIR.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            out.append((path, doc))
    return out


def _strings(x: Any) -> Iterator[str]:
    if isinstance(x, dict):
        for v in x.values():
            yield from _strings(v)
    elif isinstance(x, list):
        for v in x:
            yield from _strings(v)
    elif isinstance(x, str):
        yield x


def _checkov_ids() -> set[str]:
    ids: set[str] = set()
    for path in ds.CHECKOV_DIR.iterdir():
        if path.suffix == ".py":
            ids |= set(re.findall(r'id="(CKV2?_DQ_\d+)"', path.read_text()))
        elif path.suffix == ".yaml":
            ids |= set(re.findall(r"^\s*id:\s*(CKV2?_DQ_\d+)", path.read_text(), re.M))
    return ids


def test_every_checkov_rule_has_a_kyverno_counterpart() -> None:
    mapped: set[str] = set()
    for _path, doc in _policies():
        ids = doc["metadata"]["annotations"]["docquery.io/checkov-ids"]
        mapped |= {i.strip() for i in ids.split(",")}
    assert mapped == _checkov_ids(), (sorted(_checkov_ids() - mapped), sorted(mapped - _checkov_ids()))


def test_policies_are_well_formed_and_listed() -> None:
    listed = set(yaml.safe_load((ds.KYVERNO_DIR / "kustomization.yaml").read_text())["resources"])
    files = {p.name for p, _ in _policies()}
    assert listed == files
    names = set()
    for path, doc in _policies():
        assert doc["apiVersion"] == "kyverno.io/v1" and doc["kind"] == "ClusterPolicy", path
        assert doc["metadata"]["name"].startswith("docquery-")
        names.add(doc["metadata"]["name"])
        rules = doc["spec"]["rules"]
        assert rules and len({r["name"] for r in rules}) == len(rules)
        for rule in rules:
            assert set(rule) <= {"name", "match", "exclude", "preconditions", "context", "validate"}, rule["name"]
            assert rule["match"]["any"] and all("resources" in m for m in rule["match"]["any"])
            v = rule["validate"]
            assert v["failureAction"] == "Enforce", (path, rule["name"])
            kinds = [k for k in v if k in ("pattern", "anyPattern", "deny", "foreach", "podSecurity", "cel")]
            assert len(kinds) == 1, (path, rule["name"], kinds)
            for text in _strings(rule):
                assert text.count("{{") == text.count("}}"), (path, rule["name"], text)
    assert len(names) == len(_policies())


def _expressions() -> list[str]:
    exprs: list[str] = []
    for _path, doc in _policies():
        for rule in doc["spec"]["rules"]:
            for text in _strings(rule):
                exprs += [e.strip() for e in re.findall(r"\{\{(.*?)\}\}", text)]
            for fe in rule["validate"].get("foreach") or []:
                exprs.append(fe["list"])
            for ctx in rule.get("context") or []:
                if "apiCall" in ctx:
                    exprs.append(ctx["apiCall"]["jmesPath"])
    return exprs


def _jmespath(policy_python: Path, program: str, payload: Any) -> Any:
    proc = subprocess.run(
        [str(policy_python), "-c", program], input=json.dumps(payload), capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_every_jmespath_expression_parses(policy_python: Path) -> None:
    program = (
        "import json, sys, jmespath\n"
        "bad = []\n"
        "for e in json.load(sys.stdin):\n"
        "    try: jmespath.compile(e)\n"
        "    except Exception as exc: bad.append(f'{e}: {exc}')\n"
        "print(json.dumps(bad))\n"
    )
    exprs = _expressions()
    assert len(exprs) > 20
    assert _jmespath(policy_python, program, exprs) == []


def test_default_deny_lookup_finds_the_bundles_policy(policy_python: Path, renderings: dict[str, Rendering]) -> None:
    """Evaluate require-default-deny's apiCall jmesPath on the rendered NetworkPolicies."""
    doc = yaml.safe_load((ds.KYVERNO_DIR / "require-default-deny.yaml").read_text())
    expr = doc["spec"]["rules"][0]["context"][0]["apiCall"]["jmesPath"]
    program = (
        "import json, sys, jmespath\n"
        "d = json.load(sys.stdin)\n"
        "print(json.dumps([jmespath.search(d['expr'], {'items': items}) for items in d['lists']]))\n"
    )
    prod = renderings["overlay-prod"].of_kind("NetworkPolicy")
    without_default = [np for np in prod if np["metadata"]["name"] != "default-deny-all"]
    assert _jmespath(policy_python, program, {"expr": expr, "lists": [prod, without_default]}) == [1, 0]


def test_world_cidr_lookup_sees_ipblocks(policy_python: Path) -> None:
    doc = yaml.safe_load((ds.KYVERNO_DIR / "network-egress.yaml").read_text())
    key = doc["spec"]["rules"][0]["validate"]["deny"]["conditions"]["any"][0]["key"]
    expr = re.search(r"\{\{(.*)\}\}", key).group(1).strip().replace("request.object.", "", 1)
    program = (
        "import json, sys, jmespath\nd = json.load(sys.stdin)\nprint(json.dumps(jmespath.search(d['expr'], d['np'])))\n"
    )
    np = {"spec": {"egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}]}}
    assert _jmespath(policy_python, program, {"expr": expr, "np": np}) == ["0.0.0.0/0"]
