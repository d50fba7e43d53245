"""The `docquery` commands, one module each (ask, serve, eval, config, audit), each with a ``register(sub)``
that adds its parser; docquery/cli.py registers them. `ingest` is contributed by the ingest package."""
