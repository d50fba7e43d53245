"""Offline evaluation of the subset of Kyverno validate rules that policies/kyverno uses.

No Kyverno CLI installs here, so admission behaviour is emulated for what the
bundle's policies use (Kyverno docs, "Validate Rules" / "Preconditions" /
"JMESPath" for kyverno 1.13+): match on kind and namespace; preconditions and deny
conditions (any/all, Equals, NotEquals, AnyIn, AnyNotIn, AllIn, GreaterThan,
LessThan) with ``{{ }}`` JMESPath substitution, including Kyverno's
``regex_match`` and ``to_upper``; ``foreach`` over a JMESPath list with
``element``; and ``pattern`` with ``=()`` equality anchors, ``()`` conditional
anchors, ``*``/``?`` wildcards, ``|`` alternatives, ``!`` negation and numeric
``>``/``<``. ``podSecurity`` rules are not emulated (reported as "skip").

Runs in the tools venv (jmespath lives there): reads JSON {"policies": [...],
"resources": [...]} on stdin and prints one result per (resource, policy, rule).
"""

from __future__ import annotations

import fnmatch
import json
import re
import sys
from typing import Any

import jmespath
from jmespath import functions


class _KyvernoFunctions(functions.Functions):
    @functions.signature({"types": ["string"]}, {"types": ["string", "number"]})
    def _func_regex_match(self, pattern: str, value: Any) -> bool:
        return re.search(pattern, str(value)) is not None

    @functions.signature({"types": ["string"]})
    def _func_to_upper(self, value: str) -> str:
        return value.upper()


_OPTIONS = jmespath.Options(custom_functions=_KyvernoFunctions())
_VAR = re.compile(r"\{\{(.*?)\}\}", re.S)


def _search(expr: str, ctx: dict[str, Any]) -> Any:
    return jmespath.search(expr.strip(), ctx, options=_OPTIONS)


def substitute(value: Any, ctx: dict[str, Any]) -> Any:
    if isinstance(value, list):
        return [substitute(v, ctx) for v in value]
    if not isinstance(value, str):
        return value
    whole = _VAR.fullmatch(value.strip())
    if whole:
        return _search(whole.group(1), ctx)
    return _VAR.sub(lambda m: str(_search(m.group(1), ctx)), value)


def _as_list(x: Any) -> list[Any]:
    return x if isinstance(x, list) else [x]


def _num(x: Any) -> float:
    return float(x)


def _equals(key: Any, value: Any) -> bool:
    return bool(key == value or (str(key) == str(value) and not isinstance(key, bool | list | dict)))


_OPERATORS = {
    "Equals": _equals,
    "NotEquals": lambda k, v: not _equals(k, v),
    "AnyIn": lambda k, v: any(x in _as_list(v) for x in _as_list(k)),
    "AnyNotIn": lambda k, v: any(x not in _as_list(v) for x in _as_list(k)),
    "AllIn": lambda k, v: all(x in _as_list(v) for x in _as_list(k)),
    "GreaterThan": lambda k, v: _num(k) > _num(v),
    "LessThan": lambda k, v: _num(k) < _num(v),
}


def _condition(cond: dict[str, Any], ctx: dict[str, Any]) -> bool:
    op = _OPERATORS.get(cond["operator"])
    if op is None:
        raise ValueError(f"operator {cond['operator']} not emulated")
    return bool(op(substitute(cond["key"], ctx), substitute(cond.get("value"), ctx)))


def conditions_hold(block: Any, ctx: dict[str, Any]) -> bool:
    if isinstance(block, list):
        return all(_condition(c, ctx) for c in block)
    ok = True
    if "any" in block:
        ok = ok and any(_condition(c, ctx) for c in block["any"])
    if "all" in block:
        ok = ok and all(_condition(c, ctx) for c in block["all"])
    return ok


# ---- patterns ---------------------------------------------------------------------


