"""Embedders behind the Embedder port: the bundled local model, an OpenAI-compatible server, and the lazy loader."""
