"""Generators behind the Generator port: the vLLM/OpenAI-compatible chat client and the extractive fallback."""
