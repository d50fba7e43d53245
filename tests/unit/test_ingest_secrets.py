"""Credentials never become searchable: generated real-looking secrets per class are flagged
``secret``; documentation placeholders and look-alikes are not; files known to hold credentials are
skipped by name."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.prepare.secrets import SECRET, entropy, scan_secrets, secret_file

_CONSONANTS = "bcdfghjkmnpqrstvwzBCDFGHJKMNPQRSTVWZ23456789"  # no vowels: no word appears by chance
_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def _random(alphabet: str, size: int) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, min_size=size, max_size=size).filter(
        lambda v: entropy(v.lower()) >= 3.3 and "xxxx" not in v.lower()
    )


_aws = _random("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16).map(lambda v: "AKIA" + v)
_github = _random(_CONSONANTS, 36).map(lambda v: "ghp_" + v)
_bearer = _random(_CONSONANTS + "-_", 40)
_password = _random(_CONSONANTS + "!%+", 16)
_wrap = st.sampled_from(["{}", "  {}", "Config:\n{}\nEnd of config."])


@settings(max_examples=40, deadline=None)
@given(key=_aws, line=st.sampled_from(["aws_access_key_id = {}", "export AWS_ACCESS_KEY_ID={}", "key: {}"]), wrap=_wrap)
def test_cloud_access_keys_are_flagged(key: str, line: str, wrap: str) -> None:
    assert scan_secrets(wrap.format(line.format(key))) == {SECRET}


@settings(max_examples=40, deadline=None)
@given(token=_github, line=st.sampled_from(["token: {}", "GITHUB_TOKEN={}", "git clone https://{}@github.com/o/r"]))
def test_api_tokens_are_flagged(token: str, line: str) -> None:
    assert scan_secrets(line.format(token)) == {SECRET}


@settings(max_examples=40, deadline=None)
@given(token=_bearer, header=st.sampled_from(["Authorization: Bearer {}", "curl -H 'Authorization: Bearer {}' x"]))
def test_bearer_tokens_are_flagged(token: str, header: str) -> None:
    assert scan_secrets(header.format(token)) == {SECRET}


@settings(max_examples=40, deadline=None)
@given(
    password=_password,
    line=st.sampled_from(["password: {}", 'DB_PASSWORD = "{}"', "db_password={}", "secret_key: '{}'"]),
    wrap=_wrap,
)
def test_passwords_in_config_like_text_are_flagged(password: str, line: str, wrap: str) -> None:
    assert scan_secrets(wrap.format(line.format(password))) == {SECRET}


@settings(max_examples=40, deadline=None)
@given(
    password=_random(_CONSONANTS, 14),
    scheme=st.sampled_from(["postgres", "mysql", "mongodb+srv", "redis", "amqp"]),
    user=st.sampled_from(["app", "svc_report", "admin2"]),
)
def test_connection_strings_with_passwords_are_flagged(password: str, scheme: str, user: str) -> None:
    assert scan_secrets(f"DATABASE_URL={scheme}://{user}:{password}@db.internal:5432/prod") == {SECRET}


@settings(max_examples=30, deadline=None)
@given(
    body=st.lists(_random(_B64, 64), min_size=3, max_size=8),
    kind=st.sampled_from(["RSA PRIVATE KEY", "PRIVATE KEY", "OPENSSH PRIVATE KEY", "EC PRIVATE KEY"]),
    split=st.booleans(),
)
def test_pem_private_keys_are_flagged_even_split_across_chunks(body: list[str], kind: str, split: bool) -> None:
    key = f"-----BEGIN {kind}-----\n" + "\n".join(body) + f"\n-----END {kind}-----"
    assert scan_secrets(f"Deploy key:\n{key}\n") == {SECRET}
    if split:  # the chunker cut it: the header's chunk and the body's chunk are each flagged
        assert scan_secrets(f"-----BEGIN {kind}-----\n{body[0]}") == {SECRET}
        assert scan_secrets("\n".join(body)) == {SECRET}


# Documentation examples and text that only looks like credentials: they stay indexed.
LOOK_ALIKES = [
    "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "Connect with postgres://user:password@host:5432/db",
    "DATABASE_URL=postgres://<user>:<password>@<host>/<db>",
    "Authorization: Bearer <your-token>",
    "Authorization: Bearer ${API_TOKEN}",
    "GITHUB_TOKEN={{ secrets.GITHUB_TOKEN }}",
    "password: changeme",
    "password: ********",
    "api_key: your-api-key-here",
    "aws_access_key_id = AKIAXXXXXXXXXXXXXXXX",
    "A key file starts with -----BEGIN RSA PRIVATE KEY----- and ends with the matching END line.",
    "-----BEGIN CERTIFICATE-----\n"
    + "\n".join(["MIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJ"] * 3),
    "The token bucket algorithm limits requests; each API key maps to a bucket.",
    "Enter your password and press OK. Passwords expire after 90 days.",
    "Use the secret_key setting to sign sessions (see the configuration guide).",
    "The study enrolled 1,204 patients; mortality fell by 12 percent.",
]


@pytest.mark.parametrize("text", LOOK_ALIKES)
def test_placeholders_and_look_alikes_stay_indexed(text: str) -> None:
    assert scan_secrets(text) == frozenset()


SECRET_FILES = ["id_rsa", "id_ed25519", "id_ecdsa", "server.pem", "tls.key", "client.p12", "store.pfx", ".env",
                ".env.production", ".netrc", ".pgpass", "credentials", "kubeconfig", "prod.kubeconfig"]  # fmt: skip
ORDINARY_FILES = ["id_rsa.pub", "identity.md", "keynote.txt", "credentials-guide.md", "env.md", "README", "key.txt"]


@pytest.mark.parametrize("name", SECRET_FILES)
def test_files_known_to_hold_secrets_are_skipped_by_name(name: str) -> None:
    reason = secret_file(name)
    assert reason is not None and reason.startswith("holds credentials")


@pytest.mark.parametrize("name", ORDINARY_FILES)
def test_ordinary_names_are_read(name: str) -> None:
    assert secret_file(name) is None
