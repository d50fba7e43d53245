"""Moved to tests/support/standins/openai_server.py; this re-export keeps the old path working
(``python -m tests.standins.openai_server`` included)."""

from tests.support.standins.openai_server import (
    DEFAULT_KEY,
    DEFAULT_REPLY,
    DropConnection,
    StandInConfig,
    StandInOpenAIServer,
    Stats,
    build_app,
    hash_vector,
    main,
)

__all__ = [
    "DEFAULT_KEY",
    "DEFAULT_REPLY",
    "DropConnection",
    "StandInConfig",
    "StandInOpenAIServer",
    "Stats",
    "build_app",
    "hash_vector",
    "main",
]

if __name__ == "__main__":
    raise SystemExit(main())
