"""Group claims are matched exactly as issued: a look-alike of a group grants nothing, whatever its shape."""

from __future__ import annotations

import json
import logging
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from docquery.api.auth.authenticator import JwtVerifier
from docquery.api.auth.claims import StringClaim, group_set, role_set
from docquery.config.settings import AuthSettings
from docquery.core.collection import is_valid_group_name
from docquery.core.domain import AclFilter
from docquery.secrets import FileSecretSource
from tests.support.api_harness import AUDIENCE, ISSUER, JwtIssuer

# Every character a trim or a normalisation would eat: Unicode whitespace, separators, controls, formats.
_INVISIBLE = sorted(
    {
        chr(i)
        for i in range(sys.maxunicode + 1)
        if chr(i).isspace() or unicodedata.category(chr(i)) in {"Cc", "Cf", "Zs", "Zl", "Zp"}
    }
)
invisible = st.sampled_from(_INVISIBLE)
valid_name = st.from_regex(r"[a-z][a-z0-9._-]{0,20}", fullmatch=True)
shapes = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=10,
)


class Tally:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self, n: int) -> None:
        self.count += n


def test_the_class_of_invisible_characters_holds_the_cases_named() -> None:
    for c in ("\u00a0", "\u3000", "\x1f", "\u200b", "\u2028", "\ufeff", "\t", "\x85", " "):
        assert c in _INVISIBLE or unicodedata.category(c) == "Cf"


@given(name=valid_name, c=invisible, where=st.sampled_from(["lead", "trail", "both", "inside"]))
def test_a_group_with_whitespace_or_a_control_grants_nothing(name: str, c: str, where: str) -> None:
    variant = {"lead": c + name, "trail": name + c, "both": c + name + c, "inside": name[:1] + c + name[1:]}[where]
    tally = Tally()
    assert group_set([variant], StringClaim.LIST, tally) == frozenset()
    assert tally.count == 1
    # The ACL filter takes nothing it would have to trim either.
    assert AclFilter.for_groups({variant}).allows_nothing
    assert group_set([name, variant], StringClaim.LIST, Tally()) == {name}


@given(value=st.text(max_size=40))
def test_any_string_in_a_list_is_granted_exactly_when_it_is_a_valid_name(value: str) -> None:
    tally = Tally()
    granted = group_set([value], StringClaim.LIST, tally)
    assert granted == ({value} if is_valid_group_name(value) else set())
    assert tally.count == (0 if granted else 1)


@given(claim=shapes)
def test_every_claim_shape_grants_only_the_valid_strings_of_a_top_level_list(claim: Any) -> None:
    tally = Tally()
    granted = group_set(claim, StringClaim.LIST, tally)
    if isinstance(claim, list):
        valid = {v for v in claim if isinstance(v, str) and is_valid_group_name(v)}
        assert granted == valid
        assert tally.count == sum(1 for v in claim if not (isinstance(v, str) and is_valid_group_name(v)))
    else:
        assert granted == frozenset()
        assert tally.count == (0 if claim is None else 1)


@given(names=st.lists(valid_name, min_size=1, max_size=4), split=st.sampled_from(list(StringClaim)))
def test_a_string_claim_is_split_only_as_configured(names: list[str], split: StringClaim) -> None:
    for sep in (" ", ","):
        claim = sep.join(names)
        granted = group_set(claim, split, Tally())
        if split is StringClaim.LIST:
            assert granted == frozenset()
        elif split is StringClaim.ONE:
            assert granted == ({claim} if is_valid_group_name(claim) else set())
        elif (split is StringClaim.SPACE) == (sep == " "):
            assert granted == set(names)
        else:
            assert granted == ({claim} & set(names) if len(names) == 1 else set())


def test_a_comma_list_with_spaces_is_not_trimmed() -> None:
    tally = Tally()
    assert group_set("eng, hr", StringClaim.COMMA, tally) == {"eng"}
    assert tally.count == 1


@given(role=st.sampled_from(["query", "admin"]), c=invisible)
def test_roles_are_matched_exactly_too(role: str, c: str) -> None:
    assert role not in role_set([c + role, role + c], StringClaim.LIST)
    assert role_set([role], StringClaim.LIST) == {role}


@pytest.fixture(scope="module")
def issuer() -> JwtIssuer:
    return JwtIssuer()


def _verifier(tmp: Path, issuer: JwtIssuer, tally: Tally) -> JwtVerifier:
    (tmp / "jwks.json").write_text(json.dumps(issuer.jwks()))
    settings = AuthSettings(jwt_issuer=ISSUER, jwt_audience=AUDIENCE, jwt_leeway_s=0)
    return JwtVerifier(settings, FileSecretSource(tmp), tally)


@settings(max_examples=30, deadline=None)
@given(name=valid_name, cs=st.lists(invisible, min_size=1, max_size=3))
def test_a_verified_token_grants_only_the_groups_as_issued(
    tmp_path_factory: pytest.TempPathFactory, issuer: JwtIssuer, name: str, cs: list[str]
) -> None:
    tally = Tally()
    verifier = _verifier(tmp_path_factory.mktemp("jwks"), issuer, tally)
    looks_alike = [c + name for c in cs] + [name + c for c in cs]
    principal = verifier.verify(issuer.token(groups=looks_alike))
    assert principal is not None and principal.groups == frozenset()
    assert principal.acl().allows_nothing
    assert tally.count == len(looks_alike)
    assert verifier.verify(issuer.token(groups=[*looks_alike, name])).groups == {name}  # type: ignore[union-attr]


def test_refused_values_are_logged_once_per_issuer_without_the_value(
    tmp_path: Path, issuer: JwtIssuer, caplog: pytest.LogCaptureFixture
) -> None:
    tally = Tally()
    verifier = _verifier(tmp_path, issuer, tally)
    secret_name = "Domain Users-7f3a"
    with caplog.at_level(logging.WARNING, logger="docquery.api.auth.authenticator"):
        for _ in range(3):
            assert verifier.verify(issuer.token(groups=[secret_name, "eng"])).groups == {"eng"}  # type: ignore[union-attr]
    lines = [r.getMessage() for r in caplog.records if "not valid group names" in r.getMessage()]
    assert len(lines) == 1 and ISSUER in lines[0]
    assert "Domain" not in caplog.text and "7f3a" not in caplog.text
    assert tally.count == 3


def test_the_refused_metric_counts_through_the_app(tmp_path: Path, issuer: JwtIssuer) -> None:
    from docquery.api.app import authenticator
    from docquery.api.metrics import Metrics
    from docquery.config.settings import Settings

    (tmp_path / "jwks.json").write_text(json.dumps(issuer.jwks()))
    s = Settings(secrets_dir=tmp_path, auth={"jwt_issuer": ISSUER, "jwt_audience": AUDIENCE})
    metrics = Metrics()
    auth = authenticator(s, FileSecretSource(tmp_path), metrics)
    assert auth.authenticate("Bearer " + issuer.token(groups=["hr\u00a0", " hr", "hr"])) is not None
    assert b"docquery_refused_group_values_total 2.0" in metrics.render()


@given(name=valid_name, c=invisible)
def test_an_api_key_file_with_a_look_alike_group_is_rejected(name: str, c: str) -> None:
    from docquery.api.auth.apikeys import ApiKeyFileError, parse_key_file

    for group in (c + name, name + c, ""):
        entry = {"id": "k", "sha256": "0" * 64, "groups": [group], "roles": ["query"]}
        with pytest.raises(ApiKeyFileError):
            parse_key_file([entry])
    assert parse_key_file([{"id": "k", "sha256": "0" * 64, "groups": [name]}])[0][1].groups == {name}
