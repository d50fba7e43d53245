"""The web page at ``/``: static assets, sealed sessions, OIDC sign-in, security headers (docs/ui.md)."""
