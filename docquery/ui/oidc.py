"""The page's OpenID Connect client: authorization code with PKCE (S256), refresh, revocation.

The service is the client (backend-for-frontend): the browser only ever carries the authorization
code, once, to ``/ui/oidc/callback``; tokens stay on the server side of a sealed cookie. Endpoints
come from the issuer's discovery document, whose ``issuer`` must be the configured one. Every
endpoint is https, except on a loopback host (a provider on the same machine, as in tests).
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import logging
import secrets
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx

from docquery.config.settings import UiSettings
from docquery.core.errors import DocQueryError
from docquery.secrets import SecretsError, SecretSource

log = logging.getLogger(__name__)

_DISCOVERY_TTL_S = 3600.0
_MAX_RESPONSE_BYTES = 64 * 1024


class OidcError(DocQueryError):
    """The provider could not be used; the message is fixed text (never a token or a provider's body)."""


@dataclass(frozen=True)
class Tokens:
    access_token: str
    refresh_token: str | None


@dataclass(frozen=True)
class Endpoints:
    authorization: str
    token: str
    revocation: str | None


def pkce_pair() -> tuple[str, str]:
    """(verifier, S256 challenge), RFC 7636."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


def _allowed_endpoint(url: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return True
    if parts.scheme != "http" or not parts.hostname:
        return False
    if parts.hostname == "localhost":
        return True
    try:
        return ipaddress.ip_address(parts.hostname).is_loopback
    except ValueError:
        return False


class OidcClient:
    def __init__(self, settings: UiSettings, source: SecretSource) -> None:
        if not (settings.oidc_issuer and settings.oidc_client_id and settings.oidc_redirect_uri):
            raise ValueError("OIDC needs ui.oidc_issuer, ui.oidc_client_id and ui.oidc_redirect_uri")
        self._s = settings
        self.issuer: str = settings.oidc_issuer.rstrip("/")
        self.client_id: str = settings.oidc_client_id
        self.redirect_uri: str = settings.oidc_redirect_uri
        self._source = source
        self._endpoints: Endpoints | None = None
        self._fetched = 0.0

    async def authorization_url(self, state: str, nonce: str, challenge: str) -> str:
        endpoints = await self._discover()
        query = urlencode(
            {
                "response_type": "code",
                "client_id": self.client_id,
                "redirect_uri": self.redirect_uri,
                "scope": " ".join(self._s.oidc_scopes),
                "state": state,
                "nonce": nonce,
                "code_challenge": challenge,
                "code_challenge_method": "S256",
            }
        )
        sep = "&" if "?" in endpoints.authorization else "?"
        return f"{endpoints.authorization}{sep}{query}"

    async def exchange(self, code: str, verifier: str) -> Tokens:
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self.redirect_uri,
            "code_verifier": verifier,
        }
        return await self._token_request(form)

    async def refresh(self, refresh_token: str) -> Tokens:
        tokens = await self._token_request({"grant_type": "refresh_token", "refresh_token": refresh_token})
        # A provider that does not rotate refresh tokens answers without one: the old one stays valid.
        return Tokens(tokens.access_token, tokens.refresh_token or refresh_token)

    async def revoke(self, refresh_token: str) -> None:
        endpoints = await self._discover()
        if endpoints.revocation is None:
            return
        form = {"token": refresh_token, "token_type_hint": "refresh_token"}
        try:
            await self._post(endpoints.revocation, form)
        except OidcError:
            log.info("oidc: the provider did not confirm the revocation of a refresh token")

    async def _token_request(self, form: dict[str, str]) -> Tokens:
        endpoints = await self._discover()
        body = await self._post(endpoints.token, form)
        access, refresh = body.get("access_token"), body.get("refresh_token")
        if not isinstance(access, str) or not access:
            raise OidcError("the provider's token response has no access token")
        return Tokens(access, refresh if isinstance(refresh, str) and refresh else None)

    async def _post(self, url: str, form: dict[str, str]) -> dict[str, Any]:
        auth: httpx.Auth | None = None
        secret = self._client_secret()
        if secret is None:
            form = {**form, "client_id": self.client_id}
        else:
            auth = httpx.BasicAuth(self.client_id, secret)
        try:
            async with httpx.AsyncClient(timeout=self._s.oidc_timeout_s, follow_redirects=False) as client:
                headers = {"Accept": "application/json"}
                if auth is None:
                    response = await client.post(url, data=form, headers=headers)
                else:
                    response = await client.post(url, data=form, auth=auth, headers=headers)
        except httpx.HTTPError as exc:
            raise OidcError(f"the OpenID provider did not answer ({type(exc).__name__})") from None
        if response.status_code != 200:
            # The body may echo a token or a code: only the status is kept.
            raise OidcError(f"the OpenID provider refused the request (HTTP {response.status_code})")
        return _json_object(response)

    def _client_secret(self) -> str | None:
        try:
            value = self._source.get_text(self._s.oidc_client_secret_file)
        except SecretsError:
            return None
        return value.get_secret_value() if value is not None else None

    async def _discover(self) -> Endpoints:
        if self._endpoints is not None and time.monotonic() - self._fetched < _DISCOVERY_TTL_S:
            return self._endpoints
        url = f"{self.issuer}/.well-known/openid-configuration"
        try:
            async with httpx.AsyncClient(timeout=self._s.oidc_timeout_s, follow_redirects=False) as client:
                response = await client.get(url, headers={"Accept": "application/json"})
        except httpx.HTTPError as exc:
            raise OidcError(f"the OpenID provider's discovery document did not load ({type(exc).__name__})") from None
        if response.status_code != 200:
            raise OidcError(f"the OpenID provider's discovery document answered HTTP {response.status_code}")
        doc = _json_object(response)
        if str(doc.get("issuer", "")).rstrip("/") != self.issuer:
            raise OidcError("the discovery document names another issuer than ui.oidc_issuer")
        auth_url, token_url, revoke_url = (
            doc.get("authorization_endpoint"),
            doc.get("token_endpoint"),
            doc.get("revocation_endpoint"),
        )
        if not (isinstance(auth_url, str) and _allowed_endpoint(auth_url)):
            raise OidcError("the discovery document has no usable authorization_endpoint (https)")
        if not (isinstance(token_url, str) and _allowed_endpoint(token_url)):
            raise OidcError("the discovery document has no usable token_endpoint (https)")
        revocation = revoke_url if isinstance(revoke_url, str) and _allowed_endpoint(revoke_url) else None
        self._endpoints = Endpoints(auth_url, token_url, revocation)
        self._fetched = time.monotonic()
        return self._endpoints


def _json_object(response: httpx.Response) -> dict[str, Any]:
    if len(response.content) > _MAX_RESPONSE_BYTES:
        raise OidcError("the OpenID provider's answer is too large")
    try:
        body = response.json()
    except ValueError:
        raise OidcError("the OpenID provider's answer is not JSON") from None
    if not isinstance(body, dict):
        raise OidcError("the OpenID provider's answer is not a JSON object")
    return body
