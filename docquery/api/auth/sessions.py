"""Page sessions: what the sealed cookie holds, and the Principal it stands for on each request.

A session is a sealed cookie (``docquery.ui.seal``), so every replica reads it without a shared
store. It never holds an API key: an API-key session keeps the key's SHA-256 digest and looks it up
in the key file on every request, so a key rotated out or removed ends its sessions at the next one.
An OIDC session keeps the provider's access and refresh tokens (sealed: the browser cannot read
them); its Principal comes from the access token, verified as an API bearer token is, and its
groups are fetched again through the refresh token at least every ``ui.oidc_recheck_s``.
Each session has its own CSRF token, which every non-GET request must echo in ``X-CSRF-Token``.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from docquery.api.auth.authenticator import Authenticator
from docquery.config.settings import Settings, UiSettings
from docquery.core.domain import Principal
from docquery.secrets import SecretSource
from docquery.ui.oidc import OidcClient, OidcError
from docquery.ui.seal import Sealer

log = logging.getLogger(__name__)

SESSION_COOKIE = "dq_session"
OIDC_COOKIE = "dq_oidc"
CSRF_HEADER = "x-csrf-token"
SESSION_PURPOSE = "session"
OIDC_PURPOSE = "oidc-state"
OIDC_STATE_TTL_S = 600.0


@dataclass(frozen=True)
class Session:
    kind: Literal["key", "oidc"]
    csrf: str
    ends: float  # absolute end, whatever is refreshed
    key_digest: str = ""  # hex SHA-256 of the API key (kind "key")
    access_token: str = ""  # kind "oidc"
    refresh_token: str = ""
    checked: float = 0.0  # when the groups were last fetched from the provider

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> Session | None:
        try:
            session = cls(
                kind=payload["kind"],
                csrf=str(payload["csrf"]),
                ends=float(payload["ends"]),
                key_digest=str(payload.get("key_digest", "")),
                access_token=str(payload.get("access_token", "")),
                refresh_token=str(payload.get("refresh_token", "")),
                checked=float(payload.get("checked", 0.0)),
            )
        except (KeyError, TypeError, ValueError):
            return None
        return session if session.kind in ("key", "oidc") and session.csrf else None


@dataclass(frozen=True)
class Resolved:
    principal: Principal
    session: Session
    cookie: str | None  # a resealed session to send back (after a group re-check), else None


class Sessions:
    def __init__(self, settings: UiSettings, sealer: Sealer, auth: Authenticator, oidc: OidcClient | None) -> None:
        self.settings = settings
        self.sealer = sealer
        self.auth = auth
        self.oidc = oidc

    # -- starting ----------------------------------------------------------------------------
    def start_with_key(self, api_key: str) -> tuple[Principal, Session, str] | None:
        """Exchange an API key, once, for a session; None when the key is not valid."""
        entry = self.auth.api_keys.verify(api_key)
        if entry is None:
            return None
        digest = hashlib.sha256(api_key.encode("utf-8")).hexdigest()
        session = Session("key", secrets.token_urlsafe(32), self._ends(), key_digest=digest)
        principal = Principal(
            id=f"key:{entry.id}", groups=entry.groups, roles=entry.roles, tenant=entry.tenant, may_grant=entry.may_grant
        )
        return principal, session, self.seal(session)

    def start_with_tokens(self, access_token: str, refresh_token: str | None) -> tuple[Principal, Session, str] | None:
        principal = self.auth.jwt.verify(access_token)
        if principal is None:
            return None
        session = Session(
            "oidc",
            secrets.token_urlsafe(32),
            self._ends(),
            access_token=access_token,
            refresh_token=refresh_token or "",
            checked=self.sealer.now(),
        )
        return principal, session, self.seal(session)

    def seal(self, session: Session) -> str:
        return self.sealer.seal(SESSION_PURPOSE, asdict(session), max(1.0, session.ends - self.sealer.now()))

    def _ends(self) -> float:
        return self.sealer.now() + self.settings.session_max_age_s

    # -- each request ------------------------------------------------------------------------
    def open(self, cookie: str | None) -> Session | None:
        payload = self.sealer.open(SESSION_PURPOSE, cookie)
        session = Session.from_payload(payload) if payload is not None else None
        if session is None or session.ends <= self.sealer.now():
            return None
        return session

    async def resolve(self, cookie: str | None) -> Resolved | None:
        """The session's Principal now, or None: tampered, expired, key removed, groups no longer given."""
        session = self.open(cookie)
        if session is None:
            return None
        if session.kind == "key":
            try:
                entry = self.auth.api_keys.verify_digest(bytes.fromhex(session.key_digest))
            except ValueError:
                return None
            if entry is None:
                return None
            return Resolved(
                Principal(
                    id=f"key:{entry.id}",
                    groups=entry.groups,
                    roles=entry.roles,
                    tenant=entry.tenant,
                    may_grant=entry.may_grant,
                ),
                session,
                None,
            )
        return await self._resolve_oidc(session)

    async def _resolve_oidc(self, session: Session) -> Resolved | None:
        now = self.sealer.now()
        principal = self.auth.jwt.verify(session.access_token)
        if principal is not None and now - session.checked < self.settings.oidc_recheck_s:
            return Resolved(principal, session, None)
        # Time to ask the provider again (or the access token expired): the refresh token either
        # brings the groups as they are now, or the session ends.
        if self.oidc is None or not session.refresh_token:
            return None
        try:
            tokens = await self.oidc.refresh(session.refresh_token)
        except OidcError as exc:
            log.info("oidc session ended: %s", exc)
            return None
        principal = self.auth.jwt.verify(tokens.access_token)
        if principal is None:
            return None
        renewed = replace(
            session, access_token=tokens.access_token, refresh_token=tokens.refresh_token or "", checked=now
        )
        return Resolved(principal, renewed, self.seal(renewed))

    async def end(self, session: Session) -> None:
        if session.kind == "oidc" and session.refresh_token and self.oidc is not None:
            await self.oidc.revoke(session.refresh_token)


def csrf_ok(session: Session, header: str | None) -> bool:
    return header is not None and hmac.compare_digest(session.csrf.encode(), header.encode("utf-8", "replace"))


def build_sessions(
    settings: Settings, source: SecretSource, auth: Authenticator, clock: Callable[[], float] = time.time
) -> Sessions:
    ui = settings.ui
    # Only dev may make a cookie key at start: prod's replicas must share one from the secret source.
    sealer = Sealer(source, ui.session_keys_file, dev_fallback=not settings.is_prod, clock=clock)
    oidc = OidcClient(ui, source) if ui.oidc_issuer else None
    return Sessions(ui, sealer, auth, oidc)
