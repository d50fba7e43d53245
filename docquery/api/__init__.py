"""The FastAPI query service: app factory, auth, routes, errors, limits, audit, metrics."""
