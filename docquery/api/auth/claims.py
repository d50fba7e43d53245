"""Groups and roles from a verified JWT, exactly as the identity provider issued them.

A group value is matched against document ACLs byte for byte: nothing is trimmed, case-folded or
normalised, so an IdP group ``" hr"`` or ``"hr\\u00a0"`` is not ``hr``. A value that is not a group name
by the ingest's rule (:func:`docquery.core.collection.is_valid_group_name`: whitespace, controls, empty,
over 128 characters) grants nothing, since no document can carry it and a look-alike must not match one.

A string claim is split only as ``auth.jwt_groups_string`` says; the default (``list``) takes a JSON
list alone, so a provider that sends one group as a string, or a space-separated string, grants nothing
until the operator says how to read it.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any

from docquery.core.collection import is_valid_group_name


class StringClaim(StrEnum):
    """How a groups claim that is a string, not a list, is read."""

    LIST = "list"  # refused: only a JSON list grants groups
    ONE = "one"  # the whole string is one group
    SPACE = "space"  # split on U+0020 only (OAuth `scope` style)
    COMMA = "comma"  # split on "," only; "a, b" gives "a" and " b", and " b" grants nothing


# Called with the number of refused values; never with the values themselves.
Refused = Callable[[int], None]


def claim_at(claims: dict[str, Any], path: str) -> Any:
    """The value at a dotted path (``realm_access.roles``), or None."""
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _items(value: Any, split: StringClaim) -> tuple[list[Any], int]:
    """The claim's candidate values, and how many parts of it were refused for their shape."""
    if value is None:
        return [], 0
    if isinstance(value, list):
        return value, 0
    if isinstance(value, str):
        if split is StringClaim.ONE:
            return [value], 0
        if split is StringClaim.SPACE:
            return value.split(" "), 0
        if split is StringClaim.COMMA:
            return value.split(","), 0
    return [], 1  # a number, an object, a bool, or a string the setting does not split


def group_set(value: Any, split: StringClaim, refused: Refused) -> frozenset[str]:
    """The groups a claim grants: each value as issued, only those that are valid group names."""
    items, bad = _items(value, split)
    groups = {v for v in items if isinstance(v, str) and is_valid_group_name(v)}
    bad += sum(1 for v in items if not (isinstance(v, str) and is_valid_group_name(v)))
    if bad:
        refused(bad)
    return frozenset(groups)


def role_set(value: Any, split: StringClaim) -> frozenset[str]:
    """Roles are read like groups and compared exactly too: ``" admin"`` is not ``admin``."""
    items, _ = _items(value, split)
    return frozenset(v for v in items if isinstance(v, str) and v)