def _scalar(pattern: Any, value: Any) -> bool:  # noqa: PLR0911 - one return per pattern form
    if isinstance(pattern, bool) or isinstance(value, bool):
        return pattern == value or str(pattern).lower() == str(value).lower()
    if isinstance(pattern, int | float):
        return value == pattern
    text = str(pattern)
    if "|" in text:
        return any(_scalar(alt.strip(), value) for alt in text.split("|"))
    if text.startswith("!"):
        return not _scalar(text[1:], value)
    m = re.fullmatch(r"(>=|<=|>|<)\s*(-?\d+(?:\.\d+)?)", text)
    if m and isinstance(value, int | float):
        a, b = float(value), float(m.group(2))
        return {">": a > b, "<": a < b, ">=": a >= b, "<=": a <= b}[m.group(1)]
    if value is None:
        return False
    return fnmatch.fnmatchcase(str(value), text)


def _anchor(key: str) -> tuple[str, str]:
    for prefix in ("=(", "X(", "^(", "+(", "<("):
        if key.startswith(prefix) and key.endswith(")"):
            return prefix[0], key[2:-1]
    if key.startswith("(") and key.endswith(")"):
        return "(", key[1:-1]
    return "", key


def pattern_matches(pattern: Any, value: Any) -> bool:  # noqa: PLR0911, PLR0912 - one branch per anchor kind
    if isinstance(pattern, dict):
        if not isinstance(value, dict):
            return False
        # Conditional anchors: when one does not hold, this element is skipped (passes).
        for key, sub in pattern.items():
            kind, name = _anchor(key)
            if kind == "(" and (name not in value or not pattern_matches(sub, value[name])):
                return True
        for key, sub in pattern.items():
            kind, name = _anchor(key)
            if kind == "(":
                continue
            if kind == "=":
                if name in value and not pattern_matches(sub, value[name]):
                    return False
            elif kind == "X":
                if name in value:
                    return False
            elif kind == "":
                if name not in value or not pattern_matches(sub, value[name]):
                    return False
            else:
                raise ValueError(f"anchor {key} not emulated")
        return True
    if isinstance(pattern, list):
        if not isinstance(value, list):
            return False
        return all(any(pattern_matches(p, v) for p in pattern) for v in value)
    return _scalar(pattern, value)


# ---- rules ------------------------------------------------------------------------


def _matches(block: dict[str, Any], resource: dict[str, Any]) -> bool:
    for alt in block.get("any") or []:
        res = alt["resources"]
        if resource.get("kind") not in res.get("kinds", []):
            continue
        namespaces = res.get("namespaces")
        if namespaces and resource.get("metadata", {}).get("namespace") not in namespaces:
            continue
        return True
    return False


def evaluate_rule(rule: dict[str, Any], resource: dict[str, Any]) -> str:  # noqa: PLR0911 - one result per rule form
    """ "pass", "fail", "skip" (not matched, or precondition false, or podSecurity)."""
    if not _matches(rule["match"], resource):
        return "skip"
    ctx: dict[str, Any] = {"request": {"object": resource, "operation": "CREATE"}}
    if "preconditions" in rule and not conditions_hold(rule["preconditions"], ctx):
        return "skip"
    v = rule["validate"]
    if "podSecurity" in v:
        return "skip"
    if "pattern" in v:
        return "pass" if pattern_matches(v["pattern"], resource) else "fail"
    if "deny" in v:
        return "fail" if conditions_hold(v["deny"].get("conditions", {}), ctx) else "pass"
    if "foreach" in v:
        for fe in v["foreach"]:
            for element in _as_list(_search(fe["list"], ctx) or []):
                ectx = {**ctx, "element": element}
                if "preconditions" in fe and not conditions_hold(fe["preconditions"], ectx):
                    continue
                if "deny" in fe and conditions_hold(fe["deny"].get("conditions", {}), ectx):
                    return "fail"
                if "pattern" in fe and not pattern_matches(fe["pattern"], element):
                    return "fail"
        return "pass"
    raise ValueError(f"rule {rule['name']}: validate type not emulated")


def main() -> None:
    data = json.load(sys.stdin)
    out = []
    for resource in data["resources"]:
        for policy in data["policies"]:
            for rule in policy["spec"]["rules"]:
                out.append(
                    {
                        "resource": resource["metadata"]["name"],
                        "policy": policy["metadata"]["name"],
                        "rule": rule["name"],
                        "result": evaluate_rule(rule, resource),
                    }
                )
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
