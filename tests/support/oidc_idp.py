"""A real OpenID provider on loopback for the page's sign-in tests: oidc-provider-mock (authlib), in a thread.

Configured as many providers are for an API (Keycloak, Entra ID): its access tokens are JWTs
for the API's audience carrying the user's ``groups`` and ``roles``, signed with a key whose JWKS
the service gets in its secrets dir. The token generator is authlib's documented
``OAUTH2_ACCESS_TOKEN_GENERATOR`` hook; everything else (discovery, the authorization form,
PKCE, the code and refresh grants, user claims set through ``PUT /users/<sub>``) is the package's.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import flask
import httpx
import jwt
import pytest
import werkzeug.serving
from cryptography.hazmat.primitives.asymmetric import rsa
from oidc_provider_mock import User, init_app

# The provider's own deprecation warnings (authlib's, inside oidc-provider-mock), which the suite's
# "warnings are errors" would turn into a 500 from its token endpoint: marks for the modules using it.
__all__ = ["IDP_WARNINGS", "Idp", "User", "running_idp", "ui_oidc_settings"]
IDP_WARNINGS = [
    pytest.mark.filterwarnings("ignore:authlib.jose module is deprecated"),
    pytest.mark.filterwarnings("ignore:get_jwt_config:DeprecationWarning"),
]
AUDIENCE = "docquery-api"
CLIENT_ID = "docquery-page"
KID = "idp-key-1"


@dataclass
class Idp:
    issuer: str
    key: rsa.RSAPrivateKey
    token_requests: list[dict[str, str]]  # the form of every token request, as the provider received it

    def jwks(self) -> dict[str, Any]:
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        jwk.update({"kid": KID, "use": "sig", "alg": "RS256"})
        return {"keys": [jwk]}

    def set_user(self, sub: str, claims: dict[str, object]) -> None:
        httpx.put(f"{self.issuer}/users/{sub}", json=claims).raise_for_status()

    def revoke_user(self, sub: str) -> None:
        httpx.post(f"{self.issuer}/users/{sub}/revoke-tokens").raise_for_status()


@contextmanager
def running_idp(users: Sequence[User], token_max_age_s: int = 300) -> Iterator[Idp]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    # Rooted in the package, as its own app() is, so that its templates (the authorization form) are found.
    app = flask.Flask("oidc_provider_mock")
    holder: dict[str, str] = {}

    def access_token(client: Any, grant_type: str, user: User, scope: str) -> str:
        now = int(time.time())
        claims = {
            "iss": holder["issuer"],
            "aud": AUDIENCE,
            "sub": user.sub,
            "iat": now,
            "exp": now + token_max_age_s,
            "groups": user.claims.get("groups", []),
            "roles": user.claims.get("roles", []),
        }
        return jwt.encode(claims, key, algorithm="RS256", headers={"kid": KID})

    token_requests: list[dict[str, str]] = []

    def record() -> None:
        if flask.request.path == "/oauth2/token":
            token_requests.append(dict(flask.request.form))

    app.before_request(record)
    app.config["OAUTH2_ACCESS_TOKEN_GENERATOR"] = access_token
    init_app(app, user_claims=users, access_token_max_age=timedelta(seconds=token_max_age_s))
    server = werkzeug.serving.make_server("127.0.0.1", 0, app, threaded=True)
    holder["issuer"] = f"http://127.0.0.1:{server.server_port}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield Idp(holder["issuer"], key, token_requests)
    finally:
        server.shutdown()
        thread.join(2)
        server.server_close()


def ui_oidc_settings(idp: Idp, redirect_uri: str) -> dict[str, Any]:
    """The service's settings for this provider (pass as overrides of the api harness or as env)."""
    return {
        "auth": {"jwt_issuer": idp.issuer, "jwt_audience": AUDIENCE, "jwt_leeway_s": 0},
        "ui": {"oidc_issuer": idp.issuer, "oidc_client_id": CLIENT_ID, "oidc_redirect_uri": redirect_uri},
    }
