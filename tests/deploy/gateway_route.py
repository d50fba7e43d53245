"""Which backend a Gateway sends a request to, by the HTTPRoute matching rules of the Gateway API.

Re-stated from kubernetes-sigs/gateway-api v1.6.1 (facts/gateway-api-httproute.yaml has the
commit and path:line of each rule; no upstream code is copied): a rule matches when any of its
matches does, a match when its path and method both hold; across rules the match with an Exact
path wins, then the longest PathPrefix, then one with a method, then more header and query
matches, then the earlier rule. The path is compared as sent: the spec asks no decoding.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

FACTS: dict[str, Any] = yaml.safe_load((Path(__file__).parent / "facts" / "gateway-api-httproute.yaml").read_text())


@dataclass(frozen=True)
class Chosen:
    rule: str  # the rule's name, or its index
    backends: tuple[str, ...]  # Service names


def path_matches(kind: str, value: str, path: str) -> bool:
    if kind == "Exact":
        return path == value
    assert kind == "PathPrefix", f"path match type {kind!r}: precedence is implementation-specific"
    prefix = value.rstrip("/")  # a trailing "/" is ignored
    return prefix in ("", path) or path.startswith(prefix + "/")


def _match_key(match: dict[str, Any], rule_index: int) -> tuple[int, int, int, int, int, int]:
    """Sorts the winning match first: Exact, longer prefix, a method, more headers, more query params, earlier rule."""
    path = match.get("path") or FACTS["matching"]["default_match"]
    kind = path.get("type", "PathPrefix")
    return (
        0 if kind == "Exact" else 1,
        -len(path.get("value", "/")),
        0 if match.get("method") else 1,
        -len(match.get("headers") or []),
        -len(match.get("queryParams") or []),
        rule_index,
    )


def _holds(match: dict[str, Any], method: str, path: str) -> bool:
    assert not match.get("headers") and not match.get("queryParams"), "only path and method matches are emulated"
    where = match.get("path") or FACTS["matching"]["default_match"]
    if not path_matches(where.get("type", "PathPrefix"), where.get("value", "/"), path):
        return False
    return match.get("method") in (None, method)


def backend_for(route: dict[str, Any], method: str, path: str) -> Chosen | None:
    """The rule a Gateway applies to ``method path`` (the path as sent, without its query); None: 404."""
    candidates = []
    for i, rule in enumerate(route["spec"]["rules"]):
        for match in rule.get("matches") or [{"path": FACTS["matching"]["default_match"]}]:
            if _holds(match, method, path):
                candidates.append((_match_key(match, i), i))
    if not candidates:
        return None
    _, i = min(candidates)
    rule = route["spec"]["rules"][i]
    return Chosen(rule.get("name", str(i)), tuple(b["name"] for b in rule.get("backendRefs") or []))


def schema_problems(route: dict[str, Any]) -> list[str]:
    """What the API server's standard-channel schema and CEL rules would refuse in the route's rules."""
    s = FACTS["schema"]
    out = []
    pattern = re.compile(s["path_value_pattern"])
    for i, rule in enumerate(route["spec"]["rules"]):
        out += [f"rules[{i}].{k}: unknown field" for k in rule if k not in s["rule_fields"]]
        out += [
            f"rules[{i}].timeouts.{k}: unknown field"
            for k in rule.get("timeouts") or {}
            if k not in s["timeout_fields"]
        ]
        for j, match in enumerate(rule.get("matches") or []):
            where = f"rules[{i}].matches[{j}]"
            out += [f"{where}.{k}: unknown field" for k in match if k not in s["match_fields"]]
            if "method" in match and match["method"] not in FACTS["matching"]["methods"]:
                out.append(f"{where}.method: {match['method']!r} not in the enum")
            path = match.get("path") or {}
            kind, value = path.get("type", "PathPrefix"), path.get("value", "/")
            if kind not in s["path_types"]:
                out.append(f"{where}.path.type: {kind!r}")
                continue
            if kind == "RegularExpression":
                continue
            bad = (
                not value.startswith(s["path_value_must_start_with"])
                or any(x in value for x in s["path_value_must_not_contain"])
                or any(value.endswith(x) for x in s["path_value_must_not_end_with"])
                or not pattern.match(value)
            )
            if bad:
                out.append(f"{where}.path.value: {value!r} refused")
    return out
