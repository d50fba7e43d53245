"""Moved to tests/support/fakes.py; this re-export keeps ``from tests.fakes import ...`` working."""

from tests.support.fakes import AsyncHashEmbedder, HashEmbedder

__all__ = ["AsyncHashEmbedder", "HashEmbedder"]
