"""Helpers shared by test modules (fakes, fixtures builders, stand-in servers); tests import from here."""
