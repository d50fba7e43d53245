"""Authentication: API keys (hashed, constant-time) and OIDC JWTs (JWKS file).

``Authorization: Bearer <token>``:

* an API key is hashed and matched against ``api-keys.json`` by
  :class:`docquery.api.auth.apikeys.ApiKeyVerifier` (only hashes are stored, compared in
  constant time, hot-reloaded);
* a JWT is verified against ``jwks.json`` from the secrets dir: signature
  (algorithms from settings only; never ``none``, never HS* with a public key),
  issuer, audience, expiry and not-before. Groups and roles come from the
  configured claims (dotted paths allowed, e.g. ``realm_access.roles``), as issued
  (:mod:`docquery.api.auth.claims`).

Failures: 401 when the credential is missing or invalid (the caller is
unknown), 403 when it is valid but lacks the role (the caller is known and
refused). The JWKS is re-read when its file changes, like every secret.
Fail closed: no auth configuration means every request is 401, and the prod
profile refuses to start at all.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import jwt

from docquery.api.auth.apikeys import ApiKeyVerifier
from docquery.api.auth.claims import Refused, StringClaim, claim_at, group_set, role_set
from docquery.config.settings import AuthSettings
from docquery.core.domain import Principal
from docquery.secrets import SecretsError, SecretSource

log = logging.getLogger("docquery.api.auth.authenticator")

ROLE_QUERY = "query"
ROLE_ADMIN = "admin"
ROLE_INGEST = "ingest"  # may upload documents (POST /v1/documents)
# Asymmetric only: an HS* algorithm would let anyone holding the public JWKS forge tokens.
MAX_HEADER_CHARS = 16384  # JWTs with many groups are large; API keys are bounded again by the verifier
_ALLOWED_ALGS = {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}


class JwtVerifier:
    """Verifies OIDC JWTs against a JWKS file read through the secret source."""

    def __init__(self, settings: AuthSettings, source: SecretSource, refused: Refused | None = None) -> None:
        self._s = settings
        self._source = source
        self._algs = [a for a in settings.jwt_algorithms if a in _ALLOWED_ALGS]
        self._split = StringClaim(settings.jwt_groups_string)
        self._refused = refused or (lambda n: None)
        self._warned: set[str] = set()  # issuers already logged for refused group values
        self._lock = threading.Lock()
        self._version: int | object | None = object()
        self._keys: dict[str, Any] = {}  # kid -> PyJWK ("" when the JWKS has one key without kid)

    def configured(self) -> bool:
        return bool(self._s.jwt_issuer and self._s.jwt_audience and self._algs and self._current_keys())

    def verify(self, token: str) -> Principal | None:
        claims = self._claims(token)
        if claims is None:
            return None
        sub = claims.get("sub")
        if not isinstance(sub, str) or not sub:
            return None
        issuer = str(claims.get("iss"))
        groups = claim_at(claims, self._s.jwt_groups_claim)
        tenant = claim_at(claims, self._s.jwt_tenant_claim) if self._s.jwt_tenant_claim else None
        return Principal(
            id=f"jwt:{sub}",
            tenant=tenant if isinstance(tenant, str) and tenant else None,
            groups=group_set(groups, self._split, lambda n: self._refuse(issuer, n)),
            roles=role_set(claim_at(claims, self._s.jwt_roles_claim), self._split),
            # Read as the groups claim is: a value that is not a group name grants nothing.
            may_grant=group_set(claim_at(claims, self._s.jwt_may_grant_claim), self._split, lambda n: None),
        )

    def _refuse(self, issuer: str, count: int) -> None:
        self._refused(count)
        if issuer not in self._warned:
            self._warned.add(issuer)  # once per issuer: a log line per request would flood, the metric counts
            log.warning(
                "jwt from issuer %r carries %s values that are not valid group names (or a %s claim that is not "
                "a list); they grant nothing (docs/api.md, 'Groups and the ACL')",
                issuer,
                self._s.jwt_groups_claim,
                self._s.jwt_groups_claim,
            )

    def _claims(self, token: str) -> dict[str, Any] | None:
        keys = self._current_keys() if self._s.jwt_issuer and self._s.jwt_audience else {}
        if not keys:
            return None
        try:
            header = jwt.get_unverified_header(token)
            alg = header.get("alg")
            kid = header.get("kid")
            key = keys.get(str(kid)) if kid is not None else (next(iter(keys.values())) if len(keys) == 1 else None)
            if alg not in self._algs or key is None:
                return None
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key,
                algorithms=[alg],
                audience=self._s.jwt_audience,
                issuer=self._s.jwt_issuer,
                leeway=self._s.jwt_leeway_s,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.PyJWTError as exc:
            # The class name says why (expired, bad audience...); the token never reaches a log.
            log.info("jwt rejected: %s", type(exc).__name__)
            return None
        exp = claims.get("exp")  # required and checked as a number by decode
        if not isinstance(exp, int | float) or exp - time.time() > self._s.jwt_max_lifetime_s + self._s.jwt_leeway_s:
            log.info("jwt rejected: valid for longer than auth.jwt_max_lifetime_s")
            return None
        return claims

    def _current_keys(self) -> dict[str, Any]:
        try:
            version = self._source.version(self._s.jwks_file)
        except SecretsError as exc:
            log.error("jwks file %s unavailable (%s); refusing every JWT", self._s.jwks_file, exc)
            return {}
        if version == self._version:
            return self._keys
        with self._lock:
            if version != self._version:
                self._keys = self._load(version)
                self._version = version
            return self._keys

    def _load(self, version: int | None) -> dict[str, Any]:
        if version is None:
            return {}
        try:
            data = self._source.get_json(self._s.jwks_file)
            if not isinstance(data, dict):
                raise TypeError("jwks must be an object")
            jwks = jwt.PyJWKSet.from_dict(data)
        except (SecretsError, jwt.PyJWTError, ValueError, TypeError, KeyError) as exc:
            log.error("jwks file %s rejected (%s); refusing every JWT", self._s.jwks_file, type(exc).__name__)
            return {}
        keys: dict[str, Any] = {}
        for k in jwks.keys:
            keys[str(k.key_id) if k.key_id is not None else ""] = k
        log.info("jwks file %s loaded: %d keys (version %s)", self._s.jwks_file, len(keys), version)
        return keys


def looks_like_jwt(token: str) -> bool:
    return token.count(".") == 2 and token.startswith("eyJ")


class Authenticator:
    """Turns a bearer token into a verified :class:`Principal`, or None."""

    def __init__(self, settings: AuthSettings, source: SecretSource, refused: Refused | None = None) -> None:
        """``refused``: told how many group values a token carried that grant nothing (the metric)."""
        self.api_keys = ApiKeyVerifier(source, settings.api_keys_file)
        self.jwt = JwtVerifier(settings, source, refused)

    def configured(self) -> bool:
        """True when at least one method can accept a credential (for the prod start check)."""
        return self.api_keys.key_count() > 0 or self.jwt.configured()

    def authenticate(self, authorization: str | None) -> Principal | None:
        token = _bearer(authorization)
        if token is None:
            return None
        if looks_like_jwt(token):
            return self.jwt.verify(token)
        entry = self.api_keys.verify(token)
        if entry is None:
            return None
        return Principal(
            id=f"key:{entry.id}", groups=entry.groups, roles=entry.roles, tenant=entry.tenant, may_grant=entry.may_grant
        )


def _bearer(header: str | None) -> str | None:
    if not header or len(header) > MAX_HEADER_CHARS:
        return None
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token
