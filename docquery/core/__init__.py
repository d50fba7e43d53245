"""The contract: domain types, ports, the collection's payload contract, the error tree.

Imports nothing else of the project (an import-linter contract in pyproject.toml).
"""
