"""Moved to tests/support/standins/; these re-exports keep the old import paths working."""
