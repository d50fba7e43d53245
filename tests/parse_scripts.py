"""Moved to tests/support/parse_scripts.py; this re-export keeps the old import path working."""

from tests.support.parse_scripts import CANARY, Scripted, real_config

__all__ = ["CANARY", "Scripted", "real_config"]
