"""Authentication: API keys and OIDC JWTs, together."""
